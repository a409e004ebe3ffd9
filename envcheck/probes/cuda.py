"""Section ``cuda``: where the driver's libcuda and the CUDA toolkit (nvcc, ptxas) are, and whether Triton and torch
extensions can compile (a C compiler, Python headers). Runs ``ldconfig -p`` and ``nvcc --version`` at most.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

from envcheck.model import Fact, Facts, known, missing, reasons
from envcheck.probes.host import Host

KEYS = ("libcuda_path", "triton_libcuda_dirs", "libcuda_link", "toolkit_path", "nvcc_path", "nvcc_version",
        "ptxas_path", "cc_path", "python_headers")

LIBCUDA = "libcuda.so.1"
LIBCUDA_LINK = "libcuda.so"  # what `-lcuda` makes the linker look for
WSL_LIB_DIR = "/usr/lib/wsl/lib"
LDCONFIG_TIMEOUT_S = 3.0
NVCC_TIMEOUT_S = 5.0
LDCONFIG_FALLBACKS = ("/sbin/ldconfig", "/usr/sbin/ldconfig", "/sbin/ldconfig.real")
DEFAULT_TOOLKIT = "/usr/local/cuda"

# ldconfig -p tags each entry with its ABI: a 64-bit host's cache also lists 32-bit libraries its loader never picks.
_ABI_TAG = {"x86_64": "x86-64", "aarch64": "AArch64", "ppc64le": "64bit"}
_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(.+)$")
_NVCC_RELEASE = re.compile(r"release\s+(\d+\.\d+)(?:,\s*V(\d+\.\d+\.\d+))?")


def standard_lib_dirs(machine: str) -> tuple[str, ...]:
    """Folders where distributions and NVIDIA's container runtime put driver libraries."""
    return (f"/usr/lib/{machine}-linux-gnu", f"/lib/{machine}-linux-gnu", "/usr/lib64", "/lib64",
            "/usr/local/nvidia/lib64", "/usr/lib", "/lib")


@dataclass(frozen=True)
class LdCache:
    """The dynamic loader's cache as ``ldconfig -p`` prints it; ``error`` when it could not be read."""

    libs: dict[str, list[str]] = field(default_factory=dict)  # soname -> paths, loader's order
    error: str | None = None

    def paths(self, soname: str) -> list[str]:
        return list(self.libs.get(soname, []))

    def dirs(self) -> set[str]:
        return {posixpath.dirname(p) for ps in self.libs.values() for p in ps}


def parse_ldconfig(text: str, machine: str) -> dict[str, list[str]]:
    """soname -> paths of the entries a loader of ``machine``'s ABI would use."""
    tag = _ABI_TAG.get(machine)
    libs: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _LDCONFIG_LINE.match(line)
        if not m:
            continue
        soname, flags, path = m.groups()
        if tag and tag not in flags:
            continue
        libs.setdefault(soname, []).append(path.rstrip())
    return libs


def _first(host: Host, paths: Iterable[str]) -> str | None:
    return next((p for p in paths if host.exists(p)), None)


def read_ld_cache(host: Host) -> LdCache:
    """The loader cache; never raises (``error`` says why it is empty)."""
    exe = host.which("ldconfig") or _first(host, LDCONFIG_FALLBACKS)  # /sbin: often not on a user's PATH
    if exe is None:
        return LdCache(error="ldconfig not found")
    result = host.run([exe, "-p"], timeout=LDCONFIG_TIMEOUT_S)
    return LdCache(parse_ldconfig(result.stdout, host.machine())) if result.ok else LdCache(error=result.describe())


def ld_library_path_dirs(host: Host) -> list[str]:
    # Empty entries mean "the current folder" to the loader; they never hold a driver.
    return [d for d in host.environ.get("LD_LIBRARY_PATH", "").split(":") if d]


def linker_default_dirs(machine: str) -> tuple[str, ...]:
    """Where gcc's linker looks for ``-l`` libraries without ``-L`` (Debian multiarch layout)."""
    return ("/usr/local/lib", f"/lib/{machine}-linux-gnu", f"/usr/lib/{machine}-linux-gnu", "/lib64", "/usr/lib64",
            "/lib", "/usr/lib")


def triton_libcuda_dirs(host: Host, cache: LdCache) -> list[str]:
    """The folders Triton (2.1+) gives the linker with ``-L`` for its launcher (``libcuda_dirs`` in its driver.py):
    TRITON_LIBCUDA_PATH, else those of the loader cache's libcuda.so.1, else the LD_LIBRARY_PATH ones holding one."""
    override = host.environ.get("TRITON_LIBCUDA_PATH")
    if override:
        return [override]
    dirs = [posixpath.dirname(p) for p in cache.paths(LIBCUDA)]
    if not dirs:
        dirs = [d for d in ld_library_path_dirs(host) if host.exists(posixpath.join(d, LIBCUDA))]
    return list(dict.fromkeys(dirs))


