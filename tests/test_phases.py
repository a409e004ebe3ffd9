"""Where a run's time went: the worker's and runner's phase clocks, the report fields, the analysis's
table and its views (issue 39)."""

from __future__ import annotations

import dataclasses
import json

import factories
import pytest
from fake_worker import command
from in_lang import print_run, render_html, render_markdown

from envcheck import model
from envcheck.analysis import analyse
from envcheck.analysis.phases import OTHER, bench_phases
from envcheck.bench import protocol, runner
from envcheck.bench import runner as repeat
from envcheck.bench.group import Stopwatch
from envcheck.bench.suite import CPU_QUICK_SETTINGS, Plan, PlannedCase
from envcheck.model import Bench, BenchDevice, Case, Timing
from envcheck.render.terminal.console import capture

FAST = model.Settings(warmup_ms=1, rep_ms=2, min_samples=3, max_samples=5, cold_l2=False, threads=1)


class Ticks:
    def __init__(self, step: float = 0.5) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def test_a_stopwatch_adds_up_each_phase_also_when_the_block_raises() -> None:
    watch = Stopwatch(Ticks())  # zero at 0.5
    with watch.phase("check"):
        pass
    with pytest.raises(RuntimeError), watch.phase("check"):
        raise RuntimeError("the checked call failed")
    child = watch.child()
    with child.phase("settle"):
        pass
    assert watch.seconds == {"check": 1.0} and child.seconds == {"settle": 0.5}
    assert child.zero == watch.zero and watch.now() == pytest.approx(4.0 - 0.5)


def _case(phases: dict[str, float], impl: str = "torch", span: tuple[float, float] | None = (1.0, 2.0),
          shape: tuple[int, ...] = (1024,), op: str = "vector_add") -> Case:
    return Case(op, impl, "fp32", "fp32", shape, launch=Timing.from_samples("cuda_events", [5.0, 5.1]),
                phases=phases, span_s=span)


def test_the_report_keeps_phases_and_refuses_nonsense() -> None:
    bench = Bench(BenchDevice("cuda", "H200", 0), cases=(_case({"check": 0.25, "sampling": 0.5}),),
                  phases={"startup": 6.5, "ceilings": 4.0}, duration_s=20.0)
    r = model.Report("0.1.0", "2026-11-29T00:00:00Z", "h", "run", model.Environment(), benches=(bench,))
    assert model.loads(model.dumps(r)) == r
    for bad in ({"check": -1.0}, {"check": float("nan")}, {"no spaces": 1.0}):
        with pytest.raises(ValueError):
            _case(bad)
    with pytest.raises(ValueError, match="span_s"):
        _case({}, span=(2.0, 1.0))
    text = model.dumps(r).replace('"startup": 6.5', '"startup": -6.5')
    with pytest.raises(model.ReportError, match="benches.0.: phase startup"):
        model.loads(text)


def test_the_table_adds_phases_up_names_first_calls_and_keeps_the_rest_as_other() -> None:
    cases = (_case({"first_call": 0.1, "check": 0.2, "settle": 0.3, "sampling": 0.4}),
             _case({"first_call": 2.0, "sampling": 0.5}, impl="triton", span=(3.0, 6.0)),
             _case({"first_call": 1.0}, impl="compile", op="relu", span=None))
    bench = Bench(BenchDevice("cuda", "H200", 0), cases=cases, phases={"startup": 5.0, "shutdown": 0.5},
                  duration_s=12.0)
    table = bench_phases(bench)
    assert table is not None
    got = {r.phase: r.seconds for r in table.rows}
    assert [r.phase for r in table.rows] == ["startup", "torch_compile", "triton_compile", "first_call", "check",
                                            "settle", "sampling", "shutdown", OTHER]
    assert got["triton_compile"] == 2.0 and got["torch_compile"] == 1.0 and got["first_call"] == 0.1
    assert got[OTHER] == pytest.approx(12.0 - 10.0)
    assert sum(r.share for r in table.rows) == pytest.approx(1.0)
    assert table.by_op == (("vector_add", pytest.approx(3.5)), ("relu", 1.0))
    assert [c.key[1] for c in table.slowest] == ["triton", "torch", "compile"] and table.slowest[0].span_s == (3.0, 6.0)
    assert table.cache == () and table.stops == ()  # not recorded: nothing counted
    # A report written before phases were recorded has no table, and its views none either.
    assert bench_phases(dataclasses.replace(bench, cases=(), phases={})) is None


def test_the_table_counts_first_calls_from_a_cache_and_why_sampling_stopped() -> None:
    cases = (dataclasses.replace(_case({"sampling": 0.1}, impl="triton"), cache="hit", sampled_until="ci"),
             dataclasses.replace(_case({"sampling": 0.1}, impl="triton", shape=(2048,)), cache="miss",
                                 sampled_until="ci"),
             dataclasses.replace(_case({"sampling": 1.0}, shape=(4096,)), sampled_until="window"))
    r = model.Report("0.1.0", "2026-11-29T00:00:00Z", "h", "run", model.Environment(),
                     benches=(Bench(BenchDevice("cuda", "H200", 0), cases=cases, duration_s=2.0),))
    assert model.loads(model.dumps(r)) == r and '"cache": "hit"' in model.dumps(r)
    assert '"cache"' not in model.dumps(dataclasses.replace(r, benches=(Bench(BenchDevice("cuda", "H200", 0),
                                                                              cases=cases[2:]),)))
    table = bench_phases(r.benches[0])
    assert table.cache == (("hit", 1), ("miss", 1)) and table.stops == (("ci", 2), ("window", 1))


