"""The benchmark suite: ``plan`` turns the options and the probe facts into a ``Plan`` of cases, settings and
skips with why, without importing torch. Ragged shapes sit beside powers of two; ``--quick`` still reaches every
kernel path and precision."""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from envcheck import units
from envcheck.bench import jax_impl
from envcheck.errors import UsageError
from envcheck.model import BenchDevice, Case, CaseKey, Environment, Failure, Note, Settings, Skip
from envcheck.model.bench import ParamValue
from envcheck.ops import DEFAULT_OPS, DTYPES, OP_GROUPS, OP_NAMES, OpSpec, spec, variant

# What users type -> (dtype, precision or None): ``tf32`` asks for TF32 fp32 matmuls only, ``fp32`` for both.
DTYPE_ALIASES: dict[str, tuple[str, str | None]] = {
    "fp32": ("fp32", None), "float32": ("fp32", None), "float": ("fp32", None),
    "tf32": ("fp32", "tf32"),
    "fp16": ("fp16", None), "float16": ("fp16", None), "half": ("fp16", None),
    "bf16": ("bf16", None), "bfloat16": ("bf16", None),
}

# ``--sizes`` items: ``N`` (``1024``, ``1_048_576``, ``2^20``, ``2**20``, ``1e6``, ``4K`` / ``1M`` / ``1G`` in powers
# of two), ``RxC``, ``MxNxK`` or conv2d's ``NxCxHxWxKxRxSTRIDE``; ``shape_for`` says which ops a size feeds.
MAX_DIM = 1 << 40  # 4 TiB in fp32: no single benchmark tensor fits any GPU made

_MULTIPLIERS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_POWER = re.compile(r"^(\d+)(?:\^|\*\*)(\d+)$")
_SCALED = re.compile(r"^(\d+)([kmg]?)$")
_SCIENTIFIC = re.compile(r"^(\d+(?:\.\d+)?)e(\d+)$")


def _not_a_size(item: str, why: str = "") -> UsageError:
    return UsageError(f"error.not_a_size{'.' + why if why else ''}", item=repr(item))


def parse_count(text: str, item: str | None = None) -> int:
    """One positive dimension; ``item``: the whole ``--sizes`` item, for the error message."""
    whole = item if item is not None else text
    t = text.strip().lower().replace("_", "")
    value: int | None = None
    if m := _POWER.match(t):
        base, exp = int(m.group(1)), int(m.group(2))
        if exp > 64:
            raise _not_a_size(whole, "too_large")
        value = base**exp
    elif m := _SCALED.match(t):
        value = int(m.group(1)) * _MULTIPLIERS[m.group(2)]
    elif m := _SCIENTIFIC.match(t):
        mantissa, exp = m.group(1), int(m.group(2))
        if exp > 15:
            raise _not_a_size(whole, "too_large")
        x = float(mantissa) * 10**exp
        if not x.is_integer():
            raise _not_a_size(whole, "not_whole")
        value = int(x)
    if value is None:
        raise _not_a_size(whole)
    if value <= 0:
        raise _not_a_size(whole, "not_positive")
    if value > MAX_DIM:
        raise _not_a_size(whole, "too_large")
    return value


def parse_size(item: str) -> tuple[int, ...]:
    """One ``--sizes`` item as a shape of 1, 2, 3 or 7 (conv2d) dimensions."""
    parts = item.strip().lower().split("x")
    if not (1 <= len(parts) <= 3 or len(parts) == 7) or any(not p.strip() for p in parts):
        raise _not_a_size(item)
    return tuple(parse_count(p, item) for p in parts)


def parse_sizes(items: Iterable[str]) -> tuple[tuple[int, ...], ...]:
    """Every item parsed, duplicates dropped, the user's order kept."""
    out: dict[tuple[int, ...], None] = {}
    for item in items:
        out.setdefault(parse_size(item), None)
    return tuple(out)


