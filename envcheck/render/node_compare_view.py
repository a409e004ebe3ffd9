"""What a diff shows of the node tests (``compare.node_diff.NodeComparison``) and of fleet nodes
without a partner, phrased once for the terminal, Markdown and HTML. Derives nothing: every ratio,
interval, verdict and change is the comparison's, every bandwidth the analysis'."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from envcheck.compare.match import Unmatched
from envcheck.compare.node_diff import Change, CollectiveDiff, CopyDiff, CounterDiff, NodeComparison
from envcheck.render import fmt
from envcheck.render.i18n import catalog, phrase, translate

Escape = Callable[[str], str]


@dataclass(frozen=True)
class NodeRow:
    """A collective at one size, or a copy: both sides' bandwidth, the change, and the verdict."""

    name: str
    base: str  # GB/s
    other: str
    change: str  # bandwidth change, "+3.1%"
    ratio: str  # time ratio
    interval: str
    detail: str  # NCCL algorithm(s) of a collective; % of what the link allows of a copy
    verdict: str
    verdict_text: str
    why: str  # why not compared, phrased


@dataclass(frozen=True)
class CounterLine:
    name: str
    base: str
    other: str
    base_boot: str
    other_boot: str
    over_limit: bool


@dataclass(frozen=True)
class ChangeLine:
    what: str
    before: str
    after: str


@dataclass(frozen=True)
class NodeCompareView:
    collectives: tuple[NodeRow, ...]
    significant: tuple[NodeRow, ...]
    peer: tuple[NodeRow, ...]
    host: tuple[NodeRow, ...]
    counters: tuple[CounterLine, ...]  # counters that are not zero on both sides
    counters_zero: int  # how many counters were zero on both sides
    changes: tuple[ChangeLine, ...]
    only_base: tuple[str, ...]
    only_other: tuple[str, ...]
    only_base_title: str
    only_other_title: str
    method: str


def node_row_name(r: CollectiveDiff | CopyDiff) -> str:
    """One node row's name: ``all_reduce 1 GiB`` (``world all_reduce 1 GiB`` across a fleet), or
    ``d2d copy_engine GPU0->GPU1`` (``<->`` both directions at once)."""
    if isinstance(r, CollectiveDiff):
        scope = "" if r.scope == "node" else f"{r.scope} "
        return f"{scope}{r.op} {fmt.size_bytes(r.size_bytes)}"
    arrow = "<->" if r.directions == 2 else "->"
    src = "host" if r.src is None else f"GPU{r.src}"
    dst = "host" if r.dst is None else f"GPU{r.dst}"
    return f"{r.kind} {r.method} {src}{arrow}{dst}"


def _change_pct(x: float | None) -> str:
    return fmt.DASH if x is None else f"{x:+.1f}%"


def _why(r: CollectiveDiff | CopyDiff, lang: str, escape: Escape) -> str:
    return "; ".join(phrase(lang, n.key, n.params, escape) for n in r.change.reasons)


def _verdict(lang: str, verdict: str) -> str:
    key = f"diff.verdict.{verdict}"
    return translate(lang, key) if key in catalog(lang) else verdict


def _collective(r: CollectiveDiff, lang: str, escape: Escape) -> NodeRow:
    algo = r.base_algo if r.base_algo == r.other_algo else f"{r.base_algo or fmt.DASH} → {r.other_algo or fmt.DASH}"
    c = r.change
    return NodeRow(escape(node_row_name(r)), fmt.num(r.base_busbw), fmt.num(r.other_busbw),
                   _change_pct(r.busbw_change_pct), fmt.ratio(c.ratio), fmt.interval(c.low, c.high),
                   escape(algo or fmt.DASH), c.verdict, _verdict(lang, c.verdict), _why(r, lang, escape))


