"""A node run and a fleet for every medium: ``Section`` > ``Part`` > ``Table`` of ``Cell``s and ``Line``s, laid out
by one macro per medium. Cells stay short and sentences go to lines: no terminal cell wraps at 100 columns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from envcheck.analysis import Analysis
from envcheck.analysis import node as an
from envcheck.analysis.collectives import UNSTEADY_RATIO
from envcheck.analysis.counters import NVLINK_CRC_PER_S_LIMIT, PCIE_REPLAY_PER_MIN_LIMIT
from envcheck.analysis.links import NVLINK, SMI_LEVEL_NAMES, topo_label
from envcheck.model.node import COPY_METHODS, CollectiveResult, GpuLinks
from envcheck.render import fmt
from envcheck.render.i18n import esc, has, join, phrase, t, word


@dataclass(frozen=True)
class Cell:
    """Text, a muted second line, a status (pass/warn/fail: coloured; muted: not applicable); badge: a status word."""

    text: str
    sub: str = ""
    status: str = ""
    badge: bool = False


@dataclass(frozen=True)
class Line:
    text: str
    level: str = "info"  # info | warn | fail | pass


@dataclass(frozen=True)
class Table:
    """``layout``: ``stack`` (label/value blocks on a phone), ``matrix`` (a GPU x GPU grid that scrolls in its frame)
    or ``facts`` (label and value: a list in the terminal); ``charts``: the (section, op) of the charts after it."""

    key: str
    cols: tuple[str, ...]
    right: tuple[bool, ...]
    rows: tuple[tuple[Cell, ...], ...]
    title: str = ""
    layout: str = "stack"
    notes: tuple[Line, ...] = ()
    charts: tuple[str, str] | None = None
    # A narrow terminal drops these columns and, unless ``subs`` is ``always``, the cells' second lines.
    detail: tuple[int, ...] = ()
    subs: str = "wide"


@dataclass(frozen=True)
class Part:
    id: str
    title: str
    lines: tuple[Line, ...] = ()
    tables: tuple[Table, ...] = ()


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    lines: tuple[Line, ...] = ()
    parts: tuple[Part, ...] = ()
    status: str | None = None  # pass | fail | incomplete: shown as a badge beside the title


@dataclass(frozen=True)
class Tile:
    """A summary card at the head of a document: a label, a value, and what backs it."""

    label: str
    value: str
    lines: tuple[str, ...] = ()
    status: str | None = None  # fail: the value is bad news
    op: str | None = None  # the section the tile sums up
    precisions: tuple[str, ...] = ()  # the columns of ``speedups``
    speedups: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (impl, speedup per precision) per non-torch impl


DASH = Cell(fmt.DASH, status="muted")
SELF = Cell("X", status="muted")  # a GPU against itself in a GPU x GPU grid


def cause(text: str | None) -> str:
    """A reason or an error the model stores: a key of the node vocabulary phrased, ``crashed: ...`` with its
    detail, anything else (an exception's last line, NVML's text) as it is."""
    if text is None:
        return fmt.DASH
    key, detail = an.skip_reason(text)
    if detail is not None:
        return t("node.reason.crashed", detail=esc(fmt.first_line(detail)))
    return t(f"node.reason.{key}") if has(f"node.reason.{key}") else esc(fmt.first_line(text))


def heads(*keys: str) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """A table's (columns, set right) from catalogue keys, ``>`` before a key setting its column right."""
    return tuple(t(k.lstrip(">")) for k in keys), tuple(k.startswith(">") for k in keys)


def _flagged(text: str, flag: str, on: bool) -> Cell:
    return Cell(text, *((t(f"flag.{flag}"), "warn") if on else ()))


def gpu_label(i: int | None) -> str:
    return fmt.DASH if i is None else f"GPU{i}"