def shape_for(op: str, size: tuple[int, ...], matmul_square: bool) -> tuple[int, ...] | None:
    """The shape ``op`` runs at for a parsed size, or None. ``matmul_square``: whether ``N`` also means an N^3 matmul
    (only where the user named matmul: ``--sizes 1M`` would plan 2^60 multiply-adds)."""
    family = spec(op).family
    if family == "matmul":
        if len(size) == 3:
            return size
        if len(size) == 1 and matmul_square:
            return (size[0],) * 3
        return None
    if len(size) != spec(op).rank:
        return None
    try:
        spec(op).check_shape(size)  # e.g. a conv2d stride larger than its kernel
    except ValueError:
        return None
    return size


# IEEE fp32 matmul runs on CUDA cores (no tensor cores): a Triton kernel takes seconds at 8192^3.
IEEE_MATMUL_MAX_DIM = 4096
Shape = tuple[int, ...]
Entry = tuple[Shape, tuple[str, ...]]  # a GPU suite's shape and its dtypes, in order (fp32 matmuls: TF32, IEEE)


def _at(shapes: Sequence[Shape], dtypes: tuple[str, ...] = DTYPES) -> tuple[Entry, ...]:
    return tuple((s, dtypes) for s in shapes)


@dataclass(frozen=True)
class OpSizes:
    """An op's suites: GPU (full, quick), CPU baseline, torch.compile's shapes, the interpreter's (every dtype)."""

    full: tuple[Entry, ...]
    quick: tuple[Entry, ...]
    cpu: tuple[Shape, ...]
    cpu_quick: tuple[Shape, ...]
    compile: tuple[Shape, ...]
    interpret: tuple[Shape, ...] = ()
    quick_compile: tuple[Shape, ...] = ()


_FP32, _HALF = ("fp32",), ("fp16", "bf16")
_SQUARE = tuple((n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192))
# Vectors: fp16 / bf16 at a few sizes; the quick suite reaches every precision at one ragged size.
_VECTOR = OpSizes(
    full=tuple(((n,), DTYPES if n in (1 << 20, 1_000_003, 1 << 24, 1 << 28) else _FP32)
               for n in (1 << 10, 10240, 102400, 1 << 16, 1 << 20, 1_000_003, 1 << 22, 1 << 24, 1 << 26, 1 << 28)),
    quick=tuple(((n,), DTYPES if n == 1_000_003 else _FP32) for n in (1 << 10, 10240, 102400, 1 << 20, 1_000_003, 1 << 26)),
    cpu=((1 << 10,), (10240,), (102400,), (100_003,), (1 << 16,), (1 << 20,), (1 << 22,)),
    cpu_quick=((1 << 10,), (10240,), (100_003,), (102400,), (1 << 20,)),
    compile=((1 << 10,), (1 << 20,), (1_000_003,), (1 << 24,), (1 << 28,)),
    interpret=((4099,),), quick_compile=((1 << 10,), (1 << 20,), (1_000_003,), (1 << 26,)))
_ROWS = OpSizes(
    full=_at(((4096, 1024), (1000, 4097), (8192, 4096), (16384, 8192), (4096, 32768))),
    quick=_at(((1000, 4097), (8192, 4096))), cpu=((1024, 1024), (257, 1025), (4096, 1024)),
    cpu_quick=((257, 1025), (1024, 1024)), compile=((4096, 1024), (8192, 4096)), interpret=((37, 1000),))
# Past softmax's single-tile limit (32768 columns), where its online kernel runs (2 x 33000 interpreted).
_ONLINE = ((256, 65536),)
_SOFTMAX = dataclasses.replace(_ROWS, full=_ROWS.full + _at(_ONLINE), quick=_ROWS.quick + _at(_ONLINE),
                               interpret=((37, 1000), (2, 33000)))
