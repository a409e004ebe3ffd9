"""What an operator accepting a node checks beyond the GPUs' health counters: per GPU compute mode, thermal
headroom and slowdowns, fabric registration; per node IOMMU, ACS, InfiniBand, GPUDirect RDMA and packages."""

from __future__ import annotations

from envcheck.checks import machine
from envcheck.checks.machine import gpu_said, gpu_skip
from envcheck.checks.said import said
from envcheck.model import Check, Environment, Gpu

TEMPERATURE_MARGIN_C = 5
THERMAL_SECONDS = 0.0
# Clock-event counters that mean heat or a power-supply brake (the SW power cap is normal under load).
FAULT_EVENTS = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def check_compute_mode(gpu: Gpu) -> Check:
    mode = gpu.get("compute_mode")
    if not isinstance(mode, str):
        return gpu_skip("compute_mode", gpu, "compute_mode")
    if mode == "default":
        return gpu_said("compute_mode", gpu, "pass", "op.mode_default")
    if mode == "prohibited":
        return gpu_said("compute_mode", gpu, "fail", "op.mode_prohibited", "op.mode.fix", index=gpu.index)
    if mode in ("exclusive_process", "exclusive_thread"):
        return gpu_said("compute_mode", gpu, "warn", "op.mode_exclusive", "op.mode_exclusive.fix", mode=mode,
                        index=gpu.index)
    return gpu_said("compute_mode", gpu, "warn", "op.mode_unknown", "op.mode.fix", mode=mode, index=gpu.index)