def _condition_rows(c: an.GpuCondition) -> tuple[tuple[Cell, ...], ...]:
    def both(cur: float | None, top: float | None, unit: str) -> str:
        return fmt.DASH if cur is None and top is None else f"{fmt.num(cur, 4)} / {fmt.num(top, 4)} {unit}"

    link = fmt.DASH
    if c.pcie_gen is not None or c.pcie_width is not None:
        link = t("node.cond.pcie_value", gen=fmt.num(c.pcie_gen), width=fmt.num(c.pcie_width),
                   gen_max=fmt.num(c.pcie_gen_max), width_max=fmt.num(c.pcie_width_max))
    throttle = c.throttle_reasons
    throttle_text = (esc(", ".join(str(x) for x in throttle)) if isinstance(throttle, (list, tuple)) and throttle
                     else t("none") if isinstance(throttle, (list, tuple)) else fmt.DASH)
    errors = c.nvlink_errors
    errors_text = (join([f"{word('node.counter.', k)} {v}" for k, v in errors.items()]) if isinstance(errors, dict)
                   and errors else fmt.DASH)
    rows = [("node.cond.sm_clock", both(c.sm_clock_mhz, c.sm_clock_max_mhz, "MHz")),
            ("node.cond.temperature", fmt.rate(c.temperature_c, "°C")), ("node.cond.power_limit", fmt.rate(c.power_limit_w, "W")),
            ("node.cond.pcie", link), ("node.cond.throttle", throttle_text), ("node.cond.pcie_replay", fmt.num(c.pcie_replay)),
            ("node.cond.nvlink_errors", errors_text)]
    return tuple((Cell(t(k)), Cell(v)) for k, v in rows)


def gpus_part(na: an.NodeAnalysis, pid: str = "gpus") -> Part | None:
    if not na.gpus:
        return None
    rows = []
    for g in na.gpus:
        flag = Cell(join([t(f"node.outlier.short.{o.metric}", shortfall=fmt.ratio_pct(o.shortfall))
                          for o in g.outliers]), status="fail") if g.outliers else DASH
        tally = Cell(f"{g.passed}/{g.cases}", status="pass" if g.cases and g.passed == g.cases else
                     "fail" if g.failed or g.errors else "")
        if g.backend == "cuda":
            bandwidth, matmul = fmt.num(g.rates.bandwidth_gbps), fmt.num(g.rates.matmul_tflops)
        else:  # the CPU's own: no bandwidth ceiling measured, a host-clock matmul in GFLOP/s
            bandwidth = t("node.cpu.not_measured")
            matmul = (fmt.rate(g.rates.matmul_tflops * 1e3, "GFLOP/s") if g.rates.matmul_tflops is not None
                      else t("node.cpu.not_measured"))
        rows.append((Cell(gpu_label(g.index) if g.backend == "cuda" else t("node.cpu")), Cell(esc(g.name)),
                     Cell(bandwidth), Cell(matmul, esc(g.rates.matmul_key or "")), tally,
                     Cell(str(g.failed), status="fail" if g.failed else ""),
                     Cell(str(g.errors), status="fail" if g.errors else ""), flag))
    cpu = all(g.backend != "cuda" for g in na.gpus)
    suffix = "_cpu" if cpu else ""
    tables = [Table("gpus", *heads("node.col.gpu", "node.col.name", f">node.col.bandwidth{suffix}", f">node.col.matmul{suffix}",
                                   ">node.col.passed", ">col.failed", ">col.errors", "node.col.outlier"), tuple(rows),
                    detail=(1,))]
    lines = [Line(t("node.gpus.explain_cpu") if cpu else t("node.gpus.explain", margin=fmt.ratio_pct(na.margin)))]
    for g in na.gpus:
        lines += [Line(t(f"node.outlier.{o.metric}", gpu=fmt.num(o.gpu), value=fmt.num(o.value),
                         unit="GB/s" if o.metric == "bandwidth_gbps" else "TFLOP/s", median=fmt.num(o.siblings_median),
                         shortfall=fmt.ratio_pct(o.shortfall)), "fail") for o in g.outliers]
        if g.outliers and g.condition is not None:
            tables.append(Table(f"condition-{g.index}", *heads("col.item", "col.value"), _condition_rows(g.condition),
                                t("node.cond.title", gpu=fmt.num(g.index)), "facts"))
    return Part(pid, t("node.part.gpus"), tuple(lines), tuple(tables))


def _pcie(g: GpuLinks) -> str:
    gen, width, gmax, wmax = (f.value if f.ok else None for f in (g.pcie_gen, g.pcie_width, g.pcie_gen_max,
                                                                   g.pcie_width_max))
    if gen is None and gmax is None:
        return fmt.DASH
    return t("node.pcie_link", gen=fmt.num(gen if gen is not None else gmax),
               width=fmt.num(width if width is not None else wmax))


def _nvlinks(g: GpuLinks, nv: an.GpuNvlinks | None) -> Cell:
    if not g.nvlinks or nv is None:
        return DASH
    sub = t("node.per_link", gbps=fmt.num(nv.per_link_gbps)) if nv.per_link_gbps is not None else ""
    return Cell(f"{nv.active}/{fmt.num(nv.total)}", sub, "" if nv.active == nv.total else "warn")


