"""The device the worker measures on: whether CUDA is usable, what the GPU (or CPU) is (inside the worker only)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import platform
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.errors import one_line
from envcheck.model import BenchDevice, Note, Settings
from envcheck.ops import OPS, OpSpec, lookup

if TYPE_CHECKING:
    from torch._C import _CudaDeviceProperties

    from envcheck.bench.code import OpCode
    from envcheck.bench.monitor import LimitWatch
    from envcheck.bench.timer import Timer
    from envcheck.probes.nvml import Nvml, NvmlLike


def versions(torch: ModuleType) -> dict[str, str]:
    """torch / triton / CUDA / jax versions the run used (jax's from its metadata: not imported here)."""
    found = {"torch": str(torch.__version__), "cuda": torch.version.cuda}
    for name in ("triton", "jax"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return {k: str(v) for k, v in found.items() if v}


def cuda_unusable(torch: ModuleType, index: int) -> Note | None:
    """Why CUDA device ``index`` cannot be measured from this torch, else None."""
    if torch.version.cuda is None:
        return Note("bench.no_cuda.cpu_build", {"torch_version": str(torch.__version__)})
    if not torch.cuda.is_available():
        return Note("bench.no_cuda.unavailable")
    count = torch.cuda.device_count()
    if index >= count:
        return Note("bench.no_cuda.no_device", {"gpu_index": index, "gpus": count})
    return None


def nvml_uuid(props: _CudaDeviceProperties) -> str | None:
    """The GPU's UUID in NVML's form (``GPU-8d0ff531-...``); torch prints it without the prefix."""
    uuid = getattr(props, "uuid", None)
    if not uuid:
        return None
    text = str(uuid)
    return text if text.upper().startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def torch_pci_bus_id(props: _CudaDeviceProperties) -> str | None:
    """``00000000:19:00.0`` (NVML's form) from torch's PCI domain, bus and device numbers."""
    try:
        return f"{int(props.pci_domain_id):08X}:{int(props.pci_bus_id):02X}:{int(props.pci_device_id):02X}.0"
    except (AttributeError, TypeError, ValueError):
        return None


def cuda_device(torch: ModuleType, index: int, nvml: NvmlLike | None = None) -> BenchDevice:
    """The GPU as the report names it; the PCI bus id from NVML (as nvidia-smi prints it), else from torch."""
    props = torch.cuda.get_device_properties(index)
    uuid = nvml_uuid(props)
    bus_id = None
    if nvml is not None and uuid:
        with contextlib.suppress(Exception):  # NVML is optional here: torch's numbers stand in
            handle = nvml.call("nvmlDeviceGetHandleByUUID", uuid)
            info = nvml.call("nvmlDeviceGetPciInfo", handle)
            bus_id = info.get("busId") if isinstance(info, dict) else None
    return BenchDevice(
        backend="cuda", name=str(props.name), index=index, uuid=uuid,
        sm_count=int(props.multi_processor_count),
        l2_bytes=int(getattr(props, "L2_cache_size", 0)) or None,
        memory_total_bytes=int(props.total_memory), compute_capability=f"{props.major}.{props.minor}",
        pci_bus_id=str(bus_id) if bus_id else torch_pci_bus_id(props),
    )


def open_nvml() -> tuple[Nvml | None, str | None]:
    """NVML opened, or None and why not: no NVML means no clock samples, never no measurement."""
    try:
        from envcheck.probes.nvml import Nvml

        nvml = Nvml()
        error = nvml.init()
    except Exception as e:  # noqa: BLE001 - see the docstring
        return None, one_line(e)
    return (None, str(error)) if error else (nvml, None)


def cpu_name(read: Callable[[str], str] | None = None) -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        text = (read or (lambda path: Path(path).read_text(encoding="utf-8")))("/proc/cpuinfo")
    except OSError:
        text = ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "CPU"


class Runtime:
    """What every step of the worker shares: torch, the device, the timer, the settings, the declared ops."""

    def __init__(self, torch: ModuleType, backend: str, index: int, device: BenchDevice, timer: Timer,
                 settings: Settings, ops: tuple[OpSpec, ...] = (), source: str | None = None,
                 code: str | None = None) -> None:
        self.torch = torch
        self.backend = backend
        self.index = index
        self.device = device
        self.timer = timer
        self.settings = settings
        # torch.OutOfMemoryError is new in torch 2.4; older versions only have the cuda alias.
        self.oom: type[BaseException] = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
        self.where = "cuda" if backend == "cuda" else "cpu"
        self.ops = ops  # the user's declared ops, and the file or module:object declaring them
        self.source = source
        self.code_of = code  # "module:function" making a declared op's OpCode (the planner's choice)
        self._codes: dict[str, OpCode] = {}
        # sampling.settle's inputs: NVML's watch over the power and thermal limits, the last sustained window's end.
        self.limit_watch: Callable[[], LimitWatch] | None = None
        self.sustained_until: float | None = None

    def spec(self, op: str) -> OpSpec:
        return lookup(op, self.ops)

    def code(self, op: str) -> OpCode:
        """What runs for ``op``: envcheck's own code, or a declared op's made by the plan's ``code`` function (the
        suite never imports userbench), on first use: an import that fails is the failure of its cases."""
        if op in OPS:
            from envcheck.bench.code import BuiltinCode  # not at the top: code.py imports the suite, which imports this

            return BuiltinCode(op, self.settings.control)
        if op not in self._codes:
            if self.source is None or self.code_of is None:
                raise ValueError(f"op {op!r} is declared by no source")
            module, function = self.code_of.split(":")
            make = getattr(importlib.import_module(module), function)
            self._codes[op] = make(self.source, op)
        return self._codes[op]

    @property
    def cuda(self) -> bool:
        return self.backend == "cuda"

    def free_bytes(self) -> int | None:
        """Free device memory (None on the CPU, where the planner checked available RAM)."""
        return int(self.torch.cuda.mem_get_info(self.index)[0]) if self.cuda else None

    def after_failure(self) -> None:
        """Let a failed step's queued work finish and its memory go, so the next step starts clean."""
        for step in (self.torch.cuda.synchronize, self.torch.cuda.empty_cache) if self.cuda else ():
            with contextlib.suppress(Exception):  # a sticky CUDA error shows in the next step's own failure
                step()
