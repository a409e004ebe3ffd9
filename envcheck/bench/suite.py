"""The benchmark suite: which (op, implementation, dtype, precision, shape) cases to run.

``plan`` turns the command line and the probed environment into a ``Plan``: the cases
the isolated worker runs, its timing settings, the GPU facts it judges results with,
and the cases planned but skipped (not enough memory, Triton unusable, ...) with the
reason. Planning never measures and never imports torch: it only reads probe facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from envcheck.bench import sizes as sz
from envcheck.bench.ops import ITEMSIZE, OPS, REFERENCE_CHUNK_ELEMENTS
from envcheck.bench.protocol import DTYPES
from envcheck.errors import UsageError
from envcheck.model import Environment, Skip

# What users type, mapped to (dtype, precision-or-None). ``tf32`` asks for fp32 matmuls with
# TF32 arithmetic only; ``fp32`` asks for both the TF32 and the IEEE fp32 matmul.
DTYPE_ALIASES: dict[str, tuple[str, str | None]] = {
    "fp32": ("fp32", None), "float32": ("fp32", None), "float": ("fp32", None),
    "tf32": ("fp32", "tf32"),
    "fp16": ("fp16", None), "float16": ("fp16", None), "half": ("fp16", None),
    "bf16": ("bf16", None), "bfloat16": ("bf16", None),
}

SEED_VECTOR = (1024, 10240, 102400)
SEED_MATMUL = (512, 1024, 2048)

# Full suite on a CUDA GPU.
VECTOR_SIZES = (1 << 10, 10240, 102400, 1 << 16, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28)
VECTOR_HALF_SIZES = (1 << 20, 1 << 24, 1 << 28)  # fp16 / bf16 at a few sizes
ROW_SHAPES = ((4096, 1024), (8192, 4096), (16384, 8192), (4096, 32768))
MATMUL_SHAPES = tuple((n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192)) + ((1000, 1000, 1000), (4096, 11008, 4096))
# IEEE fp32 matmul runs on CUDA cores (no tensor cores): a Triton kernel takes seconds at 8192^3.
IEEE_MATMUL_MAX_DIM = 4096
# torch.compile recompiles per shape (several seconds each): it is measured at these only.
COMPILE_VECTOR_SIZES = (1 << 10, 1 << 20, 1 << 24, 1 << 28)
COMPILE_ROW_SHAPES = ((4096, 1024), (8192, 4096))
COMPILE_MATMUL_SHAPES = ((1024, 1024, 1024), (4096, 4096, 4096))

# Quick suite on a CUDA GPU: under a minute on an H100, compile and autotune included.
QUICK_VECTOR_SIZES = (1 << 10, 10240, 102400, 1 << 20, 1 << 26)
QUICK_ROW_SHAPES = ((8192, 4096),)
QUICK_MATMUL_HALF = ((512, 512, 512), (2048, 2048, 2048), (4096, 4096, 4096))
QUICK_MATMUL_FP32 = ((1024, 1024, 1024),)
QUICK_COMPILE_VECTOR_SIZES = (1 << 10, 1 << 20, 1 << 26)

# CPU baseline (no usable CUDA GPU): PyTorch only, sizes a laptop core handles in seconds.
CPU_VECTOR_SIZES = (1 << 10, 10240, 102400, 1 << 16, 1 << 20, 1 << 22)
CPU_ROW_SHAPES = ((1024, 1024), (4096, 1024))
CPU_MATMUL_SHAPES = ((128, 128, 128), (256, 256, 256), (512, 512, 512))
CPU_QUICK_VECTOR_SIZES = (1 << 10, 10240, 102400, 1 << 20)
CPU_QUICK_ROW_SHAPES = ((1024, 1024),)
CPU_QUICK_MATMUL_SHAPES = ((256, 256, 256), (512, 512, 512))

GPU_SETTINGS = {"warmup_ms": 25, "rep_ms": 100, "min_samples": 10, "max_samples": 1000, "cold_l2": True, "seed": 0}
GPU_QUICK_SETTINGS = {"warmup_ms": 10, "rep_ms": 40, "min_samples": 10, "max_samples": 500, "cold_l2": True, "seed": 0}
CPU_SETTINGS = {"warmup_ms": 20, "rep_ms": 100, "min_samples": 5, "max_samples": 200, "cold_l2": False, "seed": 0}
CPU_QUICK_SETTINGS = {"warmup_ms": 5, "rep_ms": 30, "min_samples": 5, "max_samples": 100, "cold_l2": False, "seed": 0}

# Share of free memory a case may use: the CUDA context, the allocator's slack and the
# rotating buffers that keep L2 cold need the rest.
MEMORY_HEADROOM = 0.8

TORCH_INSTALL_HINT = (
    "install it with `pip install torch` (on a GPU machine pick the CUDA build for your driver: "
    "https://pytorch.org/get-started/locally/)"
)


class RunOptions(Protocol):
    """The ``envcheck run`` arguments planning reads (an argparse namespace fits)."""

    quick: bool
    ops: list[str] | None
    sizes: list[str] | None
    dtypes: list[str] | None
    device: int
    no_compile: bool


@dataclass(frozen=True)
class PlannedCase:
    """One case the worker is asked to measure."""

    op: str
    impl: str
    dtype: str
    precision: str
    shape: tuple[int, ...]

    @property
    def key(self) -> tuple[str, str, str, str, tuple[int, ...]]:
        """Same identity as ``model.Case.key``."""
        return (self.op, self.impl, self.dtype, self.precision, self.shape)

    @property
    def label(self) -> str:
        prec = self.dtype if self.precision == self.dtype else f"{self.dtype}/{self.precision}"
        return f"{self.op} {self.impl} {prec} {sz.describe(self.shape)}"

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "impl": self.impl, "dtype": self.dtype, "precision": self.precision,
                "shape": list(self.shape)}


@dataclass(frozen=True)
class Plan:
    """What ``envcheck run`` measures. ``device`` is None when nothing can be measured."""

    device: str | None  # cuda | cpu | None
    index: int
    cases: tuple[PlannedCase, ...]
    settings: dict[str, Any]  # the worker's timing settings
    gpu: dict[str, Any]  # facts the worker judges results with
    skips: tuple[Skip, ...] = ()
    notes: tuple[str, ...] = ()
    recorded: dict[str, Any] = field(default_factory=dict)  # extra settings stored in the report

    @property
    def runnable(self) -> bool:
        return self.device is not None and bool(self.cases)

    def worker_input(self) -> dict[str, Any]:
        """The JSON document the worker reads on stdin."""
        return {"device": self.device, "index": self.index, "cases": [c.to_json() for c in self.cases],
                "settings": dict(self.settings), "gpu": dict(self.gpu)}


# --------------------------------------------------------------------------- options


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
        ops = tuple(dict.fromkeys(o.strip().lower() for o in options.ops))
        unknown = [o for o in ops if o not in OPS]
        if unknown:
            raise UsageError(f"--ops: unknown op {unknown[0]!r} (valid: {', '.join(OPS)})")
    else:
        ops = OPS
    dtypes = None
    if options.dtypes:
        picked: dict[tuple[str, str | None], None] = {}
        for d in options.dtypes:
            alias = DTYPE_ALIASES.get(d.strip().lower())
            if alias is None:
                raise UsageError(f"--dtypes: unknown dtype {d!r} (valid: fp32, fp16, bf16, tf32)")
            picked.setdefault(alias, None)
        dtypes = tuple(picked)
    sizes = None
    if options.sizes:
        sizes = sz.parse_sizes(options.sizes)
        for size in sizes:
            if not any(sz.shape_for(op, size, matmul_square=ops_given) for op in ops):
                raise UsageError(
                    f"--sizes: {'x'.join(map(str, size))} fits none of the selected ops "
                    "(vector_add, relu: N; softmax, row_sum: ROWSxCOLS; matmul: MxNxK, or N with --ops matmul)"
                )
        if not ops_given:
            # Without --ops, the sizes choose the ops: 1M alone means the vector ops only.
            ops = tuple(op for op in ops if any(sz.shape_for(op, s, matmul_square=False) for s in sizes))
    return Selection(ops, ops_given, dtypes, sizes)


# --------------------------------------------------------------------------- the device


def _first_line(text: Any, limit: int = 160) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def torch_missing_reason(env: Environment) -> str | None:
    """Why PyTorch cannot run at all (not installed, or its import fails), else None."""
    if env.get("torch", "installed") is False:
        return f"PyTorch is not installed: no benchmark was run; {TORCH_INSTALL_HINT}"
    if env.get("torch_runtime", "import_ok") is False:
        err = env.get("torch_runtime", "error")
        why = f" ({_first_line(err)})" if err else ""
        return f"PyTorch fails to import{why}: no benchmark was run; run `envcheck check` for the cause and the fix"
    return None


def cuda_unusable_reasons(env: Environment) -> list[str]:
    """Why there is no usable CUDA GPU, from the probe facts; [] when there is one."""
    if env.get("torch_runtime", "cuda_available") is True and env.get("torch_runtime", "smoke_ok") is not False:
        return []
    reasons = []
    nvml_error = env.get("driver", "nvml_error")
    if nvml_error:
        reasons.append(f"no NVIDIA GPU found (NVML: {_first_line(nvml_error)})")
    elif env.get("driver", "gpu_count") == 0:
        reasons.append("no NVIDIA GPU found (NVML reports 0 GPUs)")
    if env.get("torch", "build") == "cpu":
        reasons.append(f"PyTorch is a CPU-only build ({env.get('torch', 'version') or 'version unknown'})")
    elif env.get("torch", "build") == "rocm":
        reasons.append(f"PyTorch is a ROCm build ({env.get('torch', 'version')}): envcheck measures NVIDIA GPUs")
    runtime_error = env.get("torch_runtime", "error")
    if runtime_error:
        reasons.append(f"CUDA is not usable from PyTorch: {_first_line(runtime_error)}")
    if env.get("torch_runtime", "cuda_available") is True and env.get("torch_runtime", "smoke_ok") is False:
        reasons.append("a tiny CUDA operation failed in PyTorch (see the torch_runtime checks)")
    if not reasons:
        if env.get("torch_runtime", "cuda_available") is False:
            reasons.append("PyTorch reports no usable CUDA device (torch.cuda.is_available() is False)")
        else:
            why = env.fact("torch_runtime", "cuda_available").reason or "unknown"
            reasons.append(f"whether CUDA works is unknown ({why})")
    return reasons


def triton_unusable_reason(env: Environment) -> str | None:
    """Why Triton (and torch.compile, whose GPU code is Triton) cannot run, else None."""
    if env.get("triton", "installed") is False:
        return "Triton is not installed (pip install triton; CUDA builds of PyTorch pull in the matching version)"
    if env.get("triton_runtime", "smoke_ok") is False:
        err = env.get("triton_runtime", "error")
        detail = f": {_first_line(err)}" if err else ""
        return f"the Triton smoke kernel failed{detail} (run `envcheck check` for the fix)"
    return None


def _gpu_facts(env: Environment, index: int) -> dict[str, Any]:
    gpu = next((g for g in env.gpus if g.index == index), None)
    get = gpu.get if gpu is not None else (lambda key: None)
    mem_clock, bus = get("mem_clock_max_mhz"), get("memory_bus_width_bits")
    bw = get("theoretical_bandwidth_gbps")
    if bw and mem_clock and bus:
        source = f"NVML: 2 x {mem_clock} MHz x {bus} bit / 8"
    elif bw:
        source = "NVML"
    else:
        source = None
    runtime_dev = next((d for d in (env.get("torch_runtime", "devices") or []) if d.get("index") == index), {})
    return {
        "theoretical_bandwidth_gbps": bw,
        "bandwidth_source": source,
        "sm_count": get("sm_count") or runtime_dev.get("sm_count"),
        "sm_clock_max_mhz": get("sm_clock_max_mhz"),
        "compute_capability": get("compute_capability") or runtime_dev.get("capability"),
        "name": get("name") or runtime_dev.get("name"),
    }


def free_memory_bytes(env: Environment, device: str, index: int) -> tuple[int | None, str]:
    """Memory a case may use on the device, and a name for it in skip reasons."""
    if device == "cpu":
        avail = env.get("system", "ram_available_bytes")
        return (int(avail) if avail else None), "RAM available"
    gpu = next((g for g in env.gpus if g.index == index), None)
    total = gpu.get("memory_total_bytes") if gpu else None
    used = gpu.get("memory_used_bytes") if gpu else None
    if total is None:
        dev = next((d for d in (env.get("torch_runtime", "devices") or []) if d.get("index") == index), {})
        total = dev.get("memory_bytes")
    if total is None:
        return None, f"free on GPU {index}"
    return int(total) - int(used or 0), f"free on GPU {index}"


def footprint_bytes(op: str, dtype: str, shape: tuple[int, ...]) -> int:
    """Memory one case needs on the device: inputs and output, plus the float64 reference.

    The worker compares elementwise and row ops with the reference in chunks of
    ``REFERENCE_CHUNK_ELEMENTS``; a matmul reference is whole (float64 copies of A, B, C).
    """
    size = ITEMSIZE[dtype]
    if op in ("vector_add", "relu"):
        n = shape[0]
        tensors = 3 if op == "vector_add" else 2
        return tensors * (n * size + min(n, REFERENCE_CHUNK_ELEMENTS) * 8)
    if op in ("softmax", "row_sum"):
        rows, cols = shape
        out = rows * cols if op == "softmax" else rows
        return (rows * cols + out) * size + (min(rows * cols, REFERENCE_CHUNK_ELEMENTS) + out) * 8
    m, n, k = shape
    return (m * k + k * n + m * n) * (size + 8)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


# --------------------------------------------------------------------------- the suite


def _default_shapes(op: str, device: str, quick: bool) -> list[tuple[str, str, tuple[int, ...]]]:
    """(dtype, precision, shape) of the built-in suite for one op."""
    out: list[tuple[str, str, tuple[int, ...]]] = []
    if device == "cpu":
        vec = CPU_QUICK_VECTOR_SIZES if quick else CPU_VECTOR_SIZES
        rows = CPU_QUICK_ROW_SHAPES if quick else CPU_ROW_SHAPES
        mm = CPU_QUICK_MATMUL_SHAPES if quick else CPU_MATMUL_SHAPES
        if op in sz.VECTOR_OPS:
            out += [("fp32", "fp32", (n,)) for n in vec]
        elif op in sz.ROW_OPS:
            out += [("fp32", "fp32", s) for s in rows]
        else:
            # TF32 is a GPU tensor-core mode: a CPU fp32 matmul is IEEE.
            out += [("fp32", "fp32", s) for s in mm]
        return out
    if op in sz.VECTOR_OPS:
        if quick:
            return [("fp32", "fp32", (n,)) for n in QUICK_VECTOR_SIZES]
        for n in VECTOR_SIZES:
            out.append(("fp32", "fp32", (n,)))
            if n in VECTOR_HALF_SIZES:
                out += [("fp16", "fp16", (n,)), ("bf16", "bf16", (n,))]
        return out
    if op in sz.ROW_OPS:
        shapes = QUICK_ROW_SHAPES if quick else ROW_SHAPES
        dts = ("fp32",) if quick else DTYPES
        return [(d, d, s) for s in shapes for d in dts]
    if quick:
        out += [(d, d, s) for s in QUICK_MATMUL_HALF for d in ("fp16", "bf16")]
        out += [(p_dt, prec, s) for s in QUICK_MATMUL_FP32 for p_dt, prec in (("fp32", "tf32"), ("fp32", "fp32"))]
        return sorted(out, key=lambda t: t[2])
    for s in MATMUL_SHAPES:
        out += [("fp16", "fp16", s), ("bf16", "bf16", s), ("fp32", "tf32", s)]
        if max(s) <= IEEE_MATMUL_MAX_DIM:
            out.append(("fp32", "fp32", s))
    return out


def _all_dtype_shapes(op: str, device: str, quick: bool, shapes: Sequence[tuple[int, ...]],
                      dtypes: Sequence[tuple[str, str | None]], user_sizes: bool) -> list[tuple[str, str, tuple[int, ...]]]:
    """(dtype, precision, shape) for explicit dtypes and/or sizes."""
    out = []
    for shape in shapes:
        for dtype, only in dtypes:
            if op == "matmul" and dtype == "fp32":
                precisions = ("fp32",) if device == "cpu" else ("tf32", "fp32")
                if only:
                    precisions = tuple(p for p in precisions if p == only)
                for prec in precisions:
                    if prec == "fp32" and device != "cpu" and not user_sizes and max(shape) > IEEE_MATMUL_MAX_DIM:
                        continue
                    out.append((dtype, prec, shape))
            elif only is None:  # tf32 means nothing outside matmul
                out.append((dtype, dtype, shape))
    return out


def _compile_shapes(op: str, quick: bool) -> tuple[tuple[int, ...], ...]:
    if op in sz.VECTOR_OPS:
        return tuple((n,) for n in (QUICK_COMPILE_VECTOR_SIZES if quick else COMPILE_VECTOR_SIZES))
    if quick:
        return ()
    return COMPILE_ROW_SHAPES if op in sz.ROW_OPS else COMPILE_MATMUL_SHAPES


def plan(options: RunOptions, env: Environment) -> Plan:
    """The cases to run for these options on this machine (raises UsageError on bad options)."""
    sel = select(options)
    quick = bool(options.quick)
    recorded: dict[str, Any] = {"quick": quick, "ops": list(sel.ops)}

    no_torch = torch_missing_reason(env)
    if no_torch:
        return Plan(None, 0, (), {}, {}, notes=(no_torch,), recorded=recorded)

    notes: list[str] = []
    cuda_reasons = cuda_unusable_reasons(env)
    device = "cpu" if cuda_reasons else "cuda"
    index = 0
    if device == "cuda":
        count = max(len(env.gpus), int(env.get("torch_runtime", "device_count") or 0))
        index = options.device
        if not 0 <= index < count:
            listed = ", ".join(str(i) for i in range(count))
            raise UsageError(f"--device {index}: this machine has {count} CUDA GPU{'s' if count != 1 else ''} ({listed})")
        lost = next((g.lost for g in env.gpus if g.index == index and g.lost), None)
        if lost:
            notes.append(f"GPU {index} could not be queried through NVML ({lost}): its ceilings are unknown")
        impls = ["torch", "triton"]
        triton_reason = triton_unusable_reason(env)
        if not options.no_compile:
            impls.append("compile")
        settings = dict(GPU_QUICK_SETTINGS if quick else GPU_SETTINGS)
        gpu = _gpu_facts(env, index)
    else:
        impls = ["torch"]
        triton_reason = None
        notes.append(
            "Triton and torch.compile were not measured: " + "; ".join(cuda_reasons)
            + ". PyTorch ran on the CPU as a baseline."
        )
        settings = dict(CPU_QUICK_SETTINGS if quick else CPU_SETTINGS)
        gpu = {}
    recorded.update({"device": device, "impls": list(impls)})

    budget, budget_name = free_memory_bytes(env, device, index)
    cases: list[PlannedCase] = []
    skips: list[Skip] = []
    compile_recorded: dict[str, list[str]] = {}
    for op in sel.ops:
        if sel.sizes is not None:
            shapes = [s for s in (sz.shape_for(op, size, sel.ops_given) for size in sel.sizes) if s]
        else:
            shapes = None
        if shapes is None and sel.dtypes is None:
            triples = _default_shapes(op, device, quick)
        else:
            if shapes is None:
                shapes = list(dict.fromkeys(s for _, _, s in _default_shapes(op, device, quick)))
            dtypes = sel.dtypes or (("fp32", None),)
            triples = _all_dtype_shapes(op, device, quick, shapes, dtypes, user_sizes=sel.sizes is not None)
        compile_at = set(shapes) if (sel.sizes is not None and shapes) else set(_compile_shapes(op, quick))
        if "compile" in impls and compile_at:
            compile_recorded[op] = [sz.describe(s) for s in sorted(compile_at)]
        for dtype, precision, shape in triples:
            need = footprint_bytes(op, dtype, shape)
            for impl in impls:
                if impl == "compile" and shape not in compile_at:
                    continue
                if budget is not None and need > MEMORY_HEADROOM * budget:
                    reason = (f"needs about {_gib(need)} with its float64 reference; "
                              f"{_gib(budget)} {budget_name}")
                    skips.append(Skip(op, impl, dtype, shape, _with_precision(reason, dtype, precision)))
                    continue
                if impl != "torch" and triton_reason:
                    skips.append(Skip(op, impl, dtype, shape, _with_precision(triton_reason, dtype, precision)))
                    continue
                cases.append(PlannedCase(op, impl, dtype, precision, shape))
    if compile_recorded:
        recorded["compile_sizes"] = compile_recorded
        notes.append("torch.compile measured at a reduced set of sizes to bound compile time: "
                     + "; ".join(f"{op} {', '.join(v)}" for op, v in compile_recorded.items()))
    elif device == "cuda" and options.no_compile:
        notes.append("torch.compile not measured (--no-compile)")
    if triton_reason and device == "cuda":
        notes.append(f"Triton and torch.compile were not measured: {triton_reason}")
    n_mem = sum("needs about" in s.reason for s in skips)
    if n_mem:
        notes.append(f"{n_mem} planned case{'s' if n_mem != 1 else ''} skipped: not enough memory ({budget_name})")
    return Plan(device, index, tuple(cases), settings, gpu, tuple(skips), tuple(notes), recorded)


def _with_precision(reason: str, dtype: str, precision: str) -> str:
    # Skip has no precision field: a TF32 fp32 matmul says so in its reason.
    return reason if precision == dtype else f"{precision.upper()} arithmetic: {reason}"
