"""The committed diffs the docs quote, made again by today's code from the committed reports: each must read
the same, and the out-of-sample ones must be judged with floors never learned from the pair they judge.

- Diffs rendered by ``envcheck diff`` (Markdown and JSON), each report under the name it was diffed by.
- The node positive control out of sample: a 5% slowdown planted in each 2 x H100 node control, judged with
  node floors learned from the other node controls (``tools/evidence/noise_floors.py --node``, leave one pair
  out), written as a table.

Regenerate after an intended change with ``ENVCHECK_UPDATE_EVIDENCE=1 pytest tests/test_diff_evidence.py``.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import runpy
from pathlib import Path

import node_compare_fixtures as nf
import pytest

from envcheck import analysis, cli, model
from envcheck.compare import diff as diff_module
from envcheck.compare import shipped
from envcheck.render import fmt

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "evidence"
UPDATE = os.environ.get("ENVCHECK_UPDATE_EVIDENCE") == "1"
H100 = "NVIDIA H100 80GB HBM3"
OUT_OF_SAMPLE_H100 = ("2026-11-26_0245Z_vm_h100.json.gz", "2026-11-26_0248Z_vm_h100.json.gz")

# stem of the committed .md and .json.gz -> (report, the name it was diffed by) for the baseline, then the other.
RENDERED = {
    # JAX in the runs (launch time only): judged with the launch floors, one of whose pairs is the negative
    # control's own (in sample for the JAX rows; the GPU-time rows judged on their repeats).
    "2026-11-25_diff_h100_negative-control": (("2026-11-25_2220Z_vm_h100_controls_baseline.json.gz", "baseline.json"),
                                              ("2026-11-25_2220Z_vm_h100_controls_rerun.json.gz", "rerun.json")),
    "2026-11-25_diff_h100_positive-control": (("2026-11-25_2220Z_vm_h100_controls_baseline.json.gz", "baseline.json"),
                                              ("2026-11-25_2220Z_vm_h100_controls_control.json.gz", "control.json")),
    "2026-11-26_0615Z_diff_h100_matmul_a_vs_b": (("2026-11-26_0615Z_vm_h100_matmul_a.json.gz", "a.json"),
                                                 ("2026-11-26_0615Z_vm_h100_matmul_b.json.gz", "b.json")),
    # The H100 floors' out-of-sample test: a pair of the earlier sampler, never among the floors' pairs.
    "2026-11-26_diff_h100_0245Z_vs_0248Z_out-of-sample": tuple((n, n) for n in OUT_OF_SAMPLE_H100),
}
NODE_POSITIVE = "2026-11-26_2x-h100_node_positive-control_out-of-sample.md"
PLANTED = (("all_reduce", 256 << 20), ("all_gather", 1 << 30), ("all_gather", 4 << 30), ("reduce_scatter", 1 << 30),
           ("reduce_scatter", 4 << 30))
SLOWER = 1.05


# A number a user or a tool reads from a committed diff is the same number when it agrees to this relative
# precision: far finer than anything measured (a ratio's interval is ~1e-4 wide), far coarser than the last
# digits another NumPy build or CPU sums differently (a log_sd of 0.0003801923555242244 against ...2443).
SAME_REL = 1e-9


def differs(found: object, made: object, where: str = "") -> str | None:
    """Where two parsed diff JSON documents first differ beyond ``SAME_REL``, or None when they are the same."""
    if isinstance(found, float) or isinstance(made, float):
        if not isinstance(found, (int, float)) or not isinstance(made, (int, float)) or isinstance(found, bool) \
                or not math.isclose(found, made, rel_tol=SAME_REL, abs_tol=1e-300):
            return f"{where}: {found!r} != {made!r}"
        return None
    if isinstance(found, dict) and isinstance(made, dict):
        if found.keys() != made.keys():
            return f"{where}: keys {sorted(set(found) ^ set(made))}"
        return next((d for k in found if (d := differs(found[k], made[k], f"{where}.{k}"))), None)
    if isinstance(found, list) and isinstance(made, list):
        if len(found) != len(made):
            return f"{where}: {len(found)} items != {len(made)}"
        return next((d for i, (a, b) in enumerate(zip(found, made, strict=True)) if (d := differs(a, b, f"{where}[{i}]"))), None)
    return None if found == made else f"{where}: {found!r} != {made!r}"


def _same(path: Path, content: str) -> None:
    """The committed file says what ``content`` says: Markdown to the letter (it is written rounded), JSON to
    ``SAME_REL`` in every number."""
    if UPDATE:
        data = content.encode("utf-8")
        path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
        return
    assert path.exists(), f"{path.name} is missing: ENVCHECK_UPDATE_EVIDENCE=1 makes it"
    raw = path.read_bytes()
    found = (gzip.decompress(raw) if path.name.endswith(".gz") else raw).decode("utf-8")
    where = differs(json.loads(found), json.loads(content)) if ".json" in path.name else \
        (None if found == content else "the text")
    assert where is None, f"{path.name} is stale ({where}): ENVCHECK_UPDATE_EVIDENCE=1 makes it anew"


def test_a_diff_that_differs_only_in_digits_no_measurement_has_is_the_same(tmp_path: Path) -> None:
    """Another NumPy build sums in another order: the 17th digit of a floor moves, the committed diff is still
    the diff today's code makes; a digit that a reader sees move is not."""
    made = json.dumps({"cases": [{"floor": {"log_sd": 0.0003801923555242443, "source": "repeats"},
                                  "ratio": 1.0023, "n": 5}]}, indent=1)
    committed = tmp_path / "d.json.gz"
    committed.write_bytes(gzip.compress(made.replace("0.0003801923555242443", "0.0003801923555242244").encode()))
    _same(committed, made)
    committed.write_bytes(gzip.compress(made.replace("1.0023", "1.0024").encode()))
    with pytest.raises(AssertionError, match=r"d\.json\.gz is stale \(\.cases\[0\]\.ratio: 1\.0024 != 1\.0023\)"):
        _same(committed, made)
    assert differs({"n": 5}, {"n": 5.0}) is None and differs({"n": True}, {"n": 1.0}) is not None
    assert differs({"v": "same"}, {"v": "other"}) == ".v: 'same' != 'other'"


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(RENDERED))
def test_a_committed_diff_is_what_envcheck_diff_renders_today(stem, tmp_path):
    paths = []
    for report, label in RENDERED[stem]:
        (tmp_path / label).write_bytes((EVIDENCE / report).read_bytes())
        paths.append(str(tmp_path / label))
    for form, suffix in (("md", ".md"), ("json", ".json.gz")):
        out = tmp_path / f"diff.{form}"
        assert cli.main(["diff", *paths, "--format", form, "--out", str(out)]) == 0
        _same(EVIDENCE / f"{stem}{suffix}", out.read_text(encoding="utf-8"))


