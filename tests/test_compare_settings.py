"""Runs sampled differently (``--quick`` against a full run) are never compared row by row, and a
history's step is explained only by changes that can move its rows (issue 38 item 4)."""

from __future__ import annotations

import dataclasses

import compare_fixtures as fx
from in_lang import print_diff, print_history

from envcheck.compare import match
from envcheck.compare.diff import diff
from envcheck.compare.history import history
from envcheck.model import Report
from envcheck.render.terminal.console import capture

UUID = "GPU-864be31b-1c83-bb06-459b-885fba99fd31"


def small() -> Report:
    """The H200 run cut to two ops, enough for every path here and fast to analyse."""
    r = fx.h200_after()
    return fx.with_cases(r, tuple(c for c in r.benches[0].cases if c.op in ("matmul", "relu")))


def quick(r: Report) -> Report:
    b = r.benches[0]
    s = dataclasses.replace(b.settings, quick=True, warmup_ms=10.0, rep_ms=40.0, max_samples=100)
    return dataclasses.replace(r, benches=(dataclasses.replace(b, settings=s), *r.benches[1:]))


def on(r: Report, created: str) -> Report:
    return dataclasses.replace(fx.with_gpu_fact(r, "uuid", UUID), created=created)


def test_a_full_run_and_a_quick_run_say_so_first_and_compare_no_row():
    full = small()
    fast = quick(fx.scaled(full, 1.75, fx.keys(full, op="matmul")))
    d = diff([("full.json", full), ("quick.json", fast)])
    (cmp,) = d.comparisons
    assert cmp.settings == ("quick", "warmup_ms", "rep_ms", "max_samples")
    assert cmp.cases and all(c.verdict == "not comparable" for c in cmp.cases)
    assert all(c.reasons[0].key == match.SETTINGS_DIFFER for c in cmp.cases)
    assert cmp.overall.slower == 0 and cmp.overall.geomean is None and cmp.regressions(0) == []
    text = capture(lambda c: print_diff(c, d), width=100)
    said = text.index("sampled differently")
    assert said < text.index("Environment differences")
    assert "slower" not in text[said:].split("A ratio is")[0].replace("(both with --quick, or neither)", "")


def test_runs_sampled_alike_are_still_compared():
    full = small()
    (cmp,) = diff([("a", full), ("b", fx.scaled(full, 1.2))]).comparisons
    assert cmp.settings == () and cmp.overall.verdict == "slower"


def test_history_pairs_only_runs_sampled_alike_and_a_triton_install_never_explains_a_torch_row():
    r1 = on(small(), "2026-11-01T00:00:00Z")
    r2 = on(quick(fx.scaled(small(), 1.75)), "2026-11-02T00:00:00Z")
    after = fx.with_version(small(), "triton", "9.9.9")
    r3 = on(fx.scaled(after, 1.3, fx.keys(after, impl="torch")), "2026-11-03T00:00:00Z")
    h = history([("r1.json", r1), ("r2.json", r2), ("r3.json", r3)])
    assert not [s for s in h.steps if s.index == 1]  # the quick run is no step from the full one
    torch_steps = [s for s in h.steps if s.index == 2 and s.group.split()[1] == "torch"]
    assert torch_steps and all(s.direction == "slower" for s in torch_steps)
    assert all(not any(c.area == "triton" for c in s.changes) for s in torch_steps)
    assert [labels for _, labels in h.settings] == [("r1.json", "r3.json"), ("r2.json",)]
    quick_point = h.points[1]
    assert all(o.ratio == 1.0 for o in quick_point.ops)  # the first of its kind, not 1.75x of a full run
    text = capture(lambda c: print_history(c, h), width=100)
    assert "sampled differently" in text and "Triton" not in "".join(
        ln for ln in text.splitlines() if "torch" in ln and "slower" in ln)