def _libcuda_link(host: Host, cache: LdCache) -> Fact:
    """The ``libcuda.so`` that ``-lcuda`` links when Triton builds its launcher: LIBRARY_PATH, Triton's ``-L``
    folders, then the linker's own. Without it: "cannot find -lcuda" (pytorch/pytorch#97501)."""
    triton_dirs = triton_libcuda_dirs(host, cache)
    if not triton_dirs:
        return missing(f"Triton finds no {LIBCUDA} in `ldconfig -p` or LD_LIBRARY_PATH "
                       "(it fails with 'libcuda.so cannot found!')")
    library_path = [d for d in host.environ.get("LIBRARY_PATH", "").split(":") if d]
    searched = list(dict.fromkeys([*library_path, *triton_dirs, *linker_default_dirs(host.machine())]))
    found = _first(host, (posixpath.join(d, LIBCUDA_LINK) for d in searched))
    return known(found) if found else missing(f"no {LIBCUDA_LINK} in {', '.join(searched)}: linking with -lcuda fails")


def parse_nvcc_version(text: str) -> str | None:
    """``13.0.88`` from ``nvcc --version`` (``release 13.0, V13.0.88``); ``13.0`` when only the release shows."""
    m = _NVCC_RELEASE.search(text)
    return (m.group(2) or m.group(1)) if m else None


def _toolkit(host: Host, nvcc: str | None) -> Fact:
    named = [(var, value) for var in ("CUDA_HOME", "CUDA_PATH") if (value := host.environ.get(var))]
    home = next((value for _, value in named if host.is_dir(value)), None)
    if home:
        return known(home)
    not_dirs = [f"{var}={value} is not a folder" for var, value in named]
    if nvcc:  # <toolkit>/bin/nvcc; nvvm/ tells a toolkit from a folder that only holds a wrapper script
        root = posixpath.dirname(posixpath.dirname(host.realpath(nvcc)))
        if host.is_dir(posixpath.join(root, "nvvm")):
            return known(root)
    if host.is_dir(DEFAULT_TOOLKIT):
        return known(DEFAULT_TOOLKIT)
    return missing("; ".join(not_dirs) if not_dirs else "no CUDA toolkit (CUDA_HOME, CUDA_PATH, /usr/local/cuda)")


def _tool(host: Host, name: str, toolkit: Fact) -> str | None:
    return host.which(name) or (_first(host, [posixpath.join(toolkit.value, "bin", name)]) if toolkit.ok else None)


def _cc(host: Host) -> Fact:
    cc_env = host.environ.get("CC", "").strip()
    try:
        named = shlex.split(cc_env)[:1]
    except ValueError:
        named = cc_env.split()[:1]
    # "ccache gcc": the compiler that matters is the wrapped one, but ccache runs it.
    found = next((p for p in map(host.which, (*named, "cc", "gcc", "clang")) if p), None)
    if found:
        return known(found)
    if cc_env:
        return missing(f"CC={cc_env} not found, and no cc, gcc or clang on PATH")
    return missing("no C compiler (cc, gcc, clang) on PATH: Triton cannot build its launcher")


def probe_cuda(host: Host, cache: LdCache | None = None) -> Facts:
    cache = cache if cache is not None else read_ld_cache(host)
    # Where libcuda.so.1 resolves, in the loader's order (LD_LIBRARY_PATH, its cache), then where drivers go.
    found = _first(host, [*(posixpath.join(d, LIBCUDA) for d in ld_library_path_dirs(host)), *cache.paths(LIBCUDA),
                          *(posixpath.join(d, LIBCUDA) for d in (WSL_LIB_DIR, *standard_lib_dirs(host.machine())))])
    why = f"{LIBCUDA} not found (LD_LIBRARY_PATH, ldconfig cache, standard folders): no NVIDIA driver"
    facts: Facts = {"libcuda_path": known(found) if found else missing(why)}
    dirs = triton_libcuda_dirs(host, cache)
    facts["triton_libcuda_dirs"] = known(dirs) if dirs else missing(f"no {LIBCUDA} in `ldconfig -p` or LD_LIBRARY_PATH")
    facts["libcuda_link"] = _libcuda_link(host, cache)
    nvcc = host.which("nvcc")
    toolkit = _toolkit(host, nvcc)
    facts["toolkit_path"] = toolkit
    nvcc = nvcc or _tool(host, "nvcc", toolkit)
    if nvcc is None:
        facts["nvcc_path"] = facts["nvcc_version"] = missing(reasons.NO_NVCC)
    else:
        result = host.run([nvcc, "--version"], timeout=NVCC_TIMEOUT_S)
        parsed = parse_nvcc_version(result.stdout) if result.ok else None
        why = result.describe() if not result.ok else "no 'release X.Y' in nvcc --version output"
        facts["nvcc_path"], facts["nvcc_version"] = known(nvcc), known(parsed) if parsed else missing(why)
    ptxas = _tool(host, "ptxas", toolkit)
    facts["ptxas_path"] = known(ptxas) if ptxas else missing("ptxas not found on PATH or in the CUDA toolkit")
    facts["cc_path"] = _cc(host)
    include = host.python_include_dir
    header = posixpath.join(include, "Python.h")
    if not include:
        facts["python_headers"] = missing("interpreter reports no include folder")
    else:
        facts["python_headers"] = known(header) if host.exists(header) else missing(
            f"no Python.h in {include} (Python development headers not installed)")
    return {k: facts.get(k, missing("not probed")) for k in KEYS}
