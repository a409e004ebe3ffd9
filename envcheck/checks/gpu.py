"""Per-GPU health from NVML: clocks, memory errors, PCIe link, who else uses it, MIG, persistence; each check id
carries its GPU index (``gpu.throttle.0``) so multi-GPU reports compare GPU by GPU.
"""

from __future__ import annotations

from collections.abc import Callable

from envcheck.checks import machine
from envcheck.checks.said import said
from envcheck.model import Check, Environment, Gpu
from envcheck.probes.nvml import THERMAL_REASONS


def _skip(cid: str, gpu: Gpu, key: str) -> Check:
    fact = gpu.facts.get(key)
    reason = fact.reason if fact and fact.reason else "not probed"
    return said(cid, "skip", "gpu.skip", gpu=machine.gpu_label(gpu), reason=reason)


def check_throttle(gpu: Gpu) -> Check:
    cid = f"gpu.throttle.{gpu.index}"
    label = machine.gpu_label(gpu)
    throttled = gpu.get("throttled")
    reasons = gpu.get("throttle_reasons") or []
    if throttled is None:
        return _skip(cid, gpu, "throttled")
    clock = gpu.get("sm_clock_mhz")
    clock_max = gpu.get("sm_clock_max_mhz")
    known = clock is not None and clock_max is not None
    clocks = {"clock": clock, "clock_max": clock_max} if known else {}
    if not throttled:
        state = "idle" if "gpu_idle" in reasons else "calm"
        return said(cid, "pass", f"gpu.{state}{'' if known else '.no_clock'}", gpu=label, **clocks)
    slow = [r for r in reasons if r != "gpu_idle"]
    temp = gpu.get("temperature_c")
    power, limit = gpu.get("power_w"), gpu.get("power_limit_w")
    # Measured values with their units: the same in every language.
    facts = [f"SM {clock}/{clock_max} MHz"] if known else []
    if temp is not None:
        facts.append(f"{temp} C")
    if power is not None and limit is not None:
        facts.append(f"{power:.0f}/{limit:.0f} W")
    if THERMAL_REASONS & set(slow):
        fix = "gpu.throttle.thermal.fix"
    elif "hw_slowdown" in slow or "hw_power_brake_slowdown" in slow:
        fix = "gpu.throttle.hw.fix"
    else:
        fix = "gpu.throttle.power.fix"
    return said(cid, "warn", "gpu.throttled", fix, gpu=label, reasons=", ".join(slow), facts=", ".join(facts),
                index=gpu.index)


def check_ecc(gpu: Gpu) -> Check:
    cid = f"gpu.ecc.{gpu.index}"
    label = machine.gpu_label(gpu)
    vol = gpu.get("ecc_uncorrected_volatile")
    agg = gpu.get("ecc_uncorrected_aggregate")
    if gpu.get("ecc_mode_current") is False:
        return said(cid, "skip", "gpu.ecc_off", gpu=label)
    if vol is None and agg is None:
        return _skip(cid, gpu, "ecc_uncorrected_volatile")
    if isinstance(vol, int) and vol > 0:
        return said(cid, "fail", "gpu.ecc_volatile", "gpu.ecc_volatile.fix", gpu=label, count=vol, index=gpu.index)
    if isinstance(agg, int) and agg > 0:
        return said(cid, "warn", "gpu.ecc_aggregate", "gpu.ecc_aggregate.fix", gpu=label, count=agg, index=gpu.index)
    return said(cid, "pass", "gpu.ecc_ok", gpu=label)


def check_memory_repair(gpu: Gpu) -> Check:
    """Row remapping (A100 and newer) or page retirement (older): a pending repair needs a GPU reset."""
    cid = f"gpu.memory_repair.{gpu.index}"
    label = machine.gpu_label(gpu)
    failure = gpu.get("remapped_rows_failure")
    rows = gpu.get("remapped_rows_pending")
    pages = gpu.get("retired_pages_pending")
    if failure:
        return said(cid, "fail", "gpu.remap_failed", "gpu.remap_failed.fix", gpu=label)
    if rows or pages:
        return said(cid, "warn", "gpu.remap_pending" if rows else "gpu.retire_pending", "gpu.repair_pending.fix",
                    gpu=label, index=gpu.index)
    if rows is None and pages is None and failure is None:
        return _skip(cid, gpu, "remapped_rows_pending")
    return said(cid, "pass", "gpu.repair_none", gpu=label)


def check_pcie(gpu: Gpu) -> Check:
    cid = f"gpu.pcie.{gpu.index}"
    label = machine.gpu_label(gpu)
    gen, gen_max = gpu.get("pcie_gen"), gpu.get("pcie_gen_max")
    width, width_max = gpu.get("pcie_width"), gpu.get("pcie_width_max")
    if None in (gen, gen_max, width, width_max):
        return _skip(cid, gpu, "pcie_gen")
    link = {"gen": gen, "width": width, "gen_max": gen_max, "width_max": width_max}
    if gen >= gen_max and width >= width_max:
        return said(cid, "pass", "gpu.pcie_ok", gpu=label, **link)
    return said(cid, "warn", "gpu.pcie_low", "gpu.pcie_low.fix", gpu=label, index=gpu.index, **link)


def check_processes(gpu: Gpu) -> Check:
    cid = f"gpu.processes.{gpu.index}"
    label = machine.gpu_label(gpu)
    procs = gpu.get("processes")
    if not isinstance(procs, list):
        return _skip(cid, gpu, "processes")
    if not procs:
        return said(cid, "pass", "gpu.alone", gpu=label)
    # Process names, pids and sizes: machine text, the same in every language.
    shown = ", ".join(
        f"{p.get('name') or '?'} (pid {p.get('pid')}, {machine.gib(p.get('used_bytes'))})" for p in procs[:3]
    )
    more = f" +{len(procs) - 3}" if len(procs) > 3 else ""
    return said(cid, "warn", "gpu.shared", "gpu.shared.fix", gpu=label, count=len(procs), shown=shown + more)


def check_mig(gpu: Gpu) -> Check:
    cid = f"gpu.mig.{gpu.index}"
    label = machine.gpu_label(gpu)
    mig = gpu.get("mig_mode")
    if mig is None:
        return _skip(cid, gpu, "mig_mode")
    if not mig:
        return said(cid, "pass", "gpu.mig_off", gpu=label)
    return said(cid, "warn", "gpu.mig_on", "gpu.mig_on.fix", gpu=label, index=gpu.index)


def check_persistence(gpu: Gpu, wsl: bool) -> Check | None:
    if wsl:
        return None  # the Windows driver manages the device; persistence mode does not exist in WSL2
    cid = f"gpu.persistence.{gpu.index}"
    label = machine.gpu_label(gpu)
    mode = gpu.get("persistence_mode")
    if mode is None:
        return _skip(cid, gpu, "persistence_mode")
    if mode:
        return said(cid, "pass", "gpu.persistence_on", gpu=label)
    return said(cid, "warn", "gpu.persistence_off", "gpu.persistence_off.fix", gpu=label)


RULES: tuple[Callable[[Gpu], Check], ...] = (
    check_throttle, check_ecc, check_memory_repair, check_pcie, check_processes, check_mig,
)


def checks(env: Environment) -> list[Check]:
    out: list[Check] = []
    wsl = machine.is_wsl(env)
    for gpu in env.gpus:
        if gpu.lost:
            continue  # driver.gpus reports it
        out.extend(rule(gpu) for rule in RULES)
        p = check_persistence(gpu, wsl)
        if p:
            out.append(p)
    return out
