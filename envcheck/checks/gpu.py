"""Per-GPU health, from NVML: clocks, memory errors, PCIe link, who else uses it, MIG, persistence.

Each check carries the GPU index in its id (``gpu.throttle.0``) so reports of multi-GPU
machines compare GPU by GPU.
"""

from __future__ import annotations

from collections.abc import Callable

from envcheck.checks import machine
from envcheck.model import Check, Environment, Gpu
from envcheck.probes.nvml import THERMAL_REASONS


def _skip(cid: str, title: str, gpu: Gpu, key: str) -> Check:
    fact = gpu.facts.get(key)
    reason = fact.reason if fact and fact.reason else "not probed"
    return Check(cid, "skip", title, f"{machine.gpu_label(gpu)}: {reason}")


def check_throttle(gpu: Gpu) -> Check:
    cid, title = f"gpu.throttle.{gpu.index}", "GPU clocks not throttled"
    label = machine.gpu_label(gpu)
    throttled = gpu.get("throttled")
    reasons = gpu.get("throttle_reasons") or []
    if throttled is None:
        return _skip(cid, title, gpu, "throttled")
    clock = gpu.get("sm_clock_mhz")
    clock_max = gpu.get("sm_clock_max_mhz")
    clocks = f"SM {clock}/{clock_max} MHz" if clock is not None and clock_max is not None else "SM clock unknown"
    if not throttled:
        state = "idle" if "gpu_idle" in reasons else "not throttled"
        return Check(cid, "pass", title, f"{label}: {state}, {clocks}")
    slow = [r for r in reasons if r != "gpu_idle"]
    temp = gpu.get("temperature_c")
    power, limit = gpu.get("power_w"), gpu.get("power_limit_w")
    facts = [clocks]
    if temp is not None:
        facts.append(f"{temp} C")
    if power is not None and limit is not None:
        facts.append(f"{power:.0f}/{limit:.0f} W")
    if THERMAL_REASONS & set(slow):
        fix = ("check cooling: nvidia-smi -q -d TEMPERATURE,PERFORMANCE (slowdown temperatures), airflow and fans; "
               "benchmark results taken now are low")
    elif "hw_slowdown" in slow or "hw_power_brake_slowdown" in slow:
        fix = ("nvidia-smi -q -d PERFORMANCE: HW slowdown means overheating or a power-supply brake signal; "
               "check the PSU cables and the chassis")
    else:
        fix = (f"nvidia-smi -q -d POWER,PERFORMANCE -i {gpu.index} (power cap reached: "
               f"sudo nvidia-smi -i {gpu.index} -pl <watts> raises it up to the board's maximum)")
    return Check(cid, "warn", title, f"{label} is throttled now ({', '.join(slow)}): {', '.join(facts)}", fix=fix)


def check_ecc(gpu: Gpu) -> Check:
    cid, title = f"gpu.ecc.{gpu.index}", "No uncorrected memory errors"
    label = machine.gpu_label(gpu)
    vol = gpu.get("ecc_uncorrected_volatile")
    agg = gpu.get("ecc_uncorrected_aggregate")
    if gpu.get("ecc_mode_current") is False:
        return Check(cid, "skip", title, f"{label}: ECC is disabled, so memory errors are not counted")
    if vol is None and agg is None:
        return _skip(cid, title, gpu, "ecc_uncorrected_volatile")
    if isinstance(vol, int) and vol > 0:
        return Check(cid, "fail", title,
                     f"{label}: {vol} uncorrected ECC error(s) since the driver loaded: results may be corrupt",
                     fix=f"stop the jobs on it and reset it (sudo nvidia-smi -r -i {gpu.index}) or reboot; "
                         "if errors return, the board needs service (nvidia-smi -q -d ECC,ROW_REMAPPER)")
    if isinstance(agg, int) and agg > 0:
        return Check(cid, "warn", title,
                     f"{label}: {agg} uncorrected ECC error(s) over the board's lifetime, none since the driver loaded",
                     fix=f"nvidia-smi -q -d ECC,ROW_REMAPPER -i {gpu.index} (watch whether the count grows)")
    return Check(cid, "pass", title, f"{label}: 0 uncorrected ECC errors")


