"""The cross-checks as every medium shows them: ratio tables per kind (single-GPU cases, copies, collectives),
each row naming its counterpart and its bar, the findings phrased, the notes. One view for the terminal,
Markdown and HTML (each passes its own ``escape`` for machine text); every number comes from
``analysis.crosscheck``, nothing is derived here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envcheck.analysis.crosscheck import CRASHED_NOTE, CrosscheckAnalysis, CrossFinding, CrossRow
from envcheck.render import fmt
from envcheck.render.i18n import has, join, phrase, translate

Escape = Callable[[str], str]
KINDS = ("kernel", "copy", "collective")
COLUMNS = {
    "kernel": ("gpu", "op", "impl", "precision", "shape", "ours", "counterpart", "theirs", "ratio", "bar", "result",
               "settings"),
    "copy": ("pair", "size", "ours", "counterpart", "theirs", "ratio", "bar", "result", "settings"),
    "collective": ("op", "size", "quantity", "ours", "counterpart", "theirs", "ratio", "bar", "result", "settings"),
}


@dataclass(frozen=True)
class CrossTable:
    kind: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]  # phrased and escaped, in ``columns`` order
    statuses: tuple[str, ...]  # each row's status (analysis.crosscheck.STATUSES), for styling


@dataclass(frozen=True)
class CrosscheckView:
    verdict: str  # pass | fail | skip (nothing cross-checked)
    verdict_text: str
    summary: str
    tables: tuple[CrossTable, ...]
    findings: tuple[str, ...]
    notes: tuple[str, ...]
    method: str


def _value(quantity: str, x: float | None) -> str:
    return fmt.duration_us(x) if quantity.endswith("_us") else fmt.rate(x, "GB/s")


def tool_label(lang: str, tool: str, mode: str | None) -> str:
    name = translate(lang, f"crosscheck.tool.{tool}")
    return name if mode is None else translate(lang, "crosscheck.tool_mode", tool=name,
                                               mode=translate(lang, f"crosscheck.mode.{mode}"))


def what(lang: str, r: CrossRow) -> str:
    """Which row: ``GPU 0 matmul torch fp16 4096×4096×4096``, ``GPU 0 → GPU 1``, ``all_reduce 64 MiB: busbw per call``."""
    if r.kind == "kernel":
        return translate(lang, "crosscheck.what.kernel", gpu=r.gpu, op=r.op, impl=r.impl,
                         precision=fmt.precision_label(r.dtype or "", r.precision), shape=fmt.shape(r.shape))
    if r.kind == "copy":
        return translate(lang, "crosscheck.what.copy", src=r.src, dst=r.dst)
    return translate(lang, "crosscheck.what.collective", op=r.op, size=fmt.size_bytes(r.size_bytes),
                     quantity=quantity(lang, r))


def quantity(lang: str, r: CrossRow) -> str:
    text = translate(lang, f"crosscheck.quantity.{r.quantity}")
    if r.buffers is not None and r.quantity == "gpu_busbw_gbps":
        text += f" ({translate(lang, f'crosscheck.buffers.{r.buffers}')})"
    return text


def setting_name(lang: str, name: str) -> str:
    """A counterpart's setting as the catalogue names it (an environment variable stays as it is spelt)."""
    key = f"crosscheck.setting.{name}"
    return translate(lang, key) if has(lang, key) else name


def result(lang: str, r: CrossRow) -> str:
    if r.status == "not_compared":
        return translate(lang, "crosscheck.status.not_compared", reason=translate(lang, f"crosscheck.reason.{r.reason}"))
    return translate(lang, f"crosscheck.status.{r.status}")


