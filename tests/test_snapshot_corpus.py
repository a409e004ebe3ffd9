"""Every snapshot under tests/fixtures/snapshots is replayed through the probes and checks and held
against the verdicts written for it (expected/<id>.json) before envcheck ever ran on it.

A machine anyone captures with ``envcheck snapshot`` (or builds from a posted output in build.py)
becomes a test case by dropping it into corpus/ with its expected verdicts.
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

from envcheck import snapshot
from envcheck.checks import evaluate
from envcheck.model import Check
from envcheck.probes.collect import collect
from envcheck.render.checktext import localized
from envcheck.render.i18n import catalog, language

HERE = Path(__file__).parent / "fixtures" / "snapshots"
SNAPSHOTS = sorted((HERE / "corpus").glob("*.json")) + sorted((HERE / "fixtures").glob("*.json"))
CORPUS_GKE = HERE / "corpus" / "linux-gke-driver-470-torch-cu121.json"


def verdicts(path: Path) -> dict[str, object]:
    host, nvml = snapshot.replay(snapshot.load(path))
    env = collect(host=host, nvml=nvml, runtime=True, timeout=60)
    return {c.id: c for c in evaluate(env)}


def disagreements(path: Path) -> list[str]:
    expected = json.loads((HERE / "expected" / f"{path.stem}.json").read_text(encoding="utf-8"))
    checks = verdicts(path)
    wanted: dict[str, tuple[str, str | None]] = {}
    for status in ("fail", "warn"):
        for cid, fix in expected[status].items():
            wanted[cid] = (status, fix)
    for cid in expected["pass"]:
        wanted[cid] = ("pass", None)
    out = []
    for cid, (status, fix) in wanted.items():
        c = checks.get(cid)
        if c is None:
            out.append(f"{cid}: expected {status}, but no such check ran")
            continue
        if c.status != status:
            out.append(f"{cid}: expected {status}, got {c.status}: {c.finding} | fix: {c.fix}")
        elif fix is not None and c.fix != fix:
            out.append(f"{cid}: fix differs\n  expected: {fix}\n  got:      {c.fix}")
    for cid, c in checks.items():
        if cid not in wanted and c.status != "skip":
            out.append(f"{cid}: expected skip, got {c.status}: {c.finding} | fix: {c.fix}")
    return out


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.stem)
def test_snapshot_verdicts_match_what_was_expected(path: Path) -> None:
    problems = disagreements(path)
    assert not problems, "\n".join(problems)


def test_the_corpus_covers_what_it_must() -> None:
    corpus = [snapshot.load(p) for p in sorted((HERE / "corpus").glob("*.json"))]
    assert len(corpus) >= 15
    titles = " ".join(s.meta["title"] for s in corpus)
    for needed in ("RTX 3060 Laptop GPU", "RTX 4070 Laptop GPU", "RTX 4090", "RTX 3060 Ti", "A100", "L4",
                   "not a symbolic link", "cannot find -lcuda", "Linux driver installed inside", "LD_LIBRARY_PATH",
                   "libnvidia-ml", "nvidia-smi not on PATH", "CPU-only", "cannot run torch", "(healthy)"):
        assert needed in titles, needed
    for snap in corpus:
        assert snap.meta["sources"] and all(s.startswith("https://") for s in snap.meta["sources"]), snap.meta["id"]
        assert isinstance(snap.meta["hand_written"], list) and isinstance(snap.meta["derived"], list)


def test_every_snapshot_has_expected_verdicts_and_each_expectation_a_snapshot() -> None:
    expected = {p.stem for p in (HERE / "expected").glob("*.json")}
    assert expected == {p.stem for p in SNAPSHOTS}


def test_committed_snapshots_are_what_the_builder_writes() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("snapshot_build", HERE / "build.py")
    assert spec and spec.loader
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    for path, text in build.build_all().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: run python {HERE / 'build.py'}"


_VERSION = re.compile(r"\d+(\.\d+)*(\+\w+)?")
_VERSION_SLOTS = {"driver", "driver_cuda", "cuda", "need", "version", "wheel"}
_COUNT_SLOTS = {"count", "more", "lost", "ms", "index"}


def _slots(template: str, text: str) -> dict[str, str] | None:
    """What filled each ``{name}`` of ``template`` in ``text`` (None when ``text`` does not read as it)."""
    pattern, seen = "", set()
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        pattern += re.escape(literal)
        if name:
            pattern += f"(?P={name})" if name in seen else f"(?P<{name}>.+?)"
            seen.add(name)
    m = re.fullmatch(pattern, text, re.DOTALL)
    return m.groupdict() if m else None


def _misread(check: Check, lang: str) -> list[str]:
    """What a person reading ``check`` in ``lang`` would stumble on."""
    with language(lang):
        shown = localized(check)
    out = []
    for part, text in (("title", shown.title), ("finding", shown.finding), ("fix", shown.fix or "")):
        if re.search(r"\{\w*\}|\bcheck\.[a-z_]+\.", text):
            out.append(f"{part} has a placeholder or a key left in it: {text}")
        if doubled := re.search(r"\b([^\W\d_]{2,})\s+\1\b", text, re.IGNORECASE):
            out.append(f"{part} says {doubled.group(0)!r}: {text}")
    if check.fix_key and not shown.fix:
        out.append("has a fix key but no fix")
    for fix_part in filter(None, re.split(r"[;；]\s*|，|, ", shown.fix or "")):
        if len(fix_part) >= 20 and fix_part in shown.finding:
            out.append(f"the fix's {fix_part!r} is inside the finding: {shown.finding}")
    if check.key and check.key in catalog(lang):
        slots = _slots(catalog(lang)[check.key], shown.finding)
        if slots is None:
            out.append(f"finding does not read as its sentence {catalog(lang)[check.key]!r}: {shown.finding}")
        for name, value in (slots or {}).items():
            if name in _VERSION_SLOTS and not _VERSION.fullmatch(value):
                out.append(f"{name} should be a version, reads {value!r}: {shown.finding}")
            if name in _COUNT_SLOTS and not value.isdigit():
                out.append(f"{name} should be a count, reads {value!r}: {shown.finding}")
    return out


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_every_checks_message_and_fix_reads_right_on_every_snapshot(lang: str) -> None:
    """Issue 49, item 1: the driver-too-old finding had its fix pasted where the driver's version belongs."""
    problems = [f"{p.stem} {c.id}: {m}" for p in SNAPSHOTS for c in verdicts(p).values() for m in _misread(c, lang)]
    assert not problems, "\n".join(problems)
    assert any(c.id == "torch.driver_too_old" and c.status == "fail" for c in verdicts(CORPUS_GKE).values())