def _copy(r: CopyDiff, lang: str, escape: Escape) -> NodeRow:
    c = r.change
    share = f"{fmt.pct(r.base_pct_expected)} → {fmt.pct(r.other_pct_expected)}"
    return NodeRow(escape(node_row_name(r)), fmt.num(r.base_gbps), fmt.num(r.other_gbps),
                   _change_pct(r.gbps_change_pct), fmt.ratio(c.ratio), fmt.interval(c.low, c.high), share,
                   c.verdict, _verdict(lang, c.verdict), _why(r, lang, escape))


def _rate(x: float | None) -> str:
    return fmt.DASH if x is None else fmt.num(x)


def _counter(c: CounterDiff, escape: Escape) -> CounterLine:
    return CounterLine(escape(f"GPU{c.gpu} {c.name}"), _rate(c.base_per_s), _rate(c.other_per_s),
                       _rate(c.base_boot_per_s), _rate(c.other_boot_per_s), c.base_over_limit or c.other_over_limit)


def _subject(c: Change) -> str:
    if c.what == "algorithm":
        return f"{c.op} {fmt.size_bytes(c.size_bytes)}" + ("" if c.scope == "node" else f" ({c.scope})")
    if c.what == "path":
        return "-".join(map(str, c.gpus))
    if c.what == "nvlinks":
        return str(c.gpus[0]) if c.gpus else fmt.DASH
    return c.scope or fmt.DASH


def node_compare_view(n: NodeComparison, lang: str, escape: Escape) -> NodeCompareView:
    collectives = tuple(_collective(r, lang, escape) for r in n.collectives)
    copies = [(r, _copy(r, lang, escape)) for r in n.copies]
    sig = sorted((r for r in [*n.collectives, *n.copies] if r.change.verdict in ("slower", "faster")),
                 key=lambda r: -(r.change.ratio or 0))
    return NodeCompareView(
        collectives=collectives,
        significant=tuple(_collective(r, lang, escape) if isinstance(r, CollectiveDiff) else _copy(r, lang, escape)
                          for r in sig),
        peer=tuple(v for r, v in copies if not r.host_link), host=tuple(v for r, v in copies if r.host_link),
        counters=tuple(_counter(c, escape) for c in n.counters if c.nonzero),
        counters_zero=sum(not c.nonzero for c in n.counters),
        changes=tuple(ChangeLine(translate(lang, f"diff.node.change.{c.what}",
                                           subject=escape(_subject(c))),
                                 escape(c.before or fmt.DASH), escape(c.after or fmt.DASH)) for c in n.changes),
        only_base=tuple(escape(x) for x in n.only_base), only_other=tuple(escape(x) for x in n.only_other),
        only_base_title=translate(lang, "diff.node.only_base", count=len(n.only_base)),
        only_other_title=translate(lang, "diff.node.only_other", count=len(n.only_other)),
        method=translate(lang, "diff.node.method") + _floors_line(n, lang, escape),
    )


def control_pairs(pairs: Sequence[tuple[str, str]], lang: str, escape: Escape) -> str:
    """Committed control pairs as "baseline / other", listed in the language's way."""
    return translate(lang, "list.sep").join(f"{escape(a)} / {escape(b)}" for a, b in pairs)


def _floors_line(n: NodeComparison, lang: str, escape: Escape) -> str:
    """Where the shipped node floors came from (a sentence after the method's), or nothing."""
    if n.shipped_model is None:
        return ""
    return translate(lang, "diff.node.floors", model=escape(n.shipped_model),
                     pairs=control_pairs(n.shipped_pairs, lang, escape) or fmt.DASH)


def unmatched_lines(items: Sequence[Unmatched], lang: str, escape: Escape) -> tuple[str, ...]:
    """Each node without a partner: who it is and why it was not compared."""
    out = []
    for u in items:
        gpus = ", ".join(g[:12] for g in u.uuids) or fmt.DASH
        why = phrase(lang, u.reason, {"side": "other" if u.side == "baseline" else "baseline"}, escape)
        out.append(translate(lang, "diff.unmatched.row", label=escape(u.label), host=escape(u.host),
                             gpus=escape(gpus), side=translate(lang, f"diff.side.{u.side}"), why=why))
    return tuple(out)