def _path_cell(path: an.PairPath | None) -> Cell:
    if path is None:
        return DASH
    return Cell(topo_label(path), f"{fmt.num(path.expected_gbps)} GB/s" if path.expected_gbps is not None else "")


def _reference_line(x: an.PairPath) -> Line:
    """A pair's per-link rate: its NVLink generation's datasheet, else NVML's signalling rate (understating)."""
    if x.reference == "datasheet" and x.generation is not None:
        spec = NVLINK[x.generation]
        return Line(t("node.reference.datasheet", gen=fmt.num(x.generation), gbps=fmt.num(x.link_gbps),
                        doc=esc(spec.doc.title), signalling=fmt.num(x.signalling_gbps)))
    return Line(t("node.reference.nvml_signalling", signalling=fmt.num(x.signalling_gbps)), "warn")


def topology_part(na: an.NodeAnalysis, pid: str = "topology") -> Part | None:
    node = na.node
    topo = node.topology if node is not None else None
    if topo is None:
        return None
    lines = []
    if topo.reason:
        lines.append(Line(t("node.topology.nvml_failed", reason=cause(topo.reason)), "fail"))
    gpus = sorted(topo.gpus, key=lambda g: g.index)
    tables = []
    if gpus:
        rows = []
        for g in gpus:
            cells = [SELF if h.index == g.index else _path_cell(na.path(g.index, h.index)) for h in gpus]
            if g.lost:
                cells = [Cell(t("node.gpu_lost"), status="fail")] + [DASH] * (len(gpus) - 1)
                lines.append(Line(t("node.topology.lost", gpu=fmt.num(g.index), reason=cause(g.lost)), "fail"))
            numa = g.numa_node.value if g.numa_node.ok else None
            rows.append((Cell(gpu_label(g.index)), *cells, Cell(_pcie(g)), Cell(fmt.num(numa)) if numa is not None
                         else DASH, _nvlinks(g, na.gpu_nvlinks(g.index))))
        cols = ("", *(gpu_label(g.index) for g in gpus), t("node.col.pcie"), t("node.col.numa"), t("node.col.nvlinks"))
        tables.append(Table("topology", cols, (False,) * (len(gpus) + 2) + (True, True), tuple(rows),
                            layout="matrix", notes=(Line(t("node.topology.legend")),)))
    if na.paths:
        rows = [(Cell(f"GPU{x.a} ↔ GPU{x.b}"), Cell(word("node.via.", x.via)), Cell(str(x.nvlinks) if x.nvlinks else
                 fmt.DASH), Cell(fmt.num(x.link_gbps)), Cell(fmt.num(x.signalling_gbps)), Cell(fmt.num(x.expected_gbps)),
                 Cell(SMI_LEVEL_NAMES.get(x.pcie_level or "", fmt.DASH))) for x in na.paths]
        sources = dict.fromkeys(x.source for x in na.paths)
        notes = tuple(Line(t("node.topology.source", via=word("node.via.", next(x.via for x in na.paths
                                                                                      if x.source == s)),
                               source=word("node.source.", s))) for s in sources)
        notes += tuple(_reference_line(x) for x in dict((x.reference, x) for x in na.paths if x.reference).values())
        tables.append(Table("pairs", *heads("node.col.pair", "node.col.path", ">node.col.nvlinks", ">node.col.link_gbps",
                                            ">node.col.signalling_gbps", ">node.col.expected", "node.col.pcie_level"),
                            tuple(rows), t("node.pairs.title"), notes=notes))
    lines += [Line(t("node.topology.disagree", a=fmt.num(a), b=fmt.num(b), nvml=esc(ours), smi=esc(smi)), "warn")
              for a, b, ours, smi in na.disagreements]
    if topo.smi_cells and not na.disagreements:
        lines.append(Line(t("node.topology.smi_agrees")))
    elif topo.smi_reason:
        lines.append(Line(t("node.topology.smi_failed", reason=cause(topo.smi_reason)), "warn"))
    return Part(pid, t("node.part.topology"), tuple(lines), tuple(tables))


