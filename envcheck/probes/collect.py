"""Assemble every probe into one ``Environment``, and an ``Environment`` into a ``Report``.

Each section is probed behind its own guard: a probe that raises (a bug, since probes are
written never to) turns into ``missing("probe crashed: ...")`` for that section's keys and
the other sections still come back. Every key of the fact contract is present in every
section, as a value or a reason.

NVML (a child process: a broken libnvidia-ml may segfault or hang) and the two runtime probes
(torch and Triton, each a subprocess that may take seconds) run in threads while the fast
probes read files, so ``envcheck probe`` costs about as long as the slower of NVML and the
file probes, and ``envcheck check`` as long as the slower of the two runtime children.

Every string of the result is made encodable (``outside_text.encodable``) here, once, whichever
probe read it (a file, a variable, a subprocess, NVML).

Ctrl-C reaches the main thread only: collect then kills every probe child still running
(``harness.scope.end_all``) before letting the interrupt go on.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from envcheck import __version__
from envcheck.harness.scope import end_all
from envcheck.model import Bench, Check, Environment, Fact, Facts, Gpu, Report, missing
from envcheck.outside_text import encodable
from envcheck.probes import links_probe, platform, torch_probe, triton_probe
from envcheck.probes.host import Host, default_host

# The fact key contract: every key below is present in its section after collect().
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "system": ("os_name", "os_id", "os_version", "kernel", "arch", "cpu_model", "cpu_cores_logical",
               "cpu_cores_physical", "ram_total_bytes", "ram_available_bytes", "disk_path", "disk_free_bytes",
               "python_version", "python_executable", "python_env", "python_env_path", "container"),
    "wsl": ("is_wsl", "wsl_version", "distro_name", "dxg_present", "lib_dir_present", "lib_dir_files",
            "libcuda_symlinks", "loader_path_has_wsl_lib", "loader_shadows", "linux_driver_in_wsl", "linux_driver_packages",
            "nvidia_smi_path", "nvidia_smi_on_path"),
    "driver": ("driver_version", "cuda_driver_version", "nvml_version", "nvml_library", "nvml_error", "gpu_count",
               "nvml_process_error"),
    "cuda": ("libcuda_path", "triton_libcuda_dirs", "libcuda_link", "toolkit_path", "nvcc_path", "nvcc_version", "ptxas_path", "cc_path",
             "python_headers"),
    "env": ("variables",),
    "torch": torch_probe.TORCH_KEYS,
    "torch_runtime": torch_probe.RUNTIME_KEYS,
    "triton": triton_probe.TRITON_KEYS,
    "triton_runtime": triton_probe.RUNTIME_KEYS,
    "platform": platform.KEYS,
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
    """``run()`` in a thread; ``result()`` waits for it in short slices (Ctrl-C is raised between two, where one
    unbounded join would hold it for the runtime probes' timeout), ``fallback()`` when it gave nothing."""

    def __init__(self, name: str, run: Callable[[], Any], fallback: Callable[[], Any]) -> None:
        self.name, self._got, self._fallback = name, None, fallback
        self._thread = threading.Thread(target=lambda: setattr(self, "_got", run()), name=f"envcheck-{name}",
                                        daemon=True)
        self._thread.start()

    def result(self) -> Any:
        while self._thread.is_alive():
            self._thread.join(0.1)
        return self._got if self._got is not None else self._fallback()


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


def _nvml(nvml: object) -> tuple[Facts, tuple[Gpu, ...]]:
    """The driver section and the GPUs: NVML initialised once here and shut down after."""
    from envcheck.probes import gpus

    try:
        driver = guarded("driver", lambda: gpus.probe_driver(nvml))
        try:
            found = gpus.probe_gpus(nvml)
        except Exception as e:  # noqa: BLE001 - same rule as sections: a bug here must not hide the rest
            found = ()
            driver["gpu_count"] = missing(crash_reason(e))
        return driver, tuple(found)
    except Exception as e:  # noqa: BLE001 - only reachable if NVML's own guards have a bug
        return {k: missing(crash_reason(e)) for k in SECTION_KEYS["driver"]}, ()
    finally:
        try:
            nvml.shutdown()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - nothing useful to do about a failed shutdown
            pass


def collect(host: Host | None = None, nvml: object | None = None, runtime: bool = False, timeout: float = 120.0,
            reports_dir: str = "reports") -> Environment:
    """Every section plus the GPUs; runtime probes (subprocesses) only when ``runtime``. Never raises
    (KeyboardInterrupt aside, after every probe child is killed).

    ``nvml``: the NVML seam; by default NVML read in a child process of ``host``.
    """
    start = time.perf_counter()
    host = host or default_host()
    if nvml is None:
        from envcheck.probes.nvml_isolated import NVML_TIMEOUT_S, IsolatedNvml

        nvml = IsolatedNvml(host, timeout=min(timeout, NVML_TIMEOUT_S))
    try:
        return _collect(host, nvml, runtime, timeout, reports_dir, start)
    except KeyboardInterrupt:
        end_all()
        raise


NOT_CAPTURED_RUN = "not run: the snapshot holds no run of it"


def _replayable(host: Host, section: str) -> bool:
    has_run = getattr(host, "has_run", None)
    return bool(has_run(section)) if callable(has_run) else True


def _collect(host: Host, nvml: object, runtime: bool, timeout: float, reports_dir: str, start: float) -> Environment:
    background: list[_Background] = []
    skipped: dict[str, Facts] = {}
    if runtime:
        probes = {"torch_runtime": (torch_probe.probe_torch_runtime, torch_probe.not_run),
                  "triton_runtime": (triton_probe.probe_triton_runtime, triton_probe.not_run),
                  links_probe.SECTION: (links_probe.probe_links_isolated, links_probe.not_run)}
        for section, (probe, not_run) in probes.items():
            if _replayable(host, section):
                background.append(_Background(section, lambda s=section, p=probe: guarded(s, lambda: p(host, timeout)),
                                              lambda s=section: guarded(s, lambda: {})))
            else:
                skipped[section] = not_run(NOT_CAPTURED_RUN)
    nvml_bg = _Background("nvml", lambda: _nvml(nvml), lambda: (
        {k: missing("NVML probe thread ended without a result") for k in SECTION_KEYS["driver"]}, ()))
    sections: dict[str, Facts] = {
        "system": guarded("system", lambda: _system(host, reports_dir)),
        "wsl": guarded("wsl", lambda: _wsl(host)),
    }
    sections["cuda"] = guarded("cuda", lambda: _cuda(host))
    sections["env"] = guarded("env", lambda: _env(host))
    sections["torch"] = guarded("torch", lambda: torch_probe.probe_torch(host))
    sections["triton"] = guarded("triton", lambda: triton_probe.probe_triton(host))
    sections["driver"], gpus = nvml_bg.result()
    bus_ids = [b for b in (g.get("pci_bus_id") for g in gpus) if isinstance(b, str)]
    sections["platform"] = guarded("platform", lambda: platform.probe_platform(host, bus_ids))
    if runtime:
        for bg in background:
            sections[bg.name] = bg.result()
        sections.update(skipped)
    else:
        sections["torch_runtime"] = torch_probe.not_run()
        sections["triton_runtime"] = triton_probe.not_run()
    ordered = {name: sections[name] for name in SECTIONS}
    if links_probe.SECTION in sections:  # per-GPU keys: not part of the fixed key contract above
        ordered[links_probe.SECTION] = sections[links_probe.SECTION]
    return Environment(sections={name: _encodable(facts) for name, facts in ordered.items()},
                       gpus=tuple(Gpu(g.index, _encodable(g.facts), encodable(g.lost)) for g in gpus),
                       probe_s=round(time.perf_counter() - start, 3))


def _encodable(facts: Facts) -> Facts:
    """``facts`` with every string made encodable: a path, an environment variable or a child's output
    may hold a lone surrogate (Python decodes undecodable bytes of file names and variables to them),
    which no UTF-8 writer of the report accepts (``outside_text``)."""
    return {key: Fact(encodable(f.value), encodable(f.reason)) for key, f in facts.items()}


def utc_now() -> str:
    """Now, UTC, ISO 8601 to the second: ``2026-11-21T22:00:00Z``."""
    return datetime.now(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def hostname() -> str:
    try:
        return encodable(socket.gethostname()) or "unknown"  # decoded like a file name: may hold a surrogate
    except OSError:
        return "unknown"


def new_report(kind: str, environment: Environment, checks: tuple[Check, ...] = (),
               benches: tuple[Bench, ...] = (), host: str | None = None, **sections: Any) -> Report:
    """A report stamped with a host name (this machine's unless ``host``: a replayed snapshot's),
    the time and envcheck's version (probe, check, run and fleet alike). ``sections``: the
    report's ``node`` or ``fleet``."""
    hostname_ = host or hostname()
    return Report(tool_version=__version__, created=utc_now(), host=hostname_, kind=kind,
                  environment=environment, checks=tuple(checks), benches=tuple(benches), **sections)