def _positive(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def check_temperature(gpu: Gpu) -> Check:
    """Headroom below slowdown: NVML's margin ("GPU T.Limit Temp") where given, else against the absolute threshold."""
    temp, margin = gpu.get("temperature_c"), gpu.get("temperature_margin_c")
    slowdown, shutdown = gpu.get("temperature_slowdown_c"), gpu.get("temperature_shutdown_c")
    have_temp = isinstance(temp, (int, float)) and not isinstance(temp, bool)
    if isinstance(margin, (int, float)) and not isinstance(margin, bool):
        left = float(margin)
        shape, values = ("margin.temp", {"left": f"{left:g}", "temp": f"{temp:g}"}) if have_temp else \
            ("margin", {"left": f"{left:g}"})
    elif have_temp and _positive(slowdown):
        left = float(slowdown) - float(temp)
        values = {"temp": f"{temp:g}", "slowdown": f"{slowdown:g}"}
        shape = "limits"
        if _positive(shutdown):
            shape, values = "limits.shutdown", values | {"shutdown": f"{shutdown:g}"}
    else:
        return gpu_skip("temperature", gpu, "temperature_margin_c" if not have_temp else "temperature_slowdown_c")
    mem, mem_max = gpu.get("temperature_memory_c"), gpu.get("temperature_memory_max_c")
    mem_hot = _positive(mem) and _positive(mem_max) and mem >= mem_max
    if _positive(mem):
        values |= {"mem": f"{mem:g}"}
        shape += ".mem"
        if _positive(mem_max):
            values |= {"mem_max": f"{mem_max:g}"}
            shape += "_max"
    if left <= 0 or mem_hot:
        return gpu_said("temperature", gpu, "fail", f"op.temp_hot.{shape}", "op.temp.fix", index=gpu.index, **values)
    if left < TEMPERATURE_MARGIN_C:
        return gpu_said("temperature", gpu, "warn", f"op.temp_close.{shape}", "op.temp.fix", index=gpu.index,
                        margin=TEMPERATURE_MARGIN_C, **values)
    return gpu_said("temperature", gpu, "pass", f"op.temp.{shape}", **values)


def check_clock_events(gpu: Gpu) -> Check:
    counters = gpu.get("clock_event_ns")
    if not isinstance(counters, dict) or not counters:
        return gpu_skip("clock_events", gpu, "clock_event_ns")
    seconds = {k: v / 1e9 for k, v in counters.items() if isinstance(v, (int, float))}
    faults = {k: s for k, s in seconds.items() if k in FAULT_EVENTS and s > THERMAL_SECONDS}
    cap = seconds.get("sw_power_cap")
    capped = {"cap": f"{cap:,.0f}"} if cap else {}
    if faults:
        # NVML's event names (identifiers) with the seconds spent in each.
        shown = ", ".join(f"{k} {s:,.1f} s" for k, s in sorted(faults.items()))
        return gpu_said("clock_events", gpu, "warn", "op.slowdown.cap" if cap else "op.slowdown", "op.slowdown.fix",
                        shown=shown, index=gpu.index, **capped)
    return gpu_said("clock_events", gpu, "pass", "op.no_slowdown.cap" if cap else "op.no_slowdown", **capped)


def check_fabric(gpu: Gpu, fabricmanager: object) -> Check:
    state = gpu.get("fabric_state")
    if not isinstance(state, str):
        return gpu_skip("fabric", gpu, "fabric_state")
    if state == "not_supported":
        return gpu_said("fabric", gpu, "skip", "op.no_fabric")
    fm = {"fm": fabricmanager} if isinstance(fabricmanager, str) and fabricmanager else {}
    more = ".fm" if fm else ""
    if state != "completed":
        return gpu_said("fabric", gpu, "fail", f"op.fabric_pending{more}", "op.fabric.fix", state=state, **fm)
    status = gpu.get("fabric_status")
    if status != "success":
        return gpu_said("fabric", gpu, "fail", f"op.fabric_failed{more}", "op.fabric.fix", status=status, **fm)
    clique = gpu.get("fabric_clique_id")
    if clique is not None:
        return gpu_said("fabric", gpu, "pass", "op.fabric_ok.clique", clique=clique)
    return gpu_said("fabric", gpu, "pass", "op.fabric_ok")


def _multi_gpu_bare_metal(env: Environment) -> bool:
    return machine.gpu_count(env) >= 2 and not machine.is_wsl(env)


def check_iommu(env: Environment) -> Check | None:
    cid = "platform.iommu"
    domains = env.get("platform", "gpu_iommu_domains")
    if not _multi_gpu_bare_metal(env):
        return None
    if not isinstance(domains, dict):
        return machine.unread(cid, env, "platform", "gpu_iommu_domains")
    translated = sorted(b for b, t in domains.items() if isinstance(t, str) and t.upper().startswith("DMA"))
    if translated:
        return said(cid, "warn", "op.iommu_translated", "op.iommu.fix", count=len(translated),
                    domain=domains[translated[0]])
    return said(cid, "pass", "op.iommu_ok", domains=", ".join(sorted(set(domains.values()))))


def check_acs(env: Environment) -> Check | None:
    cid = "platform.acs"
    if not _multi_gpu_bare_metal(env):
        return None
    bridges = env.get("platform", "acs_redirect")
    if not isinstance(bridges, list):
        return machine.unread(cid, env, "platform", "acs_redirect")
    if not bridges:
        return said(cid, "pass", "op.acs_ok")
    ids = [b.get("bus_id", "?") for b in bridges if isinstance(b, dict)]
    shown = ", ".join(ids[:4]) + (f" +{len(ids) - 4}" if len(ids) > 4 else "")
    return said(cid, "warn", "op.acs_redirect", "op.acs.fix", count=len(ids), shown=shown, first=ids[0])


def check_infiniband(env: Environment) -> Check | None:
    cid = "platform.infiniband"
    ports = env.get("platform", "infiniband_ports")
    if not isinstance(ports, list) or not ports:
        return None  # no RDMA NIC: nothing to say on a laptop or a single box
    down = [p for p in ports if isinstance(p, dict) and str(p.get("state", "")).upper() != "ACTIVE"]
    names = [f"{p.get('device')}/{p.get('port')}" for p in down]
    if down:
        # Device names and the states the kernel reports (identifiers).
        states = ", ".join(f"{n} {p.get('state') or '?'} ({p.get('phys_state') or '?'})"
                           for n, p in zip(names, down, strict=True))
        return said(cid, "warn", "op.ib_down", "op.ib.fix", count=len(down), total=len(ports), states=states)
    rates = sorted({str(p.get("rate") or "?") for p in ports if isinstance(p, dict)})
    return said(cid, "pass", "op.ib_ok", count=len(ports), rates=", ".join(rates))


def check_gpudirect_rdma(env: Environment) -> Check | None:
    cid = "platform.gpudirect_rdma"
    ports = env.get("platform", "infiniband_ports")
    module = env.get("platform", "gpudirect_rdma_module")
    if not (isinstance(ports, list) and ports and machine.has_gpu(env)):
        return None
    if isinstance(module, str) and module:
        return said(cid, "pass", "op.module_loaded", module=module)
    if module is None:
        return machine.unread(cid, env, "platform", "gpudirect_rdma_module")
    return said(cid, "warn", "op.peermem_missing", "op.peermem.fix")


def check_fabricmanager(env: Environment) -> Check | None:
    """The service, once per node, when a GPU says it is on an NVSwitch fabric."""
    cid = "platform.fabricmanager"
    on_fabric = [g for g in env.gpus if isinstance(g.get("fabric_state"), str)
                 and g.get("fabric_state") != "not_supported"]
    if not on_fabric:
        return None
    state = env.get("platform", "fabricmanager")
    if state == "active":
        return said(cid, "pass", "op.fm_active")
    if not isinstance(state, str):
        return machine.unread(cid, env, "platform", "fabricmanager")
    return said(cid, "fail", "op.fm_down", "op.fm.fix", state=state)


def check_packages(env: Environment) -> Check | None:
    cid = "platform.python_packages"
    rows = env.get("platform", "python_packages")
    if not isinstance(rows, list):
        return None
    pinned = [r for r in rows if isinstance(r, dict) and r.get("required_by")]
    wrong = []
    for r in pinned:
        need, have = r.get("required"), r.get("version")
        # Package names with the versions found and pinned: identifiers, the same in every language.
        if have is None:
            wrong.append(f"{r.get('name')} - (torch: {need or '*'})")
        elif isinstance(need, str) and need.startswith("==") and have != need[2:]:
            wrong.append(f"{r.get('name')} {have} (torch: {need[2:]})")
    listed = ", ".join(f"{r.get('name')} {r.get('version')}" for r in rows
                       if isinstance(r, dict) and r.get("version") and not r.get("required_by"))
    if wrong:
        first = next((r for r in pinned if r.get("version") != str(r.get("required", ""))[2:]), None)
        pin = f"{first.get('name')}{first.get('required') or ''}" if first else "<package>"
        return said(cid, "warn", "op.pins_differ", "op.pins.fix", count=len(wrong), wrong="; ".join(wrong[:3]), pin=pin)
    if not pinned:
        return said(cid, "pass", "op.no_pins" if listed else "op.no_packages", listed=listed)
    return said(cid, "pass", "op.pins_ok", listed=listed, count=len(pinned))


# The facts these per-GPU checks read: a GPU probed by an older envcheck has none, and gets no verdict.
_GPU_KEYS = ("compute_mode", "temperature_margin_c", "clock_event_ns", "fabric_state")


def checks(env: Environment) -> list[Check]:
    fm = env.get("platform", "fabricmanager")
    gpus = [g for g in env.gpus if not g.lost and any(k in g.facts for k in _GPU_KEYS)]
    node = (check_fabricmanager, check_iommu, check_acs, check_infiniband, check_gpudirect_rdma, check_packages)
    return [*(c for g in gpus for c in (check_compute_mode(g), check_temperature(g), check_clock_events(g),
                                        check_fabric(g, fm))),
            *(c for c in (rule(env) for rule in node) if c is not None)]