_MATMUL = OpSizes(
    full=_at(_SQUARE + ((1000, 1000, 1000), (1000, 1001, 999), (4096, 11008, 4096)), (*_HALF, "fp32")),
    quick=(((512, 512, 512), _HALF), ((1000, 1001, 999), (*_HALF, "fp32")), ((1024, 1024, 1024), _FP32),
           ((2048, 2048, 2048), _HALF), ((4096, 4096, 4096), _HALF)),
    cpu=((128, 128, 128), (255, 257, 253), (256, 256, 256), (512, 512, 512)),
    cpu_quick=((255, 257, 253), (256, 256, 256), (512, 512, 512)),
    compile=((1024, 1024, 1024), (1000, 1001, 999), (4096, 4096, 4096)),
    interpret=((67, 45, 200),))  # K = 200: the short accumulation where a 16-bit one hides in the rounding
# conv2d (N, C, H, W, K, R, stride): kernels 3, 5, 7, strides 1 and 2, a ragged input, a ragged conv (even
# kernel, odd widths at stride 2, C R R = 304: a multiple of no block).
_CONV_RAGGED = (8, 19, 33, 35, 24, 4, 2)
_CONV = OpSizes(
    full=_at(((32, 64, 32, 32, 64, 3, 1), (32, 64, 32, 32, 64, 5, 1), (32, 64, 32, 32, 64, 7, 1),
              (16, 64, 64, 64, 64, 3, 2), (16, 64, 64, 64, 128, 5, 2), (8, 32, 128, 128, 64, 7, 2),
              (8, 32, 127, 129, 48, 3, 1), _CONV_RAGGED)),
    quick=_at(((32, 64, 32, 32, 64, 3, 1), (8, 32, 128, 128, 64, 7, 2), _CONV_RAGGED)),
    cpu=((4, 16, 32, 32, 16, 3, 1), (2, 8, 33, 31, 8, 5, 2), (2, 8, 64, 64, 8, 7, 2), (2, 3, 9, 11, 5, 4, 2)),
    cpu_quick=((4, 16, 32, 32, 16, 3, 1), (2, 8, 33, 31, 8, 5, 2), (2, 3, 9, 11, 5, 4, 2)),
    compile=((32, 64, 32, 32, 64, 3, 1), (8, 32, 128, 128, 64, 7, 2)),
    interpret=((2, 3, 9, 11, 5, 4, 2), (2, 5, 9, 9, 4, 3, 1)))
# Row-wise training ops (rows, cols): up to softmax's single-tile limit of 32768 columns.
_ROW_OPS = dataclasses.replace(_ROWS, full=_at(((4096, 1024), (1000, 4097), (8192, 4096), (4096, 8192),
                                                (1024, 32768))))
# Reductions of (a, b, c): a user's (4, 512, 896), a large power of two, ragged ones.
_REDUCE = OpSizes(
    full=_at(((4, 512, 896), (64, 1024, 1024), (16, 4096, 4096), (1000, 3, 4097), (7, 33, 1001))),
    quick=_at(((4, 512, 896), (64, 1024, 1024), (7, 33, 1001))), cpu=((4, 512, 896), (3, 100, 1001), (16, 256, 256)),
    cpu_quick=((4, 512, 896), (3, 100, 1001)), compile=((4, 512, 896), (64, 1024, 1024)), interpret=((3, 37, 129),))
# Linear layer forward + backward (M, N, K): x is M x K, W is N x K.
_LINEAR = OpSizes(
    full=_at(((1024, 1024, 1024), (4096, 4096, 4096), (8192, 4096, 4096), (1000, 1001, 999))),
    quick=_at(((2048, 2048, 2048), (1000, 1001, 999))), cpu=((128, 128, 128), (255, 257, 253), (256, 256, 256)),
    cpu_quick=((255, 257, 253), (256, 256, 256)), compile=((1024, 1024, 1024), (1000, 1001, 999)),
    interpret=((67, 45, 129), (33, 65, 65)))  # W non-square and square (a forgotten transpose fits only there)