def _copy_cell(r: an.CopyRow | None) -> Cell:
    if r is None:
        return DASH
    if r.error:
        short = r.error if r.error in an.RUN_ERRORS else "failed"
        return Cell(t(f"node.copy.cell.{short}"), status="muted" if r.error == "no_peer_access" else "fail")
    if r.wrong:
        return Cell(fmt.num(r.gbps), t("node.copy.wrong_cell", count=r.wrong), "fail")
    return Cell(fmt.num(r.gbps), fmt.pct(r.pct_expected) if r.pct_expected is not None else "")


def copies_part(na: an.NodeAnalysis, pid: str = "copies") -> Part | None:
    node = na.node
    peer = node.peer if node is not None else None
    if peer is None:
        return None
    lines = []
    if peer.error:
        lines.append(Line(t("node.copies.failed", reason=cause(peer.error)), "fail"))
    st = peer.settings
    if st.get("size_bytes"):
        lines.append(Line(t("node.copies.method", size=fmt.size_bytes(int(st["size_bytes"])),
                              iters=fmt.num(st.get("iters")), warmup=fmt.num(st.get("warmup")))))
    tables = []
    gpus = sorted({g for r in na.copies for g in (r.src, r.dst) if g is not None} | set(node.gpus))
    d2d = [r for r in na.copies if r.kind == "d2d"]
    for method in COPY_METHODS:
        for directions in (1, 2):
            mine = {(r.src, r.dst): r for r in d2d if r.method == method and r.directions == directions}
            if not mine:
                continue
            rows = [(Cell(gpu_label(a)), *(SELF if a == b else _copy_cell(mine.get((a, b))) for b in gpus))
                    for a in gpus]
            title = t(f"node.copies.d2d.{directions}", method=word("node.method.", method))
            tables.append(Table(f"d2d-{method}-{directions}", (t("node.col.src_dst"), *(gpu_label(g) for g in gpus)),
                                (False,) + (True,) * len(gpus), tuple(rows), title, "matrix", subs="always"))
    host = [r for r in na.copies if r.kind in ("h2d", "d2h")]
    if host:
        rows = []
        for g in gpus:
            h2d = next((r for r in host if r.kind == "h2d" and r.dst == g and r.directions == 1), None)
            d2h = next((r for r in host if r.kind == "d2h" and r.src == g and r.directions == 1), None)
            if h2d is None and d2h is None:
                continue
            rows.append((Cell(gpu_label(g)), _copy_cell(h2d), _copy_cell(d2h),
                         Cell(fmt.num((h2d or d2h).expected_gbps))))  # type: ignore[union-attr]
        tables.append(Table("host", *heads("node.col.gpu", ">node.copies.col.h2d", ">node.copies.col.d2h",
                                           ">node.col.expected"), tuple(rows), t("node.copies.host"), subs="always"))
    if tables:
        lines.append(Line(t("node.copies.cells")))
    lines += [Line(t("node.copies.no_access", a=fmt.num(a.a), b=fmt.num(a.b))) for a in peer.access if not a.allowed]
    lines += [Line(t("node.copies.copy_failed", what=t(f"node.copy.name.{r.kind}", src=fmt.num(r.src),
                                                        dst=fmt.num(r.dst), method=word("node.method.", r.method)), reason=cause(r.error)), "fail")
              for r in na.copies if r.error and r.error != "no_peer_access"]
    return Part(pid, t("node.part.copies"), tuple(lines), tuple(tables))


# The badge of a collective's status (an.COLLECTIVE_STATUSES), in the sweep tables and the narrowing table alike.
COLLECTIVE_STYLE = {"ok": "pass", "wrong": "fail", "error": "fail", "unverified": "warn"}


def _status_cell(status: str, result: CollectiveResult | None = None) -> Cell:
    if status == "skipped" and result is not None:
        return Cell(word("node.size_skip.", result.skipped), status="warn", badge=True)
    return Cell(t(f"node.coll.status.{status}"), status=COLLECTIVE_STYLE.get(status, ""), badge=True)


