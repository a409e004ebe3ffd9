"""A run report's sentences and compact lists, shared by every medium: what takes more than a lookup of the analysis
(findings with their rows, a case's error, tiles, the method, the environment), machine text escaped per medium."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

from envcheck.analysis import Analysis, BenchAnalysis, CaseResult
from envcheck.analysis import flags as fl
from envcheck.analysis.ceilings import MEASURED, THEORETICAL, Ceiling, Ceilings, MissingCeiling
from envcheck.analysis.findings import Finding
from envcheck.analysis.peaks import Source
from envcheck.analysis.phases import BenchPhases
from envcheck.analysis.summary import Tally
from envcheck.checks import worst_first
from envcheck.checks.keyed import keyed
from envcheck.model import CaseKey, Check, Fact, Gpu, Report, Skip, known, reasons
from envcheck.ops import IMPLS, PRECISIONS
from envcheck.redact import redact_value
from envcheck.render import fmt
from envcheck.render.checktext import localized
from envcheck.render.i18n import case_label, esc, has, join, phrase, t, word
from envcheck.render.node_view import Tile

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
ONLY_WHEN_KNOWN = {("driver", "nvml_error"), ("torch_runtime", "error"), ("triton_runtime", "error")}
WSL_DETAILS = {("wsl", "wsl_version"), ("wsl", "distro_name")}  # noise on a machine that is not WSL
GPU_FACTS: tuple[str, ...] = (
    "name", "architecture", "compute_capability", "memory_total_bytes", "sm_count", "sm_clock_max_mhz",
    "mem_clock_max_mhz", "memory_bus_width_bits", "pcie_gen_max", "pcie_width_max",
    "power_limit_w", "ecc_mode_current", "ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows_pending",
    "mig_mode", "throttled", "pci_bus_id", "uuid", "vbios_version",
    "compute_mode", "temperature_margin_c", "fabric_state",
)
# One letter per flag where words do not fit (every layout using them prints the legend), in the order shown.
FLAG_ABBR = {fl.LAUNCH_BOUND: "L", fl.L2_RESIDENT: "C", fl.THROTTLED: "T", "power_capped": "P", fl.NOISY: "N",
             fl.ABOVE_CEILING: "^"}
FLAG_ORDER = tuple(FLAG_ABBR)
# Findings whose rows carry a flag: the terminal points at the flag instead of listing rows.
FINDING_FLAG = {"finding.throttled": fl.THROTTLED, "finding.power_capped": "power_capped", "finding.noisy": fl.NOISY,
                "finding.above_ceiling": fl.ABOVE_CEILING, "finding.above_ceiling_cached": fl.ABOVE_CEILING,
                "finding.l2_resident": fl.L2_RESIDENT, "finding.launch_bound": fl.LAUNCH_BOUND}
# Findings about one op are shown with that op's table; the others open the report.
OP_FINDINGS = ("finding.launch_bound", "finding.bandwidth_best", "finding.compute_best",
               "finding.compute_best_nopeak", "finding.speedup_large")


class Flag(NamedTuple):
    name: str  # an analysis flag, or ``power_capped`` (throttled by the power cap alone)
    abbr: str
    label: str


@dataclass(frozen=True)
class Said:
    """A finding as a sentence, with the rows it names: (label, anchor) each, and compacted per op."""

    key: str
    level: str
    text: str
    rows: tuple[tuple[str, str], ...]
    groups: tuple[str, ...]
    flag: Flag | None


def anchor(key: CaseKey, prefix: str = "") -> str:
    op, impl, dtype, precision, dims = key
    return f"{prefix}case-{op}-{impl}-{dtype}-{precision}-{'x'.join(str(d) for d in dims)}"


def flag(name: str, r: CaseResult | None = None) -> Flag:
    if name == fl.THROTTLED and r is not None and r.conditions is not None and r.conditions.power_capped_only:
        name = "power_capped"
    return Flag(name, FLAG_ABBR.get(name, "?"), t(f"flag.{name}"))


def flags(r: CaseResult) -> list[Flag]:
    return sorted((flag(f, r) for f in r.flags), key=lambda f: FLAG_ORDER.index(f.name))


def flag_legend(rs: BenchAnalysis | Iterable[CaseResult]) -> list[Flag]:
    """The flags of a bench's (or some) results, each once, in their order."""
    seen = {f.name: f for r in (rs.results if isinstance(rs, BenchAnalysis) else rs) for f in flags(r)}
    return [seen[n] for n in FLAG_ORDER if n in seen]


