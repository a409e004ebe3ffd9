"""A user's case and a built-in case travel through exactly the same code: the worker's group
preparation and sampling, the report, the analysis."""

from __future__ import annotations

import pytest

from envcheck.bench import protocol
from envcheck.bench.suite import PlannedCase
from envcheck.model import Settings, to_dict
from envcheck.userbench.discover import CODE, load
from tests.test_userbench import GOOD, write

FAST = Settings(warmup_ms=1, rep_ms=2, min_samples=3, max_samples=5, cold_l2=False, threads=1)


def test_one_worker_runs_built_in_and_user_cases_through_the_same_prepare_and_sample(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from envcheck.bench import group, sampling, worker

    source = write(tmp_path, GOOD)
    specs = tuple(op.spec() for op in load(source))
    seen: dict[str, list[str]] = {"prepare": [], "sample": []}
    real_prepare, real_sample = group.prepare, sampling.sample

    def spy_prepare(rt, planned, g, *watch):
        seen["prepare"].append(planned.op)
        return real_prepare(rt, planned, g, *watch)

    def spy_sample(rt, p):
        seen["sample"].append(p.planned.op)
        return real_sample(rt, p)

    monkeypatch.setattr(worker, "prepare", spy_prepare)
    monkeypatch.setattr(worker, "sample", spy_sample)
    cases = (PlannedCase("relu", "torch", "fp32", "fp32", (1024,)), PlannedCase("double", "torch", "fp32", "fp32", (64,)))
    plan = protocol.WorkerPlan("cpu", 0, cases, FAST, ops=specs, source=source, code=CODE)
    events: list = []
    worker.Worker(protocol.decode_plan(to_dict(plan)), events.append).run()
    assert seen["prepare"] == ["relu", "double"] and seen["sample"] == ["relu", "double"]
    measured = [e.case for e in events if isinstance(e, protocol.Measured)]
    assert [c.op for c in measured] == ["relu", "double"]
    assert all(c.measured and c.launch is not None for c in measured)
    double = measured[1]
    assert double.accuracy.rel_l2 == 0.0 and double.accuracy.elements == 64  # x * 2 is exact
    assert torch is not None


def test_a_user_op_the_worker_cannot_find_fails_its_cases_not_the_run(tmp_path):
    pytest.importorskip("torch")
    from envcheck.bench import worker

    source = write(tmp_path, GOOD)
    specs = tuple(op.spec() for op in load(source))
    (tmp_path / "mine.py").write_text("raise ImportError('gone since discovery')\n")
    cases = (PlannedCase("double", "torch", "fp32", "fp32", (64,)), PlannedCase("relu", "torch", "fp32", "fp32", (64,)))
    events: list = []
    phases = worker.Worker(protocol.WorkerPlan("cpu", 0, cases, FAST, ops=specs, source=source, code=CODE),
                           events.append).run()
    measured = {e.case.op: e.case for e in events if isinstance(e, protocol.Measured)}
    assert measured["double"].failure.detail == "ImportError: gone since discovery"
    assert measured["relu"].measured
    assert isinstance(phases, dict)  # it ran to its end


def test_a_restarted_worker_s_monitor_windows_are_numbered_after_the_earlier_ones():
    from envcheck.bench.runner import BenchOutcome
    from envcheck.bench.runner import _extend as _merge
    from envcheck.model import Case, MonitorWindow, Timing

    def outcome(op: str) -> BenchOutcome:
        w = MonitorWindow(0.05, [0.0, 0.05], sm_mhz=[1980.0, 1980.0])
        case = Case(op, "torch", "fp32", "fp32", (64,), gpu=Timing.from_samples("cuda_graph", [1.0]), window=0)
        return BenchOutcome(cases=[case], windows=[w])

    merged = BenchOutcome()
    for op in ("relu", "vector_add", "relu"):
        _merge(merged, outcome(op))
    assert [c.window for c in merged.cases] == [0, 1, 2] and len(merged.windows) == 3