SUITES: dict[str, OpSizes] = {
    "vector_add": _VECTOR, "relu": _VECTOR, "softmax": _SOFTMAX, "row_sum": _ROWS, "matmul": _MATMUL,
    "conv2d": _CONV, "layer_norm": _ROW_OPS, "softmax_fwbw": _ROW_OPS, "linear_fwbw": _LINEAR,
    **{f"{how}_{over}": _REDUCE for how in ("sum", "max") for over in ("all", "inner", "lead")},
}

# The presets (timer.py states the rules): 150 samples a timing keep a full report under 1 MB; stop_ci is half
# the 1% within which GPU times agree with do_bench_cudagraph (tools/evidence/verify_timer.py).
GPU_SETTINGS = Settings(warmup_ms=25, rep_ms=100, min_samples=10, max_samples=150, cold_l2=True, stop_ci=0.005)
GPU_QUICK_SETTINGS = Settings(warmup_ms=10, rep_ms=40, min_samples=10, max_samples=100, cold_l2=True,
                              stop_ci=0.005)
# The CPU warms longer (thread pools, fresh pages) and takes 20 samples at least (a host clock on a shared machine).
CPU_SETTINGS = Settings(warmup_ms=50, rep_ms=100, min_samples=20, max_samples=200, cold_l2=False)
CPU_QUICK_SETTINGS = Settings(warmup_ms=20, rep_ms=40, min_samples=20, max_samples=100, cold_l2=False)

# On a machine this small the worker's own Python and the parent need a core: torch's pool fighting them for the
# cores made the CPU baseline swing 100x between runs on a 2-core VM.
SMALL_MACHINE_CORES = 4


def cpu_threads(physical: Callable[[], int | None] | None = None,
                logical: Callable[[], int | None] | None = None) -> int:
    """Threads torch uses for the CPU baseline: the physical cores (hyper-threads only add contention), less one
    on small machines (``physical`` / ``logical``: psutil's counts, the test seam)."""
    import psutil

    cores = (physical or (lambda: psutil.cpu_count(logical=False)))()
    if not cores:
        cores = (logical or (lambda: psutil.cpu_count(logical=True)))() or 1
    return max(1, cores - 1) if cores <= SMALL_MACHINE_CORES else cores


# Share of free memory a case may use (the context, allocator slack and rotating buffers need the rest).
MEMORY_HEADROOM = 0.8


class RunOptions(Protocol):
    """What planning reads of ``envcheck run``'s options (commands/options.py), read-only."""

    @property
    def quick(self) -> bool: ...
    @property
    def ops(self) -> Sequence[str] | None: ...
    @property
    def sizes(self) -> Sequence[str] | None: ...
    @property
    def dtypes(self) -> Sequence[str] | None: ...
    @property
    def device(self) -> int: ...
    @property
    def no_compile(self) -> bool: ...
    @property
    def no_jax(self) -> bool: ...
    @property
    def interpret(self) -> bool: ...
    @property
    def control(self) -> str | None: ...


@dataclass(frozen=True)
class PlannedCase:
    """One case the worker is asked to measure (the plan, the protocol and the runner carry it)."""

    op: str
    impl: str
    dtype: str
    precision: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.shape, tuple):
            object.__setattr__(self, "shape", tuple(self.shape))
        # The model's checks: a case that could not be reported is refused where it is planned.
        Case(self.op, self.impl, self.dtype, self.precision, self.shape, failure=Failure("run", "-"))

    @property
    def key(self) -> CaseKey:
        """Same identity as ``model.Case.key``."""
        return (self.op, self.impl, self.dtype, self.precision, self.shape)

    @property
    def group(self) -> tuple[str, str, str, tuple[int, ...]]:
        """The cases measured together: every implementation of one (op, dtype, precision, shape)."""
        return (self.op, self.dtype, self.precision, self.shape)

    @property
    def group_label(self) -> str:
        """``matmul fp32/tf32 4096×4096×4096``, as progress lines name the group."""
        return f"{self.op} {variant(self.dtype, self.precision)} {units.shape(self.shape)}"

    @property
    def label(self) -> str:
        return f"{self.group_label} {self.impl}"

    def skip(self, reason: Note) -> Skip:
        return Skip(self.op, self.impl, self.dtype, self.shape, reason, precision=self.precision)

    def failed(self, stage: str, detail: str, compile_s: float | None = None) -> Case:
        return Case(self.op, self.impl, self.dtype, self.precision, self.shape, compile_s=compile_s,
                    failure=Failure(stage, detail))


