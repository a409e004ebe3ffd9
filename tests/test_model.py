"""The report model: raw results only, compact JSON round trip, strict loading, schema-1 upgrade."""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path

import pytest
from evidence_files import text

from envcheck import model
from envcheck.model import (
    Accuracy,
    Bench,
    BenchDevice,
    Case,
    CeilingRun,
    Environment,
    Failure,
    MonitorWindow,
    Note,
    Report,
    Samples,
    Settings,
    Skip,
    Stop,
    StopCause,
    Timing,
    known,
)

REPORTS = Path(__file__).resolve().parent.parent / "evidence"
@functools.cache
def _schema(path: Path) -> int | None:
    try:
        return json.loads(text(path)).get("schema_version")
    except (ValueError, AttributeError):
        return None


COMMITTED = sorted(REPORTS.glob("*.json.gz"))
SCHEMA_1 = [p for p in COMMITTED if _schema(p) == 1] + [Path(__file__).parent / "golden" / "h200_small.json"]
SCHEMA_2 = [p for p in COMMITTED if _schema(p) == 2]


def small_report() -> Report:
    window = MonitorWindow(0.02, [0.0, 0.02, 0.04], sm_mhz=[1980, 1980, 1755], mem_mhz=[3201] * 3,
                           temperature_c=[40, 41, 43], power_w=[300.5, 650.0, 699.9],
                           reasons=((), (), ("sw_power_cap",)))
    gpu = Timing.from_samples("cuda_graph", [10.0, 10.5, 9.75, 10.25])
    launch = Timing.from_samples("cuda_events", [14.0, 15.0, 14.5], calls_per_sample=4)
    cases = (
        Case("matmul", "torch", "fp16", "fp16", (512, 512, 512), gpu=gpu, launch=launch,
             accuracy=Accuracy(1e-3, 2e-3, 1e-4, 0, 262144), window=0),
        Case("matmul", "triton", "fp16", "fp16", (512, 512, 512), gpu=gpu, launch=launch, compile_s=1.5,
             accuracy=Accuracy(1.1e-3, 2e-3, 1.2e-4, 0, 262144), window=0, kernel="tma 128x128x64 s3 w4"),
        Case("matmul", "compile", "fp16", "fp16", (512, 512, 512), failure=Failure("compile", "BackendCompilerFailed: x")),
    )
    bench = Bench(
        device=BenchDevice("cuda", "NVIDIA H200", 0, uuid="GPU-1", sm_count=132, l2_bytes=60 << 20),
        settings=Settings(quick=True, ops=("matmul",), impls=("torch", "triton", "compile")),
        cases=cases,
        skipped=(Skip("matmul", "triton", "fp32", (8192, 8192, 8192),
                      Note("skip.out_of_memory", {"need_bytes": 10, "free_bytes": 5}), precision="fp32"),),
        ceiling_runs=(CeilingRun("copy", "fp32", (1 << 28,), Timing.from_samples("cuda_graph", [500.0, 501.0])),),
        windows=(window,),
        notes=(Note("note.cold_l2", {"l2_bytes": 60 << 20, "sets_example": 15}),),
        stop=Stop(StopCause.USER, finished=2, planned=3, during=("matmul", "compile", "fp16", "fp16", (512, 512, 512))),
        started="2026-11-22T10:00:00Z", duration_s=12.5, versions={"torch": "2.11.0+cu130"},
    )
    env = Environment(sections={"system": {"os_name": known("Ubuntu")}})
    return Report("0.2.0", "2026-11-22T10:00:00Z", "vm", "run", env, benches=(bench,))


def test_round_trip_is_exact():
    r = small_report()
    assert model.loads(model.dumps(r)) == r


