"""evaluate(): every subject's checks, worst first; a buggy rule never hides the others; collect()
assembles fakes of every seam into an Environment whose checks read as expected."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from envcheck import checks as checks_pkg
from envcheck import model
from envcheck.checks import evaluate
from envcheck.model import STATUSES, known
from envcheck.probes import collect as collect_mod
from envcheck.probes.collect import SECTION_KEYS, collect, new_report
from tests.fake_nvml import FakeNvml
from tests.fakes import FakeHost

H200 = model.load(Path(__file__).parent / "fixtures" / "torch" / "h200_check_report.json").environment


def test_real_h200_environment_passes_everything() -> None:
    checks = evaluate(H200)
    statuses = {c.status for c in checks}
    assert statuses <= {"pass", "skip"}, [c for c in checks if c.status not in ("pass", "skip")]
    assert len({c.id for c in checks}) == len(checks), "check ids are unique"


def test_failures_come_first() -> None:
    sections = {k: dict(v) for k, v in H200.sections.items()}
    sections["env"]["variables"] = known({"CUDA_LAUNCH_BLOCKING": "1"})
    sections["torch"]["build"] = known("cpu")
    checks = evaluate(dataclasses.replace(H200, sections=sections))
    order = [STATUSES.index(c.status) for c in checks]
    assert order == sorted(order)
    assert checks[0].id == "torch.cpu_build_with_gpu" and checks[0].status == "fail"
    assert any(c.id == "env.cuda_launch_blocking" and c.status == "warn" for c in checks)


def test_a_crashing_rule_becomes_a_failure(monkeypatch) -> None:
    def boom(env: model.Environment) -> list[model.Check]:
        raise KeyError("gpu_count")

    real = checks_pkg._rules()
    monkeypatch.setattr(checks_pkg, "_rules", lambda: (("driver", boom), *real[1:]))
    checks = evaluate(H200)
    crashed = [c for c in checks if c.id == "driver.internal"]
    assert crashed and crashed[0].status == "fail" and "KeyError" in crashed[0].finding
    assert any(c.id.startswith("gpu.") for c in checks)


def _cpu_laptop_host() -> FakeHost:
    return FakeHost(files={"/etc/os-release": 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nID=ubuntu\nVERSION_ID="24.04"\n',
                           "/proc/version": "Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103)\n"},
                    environ={"PATH": "/usr/bin"})


def test_collect_with_fakes_has_every_contract_key() -> None:
    env = collect(host=_cpu_laptop_host(), nvml=FakeNvml.fixture("h200_throttled"))
    for section, keys in SECTION_KEYS.items():
        assert set(keys) <= set(env.sections[section]), section
    assert env.gpus and env.gpus[0].get("name")
    assert env.probe_s is not None
    assert env.sections["torch_runtime"]["smoke_ok"].reason.startswith("not run")
    throttle = [c for c in evaluate(env) if c.id == "gpu.throttle.0"]
    assert throttle[0].status == "warn"


def test_collect_shuts_nvml_down_and_survives_a_crashing_probe(monkeypatch) -> None:
    def broken(host: object) -> dict:
        raise ValueError("unexpected /proc format")

    monkeypatch.setattr(collect_mod.cuda, "probe_cuda", broken)
    nvml = FakeNvml.fixture("h200")
    env = collect(host=_cpu_laptop_host(), nvml=nvml)
    assert nvml.shutdown_count >= 1
    assert all(f.reason == "probe crashed: ValueError: unexpected /proc format"
               for f in env.sections["cuda"].values())
    assert env.sections["driver"]["driver_version"].value == "580.159.04"


def test_machine_without_nvidia_driver_fails_once() -> None:
    env = collect(host=_cpu_laptop_host(), nvml=FakeNvml.fixture("h200", init_error="NVMLError_LibraryNotFound"))
    failed = [c for c in evaluate(env) if c.status == "fail"]
    assert [c.id for c in failed] == ["driver.nvml"]
    assert failed[0].finding.startswith("no NVIDIA driver")


def test_runtime_probes_run_concurrently(monkeypatch) -> None:
    import threading
    import time

    from envcheck.probes import torch_probe, triton_probe

    barrier = threading.Barrier(2, timeout=5)

    def slow_torch(host: object, timeout: float) -> dict:
        barrier.wait()  # would time out if the Triton probe were not running at the same time
        time.sleep(0.05)
        return {"import_ok": known(True)}

    def slow_triton(host: object, timeout: float) -> dict:
        barrier.wait()
        return {"smoke_ok": known(True)}

    monkeypatch.setattr(torch_probe, "probe_torch_runtime", slow_torch)
    monkeypatch.setattr(triton_probe, "probe_triton_runtime", slow_triton)
    env = collect(host=_cpu_laptop_host(), nvml=FakeNvml.fixture("h200"), runtime=True)
    assert env.get("torch_runtime", "import_ok") is True
    assert env.get("triton_runtime", "smoke_ok") is True
    assert env.fact("torch_runtime", "smoke_ok").reason == "not reported by the probe"


def test_new_report_stamps() -> None:
    r = new_report("check", H200, evaluate(H200))
    assert r.kind == "check" and r.host
    assert len(r.created) == 20 and r.created.endswith("Z") and r.created[10] == "T"
    again = model.loads(model.dumps(r))
    assert again.checks == r.checks and again.environment.gpus[0].get("name") == "NVIDIA H200"
