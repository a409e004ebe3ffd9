"""The burn-in as every medium shows it: phrased rows and verdicts from the burn's analysis.

One view for the terminal, Markdown and HTML (each passes its own ``escape`` for machine text),
so they say the same thing. Every number comes from ``analysis.burn``; nothing is derived here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envcheck.analysis.burn import THRESHOLDS, BurnAnalysis, BurnFinding, GpuBurn, Margin
from envcheck.render import fmt
from envcheck.render.i18n import join, phrase, translate

Escape = Callable[[str], str]
RATE_UNIT = {"gemm": "TFLOP/s", "bandwidth": "GB/s", "memtest": "GB/s"}


@dataclass(frozen=True)
class FindingRow:
    gpu: str
    cause: str
    fix: str
    threshold: str  # the threshold and its anchor, or ""


@dataclass(frozen=True)
class GpuRow:
    gpu: str
    name: str
    status: str
    cells: tuple[str, ...]  # in BurnView.columns order


@dataclass(frozen=True)
class DetailRow:
    gpu: str
    cells: tuple[str, ...]


@dataclass(frozen=True)
class BurnView:
    verdict: str
    verdict_text: str
    summary: str
    columns: tuple[str, ...]
    gpus: tuple[GpuRow, ...]
    findings: tuple[FindingRow, ...]
    thresholds: tuple[tuple[str, str, str], ...]  # (what, limit, anchor)
    memtest_columns: tuple[str, ...]
    memtest: tuple[DetailRow, ...]
    errors_columns: tuple[str, ...]
    bit_errors: tuple[DetailRow, ...]
    sdc_columns: tuple[str, ...]
    sdc: tuple[DetailRow, ...]
    mismatches_columns: tuple[str, ...]
    mismatches: tuple[DetailRow, ...]
    xids: tuple[str, ...]
    notes: tuple[str, ...]
    method: str
    margin_columns: tuple[str, ...] = ()  # the GPUs
    margins: tuple[DetailRow, ...] = ()  # one row per rule (``gpu`` holds the rule), a cell per GPU
    device_column: str = ""  # "GPU", or "device" for a CPU burn
    no_findings: str = ""  # what "no verdict fired" covers: on a CPU, only the rules that apply
    rates_note: str = ""  # how the rates were taken; none on a CPU, which shows none


def _gpu_label(lang: str, g: GpuBurn) -> str:
    return translate(lang, "burn.cpu") if g.on_cpu else translate(lang, "burn.gpu", index=g.gpu.index)


PCT_RULES = ("sibling_margin", "ceiling_margin", "reference_margin", "power_share", "drift", "throttle_share")


def _limit(key: str, value: float) -> str:
    if key in PCT_RULES:
        return fmt.pct(100 * value)
    return fmt.num(value)


def threshold_text(lang: str, a: BurnAnalysis, key: str) -> str:
    th = a.thresholds[key]
    return translate(lang, "burn.threshold.with_anchor", limit=_limit(key, th.value),
                     anchor=translate(lang, f"burn.anchor.{th.anchor}"))


def _finding(lang: str, a: BurnAnalysis, gpu: str, f: BurnFinding, escape: Escape) -> FindingRow:
    return FindingRow(gpu, phrase(lang, f"burn.finding.{f.key}", f.params, escape),
                      translate(lang, f"burn.fix.{f.key}"), threshold_text(lang, a, f.threshold) if f.threshold else "")


def _rate(g: GpuBurn, phase: str) -> str:
    r = g.rates.get(phase)
    if r is None or r.median is None:
        return fmt.DASH
    return f"{fmt.rate(r.median, RATE_UNIT[phase])} ({fmt.num(r.best)})"


def _cpu_cells(lang: str, g: GpuBurn) -> tuple[str, ...]:
    """A CPU burn tests the code path: which phases ran to the end, and no speed."""
    ran = [translate(lang, f"burn.phase.{p.phase}") for p in g.gpu.phases if p.finished]
    return (next((p.dtype for p in g.gpu.phases if p.phase == "gemm"), fmt.DASH), join(lang, ran) or fmt.DASH)


def _reference(lang: str, g: GpuBurn, label: str, escape: Escape) -> str | None:
    """Which healthy figure the GPU's speed was held against, or that its model has none."""
    gemm = next((p for p in g.gpu.phases if p.phase == "gemm"), None)
    if g.on_cpu or gemm is None or g.gpu.device is None:
        return None
    if (ref := g.reference) is None:
        return translate(lang, "burn.no_reference", gpu=label, name=escape(g.gpu.device.name), dtype=gemm.dtype,
                         shape=" x ".join(map(str, gemm.shape)))
    m = next((m for m in g.margins if m.rule == "reference_margin"), None)
    return translate(lang, "burn.reference", gpu=label, sku=escape(ref.sku), dtype=ref.dtype,
                     tflops=fmt.num(ref.tflops), limit=_limit("reference_margin", THRESHOLDS["reference_margin"].value),
                     read=fmt.num(g.rate("gemm")), delta=f"{'+' if m.value <= 0 else '-'}{fmt.pct(abs(m.value))}" if m
                     else fmt.DASH, room=fmt.num(round(m.room, 2)) if m else fmt.DASH)


