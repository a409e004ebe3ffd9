"""Outputs for the systems around a fleet: JUnit XML for CI, a Prometheus textfile for node_exporter and the
one-line health verdict for Slurm and node-problem-detector, each checked with a real parser (xmlschema
against the JUnit schema CI systems read, prometheus_client's text parser) on committed reports."""

from __future__ import annotations

import dataclasses
import functools
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from in_lang import health_line, junit_xml
from prometheus_client.parser import text_string_to_metric_families

from envcheck import model
from envcheck.analysis import analyse
from envcheck.analysis.verdict import verdict
from envcheck.cli import main
from envcheck.commands.run import exit_status
from envcheck.model import Check
from envcheck.render.health import MAX_LINE
from envcheck.render.prometheus import prometheus_text

ROOT = Path(__file__).resolve().parents[1]
REPORTS = [ROOT / "tests" / "golden" / n for n in ("cpu_small.json", "h200_small.json", "node_x2.json",
                                                    "fleet_2x.json")] + [
    ROOT / "tests" / "fixtures" / "torch" / "h200_check_report.json",
    ROOT / "evidence" / "2026-11-22_2139Z_vm_h200.json.gz",
    ROOT / "evidence" / "2026-11-22_2326Z_vm_2x-h200_node.json.gz",
]
SNAPSHOTS = ROOT / "tests" / "fixtures" / "snapshots" / "corpus"