def sweep_part(sa: an.SweepAnalysis, section: str, pid: str) -> Part:
    c = sa.collectives
    lines = []
    hosts = list(dict.fromkeys(c.hosts))
    if c.error:
        lines.append(Line(t("node.coll.failed", reason=cause(c.error)), "fail"))
    lines += [Line(t(f"node.coll.rank.{o.status}", rank=fmt.num(o.rank), host=esc(o.host or "?"),
                     error=esc(fmt.first_line(o.error or ""))), "fail") for o in c.ranks if o.status != "ok"]
    if sa.expectation_gbps is not None:
        lines.append(Line(t("node.coll.expectation", gbps=fmt.num(sa.expectation_gbps))))
    elif c.scope == "world":
        lines.append(Line(t("node.coll.no_expectation")))
    st = c.settings
    if st.get("iters"):
        lines.append(Line(t("node.coll.method", iters=fmt.num(st.get("iters")), warmup=fmt.num(st.get("warmup")))))
    gpu_times = any(r.time_basis == "gpu" for r in sa.rows)  # a per-call column beside the GPU time
    registered = any(r.registered_busbw_gbps is not None for r in sa.rows)  # a column for registered buffers
    lines += _times_lines(sa, gpu_times)
    lines += _registered_lines(sa, registered)
    if c.backend != "nccl" or not c.choices:
        why = "backend_not_nccl" if c.backend != "nccl" else (c.choices_reason or "no_nccl_log")
        lines.append(Line(t("node.coll.no_algo", reason=cause(why))))
    tables = []
    links = any(x is not None for x in (*sa.pct_links, *sa.narrowing_pct))  # a share of the links is known
    for op in sa.ops:
        rows, notes = [], []
        for row, pct, res in zip(sa.rows, sa.pct_links, c.results, strict=True):
            if row.op != op:
                continue
            wrong = (Cell(str(row.wrong), status="fail" if row.wrong else "") if row.wrong is not None else DASH)
            share = ((Cell(fmt.pct(pct)) if pct is not None else DASH),) if links else ()
            # A time marked where its replays ran at two paces; a per-call one where it is launch-bound (the host's).
            per_call = (DASH if row.call_time_us is None else _flagged(fmt.duration_us(row.call_time_us), "launch_bound",
                                                                       row.launch_bound),) if gpu_times else ()
            rows.append((Cell(fmt.size_bytes(row.size_bytes)),
                         _flagged(fmt.duration_us(row.time_us), "two_paces", row.unsteady), *per_call,
                         Cell(fmt.num(row.algbw_gbps)), Cell(fmt.num(row.busbw_gbps)),
                         *((Cell(fmt.num(row.registered_busbw_gbps)),) if registered else ()), *share,
                         Cell(esc(row.algo_label)) if row.algo_label else DASH, wrong, _status_cell(row.status, res)))
            if row.status == "skipped" and res is not None:
                size = fmt.size_bytes(row.size_bytes)
                notes.append(Line(t("node.coll.oom", size=size, need=fmt.nbytes(res.need_bytes),
                                    free=fmt.nbytes(res.free_bytes)), "info") if res.skipped == "out_of_memory"
                             else Line(t("node.coll.skipped", size=size, reason=cause(res.skipped)), "warn"))
            elif row.status in ("error", "unverified") and res is not None:
                detail = res.error or (t("node.coll.absent", ranks=", ".join(map(str, res.absent_ranks)))
                                       if res.absent_ranks else "")
                notes.append(Line(t(f"node.coll.note.{row.status}", size=fmt.size_bytes(row.size_bytes),
                                      detail=cause(detail) if detail else fmt.DASH), "fail"))
        notes += [Line(t("node.coll.algo_change", size=fmt.size_bytes(size), before=esc(before or ""),
                         after=esc(after or ""))) for op_, size, before, after in sa.changes if op_ == op]
        notes += [Line(t("node.coll.algo_unknown", reason=cause(why))) for why in dict.fromkeys(
            r.algo_reason for r in sa.rows if r.op == op and not r.algos and r.algo_reason and c.backend == "nccl"
            and c.choices)]
        cols = heads(">node.col.size", ">node.col.gpu_time" if gpu_times else ">node.col.time",
                     *([">node.col.per_call"] if gpu_times else []), ">node.col.algbw", ">node.col.busbw",
                     *([">node.col.busbw_registered"] if registered else []), *([">node.col.pct_links"] if links else []),
                     "node.col.algo", ">node.col.wrong", "col.status")
        tables.append(Table(f"coll-{op}", *cols, tuple(rows), esc(op), notes=tuple(notes), charts=(section, op)))
    if sa.narrowing:
        narrow_lines, table = narrowing(sa, links)
        lines += narrow_lines
        tables.append(table)
    backend = (f"NCCL {c.nccl_version}" if c.nccl_version else "NCCL") if c.backend == "nccl" else c.backend
    title = t(f"node.coll.title.{c.scope}" if has(f"node.coll.title.{c.scope}") else "node.coll.title.node",
                backend=esc(backend), ranks=fmt.num(c.world_size), count=len(hosts))
    return Part(pid, title, tuple(lines), tuple(tables))


