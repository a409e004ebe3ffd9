"""Every snapshot under tests/fixtures/snapshots is replayed through the probes and checks and held
against the verdicts written for it (expected/<id>.json) before envcheck ever ran on it.

A machine anyone captures with ``envcheck snapshot`` (or builds from a posted output in build.py)
becomes a test case by dropping it into corpus/ with its expected verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envcheck import snapshot
from envcheck.checks import evaluate
from envcheck.probes.collect import collect

HERE = Path(__file__).parent / "fixtures" / "snapshots"
SNAPSHOTS = sorted((HERE / "corpus").glob("*.json")) + sorted((HERE / "fixtures").glob("*.json"))


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
