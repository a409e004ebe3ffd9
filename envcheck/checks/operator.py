"""What an operator accepting a node checks beyond the GPUs' health counters.

Per GPU: compute mode, temperature against NVML's slowdown and shutdown thresholds, time spent in
clock-slowing events since the driver loaded, and the NVSwitch fabric registration. Per node: the
IOMMU's DMA domain for the GPUs, PCIe ACS redirection, InfiniBand/RoCE ports, the GPUDirect RDMA
module, the fabric manager service and the Python packages of the GPU stack.

Thresholds, with where they come from:
- ``TEMPERATURE_MARGIN_C``: a GPU within 5 C of its slowdown temperature at rest has no headroom
  left for load (NVML's slowdown threshold is where HW clocks drop; DCGM's diag fails thermal
  violations the same way);
- ``THERMAL_SECONDS``: any time in a thermal or HW-brake slowdown since the driver loaded is a
  finding (the common acceptance rule: no throttle but the SW power cap); the SW power cap is how a
  GPU runs at full load and is never one.
"""

from __future__ import annotations

from envcheck.checks import machine
from envcheck.model import Check, Environment, Gpu

TEMPERATURE_MARGIN_C = 5
THERMAL_SECONDS = 0.0
# Clock-event counters that mean heat or a power-supply brake (the SW power cap is normal under load).
FAULT_EVENTS = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def _skip(cid: str, title: str, gpu: Gpu, key: str) -> Check:
    fact = gpu.facts.get(key)
    reason = fact.reason if fact and fact.reason else "not probed"
    return Check(cid, "skip", title, f"{machine.gpu_label(gpu)}: {reason}")


def check_compute_mode(gpu: Gpu) -> Check:
    cid, title = f"gpu.compute_mode.{gpu.index}", "Compute mode allows CUDA programs"
    label = machine.gpu_label(gpu)
    mode = gpu.get("compute_mode")
    if not isinstance(mode, str):
        return _skip(cid, title, gpu, "compute_mode")
    fix = f"sudo nvidia-smi -i {gpu.index} -c DEFAULT"
    if mode == "default":
        return Check(cid, "pass", title, f"{label}: compute mode Default (any number of processes)")
    if mode == "prohibited":
        return Check(cid, "fail", title, f"{label}: compute mode Prohibited: no CUDA program can use this GPU",
                     fix=fix)
    if mode in ("exclusive_process", "exclusive_thread"):
        return Check(cid, "warn", title,
                     f"{label}: compute mode {mode.replace('_', ' ').title()}: one process at a time, so a second "
                     "process (a data loader, torch.compile's workers, a monitoring job) fails to create a context",
                     fix=f"{fix} (unless a scheduler set it on purpose)")
    return Check(cid, "warn", title, f"{label}: compute mode {mode} (unknown to envcheck)", fix=fix)