def _span(counts: list[int]) -> str:
    """"12", or a range: "2-150"."""
    lo, hi = min(counts), max(counts)
    return fmt.num(lo) if lo == hi else f"{fmt.num(lo)}-{fmt.num(hi)}"


def _times_lines(sa: an.SweepAnalysis, gpu_times: bool) -> list[Line]:
    """What the sweep's times mean: the GPU time beside the per-call one, or the per-call time alone and why."""
    out = [Line(t("node.coll.times.gpu", count=sum(r.launch_bound for r in sa.rows)))] if gpu_times else []
    out += [Line(t("node.coll.times.per_call", reason=word("node.gpu_time.", why)), "warn" if why == "capture_failed"
                 else "") for why in dict.fromkeys(r.gpu_reason for r in sa.rows if r.time_basis == "per_call" and r.gpu_reason)]
    # Sizes timed over several buffer sets, allocations or graphs: each sentence's placeholders and their fields.
    for key, fields in (("node.coll.l2_cold", {"sets": "rotation_sets"}),
                        ("node.coll.allocations", {"allocations": "allocations"}),
                        ("node.coll.captures", {"captures": "captures", "communicators": "communicators"})):
        if mine := [r for r in sa.collectives.results if getattr(r, next(iter(fields.values()))) > 1]:
            spans = {name: _span([getattr(r, f) for r in mine]) for name, f in fields.items()}
            out.append(Line(t(key, count=len(mine), **spans)))
    if unsteady := [r for r in sa.rows if r.unsteady]:
        out.append(Line(t("node.coll.unsteady", count=len(unsteady), bar=fmt.pct(100 * (UNSTEADY_RATIO - 1)),
                            sizes="; ".join(f"{esc(r.op)} {fmt.size_bytes(r.size_bytes)}: "
                                            f"+{fmt.pct(100 * (r.pace_spread or 0.0))}" for r in unsteady)), "warn"))
    return out + _capture_errors(r.gpu_error for r in sa.collectives.results)


def _capture_errors(errors: Iterable[str | None]) -> list[Line]:
    return [Line(t("node.coll.times.capture_error", error=esc(fmt.first_line(e))), "warn")
            for e in dict.fromkeys(e for e in errors if e)]


def _registered_lines(sa: an.SweepAnalysis, registered: bool) -> list[Line]:
    """What the registered-buffer column means, and why sizes that have a GPU time have none there."""
    out = [Line(t("node.coll.registered"))] if registered else []
    why = Counter(r.registered_reason for r in sa.rows if r.time_basis == "gpu" and r.registered_reason is not None)
    out += [Line(t("node.coll.registered.none", count=fmt.num(count), reason=word("node.registered.", reason)),
                 "warn" if reason in ("capture_failed", "error") else "") for reason, count in why.items()]
    return out + _capture_errors(r.registered_error for r in sa.collectives.results)


def conclusion_text(sa: an.SweepAnalysis) -> str | None:
    k = sa.conclusion
    if k is None:
        return None
    op = sa.narrowing[0].op if sa.narrowing else "all_reduce"
    size = sa.narrowing[0].size_bytes if sa.narrowing else None
    return t(f"fleet.narrowing.{k.kind}", op=esc(op), size=fmt.size_bytes(size) if size else fmt.DASH,
               ranks=", ".join(map(str, k.ranks)), other=", ".join(map(str, k.other)),
               hosts=esc(", ".join(k.hosts)), count=len(k.ranks))


def narrowing(sa: an.SweepAnalysis, links: bool = True) -> tuple[list[Line], Table]:
    hosts = sa.collectives.hosts
    rows = []
    for row, pct in zip(sa.narrowing, sa.narrowing_pct, strict=True):
        where = ", ".join(dict.fromkeys(hosts[r] for r in row.ranks if r < len(hosts)))
        share = ((Cell(fmt.pct(pct)) if pct is not None else DASH),) if links else ()
        rows.append((Cell(", ".join(map(str, row.ranks))), Cell(esc(where)), Cell(fmt.num(row.busbw_gbps)),
                     *share, _status_cell(row.status)))
    cols = heads("node.col.ranks", "node.col.hosts", ">node.col.busbw", *([">node.col.pct_links"] if links else []),
                 "col.status")
    text = conclusion_text(sa)
    level = "fail" if sa.conclusion is not None and sa.conclusion.located else "info"
    return [Line(text, level)] if text else [], Table("narrowing", *cols, tuple(rows), t("node.coll.narrowing"))