@dataclass(frozen=True)
class Plan:
    """What ``envcheck run`` measures (``backend`` None: nothing can be); ``device`` as the probes saw it."""

    backend: str | None  # cuda | cpu | None
    index: int
    cases: tuple[PlannedCase, ...]
    settings: Settings
    device: BenchDevice
    skips: tuple[Skip, ...] = ()
    notes: tuple[Note, ...] = ()
    ops: tuple[OpSpec, ...] = ()  # the user's declared ops (envcheck bench), and their source
    source: str | None = None
    code: str | None = None  # "module:function" making a declared op's OpCode (bench/device.Runtime.code)
    ceilings: bool = True  # measure the ceilings first (a restarted worker has them already)

    @property
    def runnable(self) -> bool:
        return self.backend is not None and bool(self.cases)


@dataclass(frozen=True)
class Selection:
    """The user's ``--ops``, ``--dtypes`` and ``--sizes``, validated."""

    ops: tuple[str, ...]
    ops_given: bool
    dtypes: tuple[tuple[str, str | None], ...] | None  # (dtype, precision or None=all)
    sizes: tuple[tuple[int, ...], ...] | None


def select(options: RunOptions) -> Selection:
    """Validate ``--ops/--dtypes/--sizes`` (a UsageError names the valid values)."""
    ops_given = bool(options.ops)
    if options.ops:
        named = [o.strip().lower() for o in options.ops]
        ops = tuple(dict.fromkeys(op for o in named for op in OP_GROUPS.get(o, (o,))))
        unknown = [o for o in ops if o not in OP_NAMES]
        if unknown:
            raise UsageError("error.ops_unknown", op=repr(unknown[0]), known=", ".join((*OP_NAMES, *OP_GROUPS)))
    else:
        ops = DEFAULT_OPS
    dtypes = None
    if options.dtypes:
        unknown = [d for d in options.dtypes if d.strip().lower() not in DTYPE_ALIASES]
        if unknown:
            raise UsageError("error.dtypes_unknown", dtype=repr(unknown[0]))
        dtypes = tuple(dict.fromkeys(DTYPE_ALIASES[d.strip().lower()] for d in options.dtypes))
    sizes = None
    if options.sizes:
        sizes = parse_sizes(options.sizes)
        for size in sizes:
            if not any(shape_for(op, size, matmul_square=ops_given) for op in ops):
                raise UsageError(f"error.sizes_fit_none{'.ops' if ops_given else ''}", item="x".join(map(str, size)))
        if not ops_given:
            # Without --ops, the sizes choose the ops: 1M alone means the vector ops only.
            ops = tuple(op for op in ops if any(shape_for(op, s, matmul_square=False) for s in sizes))
    return Selection(ops, ops_given, dtypes, sizes)


def check_device(index: int, env: Environment) -> None:
    """``--device N`` names a GPU this machine has, whatever runs (UsageError otherwise): torch's count
    (CUDA_VISIBLE_DEVICES, as the worker), else NVML's."""
    count = env.get("torch_runtime", "device_count")
    count = max(count, 0) if isinstance(count, int) and (count or not env.gpus) else len(env.gpus)
    if index == 0 and count == 0:
        return  # the default, on a machine without a GPU: the CPU baseline runs
    if not 0 <= index < count:
        if count == 0:
            raise UsageError("error.device_none", index=index)
        raise UsageError("error.device_missing", index=index, count=count, have=tuple(range(count)))


