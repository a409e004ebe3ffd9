"""The cross-checks of a run held against their bars: each of envcheck's numbers (a case's GPU time, a copy, a
collective's busbw and per-call time) beside the same work timed by an independent tool, their ratio and whether
it holds. A row outside its bar, a tool that failed or hung, and a row a tool could not time are findings; a pair
that cannot be held is listed with its reason, never dropped.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from envcheck.analysis.collectives import against_nccl_tests, collective_row, placement_of
from envcheck.analysis.links import copy_row
from envcheck.model import Bench, Case, Note
from envcheck.model.crosscheck import Crosscheck, KernelTiming, LoopTiming, NcclTestsRow, NcclTestsRun
from envcheck.model.node import Collectives, Launch, Node

KERNEL_BAR = 0.03  # do_bench_cudagraph of the same call, buffers and matmul tile
COPY_BAR = 0.03  # a plain dst.copy_(src)
LOOP_BAR = 0.10  # a plain torch.distributed loop; busbw: collectives.nccl_tests_tolerance
NCCL_EAGER_MODE = "eager"

KINDS = ("kernel", "copy", "collective")
STATUSES = ("within", "outside", "not_compared")
CRASHED_NOTE = "crosscheck.crashed"  # a note envcheck writes when its own cross-check code raised (``detail``)
DETAIL_LINES = 6  # of a failed tool's stderr, the last lines a finding carries


@dataclass(frozen=True)
class Counterpart:
    """The independent measurement a row is held against: its tool, mode and settings."""

    tool: str
    mode: str | None = None
    settings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CrossRow:
    """envcheck's ``ours`` against the counterpart's ``theirs``: ``ratio`` = ours / theirs, ``within`` when
    ``|ratio - 1| <= bar``, else ``outside``; ``not_compared`` with its ``reason``."""

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
    """``outside_bar`` (``row``), ``tool_failed`` (a launch; ``detail``: its stderr's last lines, redacted) or
    ``row_failed`` (``row`` with its ``detail``)."""

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

    @property
    def status(self) -> str:
        """``fail`` on any finding, ``pass`` when rows were held to their bars, ``skip`` when none was."""
        return "fail" if self.findings else "pass" if self.rows else "skip"


def _held(row: CrossRow) -> CrossRow:
    """``row`` with its ratio and status, from ``ours`` and ``theirs`` (or its reason as given)."""
    if row.reason is not None:
        return row
    if row.ours is None:
        return replace(row, reason="not_measured")
    if row.theirs is None or not row.theirs > 0:
        return replace(row, reason="no_counterpart")
    ratio = row.ours / row.theirs
    return replace(row, ratio=ratio, status="within" if abs(ratio - 1) <= row.bar else "outside")


# --------------------------------------------------------------------------- single GPU: do_bench_cudagraph


def _settings(*pairs: tuple[str, object]) -> tuple[tuple[str, str], ...]:
    return tuple((k, f"{v:g}" if isinstance(v, float) else str(v)) for k, v in pairs if v is not None)


def _case(benches: Sequence[Bench], k: KernelTiming) -> Case | None:
    return next((c for b in benches if b.device.index in (None, k.gpu) for c in b.cases
                 if c.key == (k.op, k.impl, k.dtype, k.precision, k.shape) and c.failure is None), None)


def kernel_rows(cc: Crosscheck, benches: Sequence[Bench]) -> tuple[CrossRow, ...]:
    out = []
    for k in cc.kernels:
        case = _case(benches, k)
        ours = case.gpu.median_us if case is not None and case.gpu is not None else None
        theirs = statistics.median(k.samples_us) if k.samples_us is not None else None
        differs = case is not None and None not in (case.kernel, k.kernel) and case.kernel != k.kernel
        reason = k.skipped or ("tool_failed" if k.error is not None else "kernel_differs" if differs else None)
        detail = k.error or (f"{case.kernel} / {k.kernel}" if differs and case is not None else None)
        part = Counterpart("do_bench_cudagraph", None, _settings(("rep_ms", k.rep_ms), ("rounds", k.rounds or None),
                                                                 ("settle_ms", k.settle_ms),
                                                                 ("return_mode", "all" if k.rounds else None),
                                                                 ("sets", k.sets if k.sets > 1 else None),
                                                                 ("kernel", k.kernel)))
        out.append(_held(CrossRow("kernel", k.op, "gpu_time_us", part, KERNEL_BAR, ours, theirs, reason=reason,
                                  detail=detail, gpu=k.gpu, impl=k.impl, dtype=k.dtype, precision=k.precision,
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
        theirs = t.size_bytes / (statistics.median(t.samples_us) * 1e-6) / 1e9 if t.samples_us is not None else None
        part = Counterpart("torch_copy", None, _settings(("size_bytes", t.size_bytes), ("calls", t.calls),
                                                         ("loops", len(t.samples_us) if t.samples_us else None)))
        out.append(_held(CrossRow("copy", "copy", "copy_gbps", part, COPY_BAR, mine, theirs,
                                  reason="tool_failed" if t.error is not None else None, detail=t.error,
                                  size_bytes=t.size_bytes, src=t.src, dst=t.dst)))
    return tuple(out)


# --------------------------------------------------------------------------- collectives


def loop_time_us(loop: LoopTiming) -> float | None:
    """The loop's time per call: each rank's median loop, averaged over the ranks (as ``mean_time_us``)."""
    per_rank = [statistics.median(t.timing.samples_us) for t in loop.timings if len(t.timing.samples_us)]
    return statistics.fmean(per_rank) if per_rank and loop.error is None else None


def _nccl_settings(run: NcclTestsRun, placement: str) -> tuple[tuple[str, str], ...]:
    version = (("version", run.version),) if run.version else ()
    return (("args", " ".join(run.argv[1:])), *sorted(run.env.items()), ("placement", placement), *version)


def collective_rows(cc: Crosscheck, node: Node | None) -> tuple[CrossRow, ...]:
    """The node sweep against nccl-tests' modes and the plain ``torch.distributed`` loop."""
    sweeps = [c for c in (node.collectives if node is not None else ()) if c.scope == "node"]
    if not sweeps:
        return ()
    sweep: Collectives = sweeps[0]
    by_mode: dict[str, list[NcclTestsRow]] = {}
    runs: dict[tuple[str, str, int], NcclTestsRun] = {}  # (op, mode, size) -> the run that timed it
    for r in cc.nccl_tests:
        by_mode.setdefault(r.mode, []).extend(r.rows)
        for t in r.rows:
            runs.setdefault((r.op, r.mode, t.size_bytes), r)
    measured = {(res.op, res.size_bytes) for res in sweep.results if not res.skipped and res.timings}
    out: list[CrossRow] = []
    if cc.nccl_tests:
        agreements = against_nccl_tests(sweep, by_mode.get(NCCL_EAGER_MODE, ()), by_mode.get("graph_unregistered", ()),
                                        registered_rows=by_mode.get("graph", ()), hold_eager=True)
        for a in agreements:
            if (a.op, a.size_bytes) not in measured:
                continue
            buffers = "registered" if a.basis == "registered" else "plain"
            quantity = "registered_busbw_gbps" if buffers == "registered" else "gpu_busbw_gbps"
            run = runs.get((a.op, a.theirs_mode, a.size_bytes))
            part = Counterpart("nccl_tests", a.theirs_mode, _nccl_settings(run, a.placement) if run is not None else ())
            reason = "launch_bound" if not a.held else "no_gpu_time" if a.basis == "per_call" else None
            out.append(_held(CrossRow("collective", a.op, quantity, part, a.tolerance, a.ours_gbps, a.theirs_gbps,
                                      reason=reason, size_bytes=a.size_bytes, ranks=len(sweep.results[0].ranks),
                                      buffers=buffers, placement=a.placement)))
    loops = {(lp.op, lp.size_bytes): lp for lp in cc.loops}
    loop_calls = next((lp.calls for lp in cc.loops), None)
    for res in sweep.results:
        if res.skipped or not res.timings:
            continue
        row = collective_row(res, sweep)
        placement = placement_of(res.op)
        loop = loops.get((res.op, res.size_bytes))
        part = Counterpart("torch_distributed_loop", None, _settings(("calls", loop.calls if loop else loop_calls)))
        out.append(_held(CrossRow("collective", res.op, "call_time_us", part, LOOP_BAR, row.call_time_us,
                                  loop_time_us(loop) if loop is not None else None,
                                  reason="tool_failed" if loop is not None and loop.error else None,
                                  detail=loop.error if loop is not None else None, size_bytes=res.size_bytes,
                                  ranks=len(res.ranks), buffers="plain", placement=placement)))
    return tuple(out)


# --------------------------------------------------------------------------- findings


def _tail(launch: Launch) -> str | None:
    lines = [ln for ln in launch.stderr_tail.splitlines() if ln.strip()]
    return "\n".join(lines[-DETAIL_LINES:]) or launch.error or None


def findings(cc: Crosscheck, rows: Sequence[CrossRow]) -> tuple[CrossFinding, ...]:
    out: list[CrossFinding] = []
    launches = [(r.tool, r.gpu, r.launch) for r in cc.runs] + [("nccl_tests", None, r.launch) for r in cc.nccl_tests]
    for tool, gpu, launch in launches:
        # How a tool's launch ended badly (``timed_out``, ``interrupted``, ``launch_failed``, ``exit_status``).
        cause = launch.ended_early if launch.ended_early is not None else (
            "exit_status" if launch.returncode not in (0, None) else None)
        if cause is not None and cause != "interrupted":  # Ctrl-C is the run's stop, said by its exit status
            out.append(CrossFinding("tool_failed", tool, gpu=gpu, cause=cause, returncode=launch.returncode,
                                    detail=_tail(launch)))
    for note in cc.notes:  # envcheck's own cross-check code failed: nothing was held, which is no pass
        if note.key == CRASHED_NOTE:
            out.append(CrossFinding("tool_failed", "envcheck", cause="crashed", detail=str(note.params.get("detail"))))
    for row in rows:
        if row.reason == "tool_failed":
            out.append(CrossFinding("row_failed", row.counterpart.tool, row, row.gpu, detail=row.detail))
        elif row.reason == "not_run":  # the tool was stopped (a time limit, Ctrl-C) before it: nothing held, no pass
            out.append(CrossFinding("not_finished", row.counterpart.tool, row, row.gpu))
    # Rows outside their bar, furthest off first (in units of each one's bar).
    outside = sorted((r for r in rows if r.status == "outside"), key=lambda r: -(r.off_by or 0))
    out += [CrossFinding("outside_bar", r.counterpart.tool, r, r.gpu) for r in outside]
    return tuple(out)


def analyse_crosscheck(cc: Crosscheck, benches: Sequence[Bench], node: Node | None) -> CrosscheckAnalysis:
    """Every cross-check row of a run (or a fleet node) with its ratio and bar, and the findings."""
    rows = kernel_rows(cc, benches) + copy_rows(cc, node) + collective_rows(cc, node)
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    return CrosscheckAnalysis(rows, findings(cc, rows), cc.notes, counts)
