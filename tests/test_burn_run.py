"""The burn as a whole: one worker per GPU (scripted fakes that hang, crash or print garbage beside
one that finishes), the command end to end on the CPU, Ctrl-C and SIGTERM keeping a partial
report, bad options, and the report rendered from its JSON alone in both languages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from fake_burn_worker import command
from in_lang import render_html, render_markdown

from envcheck import cli, model
from envcheck.analysis import analyse
from envcheck.burn import protocol
from envcheck.burn.launch import burn_gpus
from envcheck.burn.protocol import plans
from envcheck.burn.telemetry import TelemetrySample
from envcheck.errors import UsageError
from envcheck.model import BenchDevice, Report, StopCause
from envcheck.model.burn import Burn, BurnGpu, MemtestRecord
from envcheck.model.node import XidScan
from tests.factories import environment

ROOT = Path(__file__).resolve().parent.parent
DEVICE = BenchDevice("cuda", "NVIDIA H100 80GB HBM3", 0, pci_bus_id="00000000:00:06.0")


def ev(event: protocol.Event) -> dict:
    return {"emit": protocol.encode(event)}


def finishing(index: int) -> list[dict]:
    dev = BenchDevice("cuda", "NVIDIA H100 80GB HBM3", index)
    return [ev(protocol.Started(dev)),
            ev(protocol.Sampled(TelemetrySample(0.1, {"power_w": 690.0, "power_limit_w": 700.0}, ("sw_power_cap",)))),
            ev(protocol.PhaseStarted("gemm", "bf16", (64, 64, 64), "flop", 0.2, 1.0)),
            *[ev(protocol.IntervalDone("gemm", 0.3 + k, 1.0, 7e14, 100)) for k in range(6)],
            ev(protocol.PhaseEnded("gemm")),
            ev(protocol.PhaseStarted("bandwidth", "fp32", (1 << 20,), "byte", 6.5, 0.5)),
            ev(protocol.IntervalDone("bandwidth", 7.0, 0.5, 1e12, 10)), ev(protocol.PhaseEnded("bandwidth")),
            ev(protocol.PhaseStarted("memtest", "int32", (1 << 20,), "byte", 7.1, 0.5)),
            ev(protocol.IntervalDone("memtest", 7.5, 0.4, 2e9, 1)),
            ev(protocol.PhaseEnded("memtest", memtest=MemtestRecord(1 << 20, 1 << 21, ("address",), 1, 0.4))),
            {"done": True}]


def run_fakes(tmp_path: Path, scripts: dict[str, list[dict]], **kw) -> Burn:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(scripts))
    ps = plans([int(k) for k in scripts], 0.01, "cuda")
    return burn_gpus(ps, 0.01, command=command(script), xid_scanner=lambda: XidScan(None), **kw)


def _gone(pid: int) -> bool:
    try:
        p = psutil.Process(pid)
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_hung_gpu_fails_with_what_it_sent_and_the_other_gpu_finishes(tmp_path):
    hang = [{"pid_file": str(tmp_path / "w{index}.pid")}, *finishing(0)[:5], {"sleep": 60}]
    b = run_fakes(tmp_path, {"0": hang, "1": finishing(1)}, stall_s=1.5)
    hung, ok = b.gpus
    assert hung.stop.cause == StopCause.HUNG and len(hung.phases[0].t_s) == 2 and not hung.phases[0].finished
    assert hung.telemetry is not None and ok.stop is None and ok.phases[0].finished
    a = analyse(Report("t", "2026-11-25T00:00:00Z", "h", "burn", environment(), burn=b)).burn
    assert [f.key for f in a.gpus[0].findings] == ["worker_hung"] and a.gpus[1].findings == ()
    assert a.verdict == "fail"
    assert _gone(int((tmp_path / "w0.pid").read_text())), "the hung worker was orphaned"


def test_a_crashed_gpu_keeps_its_intervals_and_garbage_is_counted_not_fatal(tmp_path):
    crash = [*finishing(0)[:4], {"raw": "cuBLAS chatter"}, {"emit": {"event": "chatter"}},
             {"stderr": "Segmentation fault in libcuda"}, {"signal": "SIGSEGV"}]
    b = run_fakes(tmp_path, {"0": crash, "1": finishing(1)})
    g = b.gpus[0]
    assert g.stop.cause == StopCause.CRASHED and g.stop.signal == "SIGSEGV" and len(g.phases[0].t_s) == 1
    assert g.notes[-1].key == "burn.ignored_output" and g.notes[-1].params["lines"] == 1
    assert g.stop.detail == "Segmentation fault in libcuda"
    assert b.gpus[1].stop is None


def _cli(args: list[str], tmp_path: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "envcheck", *args, "--out-dir", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path, **kw)


@pytest.mark.slow
@pytest.mark.xdist_group("cpu_burn")
def test_a_cpu_burn_end_to_end_passes_and_renders_from_its_json_alone(cpu_burn, tmp_path):
    done, folder = cpu_burn  # conftest: one real CPU burn for this test and test_outputs'
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    (path,) = folder.glob("*_burn.json")
    report = model.load(path)
    assert report.kind == "burn" and report.burn.stopped is None
    g = report.burn.gpus[0]
    assert [p.phase for p in g.phases] == ["gemm", "bandwidth", "memtest"] and g.memtest.passes >= 1
    assert (folder / f"{path.stem}.md").exists() and (folder / f"{path.stem}.html").exists()
    rendered = tmp_path / "zh"
    assert cli.main(["render", str(path), "--lang", "zh-CN", "--out", str(rendered)]) == 0
    md = next(rendered.glob("*.md")).read_text(encoding="utf-8")
    assert "老化测试" in md and "burn." not in md.replace("_burn", "")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_keeps_a_partial_report_and_exits_130(tmp_path, sig):
    proc = _cli(["burn", "--cpu", "--minutes", "5"], tmp_path)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, "burn ended early"
            if "gemm" in line.lower():  # the phase line: "cpu: GEMM with its correctness checks (fp32, ...)"
                break
        time.sleep(3)  # a few intervals
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    report = model.load(next((tmp_path / "out").glob("*_burn.json")))
    b = report.burn
    assert b.stopped == (StopCause.USER if sig == signal.SIGINT else StopCause.SIGNAL)
    assert b.gpus[0].phases and len(b.gpus[0].phases[0].t_s) >= 1, err[-3000:]
    assert analyse(report).burn.verdict == "stopped"


def test_bad_options_are_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["burn", "--minutes", "0"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["burn", "--gpus", "0,x"])
    assert e.value.code == 2
    from envcheck.commands import burn as burn_cmd

    monkey_env = environment()  # one GPU
    args = cli.parse(["burn", "--gpus", "3", "--out-dir", str(tmp_path)])
    with pytest.raises(Exception) as e:
        burn_cmd.execute(args, collect=lambda **kw: monkey_env)
    assert "GPU 3 does not exist" in str(e.value)
    args = cli.parse(["burn", "--format", "pdf", "--out-dir", str(tmp_path)])
    with pytest.raises(Exception) as e:
        burn_cmd.execute(args, collect=lambda **kw: monkey_env)
    assert "--format" in str(e.value)
    for argv, says in ((["--control", "slow_gemm"], "two GPUs or more"),
                       (["--control", "flip_bit", "--control-gpu", "2"], "not one of the GPUs burned"),
                       (["--control-gpu", "0"], "give --control too")):
        args = cli.parse(["burn", "--out-dir", str(tmp_path), *argv])
        with pytest.raises(UsageError, match=says):
            burn_cmd.execute(args, collect=lambda **kw: monkey_env)


def _hostile_report() -> Report:
    name = "<script>alert(1)</script> | *x*"
    dev = BenchDevice("cuda", name, 0)
    m = MemtestRecord(1 << 30, 1 << 31, ("walking_ones",), 2, 10.0)
    return Report("0.1", "2026-11-25T00:00:00Z", "host<b>", "burn", environment(),
                  burn=Burn(1.0, "2026-11-25T00:00:00Z", 60.0, (BurnGpu(0, dev, memtest=m),)))


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_machine_strings_are_escaped_and_every_key_is_translated(lang):
    r = _hostile_report()
    html = render_html(r, lang)
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    md = render_markdown(r, lang)
    assert "burn.finding" not in md and "burn.col" not in md
    assert "\\<script\\>" in md and "\\| \\*x\\*" in md  # Markdown-escaped, table cell intact
    assert r.burn is not None and analyse(r).burn.verdict == "fail"  # no phase ran: nothing passes


def test_a_report_with_a_burn_reads_back_equal():
    b = run_burn_model()
    r = Report("0.1", "2026-11-25T00:00:00Z", "h", "burn", environment(), burn=b)
    assert model.loads(model.dumps(r)) == r


def run_burn_model() -> Burn:
    from tests.test_burn_analysis import POWER_OK, gpu, replay

    return Burn(1.0, "2026-11-25T00:00:00Z", 60.0, (gpu(replay(POWER_OK)),), "/dev/kmsg")


@pytest.mark.slow
def test_run_with_burn_adds_the_burn_section_and_its_verdict_decides_the_exit(tmp_path):
    from test_cli_run import deps, execute, parse

    out_dir = tmp_path / "reports"
    rc, out, err = execute(parse("--quick", "--ops", "relu", "--burn", "0.02", "--out-dir", str(out_dir),
                                 "--format", "json,md"), deps(tmp_path, None))
    assert rc == 0, err[-3000:]
    (path,) = sorted(out_dir.glob("*.json"))
    r = model.load(path)
    assert r.kind == "run" and r.bench.cases and r.burn is not None and r.burn.gpus[0].memtest is not None
    assert path.with_suffix(".md").exists(), err[-3000:]
    assert "## Burn-in" in path.with_suffix(".md").read_text(encoding="utf-8")


def test_an_anonymized_burn_report_names_no_host_and_no_gpu_uuid():
    from envcheck.anonymize import Anonymizer

    uuid = "GPU-8d0ff531-a2cd-2527-7669-e66277d6bc28"
    dev = BenchDevice("cuda", "NVIDIA H200", 0, uuid=uuid, pci_bus_id="00000000:00:06.0")
    r = Report("0.1", "2026-11-25T00:00:00Z", "rack7-node3", "burn", environment(),
               burn=Burn(1.0, "2026-11-25T00:00:00Z", 60.0, (BurnGpu(0, dev),)))
    text = model.dumps(Anonymizer(b"k" * 32, hosts=["rack7-node3"]).report(r))
    assert "rack7-node3" not in text and "8d0ff531" not in text and '"anonymized": true' in text


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_burn_html_is_well_formed_with_its_charts_and_a_verdict_per_gpu(lang):
    from test_render import parse

    from envcheck.probes.xid import parse_xids
    from tests.test_burn_analysis import KMSG_AFTER, POWER_OK, SECOND, gpu, replay

    b = Burn(1.0, "2026-11-25T00:00:00Z", 60.0,
             (gpu(replay(POWER_OK)), gpu(replay({**POWER_OK, "nvmlDeviceGetPowerUsage": [300_000]}), device=SECOND)),
             "/dev/kmsg", (), parse_xids(KMSG_AFTER)[1:])
    r = Report("0.1", "2026-11-25T00:00:00Z", "h", "burn", environment(), burn=b)
    p = parse(render_html(r, lang))
    assert p.errors == [] and p.stack == []
    assert p.text.count("GPU 0") >= 1 and "burn" in p.ids
    assert render_html(r, lang).count("<svg") == 4  # clocks, power, temperature, TFLOP/s (no streaming data)
    assert analyse(r).burn.verdict == "fail"  # GPU 1 short of power, GPU 0 an Xid
