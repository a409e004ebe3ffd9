"""The burn-in as every medium shows it: a row per GPU, the verdicts with cause and fix, the detail tables;
every number comes from ``analysis.burn``."""

from __future__ import annotations

from envcheck.analysis.burn import THRESHOLDS, BurnAnalysis, Drift, GpuBurn, Margin
from envcheck.model import Report
from envcheck.render import fmt
from envcheck.render.i18n import esc, join, phrase, t
from envcheck.render.view import subtitle as subtitle

RATE_UNIT = {"gemm": "TFLOP/s", "bandwidth": "GB/s", "memtest": "GB/s"}
PCT_RULES = ("sibling_margin", "ceiling_margin", "reference_margin", "power_share", "drift", "throttle_share")
COLUMNS = ("dtype", "gemm", "bandwidth", "power", "temperature", "clock", "throttle", "counters")
CPU_COLUMNS = ("dtype", "ran_cpu")
DETAIL_COLUMNS = {"memtest": ("bytes", "coverage", "patterns", "passes", "time", "bits"),
                  "errors": ("pattern", "pass", "start", "end", "words", "bits"),
                  "sdc": ("iterations", "checksums", "full", "fp64", "fp64_error", "mismatches"),
                  "mismatch": ("check", "iteration", "time", "element", "expected", "got")}


def on_cpu(a: BurnAnalysis) -> bool:
    return bool(a.gpus) and all(g.on_cpu for g in a.gpus)


def label(g: GpuBurn) -> str:
    return t("burn.cpu") if g.on_cpu else t("burn.gpu", index=g.gpu.index)


def name(g: GpuBurn) -> str:
    return esc(g.gpu.device.name) if g.gpu.device else fmt.DASH


def device_column(a: BurnAnalysis) -> str:
    return t("burn.col.device") if on_cpu(a) else t("burn.col.gpu")


def columns(a: BurnAnalysis) -> list[str]:
    return [t(f"burn.col.{c}") for c in (CPU_COLUMNS if on_cpu(a) else COLUMNS)]


def _limit(key: str, value: float) -> str:
    return fmt.pct(100 * value) if key in PCT_RULES else fmt.num(value)


def _rate(g: GpuBurn, phase: str) -> str:
    r = g.rates.get(phase)
    if r is None or r.median is None:
        return fmt.DASH
    return f"{fmt.rate(r.median, RATE_UNIT[phase])} ({fmt.num(r.best)})"


def _change(drift: Drift) -> str:
    return f"{'+' if drift.change >= 0 else ''}{fmt.pct(100 * drift.change)}"


def cells(g: GpuBurn, cpu: bool) -> tuple[str, ...]:
    """A device's row; a CPU burn tests the code path: which phases ran to the end, and no speed."""
    if cpu:
        ran = [t(f"burn.phase.{p.phase}") for p in g.gpu.phases if p.finished]
        return (next((p.dtype for p in g.gpu.phases if p.phase == "gemm"), fmt.DASH), join(ran) or fmt.DASH)
    gr = g.rates.get("gemm")
    gemm = _rate(g, "gemm") + (f" ({_change(gr.drift)})" if gr is not None and gr.drift is not None else "")
    dtype = gr.phase.dtype if gr is not None else fmt.DASH
    power = fmt.DASH
    if g.power_max_w is not None:
        power = f"{fmt.num(g.power_max_w)} / {fmt.num(g.power_limit_w)} W"
        power += f" ({fmt.pct(100 * g.power_share)})" if g.power_share is not None else ""
    clock = fmt.rate(g.sm_mhz_median, "MHz") + (f" ({_change(g.clock_drift)})" if g.clock_drift is not None else "")
    return (dtype, gemm, _rate(g, "bandwidth"), power,
            f"{fmt.num(g.temperature_max_c)} / {fmt.num(g.mem_temperature_max_c)} °C", clock,
            fmt.DASH if g.throttle_share is None else fmt.pct(100 * g.throttle_share),
            t("burn.counters", ecc=fmt.num(g.ecc_uncorrected), corrected=fmt.num(g.ecc_corrected),
              replays=fmt.num(g.pcie_replays), xids=len(g.xids)))


def rows(a: BurnAnalysis) -> list[tuple[GpuBurn, str, str, tuple[str, ...]]]:
    """(the device, its label, its name, its cells) per device."""
    cpu = on_cpu(a)
    return [(g, label(g), name(g), cells(g, cpu)) for g in a.gpus]


def threshold(a: BurnAnalysis, key: str) -> str:
    th = a.thresholds[key]
    return t("burn.threshold.with_anchor", limit=_limit(key, th.value), anchor=t(f"burn.anchor.{th.anchor}"))


def findings(a: BurnAnalysis) -> list[tuple[str, str, str, str]]:
    """(device, cause, fix, threshold or "") of every finding, the host's last."""
    return [(who, phrase(f"burn.finding.{f.key}", f.params), t(f"burn.fix.{f.key}"),
             threshold(a, f.threshold) if f.threshold else "")
            for who, fs in [*((label(g), g.findings) for g in a.gpus), (t("burn.host"), a.findings)] for f in fs]


