"""Section ``wsl``: the WSL version and the GPU bridge from Windows (/dev/dxg and the driver's libraries in
/usr/lib/wsl/lib). CUDA breaks when the loader cannot reach them or a Linux driver inside shadows them; this probe
records the evidence, the checks judge it."""

from __future__ import annotations

import fnmatch
import posixpath
import re

from envcheck.model import Fact, Facts, known, missing, reasons
from envcheck.probes.cuda import WSL_LIB_DIR, LdCache, ld_library_path_dirs, read_ld_cache, standard_lib_dirs
from envcheck.probes.host import Host

KEYS = (
    "is_wsl", "wsl_version", "distro_name", "dxg_present", "lib_dir_present", "lib_dir_files", "libcuda_symlinks",
    "loader_path_has_wsl_lib", "loader_shadows", "linux_driver_in_wsl", "linux_driver_packages", "nvidia_smi_path",
    "nvidia_smi_on_path",
)
DXG = "/dev/dxg"
DPKG_TIMEOUT_S = 5.0
# Linux driver packages that must not be installed inside WSL2 (Ubuntu/Debian names).
DRIVER_PACKAGE_PATTERNS = ("nvidia-driver-*", "libnvidia-compute-*", "nvidia-utils-*")
# The driver libraries CUDA programs and NVML load by soname; each must come from WSL_LIB_DIR.
DRIVER_SONAMES = ("libcuda.so.1", "libnvidia-ml.so.1")

# A start inside a run of digits is refused at once: else each one rescans the run (100 kB took 55 s).
_WSL1_KERNEL = re.compile(r"(?<!\d)\d+\.\d+\.\d+-\d+-Microsoft\b")


def wsl_version(osrelease: str, proc_version: str, host: Host) -> int | None:
    """1 or 2 under WSL, None otherwise. WSL2 kernels say ``-microsoft-standard(-WSL2)``, WSL1 fakes
    ``4.4.0-19041-Microsoft``; a custom WSL2 kernel may say neither, so WSL's interop hooks are the last resort."""
    text = f"{osrelease[:4096]} {proc_version[:4096]}"  # a kernel's strings: a few hundred characters
    lower = text.lower()
    if "microsoft-standard" in lower or "wsl2" in lower:
        return 2
    if _WSL1_KERNEL.search(text):
        return 1
    interop = host.environ.get("WSL_INTEROP") or host.environ.get("WSL_DISTRO_NAME")
    return 2 if "microsoft" in lower or interop or host.exists("/proc/sys/fs/binfmt_misc/WSLInterop") else None


def _unique_dirs(host: Host, dirs: tuple[str, ...]) -> list[str]:
    # On merged-/usr systems /lib is a link to usr/lib: look at each real folder once.
    seen: dict[str, str] = {}
    for d in dirs:
        real = host.realpath(d)
        if real not in seen and host.is_dir(d):
            seen[real] = d
    return list(seen.values())


def _in_wsl_dir(path: str) -> bool:
    return path == WSL_LIB_DIR or path.startswith(WSL_LIB_DIR + "/")


def _libcuda_links(host: Host, std_dirs: list[str]) -> list[dict[str, object]]:
    links: list[dict[str, object]] = []
    # In the WSL folder, libcuda.so and libcuda.so.1 should be links to the real libcuda.so.1.1.
    if host.exists(posixpath.join(WSL_LIB_DIR, "libcuda.so.1.1")):
        for name in ("libcuda.so", "libcuda.so.1"):
            path = posixpath.join(WSL_LIB_DIR, name)
            if host.is_symlink(path):
                links.append({"path": path, "target": host.readlink(path), "ok": host.exists(path)})
            elif host.exists(path):
                links.append({"path": path, "target": None, "ok": False})  # a copy: ldconfig complains
    # Elsewhere, links that lead into the WSL folder (made by hand or by packages).
    for d in std_dirs:
        for path in host.glob(posixpath.join(d, "libcuda.so*")):
            if host.is_symlink(path) and _in_wsl_dir(host.realpath(path)):
                links.append({"path": path, "target": host.readlink(path), "ok": host.exists(path)})
    return links


def _linux_driver_evidence(host: Host, std_dirs: list[str], packages: list[str]) -> list[str]:
    evidence: list[str] = []
    seen: set[str] = set()
    for d in std_dirs:
        for pattern in ("libcuda.so*", "libnvidia-ml.so*"):
            for path in host.glob(posixpath.join(d, pattern)):
                real = host.realpath(path)
                if _in_wsl_dir(real) or real in seen or not host.exists(real) or host.is_dir(real):
                    continue
                seen.add(real)
                shown = path if real == path else f"{path} -> {real}"
                evidence.append(f"{shown} is a Linux driver library (not a link to {WSL_LIB_DIR})")
    if host.exists("/proc/driver/nvidia"):
        evidence.append("/proc/driver/nvidia exists (a Linux NVIDIA kernel module is loaded)")
    evidence.extend(f"package {name} is installed (a Linux driver; WSL2 takes its driver from Windows)"
                    for name in packages)
    return evidence


