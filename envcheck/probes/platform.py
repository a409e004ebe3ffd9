"""Section ``platform``: what lies between the GPUs and the rest of a node, as an operator accepting it checks: each
GPU's IOMMU domain, PCIe ACS redirection (``lspci -vvv``), InfiniBand / RoCE ports, the GPUDirect RDMA module, the
NVSwitch fabric manager, and the GPU stack's Python packages against the versions torch pins."""

from __future__ import annotations

import re

from envcheck.model import Fact, Facts, known, missing
from envcheck.probes.host import Host

KEYS = ("kernel_cmdline_iommu", "iommu_groups", "gpu_iommu_domains", "acs_redirect", "infiniband_ports",
        "gpudirect_rdma_module", "fabricmanager", "python_packages")

IOMMU_GROUPS = "/sys/kernel/iommu_groups"
PCI_DEVICES = "/sys/bus/pci/devices"
INFINIBAND = "/sys/class/infiniband"
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
LSPCI_TIMEOUT_S = 20.0
SYSTEMCTL_TIMEOUT_S = 10.0

# Kernel command-line words that choose how the IOMMU treats devices (kernel-parameters.txt).
_IOMMU_WORD = re.compile(r"^(intel_iommu|amd_iommu|iommu|iommu\.passthrough)(=\S*)?$")

# The packages collect_env lists for a GPU stack, besides the nvidia-* wheels torch requires.
STACK_PACKAGES = ("torch", "triton", "pytorch-triton", "jax", "jaxlib", "numpy", "nvidia-ml-py",
                  "nvidia-nccl-cu12", "nvidia-nccl-cu13")
_REQUIREMENT = re.compile(r"^\s*(nvidia-[A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*(==|>=|~=)?\s*([0-9][^;,\s]*)?")


def probe_platform(host: Host, gpu_bus_ids: list[str]) -> Facts:
    """Facts of section ``platform``; ``gpu_bus_ids``: NVML's PCI bus ids of the GPUs (``00000000:18:00.0``)."""
    if not host.exists("/proc/cmdline"):  # every Linux has it: an older snapshot, or not Linux
        why = "not captured: /proc/cmdline is absent (a snapshot from an older envcheck, or not Linux)"
        return {k: missing(why) for k in KEYS}
    f: Facts = {}
    f["kernel_cmdline_iommu"] = _cmdline_iommu(host)
    f["iommu_groups"] = _iommu_groups(host)
    f["gpu_iommu_domains"] = _gpu_domains(host, gpu_bus_ids)
    # ACS only matters between GPUs: a one-GPU machine (a laptop) is spared the lspci run.
    f["acs_redirect"] = _acs_redirect(host) if len(gpu_bus_ids) >= 2 else missing(
        "not read: ACS redirection matters only between two or more GPUs")
    f["infiniband_ports"] = _infiniband_ports(host)
    f["gpudirect_rdma_module"] = _peermem(host)
    f["fabricmanager"] = _fabricmanager(host)
    f["python_packages"] = _python_packages(host)
    return f


def sysfs_bus_id(nvml_bus_id: str) -> str:
    """``0000:18:00.0`` (sysfs) from NVML's ``00000000:18:00.0`` (an 8-digit domain)."""
    domain, _, rest = nvml_bus_id.strip().lower().rpartition(":")
    head, _, bus = domain.rpartition(":") if domain.count(":") else ("", "", domain)
    dom = head or "0"
    return f"{int(dom, 16):04x}:{bus}:{rest}" if re.fullmatch("[0-9a-f]+", dom) else nvml_bus_id.lower()


def _cmdline_iommu(host: Host) -> Fact:
    try:
        words = host.read_text("/proc/cmdline").split()
    except OSError as e:
        return missing(f"cannot read /proc/cmdline ({e.strerror or e})")
    return known([w for w in words if _IOMMU_WORD.match(w)])


def _iommu_groups(host: Host) -> Fact:
    if not host.is_dir(IOMMU_GROUPS):
        return missing(f"{IOMMU_GROUPS} does not exist (no IOMMU, or sysfs not mounted)")
    try:
        return known(len(host.listdir(IOMMU_GROUPS)))
    except OSError as e:
        return missing(f"cannot list {IOMMU_GROUPS} ({e.strerror or e})")


def _gpu_domains(host: Host, bus_ids: list[str]) -> Fact:
    """``{bus id: domain type}`` for each GPU in an IOMMU group (``identity``, ``DMA``, ``DMA-FQ``, ...)."""
    if not bus_ids:
        return missing("no GPU PCI bus id known")
    domains: dict[str, str] = {}
    why = None
    for bus_id in bus_ids:
        dev = f"{PCI_DEVICES}/{sysfs_bus_id(bus_id)}"
        link = f"{dev}/iommu_group"
        if not host.exists(link):
            why = why or f"{link} does not exist (the GPU is in no IOMMU group)"
            continue
        group = host.realpath(link)
        try:
            domains[bus_id] = host.read_text(f"{group}/type").strip()
        except OSError as e:
            why = why or f"cannot read {group}/type ({e.strerror or e})"
    return known(domains) if domains else missing(why or "no GPU in an IOMMU group")