def check_memory_repair(gpu: Gpu) -> Check:
    """Row remapping (A100 and newer) or page retirement (older): a pending repair needs a GPU reset."""
    cid, title = f"gpu.memory_repair.{gpu.index}", "No pending memory repair"
    label = machine.gpu_label(gpu)
    failure = gpu.get("remapped_rows_failure")
    rows = gpu.get("remapped_rows_pending")
    pages = gpu.get("retired_pages_pending")
    if failure:
        return Check(cid, "fail", title, f"{label}: row remapping failed: the memory cannot be repaired in place",
                     fix="take the GPU out of service and have it replaced (RMA); nvidia-smi -q -d ROW_REMAPPER")
    if rows or pages:
        what = "row remapping" if rows else "page retirement"
        return Check(cid, "warn", title, f"{label}: a {what} is pending until the GPU is reset",
                     fix=f"sudo nvidia-smi -r -i {gpu.index} (with no processes on it) or reboot")
    if rows is None and pages is None and failure is None:
        return _skip(cid, title, gpu, "remapped_rows_pending")
    return Check(cid, "pass", title, f"{label}: nothing pending")


def check_pcie(gpu: Gpu) -> Check:
    cid, title = f"gpu.pcie.{gpu.index}", "PCIe link at its maximum"
    label = machine.gpu_label(gpu)
    gen, gen_max = gpu.get("pcie_gen"), gpu.get("pcie_gen_max")
    width, width_max = gpu.get("pcie_width"), gpu.get("pcie_width_max")
    if None in (gen, gen_max, width, width_max):
        return _skip(cid, title, gpu, "pcie_gen")
    now = f"Gen{gen} x{width} (max Gen{gen_max} x{width_max})"
    if gen >= gen_max and width >= width_max:
        return Check(cid, "pass", title, f"{label}: {now}")
    return Check(
        cid, "warn", title,
        f"{label}: link at {now}; idle GPUs drop the link speed to save power, so this only matters under load",
        fix=f"verify under load: run a workload and watch nvidia-smi -i {gpu.index} --query-gpu="
            "pcie.link.gen.current,pcie.link.width.current --format=csv -l 1; if it stays low, reseat the card or "
            "check the slot and BIOS PCIe settings",
    )


def check_processes(gpu: Gpu) -> Check:
    cid, title = f"gpu.processes.{gpu.index}", "GPU not shared"
    label = machine.gpu_label(gpu)
    procs = gpu.get("processes")
    if not isinstance(procs, list):
        return _skip(cid, title, gpu, "processes")
    if not procs:
        return Check(cid, "pass", title, f"{label}: no other processes")
    shown = ", ".join(
        f"{p.get('name') or '?'} (pid {p.get('pid')}, {machine.gib(p.get('used_bytes'))})" for p in procs[:3]
    )
    more = f" +{len(procs) - 3} more" if len(procs) > 3 else ""
    return Check(cid, "warn", title, f"{label} runs {len(procs)} other process(es): {shown}{more}: benchmarks would "
                                     "be noisy",
                 fix="nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv (stop them, or pick "
                     "an idle GPU with envcheck run --device N)")


def check_mig(gpu: Gpu) -> Check:
    cid, title = f"gpu.mig.{gpu.index}", "MIG off"
    label = machine.gpu_label(gpu)
    mig = gpu.get("mig_mode")
    if mig is None:
        return _skip(cid, title, gpu, "mig_mode")
    if not mig:
        return Check(cid, "pass", title, f"{label}: MIG disabled, the whole GPU is usable")
    return Check(cid, "warn", title, f"{label} is in MIG mode: a benchmark runs on one slice, not the whole GPU",
                 fix=f"sudo nvidia-smi -i {gpu.index} -mig 0 (with no processes on it; may need a GPU reset)")


def check_persistence(gpu: Gpu, wsl: bool) -> Check | None:
    if wsl:
        return None  # the Windows driver manages the device; persistence mode does not exist in WSL2
    cid, title = f"gpu.persistence.{gpu.index}", "Persistence mode on"
    label = machine.gpu_label(gpu)
    mode = gpu.get("persistence_mode")
    if mode is None:
        return _skip(cid, title, gpu, "persistence_mode")
    if mode:
        return Check(cid, "pass", title, f"{label}: persistence mode enabled")
    return Check(cid, "warn", title,
                 f"{label}: persistence mode off: the driver re-initialises the GPU for each CUDA program (slow start)",
                 fix="sudo systemctl enable --now nvidia-persistenced (or sudo nvidia-smi -pm 1)")


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