def _cases(stem: str) -> list[dict]:
    (cmp,) = json.loads(gzip.decompress((EVIDENCE / f"{stem}.json.gz").read_bytes()))["comparisons"]
    return cmp["cases"]


def test_the_h100_floors_out_of_sample_file_says_what_the_docs_say():
    """The pair is not among the floors' (kernel or launch) pairs, and its diff calls no row with 6 of 253
    intervals excluding 1 (docs/compare.md). The diff of it committed before, with floors then learned from
    this very pair, read 13 of 253."""
    floors = shipped.for_model(H100)
    assert not set(OUT_OF_SAMPLE_H100) & {n for pair in (*floors.pairs, *floors.launch_pairs) for n in pair}
    cases = [c for c in _cases("2026-11-26_diff_h100_0245Z_vs_0248Z_out-of-sample") if c["low"] is not None]
    assert len(cases) == 253 and all(c["floor"]["source"] == "shipped" for c in cases)
    assert not [c for c in cases if c["verdict"] in ("slower", "faster")]
    assert sum(c["low"] > 1 or c["high"] < 1 for c in cases) == 6


def test_the_committed_jax_positive_control_calls_only_the_planted_rows():
    cases = _cases("2026-11-25_diff_h100_positive-control")
    called = [c for c in cases if c["verdict"] in ("slower", "faster")]
    assert len(called) == 12 and {(c["impl"], c["op"], c["verdict"]) for c in called} == {("triton", "vector_add", "slower")}
    assert not [c for c in _cases("2026-11-25_diff_h100_negative-control") if c["verdict"] in ("slower", "faster")]