def parse_lspci_acs(text: str) -> list[dict[str, object]]:
    """Devices whose ``ACSCtl`` turns on request or completion redirection, from ``lspci -vvv`` text, as
    ``{"bus_id": "0000:16:02.0", "device": "PCI bridge: ...", "enabled": ["SrcValid", "ReqRedir", ...]}``."""
    found: list[dict[str, object]] = []
    device = bus_id = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            bus_id, _, device = line.partition(" ")
            continue
        stripped = line.strip()
        if not stripped.startswith("ACSCtl:") or bus_id is None:
            continue
        enabled = [w[:-1] for w in stripped.removeprefix("ACSCtl:").split() if w.endswith("+")]
        if "ReqRedir" in enabled or "CmpltRedir" in enabled:
            full = bus_id if bus_id.count(":") == 2 else f"0000:{bus_id}"
            found.append({"bus_id": full, "device": (device or "").strip()[:120], "enabled": enabled})
    return found


def _acs_redirect(host: Host) -> Fact:
    if not host.which("lspci"):
        return missing("lspci is not installed (apt install pciutils / dnf install pciutils)")
    res = host.run(["lspci", "-vvv"], timeout=LSPCI_TIMEOUT_S, name="lspci_vvv")
    if not res.ok:
        return missing(f"lspci -vvv failed: {res.describe()}")
    if "ACSCtl:" not in res.stdout and "<access denied>" in res.stdout:
        return missing("lspci could not read the PCIe capabilities: it needs root (sudo envcheck check)")
    return known(parse_lspci_acs(res.stdout))


def _read(host: Host, path: str, labelled: bool = False) -> str | None:
    """The file's text, stripped (``labelled``: of its number, as in ``4: ACTIVE``); None when unreadable."""
    text = host.text_or_none(path)
    if text is None:
        return None
    return text.partition(":")[2].strip() if labelled and ":" in text else text.strip()


def _infiniband_ports(host: Host) -> Fact:
    """Every InfiniBand / RoCE port (device, port, state, phys_state, rate, link_layer); [] without an RDMA device."""
    if not host.is_dir(INFINIBAND):
        return known([])
    try:
        devices = host.listdir(INFINIBAND)
    except OSError as e:
        return missing(f"cannot list {INFINIBAND} ({e.strerror or e})")
    ports: list[dict[str, object]] = []
    for dev in devices:
        base = f"{INFINIBAND}/{dev}/ports"
        try:
            numbers = host.listdir(base)
        except OSError:
            continue
        for num in numbers:
            p = f"{base}/{num}"
            ports.append({"device": dev, "port": int(num) if num.isdigit() else num,
                          "state": _read(host, f"{p}/state", True), "phys_state": _read(host, f"{p}/phys_state", True),
                          "rate": _read(host, f"{p}/rate"), "link_layer": _read(host, f"{p}/link_layer")})
    return known(ports)


def _peermem(host: Host) -> Fact:
    if module := next((m for m in PEERMEM_MODULES if host.is_dir(f"/sys/module/{m}")), None):
        return known(module)
    try:
        modules = host.read_text("/proc/modules")
    except OSError as e:
        return missing(f"cannot read /proc/modules ({e.strerror or e})")
    loaded = {line.split(" ", 1)[0] for line in modules.splitlines() if line}
    return known(next((m for m in PEERMEM_MODULES if m in loaded), ""))  # "": read, and not loaded


def _fabricmanager(host: Host) -> Fact:
    if not host.which("systemctl"):
        return missing("systemctl not found (no systemd here: a container or WSL)")
    res = host.run(["systemctl", "is-active", "nvidia-fabricmanager"], timeout=SYSTEMCTL_TIMEOUT_S,
                   name="fabricmanager_active")
    state = res.stdout.strip().splitlines()[0] if res.stdout.strip() else ""  # active, inactive, failed, ...
    return known(state) if state else missing(f"systemctl is-active nvidia-fabricmanager: {res.describe()}")


def _python_packages(host: Host) -> Fact:
    """Each stack package installed, and each torch pins even when missing, with the version torch requires."""
    rows: dict[str, dict[str, str | None]] = {
        name: {"name": name, "version": info.version} for name in STACK_PACKAGES if (info := host.package(name))}
    torch = host.package("torch")
    for req in (torch.requires if torch else ()):
        m = _REQUIREMENT.match(req)
        if not m or "extra ==" in req:
            continue
        name, op, version = m.group(1).lower(), m.group(2), m.group(3)
        info = host.package(name)
        row = rows.setdefault(name, {"name": name, "version": info.version if info else None})
        row["required_by"] = "torch"
        if op and version:
            row["required"] = f"{op}{version}"
    return known(sorted(rows.values(), key=lambda r: (r["name"] not in STACK_PACKAGES, str(r["name"]))))