def parse_dpkg_installed(text: str) -> list[str]:
    """Installed package names from ``dpkg-query -W -f='${Package}\\t${db:Status-Abbrev}\\n'``: a status letter
    ``n`` (not installed) or ``c`` (config files left) means no files on disk; every other one means some."""
    rows = (line.partition("\t") for line in text.splitlines())
    return [name.strip() for name, _, status in rows if name.strip() and len(status) >= 2 and status[1] not in "nc "]


def _driver_packages(host: Host) -> list[str]:
    exe = host.which("dpkg-query")
    if exe is None:
        return []  # not a Debian-family distribution: the library files above are the evidence
    result = host.run([exe, "-W", "-f=${Package}\t${db:Status-Abbrev}\n", *DRIVER_PACKAGE_PATTERNS],
                      timeout=DPKG_TIMEOUT_S)
    # dpkg-query exits 1 when a pattern matches nothing, yet still lists the others.
    if result.returncode not in (0, 1):
        return []
    # Filtered again: a wrapper or an older dpkg may print more than the patterns match.
    return [name for name in parse_dpkg_installed(result.stdout)
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in DRIVER_PACKAGE_PATTERNS)]


def _loader_shadows(host: Host) -> Fact:
    """Driver libraries that LD_LIBRARY_PATH (searched before the loader's cache) makes the loader find before the
    Windows driver's: nvidia-smi then fails to talk to the driver (microsoft/WSL#9099)."""
    found = []
    for soname in DRIVER_SONAMES:
        for d in ld_library_path_dirs(host):
            if posixpath.normpath(d) == WSL_LIB_DIR:
                break  # the Windows driver's copy comes first
            candidate = posixpath.join(d, soname)
            if host.exists(candidate) and not _in_wsl_dir(host.realpath(candidate)):
                found.append({"soname": soname, "path": candidate, "folder": d})
                break
    return known(found)


def _nvidia_smi(host: Host) -> tuple[Fact, Fact]:
    """Where nvidia-smi is, and whether PATH finds it: WSL adds /usr/lib/wsl/lib to PATH only for the shell it
    starts, not for sudo's or SSH sessions (microsoft/WSL#8794, #9185)."""
    on_path = host.which("nvidia-smi")
    if on_path:
        return known(on_path), known(True)
    candidate = posixpath.join(WSL_LIB_DIR, "nvidia-smi")
    if host.exists(candidate):
        return known(candidate), known(False)
    why = f"nvidia-smi is neither on PATH nor in {WSL_LIB_DIR}"
    return missing(why), known(False)


def probe_wsl(host: Host, cache: LdCache | None = None) -> Facts:
    """Facts of section ``wsl`` (off WSL, ``is_wsl`` only). ``cache``: the loader cache when the caller read it."""
    version = wsl_version(host.text_or_none("/proc/sys/kernel/osrelease") or "",
                          host.text_or_none("/proc/version") or "", host)
    if version is None:
        return {"is_wsl": known(False), **{k: missing(reasons.NOT_WSL) for k in KEYS[1:]}}
    distro = host.environ.get("WSL_DISTRO_NAME")
    facts: Facts = {
        "is_wsl": known(True),
        "wsl_version": known(version),
        "distro_name": known(distro) if distro else missing("WSL_DISTRO_NAME not set (cleared by sudo or su)"),
        "dxg_present": known(host.exists(DXG)),
        "lib_dir_present": known(host.is_dir(WSL_LIB_DIR)),
    }
    if version == 1:
        # WSL1 has no GPU bridge at all: the checks say "convert to WSL2", nothing more to see.
        why = "WSL1 has no GPU support (wsl --set-version <distro> 2)"
        facts.update({k: missing(why) for k in KEYS if k not in facts})
        return facts
    std_dirs = _unique_dirs(host, standard_lib_dirs(host.machine()))
    try:
        names = host.listdir(WSL_LIB_DIR)
        facts["lib_dir_files"] = known(sorted(n for n in names if n.startswith(("libcuda", "libnvidia-ml"))))
    except OSError as e:
        facts["lib_dir_files"] = missing(f"{WSL_LIB_DIR} unreadable ({e.strerror or e})")
    facts["libcuda_symlinks"] = known(_libcuda_links(host, std_dirs))
    cache = cache if cache is not None else read_ld_cache(host)
    if any(posixpath.normpath(d) == WSL_LIB_DIR for d in ld_library_path_dirs(host)):
        facts["loader_path_has_wsl_lib"] = known(True)
    elif cache.error:
        why = f"loader cache unreadable ({cache.error}) and LD_LIBRARY_PATH lacks {WSL_LIB_DIR}"
        facts["loader_path_has_wsl_lib"] = missing(why)
    else:
        facts["loader_path_has_wsl_lib"] = known(WSL_LIB_DIR in cache.dirs())
    facts["loader_shadows"] = _loader_shadows(host)
    packages = _driver_packages(host)
    facts["linux_driver_in_wsl"] = known(_linux_driver_evidence(host, std_dirs, packages))
    facts["linux_driver_packages"] = known(packages)
    facts["nvidia_smi_path"], facts["nvidia_smi_on_path"] = _nvidia_smi(host)
    return {k: facts.get(k, missing("not probed")) for k in KEYS}