# --------------------------------------------------------------------------- the node positive control


def _node_table() -> tuple[str, int, int, int]:
    """The node positive control out of sample, as Markdown; (text, called slower, excluding 1, other rows called)."""
    learn = runpy.run_path(str(ROOT / "tools" / "evidence" / "noise_floors.py"))["learn"]
    controls = nf.NODE_CONTROLS
    lines, called, excluding, others = [], 0, 0, 0
    for i in nf.H100_CONTROLS:
        rest = [(str(EVIDENCE / a), str(EVIDENCE / b)) for j, (a, b) in enumerate(controls) if j != i]
        floors = shipped.parse(learn([], node=rest))
        name_a, name_b = controls[i]
        base, again = nf.load(EVIDENCE / name_a), nf.load(EVIDENCE / name_b)
        for op, size in PLANTED:
            n = diff_module.compare(("a", base), ("b", nf.collective_slowed(again, op, size, SLOWER)), floors=floors).node
            assert n is not None and controls[i] not in n.shipped_pairs and n.shipped_pairs
            row = next(c for c in n.collectives if (c.op, c.size_bytes) == (op, size) and c.timing == "gpu")
            ch = row.change
            called += ch.verdict == "slower"
            excluding += ch.low is not None and ch.low > 1.0
            others += sum(r.change.verdict in ("slower", "faster") for r in (*n.collectives, *n.copies) if r is not row)
            floor = fmt.pct(ch.floor.pct) if ch.floor is not None else fmt.DASH
            lines.append(f"| {name_a[:16]} / {name_b[11:16]} | {op} {fmt.size_bytes(size)} | {fmt.ratio(ch.ratio)} "
                         f"| {fmt.interval(ch.low, ch.high)} | {floor} | {ch.verdict} |")
    total = len(lines)
    head = [
        "# Node positive control, out of sample: 2 x H100",
        "",
        f"A {fmt.general(round((SLOWER - 1) * 100, 6))}% slowdown planted in turn in "
        + ", ".join(f"{op} {fmt.size_bytes(size)}" for op, size in PLANTED)
        + f" (every rank's samples of it x {SLOWER}) of the second run of each of the {len(nf.H100_CONTROLS)} "
        "back-to-back 2 x H100 node controls, diffed against the first run with node floors learned from the "
        f"other node controls (`tools/evidence/noise_floors.py --node`; the other {len(nf.H100_CONTROLS) - 1} of "
        "2 x H100 for these rows): the pair judged is never among them. Made by `tests/test_diff_evidence.py` from the committed reports "
        "(`ENVCHECK_UPDATE_EVIDENCE=1` makes it anew); the floor is the planted row's kind's, one standard deviation.",
        "",
        f"**Called slower: {called} of {total}. Interval excluding 1: {excluding} of {total}. "
        f"Other rows called: {others}.**",
        "",
        "| pair | planted | time ratio | 95% interval | floor | verdict |",
        "|---|---|--:|--:|--:|---|",
    ]
    return "\n".join(head + lines) + "\n", called, excluding, others


@pytest.mark.slow
def test_the_node_positive_control_holds_out_of_sample(monkeypatch):
    """Each planted 5% slowdown judged with floors learned without its pair: significant in every case, called
    slower in at least 90% of the 55, nothing else ever called; the table committed is what today's code makes."""
    # Each report is read and analysed once over the eleven leave-one-out learnings (reports are immutable,
    # analyse a pure function of one): the same numbers in a fraction of the time.
    monkeypatch.setattr(model, "load", functools.cache(model.load))
    seen: dict[int, tuple[object, object]] = {}
    real = analysis.analyse

    def analyse_once(report):
        hit = seen.get(id(report))
        if hit is None or hit[0] is not report:
            hit = seen[id(report)] = (report, real(report))
        return hit[1]

    monkeypatch.setattr(analysis, "analyse", analyse_once)
    monkeypatch.setattr(diff_module, "analyse", analyse_once)
    text, called, excluding, others = _node_table()
    total = len(PLANTED) * len(nf.H100_CONTROLS)
    assert excluding == total and called >= 0.9 * total and others == 0
    _same(EVIDENCE / NODE_POSITIVE, text)