def _first_line(text: object, limit: int = 300) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def torch_missing(env: Environment) -> Note | None:
    """Why PyTorch cannot run at all (not installed, or its import fails), else None."""
    if env.get("torch", "installed") is False:
        return Note("bench.no_torch")
    if env.get("torch_runtime", "import_ok") is False:
        err = env.get("torch_runtime", "error")
        return Note("bench.torch_import_failed", {"detail": _first_line(err) if err else None})
    return None


def cuda_unusable(env: Environment) -> list[Note]:
    """Why there is no usable CUDA GPU, from the probe facts; [] when there is one."""
    available = env.get("torch_runtime", "cuda_available")
    if available is True and env.get("torch_runtime", "smoke_ok") is not False:
        return []
    reasons = []
    nvml_error = env.get("driver", "nvml_error")
    if nvml_error:
        reasons.append(Note("bench.no_cuda.nvml_error", {"detail": _first_line(nvml_error)}))
    elif env.get("driver", "gpu_count") == 0:
        reasons.append(Note("bench.no_cuda.no_gpus"))
    build = env.get("torch", "build")
    if build in ("cpu", "rocm"):
        reasons.append(Note(f"bench.no_cuda.{build}_build", {"torch_version": env.get("torch", "version")}))
    runtime_error = env.get("torch_runtime", "error")
    if runtime_error:
        reasons.append(Note("bench.no_cuda.runtime_error", {"detail": _first_line(runtime_error)}))
    if available is True:  # its smoke test failed
        reasons.append(Note("bench.no_cuda.smoke_failed"))
    if not reasons and available is False:
        reasons.append(Note("bench.no_cuda.unavailable"))
    elif not reasons:
        why = env.fact("torch_runtime", "cuda_available").reason
        reasons.append(Note("bench.no_cuda.unknown", {"detail": _first_line(why) if why else None}))
    return reasons


def triton_unusable(env: Environment) -> Note | None:
    """Why Triton (and torch.compile, whose GPU code is Triton) cannot run, else None."""
    if env.get("triton", "installed") is False:
        return Note("bench.triton_unusable.not_installed")
    if env.get("triton_runtime", "smoke_ok") is False:
        err = env.get("triton_runtime", "error")
        return Note("bench.triton_unusable.smoke_failed", {"detail": _first_line(err) if err else None})
    return None


def jax_unusable(options: RunOptions, ops_given: bool, one_of_several: bool) -> Note | None:
    """Why JAX is not measured, else None: on one GPU alone (a JAX client opens a context on every visible GPU),
    for ops named with ``--ops`` only."""
    if options.no_jax:
        return Note("bench.jax_off")
    if one_of_several:
        return Note("bench.jax_multi_gpu")
    if not jax_impl.installed():
        return Note("bench.jax_missing")
    if not ops_given:
        return Note("bench.jax_named_ops")
    return None


def probed_device(env: Environment, backend: str | None, index: int) -> BenchDevice:
    """The device as the probes describe it (the worker describes it better once it runs)."""
    if backend == "cuda":
        gpu = next((g for g in env.gpus if g.index == index), None)
        get = gpu.get if gpu is not None else (lambda key: None)
        runtime = next((d for d in (env.get("torch_runtime", "devices") or []) if d.get("index") == index), {})
        return BenchDevice("cuda", str(get("name") or runtime.get("name") or f"CUDA device {index}"), index,
                           uuid=get("uuid"), sm_count=get("sm_count") or runtime.get("sm_count"),
                           memory_total_bytes=get("memory_total_bytes"),
                           compute_capability=get("compute_capability") or runtime.get("capability"),
                           pci_bus_id=get("pci_bus_id"))
    cpu = env.get("system", "cpu_model")
    return BenchDevice("cpu", str(cpu) if cpu else "CPU")


