"""Every probe into one ``Environment``, each section behind its own guard (a probe that raises loses only its keys),
NVML and the runtime probes in threads; every string made encodable here, once."""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Generic, TypeVar

from envcheck import __version__
from envcheck.harness.scope import end_all
from envcheck.model import Bench, Check, Environment, Fact, Facts, Gpu, Report, missing, reasons
from envcheck.outside_text import encodable
from envcheck.probes import cuda, envvars, gpus, link_counters, platform, system, torch_probe, triton_probe, wsl
from envcheck.probes.host import Host, default_host
from envcheck.probes.isolate import not_run
from envcheck.probes.nvml import NvmlLike

T = TypeVar("T")
# The fact key contract: every key below is present in its section after collect().
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "system": system.KEYS, "wsl": wsl.KEYS, "driver": gpus.DRIVER_KEYS, "cuda": cuda.KEYS, "env": envvars.KEYS,
    "torch": torch_probe.TORCH_KEYS, "torch_runtime": torch_probe.RUNTIME_KEYS, "triton": triton_probe.TRITON_KEYS,
    "triton_runtime": triton_probe.RUNTIME_KEYS, "platform": platform.KEYS,
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
    try:
        return complete(section, probe())
    except Exception as e:  # noqa: BLE001 - a buggy probe must not hide the other sections
        why = crash_reason(e)
        return {k: missing(why) for k in SECTION_KEYS[section]}


class _Background(Generic[T]):
    """``probe()`` in a thread. ``result()`` waits in short slices (a KeyboardInterrupt comes between two, where one
    join() would hold it for the runtime probes' minutes) and gives ``fallback()`` when the thread left no result."""

    def __init__(self, name: str, probe: Callable[[], T], fallback: Callable[[], T]) -> None:
        self._result: T | None = None
        self._fallback = fallback
        self._thread = threading.Thread(target=self._run, args=(probe,), name=f"envcheck-{name}", daemon=True)
        self._thread.start()

    def _run(self, probe: Callable[[], T]) -> None:
        self._result = probe()

    def result(self) -> T:
        while self._thread.is_alive():
            self._thread.join(0.1)
        return self._result if self._result is not None else self._fallback()


def read_nvml(nvml: NvmlLike) -> tuple[Facts, tuple[Gpu, ...]]:
    """The driver section and the GPUs: NVML initialised once here and shut down after; never raises."""
    try:
        driver = guarded("driver", lambda: gpus.probe_driver(nvml))
        try:
            found = tuple(gpus.probe_gpus(nvml))
        except Exception as e:  # noqa: BLE001 - same rule as sections: a bug here must not hide the rest
            found = ()
            driver["gpu_count"] = missing(crash_reason(e))
        return driver, found
    except Exception as e:  # noqa: BLE001 - only reachable if NVML's own guards have a bug
        return {k: missing(crash_reason(e)) for k in SECTION_KEYS["driver"]}, ()
    finally:
        with contextlib.suppress(Exception):  # nothing useful to do about a failed shutdown
            nvml.shutdown()


def collect(host: Host | None = None, nvml: NvmlLike | None = None, runtime: bool = False, timeout: float = 120.0,
            reports_dir: str = "reports") -> Environment:
    """Every section plus the GPUs; runtime probes (subprocesses) only when ``runtime``. Never raises
    (KeyboardInterrupt aside, after every probe child is killed). ``nvml``: by default NVML read in a child."""
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


def _collect(host: Host, nvml: NvmlLike, runtime: bool, timeout: float, reports_dir: str, start: float) -> Environment:
    background: dict[str, _Background[Facts]] = {}
    sections: dict[str, Facts] = {name: not_run(SECTION_KEYS[name]) for name in ("torch_runtime", "triton_runtime")}
    if runtime:
        for name, probe in (("torch_runtime", torch_probe.probe_torch_runtime),
                            ("triton_runtime", triton_probe.probe_triton_runtime),
                            (link_counters.LINKS_SECTION, link_counters.probe_links_isolated)):
            if host.has_run(name):
                run = functools.partial(guarded, name, functools.partial(probe, host, timeout))
                background[name] = _Background(name, run, functools.partial(guarded, name, dict))
            else:  # the links section's keys are per GPU: its one fixed key is ``error``
                sections[name] = not_run(SECTION_KEYS.get(name, ("error",)), reasons.NOT_CAPTURED_RUN)
    nvml_bg = _Background("nvml", lambda: read_nvml(nvml), lambda: (
        {k: missing("NVML probe thread ended without a result") for k in gpus.DRIVER_KEYS}, ()))
    for name, read in (("system", lambda: system.probe_system(host, reports_dir=reports_dir)),
                       ("wsl", lambda: wsl.probe_wsl(host)), ("cuda", lambda: cuda.probe_cuda(host)),
                       ("env", lambda: envvars.probe_env(host)), ("torch", lambda: torch_probe.probe_torch(host)),
                       ("triton", lambda: triton_probe.probe_triton(host))):
        sections[name] = guarded(name, read)
    sections["driver"], found = nvml_bg.result()
    bus_ids = [b for b in (g.get("pci_bus_id") for g in found) if isinstance(b, str)]
    sections["platform"] = guarded("platform", lambda: platform.probe_platform(host, bus_ids))
    sections.update({name: bg.result() for name, bg in background.items()})
    ordered = {name: sections[name] for name in SECTIONS}
    if link_counters.LINKS_SECTION in sections:  # per-GPU keys: not part of the fixed key contract above
        ordered[link_counters.LINKS_SECTION] = sections[link_counters.LINKS_SECTION]
    return Environment(sections={name: _encodable(facts) for name, facts in ordered.items()},
                       gpus=tuple(Gpu(g.index, _encodable(g.facts), encodable(g.lost)) for g in found),
                       probe_s=round(time.perf_counter() - start, 3))


def _encodable(facts: Facts) -> Facts:
    """``facts`` with every string made encodable: a path or a child's output may hold a lone surrogate."""
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
               benches: tuple[Bench, ...] = (), host: str | None = None, **sections: object) -> Report:
    """A report stamped with a host name (``host``, else this machine's), the time and envcheck's version."""
    return Report(tool_version=__version__, created=utc_now(), host=host or hostname(), kind=kind,
                  environment=environment, checks=tuple(checks), benches=tuple(benches),
                  **sections)  # type: ignore[arg-type]

