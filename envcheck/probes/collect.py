"""Assemble every probe into one ``Environment``, and an ``Environment`` into a ``Report``.

Each section is probed behind its own guard: a probe that raises (a bug, since probes are
written never to) turns into ``missing("probe crashed: ...")`` for that section's keys and
the other sections still come back. Every key of the fact contract is present in every
section, as a value or a reason.

The two runtime probes (torch and Triton, each a subprocess that may take seconds) run in
threads while the fast probes read files and NVML, so ``envcheck check`` costs about as
long as the slower of the two children.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from envcheck import __version__
from envcheck.model import Bench, Check, Environment, Facts, Gpu, Report, missing
from envcheck.probes import torch_probe, triton_probe
from envcheck.probes.host import Host, default_host

# The fact key contract: every key below is present in its section after collect().
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "system": ("os_name", "os_id", "os_version", "kernel", "arch", "cpu_model", "cpu_cores_logical",
               "cpu_cores_physical", "ram_total_bytes", "ram_available_bytes", "disk_path", "disk_free_bytes",
               "python_version", "python_executable", "python_env", "python_env_path", "container"),
    "wsl": ("is_wsl", "wsl_version", "distro_name", "dxg_present", "lib_dir_present", "lib_dir_files",
            "libcuda_symlinks", "loader_path_has_wsl_lib", "linux_driver_in_wsl"),
    "driver": ("driver_version", "cuda_driver_version", "nvml_version", "nvml_library", "nvml_error", "gpu_count"),
    "cuda": ("libcuda_path", "toolkit_path", "nvcc_path", "nvcc_version", "ptxas_path", "cc_path", "python_headers"),
    "env": ("variables",),
    "torch": torch_probe.TORCH_KEYS,
    "torch_runtime": torch_probe.RUNTIME_KEYS,
    "triton": triton_probe.TRITON_KEYS,
    "triton_runtime": triton_probe.RUNTIME_KEYS,
}
SECTIONS = tuple(SECTION_KEYS)


def crash_reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"probe crashed: {type(exc).__name__}: {text}" if text else f"probe crashed: {type(exc).__name__}"


def complete(section: str, facts: Facts | None) -> Facts:
    """``facts`` with every contract key of ``section`` present (absent ones get a reason)."""
    facts = dict(facts or {})
    for key in SECTION_KEYS.get(section, ()):
        facts.setdefault(key, missing("not reported by the probe"))
    return facts


def guarded(section: str, probe: Callable[[], Facts]) -> Facts:
    """Run one section's probe; an exception becomes a reason on each of its keys."""
    try:
        return complete(section, probe())
    except Exception as e:  # noqa: BLE001 - a buggy probe must not hide the other sections
        why = crash_reason(e)
        return {k: missing(why) for k in SECTION_KEYS[section]}


class _Background:
    """A section probed in a thread; ``result()`` waits for it (never raises)."""

    def __init__(self, section: str, probe: Callable[[], Facts]) -> None:
        self.section = section
        self._facts: Facts | None = None
        self._thread = threading.Thread(target=self._run, args=(probe,), name=f"envcheck-{section}", daemon=True)
        self._thread.start()

    def _run(self, probe: Callable[[], Facts]) -> None:
        self._facts = guarded(self.section, probe)

    def result(self) -> Facts:
        self._thread.join()
        return self._facts if self._facts is not None else guarded(self.section, lambda: {})


def _system(host: Host, reports_dir: str) -> Facts:
    from envcheck.probes.system import probe_system

    return probe_system(host, reports_dir=reports_dir)


def _wsl(host: Host) -> Facts:
    from envcheck.probes.wsl import probe_wsl

    return probe_wsl(host)


def _cuda(host: Host) -> Facts:
    from envcheck.probes.cuda import probe_cuda

    return probe_cuda(host)


def _env(host: Host) -> Facts:
    from envcheck.probes.envvars import probe_env

    return probe_env(host)


def _nvml(nvml: object | None) -> tuple[Facts, tuple[Gpu, ...]]:
    """The driver section and the GPUs: NVML initialised once here and shut down after."""
    from envcheck.probes import gpus

    if nvml is None:
        from envcheck.probes.nvml import Nvml

        nvml = Nvml()
    try:
        driver = guarded("driver", lambda: gpus.probe_driver(nvml))
        try:
            found = gpus.probe_gpus(nvml)
        except Exception as e:  # noqa: BLE001 - same rule as sections: a bug here must not hide the rest
            found = ()
            driver["gpu_count"] = missing(crash_reason(e))
        return driver, tuple(found)
    finally:
        try:
            nvml.shutdown()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - nothing useful to do about a failed shutdown
            pass


def collect(host: Host | None = None, nvml: object | None = None, runtime: bool = False, timeout: float = 120.0,
            reports_dir: str = "reports") -> Environment:
    """Every section plus the GPUs; runtime probes (subprocesses) only when ``runtime``. Never raises."""
    start = time.perf_counter()
    host = host or default_host()
    background: list[_Background] = []
    if runtime:
        background = [
            _Background("torch_runtime", lambda: torch_probe.probe_torch_runtime(host, timeout)),
            _Background("triton_runtime", lambda: triton_probe.probe_triton_runtime(host, timeout)),
        ]
    sections: dict[str, Facts] = {
        "system": guarded("system", lambda: _system(host, reports_dir)),
        "wsl": guarded("wsl", lambda: _wsl(host)),
    }
    try:
        sections["driver"], gpus = _nvml(nvml)
    except Exception as e:  # noqa: BLE001 - only reachable if NVML's own guards have a bug
        sections["driver"], gpus = {k: missing(crash_reason(e)) for k in SECTION_KEYS["driver"]}, ()
    sections["cuda"] = guarded("cuda", lambda: _cuda(host))
    sections["env"] = guarded("env", lambda: _env(host))
    sections["torch"] = guarded("torch", lambda: torch_probe.probe_torch(host))
    sections["triton"] = guarded("triton", lambda: triton_probe.probe_triton(host))
    if runtime:
        for bg in background:
            sections[bg.section] = bg.result()
    else:
        sections["torch_runtime"] = torch_probe.not_run()
        sections["triton_runtime"] = triton_probe.not_run()
    ordered = {name: sections[name] for name in SECTIONS}
    return Environment(sections=ordered, gpus=gpus, probe_s=round(time.perf_counter() - start, 3))


def utc_now() -> str:
    """Now, UTC, ISO 8601 to the second: ``2026-11-21T22:00:00Z``."""
    return datetime.now(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_report(kind: str, environment: Environment, checks: tuple[Check, ...] = (),
               bench: Bench | None = None) -> Report:
    """A report stamped with this host's name, the time and envcheck's version (probe, check and run alike)."""
    try:
        hostname = socket.gethostname() or "unknown"
    except OSError:
        hostname = "unknown"
    return Report(tool_version=__version__, created=utc_now(), host=hostname, kind=kind,
                  environment=environment, checks=tuple(checks), bench=bench)

