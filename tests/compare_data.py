"""Comparison data shaped as ``envcheck.compare`` hands it to the presentation, for presentation tests.

The presentation reads a ``Diff`` and a ``History`` by their fields only. These frozen dataclasses
carry exactly the fields of ``compare/diff.py`` and ``compare/history.py`` as they are on main
(the comparison code itself is being moved to the analysis layer on its own branch), so the
terminal, Markdown and HTML renderings and their escaping are tested on their own. Once
``compare.diff`` builds from schema-2 reports, tests can feed its output instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envcheck.compare.envdiff import CheckChange, EnvChange
from envcheck.model import Note


@dataclass(frozen=True)
class ReportInfo:
    label: str
    host: str
    created: str
    kind: str
    gpu_name: str | None
    verdict: str
    cases: int


@dataclass(frozen=True)
class NumericChange:
    base_rel_l2: float
    other_rel_l2: float
    base_passed: bool
    other_passed: bool
    kind: str

    @property
    def factor(self) -> float | None:
        return self.other_rel_l2 / self.base_rel_l2 if self.base_rel_l2 > 0 else None


@dataclass(frozen=True)
class CaseDiff:
    op: str
    impl: str
    dtype: str
    precision: str
    shape: str
    category: str
    verdict: str
    reasons: tuple[str, ...] = ()
    timing: str | None = None
    method: str | None = None
    base_us: float | None = None
    other_us: float | None = None
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    n_base: int = 0
    n_other: int = 0
    base_gbps: float | None = None
    other_gbps: float | None = None
    base_tflops: float | None = None
    other_tflops: float | None = None
    base_pct: float | None = None
    other_pct: float | None = None
    numeric: NumericChange | None = None
    other_precision: str | None = None
    log_se: float | None = None

    @property
    def name(self) -> str:
        prec = self.precision if self.other_precision is None else f"{self.precision}/{self.other_precision}"
        p = f" ({prec})" if prec != self.dtype else ""
        return f"{self.op} {self.impl} {self.dtype}{p} {self.shape}"


@dataclass(frozen=True)
class CaseRef:
    op: str
    impl: str
    dtype: str
    precision: str
    shape: str
    status: str


@dataclass(frozen=True)
class GroupSummary:
    name: str
    geomean: float | None
    low: float | None
    high: float | None
    count: int
    faster: int
    slower: int
    same: int
    uncertain: int
    not_comparable: int
    verdict: str


@dataclass(frozen=True)
class CeilingRow:
    name: str
    kind: str
    unit: str
    base: float | None
    other: float | None
    base_source: str | None
    other_source: str | None


@dataclass(frozen=True)
class Comparison:
    base: ReportInfo
    other: ReportInfo
    env: tuple[EnvChange, ...]
    checks: tuple[CheckChange, ...]
    cases: tuple[CaseDiff, ...]
    only_base: tuple[CaseRef, ...]
    only_other: tuple[CaseRef, ...]
    ops: tuple[GroupSummary, ...]
    overall: GroupSummary
    ceilings: tuple[CeilingRow, ...]
    same_gpu: bool

    @property
    def compared(self) -> tuple[CaseDiff, ...]:
        return tuple(c for c in self.cases if c.ratio is not None and c.verdict != "not comparable")

    @property
    def not_comparable(self) -> tuple[CaseDiff, ...]:
        return tuple(c for c in self.cases if c.verdict == "not comparable")

    @property
    def numeric_changes(self) -> tuple[CaseDiff, ...]:
        return tuple(c for c in self.cases if c.numeric is not None)


@dataclass(frozen=True)
class Diff:
    reports: tuple[ReportInfo, ...]
    comparisons: tuple[Comparison, ...]
    practical_pct: float
    confidence: float
    resamples: int

    @property
    def baseline(self) -> ReportInfo:
        return self.reports[0]


@dataclass(frozen=True)
class OpPoint:
    op: str
    ratio: float | None
    low: float | None
    high: float | None
    count: int
    peak_gbps: float | None
    peak_gbps_pct: float | None
    peak_tflops: float | None
    peak_tflops_pct: float | None


@dataclass(frozen=True)
class Point:
    info: ReportInfo
    ops: tuple[OpPoint, ...]
    copy_gbps: float | None
    theoretical_gbps: float | None

    def op(self, name: str) -> OpPoint | None:
        return next((o for o in self.ops if o.op == name), None)


@dataclass(frozen=True)
class Step:
    index: int
    created: str
    group: str
    ratio: float
    low: float | None
    high: float | None
    count: int
    direction: str
    changes: tuple[EnvChange, ...]

    @property
    def change_pct(self) -> float:
        return abs(self.ratio - 1) * 100

    @property
    def factor(self) -> float:
        return 1 / self.ratio if self.ratio < 1 else self.ratio


@dataclass(frozen=True)
class History:
    points: tuple[Point, ...]
    ops: tuple[str, ...]
    steps: tuple[Step, ...]
    hosts: tuple[tuple[str, tuple[str, ...]], ...]
    gpus: tuple[tuple[str, tuple[str, ...]], ...]
    practical_pct: float


OPS = ("vector_add", "relu", "matmul", "softmax", "row_sum")
SHAPES = {"vector_add": ("1024", "1048576", "268435456"), "relu": ("1024", "268435456"),
          "matmul": ("1024x1024x1024", "4096x4096x4096", "4096x11008x4096"), "softmax": ("4096x1024", "16384x8192"),
          "row_sum": ("4096x1024", "4096x32768")}


@dataclass(frozen=True)
class Strings:
    """Every machine-supplied string a diff or a history shows (a test swaps in hostile ones)."""

    base_label: str = "2026-11-22_0057Z_vm_h100-80gb-hbm3.json"
    other_label: str = "2026-11-22_0104Z_vm_h200.json"
    host: str = "vm"
    base_gpu: str = "NVIDIA H100 80GB HBM3"
    other_gpu: str = "NVIDIA H200"
    env_value: str = "580.159.04"
    check_title: str = "GPU not shared"
    check_finding: str = "GPU 0 runs 1 other process (python, 1.2 GiB)"
    check_fix: str = "stop the other process (nvidia-smi --query-compute-apps=pid,name --format=csv)"
    reason: str = "baseline throttled (hw_thermal_slowdown)"
    impl: str = "triton"
    extra: dict[str, str] = field(default_factory=dict)


def diff(s: Strings = Strings(), comparisons: int = 1) -> Diff:
    base = ReportInfo(s.base_label, s.host, "2026-11-22T00:57:00Z", "run", s.base_gpu, "pass", 208)
    others = [ReportInfo(s.other_label if i == 0 else f"{i}-{s.other_label}", s.host, "2026-11-22T01:04:00Z", "run",
                         s.other_gpu, "warn", 208) for i in range(comparisons)]
    cmps = []
    for other in others:
        cases = []
        k = 0
        for op in OPS:
            for shape in SHAPES[op]:
                for impl in ("torch", s.impl):
                    k += 1
                    r = 0.80 + 0.03 * (k % 9)
                    base_us = 2.0 * 3 ** (k % 7)
                    verdict = "faster" if r < 0.98 else "slower" if r > 1.02 else "same"
                    cases.append(CaseDiff(op, impl, "fp32", "tf32" if op == "matmul" else "fp32", shape, "large", verdict,
                                          timing="gpu", method="cuda_graph", base_us=base_us, other_us=base_us * r,
                                          ratio=r, low=r * 0.99, high=r * 1.01, n_base=50, n_other=50, base_pct=80.0,
                                          other_pct=82.5))
        cases.append(CaseDiff("matmul", s.impl, "fp16", "fp16", "8192x8192x8192", "xlarge", "not comparable",
                              reasons=(s.reason,), timing="gpu", base_us=1700.0, other_us=1650.0))
        # The comparison on its way to schema 2 gives reasons as keys: both forms are shown.
        cases.append(CaseDiff("matmul", s.impl, "bf16", "bf16", "8192x8192x8192", "xlarge", "not comparable",
                              reasons=(Note("compare.throttled", {"side": "baseline", "reasons": ("hw_slowdown", s.reason)}),),
                              timing="gpu", base_us=1700.0, other_us=1650.0))
        cases.append(CaseDiff("softmax", s.impl, "bf16", "bf16", "4096x1024", "medium", "same", timing="gpu",
                              base_us=4.4, other_us=4.5, ratio=1.01, low=0.99, high=1.03,
                              numeric=NumericChange(1e-4, 2e-2, True, False, "pass->fail")))
        groups = tuple(GroupSummary(op, 0.864, 0.85, 0.88, 6, 0, 5, 1, 0, 0, "faster") for op in OPS)
        cmps.append(Comparison(
            base=base, other=other,
            env=(EnvChange("driver", "driver", "575.57.08", s.env_value), EnvChange("gpu", "model", s.base_gpu,
                                                                                  s.other_gpu, 0)),
            checks=(CheckChange("gpu.processes", s.check_title, "worse", "pass", "warn", s.check_finding, s.check_fix),),
            cases=tuple(cases),
            only_base=(CaseRef("vector_add", "compile", "fp32", "fp32", "1024", "pass"),),
            only_other=(CaseRef("relu", s.impl, "bf16", "bf16", "268435456", "pass"),),
            ops=groups, overall=GroupSummary("all", 0.864, 0.86, 0.87, len(cases) - 1, 40, 2, 3, 0, 1, "faster"),
            ceilings=(CeilingRow("bandwidth", "theoretical", "GB/s", 3352.3, 4814.3, "NVML: 2 x 2619 MHz x 5120 bit / 8",
                                 "NVML: 2 x 3201 MHz x 6016 bit / 8"),),
            same_gpu=s.base_gpu == s.other_gpu,
        ))
    return Diff((base, *others), tuple(cmps), 2.0, 0.95, 2000)


def history(s: Strings = Strings(), points: int = 3) -> History:
    pts = []
    for i in range(points):
        info = ReportInfo(f"{i}-{s.other_label}", s.host, f"2026-11-2{i + 1}T01:04:00Z", "run", s.other_gpu, "pass", 208)
        ops = tuple(OpPoint(op, 1.0 - 0.05 * i * (j % 2), 0.98 - 0.05 * i * (j % 2), 1.02 - 0.05 * i * (j % 2), 20,
                            None if op == "matmul" else 4300.0 + i, None if op == "matmul" else 89.3,
                            650.0 if op == "matmul" else None, 66.0 if op == "matmul" else None)
                    for j, op in enumerate(OPS))
        pts.append(Point(info, ops, 4253.0 + i, 4814.3))
    steps = tuple(Step(i, pts[i].info.created, f"relu {s.impl} fp32", 0.95, 0.94, 0.96, 5, "faster",
                       (EnvChange("driver", "driver", "575.57.08", s.env_value),)) for i in range(1, points))
    return History(tuple(pts), OPS, steps, (), ((s.other_gpu, tuple(p.info.label for p in pts)),) if s.extra else (),
                   2.0)