def test_samples_are_float32_in_memory_and_on_disk():
    t = Timing.from_samples("cuda_graph", [1 / 3, 2.0])
    assert t.samples_us[0] != 1 / 3  # rounded to float32 when made, so a reload changes nothing
    assert t.samples_us[0] == pytest.approx(1 / 3, rel=1e-7)
    back = model.loads(model.dumps(Report("x", "t", "h", "run", Environment(), benches=(Bench(
        BenchDevice("cpu", "CPU"), cases=(Case("relu", "torch", "fp32", "fp32", (8,), launch=t),)),))))
    assert back.bench.cases[0].launch.samples_us == t.samples_us


def test_samples_are_encoded_compactly():
    t = Timing.from_samples("cuda_graph", [float(i + 1) for i in range(200)])
    encoded = model.to_dict(t)["samples_us"]
    assert set(encoded) == {"f32le_b64"}
    assert len(encoded["f32le_b64"]) == 4 * math.ceil(200 * 4 / 3)  # base64 of 800 bytes: 5.3 characters a sample


def test_timing_statistics_are_computed_from_samples_never_stored():
    t = Timing.from_samples("cuda_graph", [4.0, 1.0, 3.0, 2.0, 100.0])
    assert (t.median_us, t.q1_us, t.q3_us, t.iqr_us, t.n) == (3.0, 2.0, 4.0, 2.0, 5)
    assert t.cv == pytest.approx(1.7733, rel=1e-3)
    assert set(model.to_dict(t)) == {"method", "samples_us", "calls_per_sample"}


@pytest.mark.parametrize("samples", [[], [1.0, float("nan")], [1.0, 0.0], [-2.0], [float("inf")]])
def test_timing_refuses_samples_that_are_no_time(samples):
    with pytest.raises(ValueError):
        Timing.from_samples("cuda_graph", samples)


def test_case_is_timed_checked_or_failed():
    with pytest.raises(ValueError, match="timed, checked"):
        Case("relu", "torch", "fp32", "fp32", (8,))
    with pytest.raises(ValueError, match="shape"):
        Case("relu", "torch", "fp32", "fp32", (8, 8), failure=Failure("run", "x"))


def test_notes_refuse_parameters_that_are_not_scalars():
    with pytest.raises(ValueError):
        Note("k", {"x": {"nested": 1}})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        Note("k", {"x": float("nan")})


def test_monitor_window_sequences_have_one_length():
    with pytest.raises(ValueError, match="samples"):
        MonitorWindow(0.02, [0.0, 0.02], sm_mhz=[1980.0])