def free_memory(env: Environment, backend: str, index: int) -> tuple[int | None, dict[str, ParamValue]]:
    """Memory a case may use on the device, and how a skip names that memory."""
    if backend == "cpu":
        avail = env.get("system", "ram_available_bytes")
        return (int(avail) if avail else None), {"memory": "ram"}
    gpu = next((g for g in env.gpus if g.index == index), None)
    total = gpu.get("memory_total_bytes") if gpu else None
    used = gpu.get("memory_used_bytes") if gpu else None
    if total is None:
        dev = next((d for d in (env.get("torch_runtime", "devices") or []) if d.get("index") == index), {})
        total = dev.get("memory_bytes")
    where = {"memory": "gpu", "gpu_index": index}
    if total is None:
        return None, where
    return int(total) - int(used or 0), where


Triple = tuple[str, str, tuple[int, ...]]  # dtype, precision, shape


def _precisions(op: str, dtype: str, shape: Shape, user_sizes: bool = False) -> tuple[str, ...]:
    """A GPU case's precisions: an fp32 matmul-family op's TF32 and (up to IEEE_MATMUL_MAX_DIM) IEEE."""
    if dtype != "fp32" or spec(op).family != "matmul":
        return (dtype,)
    return ("tf32", "fp32") if user_sizes or max(shape) <= IEEE_MATMUL_MAX_DIM else ("tf32",)


def _default_shapes(op: str, backend: str, quick: bool) -> list[Triple]:
    """(dtype, precision, shape) of the built-in suite for one op on ``backend`` (``interpret``: --interpret)."""
    sizes = SUITES[op]
    if backend == "interpret":
        return [(d, d, s) for s in sizes.interpret for d in DTYPES]
    if backend == "cpu":
        return [("fp32", "fp32", s) for s in (sizes.cpu_quick if quick else sizes.cpu)]
    return [(d, p, s) for s, dtypes in (sizes.quick if quick else sizes.full) for d in dtypes
            for p in _precisions(op, d, s)]


def _all_dtype_shapes(op: str, backend: str, shapes: Sequence[tuple[int, ...]],
                      dtypes: Sequence[tuple[str, str | None]], user_sizes: bool) -> list[Triple]:
    """(dtype, precision, shape) for explicit dtypes and/or sizes (``tf32`` only where a precision is TF32)."""
    return [(dtype, p, shape) for shape in shapes for dtype, only in dtypes
            for p in ((dtype,) if backend == "cpu" else _precisions(op, dtype, shape, user_sizes)) if only in (None, p)]


def frame(quick: bool, device: int, env: Environment, ops: tuple[str, ...]) -> Plan:
    """A plan before its cases (run's and bench's): device, settings preset, notes (``backend`` None: no PyTorch)."""
    check_device(device, env)
    no_torch = torch_missing(env)
    if no_torch:
        settings = dataclasses.replace(GPU_QUICK_SETTINGS if quick else GPU_SETTINGS, quick=quick, ops=ops)
        return Plan(None, 0, (), settings, probed_device(env, None, 0), notes=(no_torch,))
    cuda_reasons = cuda_unusable(env)
    backend = "cpu" if cuda_reasons else "cuda"
    index = device if backend == "cuda" else 0
    if backend == "cuda":
        settings = GPU_QUICK_SETTINGS if quick else GPU_SETTINGS
        lost = next((g.lost for g in env.gpus if g.index == index and g.lost), None)
        notes = [Note("bench.gpu_lost", {"gpu_index": index, "detail": _first_line(lost)})] if lost else []
    else:
        settings = dataclasses.replace(CPU_QUICK_SETTINGS if quick else CPU_SETTINGS, threads=cpu_threads())
        notes = cuda_reasons
    return Plan(backend, index, (), dataclasses.replace(settings, quick=quick, ops=ops),
                probed_device(env, backend, index), notes=tuple(notes))