def _gpu_cells(lang: str, g: GpuBurn) -> tuple[str, ...]:
    power = fmt.DASH
    if g.power_max_w is not None:
        power = f"{fmt.num(g.power_max_w)} / {fmt.num(g.power_limit_w)} W"
        if g.power_share is not None:
            power += f" ({fmt.pct(100 * g.power_share)})"
    temps = f"{fmt.num(g.temperature_max_c)} / {fmt.num(g.mem_temperature_max_c)} °C"
    clock = fmt.rate(g.sm_mhz_median, "MHz")
    if g.clock_drift is not None:
        clock += f" ({'+' if g.clock_drift.change >= 0 else ''}{fmt.pct(100 * g.clock_drift.change)})"
    gr = g.rates.get("gemm")
    gemm = _rate(g, "gemm")
    if gr is not None and gr.drift is not None:
        gemm += f" ({'+' if gr.drift.change >= 0 else ''}{fmt.pct(100 * gr.drift.change)})"
    throttle = fmt.DASH if g.throttle_share is None else fmt.pct(100 * g.throttle_share)
    counters = translate(lang, "burn.counters", ecc=fmt.num(g.ecc_uncorrected), corrected=fmt.num(g.ecc_corrected),
                         replays=fmt.num(g.pcie_replays), xids=len(g.xids))
    dtype = gr.phase.dtype if gr is not None else fmt.DASH
    return (dtype, gemm, _rate(g, "bandwidth"), power, temps, clock, throttle, counters)


def _margin_cell(lang: str, m: Margin | None) -> str:
    if m is None:
        return fmt.DASH
    show = fmt.pct if m.threshold in PCT_RULES else fmt.num
    return translate(lang, "burn.margin_cell", value=show(m.value), limit=show(m.limit),
                     room=fmt.num(m.room))


def _margins(lang: str, a: BurnAnalysis) -> tuple[DetailRow, ...]:
    """Every rule judged on some GPU, in the order the analysis judged them, a cell per GPU."""
    by_gpu = [{m.rule: m for m in g.margins} for g in a.gpus]
    rules = list(dict.fromkeys(m.rule for g in a.gpus for m in g.margins))
    return tuple(DetailRow(translate(lang, f"burn.rule.{r}"), tuple(_margin_cell(lang, ms.get(r)) for ms in by_gpu))
                 for r in rules)