def row_groups(keys: Sequence[CaseKey]) -> tuple[str, ...]:
    """Rows compacted per op and precision: "matmul fp16 torch, triton: 2048×2048×2048, 4096×4096×4096"."""
    sizes: dict[tuple[str, str], dict[str, list[tuple[int, ...]]]] = {}
    for op, impl, dtype, precision, dims in keys:
        sizes.setdefault((op, fmt.precision_label(dtype, precision)), {}).setdefault(impl, []).append(tuple(dims))
    out = []
    for (op, variant), by_impl in sizes.items():
        same: dict[tuple[tuple[int, ...], ...], list[str]] = {}
        for impl, ds in by_impl.items():
            same.setdefault(tuple(sorted(set(ds), key=fmt.shape_key)), []).append(impl)
        out += [f"{op} {variant} {', '.join(impls)}: {', '.join(fmt.shape(d) for d in ds)}" for ds, impls in same.items()]
    return tuple(out)


def _said(f: Finding, prefix: str, key: str | None = None, params: Mapping[str, object] | None = None, rows: Sequence[CaseKey] | None = None,
          raw: dict[str, str] | None = None) -> Said:
    rows = tuple(f.rows if rows is None else rows)
    name = FINDING_FLAG.get(f.key)
    return Said(f.key, f.level, phrase(key or f.key, f.params if params is None else params, raw),
                tuple((case_label(k), anchor(k, prefix)) for k in rows), row_groups(rows),
                flag(name) if name else None)


def findings(ba: BenchAnalysis, prefix: str = "") -> tuple[list[Said], dict[str, list[Said]]]:
    """Run-wide findings (the stop excepted), and per op the findings about it; an op's launch-bound rows and
    an implementation's large speedups merged into one sentence each."""
    run: list[Said] = []
    per_op: dict[str, list[Said]] = {}
    merged: dict[tuple[str, str, str], list[Finding]] = {}
    for f in ba.findings:
        if f.key in ("finding.launch_bound", "finding.speedup_large"):
            impl = f.params["impl"] if f.key == "finding.speedup_large" else ""
            merged.setdefault((f.key, f.params["op"], impl), []).append(f)
        elif f.key == "finding.bandwidth_best" and f.params.get("measured_pct") is None:
            per_op.setdefault(f.params["op"], []).append(_said(f, prefix, "finding.bandwidth_best_nomeasured"))
        elif f.key in OP_FINDINGS:
            per_op.setdefault(f.params["op"], []).append(_said(f, prefix))
        elif not f.key.startswith("finding.stopped."):
            run.append(_said(f, prefix))
    for (key, op, impl), fs in merged.items():
        parts = join([phrase(f"{key}.part", f.params) for f in fs])
        rows = [k for f in fs for k in f.rows]
        params = {"op": op, "count": len(rows)} if key == "finding.launch_bound" else {"op": op, "impl": impl}
        mine = per_op.setdefault(op, [])
        mine.insert(0 if key == "finding.launch_bound" else len(mine), _said(fs[0], prefix, key, params, rows,
                                                                             {"parts": parts}))
    return run, per_op


def stop(ba: BenchAnalysis) -> str | None:
    for f in ba.findings:
        if f.key.startswith("finding.stopped."):
            text = phrase(f.key, f.params)
            if f.params.get("detail") and f.key != "finding.stopped.legacy":
                text += " " + t("stop.detail", detail=esc(fmt.first_line(f.params["detail"])))
            return text
    return None