@functools.cache
def _schema():  # -> xmlschema.XMLSchema
    """The JUnit schema CI systems read; a test that needs it skips where xmlschema (a test extra) is missing."""
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(str(ROOT / "tests" / "fixtures" / "junit" / "junit-10.xsd"))


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {f.name: [(s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_every_output_parses_and_tells_the_same_verdict(path: Path) -> None:
    a = analyse(model.load(path))
    v = verdict(a)
    xml = junit_xml(a)
    _schema().validate(xml)
    doc = _schema().to_dict(xml)
    first = doc["testsuite"][0]
    assert first["@name"] == "envcheck.verdict"
    assert (int(doc["@failures"]) + int(doc["@errors"]) == 0) == v.ok  # each problem counted once, somewhere
    fams = _families(prometheus_text(a))
    assert fams["envcheck_verdict_ok"][0][1] == (1.0 if v.ok else 0.0)
    line, status = health_line(a)
    assert (line == "OK") == v.ok and status == (0 if v.ok else 1)
    assert len(line) <= MAX_LINE and "\n" not in line
    if a.report.kind == "run":
        assert exit_status(a, stopped=False) == status


def test_junit_counts_each_failed_check_and_case() -> None:
    a = analyse(model.load(ROOT / "tests" / "golden" / "cpu_small.json"))
    doc = _schema().to_dict(junit_xml(a))
    checks = next(s for s in doc["testsuite"] if s["@name"] == "envcheck.checks")
    assert int(checks["@tests"]) == len(a.report.checks)
    assert int(checks["@failures"]) == sum(c.status == "fail" for c in a.report.checks)
    assert int(checks["@skipped"]) == sum(c.status == "skip" for c in a.report.checks)
    bench = next(s for s in doc["testsuite"] if s["@name"].startswith("envcheck.cpu"))
    results = a.benches[0].results
    assert int(bench["@tests"]) == len(results)
    assert int(bench["@failures"]) + int(bench["@errors"]) == sum(r.status != "pass" for r in results)


def test_junit_survives_hostile_machine_text() -> None:
    report = model.load(ROOT / "tests" / "fixtures" / "torch" / "h200_check_report.json")
    evil = "<b>&amp;\x1b[31m\x00\u202e\ud800\uffff]]></b>"
    report = dataclasses.replace(report, host=evil, checks=(
        Check("gpu.ecc.0", "fail", f"title {evil}", f"finding {evil}", fix=f"fix {evil}", details=f"a\n{evil}"),))
    xml = junit_xml(analyse(report))
    _schema().validate(xml)
    xml.encode("utf-8")  # no lone surrogate reaches the file
    assert "\x1b" not in xml and "\u202e" not in xml and "\x00" not in xml
    assert "\\u{001b}[31m" in xml and "&lt;b&gt;&amp;amp;" in xml


def test_prometheus_numbers_are_the_analysis_numbers_in_base_units() -> None:
    a = analyse(model.load(ROOT / "evidence" / "2026-11-22_2139Z_vm_h200.json.gz"))
    fams = _families(prometheus_text(a))
    r = next(r for r in a.benches[0].results if r.gbps is not None and r.case.op == "vector_add"
             and r.case.impl == "triton")
    shape = "x".join(str(d) for d in r.case.shape)
    [(labels, value)] = [(lb, val) for lb, val in fams["envcheck_case_bandwidth_bytes_per_second"]
                         if lb["op"] == "vector_add" and lb["impl"] == "triton" and lb["shape"] == shape
                         and lb["dtype"] == r.case.dtype]
    assert value == pytest.approx(r.gbps * 1e9)
    assert labels["gpu"] == "0"
    ok = [val for lb, val in fams["envcheck_case_ok"]]
    assert len(ok) == len(a.benches[0].results)
    statuses = {lb["check"]: lb["status"] for lb, _ in fams["envcheck_check_status"]}
    assert statuses == {c.id: c.status for c in a.report.checks}


def test_prometheus_node_and_fleet_series() -> None:
    node = analyse(model.load(ROOT / "evidence" / "2026-11-22_2326Z_vm_2x-h200_node.json.gz"))
    fams = _families(prometheus_text(node))
    busbw = {(lb["op"], lb["size_bytes"]): val for lb, val in fams["envcheck_collective_busbw_bytes_per_second"]}
    row = node.node.sweeps[0].rows[-1]
    assert busbw[(row.op, str(row.size_bytes))] == pytest.approx(row.busbw_gbps * 1e9)
    assert fams["envcheck_node_ok"][0][1] == (0.0 if node.node.problems else 1.0)
    fleet = analyse(model.load(ROOT / "tests" / "golden" / "fleet_2x.json"))
    hosts = {lb["host"]: val for lb, val in _families(prometheus_text(fleet))["envcheck_fleet_node_ok"]}
    assert hosts == {v.host: (1.0 if v.status == "pass" else 0.0) for v in fleet.fleet.verdicts}


def test_health_line_names_the_first_problem_in_one_short_line() -> None:
    a = analyse(model.load(ROOT / "tests" / "golden" / "cpu_small.json"))
    line, status = health_line(a)
    assert status == 1 and line.startswith("[node_problem] driver.nvml: ")
    assert len(line) <= MAX_LINE


# --------------------------------------------------------------------------- the commands


def test_export_writes_each_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = str(ROOT / "tests" / "golden" / "node_x2.json")  # a failing report: every format exits 1
    assert main(["export", src, "--format", "junit", "--out", str(tmp_path / "r.xml")]) == 1
    _schema().validate(str(tmp_path / "r.xml"))
    assert main(["export", src, "--format", "junit", "--out", str(tmp_path / "r.xml")]) == 2  # never overwritten
    assert "already exists" in capsys.readouterr().err
    prom = tmp_path / "envcheck.prom"
    prom.write_text("old\n")
    assert main(["export", src, "--format", "prometheus", "--out", str(prom)]) == 1
    assert "envcheck_verdict_ok" in prom.read_text()  # a textfile is replaced whole, as node_exporter expects
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert main(["export", src, "--format", "prometheus", "--out", str(tmp_path)]) == 2
    capsys.readouterr()
    assert main(["export", src, "--format", "health"]) == 1
    assert capsys.readouterr().out.startswith("[node_problem] ")
    assert main(["export", str(ROOT / "tests" / "golden" / "h200_small.json"), "--format", "health"]) == 0
    assert capsys.readouterr().out == "OK\n"


def test_render_writes_junit_and_prometheus_beside_the_report(tmp_path: Path) -> None:
    src = tmp_path / "r.json"
    src.write_bytes((ROOT / "tests" / "golden" / "h200_small.json").read_bytes())
    assert main(["render", str(src), "--format", "junit,prometheus"]) == 0
    _schema().validate(str(tmp_path / "r.junit.xml"))
    assert "envcheck_case_ok" in (tmp_path / "r.prom").read_text()


def _fake_scontrol(folder: Path, rc: int = 0) -> Path:
    log = folder / "scontrol.args"
    script = folder / "scontrol"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {log}\nexit {rc}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return log


def _check(args: list[str], path: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": path, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "envcheck", "check", *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=ROOT)


@pytest.fixture
def live_check(monkeypatch: pytest.MonkeyPatch):
    """``check`` of "this machine" as a snapshot recorded it: --slurm-drain refuses a replay, so the
    snapshot goes in behind collect's seams instead."""
    from envcheck import snapshot
    from envcheck.probes import collect as collect_mod

    real = collect_mod.collect

    def use(name: str) -> None:
        host, nvml = snapshot.replay(snapshot.load(SNAPSHOTS / name))
        monkeypatch.setattr(collect_mod, "collect", lambda **kw: real(**{**kw, "host": host, "nvml": nvml}))
    return use


def test_check_health_drains_a_slurm_node_with_the_reason(tmp_path: Path, capsys, monkeypatch, live_check) -> None:
    log = _fake_scontrol(tmp_path)
    live_check("linux-libcuda-so-missing.json")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-n17")
    assert main(["check", "--format", "health", "--slurm-drain"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("[node_problem] ") and len(out.strip()) <= MAX_LINE
    args = log.read_text().splitlines()
    assert args[:3] == ["update", "NodeName=gpu-n17", "State=DRAIN"]
    assert args[3].startswith("Reason=envcheck: ")


def test_slurm_drain_without_scontrol_or_without_health_is_a_usage_error(tmp_path: Path, capsys, monkeypatch,
                                                                          live_check) -> None:
    live_check("linux-libcuda-so-missing.json")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-n17")
    assert main(["check", "--format", "health", "--slurm-drain"]) == 2
    err = capsys.readouterr().err
    assert "scontrol is not on PATH" in err and err.count("\n") == 1
    assert main(["check", "--slurm-drain"]) == 2
    assert "--slurm-drain goes with --format health" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["n[1-100]", "ALL", "all", "-h", "--help", "gpu-n17\nState=RESUME", "n1,n2",
                                  "n1 n2", " n1", "n1-", ".n1", "n1;reboot", "n1=x", "\u202en1", "n" * 200, "n1\x00"])
def test_slurm_drain_refuses_what_is_not_one_node_name(tmp_path: Path, capsys, monkeypatch, live_check,
                                                        name: str) -> None:
    """A hostlist, ALL, an option or a second line in SLURMD_NODENAME would drain other nodes, or the
    whole cluster: one line, exit 2, scontrol never run (issue 36, item 14)."""
    log = _fake_scontrol(tmp_path)
    live_check("linux-libcuda-so-missing.json")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(os, "environ", {**os.environ, "SLURMD_NODENAME": name})  # setenv refuses a NUL
    assert main(["check", "--format", "health", "--slurm-drain"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "not one node's name" in captured.err
    assert "Traceback" not in captured.err and not log.exists()


def test_slurm_drain_refuses_a_host_name_that_is_not_one_node_name(tmp_path: Path, capsys, monkeypatch,
                                                                    live_check) -> None:
    import socket

    log = _fake_scontrol(tmp_path)
    live_check("linux-libcuda-so-missing.json")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    monkeypatch.setattr(socket, "gethostname", lambda: "n[1-4].cluster")
    assert main(["check", "--format", "health", "--slurm-drain"]) == 2
    assert "the host name" in capsys.readouterr().err and not log.exists()


@pytest.mark.parametrize("name", ["gpu-n17", "node_01", "n1.rack2", "A100x8"])
def test_one_node_name_is_drained(tmp_path: Path, monkeypatch, name: str) -> None:
    from envcheck import slurm

    log = _fake_scontrol(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURMD_NODENAME", name)
    assert slurm.drain("envcheck: test") == name
    assert log.read_text().splitlines()[1] == f"NodeName={name}"


def test_slurm_drain_refuses_a_replay(tmp_path: Path, capsys, monkeypatch) -> None:
    """``check --replay OTHER.json --slurm-drain`` would drain this node for another machine's findings."""
    log = _fake_scontrol(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-n17")
    snap = str(SNAPSHOTS / "linux-libcuda-so-missing.json")
    assert main(["check", "--replay", snap, "--format", "health", "--slurm-drain"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "--replay" in captured.err
    assert not log.exists()


def test_check_formats_for_ci_and_prometheus(tmp_path: Path) -> None:
    snap = str(SNAPSHOTS / "linux-libcuda-so-missing.json")
    done = _check(["--replay", snap, "--format", "junit"], os.environ["PATH"])
    assert done.returncode == 1, done.stderr  # a check failed, whatever the format
    _schema().validate(done.stdout)
    done = _check(["--replay", snap, "--format", "prometheus"], os.environ["PATH"])
    fams = _families(done.stdout)
    assert fams["envcheck_verdict_ok"][0][1] == 0.0


def test_run_and_history_default_to_the_users_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envcheck import userdirs

    monkeypatch.delenv(userdirs.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert userdirs.reports_dir() == tmp_path / "data" / "envcheck" / "reports"
    monkeypatch.setenv(userdirs.ENV_VAR, str(tmp_path / "mine"))
    assert userdirs.out_dir(None) == str(tmp_path / "mine")
    assert userdirs.out_dir("here") == "here"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "a.json").write_bytes((ROOT / "evidence" / "2026-11-22_2139Z_vm_h200.json.gz").read_bytes())
    assert main(["history"]) == 0


@pytest.mark.parametrize("by_variable", [True, False])
def test_bench_defaults_to_the_same_reports_folder_as_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str], by_variable: bool) -> None:
    """Issue 38 item 1: ``envcheck bench FILE.py`` without ``--out-dir`` used to end in a TypeError."""
    from envcheck import userdirs
    from envcheck.errors import UsageError
    from envcheck.userbench import discover

    monkeypatch.delenv(userdirs.ENV_VAR, raising=False)
    if by_variable:
        monkeypatch.setenv(userdirs.ENV_VAR, str(tmp_path / "mine"))
        folder = tmp_path / "mine"
    else:
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        folder = tmp_path / "data" / "envcheck" / "reports"

    def stop(source: str) -> list[object]:  # the folder is settled before the user's code is read
        raise UsageError("stopped here")

    monkeypatch.setattr(discover, "discover", stop)
    assert main(["bench", str(ROOT / "examples" / "softmax_wsum.py"), "--quick"]) == 2
    assert "stopped here" in capsys.readouterr().err
    assert folder.is_dir()


@pytest.mark.slow
@pytest.mark.xdist_group("cpu_burn")
def test_a_cpu_burn_writes_junit_and_prometheus_with_its_verdict(cpu_burn) -> None:
    done, tmp_path = cpu_burn  # conftest: one real CPU burn for this test and test_burn_run's
    assert done.returncode == 0, done.stderr
    [xml] = tmp_path.glob("*.junit.xml")
    doc = _schema().to_dict(str(xml))
    burn = next(s for s in doc["testsuite"] if s["@name"] == "envcheck.burn")
    assert burn["@tests"] == "1" and burn["@failures"] == "0"
    [prom] = tmp_path.glob("*.prom")
    fams = _families(prom.read_text())
    assert fams["envcheck_burn_gpu_ok"][0][1] == 1.0
    assert fams["envcheck_verdict_ok"][0] == ({"kind": "burn"}, 1.0)
    [report] = tmp_path.glob("*.json")
    line, status = health_line(analyse(model.load(report)))
    assert (line, status) == ("OK", 0)


def test_one_failed_check_is_one_junit_failure_and_check_and_export_exit_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38 item 7: JUnit counted one failed check twice (the verdict and the check); ``check --format
    junit`` exited 1 and ``export --format junit`` of the same report 0; health cut mid-word."""
    snap = str(SNAPSHOTS / "linux-libcuda-so-missing.json")
    saved = tmp_path / "check.json"
    for fmt in ("junit", "prometheus", "health"):
        rc = main(["check", "--replay", snap, "--format", fmt, *(["--out", str(saved)] if fmt == "junit" else [])])
        out = capsys.readouterr().out
        assert rc == 1 and main(["export", str(saved), "--format", fmt]) == 1, fmt
        if fmt == "junit":
            doc = _schema().to_dict(out)
            failed = sum(c.status == "fail" for c in model.load(saved).checks)
            assert int(doc["@failures"]) + int(doc["@errors"]) == failed
        capsys.readouterr()


def test_the_health_line_is_cut_at_a_word_keeping_the_check_s_name_and_the_count() -> None:
    """The check's name heads the line; the cut falls between words; "(+1 more)" is never cut off."""
    from envcheck.analysis.verdict import Reason, Verdict
    from envcheck.render import health

    long = "no NVIDIA driver: libnvidia-ml.so.1 not found (NVML Shared Library Not Found) " * 2
    v = Verdict("fail", (Reason("check_failed", (("check", "driver.nvml"), ("finding", long))),
                         Reason("check_failed", (("check", "torch.build"), ("finding", "x")))))
    line = health._line(health.PREFIX, v, MAX_LINE)
    assert len(line) <= MAX_LINE and line.startswith("[node_problem] driver.nvml")
    assert line.endswith("... (+1 more)") and " (NV..." not in line
    assert line[: -len("... (+1 more)")] in health.PREFIX + "driver.nvml: " + long