def counters_part(na: an.NodeAnalysis, pid: str = "counters") -> Part | None:
    node = na.node
    if node is None or (node.counters_before is None and node.counters_after is None and node.xid is None):
        return None
    lines = []
    before, after = node.counters_before, node.counters_after
    if na.counters_interval_s is not None:
        lines.append(Line(t("node.counters.interval", seconds=fmt.seconds(na.counters_interval_s),
                              uptime=fmt.seconds(before.uptime_s))))
    elif after is None:
        lines.append(Line(t("node.counters.no_after"), "warn"))
    elif before is not None and before.uptime_s is not None and after.uptime_s is not None:
        lines.append(Line(t("node.counters.no_interval"), "warn"))
    lines += [Line(t("node.counters.over", gpu=fmt.num(ch.gpu), counter=word("node.counter.", ch.name),
                     link=fmt.num(ch.link), delta=fmt.num(ch.delta), rate=fmt.num(ch.per_s)), "fail")
              for ch in na.counters_over_limit]
    tables = []
    shown = [r for r in na.counters if r.delta or r.after or r.before or r.over_limit or r.boot_over_limit]
    quiet = len(na.counters) - len(shown)
    if shown:
        rows = [(Cell(gpu_label(r.gpu)), Cell(word("node.counter.", r.name)), Cell(fmt.num(r.links)),
                 Cell(fmt.num(r.before)), Cell(fmt.num(r.after)),
                 Cell(fmt.num(r.delta), status="fail" if r.over_limit else ""),
                 Cell(fmt.counter_rate(r.per_s), status="fail" if r.over_limit else ""),
                 Cell(fmt.counter_rate(r.boot_per_s), status="fail" if r.boot_over_limit else "")) for r in shown]
        cols = heads("node.col.gpu", "node.col.counter", ">node.col.links", ">node.col.before", ">node.col.after",
                     ">node.col.delta", ">node.col.per_s", ">node.col.boot_per_s")
        tables.append(Table("counters", *cols, tuple(rows),
                            notes=(Line(t("node.counters.limits", pcie=fmt.general(PCIE_REPLAY_PER_MIN_LIMIT),
                                            crc=fmt.general(NVLINK_CRC_PER_S_LIMIT))),)))
    if quiet:
        lines.append(Line(t("node.counters.quiet", count=quiet)))
    lines += [Line(t("node.counters.unread", counter=word("node.counter.", name), reason=cause(reason)))
              for name, reason in sorted({(u.name, u.reason) for u in na.counters_unread})]
    xid = node.xid
    if xid is not None:
        if xid.source is None:
            lines.append(Line(t("node.xid.unread", reason=esc("; ".join(xid.reasons) or fmt.DASH)), "warn"))
        elif not xid.events:
            lines.append(Line(t("node.xid.none", source=esc(xid.source))))
        else:
            lines.append(Line(t("node.xid.some", count=len(xid.events), source=esc(xid.source)), "fail"))
            lines += [Line(t("node.xid.event", xid=fmt.num(e.xid), bus=esc(e.pci_bus_id or "?"),
                             line=esc(fmt.first_line(e.line))), "fail") for e in xid.events]
    return Part(pid, t("node.part.counters"), tuple(lines), tuple(tables))


PROBLEM_WORDS = {"test": "node.test.", "method": "node.method.", "status": "node.coll.status.",
                 "metric": "node.metric."}


def problem_text(pr: an.NodeProblem) -> str:
    params = dict(pr.params)
    raw = {k: word(prefix, params[k]) for k, prefix in PROBLEM_WORDS.items() if k in params}
    if "reason" in params:
        raw["reason"] = cause(params["reason"]) if params.get("detail") is None else t(
            "node.reason.crashed", detail=esc(fmt.first_line(str(params["detail"]))))
    if "error" in params:
        raw["error"] = cause(params["error"])
    if "size_bytes" in params:
        raw["size"] = fmt.size_bytes(int(params["size_bytes"]))
    if "shortfall" in params:
        raw["shortfall"] = fmt.ratio_pct(params["shortfall"])
    if "kind" in params:
        raw["what"] = t(f"node.copy.name.{params['kind']}", src=fmt.num(params.get("src")),
                          dst=fmt.num(params.get("dst")), method=raw.get("method", ""))
    return phrase(f"node.problem.{pr.key}", params, raw)


