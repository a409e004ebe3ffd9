"""Per-GPU health from NVML: clocks, memory errors, PCIe link, who else uses it, MIG, persistence; each check id
carries its GPU index (``gpu.throttle.0``) so multi-GPU reports compare GPU by GPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from envcheck import units
from envcheck.checks import machine
from envcheck.checks.machine import gpu_said, gpu_skip
from envcheck.model import Check, Environment, Gpu
from envcheck.probes.nvml import THERMAL_REASONS


def check_throttle(gpu: Gpu) -> Check:
    throttled = gpu.get("throttled")
    reasons = gpu.get("throttle_reasons") or []
    if throttled is None:
        return gpu_skip("throttle", gpu, "throttled")
    clock, clock_max = gpu.get("sm_clock_mhz"), gpu.get("sm_clock_max_mhz")
    known = clock is not None and clock_max is not None
    clocks = {"clock": clock, "clock_max": clock_max} if known else {}
    if not throttled:
        state = "idle" if "gpu_idle" in reasons else "calm"
        return gpu_said("throttle", gpu, "pass", f"gpu.{state}{'' if known else '.no_clock'}", **clocks)
    slow = [r for r in reasons if r != "gpu_idle"]
    temp = gpu.get("temperature_c")
    power, limit = gpu.get("power_w"), gpu.get("power_limit_w")
    # Measured values with their units: the same in every language.
    facts = [f"SM {clock}/{clock_max} MHz"] if known else []
    if temp is not None:
        facts.append(f"{temp} C")
    if power is not None and limit is not None:
        facts.append(f"{power:.0f}/{limit:.0f} W")
    hw = {"hw_slowdown", "hw_power_brake_slowdown"} & set(slow)
    fix = f"gpu.throttle.{'thermal' if THERMAL_REASONS & set(slow) else 'hw' if hw else 'power'}.fix"
    return gpu_said("throttle", gpu, "warn", "gpu.throttled", fix, reasons=", ".join(slow), facts=", ".join(facts),
                    index=gpu.index)


def check_ecc(gpu: Gpu) -> Check:
    vol, agg = gpu.get("ecc_uncorrected_volatile"), gpu.get("ecc_uncorrected_aggregate")
    if gpu.get("ecc_mode_current") is False:
        return gpu_said("ecc", gpu, "skip", "gpu.ecc_off")
    if vol is None and agg is None:
        return gpu_skip("ecc", gpu, "ecc_uncorrected_volatile")
    if isinstance(vol, int) and vol > 0:
        return gpu_said("ecc", gpu, "fail", "gpu.ecc_volatile", "gpu.ecc_volatile.fix", count=vol, index=gpu.index)
    if isinstance(agg, int) and agg > 0:
        return gpu_said("ecc", gpu, "warn", "gpu.ecc_aggregate", "gpu.ecc_aggregate.fix", count=agg, index=gpu.index)
    return gpu_said("ecc", gpu, "pass", "gpu.ecc_ok")


def check_memory_repair(gpu: Gpu) -> Check:
    """Row remapping (A100 and newer) or page retirement (older): a pending repair needs a GPU reset."""
    failure, rows = gpu.get("remapped_rows_failure"), gpu.get("remapped_rows_pending")
    pages = gpu.get("retired_pages_pending")
    if failure:
        return gpu_said("memory_repair", gpu, "fail", "gpu.remap_failed", "gpu.remap_failed.fix")
    if rows or pages:
        return gpu_said("memory_repair", gpu, "warn", "gpu.remap_pending" if rows else "gpu.retire_pending",
                        "gpu.repair_pending.fix", index=gpu.index)
    if rows is None and pages is None and failure is None:
        return gpu_skip("memory_repair", gpu, "remapped_rows_pending")
    return gpu_said("memory_repair", gpu, "pass", "gpu.repair_none")


def check_pcie(gpu: Gpu) -> Check:
    gen, gen_max = gpu.get("pcie_gen"), gpu.get("pcie_gen_max")
    width, width_max = gpu.get("pcie_width"), gpu.get("pcie_width_max")
    if None in (gen, gen_max, width, width_max):
        return gpu_skip("pcie", gpu, "pcie_gen")
    link = {"gen": gen, "width": width, "gen_max": gen_max, "width_max": width_max}
    if gen >= gen_max and width >= width_max:
        return gpu_said("pcie", gpu, "pass", "gpu.pcie_ok", **link)
    return gpu_said("pcie", gpu, "warn", "gpu.pcie_low", "gpu.pcie_low.fix", index=gpu.index, **link)


def check_processes(gpu: Gpu) -> Check:
    procs = gpu.get("processes")
    if not isinstance(procs, list):
        return gpu_skip("processes", gpu, "processes")
    if not procs:
        return gpu_said("processes", gpu, "pass", "gpu.alone")
    # Process names, pids and sizes: machine text, the same in every language.
    shown = ", ".join(
        f"{p.get('name') or '?'} (pid {p.get('pid')}, {units.gib(p.get('used_bytes')) or '?'})" for p in procs[:3]
    )
    more = f" +{len(procs) - 3}" if len(procs) > 3 else ""
    return gpu_said("processes", gpu, "warn", "gpu.shared", "gpu.shared.fix", count=len(procs), shown=shown + more)


def check_mig(gpu: Gpu) -> Check:
    mig = gpu.get("mig_mode")
    if mig is None:
        return gpu_skip("mig", gpu, "mig_mode")
    if not mig:
        return gpu_said("mig", gpu, "pass", "gpu.mig_off")
    return gpu_said("mig", gpu, "warn", "gpu.mig_on", "gpu.mig_on.fix", index=gpu.index)


def check_persistence(gpu: Gpu, wsl: bool) -> Check | None:
    if wsl:
        return None  # the Windows driver manages the device; persistence mode does not exist in WSL2
    mode = gpu.get("persistence_mode")
    if mode is None:
        return gpu_skip("persistence", gpu, "persistence_mode")
    if mode:
        return gpu_said("persistence", gpu, "pass", "gpu.persistence_on")
    return gpu_said("persistence", gpu, "warn", "gpu.persistence_off", "gpu.persistence_off.fix")


RULES: tuple[Callable[[Gpu], Check], ...] = (
    check_throttle, check_ecc, check_memory_repair, check_pcie, check_processes, check_mig,
)


def checks(env: Environment) -> list[Check]:
    rules = (*RULES, functools.partial(check_persistence, wsl=machine.is_wsl(env)))
    # A lost GPU: driver.gpus reports it.
    return [c for gpu in env.gpus if not gpu.lost for rule in rules if (c := rule(gpu)) is not None]
