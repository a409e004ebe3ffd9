"""Section ``system``: operating system, CPU, memory, disk, Python and container, from /proc and /etc only."""

from __future__ import annotations

import posixpath
import re
import shlex

from envcheck.model import Fact, Facts, known, missing
from envcheck.probes.host import Host

KEYS = (
    "os_name", "os_id", "os_version", "kernel", "arch", "cpu_model", "cpu_cores_logical", "cpu_cores_physical",
    "ram_total_bytes", "ram_available_bytes", "disk_path", "disk_free_bytes", "python_version",
    "python_executable", "python_env", "python_env_path", "container",
)

OS_RELEASE_FILES = ("/etc/os-release", "/usr/lib/os-release")

# Arm CPUs name no model in /proc/cpuinfo, only numbers (the kernel's arch/arm64/include/asm/cputype.h).
ARM_IMPLEMENTERS = {
    "0x41": "Arm", "0x42": "Broadcom", "0x43": "Cavium", "0x48": "HiSilicon", "0x4e": "NVIDIA",
    "0x51": "Qualcomm", "0x61": "Apple", "0xc0": "Ampere",
}
ARM_PARTS = {
    ("0x41", "0xd03"): "Cortex-A53", ("0x41", "0xd08"): "Cortex-A72", ("0x41", "0xd0b"): "Cortex-A76",
    ("0x41", "0xd0c"): "Neoverse-N1", ("0x41", "0xd40"): "Neoverse-V1", ("0x41", "0xd42"): "Cortex-A78AE",
    ("0x41", "0xd49"): "Neoverse-N2", ("0x41", "0xd4f"): "Neoverse-V2", ("0xc0", "0xac3"): "Ampere-1",
}