def _positive(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def check_temperature(gpu: Gpu) -> Check:
    """Headroom below the slowdown threshold: NVML's margin (nvidia-smi's "GPU T.Limit Temp") where the
    driver gives it, else the current temperature against the absolute slowdown threshold."""
    cid, title = f"gpu.temperature.{gpu.index}", "Temperature below the slowdown threshold"
    label = machine.gpu_label(gpu)
    temp, margin = gpu.get("temperature_c"), gpu.get("temperature_margin_c")
    slowdown, shutdown = gpu.get("temperature_slowdown_c"), gpu.get("temperature_shutdown_c")
    have_temp = isinstance(temp, (int, float)) and not isinstance(temp, bool)
    if isinstance(margin, (int, float)) and not isinstance(margin, bool):
        left = float(margin)
        parts = [f"{left:g} C below slowdown" + (f" (GPU {temp:g} C)" if have_temp else "")]
    elif have_temp and _positive(slowdown):
        left = float(slowdown) - float(temp)
        parts = [f"GPU {temp:g} C, slowdown at {slowdown:g} C"
                 + (f", shutdown at {shutdown:g} C" if _positive(shutdown) else "")]
    else:
        return _skip(cid, title, gpu, "temperature_margin_c" if not have_temp else "temperature_slowdown_c")
    mem, mem_max = gpu.get("temperature_memory_c"), gpu.get("temperature_memory_max_c")
    mem_hot = _positive(mem) and _positive(mem_max) and mem >= mem_max
    if _positive(mem):
        parts.append(f"memory {mem:g} C" + (f" (max {mem_max:g} C)" if _positive(mem_max) else ""))
    fix = (f"nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {gpu.index}; check the fans, airflow and inlet temperature "
           "(a blocked or failed fan, a missing blank panel, hot aisle air)")
    if left <= 0 or mem_hot:
        return Check(cid, "fail", title, f"{label}: at its slowdown temperature: {', '.join(parts)}", fix=fix)
    if left < TEMPERATURE_MARGIN_C:
        return Check(cid, "warn", title, f"{label}: within {TEMPERATURE_MARGIN_C} C of slowdown: {', '.join(parts)}",
                     fix=fix)
    return Check(cid, "pass", title, f"{label}: {', '.join(parts)}")


def check_clock_events(gpu: Gpu) -> Check:
    cid, title = f"gpu.clock_events.{gpu.index}", "No thermal or power-brake slowdown since the driver loaded"
    label = machine.gpu_label(gpu)
    counters = gpu.get("clock_event_ns")
    if not isinstance(counters, dict) or not counters:
        return _skip(cid, title, gpu, "clock_event_ns")
    seconds = {k: v / 1e9 for k, v in counters.items() if isinstance(v, (int, float))}
    faults = {k: s for k, s in seconds.items() if k in FAULT_EVENTS and s > THERMAL_SECONDS}
    cap = seconds.get("sw_power_cap")
    cap_text = f"; {cap:,.0f} s at the SW power cap (normal under full load)" if cap else ""
    if faults:
        shown = ", ".join(f"{k.replace('_', ' ')} {s:,.1f} s" for k, s in sorted(faults.items()))
        return Check(cid, "warn", title, f"{label}: {shown} since the driver loaded{cap_text}",
                     fix=f"nvidia-smi -q -d PERFORMANCE -i {gpu.index} (Clocks Event Reasons Counters); thermal: "
                         "check cooling; power brake: check the PSUs and power cables; then envcheck burn to see "
                         "whether it recurs under load")
    return Check(cid, "pass", title, f"{label}: none{cap_text}")


def check_fabric(gpu: Gpu, fabricmanager: object) -> Check:
    cid, title = f"gpu.fabric.{gpu.index}", "NVSwitch fabric registration complete"
    label = machine.gpu_label(gpu)
    state = gpu.get("fabric_state")
    if not isinstance(state, str):
        return _skip(cid, title, gpu, "fabric_state")
    if state == "not_supported":
        return Check(cid, "skip", title, f"{label}: not on an NVSwitch fabric (NVLink between GPUs is direct, or "
                                         "PCIe)")
    fm = f" (nvidia-fabricmanager is {fabricmanager})" if isinstance(fabricmanager, str) and fabricmanager else ""
    fix = ("sudo systemctl enable --now nvidia-fabricmanager (its version must match the driver's: "
           "nvidia-smi; nv-fabricmanager --version); then journalctl -u nvidia-fabricmanager")
    if state != "completed":
        return Check(cid, "fail", title,
                     f"{label}: fabric registration {state.replace('_', ' ')}{fm}: CUDA programs fail or wait until "
                     "it completes", fix=fix)
    status = gpu.get("fabric_status")
    if status != "success":
        return Check(cid, "fail", title, f"{label}: fabric registration ended with {status}{fm}", fix=fix)
    clique = gpu.get("fabric_clique_id")
    return Check(cid, "pass", title, f"{label}: registered" + (f", clique {clique}" if clique is not None else ""))


def _multi_gpu_bare_metal(env: Environment) -> bool:
    return machine.gpu_count(env) >= 2 and not machine.is_wsl(env)


def check_iommu(env: Environment) -> Check | None:
    cid, title = "platform.iommu", "IOMMU passes GPU DMA through"
    domains = env.get("platform", "gpu_iommu_domains")
    if not _multi_gpu_bare_metal(env):
        return None
    if not isinstance(domains, dict):
        reason = env.fact("platform", "gpu_iommu_domains").reason or "not probed"
        return Check(cid, "skip", title, reason)
    translated = sorted(b for b, t in domains.items() if isinstance(t, str) and t.upper().startswith("DMA"))
    if translated:
        return Check(cid, "warn", title,
                     f"{len(translated)} GPU(s) sit behind a translating IOMMU domain ({domains[translated[0]]}): "
                     "peer-to-peer copies and GPUDirect RDMA are slower or fail",
                     fix="add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then "
                         "sudo update-grub and reboot); see NCCL's troubleshooting guide, 'PCI Access Control "
                         "Services' and 'IOMMU'")
    return Check(cid, "pass", title, f"GPU IOMMU domains: {', '.join(sorted(set(domains.values())))}")


def check_acs(env: Environment) -> Check | None:
    cid, title = "platform.acs", "PCIe ACS does not redirect peer-to-peer"
    if not _multi_gpu_bare_metal(env):
        return None
    bridges = env.get("platform", "acs_redirect")
    if not isinstance(bridges, list):
        reason = env.fact("platform", "acs_redirect").reason or "not probed"
        return Check(cid, "skip", title, reason)
    if not bridges:
        return Check(cid, "pass", title, "no PCIe device redirects peer-to-peer requests")
    ids = [b.get("bus_id", "?") for b in bridges if isinstance(b, dict)]
    shown = ", ".join(ids[:4]) + (f" +{len(ids) - 4} more" if len(ids) > 4 else "")
    return Check(cid, "warn", title,
                 f"{len(ids)} PCIe device(s) redirect peer-to-peer requests to the root complex ({shown}): GPU "
                 "copies over PCIe and GPUDirect RDMA lose bandwidth (NVLink traffic is unaffected)",
                 fix=f"disable ACS redirection on bare metal: sudo setpci -s {ids[0]} ECAP_ACS+0x6.w=0000 for each "
                     "device listed (until reboot), or turn ACS off in the BIOS; keep it on in VMs that need "
                     "isolation")


def check_infiniband(env: Environment) -> Check | None:
    cid, title = "platform.infiniband", "InfiniBand / RoCE ports active"
    ports = env.get("platform", "infiniband_ports")
    if not isinstance(ports, list):
        return None
    if not ports:
        return None  # no RDMA NIC: nothing to say on a laptop or a single box
    down = [p for p in ports if isinstance(p, dict) and str(p.get("state", "")).upper() != "ACTIVE"]
    names = [f"{p.get('device')}/{p.get('port')}" for p in down]
    if down:
        states = ", ".join(f"{n} {p.get('state') or '?'} ({p.get('phys_state') or '?'})" for n, p in zip(names, down, strict=True))
        return Check(cid, "warn", title, f"{len(down)} of {len(ports)} port(s) not active: {states}",
                     fix="ibstat; check the cable and the switch port; an InfiniBand port stuck in INIT needs a "
                         "subnet manager (sudo systemctl start opensm, or the fabric's)")
    rates = sorted({str(p.get("rate") or "?") for p in ports if isinstance(p, dict)})
    return Check(cid, "pass", title, f"{len(ports)} port(s) active at {', '.join(rates)}")


def check_gpudirect_rdma(env: Environment) -> Check | None:
    cid, title = "platform.gpudirect_rdma", "GPUDirect RDMA module loaded"
    ports = env.get("platform", "infiniband_ports")
    module = env.get("platform", "gpudirect_rdma_module")
    if not (isinstance(ports, list) and ports and machine.has_gpu(env)):
        return None
    if isinstance(module, str) and module:
        return Check(cid, "pass", title, f"{module} is loaded")
    if module is None:
        reason = env.fact("platform", "gpudirect_rdma_module").reason or "not probed"
        return Check(cid, "skip", title, reason)
    return Check(cid, "warn", title,
                 "nvidia_peermem is not loaded: NCCL moves GPU data over the NICs through host memory unless it can "
                 "use DMA-BUF (Linux 5.12+ with NVIDIA's open kernel module)",
                 fix="sudo modprobe nvidia_peermem, and to keep it: echo nvidia_peermem | sudo tee "
                     "/etc/modules-load.d/nvidia-peermem.conf")


def check_fabricmanager(env: Environment) -> Check | None:
    """The service, once per node, when a GPU says it is on an NVSwitch fabric."""
    cid, title = "platform.fabricmanager", "Fabric manager running"
    on_fabric = [g for g in env.gpus if isinstance(g.get("fabric_state"), str)
                 and g.get("fabric_state") != "not_supported"]
    if not on_fabric:
        return None
    state = env.get("platform", "fabricmanager")
    if state == "active":
        return Check(cid, "pass", title, "nvidia-fabricmanager is active")
    if not isinstance(state, str):
        reason = env.fact("platform", "fabricmanager").reason or "not probed"
        return Check(cid, "skip", title, reason)
    return Check(cid, "fail", title, f"nvidia-fabricmanager is {state} on an NVSwitch system",
                 fix="sudo systemctl enable --now nvidia-fabricmanager; journalctl -u nvidia-fabricmanager")


def check_packages(env: Environment) -> Check | None:
    cid, title = "platform.python_packages", "GPU Python packages match what torch requires"
    rows = env.get("platform", "python_packages")
    if not isinstance(rows, list):
        return None
    pinned = [r for r in rows if isinstance(r, dict) and r.get("required_by")]
    wrong = []
    for r in pinned:
        need, have = r.get("required"), r.get("version")
        if have is None:
            wrong.append(f"{r.get('name')} missing (torch needs {need or 'it'})")
        elif isinstance(need, str) and need.startswith("==") and have != need[2:]:
            wrong.append(f"{r.get('name')} {have} (torch needs {need[2:]})")
    listed = ", ".join(f"{r.get('name')} {r.get('version')}" for r in rows
                       if isinstance(r, dict) and r.get("version") and not r.get("required_by"))
    if wrong:
        first = next((r for r in pinned if r.get("version") != str(r.get("required", ""))[2:]), None)
        pin = f"{first.get('name')}{first.get('required') or ''}" if first else "<package>"
        return Check(cid, "warn", title, f"{len(wrong)} CUDA wheel(s) differ from torch's pins: {'; '.join(wrong[:3])}",
                     fix=f"pip install '{pin}' (or reinstall torch so pip brings the versions it was built with)")
    if not pinned:
        return Check(cid, "pass", title, f"{listed or 'no GPU Python packages'}; torch pins no nvidia-* wheels")
    return Check(cid, "pass", title, f"{listed}; {len(pinned)} nvidia-* wheel(s) as torch requires")


# The GPU fact each per-GPU check reads first: a GPU probed by an envcheck older than these checks has
# none of them, and gets no verdict rather than a row of "not probed".
_GPU_KEYS = ("compute_mode", "temperature_margin_c", "clock_event_ns", "fabric_state")


def checks(env: Environment) -> list[Check]:
    out: list[Check] = []
    fabricmanager = env.get("platform", "fabricmanager")
    for gpu in env.gpus:
        if gpu.lost or not any(k in gpu.facts for k in _GPU_KEYS):
            continue
        out.extend((check_compute_mode(gpu), check_temperature(gpu), check_clock_events(gpu),
                    check_fabric(gpu, fabricmanager)))
    for rule in (check_fabricmanager, check_iommu, check_acs, check_infiniband, check_gpudirect_rdma,
                 check_packages):
        found = rule(env)
        if found is not None:
            out.append(found)
    return out