def sections(ba: BenchAnalysis) -> list[tuple[str, list[CaseResult]]]:
    """Per op its rows in reading order: by precision as first met, size, then the implementations' order."""
    impl_order = {i: n for n, i in enumerate(IMPLS)}
    out = []
    for op in dict.fromkeys(r.case.op for r in ba.results):
        rs = [r for r in ba.results if r.case.op == op]
        variants = list(dict.fromkeys(fmt.precision_label(r.case.dtype, r.case.precision) for r in rs))
        rs.sort(key=lambda r: (variants.index(fmt.precision_label(r.case.dtype, r.case.precision)),
                               fmt.shape_key(r.case.shape), impl_order.get(r.case.impl, 9)))
        out.append((op, rs))
    return out


def impls(rs: Sequence[CaseResult]) -> list[str]:
    """The implementations among ``rs``: the built-in ones in their order, then a user's."""
    return sorted(dict.fromkeys(r.case.impl for r in rs), key=lambda i: IMPLS.index(i) if i in IMPLS else len(IMPLS))


def has_any(rs: Sequence[CaseResult], attr: str) -> bool:
    """Whether any row has ``attr`` (dotted) set: which columns a table shows."""
    return any(attrgetter(attr)(r) is not None for r in rs)


def case_time(r: CaseResult, which: str) -> str:
    """A case's GPU or launch time; in Triton's interpreter none is a speed, and it says so."""
    if r.interpreted:
        return t("case.interpreted")
    timing = r.case.gpu if which == "gpu" else r.case.launch
    return fmt.duration_us(timing.median_us if timing else None)


def throughput(r: CaseResult) -> str:
    return fmt.DASH if r.interpreted else fmt.num(r.rate)


def failed_outputs(r: CaseResult) -> str:
    """Which outputs of an op with several broke a bound, each with its error over its bound ("" if none)."""
    if r.verdict is None or not r.verdict.failed_outputs:
        return ""
    return t("case.failed_outputs", outputs=join([
        t("case.output_failed", output=esc(name), ratio=fmt.speedup(ratio)) if ratio is not None else esc(name)
        for name, ratio in r.verdict.failed_ratios()]))


def error(r: CaseResult) -> str:
    """err/bound (the analysis's one number, as every medium shows it) and beside it the whole output's error, each
    output's err/bound of an op with several, and the error over the baseline's (information, not the verdict)."""
    v = r.verdict
    if r.case.accuracy is None:
        return f"{fmt.DASH} ({fmt.DASH})"
    beside = [fmt.sci(r.case.accuracy.rel_l2)]
    if v is not None and len(v.output_ratios) > 1:
        beside += [f"{esc(name)} {fmt.ratio_pct(x)}" for name, x in v.output_ratios]
    if v is not None and v.relative is not None:
        beside.append(t("case.relative", ratio=fmt.speedup(v.relative), baseline=esc(r.spec.baseline)))
    return f"{fmt.ratio_pct(v.ratio if v is not None else None)} ({join(beside)})"


def detail(r: CaseResult) -> str:
    """Why a row failed or could not run, and its notes."""
    parts = []
    if r.case.failure is not None:
        parts.append(t("case.failure", stage=phrase(f"stage.{r.case.failure.stage}"),
                       detail=esc(fmt.first_line(r.case.failure.detail))))
    if r.verdict is not None and r.verdict.broken:
        parts.append(t("case.broken", bounds=join([t(f"bound.{b}") for b in r.verdict.broken])))
        if r.verdict.failed_outputs:
            parts.append(failed_outputs(r))
    elif r.status == "fail" and r.verdict is None:
        parts.append(t("case.unchecked"))
    return join(parts + [phrase(n.key, n.params) for n in r.case.notes])


def speedups(ba: BenchAnalysis) -> tuple[tuple[str, ...], list[tuple[str, str, list[Tally | None]]]]:
    """The precisions, and per op and implementation each one's tally (None: not run; the interpreter: no row)."""
    tallies = ba.summary.by_op_impl_precision
    precisions = tuple(x for x in PRECISIONS if any(t.precision == x for t in tallies))
    interpreted = {(r.case.op, r.case.impl) for r in ba.results if r.interpreted}
    rows = []
    for op, impl in dict.fromkeys((x.op, x.impl) for x in tallies):
        mine = {x.precision: x for x in tallies if x.op == op and x.impl == impl}
        if (op, impl) in interpreted and all(x.speedup_geomean is None for x in mine.values()):
            continue
        rows.append((str(op), str(impl), [mine.get(x) for x in precisions]))
    return precisions, rows


