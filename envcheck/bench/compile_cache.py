"""What a second run on this machine reuses: Triton's kernels, Inductor's FX graphs and autotuning, the matmul
race's winners, in one folder per GPU model, driver, torch and Triton under the user's cache folder, made 0700
and checked as the user's own (else a private temporary folder, never a shared one like /tmp/torchinductor_*).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
import tempfile
from collections.abc import MutableMapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.bench.kernels.tuning import Tile

if TYPE_CHECKING:
    import torch

TRITON_VAR = "TRITON_CACHE_DIR"
INDUCTOR_VAR = "TORCHINDUCTOR_CACHE_DIR"
TILES_FILE = "matmul_tiles.json"
DRIVER_FILE = "/proc/driver/nvidia/version"

_folder: Path | None = None  # in use in this process (None: no cache, as in tests and tools)
_tiles: dict[str, Tile] = {}  # problem -> the tile its race picked (recorded, or picked in this run)
_new: dict[str, Tile] = {}
_counts = {"compiled": 0, "raced": 0}
_listening = False


def folder_name(gpu: str, cc: str, driver: str, torch: str, triton: str) -> str:
    parts = (gpu, f"sm{cc}", f"driver{driver}", f"torch{torch}", f"triton{triton}")
    return "_".join(re.sub(r"[^A-Za-z0-9.+]+", "-", p).strip("-") for p in parts)


def driver_version(path: str = DRIVER_FILE) -> str:
    """The kernel module's version (what nvidia-smi calls Driver Version), without NVML."""
    with contextlib.suppress(OSError):
        found = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+(?:\.\d+)+)", Path(path).read_text(errors="replace"))
        if found:
            return found.group(1)
    return "unknown"


def use_for(torch: ModuleType, index: int, environ: MutableMapping[str, str] | None = None) -> Path:
    """Use the cache folder of CUDA device ``index`` in this process and the children it starts."""
    import importlib.metadata

    props = torch.cuda.get_device_properties(index)
    try:
        triton = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        triton = "none"
    name = folder_name(str(props.name), f"{props.major}.{props.minor}", driver_version(), str(torch.__version__),
                       triton)
    return use(name, os.environ if environ is None else environ)


def use(name: str, environ: MutableMapping[str, str]) -> Path:
    """Point Triton and Inductor (unless the user did) at cache folder ``name``; load its tiles, count compiles."""
    global _folder
    from envcheck.destination import DestinationError, private_folder
    from envcheck.userdirs import cache_dir

    root = cache_dir()
    folder = root / "compile" / name
    try:
        for f in (root, root / "compile", folder):
            private_folder(f)
    except DestinationError as e:
        folder = Path(tempfile.mkdtemp(prefix="envcheck-compile-"))
        print(f"envcheck: the compile cache is not used ({e}); compiling into {folder}", file=sys.stderr)
    environ.setdefault(TRITON_VAR, str(folder / "triton"))
    environ.setdefault(INDUCTOR_VAR, str(folder / "inductor"))
    _folder = folder
    _tiles.clear()
    _tiles.update(_read(folder / TILES_FILE))
    _listen()
    return folder


def _read(path: Path) -> dict[str, Tile]:
    """The recorded tiles; an unreadable file or entry is left out (a cache never stops a run)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    got = {}
    for key, fields in data.items() if isinstance(data, dict) else ():
        with contextlib.suppress(TypeError, ValueError):
            got[key] = Tile(*fields)
    return got


def save() -> None:
    """Add this run's race winners to the folder's record (merged under a lock: GPUs of a node share it)."""
    if _folder is None or not _new:
        return
    path = _folder / TILES_FILE
    try:
        with open(_folder / (TILES_FILE + ".lock"), "a") as lock:
            with contextlib.suppress(ImportError, OSError):
                import fcntl

                fcntl.flock(lock, fcntl.LOCK_EX)
            merged = {**_read(path), **_new}
            tmp = path.with_name(f"{TILES_FILE}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({k: list(dataclasses.astuple(t)) for k, t in sorted(merged.items())}))
            os.replace(tmp, path)
    except OSError as e:
        print(f"envcheck: matmul tiles not recorded ({e})", file=sys.stderr)
    _new.clear()


def problem_key(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, precision: str) -> str:
    """A matmul problem as the race saw it: shapes, dtype, precision, strides, 16-byte alignment."""
    align = (a.data_ptr() | b.data_ptr() | out.data_ptr()) % 16
    return (f"{tuple(a.shape)}x{tuple(b.shape)} {str(a.dtype).removeprefix('torch.')} {precision} "
            f"{a.stride()} {b.stride()} {out.stride()} {align}")


def tile(key: str) -> Tile | None:
    return _tiles.get(key) if _folder is not None else None


def record(key: str, won: Tile) -> None:
    """A race ran for ``key`` and ``won``."""
    _counts["raced"] += 1
    if _folder is not None:
        _tiles[key] = _new[key] = won


def _listen() -> None:
    """Count Triton's compiles (its compilation listener, Triton 3.4 on; older ones say nothing)."""
    global _listening
    if _listening:
        return
    try:
        from triton import knobs
    except ImportError:
        return
    before = knobs.compilation.listener

    def heard(*args: object, **kwargs: object) -> None:
        if not kwargs.get("cache_hit", True):
            _counts["compiled"] += 1
        if before is not None:
            before(*args, **kwargs)

    knobs.compilation.listener = heard
    _listening = True


def mark() -> tuple[int, int, int, int]:
    """Compiles so far: Triton's, matmul races, torch.compile's cache hits and its FX-graph compiles."""
    fx = (0, 0)
    with contextlib.suppress(Exception):  # torch._dynamo is imported by a torch.compile case only
        if "torch._dynamo" in sys.modules:
            counters = sys.modules["torch._dynamo"].utils.counters
            fx = (int(counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]),
                  int(counters["inductor"]["fxgraph_cache_miss"]))
    return _counts["compiled"], _counts["raced"], *fx


def state(impl: str, before: tuple[int, ...], after: tuple[int, ...]) -> str | None:
    """Whether a first call between two ``mark``s came from a cache (model.CACHE_STATES); None where unknown."""
    compiled, raced, hits, misses = (y - x for x, y in zip(before, after, strict=True))
    if _folder is None:
        return None
    if impl == "triton" and _listening:
        return "miss" if compiled else "raced" if raced else "hit"
    if impl == "compile" and (hits or misses):
        return "miss" if misses else "hit"
    return None