def with_cases(plan: Plan, planned: Sequence[PlannedCase], env: Environment, specs: Callable[[str], OpSpec] = spec,
               skip: Callable[[PlannedCase], Note | None] = lambda p: None) -> Plan:
    """``plan`` with the ``planned`` cases, less those free memory cannot hold or ``skip`` names (kept as skips)."""
    budget, where = free_memory(env, plan.backend or "cpu", plan.index)
    cases, skips = [], []
    for p in planned:
        need = specs(p.op).memory_needed_bytes(p.shape, p.dtype)
        too_big = budget is not None and need > MEMORY_HEADROOM * budget
        why = Note("skip.memory", {"need_bytes": need, "free_bytes": budget, **where}) if too_big else skip(p)
        if why is None:
            cases.append(p)
        else:
            skips.append(p.skip(why))
    return dataclasses.replace(plan, cases=tuple(cases), skips=tuple(skips))


def plan(options: RunOptions, env: Environment, gpu: int | None = None) -> Plan:
    """The built-in suite's cases for these options on this machine (UsageError on bad options). ``gpu``: one GPU
    of several measured at once (``run --gpus``, ``fleet``), in place of ``--device``."""
    sel = select(options)
    quick = options.quick
    base = frame(quick, options.device if gpu is None else gpu, env, sel.ops)
    backend = base.backend
    if backend is None:
        return base
    notes = list(base.notes)
    settings = base.settings
    triton_reason: Note | None = None
    if backend == "cuda":
        impls = ["torch", "triton"] + ([] if options.no_compile else ["compile"])
        jax_note = jax_unusable(options, sel.ops_given, gpu is not None)
        if jax_note is None:
            impls.append("jax")
        else:
            notes.append(jax_note)
        triton_reason = triton_unusable(env)
    else:
        impls = ["torch"]
        notes.insert(0, Note("bench.cpu_baseline"))
    interpret = options.interpret
    if interpret:
        if backend == "cuda":
            raise UsageError("error.interpret_gpu")
        impls = ["torch", "triton"]
        notes[notes.index(Note("bench.cpu_baseline"))] = Note("bench.interpreted")
        if env.get("triton", "installed") is False:
            triton_reason = Note("bench.triton_unusable.not_installed")
        # Only PyTorch is timed (the CPU's quick sampling); the interpreted kernels are checked, not timed.
        settings = dataclasses.replace(CPU_QUICK_SETTINGS, threads=cpu_threads(), interpret=True, quick=quick,
                                       ops=sel.ops)
    # --control: the diff's positive control, recorded in the settings: never silently active.
    settings = dataclasses.replace(settings, impls=tuple(impls), control=options.control)

    planned: list[PlannedCase] = []
    for op in sel.ops:
        shapes = None if sel.sizes is None else [
            s for s in (shape_for(op, size, sel.ops_given) for size in sel.sizes) if s]
        suite_of = "interpret" if interpret else backend
        if shapes is None and sel.dtypes is None:
            triples = _default_shapes(op, suite_of, quick)
        else:
            if shapes is None:
                shapes = list(dict.fromkeys(s for _, _, s in _default_shapes(op, suite_of, quick)))
            triples = _all_dtype_shapes(op, backend, shapes, sel.dtypes or (("fp32", None),),
                                        user_sizes=sel.sizes is not None)
        compile_at = set(shapes) if sel.sizes is not None and shapes else set(
            SUITES[op].quick_compile if quick else SUITES[op].compile)
        if ("compile" in impls or "jax" in impls) and compile_at:
            at = tuple("x".join(map(str, s)) for s in sorted(compile_at))
            notes.append(Note("bench.compile_sizes", {"op": op, "shapes": at}))
        # compile and jax compile per shape: measured at the compile sizes only
        planned += [PlannedCase(op, impl, dtype, precision, shape) for dtype, precision, shape in triples
                    for impl in impls if impl not in ("compile", "jax") or shape in compile_at]
    if backend == "cuda" and options.no_compile:
        notes.append(Note("bench.compile_off"))
    if triton_reason and (backend == "cuda" or interpret):
        notes.append(triton_reason)
    planned_ = with_cases(base, planned, env, skip=lambda p: triton_reason if p.impl in ("triton", "compile") else None)
    return dataclasses.replace(planned_, settings=settings, notes=tuple(notes))