def speedup_range(x: Tally) -> str:
    return fmt.DASH if x.speedup_min is None else f"{fmt.speedup(x.speedup_min)}–{fmt.speedup(x.speedup_max)}"


def tiles(ba: BenchAnalysis) -> list[Tile]:
    s = ba.summary.overall
    lines = [t("tile.cases.failed", count=s.failed)] if s.failed else []
    lines += [t("tile.cases.errors", count=s.errors)] if s.errors else []
    out = [Tile(t("tile.cases"), t("tile.cases.value", passed=s.passed, cases=s.cases), tuple(lines),
                "pass" if s.passed == s.cases and s.cases else "fail")]
    for op in dict.fromkeys(r.case.op for r in ba.results):
        value, lines, f = fmt.DASH, [], ba.best.get(op)
        if f is not None and f.key == "finding.bandwidth_best":
            value = f"{fmt.num(f.params['gbps'])} GB/s"
            lines.append(t("tile.best_bw", pct=fmt.pct(f.params.get("theoretical_pct")), impl=esc(f.params["impl"]),
                           size=esc(fmt.shape(f.params["shape"]))))
        elif f is not None and f.params.get("peak_pct") is not None:
            value = f"{fmt.num(f.params['tflops'])} TFLOP/s"
            lines.append(t("tile.best_flops", precision=esc(f.params["precision"]), pct=fmt.pct(f.params.get("peak_pct")),
                           impl=esc(f.params["impl"])))
        elif (top := ba.fastest.get(op)) is not None:  # no ceiling to hold it against: the fastest row as measured
            value = f"{fmt.num(top.rate)} {'TFLOP/s' if top.spec.compute_bound else 'GB/s'}"
            lines.append(t("tile.best", impl=esc(top.case.impl), variant=esc(fmt.precision_label(top.case.dtype,
                           top.case.precision)), size=esc(fmt.shape(top.case.shape))))
        mine = [x for x in ba.summary.by_op_impl_precision if x.op == op and x.speedup_geomean is not None]
        precisions = tuple(dict.fromkeys(str(x.precision) for x in mine))
        cells = tuple((str(impl), tuple(next((fmt.speedup(x.speedup_geomean) for x in mine
                                              if x.impl == impl and x.precision == p), fmt.DASH) for p in precisions))
                      for impl in dict.fromkeys(x.impl for x in mine))
        out.append(Tile(op, value, tuple(lines), op=op, precisions=precisions, speedups=cells))
    return out


def skipped(skips: Sequence[Skip]) -> list[tuple[str, int, tuple[str, ...]]]:
    """(reason, how many, the cases compacted) per reason, the commonest first."""
    by_reason: dict[str, list[CaseKey]] = {}
    for s in skips:
        by_reason.setdefault(phrase(s.reason.key, s.reason.params), []).append(s.key)
    return sorted(((r, len(keys), row_groups(keys)) for r, keys in by_reason.items()), key=lambda g: -g[1])


def ceiling_name(name: str) -> str:
    """``bandwidth`` in the reader's words, a precision (fp32, tf32) as its identifier."""
    return t(f"ceiling.name.{name}") if has(f"ceiling.name.{name}") else name


def source(s: Source | str | None) -> str:
    """Where a ceiling comes from: an analysis ``Source`` phrased, or an older comparison's text as it is."""
    if s is None:
        return fmt.DASH
    if not hasattr(s, "kind"):
        return esc(s)
    text = phrase(f"peak_source.{s.kind}", s.params)
    return text + t("list.sep") + t("peak_source.unverified") if not s.verified else text


