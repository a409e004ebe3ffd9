"""The cross-checks as every medium shows them: a ratio table per kind, the findings phrased, the notes; every
number comes from ``analysis.crosscheck``."""

from __future__ import annotations

from envcheck.analysis.crosscheck import CRASHED_NOTE, CrosscheckAnalysis, CrossFinding, CrossRow
from envcheck.render import fmt
from envcheck.render.i18n import esc, has, join, phrase, t

KINDS = ("kernel", "copy", "collective")
COLUMNS = {
    "kernel": ("gpu", "op", "impl", "precision", "shape", "ours", "counterpart", "theirs", "ratio", "bar", "result",
               "settings"),
    "copy": ("pair", "size", "ours", "counterpart", "theirs", "ratio", "bar", "result", "settings"),
    "collective": ("op", "size", "quantity", "ours", "counterpart", "theirs", "ratio", "bar", "result", "settings"),
}


def _value(quantity: str, x: float | None) -> str:
    return fmt.duration_us(x) if quantity.endswith("_us") else fmt.rate(x, "GB/s")


def tool_label(tool: str, mode: str | None) -> str:
    name = t(f"crosscheck.tool.{tool}")
    return name if mode is None else t("crosscheck.tool_mode", tool=name, mode=t(f"crosscheck.mode.{mode}"))


def quantity(r: CrossRow) -> str:
    text = t(f"crosscheck.quantity.{r.quantity}")
    return text + f" ({t(f'crosscheck.buffers.{r.buffers}')})" if r.buffers is not None and \
        r.quantity == "gpu_busbw_gbps" else text


def what(r: CrossRow) -> str:
    """``GPU 0 matmul torch fp16 4096×4096×4096``, ``GPU 0 → GPU 1``, ``all_reduce 64 MiB: busbw per call``."""
    if r.kind == "kernel":
        return t("crosscheck.what.kernel", gpu=r.gpu, op=r.op, impl=r.impl,
                 precision=fmt.precision_label(r.dtype or "", r.precision), shape=fmt.shape(r.shape))
    if r.kind == "copy":
        return t("crosscheck.what.copy", src=r.src, dst=r.dst)
    return t("crosscheck.what.collective", op=r.op, size=fmt.size_bytes(r.size_bytes), quantity=quantity(r))


def _cells(r: CrossRow) -> tuple[str, ...]:
    setting = [f"{esc(t(f'crosscheck.setting.{k}') if has(f'crosscheck.setting.{k}') else k)}={esc(v)}"
               for k, v in r.counterpart.settings]
    result = (t("crosscheck.status.not_compared", reason=t(f"crosscheck.reason.{r.reason}"))
              if r.status == "not_compared" else t(f"crosscheck.status.{r.status}"))
    cells = {"ours": _value(r.quantity, r.ours), "counterpart": tool_label(r.counterpart.tool, r.counterpart.mode),
             "theirs": _value(r.quantity, r.theirs), "ratio": fmt.ratio(r.ratio), "bar": f"±{fmt.pct(100 * r.bar)}",
             "result": result, "settings": ", ".join(setting) or fmt.DASH}
    if r.kind == "kernel":
        cells |= {"gpu": str(r.gpu), "op": esc(r.op), "impl": esc(r.impl or ""), "shape": fmt.shape(r.shape),
                  "precision": fmt.precision_label(r.dtype or "", r.precision)}
    elif r.kind == "copy":
        cells |= {"pair": t("crosscheck.what.copy", src=r.src, dst=r.dst), "size": fmt.size_bytes(r.size_bytes)}
    else:
        cells |= {"op": esc(r.op), "size": fmt.size_bytes(r.size_bytes), "quantity": quantity(r)}
    return tuple(cells[c] for c in COLUMNS[r.kind])


def tables(a: CrosscheckAnalysis) -> list[tuple[str, list[str], list[tuple[str, tuple[str, ...]]]]]:
    """(title, columns, (status, cells) per row) of each kind cross-checked."""
    return [(t(f"crosscheck.table.{kind}"), [t(f"crosscheck.col.{c}") for c in COLUMNS[kind]],
             [(r.status, _cells(r)) for r in a.rows if r.kind == kind]) for kind in KINDS
            if any(r.kind == kind for r in a.rows)]


def finding(f: CrossFinding) -> str:
    r = f.row
    if f.key == "outside_bar" and r is not None:
        return t("crosscheck.finding.outside_bar", what=what(r), ours=_value(r.quantity, r.ours),
                 tool=tool_label(r.counterpart.tool, r.counterpart.mode), theirs=_value(r.quantity, r.theirs),
                 ratio=fmt.ratio(r.ratio), bar=fmt.pct(100 * r.bar))
    if f.key in ("row_failed", "not_finished") and r is not None:
        return t(f"crosscheck.finding.{f.key}", tool=tool_label(f.tool, r.counterpart.mode), what=what(r),
                 detail=esc(f.detail or fmt.DASH))
    where = t("crosscheck.on_gpu", gpu=f.gpu) if f.gpu is not None else ""
    return t("crosscheck.finding.tool_failed", tool=t(f"crosscheck.tool.{f.tool}"), where=where,
             cause=t(f"crosscheck.cause.{f.cause}"), returncode=fmt.DASH if f.returncode is None else str(f.returncode),
             detail=esc((f.detail or fmt.DASH).replace("\n", " | ")))


def summary(a: CrosscheckAnalysis) -> str:
    """The counts; none when nothing was held (the notes say why)."""
    if a.status == "skip":
        return ""
    return t("crosscheck.summary", within=a.counts.get("within", 0), outside=a.counts.get("outside", 0),
             not_compared=a.counts.get("not_compared", 0), findings=len(a.findings))


def notes(a: CrosscheckAnalysis) -> list[str]:
    # A crash of envcheck's own step is a finding already: not said twice.
    return [phrase(n.key, n.params) for n in a.notes if n.key != CRASHED_NOTE]


def method() -> str:
    return t("crosscheck.method", bars=join([t(f"crosscheck.bar.{k}") for k in KINDS]))