def details(a: BurnAnalysis) -> dict[str, tuple[list[str], list[tuple[str, tuple[str, ...]]]]]:
    """The memory test, its bit errors, the silent-data-corruption checks and their mismatches: (columns, rows)."""
    out: dict[str, list[tuple[str, tuple[str, ...]]]] = {k: [] for k in DETAIL_COLUMNS}
    # A CPU's buffer is the plan's tiny cap, not its free memory: no size, coverage or time that reads like a GPU's.
    shown = {**DETAIL_COLUMNS, "memtest": ("patterns", "passes", "bits") if on_cpu(a) else DETAIL_COLUMNS["memtest"]}
    for g in a.gpus:
        who, m, s = label(g), g.gpu.memtest, g.gpu.sdc
        if m is not None:
            cells = {"bytes": fmt.nbytes(m.bytes_tested), "coverage": fmt.ratio_pct(g.memtest_coverage),
                     "patterns": esc(", ".join(m.patterns)), "passes": str(m.passes), "time": fmt.seconds(m.duration_s),
                     "bits": str(m.error_bits)}
            out["memtest"].append((who, tuple(cells[c] for c in shown["memtest"])))
            out["errors"] += [(who, (esc(r.pattern), str(r.pass_index), f"{r.start_address:#x}",
                                     f"{r.end_address:#x}", str(r.words), str(r.bits))) for r in m.errors]
        if s is not None:
            out["sdc"].append((who, (str(s.iterations), str(s.checksums), str(s.full_compares),
                                     t("burn.fp64_checks", checks=s.fp64_checks, elements=s.fp64_elements),
                                     fmt.num(s.fp64_max_error), str(s.mismatch_count))))
            out["mismatch"] += [(who, (t(f"burn.check.{x.check}"), str(x.iteration), fmt.seconds(x.t_s),
                                       str(x.element) if x.element >= 0 else fmt.DASH, fmt.num(x.expected),
                                       fmt.num(x.got))) for x in s.mismatches]
    return {k: ([t(f"burn.{k}.col.{c}") for c in shown[k]], v) for k, v in out.items()}


def notes(a: BurnAnalysis) -> list[str]:
    """What was not applied, a control, an unread kernel log: said before a reader trusts the pass."""
    out = [t("burn.control", gpu=label(g), control=g.gpu.control, what=t(f"burn.control.{g.gpu.control}"))
           for g in a.gpus if g.gpu.control]
    out += [phrase(n.key, n.params) for g in a.gpus for n in g.gpu.notes]
    out += filter(None, (_reference(g) for g in a.gpus))
    if a.burn.xid_source is None:
        out.append(t("burn.no_xid_source", reasons=esc("; ".join(a.burn.xid_reasons)) or fmt.DASH))
    if on_cpu(a):  # never a rule shown as held that was not applied
        skipped = dict.fromkeys(r for g in a.gpus for r in g.not_applied)
        out += [t("burn.not_applied_cpu", rules=join([t(f"burn.rule.{r}") for r in skipped])), t("burn.exit_cpu")]
    return out


def _reference(g: GpuBurn) -> str | None:
    """Which healthy figure the GPU's speed was held against, or that its model has none."""
    gemm = next((p for p in g.gpu.phases if p.phase == "gemm"), None)
    if g.on_cpu or gemm is None or g.gpu.device is None:
        return None
    if (ref := g.reference) is None:
        return t("burn.no_reference", gpu=label(g), name=esc(g.gpu.device.name), dtype=gemm.dtype,
                 shape=" x ".join(map(str, gemm.shape)))
    m = next((m for m in g.margins if m.rule == "reference_margin"), None)
    return t("burn.reference", gpu=label(g), sku=esc(ref.sku), dtype=ref.dtype, tflops=fmt.num(ref.tflops),
             limit=_limit("reference_margin", THRESHOLDS["reference_margin"].value), read=fmt.num(g.rate("gemm")),
             delta=f"{'+' if m.value <= 0 else '-'}{fmt.pct(abs(m.value))}" if m else fmt.DASH,
             room=fmt.num(round(m.room, 2)) if m else fmt.DASH)


def rates_note(a: BurnAnalysis) -> str:
    """How the rates were taken; none on a CPU, which shows none."""
    return "" if on_cpu(a) else t("burn.rates_note")


def thresholds(a: BurnAnalysis) -> list[tuple[str, str, str]]:
    return [(t(f"burn.threshold.{k}"), _limit(k, th.value), t(f"burn.anchor.{th.anchor}"))
            for k, th in a.thresholds.items()]


def _margin(m: Margin | None) -> str:
    if m is None:
        return fmt.DASH
    show = fmt.pct if m.threshold in PCT_RULES else fmt.num
    return t("burn.margin_cell", value=show(m.value), limit=show(m.limit), room=fmt.num(m.room))


def margins(a: BurnAnalysis) -> list[tuple[str, tuple[str, ...]]]:
    """Every rule judged on some GPU, in the order judged, a cell per GPU."""
    by_gpu = [{m.rule: m for m in g.margins} for g in a.gpus]
    rules = dict.fromkeys(m.rule for g in a.gpus for m in g.margins)
    return [(t(f"burn.rule.{r}"), tuple(_margin(ms.get(r)) for ms in by_gpu)) for r in rules]


def verdict_text(a: BurnAnalysis) -> str:
    key = f"burn.verdict.{a.verdict}" + ("_cpu" if on_cpu(a) and a.verdict == "pass" else "")
    return t(key, failed=sum(g.status == "fail" for g in a.gpus), gpus=len(a.gpus))


def summary(a: BurnAnalysis) -> str:
    b = a.burn
    params = {"gpus": len(a.gpus), "minutes": fmt.general(b.minutes), "seconds": fmt.seconds(b.duration_s),
              "started": esc(b.started)}
    return t("burn.summary_cpu", **params) if on_cpu(a) else t("burn.summary", **params)


def no_findings(a: BurnAnalysis) -> str:
    return t("burn.no_findings_cpu") if on_cpu(a) else t("burn.no_findings")


def title(report: Report) -> str:
    names = [g.device.name for g in report.burn.gpus if g.device] if report.burn else []
    return t("burn.title", gpu=esc(names[0]) if names else t("no_gpu"), host=esc(report.host),
             date=esc(report.created[:10]))