def ceilings(c: Ceilings) -> list[tuple[str, str, str, str]]:
    """(name, kind, value, source) of every ceiling, found or missing, theoretical before measured."""
    items: list[Ceiling | MissingCeiling] = [*c.found, *c.missing]
    names = list(dict.fromkeys(x.name for x in items))
    items.sort(key=lambda x: (names.index(x.name), {THEORETICAL: 0, MEASURED: 1}.get(x.kind, 2)))
    return [(ceiling_name(x.name), t(f"ceiling.{x.kind}"), f"{fmt.num(x.value, 4)} {x.unit}", source(x.source))
            if isinstance(x, Ceiling) else
            (ceiling_name(x.name), t(f"ceiling.{x.kind}"), fmt.DASH, t("ceiling.missing", reason=phrase(x.key, x.params)))
            for x in items]


def method_lines(ba: BenchAnalysis) -> list[str]:
    """How the cases were timed, and what of the method applies to this run."""
    bench, st = ba.bench, ba.bench.settings
    out = [t(f"method.{m}", samples=str(lo) if lo == hi else f"{lo}–{hi}") for m, (lo, hi) in ba.samples.items()]
    out.append(t("method.median"))
    if bench.device.backend == "cuda":
        out.append(t("method.cold_l2") if st.cold_l2 else t("method.warm_l2"))
    if any(c.compile_s is not None for c in bench.cases):
        out.append(t("method.first_call"))
    if ba.ceilings.get("bandwidth", MEASURED) is not None:
        out.append(t("method.measured_ceiling"))
    if st.stop_ci is not None:
        out.append(t("method.stop_ci", ci=fmt.ratio_pct(st.stop_ci)))
    return out


def settings(ba: BenchAnalysis) -> list[tuple[str, str]]:
    st = ba.bench.settings
    out = [("warmup_ms", fmt.num(st.warmup_ms)), ("rep_ms", fmt.num(st.rep_ms)),
           ("samples", f"{st.min_samples}–{st.max_samples}"), ("seed", str(st.seed)),
           ("quick", t("yes") if st.quick else t("no"))]
    out.insert(3, ("cold_l2", t("yes") if st.cold_l2 else t("no")) if ba.bench.device.backend == "cuda" else
               ("threads", str(st.threads) if st.threads is not None else t("unknown")))
    out += [("stop_ci", fmt.ratio_pct(st.stop_ci))] if st.stop_ci is not None else []
    out += [("ops", ",".join(st.ops))] if st.ops else []
    out += [("impls", ",".join(st.impls))] if st.impls else []
    return out


def tolerances(ba: BenchAnalysis) -> list[tuple[str, str]]:
    return [(p, fmt.sci(lo) if fmt.sci(lo) == fmt.sci(hi) else f"{fmt.sci(lo)}–{fmt.sci(hi)}")
            for p, lo, hi in ba.tolerance_ranges]


def fact_reason(reason: str | None) -> str:
    """Why a fact is missing: one of envcheck's own reasons in the reader's words, else as recorded."""
    if not reason:
        return t("unknown")
    key = reasons.KEYS.get(reason)
    return t(key) if key else reason


def fact_row(label_key: str, key: str, f: Fact) -> tuple[str, str | None, str | None]:
    """(label, value, or None and why it is missing) of a facts table."""
    if not f.ok:
        return t(label_key), None, fact_reason(f.reason)
    word = f"fact_value.{key}.{f.value}"
    return t(label_key), t(word) if isinstance(f.value, str) and has(word) else fmt.fact_value(key, f.value, t), None


def env_rows(report: Report) -> list[tuple[str, str | None, str | None]]:
    env = report.environment
    is_wsl = env.get("wsl", "is_wsl") is True
    rows = []
    for section, key in ENV_FACTS:
        f = env.sections.get(section, {}).get(key)
        if f is None or ((section, key) in ONLY_WHEN_KNOWN and not f.ok) or ((section, key) in WSL_DETAILS and not is_wsl):
            continue
        rows.append(fact_row(f"fact.{section}.{key}", key, f))
    return rows + [(t("fact.report.created"), report.created, None)]