def _cells(lang: str, r: CrossRow, escape: Escape) -> tuple[str, ...]:
    settings = ", ".join(f"{escape(setting_name(lang, k))}={escape(v)}" for k, v in r.counterpart.settings) or fmt.DASH
    common = {"ours": _value(r.quantity, r.ours), "counterpart": tool_label(lang, r.counterpart.tool, r.counterpart.mode),
              "theirs": _value(r.quantity, r.theirs), "ratio": fmt.ratio(r.ratio),
              "bar": f"±{fmt.pct(100 * r.bar)}", "result": result(lang, r), "settings": settings}
    if r.kind == "kernel":
        cells = {"gpu": str(r.gpu), "op": escape(r.op), "impl": escape(r.impl or ""),
                 "precision": fmt.precision_label(r.dtype or "", r.precision), "shape": fmt.shape(r.shape)}
    elif r.kind == "copy":
        cells = {"pair": translate(lang, "crosscheck.what.copy", src=r.src, dst=r.dst),
                 "size": fmt.size_bytes(r.size_bytes)}
    else:
        cells = {"op": escape(r.op), "size": fmt.size_bytes(r.size_bytes), "quantity": quantity(lang, r)}
    cells |= common
    return tuple(cells[c] for c in COLUMNS[r.kind])


def finding_text(lang: str, f: CrossFinding, escape: Escape) -> str:
    r = f.row
    if f.key == "outside_bar" and r is not None:
        return translate(lang, "crosscheck.finding.outside_bar", what=what(lang, r), ours=_value(r.quantity, r.ours),
                         tool=tool_label(lang, r.counterpart.tool, r.counterpart.mode),
                         theirs=_value(r.quantity, r.theirs), ratio=fmt.ratio(r.ratio), bar=fmt.pct(100 * r.bar))
    if f.key == "row_failed" and r is not None:
        return translate(lang, "crosscheck.finding.row_failed", tool=tool_label(lang, f.tool, r.counterpart.mode),
                         what=what(lang, r), detail=escape(f.detail or fmt.DASH))
    if f.key == "not_finished" and r is not None:
        return translate(lang, "crosscheck.finding.not_finished", tool=tool_label(lang, f.tool, r.counterpart.mode),
                         what=what(lang, r))
    where = translate(lang, "crosscheck.on_gpu", gpu=f.gpu) if f.gpu is not None else ""
    return translate(lang, "crosscheck.finding.tool_failed", tool=translate(lang, f"crosscheck.tool.{f.tool}"),
                     where=where, cause=translate(lang, f"crosscheck.cause.{f.cause}"),
                     returncode=fmt.DASH if f.returncode is None else str(f.returncode),
                     detail=escape((f.detail or fmt.DASH).replace("\n", " | ")))


def crosscheck_view(a: CrosscheckAnalysis, lang: str, escape: Escape) -> CrosscheckView:
    t = lambda key, **p: translate(lang, key, **p)  # noqa: E731
    tables = []
    for kind in KINDS:
        rows = [r for r in a.rows if r.kind == kind]
        if rows:
            tables.append(CrossTable(kind, t(f"crosscheck.table.{kind}"),
                                     tuple(t(f"crosscheck.col.{c}") for c in COLUMNS[kind]),
                                     tuple(_cells(lang, r, escape) for r in rows), tuple(r.status for r in rows)))
    counts = a.counts
    summary = t("crosscheck.summary", within=counts.get("within", 0), outside=counts.get("outside", 0),
                not_compared=counts.get("not_compared", 0), findings=len(a.findings))
    # A crash of envcheck's own step is a finding already (analysis.crosscheck): not said twice.
    notes = tuple(phrase(lang, n.key, n.params, escape) for n in a.notes if n.key != CRASHED_NOTE)
    verdict = "fail" if not a.ok else "pass" if a.rows else "skip"  # skip: nothing was held (the notes say why)
    if verdict == "skip":
        summary = ""
    return CrosscheckView(verdict, t(f"crosscheck.verdict.{verdict}"), summary, tuple(tables),
                          tuple(finding_text(lang, f, escape) for f in a.findings), notes,
                          t("crosscheck.method", bars=join(lang, [t(f"crosscheck.bar.{k}") for k in KINDS])))