def test_repeats_add_their_phases_up() -> None:
    a = _case({"sampling": 0.5})
    merged = repeat.merge_cases([(1, a), (2, dataclasses.replace(a, phases={"sampling": 0.25, "check": 0.1}))])
    assert merged.phases == {"sampling": 0.75, "check": 0.1} and merged.span_s is None
    outs = [runner.BenchOutcome(phases={"startup": 5.0}), runner.BenchOutcome(phases={"startup": 4.0, "inputs": 1.0})]
    assert repeat.merge(outs).phases == {"startup": 9.0, "inputs": 1.0}


def test_every_case_of_a_worker_run_has_its_phases_and_span() -> None:
    pytest.importorskip("torch")
    from envcheck.bench import worker

    cases = [PlannedCase("relu", "torch", "fp32", "fp32", (4096,)), PlannedCase("relu", "triton", "fp32", "fp32", (4096,)),
             PlannedCase("vector_add", "torch", "fp32", "fp32", (2048,))]
    events: list = []
    phases = worker.Worker(protocol.WorkerPlan("cpu", 0, tuple(cases), FAST), events.append).run()
    events = [protocol.decode(protocol.encode(e)) for e in events]
    relu, relu_triton, add = [e.case for e in events if isinstance(e, protocol.Measured)]
    for c in (relu, add):
        assert set(c.phases) == {"first_call", "check", "warmup", "settle", "sampling"}  # no graph on a CPU
        assert c.span_s[0] < c.span_s[1]
    assert relu.span_s[1] <= add.span_s[0]  # one group after the other
    assert relu_triton.failure is not None and "first_call" in relu_triton.phases  # no Triton on a CPU here
    assert relu_triton.span_s is not None
    assert set(phases) == {"inputs"}


def test_the_runner_clocks_the_workers_start_and_exit(tmp_path) -> None:
    pc = PlannedCase("vector_add", "torch", "fp32", "fp32", (1024,))
    plan = Plan("cuda", 0, (pc,), CPU_QUICK_SETTINGS, BenchDevice("cuda", "H200", 0))
    case = _case({"sampling": 0.5})
    script = tmp_path / "s.json"
    steps = [{"sleep": 0.2}, protocol.Started(BenchDevice("cuda", "H200", 0)), protocol.CaseStarted(0, 1, pc),
             protocol.Measured(case), {"done": {"ceilings": 3.5, "inputs": 0.25}}, {"sleep": 0.2}]
    script.write_text(json.dumps([s if isinstance(s, dict) else {"emit": protocol.encode(s)} for s in steps]))
    out = runner.run_worker(plan, lambda ev: None, 60.0, command=command(script))
    assert out.done and out.phases["ceilings"] == 3.5 and out.phases["inputs"] == 0.25
    assert out.phases["startup"] >= 0.2 and out.phases["shutdown"] >= 0.0  # measured: no bound on a busy machine
    bench = runner.assemble(plan, out, "2026-11-29T00:00:00Z", 30.0)
    assert bench.phases == out.phases and bench.cases[0].phases == {"sampling": 0.5}


def _timed_report() -> model.Report:
    r = factories.report()
    b = r.benches[0]
    cases = tuple(dataclasses.replace(c, phases={"first_call": 0.5, "settle": 0.25, "sampling": 0.25},
                                      span_s=(float(i), float(i) + 1.0)) for i, c in enumerate(b.cases))
    b = dataclasses.replace(b, cases=cases, phases={"startup": 7.0, "ceilings": 3.0}, duration_s=600.0)
    return dataclasses.replace(r, benches=(b,), environment=dataclasses.replace(r.environment, probe_s=4.25))


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_every_view_shows_where_the_time_went(lang: str) -> None:
    from in_lang import translate

    r = _timed_report()
    a = analyse(r)
    heading, startup = translate(lang, "section.phases"), translate(lang, "phase.startup")
    md = render_markdown(r, lang=lang, analysis=a, charts=())
    assert heading in md and f"| {startup} | 7.00 s | 1.2% |" in md
    assert translate(lang, "phases.probe", probe="4.25 s") in md
    html = render_html(r, lang=lang, analysis=a, charts=())
    assert heading in html and "7.00 s" in html
    text = capture(lambda console: print_run(console, r, a, lang=lang), width=120)
    assert heading in text and startup in text
    # Without phases (every report before them), no table.
    old = factories.report()
    assert heading not in render_markdown(old, lang=lang, charts=())


def test_a_node_run_says_where_the_node_tests_time_went() -> None:
    from envcheck.analysis.phases import node_phases
    from envcheck.model.node import Collectives, Launch, Node, PeerCopies

    launch = Launch(("torchrun",), 0, 480.0, 14.0)
    node = Node("h", (0, 1), peer=PeerCopies(duration_s=6.0), collectives=(Collectives("node", "nccl", 2, launch=launch),),
                duration_s=30.0)
    table = node_phases(node)
    assert [(r.phase, r.seconds) for r in table.rows] == [("peer_copies", 6.0), ("collectives", 14.0), (OTHER, 10.0)]
    assert node_phases(dataclasses.replace(node, duration_s=None)) is None and node_phases(None) is None
    assert node_phases(dataclasses.replace(node, duration_s=12.0)) is None  # parts longer than the whole
    r = dataclasses.replace(factories.report(), node=node)
    md = render_markdown(r, charts=())
    assert "Where the node tests' time went" in md and "| Collectives | 14.0 s | 47% |" in md
