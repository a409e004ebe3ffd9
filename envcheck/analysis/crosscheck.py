"""The cross-checks of a run held against their bars: each of envcheck's numbers beside the same work timed by
an independent tool, their ratio, the bar it is held to and whether it holds. Pure functions of the report's
raw results (``envcheck.model.crosscheck`` beside the benches and the node); nothing else computes these.

Every row names its counterpart: the tool, its mode and the settings it ran with. The pairs and their bars:

- a headline case's **GPU time** (CUDA-graph replay) against ``triton.testing.do_bench_cudagraph`` of the same
  call: within ``KERNEL_BAR`` (3%, as docs/evidence.md holds envcheck's timer to it);
- a GPU-to-GPU **copy** on the copy engines against a plain ``dst.copy_(src)`` timed with CUDA events:
  within ``COPY_BAR`` (3%, as tools/evidence/compare_node.py);
- a collective's **GPU-time busbw** against nccl-tests' CUDA-graph mode, its **per-call busbw** against
  nccl-tests' eager loop, same placement (in place for all_reduce and broadcast, as torch runs them): within
  5% at every size and 2% from 64 MiB (``nccl_tests_tolerance``); which graph mode is the counterpart
  depends on the buffers envcheck's row used (``NCCL_GRAPH_MODES``);
- a collective's **per-call time** against a plain ``torch.distributed`` loop (N calls back to back between
  two CUDA events, on every rank): within ``LOOP_BAR`` (10%).

A row outside its bar is a finding (``CrossFinding`` ``outside_bar``), and so is a tool that failed or hung
(``tool_failed``, with its stderr's tail) and a row a tool could not time (``row_failed``); the report's
verdict and ``envcheck run``'s exit status follow them (``analysis.verdict``). A pair that cannot be held
(nothing to compare, a case that fits L2) is listed with its reason, never dropped.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envcheck.analysis.collectives import (
    IN_PLACE_OPS,
    collective_row,
    medians,
    nccl_tests_tolerance,
)
from envcheck.analysis.copies import copy_row
from envcheck.model import Bench, Case, Note
from envcheck.model.crosscheck import Crosscheck, KernelTiming, LoopTiming, NcclTestsRun
from envcheck.model.node import CollectiveResult, Collectives, Launch, Node
from envcheck.model.reference import NcclTestsRow

KERNEL_BAR = 0.03
COPY_BAR = 0.03
LOOP_BAR = 0.10
# The counterpart of a collective's GPU time by the buffers envcheck's calls ran on: NCCL registers the buffers of
# a captured graph where it can (nccl-tests' cudaMalloc buffers in one process), so envcheck's plain caching-
# allocator buffers are held against nccl-tests with that registration off, and buffers from NCCL's own allocator
# (registered) against nccl-tests' defaults.
NCCL_GRAPH_MODES = {"plain": "graph_unregistered", "registered": "graph"}
NCCL_EAGER_MODE = "eager"

KINDS = ("kernel", "copy", "collective")
# What a row compares: a headline case's GPU time, a copy's bandwidth, a collective's busbw from its GPU time or
# its per-call time, a collective's per-call time.
QUANTITIES = ("gpu_time_us", "copy_gbps", "gpu_busbw_gbps", "call_busbw_gbps", "call_time_us")
STATUSES = ("within", "outside", "not_compared")
# Why a row has no ratio: a model.crosscheck.ROW_SKIPS reason; ``tool_failed`` (the tool raised on it: ``detail``);
# ``no_counterpart`` (the tool gave nothing at this size); ``not_measured`` (envcheck has no such number);
# ``no_gpu_time`` (envcheck's collective has a per-call time only).
REASONS = ("fits_l2", "not_run", "tool_failed", "no_counterpart", "not_measured", "no_gpu_time")
FINDING_KEYS = ("outside_bar", "tool_failed", "row_failed")
# How a tool's launch ended badly (``launch_cause``).
LAUNCH_CAUSES = ("timed_out", "interrupted", "launch_failed", "exit_status")
CRASHED_NOTE = "crosscheck.crashed"  # a note envcheck writes when its own cross-check code raised (``detail``)
DETAIL_LINES = 6  # of a failed tool's stderr, the last lines a finding carries


@dataclass(frozen=True)
class Counterpart:
    """The independent measurement a row is held against: ``tool`` (model.crosscheck.TOOLS), its ``mode``
    (nccl-tests' ``NCCL_TESTS_MODES``) and the settings it ran with, as (name, value) pairs."""

    tool: str
    mode: str | None = None
    settings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CrossRow:
    """envcheck's ``ours`` against the counterpart's ``theirs`` (both in ``quantity``'s unit), ``ratio`` =
    ours / theirs, held to ``bar`` (``|ratio - 1| <= bar``: ``within``); ``not_compared`` with ``reason``
    where there is no ratio. What the row is of: a kernel's ``gpu``, ``op``, ``impl``, ``dtype``,
    ``precision``, ``shape``; a copy's ``src`` and ``dst``; a collective's ``op``, ``size_bytes``, ``ranks``
    (how many), ``buffers`` and ``placement``."""

    kind: str
    op: str
    quantity: str
    counterpart: Counterpart
    bar: float
    ours: float | None = None
    theirs: float | None = None
    ratio: float | None = None
    status: str = "not_compared"
    reason: str | None = None
    detail: str | None = None
    gpu: int | None = None
    impl: str | None = None
    dtype: str | None = None
    precision: str | None = None
    shape: tuple[int, ...] = ()
    size_bytes: int | None = None
    src: int | None = None
    dst: int | None = None
    ranks: int | None = None
    buffers: str | None = None
    placement: str | None = None

    @property
    def off_by(self) -> float | None:
        """How far the ratio lies from 1, in units of the bar (1: on it)."""
        return None if self.ratio is None else abs(self.ratio - 1) / self.bar


@dataclass(frozen=True)
class CrossFinding:
    """``outside_bar`` (``row``), ``tool_failed`` (a launch: ``tool``, ``gpu``, ``cause``, ``returncode``,
    ``detail``: its stderr's last lines, redacted when it was read) or ``row_failed`` (``row`` with its
    ``detail``)."""

    key: str
    tool: str
    row: CrossRow | None = None
    gpu: int | None = None
    cause: str | None = None
    returncode: int | None = None
    detail: str | None = None


@dataclass(frozen=True)
class CrosscheckAnalysis:
    rows: tuple[CrossRow, ...]
    findings: tuple[CrossFinding, ...]
    notes: tuple[Note, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)  # rows per status

    @property
    def ok(self) -> bool:
        return not self.findings


def _held(row: CrossRow) -> CrossRow:
    """``row`` with its ratio and status, from ``ours`` and ``theirs`` (or its reason as given)."""
    from dataclasses import replace

    if row.reason is not None:
        return row
    if row.ours is None:
        return replace(row, reason="not_measured")
    if row.theirs is None or not row.theirs > 0:
        return replace(row, reason="no_counterpart")
    ratio = row.ours / row.theirs
    return replace(row, ratio=ratio, status="within" if abs(ratio - 1) <= row.bar else "outside")


# --------------------------------------------------------------------------- single GPU: do_bench_cudagraph


def _settings(*pairs: tuple[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((k, f"{v:g}" if isinstance(v, float) else str(v)) for k, v in pairs if v is not None)


def _case(benches: Sequence[Bench], k: KernelTiming) -> Case | None:
    for b in benches:
        if b.device.index is not None and b.device.index != k.gpu:
            continue
        for c in b.cases:
            if c.key == (k.op, k.impl, k.dtype, k.precision, k.shape) and c.failure is None:
                return c
    return None


def kernel_rows(cc: Crosscheck, benches: Sequence[Bench]) -> tuple[CrossRow, ...]:
    out = []
    for k in cc.kernels:
        case = _case(benches, k)
        ours = case.gpu.median_us if case is not None and case.gpu is not None else None
        theirs = statistics.median(k.samples_us) if k.samples_us is not None else None
        reason = k.skipped or ("tool_failed" if k.error is not None else None)
        part = Counterpart("do_bench_cudagraph", None, _settings(("rep_ms", k.rep_ms), ("rounds", k.rounds or None),
                                                                 ("settle_ms", k.settle_ms),
                                                                 ("return_mode", "all" if k.rounds else None)))
        out.append(_held(CrossRow("kernel", k.op, "gpu_time_us", part, KERNEL_BAR, ours, theirs, reason=reason,
                                  detail=k.error, gpu=k.gpu, impl=k.impl, dtype=k.dtype, precision=k.precision,
                                  shape=k.shape)))
    return tuple(out)


# --------------------------------------------------------------------------- peer copies: a plain torch copy


def copy_rows(cc: Crosscheck, node: Node | None) -> tuple[CrossRow, ...]:
    peer = node.peer if node is not None else None
    out = []
    for t in cc.copies:
        mine = None
        for c in (peer.copies if peer is not None else ()):
            if (c.kind, c.method, c.src, c.dst, c.bidirectional) == ("d2d", "copy_engine", t.src, t.dst, False):
                mine = copy_row(c, node.topology if node is not None else None).gbps
        theirs = None
        if t.samples_us is not None:
            theirs = t.size_bytes / (statistics.median(t.samples_us) * 1e-6) / 1e9
        part = Counterpart("torch_copy", None, _settings(("size_bytes", t.size_bytes), ("calls", t.calls),
                                                         ("loops", len(t.samples_us) if t.samples_us else None)))
        out.append(_held(CrossRow("copy", "copy", "copy_gbps", part, COPY_BAR, mine, theirs,
                                  reason="tool_failed" if t.error is not None else None, detail=t.error,
                                  size_bytes=t.size_bytes, src=t.src, dst=t.dst)))
    return tuple(out)


# --------------------------------------------------------------------------- collectives


def buffer_kind(result: CollectiveResult) -> str:
    """The buffers envcheck's calls of ``result`` ran on (``NCCL_GRAPH_MODES``' keys): plain ones (the caching
    allocator's) unless the result says otherwise."""
    return getattr(result, "buffers", None) or "plain"


def loop_time_us(loop: LoopTiming) -> float | None:
    """The loop's time per call: each rank's median loop (of ``calls`` calls), averaged over the ranks, as
    envcheck's per-call time averages its ranks (``collectives.mean_time_us``)."""
    per_rank = [statistics.median(t.timing.samples_us) for t in loop.timings if len(t.timing.samples_us)]
    return statistics.fmean(per_rank) if per_rank and loop.error is None else None


def _nccl_settings(run: NcclTestsRun, placement: str) -> tuple[tuple[str, str], ...]:
    version = (("version", run.version),) if run.version else ()
    return (("args", " ".join(run.argv[1:])), *sorted(run.env.items()), ("placement", placement), *version)


def _busbw(row: NcclTestsRow, placement: str) -> float:
    return (row.in_place if placement == "in_place" else row.out_of_place).busbw_gbps


def collective_rows(cc: Crosscheck, node: Node | None) -> tuple[CrossRow, ...]:
    sweeps = [c for c in (node.collectives if node is not None else ()) if c.scope == "node"]
    if not sweeps:
        return ()
    sweep: Collectives = sweeps[0]
    runs: dict[tuple[str, str], NcclTestsRun] = {(r.op, r.mode): r for r in cc.nccl_tests}
    tables = {key: {(t.op, t.size_bytes): t for t in medians(r.rows)} for key, r in runs.items()}
    loops = {(lp.op, lp.size_bytes): lp for lp in cc.loops}
    loop_calls = next((lp.calls for lp in cc.loops), None)
    out: list[CrossRow] = []
    for res in sweep.results:
        if res.skipped or not res.timings:
            continue
        row = collective_row(res, sweep)
        buffers = buffer_kind(res)
        placement = "in_place" if res.op in IN_PLACE_OPS else "out_of_place"
        what: dict[str, Any] = {"size_bytes": res.size_bytes, "ranks": len(res.ranks), "buffers": buffers,
                                "placement": placement}
        bar = nccl_tests_tolerance(res.size_bytes)
        if cc.nccl_tests:
            for quantity, mode, ours in (("gpu_busbw_gbps", NCCL_GRAPH_MODES.get(buffers, "graph"),
                                          row.busbw_gbps if row.time_basis == "gpu" else None),
                                         ("call_busbw_gbps", NCCL_EAGER_MODE, row.call_busbw_gbps)):
                run = runs.get((res.op, mode))
                ref = tables.get((res.op, mode), {}).get((res.op, res.size_bytes))
                theirs = _busbw(ref, placement) if ref is not None else None
                reason = "no_gpu_time" if quantity == "gpu_busbw_gbps" and row.time_basis != "gpu" else None
                part = Counterpart("nccl_tests", mode, _nccl_settings(run, placement) if run is not None else ())
                out.append(_held(CrossRow("collective", res.op, quantity, part, bar, ours, theirs, reason=reason,
                                          **what)))
        loop = loops.get((res.op, res.size_bytes))
        part = Counterpart("torch_distributed_loop", None, _settings(("calls", loop.calls if loop else loop_calls)))
        out.append(_held(CrossRow("collective", res.op, "call_time_us", part, LOOP_BAR, row.call_time_us,
                                  loop_time_us(loop) if loop is not None else None,
                                  reason="tool_failed" if loop is not None and loop.error else None,
                                  detail=loop.error if loop is not None else None, **what)))
    return tuple(out)


# --------------------------------------------------------------------------- findings


def launch_cause(launch: Launch) -> str | None:
    """How a tool's launch ended badly (``LAUNCH_CAUSES``), None when it ran to a clean end."""
    if launch.interrupted:
        return "interrupted"
    if launch.timed_out:
        return "timed_out"
    if launch.error:
        return "launch_failed"
    if launch.returncode not in (0, None):
        return "exit_status"
    return None


def _tail(launch: Launch) -> str | None:
    lines = [ln for ln in launch.stderr_tail.splitlines() if ln.strip()]
    text = "\n".join(lines[-DETAIL_LINES:]) or launch.error
    return text or None


def findings(cc: Crosscheck, rows: Sequence[CrossRow]) -> tuple[CrossFinding, ...]:
    out: list[CrossFinding] = []
    launches = [(r.tool, r.gpu, r.launch) for r in cc.runs] + [("nccl_tests", None, r.launch) for r in cc.nccl_tests]
    for tool, gpu, launch in launches:
        cause = launch_cause(launch)
        if cause is not None and cause != "interrupted":  # Ctrl-C is the run's stop, said by its exit status
            out.append(CrossFinding("tool_failed", tool, gpu=gpu, cause=cause, returncode=launch.returncode,
                                    detail=_tail(launch)))
    for note in cc.notes:  # envcheck's own cross-check code failed: nothing was held, which is no pass
        if note.key == CRASHED_NOTE:
            out.append(CrossFinding("tool_failed", "envcheck", cause="crashed", detail=str(note.params.get("detail"))))
    for row in rows:
        if row.reason == "tool_failed":
            out.append(CrossFinding("row_failed", row.counterpart.tool, row, row.gpu, detail=row.detail))
    # Rows outside their bar, furthest off first (in units of each one's bar).
    outside = sorted((r for r in rows if r.status == "outside"), key=lambda r: -(r.off_by or 0))
    out += [CrossFinding("outside_bar", r.counterpart.tool, r, r.gpu) for r in outside]
    return tuple(out)


def analyse_crosscheck(cc: Crosscheck, benches: Sequence[Bench], node: Node | None) -> CrosscheckAnalysis:
    """Every cross-check row of a run (or a fleet node) with its ratio and bar, and the findings."""
    rows = kernel_rows(cc, benches) + copy_rows(cc, node) + collective_rows(cc, node)
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    return CrosscheckAnalysis(rows, findings(cc, rows), cc.notes, counts)