def test_case_window_must_exist():
    c = Case("relu", "torch", "fp32", "fp32", (8,), launch=Timing.from_samples("cuda_events", [1.0]), window=3)
    with pytest.raises(ValueError, match="window"):
        Bench(BenchDevice("cuda", "G"), cases=(c,))


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "not valid JSON"),
        ('{"hello": 1}', "not an envcheck report"),
        ('{"format": "envcheck-report", "schema_version": 99}', "newer than this envcheck"),
        ('{"format": "envcheck-report"}', "schema_version"),
        ('{"format": "envcheck-report", "schema_version": true}', "schema_version"),
        ('{"format": "envcheck-report", "schema_version": 0}', "unknown version"),
    ],
)
def test_loader_rejects_foreign_and_future_files(tmp_path, text, message):
    p = tmp_path / "r.json"
    p.write_text(text)
    with pytest.raises(model.ReportError, match=message) as e:
        model.load(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def _mutated(mutate) -> str:
    data = json.loads(model.dumps(small_report()))
    mutate(data)
    return json.dumps(data)


def _bench(d):
    return d["benches"][0]


def _gpu_facts(d, **values):
    d["environment"]["gpus"] = [{"index": 0, "facts": {"name": {"value": "NVIDIA H200"}, "uuid": {"value": "GPU-1"}}}]
    d["environment"]["gpus"][0]["facts"].update({k: {"value": v} for k, v in values.items()})


HOSTILE = [
    # (what is wrong, mutation, the field the message must name)
    ("samples NaN", lambda d: _bench(d)["cases"][0]["gpu"].update(samples_us=[1.0, float("nan")]), "cases[0].gpu"),
    ("samples zero", lambda d: _bench(d)["cases"][0]["gpu"].update(samples_us=[0.0]), "cases[0].gpu"),
    ("samples negative", lambda d: _bench(d)["cases"][0]["launch"].update(samples_us=[-1.0]), "cases[0].launch"),
    ("samples as strings", lambda d: _bench(d)["cases"][0]["gpu"].update(samples_us=["1.0"]), "samples_us[0]"),
    ("bad base64", lambda d: _bench(d)["cases"][0]["gpu"].update(samples_us={"f32le_b64": "!!"}), "samples_us"),
    ("cases null", lambda d: _bench(d).update(cases=None), "benches[0].cases"),
    ("cases an object", lambda d: _bench(d).update(cases={"a": 1}), "benches[0].cases"),
    ("device null", lambda d: _bench(d).update(device=None), "benches[0].device"),
    ("created an integer", lambda d: d.update(created=12), "created"),
    ("host a list", lambda d: d.update(host=["a"]), "host"),
    ("shape of strings", lambda d: _bench(d)["cases"][0].update(shape=["512", 512, 512]), "shape[0]"),
    ("wrong rank", lambda d: _bench(d)["cases"][0].update(shape=[512]), "cases[0]"),
    ("unknown op", lambda d: _bench(d)["cases"][0].update(op="rm -rf"), "cases[0]"),
    ("unknown stop", lambda d: _bench(d)["stop"].update(cause="meteor"), "stop.cause"),
    ("window out of range", lambda d: _bench(d)["cases"][0].update(window=9), "benches[0]"),
    ("rel_l2 negative", lambda d: _bench(d)["cases"][0]["accuracy"].update(rel_l2=-1), "accuracy"),
    ("bool as int", lambda d: _bench(d)["device"].update(sm_count=True), "device.sm_count"),
    ("kind unknown", lambda d: d.update(kind="party"), "kind"),
    ("settings inverted", lambda d: _bench(d)["settings"].update(min_samples=9, max_samples=2), "settings"),
    ("note params nested", lambda d: _bench(d)["notes"][0]["params"].update(x={"y": 1}), "notes[0].params.x"),
    # A list or an object where one of a few words belongs (unhashable: not a TypeError from ``in``).
    ("check status a list", lambda d: d.update(checks=[{"id": "x", "status": ["pass"], "title": "t", "finding": "f"}]),
     "checks[0].status"),
    ("check status an object", lambda d: d.update(checks=[{"id": "x", "status": {}, "title": "t", "finding": "f"}]),
     "checks[0].status"),
    ("stop cause a list", lambda d: _bench(d)["stop"].update(cause=["user"]), "stop.cause"),
    # Integers beyond 64 bits: float() of one overflows, and the analysis's arithmetic would.
    ("float field a huge integer", lambda d: _bench(d).update(duration_s=10**400), "benches[0].duration_s"),
    ("sm_count a huge integer", lambda d: _bench(d)["device"].update(sm_count=10**400), "device.sm_count"),
    ("shape a huge integer", lambda d: _bench(d)["cases"][0].update(shape=[2**70, 512, 512]), "shape[0]"),
    ("ceiling shape a huge integer", lambda d: _bench(d)["ceiling_runs"][0].update(shape=[2**64]), "ceiling_runs[0].shape"),
    ("samples a huge integer", lambda d: _bench(d)["cases"][0]["gpu"].update(samples_us=[10**400]), "samples_us[0]"),
    # Fact values the analysis and the renderers read have a type (facts.py's table); others are free-form.
    ("GPU name a number", lambda d: _gpu_facts(d, name=7), "environment.gpus[0].facts.name.value"),
    ("GPU clock a string", lambda d: _gpu_facts(d, mem_clock_max_mhz="x", memory_bus_width_bits=5120),
     "gpus[0].facts.mem_clock_max_mhz.value"),
    ("sm_count a string", lambda d: _gpu_facts(d, sm_count="132"), "gpus[0].facts.sm_count.value"),
    ("sm_count a float", lambda d: _gpu_facts(d, sm_count=132.5), "gpus[0].facts.sm_count.value"),
    ("sm_count negative", lambda d: _gpu_facts(d, sm_count=-1), "gpus[0].facts.sm_count.value"),
    ("GPU clock tiny", lambda d: _gpu_facts(d, mem_clock_max_mhz=1e-300, memory_bus_width_bits=5120),
     "gpus[0].facts.mem_clock_max_mhz.value"),
    ("GPU clock enormous", lambda d: _gpu_facts(d, sm_clock_max_mhz=1e308), "gpus[0].facts.sm_clock_max_mhz.value"),
    ("compute capability a list", lambda d: _gpu_facts(d, compute_capability=[9, 0]),
     "gpus[0].facts.compute_capability.value"),
    ("GPU fact a huge integer", lambda d: _gpu_facts(d, memory_total_bytes=10**40), "facts.memory_total_bytes.value"),
    ("RAM a huge integer", lambda d: d["environment"]["sections"]["system"].update(ram_total_bytes={"value": 10**40}),
     "environment.sections.system.ram_total_bytes.value"),
    ("nvlink errors not objects", lambda d: d["environment"]["sections"].update(
        links={"gpu0.nvlink_errors": {"value": [1, 2]}}), "sections.links.gpu0.nvlink_errors.value"),
    ("pcie replays a string", lambda d: d["environment"]["sections"].update(links={"gpu3.pcie_replay": {"value": "7"}}),
     "sections.links.gpu3.pcie_replay.value"),
    ("env variables a list", lambda d: d["environment"]["sections"].update(env={"variables": {"value": ["A=1"]}}),
     "sections.env.variables.value"),
    # A measured-ceiling run the analysis could not look up or index.
    ("ceiling dtype unknown", lambda d: _bench(d)["ceiling_runs"][0].update(dtype="fp8"), "ceiling_runs[0]"),
    ("ceiling precision unknown", lambda d: _bench(d)["ceiling_runs"][0].update(kernel="matmul", shape=[8, 8, 8],
                                                                                 precision="int4"), "ceiling_runs[0]"),
    ("ceiling shape empty", lambda d: _bench(d)["ceiling_runs"][0].update(shape=[]), "ceiling_runs[0]"),
    ("ceiling shape zero", lambda d: _bench(d)["ceiling_runs"][0].update(shape=[0]), "ceiling_runs[0]"),
    ("ceiling matmul shape short", lambda d: _bench(d)["ceiling_runs"][0].update(kernel="matmul", shape=[8, 8]),
     "ceiling_runs[0]"),
    ("note param a huge integer", lambda d: _bench(d)["notes"][0]["params"].update(x=-(10**400)), "notes[0].params.x"),
]


@pytest.mark.parametrize("what, mutate, field", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_malformed_reports_are_one_line_errors_naming_the_field(tmp_path, what, mutate, field):
    p = tmp_path / "r.json"
    p.write_text(_mutated(mutate))
    with pytest.raises(model.ReportError) as e:
        model.load(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and field in msg, msg


def test_free_form_and_missing_facts_still_load():
    data = json.loads(model.dumps(small_report()))
    _gpu_facts(data, sm_count=None, some_future_key=[{"x": 10**30}], name=None)
    data["environment"]["gpus"][0]["facts"]["sm_clock_max_mhz"] = {"reason": "Not Supported"}
    r = model.loads(json.dumps(data))
    assert r.environment.gpus[0].get("some_future_key") == [{"x": 10**30}]
    assert r.environment.gpus[0].facts["sm_clock_max_mhz"].reason == "Not Supported"


def test_deep_nesting_is_refused_not_a_crash(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('{"format": "envcheck-report", "schema_version": 2, "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(model.ReportError, match="nested too deeply|not valid JSON"):
        model.load(p)


def test_loader_refuses_what_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(model.ReportError, match="not a regular file"):
        model.load(fifo)  # would block forever if it were opened
    with pytest.raises(model.ReportError, match="directory"):
        model.load(tmp_path)
    with pytest.raises(model.ReportError, match="no such file"):
        model.load(tmp_path / "absent.json")


@pytest.mark.parametrize("path", SCHEMA_1, ids=lambda p: p.name)
def test_every_committed_schema_1_report_upgrades(path):
    data = json.loads(text(path))
    assert data["schema_version"] == 1
    r = model.load(path)
    assert r.schema_version == model.SCHEMA_VERSION
    bench_1 = data.get("bench")
    assert len(r.benches) == (1 if bench_1 else 0)
    if bench_1:
        b = r.bench
        assert len(b.cases) == len(bench_1["cases"])
        for old, new in zip(bench_1["cases"], b.cases, strict=True):
            assert (new.failure is not None) == (old["status"] == "error")
            if old.get("gpu"):
                assert list(new.gpu.samples_us) == pytest.approx(old["gpu"]["samples_us"], rel=1e-6)
            if old.get("error"):
                assert new.accuracy.rel_l2 == old["error"]["rel_l2"]
        assert len(b.skipped) == len(bench_1["skipped"])
        assert all(n.key == model.LEGACY_TEXT for n in b.notes)
        measured = [c for c in bench_1["ceilings"] if c["kind"] == "measured"]
        assert [c.value for c in b.recorded_ceilings] == [c["value"] for c in measured]
    assert model.loads(model.dumps(r)) == r


@pytest.mark.parametrize("path", SCHEMA_2, ids=lambda p: p.name)
def test_every_committed_schema_2_report_loads_and_writes_back_the_same(path):
    r = model.load(path)
    assert json.loads(model.dumps(r)) == json.loads(text(path))  # nothing lost, nothing added


def test_schema_1_upgrade_keeps_cold_l2_and_interruptions():
    data = json.loads((Path(__file__).parent / "golden" / "h200_small.json").read_text())
    data["bench"]["partial"] = True
    data["bench"]["interrupted"] = "interrupted by the user (Ctrl-C) after 3 of 28 cases"
    r = model.loads(json.dumps(data))
    assert r.bench.stop == Stop(StopCause.LEGACY, detail="interrupted by the user (Ctrl-C) after 3 of 28 cases")
    old = {(c["op"], c["impl"], c["dtype"], tuple(c["shape"])): c for c in data["bench"]["cases"]}
    for c in r.bench.cases:
        flags = old[(c.op, c.impl, c.dtype, c.shape)]["flags"]
        if "l2_resident" in flags:
            assert c.rotation_sets == 1


def test_samples_equality_and_hash():
    a, b = Samples([1.0, 2.0]), Samples([1.0, 2.0])
    assert a == b and hash(a) == hash(b) and a == (1.0, 2.0) and a != Samples([2.0, 1.0])
    assert Samples.from_bytes(a.to_bytes()) == a
    with pytest.raises(ValueError):
        Samples.from_bytes(b"abc")


def test_statistics_are_the_same_alone_or_in_any_batch():
    import random

    from envcheck.model.bench import compute_stats

    rng = random.Random(3)
    made = [[rng.lognormvariate(3, 0.2) for _ in range(rng.randint(1, 300))] for _ in range(200)]
    alone = [Timing.from_samples("cuda_graph", xs).stats for xs in made]
    together = [Timing.from_samples("cuda_graph", xs) for xs in made]
    compute_stats(together)
    assert [t.stats for t in together] == alone  # exactly: padding never enters a sum or a sort
    t = Timing.from_samples("cuda_graph", [2.0, 1.0, 4.0, 3.0])
    assert (t.q1_us, t.median_us, t.q3_us) == (1.75, 2.5, 3.25)  # numpy's linear interpolation