def verdict_lines(na: an.NodeAnalysis) -> tuple[Line, ...]:
    if not na.problems:
        return (Line(t("node.verdict.pass"), "pass"),)
    return (Line(t("node.verdict.fail", count=len(na.problems))),
            *(Line(problem_text(x), "fail") for x in na.problems))


def node_parts(na: an.NodeAnalysis, prefix: str, section: str) -> tuple[Part, ...]:
    """The parts of one node's section; ``prefix`` makes their ids unique in a page, ``section`` keys their charts."""
    parts = [gpus_part(na, f"{prefix}gpus"), topology_part(na, f"{prefix}topology"),
             copies_part(na, f"{prefix}copies")]
    node = na.node
    if node is not None:
        parts += [sweep_part(sa, f"{section}{i}", f"{prefix}collectives{i}") for i, sa in enumerate(na.sweeps)]
        skipped = [s for s in node.skipped if s.reason in an.NOT_APPLICABLE]
        if skipped:
            parts.append(Part(f"{prefix}not-run", t("node.part.not_run"), tuple(
                Line(t("node.not_run", test=word("node.test.", s.test), reason=cause(s.reason)))
                for s in skipped)))
    parts.append(counters_part(na, f"{prefix}counters"))
    return tuple(x for x in parts if x is not None)


def sweep_sections(analysis: Analysis) -> list[tuple[str, an.SweepAnalysis]]:
    """Every sweep of a report with the key of its charts' section (and the stem of their files): a node
    run's ``node<i>``, a fleet's world sweeps ``world<i>`` and node k's sweeps ``n<k>_<i>``."""
    out: list[tuple[str, an.SweepAnalysis]] = []
    if analysis.node is not None:
        out += [(f"node{i}", sa) for i, sa in enumerate(analysis.node.sweeps)]
    if analysis.fleet is not None:
        out += [(f"world{i}", sa) for i, sa in enumerate(analysis.fleet.sweeps)]
        for k, n in enumerate(analysis.fleet.nodes):
            out += [(f"n{k}_{i}", sa) for i, sa in enumerate(n.analysis.sweeps)]
    return out


def node_section(na: an.NodeAnalysis) -> Section:
    """The node tests of ``envcheck run --gpus`` as one section (its parts: GPUs, topology, ...)."""
    node = na.node
    took = []
    if node is not None and node.duration_s is not None:
        took.append(Line(t("node.took", gpus=", ".join(map(str, node.gpus)), seconds=fmt.seconds(node.duration_s))))
    if node is not None and node.settings.get("interrupted"):
        took.append(Line(t("node.interrupted"), "fail"))
    return Section("node", t("node.section"), (*verdict_lines(na), *took), node_parts(na, "node-", "node"),
                   na.status)


def node_tiles(na: an.NodeAnalysis) -> tuple[Tile, ...]:
    """The cards of a node run: the node's verdict, its GPUs, its fastest peer link and collective."""
    tiles = [Tile(t("node.card.node"), t(f"node.status.{na.status}"),
                  (t("node.card.problems", count=len(na.problems)),) if na.problems else (),
                  "fail" if na.problems else "pass")]
    names = list(dict.fromkeys(g.name for g in na.gpus))
    if na.gpus:
        outl = {g.index for g in na.gpus if g.outliers}
        tiles.append(Tile(t("node.card.gpus"), f"{len(na.gpus)} × {esc(names[0])}" if len(names) == 1
                          else str(len(na.gpus)),
                          (t("node.card.outliers", count=len(outl)),) if outl else (t("node.card.no_outliers"),),
                          "fail" if outl else None))
    worst = na.slowest_copy
    if worst is not None:
        tiles.append(Tile(t("node.card.peer"), f"{fmt.num(worst.gbps)} GB/s",
                          (t("node.card.peer_line", pct=fmt.pct(worst.pct_expected), src=fmt.num(worst.src),
                             dst=fmt.num(worst.dst), method=word("node.method.", worst.method)),)))
    for sa in na.sweeps:
        if (top := sa.largest("all_reduce")) is not None:
            r, pct = top
            line = t("node.card.busbw_line", size=fmt.size_bytes(r.size_bytes), pct=fmt.pct(pct),
                     algo=esc(r.algo_label or fmt.DASH))
            tiles.append(Tile(t("node.card.busbw"), f"{fmt.num(r.busbw_gbps)} GB/s", (line,)))
            break
    return tuple(tiles)

