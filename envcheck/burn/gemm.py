"""The power phase: one deterministic GEMM repeated, every result checked (gpu-burn's idea, made exact): a healthy
GPU returns the same bits every iteration. Checks: ``checksum`` (each iteration's bits summed, compared once an
interval), ``full`` (the interval's last output bit for bit) and ``fp64`` (sampled elements in float64, within
2 ulps relative to the sum of |a*b|)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.model.burn import SdcMismatch, SdcRecord

if TYPE_CHECKING:
    from torch import Tensor, dtype

FP64_ELEMENTS = 64
MAX_MISMATCHES = 32
# Unit roundoff of each output dtype (half an ulp at 1.0).
UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11, "fp32": 2.0 ** -24}
FP8_OUT = "bf16"  # fp8 GEMMs (torch._scaled_mm) write bf16


def gemm_k(dtype: str, n: int) -> int:
    """The inner size: 2n for fp8, twice as fast, so the checksum stays as small a share of an iteration."""
    return 2 * n if dtype == "fp8" else n


def torch_dtype(torch: ModuleType, name: str) -> dtype | None:
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
            "fp8": getattr(torch, "float8_e4m3fn", None)}[name]


def best_dtype(torch: ModuleType, cuda: bool, allow_fp8: bool = True) -> str:
    """The GPU's best dense tensor-core dtype: fp8 where a scaled fp8 GEMM runs, else bf16, else fp16."""
    if not cuda:
        return "bf16"
    if allow_fp8 and torch.cuda.get_device_capability() >= (8, 9) and hasattr(torch, "float8_e4m3fn"):
        try:
            a = torch.ones(32, 32, device="cuda").to(torch.float8_e4m3fn)
            one = torch.ones((), device="cuda")
            torch._scaled_mm(a, a.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            return "fp8"
        except Exception:  # noqa: BLE001 - no fp8 GEMM in this torch or on this GPU: bf16 is next best
            pass
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


@dataclass
class Gemm:
    """Inputs and the call: ``a`` (n x k) and ``b`` (k x n, column-major for fp8, as ``_scaled_mm`` wants)."""

    torch: ModuleType
    dtype: str
    n: int
    k: int
    a: Tensor
    b: Tensor
    scale: Tensor | None = None

    @classmethod
    def make(cls, torch: ModuleType, dtype: str, n: int, k: int, device: str, seed: int) -> Gemm:
        """(n x k) @ (k x n) with inputs drawn from ``seed``."""
        g = torch.Generator(device="cpu").manual_seed(seed)
        # Fresh random inputs (never zeros), small enough that fp8 keeps them finite.
        a = torch.randn(n, k, generator=g) * 0.5
        b = torch.randn(k, n, generator=g) * 0.5
        if dtype == "fp8":
            f8 = torch_dtype(torch, "fp8")
            return cls(torch, dtype, n, k, a.to(device).to(f8), b.t().contiguous().to(device).to(f8).t(),
                       torch.ones((), device=device))
        t = torch_dtype(torch, dtype)
        return cls(torch, dtype, n, k, a.to(device).to(t), b.to(device).to(t))

    @property
    def out_dtype(self) -> str:
        return FP8_OUT if self.dtype == "fp8" else self.dtype

    @property
    def flop(self) -> int:
        return 2 * self.n * self.n * self.k

    def __call__(self) -> Tensor:
        if self.dtype == "fp8":
            return self.torch._scaled_mm(self.a, self.b, scale_a=self.scale, scale_b=self.scale,
                                         out_dtype=self.torch.bfloat16)
        return self.torch.matmul(self.a, self.b)


def bits_view(torch: ModuleType, out: Tensor) -> Tensor:
    """The output's bits as integers of the same width (for exact compares and checksums)."""
    width = {2: torch.int16, 4: torch.int32}[out.element_size()]
    return out.view(width)


@dataclass
class SdcChecker:
    """Every check of one GEMM's results; ``record()`` is the model's view of what it did."""

    torch: ModuleType
    gemm: Gemm
    seed: int
    reference: Tensor | None = None  # the first output
    ref_sum: Tensor | None = None
    iterations: int = 0
    checksums: int = 0
    full_compares: int = 0
    fp64_checks: int = 0
    fp64_max_error: float | None = None
    mismatches: list[SdcMismatch] = field(default_factory=list)
    mismatch_count: int = 0
    _sample: list[tuple[int, int]] = field(default_factory=list)
    _exact: tuple[Tensor, Tensor] | None = None  # (float64 values, error bound) of the sampled elements

    def checksum(self, out: Tensor) -> Tensor:
        """The output's bits summed as 64-bit words (wrapping): one read of the output, no cast (a cast took a
        quarter of each iteration)."""
        torch = self.torch
        bits = bits_view(torch, out)
        if (bits.numel() * bits.element_size()) % 8 == 0 and bits.is_contiguous():
            return bits.view(torch.int64).sum()
        return bits.sum(dtype=torch.int64)

    def first(self, out: Tensor) -> None:
        self.reference = out.clone()
        self.ref_sum = self.checksum(out)
        rng = __import__("random").Random(self.seed)
        n = self.gemm.n
        self._sample = [(rng.randrange(n), rng.randrange(n)) for _ in range(FP64_ELEMENTS)]

    def _add(self, m: SdcMismatch) -> None:
        self.mismatch_count += 1
        if len(self.mismatches) < MAX_MISMATCHES:
            self.mismatches.append(m)

    def check_sums(self, sums: Tensor, first_iteration: int, t_s: float) -> None:
        """Each slot of ``sums`` (iterations first_iteration...) against the first's checksum."""
        self.checksums += int(sums.numel())
        for k in (sums != self.ref_sum).nonzero().flatten().tolist():
            self._add(SdcMismatch("checksum", first_iteration + int(k), t_s))

    def full(self, out: Tensor, iteration: int, t_s: float) -> None:
        """``out`` bit for bit against the first output, every differing element located."""
        self.full_compares += 1
        torch, ref = self.torch, self.reference
        assert ref is not None, "first() comes first"
        diff = bits_view(torch, out) != bits_view(torch, ref)
        if not bool(diff.any()):
            return
        where = diff.flatten().nonzero().flatten()
        flat_out, flat_ref = out.flatten(), ref.flatten()
        for e in where[:MAX_MISMATCHES].tolist():
            self._add(SdcMismatch("full", iteration, t_s, int(e), _finite(float(flat_ref[e])),
                                  _finite(float(flat_out[e]))))
        self.mismatch_count += max(0, int(where.numel()) - MAX_MISMATCHES)

    def fp64(self, out: Tensor, iteration: int, t_s: float) -> None:
        """The sampled elements of ``out`` against float64 sums of the same inputs."""
        torch = self.torch
        self.fp64_checks += 1
        rows = torch.tensor([i for i, _ in self._sample])
        cols = torch.tensor([j for _, j in self._sample])
        if self._exact is None:  # the inputs never change: their float64 sums are made once
            a = self.gemm.a.to(torch.float32)[rows.to(self.gemm.a.device)].to("cpu", torch.float64)
            b = self.gemm.b.to(torch.float32)[:, cols.to(self.gemm.b.device)].to("cpu", torch.float64)
            prods = a * b.t()
            self._exact = (prods.sum(dim=1),
                           prods.abs().sum(dim=1) * (2 * UNIT_ROUNDOFF[self.gemm.out_dtype]) + 1e-30)
        exact, bound = self._exact
        got = out[rows.to(out.device), cols.to(out.device)].to("cpu", torch.float64)
        err = torch.nan_to_num((got - exact).abs() / bound, nan=math.inf)
        worst = float(err.max())
        self.fp64_max_error = max(self.fp64_max_error or 0.0, worst) if math.isfinite(worst) else self.fp64_max_error
        n = self.gemm.n
        for k in (err > 1).nonzero().flatten().tolist():
            i, j = self._sample[k]
            self._add(SdcMismatch("fp64", iteration, t_s, i * n + j, _finite(float(exact[k])), _finite(float(got[k]))))

    def record(self) -> SdcRecord:
        return SdcRecord(self.iterations, self.checksums, self.full_compares, self.fp64_checks, FP64_ELEMENTS,
                         self.fp64_max_error, tuple(self.mismatches), self.mismatch_count)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