def parse_os_release(text: str) -> dict[str, str]:
    """KEY=value pairs of an os-release file, shell quoting removed."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, raw = line.partition("=")
        try:
            parts = shlex.split(raw)
        except ValueError:  # unbalanced quote: keep the text as written
            parts = [raw.strip("\"'")]
        out[key.strip()] = " ".join(parts)
    return out


def parse_cpuinfo(text: str) -> list[dict[str, str]]:
    """One dict per blank-line separated block of /proc/cpuinfo (a logical CPU, or a header on arm)."""
    blocks = ({k.strip(): v.strip() for k, sep, v in (ln.partition(":") for ln in block.splitlines()) if sep}
              for block in re.split(r"\n[^\S\n]*(?:\n|$)", text))
    return [b for b in blocks if b]


def _arm_model(blocks: list[dict[str, str]]) -> str | None:
    for b in blocks:
        impl, part = b.get("CPU implementer", "").lower(), b.get("CPU part", "").lower()
        if impl and part:
            name = ARM_PARTS.get((impl, part))
            vendor = ARM_IMPLEMENTERS.get(impl, f"implementer {impl}")
            return f"{vendor} {name}" if name else f"{vendor} CPU part {part}"
    return None


def _cpu_facts(host: Host) -> Facts:
    try:
        blocks = parse_cpuinfo(host.read_text("/proc/cpuinfo"))
    except OSError as e:
        blocks = []
        why = f"/proc/cpuinfo unreadable ({e.strerror or e})"
    else:
        why = "not in /proc/cpuinfo"
    facts: Facts = {}

    model = next((b["model name"] for b in blocks if b.get("model name")), None)
    model = model or next((b["Hardware"] for b in blocks if b.get("Hardware")), None) or _arm_model(blocks)
    facts["cpu_model"] = known(model) if model else missing(f"CPU model {why}")

    processors = [b for b in blocks if "processor" in b and b["processor"].isdigit()]
    logical = len(processors) or host.cpu_count()
    facts["cpu_cores_logical"] = known(logical) if logical else missing(f"CPU count {why}")

    cores = {(b["physical id"], b["core id"]) for b in processors if "physical id" in b and "core id" in b}
    # Arm and some hypervisors do not expose the topology in /proc/cpuinfo.
    facts["cpu_cores_physical"] = known(len(cores)) if cores else missing(f"core topology {why}")
    return facts


def _os_facts(host: Host) -> Facts:
    info: dict[str, str] | None = None
    errors = []
    for path in OS_RELEASE_FILES:
        try:
            info = parse_os_release(host.read_text(path))
            break
        except OSError as e:
            errors.append(f"{path}: {e.strerror or e}")
    if info is None:
        why = "no os-release file (" + "; ".join(errors) + ")"
        return {"os_name": missing(why), "os_id": missing(why), "os_version": missing(why)}

    def pick(*names: str) -> Fact:
        value = next((info[n] for n in names if info.get(n)), None)
        return known(value) if value else missing(f"os-release has no {names[0]}")

    name = pick("PRETTY_NAME", "NAME")
    return {"os_name": name, "os_id": pick("ID"), "os_version": pick("VERSION_ID")}


def _kernel(host: Host) -> Fact:
    release = host.text_or_none("/proc/sys/kernel/osrelease")
    if release is not None:
        return known(release.strip())
    try:
        words = host.read_text("/proc/version").split()
    except OSError as e:
        return missing(f"kernel release unreadable ({e.strerror or e})")
    return known(words[2]) if words[:2] == ["Linux", "version"] and len(words) >= 3 else missing(
        "kernel release not in /proc/version")


def _memory_facts(host: Host) -> Facts:
    try:
        total, available = host.memory()
    except OSError as e:
        why = f"/proc/meminfo unreadable ({e.strerror or e})"
        return {"ram_total_bytes": missing(why), "ram_available_bytes": missing(why)}
    return {
        "ram_total_bytes": known(total),
        "ram_available_bytes": known(available) if available is not None else missing(
            "kernel reports no MemAvailable (older than 3.14)"),
    }


def _disk_facts(host: Host, reports_dir: str) -> Facts:
    path = host.realpath(reports_dir)
    # The folder may not exist before the first report: measure where it will be created.
    while not host.exists(path) and path != "/":
        path = posixpath.dirname(path)
    try:
        free = known(host.disk_free(path))
    except OSError as e:
        free = missing(f"cannot stat {path} ({e.strerror or e})")
    return {"disk_path": known(path), "disk_free_bytes": free}


def _python_facts(host: Host) -> Facts:
    facts: Facts = {
        "python_version": known(host.python_version) if host.python_version else missing("unknown"),
        "python_executable": known(host.python_executable) if host.python_executable else missing(
            "sys.executable is empty (embedded interpreter)"),
    }
    prefix = host.python_prefix
    conda_prefix = host.environ.get("CONDA_PREFIX")
    if host.exists(posixpath.join(prefix, "conda-meta")) or (conda_prefix and conda_prefix == prefix):
        facts["python_env"], facts["python_env_path"] = known("conda"), known(prefix)
    elif prefix != host.base_prefix or host.exists(posixpath.join(prefix, "pyvenv.cfg")):
        facts["python_env"], facts["python_env_path"] = known("venv"), known(prefix)
    else:
        facts["python_env"] = known("system")
        facts["python_env_path"] = missing("system interpreter, no virtual environment")
    return facts


def detect_container(host: Host) -> str:
    """``docker``, ``podman``, ``kubernetes``, ``lxc`` or ``none`` (WSL is not a container)."""
    if host.environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    cgroup = host.text_or_none("/proc/1/cgroup") or ""
    if "kubepods" in cgroup:
        return "kubernetes"
    if host.exists("/run/.containerenv"):
        return "podman"
    if host.exists("/.dockerenv") or "docker" in cgroup:
        return "docker"
    if "lxc" in cgroup:
        return "lxc"
    # systemd writes the container manager's name here (podman, docker, lxc, systemd-nspawn, ...).
    manager = (host.text_or_none("/run/systemd/container") or "").strip()
    if manager in ("docker", "podman", "lxc"):
        return manager
    return host.environ["container"] if host.environ.get("container") in ("docker", "podman", "lxc") else "none"


def probe_system(host: Host, reports_dir: str = "reports") -> Facts:
    arch = host.machine()
    facts: Facts = {**_os_facts(host), "kernel": _kernel(host),
                    "arch": known(arch) if arch else missing("platform reports no machine type"), **_cpu_facts(host),
                    **_memory_facts(host), **_disk_facts(host, reports_dir), **_python_facts(host),
                    "container": known(detect_container(host))}
    return {k: facts.get(k, missing("not probed")) for k in KEYS}
