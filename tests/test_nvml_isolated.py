"""NVML read in a child process: a libnvidia-ml that segfaults or hangs becomes a failed check, the
answers given before the crash still count, and the child asks every question the probes ask."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envcheck.checks import evaluate
from envcheck.harness.spawn import spawn
from envcheck.probes import gpus
from envcheck.probes.collect import collect
from envcheck.probes.host import Host
from envcheck.probes.nvml_child import DEVICE_QUERIES, PROCESS_LISTS, SYSTEM_QUERIES
from envcheck.probes.nvml_isolated import IsolatedNvml
from envcheck.probes.nvml_table import RecordingNvml, table_key
from tests.fake_nvml import FakeNvml
from tests.fakes import FakeHost

ROOT = Path(__file__).resolve().parents[1]

# A stand-in for nvidia-ml-py whose library misbehaves as a broken driver install does. GPU 0
# answers; ``MODE`` decides what nvmlInit or GPU 1 does.
FAKE_PYNVML = '''
import os, signal, time

MODE = {mode!r}


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


def _die():
    if MODE.endswith("segv"):
        os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(600)


def nvmlInit():
    if MODE.startswith("init"):
        _die()


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return "566.36"


def nvmlSystemGetCudaDriverVersion_v2():
    return 12070


def nvmlDeviceGetCount():
    return 2


def nvmlDeviceGetHandleByIndex(i):
    return ("handle", i)


def nvmlDeviceGetName(h):
    if h[1] == 1 and MODE.startswith("gpu1"):
        _die()
    return "NVIDIA GeForce RTX 4090"


def nvmlDeviceGetEccMode(h):
    raise NVMLError_NotSupported("Not Supported")
'''


def fake_pynvml(tmp_path: Path, mode: str) -> Path:
    folder = tmp_path / f"pynvml_{mode}"
    folder.mkdir()
    (folder / "pynvml.py").write_text(FAKE_PYNVML.format(mode=mode), encoding="utf-8")
    return folder


def test_the_child_asks_every_question_the_probes_ask() -> None:
    """The child's fixed list must cover what gpus.py reads, or a replay would lack answers."""
    for fixture in ("h200", "h200_busy", "a100_r525", "rtx4090_wsl"):
        rec = RecordingNvml(FakeNvml.fixture(fixture))
        gpus.probe_driver(rec)
        gpus.probe_gpus(rec)
        planned = {table_key(name, args) for name, args in DEVICE_QUERIES} | {"nvmlDeviceGetHandleByIndex"}
        for g in rec.table.get("gpus", []):
            assert set(g) <= planned, (fixture, set(g) - planned)
        system = {k for k in rec.table if k.startswith("nvml")}
        assert {k for k in system if not k.startswith("nvmlSystemGetProcessName")} <= set(SYSTEM_QUERIES), fixture
    assert set(PROCESS_LISTS) <= {name for name, _ in DEVICE_QUERIES}


def test_a_segfault_in_nvml_init_is_a_failed_check_not_a_dead_envcheck(tmp_path: Path) -> None:
    nvml = IsolatedNvml(Host(), timeout=20, paths=[str(fake_pynvml(tmp_path, "init_segv"))])
    env = collect(host=FakeHost(), nvml=nvml)
    assert env.get("driver", "nvml_process_error") == "crashed with SIGSEGV in nvmlInit"
    [c] = [c for c in evaluate(env) if c.id == "driver.nvml"]
    assert c.status == "fail" and "NVML crashed with SIGSEGV in nvmlInit" in c.finding
    assert "reinstall the NVIDIA driver" in c.fix


def test_a_hang_in_nvml_init_is_killed_and_reported(tmp_path: Path) -> None:
    nvml = IsolatedNvml(Host(), timeout=2, paths=[str(fake_pynvml(tmp_path, "init_hang"))])
    t = time.perf_counter()
    env = collect(host=FakeHost(), nvml=nvml)
    assert time.perf_counter() - t < 45  # not the hang's length
    [c] = [c for c in evaluate(env) if c.id == "driver.nvml"]
    assert c.status == "fail" and "NVML hung (killed after 2 s) in nvmlInit" in c.finding
    assert "reboot" in c.fix


@pytest.mark.parametrize("mode", ["gpu1_segv", "gpu1_hang"])
def test_a_crash_on_one_gpu_keeps_the_gpus_read_before_it(tmp_path: Path, mode: str) -> None:
    nvml = IsolatedNvml(Host(), timeout=2.5, paths=[str(fake_pynvml(tmp_path, mode))])
    env = collect(host=FakeHost(), nvml=nvml)
    assert env.get("driver", "driver_version") == "566.36"
    first, second = env.gpus
    assert first.get("name") == "NVIDIA GeForce RTX 4090" and first.lost is None
    assert first.facts["ecc_mode_current"].reason == "not supported on this GPU (NVML: Not Supported)"
    what = "crashed with SIGSEGV" if mode.endswith("segv") else "hung"
    assert second.lost and what in second.lost and "nvmlDeviceGetName on GPU 1" in second.lost
    [c] = [c for c in evaluate(env) if c.id == "driver.gpus"]
    assert c.status == "fail" and "GPU 1" in c.finding and "nvidia-smi -q -i 1" in c.fix


@pytest.mark.slow
def test_envcheck_check_survives_a_segfaulting_libnvidia_ml(tmp_path: Path) -> None:
    """End to end: before isolation this exited with status -11 (139 in a shell) and printed nothing."""
    folder = fake_pynvml(tmp_path, "init_segv")
    env = {**os.environ, "PYTHONPATH": f"{folder}:{ROOT}"}
    res = subprocess.run([sys.executable, "-m", "envcheck", "check", "--format", "json", "--timeout", "60"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    checks = {c["id"]: c for c in json.loads(res.stdout)["checks"]}
    assert checks["driver.nvml"]["status"] == "fail"
    assert "crashed with SIGSEGV in nvmlInit" in checks["driver.nvml"]["finding"]


def test_the_child_reports_each_answer_before_the_next_call(tmp_path: Path) -> None:
    """The child alone: one event per answer, and a crash leaves the earlier ones, the last naming the call."""
    events: list = []
    out = spawn("envcheck.probes.nvml_child:read", timeout=60, on_event=events.append,
                paths=[str(fake_pynvml(tmp_path, "gpu1_segv"))], site=False)
    assert out.returncode == -11 and not out.done
    assert events[-1] == {"event": "calling", "gpu": 1, "key": "nvmlDeviceGetName"}
    assert {"event": "answer", "gpu": 0, "key": "nvmlDeviceGetName", "value": "NVIDIA GeForce RTX 4090"} in events