def env_variables(report: Report) -> list[tuple[str, str]]:
    v = report.environment.get("env", "variables")
    # Probes redact secrets; a report written by another version must not leak one through a document either.
    return [(str(k), redact_value(str(k), str(x))) for k, x in sorted(v.items())] if isinstance(v, dict) else []


def gpu_rows(a: Analysis, g: Gpu) -> list[tuple[str, str | None, str | None]]:
    rows = [fact_row(f"fact.gpu.{k}", k, g.facts[k]) for k in GPU_FACTS if k in g.facts]
    bw = a.theoretical_bandwidths.get(g.index)
    if bw is not None:
        rows.append(fact_row("fact.gpu.theoretical_bandwidth_gbps", "theoretical_bandwidth_gbps", known(bw)))
    return rows


def gpu_label(report: Report) -> str:
    names = [b.device.name for b in report.benches if b.device.backend == "cuda"]
    if len(names) > 1:
        distinct = list(dict.fromkeys(names))
        return f"{len(names)} × {esc(distinct[0])}" if len(distinct) == 1 else esc(" + ".join(distinct))
    if report.gpu_name:
        return esc(report.gpu_name)
    cpu = next((b.device.name for b in report.benches if b.device.backend == "cpu"), None)  # a CPU run names its CPU
    return esc(cpu) if cpu else t("no_gpu")


def title(report: Report) -> str:
    return t("report.title", gpu=gpu_label(report), host=esc(report.host), date=esc(report.created[:10]))


def subtitle(report: Report) -> str:
    return t("report.subtitle", kind=word("kind.", report.kind), created=esc(report.created),
             version=esc(report.tool_version))


def footer(report: Report) -> str:
    return t("report.footer", version=esc(report.tool_version), schema=report.schema_version)


def machine(report: Report) -> str:
    """One line naming the stack: what a reader checks first when numbers surprise."""
    env = report.environment
    parts = [f"{label} {esc(v)}" for label, v in ((t("term.env.driver"), env.get("driver", "driver_version")),
                                                  ("CUDA", env.get("driver", "cuda_driver_version")),
                                                  ("PyTorch", env.get("torch", "version")),
                                                  ("Triton", env.get("triton", "version"))) if v]
    return " · ".join([gpu_label(report), *parts])


def bench_prefix(a: Analysis, position: int) -> str:
    """The prefix of a bench's HTML ids and chart files: none for a lone bench, else ``gpu<i>_`` (``dev<n>_``)."""
    if len(a.benches) <= 1 and a.node is None:
        return ""
    index = a.benches[position].bench.device.index
    return f"gpu{index}_" if index is not None else f"dev{position}_"


def bench_title(ba: BenchAnalysis) -> str:
    index = ba.bench.device.index
    return t("gpu.heading", index=index if index is not None else fmt.DASH, name=esc(ba.bench.device.name))


def checks(report: Report) -> tuple[Check, ...]:
    """The report's checks in the reader's words, worst first."""
    return worst_first(localized(c) for c in keyed(report.checks, report.environment, report.node))


def phase_label(phase: str) -> str:
    return word("phase.", phase)


def phase_explain(p: BenchPhases, node: bool = False) -> str:
    if node:
        return t("phases.node_explain", total=fmt.seconds(p.total_s))
    return t("phases.explain", total=fmt.seconds(p.total_s)) + (t("phases.probe", probe=fmt.seconds(p.probe_s))
                                                                if p.probe_s else "")


def phase_by_op(p: BenchPhases) -> str:
    return t("phases.by_op", ops=join([f"{esc(op)} {fmt.seconds(s)}" for op, s in p.by_op])) if p.by_op else ""


def phase_slowest(p: BenchPhases) -> str:
    cases = [f"{esc(case_label(c.key))} {fmt.seconds(c.seconds)}"
             + (t("phases.span", start=fmt.num(c.span_s[0]), end=fmt.num(c.span_s[1])) if c.span_s is not None else "")
             for c in p.slowest]
    return t("phases.slowest", cases="; ".join(cases)) if cases else ""
