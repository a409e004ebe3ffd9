"""The view of a report that the Markdown and HTML templates share.

Everything a document shows is decided here once, from the report alone: which
facts appear and how their values read, the order of the checks, the per-op
tables, the phrased findings. The two formats differ only in markup and escaping:
``escape`` is applied to every machine-supplied string placed inside a catalogue
sentence (Markdown escaping for ``.md``; identity for HTML, whose autoescaping
then covers the whole sentence).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envcheck import summary
from envcheck.checks import worst_first
from envcheck.model import Case, Fact, Report
from envcheck.probes.envvars import REDACTED, is_secret_name
from envcheck.render import findings as fnd
from envcheck.render.i18n import translate
from envcheck.render.jinja import DASH, duration_us, nbytes, num, pct, sci, seconds, speedup

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
)
# Shown only when they hold a value: their absence is the normal case.
ONLY_WHEN_KNOWN = {("driver", "nvml_error"), ("torch_runtime", "error"), ("triton_runtime", "error")}
# WSL details are noise on a machine that is not WSL.
WSL_DETAILS = {("wsl", "wsl_version"), ("wsl", "distro_name")}

GPU_FACTS: tuple[str, ...] = (
    "name", "architecture", "compute_capability", "memory_total_bytes", "sm_count", "sm_clock_max_mhz",
    "mem_clock_max_mhz", "memory_bus_width_bits", "theoretical_bandwidth_gbps", "pcie_gen_max", "pcie_width_max",
    "power_limit_w", "ecc_mode_current", "ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows_pending",
    "mig_mode", "throttled", "pci_bus_id", "uuid", "vbios_version",
)

# A second line of defence: probes redact secrets, but a report written by another
# tool version must not leak one through a rendered document either.
_URL_CREDENTIALS = re.compile(r"(\w[\w+.-]*://)[^/@\s]+@")


def redact(name: str, value: str) -> str:
    if is_secret_name(name):
        return REDACTED
    return _URL_CREDENTIALS.sub(rf"\1{REDACTED}@", value)


@dataclass(frozen=True)
class Row:
    """One label/value line of a facts table; ``reason`` replaces ``value`` when the fact is missing."""

    label: str
    value: str | None
    reason: str | None = None


class View:
    """Formatting and phrasing for one language and one escaping rule."""

    def __init__(self, lang: str, escape: Escape) -> None:
        self.lang = lang
        self.escape = escape

    def t(self, key: str, **params: Any) -> str:
        return translate(self.lang, key, **params)

    # ------------------------------------------------------------------ values

    def value(self, key: str, v: Any) -> str:
        """A fact value, formatted by the unit its key names."""
        if isinstance(v, bool):
            return self.t("yes") if v else self.t("no")
        if isinstance(v, (int, float)):
            if key.endswith("_bytes"):
                return nbytes(v)
            for suffix, unit in (("_mhz", "MHz"), ("_bits", "bit"), ("_gbps", "GB/s"), ("_w", "W"), ("_c", "°C")):
                if key.endswith(suffix):
                    return f"{num(v, 4)} {unit}"
            if key.endswith("_s"):
                return seconds(v)
            return num(v, 4) if isinstance(v, float) else str(v)
        if isinstance(v, (list, tuple)):
            return ", ".join(self.value(key, x) for x in v) if v else self.t("none")
        if isinstance(v, dict):
            return ", ".join(f"{k}={x}" for k, x in v.items())
        return str(v)

    def fact_row(self, label_key: str, key: str, f: Fact) -> Row:
        label = self.t(label_key)
        return Row(label, self.value(key, f.value)) if f.ok else Row(label, None, f.reason or self.t("unknown"))

    def param(self, name: str, v: Any) -> str:
        """A finding parameter, formatted by its name's unit suffix, then escaped."""
        if isinstance(v, (list, tuple)):
            text = ", ".join(str(x) for x in v)
        elif v is None:
            text = DASH
        elif name.endswith("_us"):
            text = duration_us(v)
        elif name.endswith("_pct"):
            text = pct(v)
        elif name.endswith(("_err", "_tol")):
            text = sci(v)
        elif name.endswith("_x"):
            text = speedup(v)
        elif isinstance(v, (int, float)):
            text = num(v)
        else:
            text = str(v)
        return self.escape(text)

    def phrase(self, key: str, params: dict[str, Any]) -> str:
        return self.t(key, **{k: self.param(k, v) for k, v in params.items()})


# --------------------------------------------------------------------------- the context


def _environment_rows(report: Report, view: View) -> list[Row]:
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
        rows.append(view.fact_row(f"fact.{section}.{key}", key, f))
    return rows


def _env_variables(report: Report) -> list[tuple[str, str]]:
    v = report.environment.get("env", "variables")
    if not isinstance(v, dict):
        return []
    return [(str(k), redact(str(k), str(x))) for k, x in sorted(v.items())]


def _gpus(report: Report, view: View) -> list[dict[str, Any]]:
    out = []
    for g in report.environment.gpus:
        rows = [view.fact_row(f"fact.gpu.{k}", k, g.facts[k]) for k in GPU_FACTS if k in g.facts]
        out.append({"index": g.index, "name": g.get("name") or f"GPU {g.index}", "lost": g.lost, "rows": rows})
    return out


