"""What a run report shows, decided once for every medium: the view of a report and its analysis.

``run_view(report, analysis, lang, escape)`` turns the raw report and the numbers the analysis
derived into text in reading order: tiles, findings with the rows they speak of, the summary
per op, implementation and precision, the checks, one table per op, skipped cases, notes,
the environment and the methodology. Markdown, HTML and the terminal lay the same view out
in their own markup; none of them computes a throughput, a share, a speedup, a flag or a
verdict (the analysis did), and none phrases a sentence (this module did, from the catalogue).

``escape`` is applied to every machine-supplied string placed inside a catalogue sentence:
Markdown escaping for ``.md``, rich-markup escaping for the terminal, identity for HTML (whose
autoescaping then covers the whole sentence).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.analysis import Analysis, BenchAnalysis, CaseResult
from envcheck.analysis import flags as fl
from envcheck.analysis.ceilings import MEASURED, THEORETICAL, Ceiling, MissingCeiling, theoretical_bandwidth_gbps
from envcheck.analysis.findings import Finding
from envcheck.analysis.peaks import Source
from envcheck.analysis.summary import Tally
from envcheck.checks import worst_first
from envcheck.checks.keyed import keyed
from envcheck.model import CaseKey, Check, Fact, Note, Report, Skip, known, reasons
from envcheck.ops import IMPLS, PRECISIONS
from envcheck.redact import redact_value
from envcheck.render import fmt
from envcheck.render.checktext import all_localized
from envcheck.render.i18n import case_label, check_counts, has, join, phrase, translate
from envcheck.render.node_view import node_section, node_tiles
from envcheck.render.phase_view import PhaseTable, phase_table
from envcheck.render.tiles import Tile

Escape = Callable[[str], str]

# Facts shown in the environment table, in reading order: (section, key).
ENV_FACTS: tuple[tuple[str, str], ...] = (
    ("system", "os_name"), ("system", "kernel"), ("system", "arch"), ("system", "cpu_model"),
    ("system", "cpu_cores_logical"), ("system", "ram_total_bytes"), ("system", "container"),
    ("wsl", "is_wsl"), ("wsl", "wsl_version"), ("wsl", "distro_name"),
    ("system", "python_version"), ("system", "python_env"), ("system", "python_executable"),
    ("torch", "version"), ("torch", "build"), ("torch", "cuda_version"),
    ("torch_runtime", "cuda_available"), ("torch_runtime", "tf32_matmul"), ("torch_runtime", "float32_matmul_precision"),
    ("driver", "driver_version"), ("driver", "cuda_driver_version"), ("driver", "nvml_error"),
    ("cuda", "nvcc_version"), ("cuda", "toolkit_path"),
    ("triton", "version"), ("triton", "ptxas_version"), ("triton_runtime", "smoke_ok"), ("triton_runtime", "compile_s"),
    ("platform", "python_packages"),
)
# Shown only when they hold a value: their absence is the normal case.
ONLY_WHEN_KNOWN = {("driver", "nvml_error"), ("torch_runtime", "error"), ("triton_runtime", "error")}
# WSL details are noise on a machine that is not WSL.
WSL_DETAILS = {("wsl", "wsl_version"), ("wsl", "distro_name")}

GPU_FACTS: tuple[str, ...] = (
    "name", "architecture", "compute_capability", "memory_total_bytes", "sm_count", "sm_clock_max_mhz",
    "mem_clock_max_mhz", "memory_bus_width_bits", "pcie_gen_max", "pcie_width_max",
    "power_limit_w", "ecc_mode_current", "ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows_pending",
    "mig_mode", "throttled", "pci_bus_id", "uuid", "vbios_version",
    "compute_mode", "temperature_margin_c", "fabric_state",
)

# One letter per flag for tables where words do not fit; every layout that uses them prints the legend.
FLAG_ABBR = {fl.LAUNCH_BOUND: "L", fl.L2_RESIDENT: "C", fl.THROTTLED: "T", "power_capped": "P", fl.NOISY: "N",
             fl.ABOVE_CEILING: "^"}
# The order flags are shown in, in cells and legends.
FLAG_ORDER = (fl.LAUNCH_BOUND, fl.L2_RESIDENT, fl.THROTTLED, "power_capped", fl.NOISY, fl.ABOVE_CEILING)
# Findings whose rows carry a flag: the terminal points at the flag instead of listing rows.
FINDING_FLAG = {"finding.throttled": fl.THROTTLED, "finding.power_capped": "power_capped", "finding.noisy": fl.NOISY,
                "finding.above_ceiling": fl.ABOVE_CEILING, "finding.above_ceiling_cached": fl.ABOVE_CEILING,
                "finding.l2_resident": fl.L2_RESIDENT, "finding.launch_bound": fl.LAUNCH_BOUND}
# Findings about one op are shown with that op's table; the others open the report.
OP_FINDINGS = ("finding.launch_bound", "finding.bandwidth_best", "finding.compute_best",
               "finding.compute_best_nopeak", "finding.speedup_large")


def anchor(key: CaseKey, prefix: str = "") -> str:
    """A stable HTML id for one case row (op, impl, dtype and precision come from registries); ``prefix``
    tells apart the same case on several GPUs of one report."""
    op, impl, dtype, precision, dims = key
    return f"{prefix}case-{op}-{impl}-{dtype}-{precision}-{'x'.join(str(d) for d in dims)}"


# --------------------------------------------------------------------------- view objects


@dataclass(frozen=True)
class Row:
    """One label/value line of a facts table; ``reason`` replaces ``value`` when the fact is missing."""

    label: str
    value: str | None
    reason: str | None = None


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    lost: str | None
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Flag:
    name: str  # an analysis flag, or ``power_capped`` (throttled by the power cap alone)
    abbr: str
    label: str


@dataclass(frozen=True)
class RowRef:
    label: str
    anchor: str


@dataclass(frozen=True)
class FindingView:
    key: str
    level: str  # info | warn | fail
    text: str
    rows: tuple[RowRef, ...]
    groups: tuple[str, ...]  # the rows compacted: "matmul triton fp16: 2048×2048×2048, 4096×4096×4096"
    flag: Flag | None  # the flag its rows carry in the tables, when there is one


@dataclass(frozen=True)
class CaseRow:
    key: CaseKey
    anchor: str
    impl: str
    variant: str
    size: str
    kernel: str | None
    gpu_time: str
    gpu_iqr: str
    launch_time: str
    first_call: str
    speedup: float | None
    speedup_text: str
    throughput: str  # number only; the unit is in the header
    pct_theoretical: str
    pct_measured: str
    share: float | None  # pct_theoretical as the analysis gave it (to pick the best of a row)
    error: str
    tolerance: str
    error_ratio: float | None  # the verdict's worst error over its bound (None: not judged)
    failed_outputs: tuple[str, ...]  # of an op with several, those that broke a bound (names)
    failed_text: str  # the same phrased, each with its error over its bound ("" if none)
    status: str  # pass | fail | error
    detail: str  # why a row failed or could not run, and its notes
    flags: tuple[Flag, ...]


@dataclass(frozen=True)
class OpSection:
    op: str
    compute_bound: bool
    unit: str  # of the throughput column
    has_gpu: bool
    has_launch: bool
    has_compile: bool
    has_theoretical: bool
    has_measured: bool
    has_speedup: bool
    rows: tuple[CaseRow, ...]
    findings: tuple[FindingView, ...]
    impls: tuple[str, ...] = ()  # every implementation among the rows: the built-in ones first, then a user's


@dataclass(frozen=True)
class TallyRow:
    op: str
    cases: int
    passed: int
    failed: int
    errors: int
    success: str


@dataclass(frozen=True)
class SpeedupRow:
    """One implementation of one op: its geometric-mean speedup per precision (None: not run)."""

    op: str
    impl: str
    cells: tuple[str | None, ...]  # "1.01×", per ``BenchView.precisions``
    ranges: tuple[str | None, ...]  # "1.00×–1.03×"
    values: tuple[float | None, ...]  # the geometric means behind ``cells``


@dataclass(frozen=True)
class SkipGroup:
    reason: str
    count: int
    cases: tuple[str, ...]  # compacted like finding rows


@dataclass(frozen=True)
class CeilingRow:
    name: str
    kind: str
    value: str
    source: str


@dataclass(frozen=True)
class Methodology:
    timing: tuple[str, ...]
    notes: tuple[str, ...]  # how cases were measured, only what applies to this run
    settings: tuple[tuple[str, str], ...]
    versions: tuple[tuple[str, str], ...]
    tolerances: tuple[tuple[str, str], ...]  # precision -> range
    ceilings: tuple[CeilingRow, ...]


@dataclass(frozen=True)
class BenchView:
    backend: str
    device: str
    stop: str | None
    prefix: str  # of its HTML ids and chart names: "" for a run's only bench, "gpu<i>-" for one of several
    title: str  # its heading where a report has several: "GPU 1: NVIDIA H200"
    tiles: tuple[Tile, ...]
    findings: tuple[FindingView, ...]  # run-wide ones; op ones are in their sections
    recommendations: tuple[str, ...]
    tallies: tuple[TallyRow, ...]  # per op, then overall
    precisions: tuple[str, ...]  # the columns of ``speedups``
    speedups: tuple[SpeedupRow, ...]  # per op and implementation, one cell per precision
    sections: tuple[OpSection, ...]
    skipped: tuple[SkipGroup, ...]
    skipped_count: int
    notes: tuple[str, ...]
    methodology: Methodology
    flag_legend: tuple[Flag, ...]  # flags that occur, for the legends of compact layouts
    roofline: bool
    phases: PhaseTable | None = None  # where the run's time went (reports that recorded it)


@dataclass(frozen=True)
class RunView:
    lang: str
    title: str
    subtitle: str
    machine: str
    verdict: str | None  # worst check status; None without checks
    verdict_text: str
    check_counts: str
    checks: tuple[Check, ...]
    env_rows: tuple[Row, ...]
    env_variables: tuple[tuple[str, str], ...]
    gpus: tuple[Gpu, ...]
    bench: BenchView | None  # the first (or only) device's
    footer: str
    benches: tuple[BenchView, ...] = ()  # every device's, in report order
    node: Any = None  # render.node_view.Section: the node tests of a run with --gpus
    node_tiles: tuple[Tile, ...] = ()
    node_phases: PhaseTable | None = None  # where the node tests' time went

    @property
    def several(self) -> bool:
        """Laid out per GPU: a node run, or a report with more than one bench."""
        return self.node is not None or len(self.benches) > 1


# --------------------------------------------------------------------------- building


class _Phraser:
    """Phrasing for one language and one escaping rule."""

    def __init__(self, lang: str, escape: Escape, prefix: str = "") -> None:
        self.lang = lang
        self.escape = escape
        self.prefix = prefix  # of the HTML ids of one GPU's bench in a report of several

    def t(self, key: str, **params: Any) -> str:
        return translate(self.lang, key, **params)

    def note(self, note: Note) -> str:
        return phrase(self.lang, note.key, note.params, self.escape)

    def key(self, key: str, params: Any = None, raw: dict[str, str] | None = None) -> str:
        return phrase(self.lang, key, params, self.escape, raw)

    def source(self, source: Source) -> str:
        text = self.key(f"peak_source.{source.kind}", source.params)
        if not source.verified:
            text += self.t("list.sep") + self.t("peak_source.unverified")
        return text

    def join(self, parts: Sequence[str]) -> str:
        return join(self.lang, parts)


def _flag(name: str, r: CaseResult | None, p: _Phraser) -> Flag:
    if name == fl.THROTTLED and r is not None and r.conditions is not None and r.conditions.power_capped_only:
        name = "power_capped"
    return Flag(name, FLAG_ABBR.get(name, "?"), p.t(f"flag.{name}"))


def _row_groups(keys: Sequence[CaseKey]) -> tuple[str, ...]:
    """Rows compacted: per op and precision, implementations that share the same sizes on one line,
    sizes in numeric order ("matmul fp16 torch, triton: 2048×2048×2048, 4096×4096×4096")."""
    sizes: dict[tuple[str, str], dict[str, list[tuple[int, ...]]]] = {}
    for op, impl, dtype, precision, dims in keys:
        by_impl = sizes.setdefault((op, fmt.precision_label(dtype, precision)), {})
        by_impl.setdefault(impl, []).append(tuple(dims))
    out = []
    for (op, variant), by_impl in sizes.items():
        same: dict[tuple[tuple[int, ...], ...], list[str]] = {}
        for impl, ds in by_impl.items():
            same.setdefault(tuple(sorted(set(ds), key=fmt.shape_key)), []).append(impl)
        for ds, impls in same.items():
            out.append(f"{op} {variant} {', '.join(impls)}: {', '.join(fmt.shape(d) for d in ds)}")
    return tuple(out)


def _finding(f: Finding, p: _Phraser, key: str | None = None, params: dict[str, Any] | None = None,
             rows: Sequence[CaseKey] | None = None, raw: dict[str, str] | None = None) -> FindingView:
    rows = tuple(f.rows if rows is None else rows)
    flag_name = FINDING_FLAG.get(f.key)
    flag = _flag(flag_name, None, p) if flag_name else None
    return FindingView(f.key, f.level, p.key(key or f.key, f.params if params is None else params, raw),
                       tuple(RowRef(case_label(p.lang, k), anchor(k, p.prefix)) for k in rows), _row_groups(rows), flag)


def _findings(ba: BenchAnalysis, p: _Phraser) -> tuple[list[FindingView], dict[str, list[FindingView]]]:
    """Run-wide findings, and per op the findings about it (several per implementation merged into one sentence)."""
    run: list[FindingView] = []
    per_op: dict[str, list[FindingView]] = {}
    launch: dict[str, list[Finding]] = {}
    speed: dict[tuple[str, str], list[Finding]] = {}
    for f in ba.findings:
        if f.key == "finding.launch_bound":
            launch.setdefault(f.params["op"], []).append(f)
        elif f.key == "finding.speedup_large":
            speed.setdefault((f.params["op"], f.params["impl"]), []).append(f)
        elif f.key == "finding.bandwidth_best" and f.params.get("measured_pct") is None:
            per_op.setdefault(f.params["op"], []).append(_finding(f, p, "finding.bandwidth_best_nomeasured"))
        elif f.key in OP_FINDINGS:
            per_op.setdefault(f.params["op"], []).append(_finding(f, p))
        else:
            run.append(_finding(f, p))
    for op, fs in launch.items():
        parts = p.join([p.key("finding.launch_bound.part", f.params) for f in fs])
        rows = [k for f in fs for k in f.rows]
        per_op.setdefault(op, []).insert(0, _finding(fs[0], p, "finding.launch_bound", {"op": op, "count": len(rows)},
                                                     rows, {"parts": parts}))
    for (op, impl), fs in speed.items():
        parts = p.join([p.key("finding.speedup_large.part", f.params) for f in fs])
        rows = [k for f in fs for k in f.rows]
        per_op.setdefault(op, []).append(_finding(fs[0], p, "finding.speedup_large", {"op": op, "impl": impl},
                                                  rows, {"parts": parts}))
    return run, per_op


def _error(r: CaseResult) -> tuple[str, str]:
    """err/bound (the analysis's one number, as every medium shows it) and the whole-output error beside it."""
    acc = r.case.accuracy
    if acc is None:
        return fmt.DASH, fmt.DASH
    return fmt.ratio_pct(r.verdict.ratio if r.verdict is not None else None), fmt.sci(acc.rel_l2)


def _detail(r: CaseResult, p: _Phraser) -> str:
    parts = []
    if r.case.failure is not None:
        parts.append(p.t("case.failure", stage=p.key(f"stage.{r.case.failure.stage}"),
                         detail=p.escape(fmt.first_line(r.case.failure.detail))))
    if r.verdict is not None and r.verdict.broken:
        parts.append(p.t("case.broken", bounds=p.join([p.t(f"bound.{b}") for b in r.verdict.broken])))
        if r.verdict.failed_outputs:
            parts.append(_failed_outputs(r, p))
    elif r.status == "fail" and r.verdict is None:
        parts.append(p.t("case.unchecked"))
    parts += [p.note(n) for n in r.case.notes]
    return p.join(parts)


def _failed_outputs(r: CaseResult, p: _Phraser) -> str:
    """Which outputs of an op with several broke a bound, each with its error over its bound."""
    assert r.verdict is not None
    return p.t("case.failed_outputs", outputs=p.join([
        p.t("case.output_failed", output=p.escape(name), ratio=fmt.speedup(ratio)) if ratio is not None
        else p.escape(name) for name, ratio in r.verdict.failed_ratios()]))


def _case_row(r: CaseResult, p: _Phraser) -> CaseRow:
    c = r.case
    err, tol = _error(r)
    if r.verdict is not None and len(r.verdict.output_ratios) > 1:  # each output's err/bound
        tol = p.join([tol, *(f"{p.escape(name)} {fmt.ratio_pct(x)}" for name, x in r.verdict.output_ratios)])
    if r.verdict is not None and r.verdict.relative is not None:
        # This error as a multiple of the baseline's, beside the bound: information, not the verdict.
        tol = p.join([tol, p.t("case.relative", ratio=fmt.speedup(r.verdict.relative), baseline=p.escape(r.spec.baseline))])
    compute = r.spec.compute_bound
    # Run in Triton's interpreter: its time is no speed, said where the time would stand.
    interpreted = p.t("case.interpreted") if r.interpreted else None
    return CaseRow(
        key=c.key, anchor=anchor(c.key, p.prefix), impl=c.impl, variant=fmt.precision_label(c.dtype, c.precision),
        size=fmt.shape(c.shape), kernel=c.kernel,
        gpu_time=interpreted or fmt.duration_us(c.gpu.median_us if c.gpu else None),
        gpu_iqr=fmt.duration_us(c.gpu.iqr_us if c.gpu else None),
        launch_time=interpreted or fmt.duration_us(c.launch.median_us if c.launch else None),
        first_call=fmt.seconds(c.compile_s), speedup=r.speedup, speedup_text=fmt.speedup(r.speedup),
        throughput=fmt.DASH if r.interpreted else fmt.num(r.tflops if compute else r.gbps),
        pct_theoretical=fmt.pct(r.pct_theoretical), pct_measured=fmt.pct(r.pct_measured), share=r.pct_theoretical,
        error=err, tolerance=tol, error_ratio=r.verdict.ratio if r.verdict is not None else None,
        failed_outputs=r.verdict.failed_outputs if r.verdict is not None else (),
        failed_text=_failed_outputs(r, p) if r.verdict is not None and r.verdict.failed_outputs else "",
        status=r.status, detail=_detail(r, p),
        flags=tuple(sorted((_flag(f, r, p) for f in r.flags), key=lambda f: FLAG_ORDER.index(f.name))),
    )


def _sections(ba: BenchAnalysis, p: _Phraser, op_findings: dict[str, list[FindingView]]) -> list[OpSection]:
    impl_order = {i: n for n, i in enumerate(IMPLS)}
    out = []
    for op in dict.fromkeys(r.case.op for r in ba.results):
        rs = [r for r in ba.results if r.case.op == op]
        variants = list(dict.fromkeys(fmt.precision_label(r.case.dtype, r.case.precision) for r in rs))
        rs.sort(key=lambda r: (variants.index(fmt.precision_label(r.case.dtype, r.case.precision)),
                               fmt.shape_key(r.case.shape), impl_order.get(r.case.impl, 9)))
        compute = rs[0].spec.compute_bound
        out.append(OpSection(
            op=op, compute_bound=compute, unit="TFLOP/s" if compute else "GB/s",
            has_gpu=any(r.case.gpu for r in rs), has_launch=any(r.case.launch for r in rs),
            has_compile=any(r.case.compile_s is not None for r in rs),
            has_theoretical=any(r.pct_theoretical is not None for r in rs),
            has_measured=any(r.pct_measured is not None for r in rs),
            has_speedup=any(r.speedup is not None for r in rs),
            rows=tuple(_case_row(r, p) for r in rs), findings=tuple(op_findings.get(op, ())),
            impls=tuple(sorted(dict.fromkeys(r.case.impl for r in rs), key=lambda i: impl_order.get(i, len(IMPLS)))),
        ))
    return out


def _tally_row(t: Tally, p: _Phraser) -> TallyRow:
    return TallyRow(t.op or p.t("summary.all"), t.cases, t.passed, t.failed, t.errors, fmt.ratio_pct(t.success_rate))


def _speedup_range(t: Tally) -> str:
    return fmt.DASH if t.speedup_min is None else f"{fmt.speedup(t.speedup_min)}–{fmt.speedup(t.speedup_max)}"


def _speedups(ba: BenchAnalysis) -> tuple[tuple[str, ...], tuple[SpeedupRow, ...]]:
    tallies = ba.summary.by_op_impl_precision
    precisions = tuple(x for x in PRECISIONS if any(t.precision == x for t in tallies))
    rows = []
    interpreted = {(r.case.op, r.case.impl) for r in ba.results if r.interpreted}
    for op, impl in dict.fromkeys((t.op, t.impl) for t in tallies):
        mine = {t.precision: t for t in tallies if t.op == op and t.impl == impl}
        if (op, impl) in interpreted and all(t.speedup_geomean is None for t in mine.values()):
            continue  # Triton's interpreter: no speedup to show, not a row of dashes

        cells = tuple(fmt.speedup(mine[x].speedup_geomean) if x in mine else None for x in precisions)
        ranges = tuple(_speedup_range(mine[x]) if x in mine else None for x in precisions)
        values = tuple(mine[x].speedup_geomean if x in mine else None for x in precisions)
        rows.append(SpeedupRow(str(op), str(impl), cells, ranges, values))
    return precisions, tuple(rows)


def _tiles(ba: BenchAnalysis, p: _Phraser) -> list[Tile]:
    s = ba.summary.overall
    cases = p.t("tile.cases.value", passed=s.passed, cases=s.cases)
    lines = []
    if s.failed:
        lines.append(p.t("tile.cases.failed", count=s.failed))
    if s.errors:
        lines.append(p.t("tile.cases.errors", count=s.errors))
    tiles = [Tile(p.t("tile.cases"), cases, tuple(lines), "pass" if s.passed == s.cases and s.cases else "fail")]
    best: dict[str, Finding] = {}
    for f in ba.findings:
        if f.key in ("finding.bandwidth_best", "finding.compute_best", "finding.compute_best_nopeak"):
            op = f.params["op"]
            # Compute-bound ops have one best row per precision: the tile quotes the fastest.
            if op not in best or (f.params.get("tflops") or 0) > (best[op].params.get("tflops") or 0):
                best[op] = f
    for op in dict.fromkeys(r.case.op for r in ba.results):
        value = fmt.DASH
        lines = []
        f = best.get(op)
        compute = next(r.spec for r in ba.results if r.case.op == op).compute_bound
        if f is not None and f.key == "finding.bandwidth_best":
            value = f"{fmt.num(f.params['gbps'])} GB/s"
            lines.append(p.t("tile.best_bw", pct=fmt.pct(f.params.get("theoretical_pct")),
                             impl=p.escape(f.params["impl"]), size=p.escape(fmt.shape(f.params["shape"]))))
        elif f is not None and f.params.get("peak_pct") is not None:
            value = f"{fmt.num(f.params['tflops'])} TFLOP/s"
            lines.append(p.t("tile.best_flops", precision=p.escape(f.params["precision"]),
                             pct=fmt.pct(f.params.get("peak_pct")), impl=p.escape(f.params["impl"])))
        else:
            # No ceiling to hold it against (a CPU run): the fastest row, as measured.
            rated = [r for r in ba.results if r.case.op == op and r.rate is not None]
            if rated:
                top = max(rated, key=lambda r: r.rate or 0.0)
                value = f"{fmt.num(top.rate)} {'TFLOP/s' if compute else 'GB/s'}"
                lines.append(p.t("tile.best", impl=p.escape(top.case.impl),
                                 variant=p.escape(fmt.precision_label(top.case.dtype, top.case.precision)),
                                 size=p.escape(fmt.shape(top.case.shape))))
        mine = [t for t in ba.summary.by_op_impl_precision if t.op == op and t.speedup_geomean is not None]
        precisions = tuple(dict.fromkeys(str(t.precision) for t in mine))
        speedups = tuple((str(impl), tuple(next((fmt.speedup(t.speedup_geomean) for t in mine
                                                 if t.impl == impl and t.precision == x), fmt.DASH)
                                            for x in precisions))
                         for impl in dict.fromkeys(t.impl for t in mine))
        tiles.append(Tile(op, value, tuple(lines), op=op, precisions=precisions, speedups=speedups))
    return tiles


def _skipped(skips: Sequence[Skip], p: _Phraser) -> list[SkipGroup]:
    by_reason: dict[str, list[CaseKey]] = {}
    for s in skips:
        by_reason.setdefault(p.note(s.reason), []).append(s.key)
    groups = [SkipGroup(reason, len(keys), _row_groups(keys)) for reason, keys in by_reason.items()]
    return sorted(groups, key=lambda g: -g.count)


def ceiling_name(lang: str, name: str) -> str:
    """A ceiling's name: ``bandwidth`` in the reader's words, a precision (fp32, tf32) as its identifier."""
    return translate(lang, f"ceiling.name.{name}") if has(lang, f"ceiling.name.{name}") else name


def _ceiling_rows(ba: BenchAnalysis, p: _Phraser) -> list[CeilingRow]:
    rows = []
    order = {THEORETICAL: 0, MEASURED: 1}
    items: list[Ceiling | MissingCeiling] = [*ba.ceilings.found, *ba.ceilings.missing]
    names = list(dict.fromkeys(c.name for c in items))
    items.sort(key=lambda c: (names.index(c.name), order.get(c.kind, 2)))
    for c in items:
        kind = p.t(f"ceiling.{c.kind}")
        name = ceiling_name(p.lang, c.name)
        if isinstance(c, Ceiling):
            rows.append(CeilingRow(name, kind, f"{fmt.num(c.value, 4)} {c.unit}", p.source(c.source)))
        else:
            rows.append(CeilingRow(name, kind, fmt.DASH, p.t("ceiling.missing", reason=p.key(c.key, c.params))))
    return rows


def _methodology(ba: BenchAnalysis, p: _Phraser) -> Methodology:
    bench = ba.bench
    methods: dict[str, list[int]] = {}
    for c in bench.cases:
        for tm in (c.gpu, c.launch):
            if tm:
                methods.setdefault(tm.method, []).append(tm.n)
    timing = []
    for m, ns in methods.items():
        samples = str(min(ns)) if min(ns) == max(ns) else f"{min(ns)}–{max(ns)}"
        timing.append(p.t(f"method.{m}", samples=samples))
    notes = [p.t("method.median")]
    cuda = bench.device.backend == "cuda"
    if cuda and bench.settings.cold_l2:
        notes.append(p.t("method.cold_l2"))
    elif cuda:
        notes.append(p.t("method.warm_l2"))
    if any(c.compile_s is not None for c in bench.cases):
        notes.append(p.t("method.first_call"))
    if ba.ceilings.get("bandwidth", MEASURED) is not None:
        notes.append(p.t("method.measured_ceiling"))
    if bench.settings.stop_ci is not None:
        notes.append(p.t("method.stop_ci", ci=fmt.ratio_pct(bench.settings.stop_ci)))
    st = bench.settings
    settings: list[tuple[str, str]] = [
        ("warmup_ms", fmt.num(st.warmup_ms)), ("rep_ms", fmt.num(st.rep_ms)),
        ("samples", f"{st.min_samples}–{st.max_samples}"), ("seed", str(st.seed)),
        ("quick", p.t("yes") if st.quick else p.t("no")),
    ]
    if cuda:
        settings.insert(3, ("cold_l2", p.t("yes") if st.cold_l2 else p.t("no")))
    else:
        settings.insert(3, ("threads", str(st.threads) if st.threads is not None else p.t("unknown")))
    if st.stop_ci is not None:
        settings.append(("stop_ci", fmt.ratio_pct(st.stop_ci)))
    if st.ops:
        settings.append(("ops", ",".join(st.ops)))
    if st.impls:
        settings.append(("impls", ",".join(st.impls)))
    tol: dict[str, tuple[float, float]] = {}
    for r in ba.results:
        if r.case.accuracy is None:
            continue
        t = r.tolerance
        lo, hi = tol.get(t.precision, (t.rel_l2, t.rel_l2))
        tol[t.precision] = (min(lo, t.rel_l2), max(hi, t.rel_l2))
    tolerances = tuple((prec, fmt.sci(lo) if fmt.sci(lo) == fmt.sci(hi) else f"{fmt.sci(lo)}–{fmt.sci(hi)}")
                       for prec, (lo, hi) in sorted(tol.items(), key=lambda kv: kv[1]))
    return Methodology(tuple(timing), tuple(notes), tuple(settings), tuple(sorted(bench.versions.items())),
                       tolerances, tuple(_ceiling_rows(ba, p)))


def _stop(ba: BenchAnalysis, p: _Phraser) -> str | None:
    for f in ba.findings:
        if f.key.startswith("finding.stopped."):
            text = p.key(f.key, f.params)
            if f.params.get("detail") and f.key != "finding.stopped.legacy":
                text += " " + p.t("stop.detail", detail=p.escape(fmt.first_line(f.params["detail"])))
            return text
    return None


def bench_view(ba: BenchAnalysis, lang: str, escape: Escape, prefix: str = "") -> BenchView:
    p = _Phraser(lang, escape, prefix)
    run_findings, op_findings = _findings(ba, p)
    sections = _sections(ba, p, op_findings)
    seen = {f.name: f for s in sections for r in s.rows for f in r.flags}
    legend = tuple(seen[n] for n in FLAG_ORDER if n in seen)
    s = ba.summary
    precisions, speedups = _speedups(ba)
    return BenchView(
        backend=ba.bench.device.backend, device=ba.bench.device.name, stop=_stop(ba, p), prefix=prefix,
        title=p.t("gpu.heading", index=ba.bench.device.index if ba.bench.device.index is not None else fmt.DASH,
                  name=escape(ba.bench.device.name)),
        tiles=tuple(_tiles(ba, p)),
        findings=tuple(f for f in run_findings if not f.key.startswith("finding.stopped.")),
        recommendations=tuple(p.key(r.key, r.params) for r in ba.recommendations),
        tallies=tuple(_tally_row(t, p) for t in (*s.by_op, s.overall)),
        precisions=precisions, speedups=speedups,
        sections=tuple(sections), skipped=tuple(_skipped(ba.bench.skipped, p)),
        skipped_count=len(ba.bench.skipped), notes=tuple(p.note(n) for n in ba.bench.notes),
        methodology=_methodology(ba, p), flag_legend=legend,
        roofline=any(r.gbps and r.tflops for r in ba.results),
        phases=phase_table(ba.phases, lang, escape),
    )


def _env_rows(report: Report, p: _Phraser) -> list[Row]:
    env = report.environment
    is_wsl = env.get("wsl", "is_wsl") is True
    rows = []
    for section, key in ENV_FACTS:
        f = env.sections.get(section, {}).get(key)
        if f is None:
            continue  # not part of this report (an older or partial probe): nothing to explain
        if (section, key) in ONLY_WHEN_KNOWN and not f.ok:
            continue
        if (section, key) in WSL_DETAILS and not is_wsl:
            continue
        rows.append(_fact_row(p, f"fact.{section}.{key}", key, f))
    rows.append(Row(p.t("fact.report.created"), report.created))
    return rows


def fact_reason(lang: str, reason: str | None) -> str:
    """Why a fact is missing: one of envcheck's own reasons (``model.reasons``) in the reader's words, else as recorded."""
    if not reason:
        return translate(lang, "unknown")
    key = reasons.KEYS.get(reason)
    return translate(lang, key) if key else reason


def _fact_row(p: _Phraser, label_key: str, key: str, f: Fact) -> Row:
    label = p.t(label_key)
    if f.ok:
        word = f"fact_value.{key}.{f.value}"
        return Row(label, p.t(word) if isinstance(f.value, str) and has(p.lang, word) else
                   fmt.fact_value(key, f.value, p.t))
    return Row(label, None, fact_reason(p.lang, f.reason))


def _env_variables(report: Report) -> list[tuple[str, str]]:
    v = report.environment.get("env", "variables")
    if not isinstance(v, dict):
        return []
    # A second line of defence: probes redact secrets, but a report written by another tool
    # version must not leak one through a rendered document either; the probes' own rule applies.
    return [(str(k), redact_value(str(k), str(x))) for k, x in sorted(v.items())]


def _gpus(report: Report, p: _Phraser) -> list[Gpu]:
    out = []
    for g in report.environment.gpus:
        rows = tuple(_fact_row(p, f"fact.gpu.{k}", k, g.facts[k]) for k in GPU_FACTS if k in g.facts)
        bw = theoretical_bandwidth_gbps(g.get("mem_clock_max_mhz"), g.get("memory_bus_width_bits"))
        if bw is not None:  # the analysis's formula: a value stored by an old report is never shown
            rows += (_fact_row(p, "fact.gpu.theoretical_bandwidth_gbps", "theoretical_bandwidth_gbps", known(bw)),)
        out.append(Gpu(g.index, str(g.get("name") or f"GPU {g.index}"), g.lost, rows))
    return out


def _machine(report: Report, p: _Phraser) -> str:
    """One line naming the stack: what a reader checks first when numbers surprise."""
    env = report.environment
    parts = []
    for label, section, key in ((p.t("term.env.driver"), "driver", "driver_version"),
                                ("CUDA", "driver", "cuda_driver_version"), ("PyTorch", "torch", "version"),
                                ("Triton", "triton", "version")):
        v = env.get(section, key)
        if v:
            parts.append(f"{label} {p.escape(str(v))}")
    return " · ".join([_gpu_label(report, p), *parts])


def bench_prefix(analysis: Analysis, position: int) -> str:
    """The prefix of one bench's HTML ids and chart files: none for a run's only bench; ``gpu<i>_`` for one
    of several (``dev<n>_`` for a device without an index)."""
    if len(analysis.benches) <= 1 and analysis.node is None:
        return ""
    index = analysis.benches[position].bench.device.index
    return f"gpu{index}_" if index is not None else f"dev{position}_"


def _gpu_label(report: Report, p: _Phraser) -> str:
    names = [b.device.name for b in report.benches if b.device.backend == "cuda"]
    if len(names) > 1:
        distinct = list(dict.fromkeys(names))
        return f"{len(names)} × {p.escape(distinct[0])}" if len(distinct) == 1 else p.escape(" + ".join(distinct))
    gpu = report.gpu_name
    if gpu:
        return p.escape(gpu)
    # A CPU run names the CPU it measured, not a GPU it lacks.
    cpu = next((b.device.name for b in report.benches if b.device.backend == "cpu"), None)
    return p.escape(cpu) if cpu else p.t("no_gpu")


def run_view(report: Report, analysis: Analysis, lang: str, escape: Escape) -> RunView:
    p = _Phraser(lang, escape)
    name = _gpu_label(report, p)
    verdict = report.verdict if report.checks else None
    benches = tuple(bench_view(ba, lang, escape, bench_prefix(analysis, i)) for i, ba in enumerate(analysis.benches))
    return RunView(
        lang=lang,
        title=p.t("report.title", gpu=name, host=escape(report.host), date=escape(report.created[:10])),
        subtitle=p.t("report.subtitle", kind=p.t(f"kind.{report.kind}") if report.kind in ("probe", "check", "run")
                     else escape(report.kind), created=escape(report.created), version=escape(report.tool_version)),
        machine=_machine(report, p),
        verdict=verdict, verdict_text=p.t(f"verdict.{verdict}") if verdict else p.t("health.none"),
        check_counts=check_counts(lang, report.checks), checks=worst_first(all_localized(keyed(report.checks, report.environment, report.node), lang)),
        env_rows=tuple(_env_rows(report, p)), env_variables=tuple(_env_variables(report)),
        gpus=tuple(_gpus(report, p)),
        bench=benches[0] if benches else None,
        footer=p.t("report.footer", version=escape(report.tool_version), schema=report.schema_version),
        benches=benches,
        node=node_section(analysis.node, lang, escape) if analysis.node is not None else None,
        node_tiles=node_tiles(analysis.node, lang, escape) if analysis.node is not None else (),
        node_phases=phase_table(analysis.node_phases, lang, escape, node=True),
    )


__all__ = ["FLAG_ABBR", "BenchView", "CaseRow", "FindingView", "OpSection", "RunView", "anchor", "bench_view",
           "run_view"]