def burn_view(a: BurnAnalysis, lang: str, escape: Escape) -> BurnView:
    t = lambda key, **p: translate(lang, key, **p)  # noqa: E731
    cpu = bool(a.gpus) and all(g.on_cpu for g in a.gpus)
    shown = ("dtype", "ran_cpu") if cpu else ("dtype", "gemm", "bandwidth", "power", "temperature",
                                                            "clock", "throttle", "counters")
    columns = tuple(t(f"burn.col.{c}") for c in shown)
    # A CPU's buffer is the plan's tiny cap, not its free memory: no size, coverage or time that reads like a GPU's.
    memtest_shown = ("patterns", "passes", "bits") if cpu else ("bytes", "coverage", "patterns", "passes", "time",
                                                                 "bits")
    rows, findings, memtest, errors, sdc, mism = [], [], [], [], [], []
    for g in a.gpus:
        label = _gpu_label(lang, g)
        name = escape(g.gpu.device.name) if g.gpu.device else fmt.DASH
        rows.append(GpuRow(label, name, g.status, _cpu_cells(lang, g) if cpu else _gpu_cells(lang, g)))
        findings += [_finding(lang, a, label, f, escape) for f in g.findings]
        m = g.gpu.memtest
        if m is not None:
            cells = {"bytes": fmt.nbytes(m.bytes_tested), "coverage": fmt.pct(100 * m.bytes_tested / m.free_bytes)
                     if m.free_bytes else fmt.DASH, "patterns": escape(", ".join(m.patterns)), "passes": str(m.passes),
                     "time": fmt.seconds(m.duration_s), "bits": str(m.error_bits)}
            memtest.append(DetailRow(label, tuple(cells[c] for c in memtest_shown)))
            for r in m.errors:
                errors.append(DetailRow(label, (escape(r.pattern), str(r.pass_index), f"{r.start_address:#x}",
                                                f"{r.end_address:#x}", str(r.words), str(r.bits))))
        s = g.gpu.sdc
        if s is not None:
            sdc.append(DetailRow(label, (str(s.iterations), str(s.checksums), str(s.full_compares),
                                         t("burn.fp64_checks", checks=s.fp64_checks, elements=s.fp64_elements),
                                         fmt.num(s.fp64_max_error), str(s.mismatch_count))))
            for x in s.mismatches:
                mism.append(DetailRow(label, (t(f"burn.check.{x.check}"), str(x.iteration), fmt.seconds(x.t_s),
                                              str(x.element) if x.element >= 0 else fmt.DASH, fmt.num(x.expected),
                                              fmt.num(x.got))))
    findings += [_finding(lang, a, t("burn.host"), f, escape) for f in a.findings]
    burn = a.burn
    xids = tuple(escape(x.line) for x in burn.new_xids)
    notes = [t("burn.control", gpu=_gpu_label(lang, g), control=g.gpu.control, what=t(f"burn.control.{g.gpu.control}"))
             for g in a.gpus if g.gpu.control]
    notes += [phrase(lang, n.key, n.params, escape) for g in a.gpus for n in g.gpu.notes]
    notes += filter(None, (_reference(lang, g, _gpu_label(lang, g), escape) for g in a.gpus))
    if burn.xid_source is None:
        notes.append(t("burn.no_xid_source", reasons=escape("; ".join(burn.xid_reasons)) or fmt.DASH))
    if cpu:  # never a rule shown as held that was not applied
        skipped = dict.fromkeys(r for g in a.gpus for r in g.not_applied)
        notes += [t("burn.not_applied_cpu", rules=join(lang, [t(f"burn.rule.{r}") for r in skipped])), t("burn.exit_cpu")]
    thresholds = tuple((t(f"burn.threshold.{k}"), _limit(k, th.value), t(f"burn.anchor.{th.anchor}"))
                       for k, th in a.thresholds.items())
    verdict = a.verdict
    summary = t("burn.summary_cpu" if cpu else "burn.summary", gpus=len(a.gpus), minutes=fmt.general(burn.minutes),
                seconds=fmt.seconds(burn.duration_s), started=escape(burn.started))
    verdict_key = f"burn.verdict.{verdict}" + ("_cpu" if cpu and verdict == "pass" else "")
    return BurnView(
        verdict, t(verdict_key, failed=sum(g.status == "fail" for g in a.gpus), gpus=len(a.gpus)),
        summary, columns, tuple(rows), tuple(findings), thresholds,
        tuple(t(f"burn.memtest.col.{c}") for c in memtest_shown),
        tuple(memtest),
        tuple(t(f"burn.errors.col.{c}") for c in ("pattern", "pass", "start", "end", "words", "bits")), tuple(errors),
        tuple(t(f"burn.sdc.col.{c}") for c in ("iterations", "checksums", "full", "fp64", "fp64_error",
                                                "mismatches")), tuple(sdc),
        tuple(t(f"burn.mismatch.col.{c}") for c in ("check", "iteration", "time", "element", "expected", "got")),
        tuple(mism), xids, tuple(notes), t("burn.method"), tuple(_gpu_label(lang, g) for g in a.gpus),
        _margins(lang, a), t("burn.col.device" if cpu else "burn.col.gpu"),
        t("burn.no_findings_cpu" if cpu else "burn.no_findings"), "" if cpu else t("burn.rates_note"))