def _checks(report: Report) -> list[Any]:
    return list(worst_first(report.checks))


def _pct_of_peak(report: Report, c: Case) -> float | None:
    if c.pct_theoretical is not None:
        return c.pct_theoretical
    if c.tflops and report.bench:
        peak = report.bench.ceiling(c.precision, "theoretical")
        if peak:
            return 100 * c.tflops / peak.value
    return None


def _op_sections(report: Report, view: View) -> list[dict[str, Any]]:
    from envcheck.model import IMPLS

    assert report.bench is not None
    sections = []
    for op in summary.ops(report.bench):
        cases = [c for c in report.bench.cases if c.op == op]
        variants = list(dict.fromkeys(fnd.variant(c) for c in cases))
        impl_order = {i: n for n, i in enumerate(IMPLS)}
        cases.sort(key=lambda c: (variants.index(fnd.variant(c)), fnd.elements(c), impl_order.get(c.impl, 9)))
        matmul = all(len(c.shape) == 3 for c in cases)
        rows = []
        for c in cases:
            rows.append({
                "case": c,
                "size": fnd.size_label(c.shape),
                "variant": fnd.variant(c),
                "gpu_us": c.gpu.median_us if c.gpu else None,
                "gpu_iqr_us": c.gpu.iqr_us if c.gpu else None,
                "launch_us": c.launch.median_us if c.launch else None,
                "throughput": (f"{num(c.tflops)} TFLOP/s" if matmul and c.tflops
                               else f"{num(c.gbps)} GB/s" if c.gbps is not None else DASH),
                "pct_theoretical": _pct_of_peak(report, c),
                "pct_measured": c.pct_measured,
                "error": c.error,
                "flags": [view.t(f"flag.{f}") for f in c.flags],
            })
        sections.append({"op": op, "matmul": matmul, "rows": rows,
                         "has_compile": any(c.compile_s is not None for c in cases),
                         "has_measured": any(c.pct_measured is not None for c in cases)})
    return sections


def _methodology(report: Report, view: View) -> dict[str, Any]:
    bench = report.bench
    assert bench is not None
    methods: dict[str, list[int]] = {}
    for c in bench.cases:
        for tm in (c.gpu, c.launch):
            if tm:
                methods.setdefault(tm.method, []).append(tm.n)
    timing = [{"method": m, "text": view.t(f"method.{m}") if f"method.{m}" in _catalog_keys(view.lang) else m,
               "samples": min(ns) if min(ns) == max(ns) else f"{min(ns)}–{max(ns)}"} for m, ns in methods.items()]
    # Per precision, the range of tolerances: they grow with the accumulation length (sqrt K),
    # so one number per precision (say vector_add's) would misstate matmul's.
    tolerances: dict[str, tuple[float, float]] = {}
    for c in bench.cases:
        if c.error:
            lo, hi = tolerances.get(c.error.precision, (c.error.tolerance, c.error.tolerance))
            tolerances[c.error.precision] = (min(lo, c.error.tolerance), max(hi, c.error.tolerance))
    copy = bench.ceiling("bandwidth", "measured")
    return {
        "timing": timing,
        "settings": [(k, view.value(k, v)) for k, v in bench.settings.items()],
        "ceilings": bench.ceilings,
        "tolerances": [(p, lo, hi, f"≤ {sci(hi)}" if sci(lo) == sci(hi) else f"{sci(lo)}–{sci(hi)}")
                       for p, (lo, hi) in sorted(tolerances.items(), key=lambda kv: kv[1])],
        "first_call": any(c.compile_s is not None for c in bench.cases),
        "copy_ceiling": copy is not None,
        "versions": sorted(bench.versions.items()),
    }


def _catalog_keys(lang: str) -> set[str]:
    from envcheck.render.i18n import catalog

    return set(catalog(lang))


def build(report: Report, lang: str, escape: Escape) -> dict[str, Any]:
    """Every variable the report templates use."""
    view = View(lang, escape)
    bench = report.bench
    ctx: dict[str, Any] = {
        "lang": lang,
        "report": report,
        "date": report.created[:10],
        "gpu_name": report.gpu_name or view.t("no_gpu"),
        "env_rows": _environment_rows(report, view),
        "env_variables": _env_variables(report),
        "gpus": _gpus(report, view),
        "checks": _checks(report),
        "verdict": report.verdict if report.checks else None,
        "bench": bench,
        "findings": [],
        "recommendations": [],
    }
    if bench is not None:
        found = fnd.findings(bench)
        ctx["findings"] = [{"level": f.level, "text": view.phrase(f.key, dict(f.params))} for f in found]
        ctx["recommendations"] = [view.phrase(r.key, dict(r.params)) for r in fnd.recommendations(found)]
        ctx["overall"] = summary.overall(bench)
        ctx["tallies"] = summary.by_op(bench)
        ctx["speedups"] = summary.by_op_impl(bench)
        ctx["op_sections"] = _op_sections(report, view)
        ctx["methodology"] = _methodology(report, view)
        ctx["skipped"] = [{"skip": s, "size": fnd.size_label(s.shape)} for s in bench.skipped]
    return ctx
