"""Derived numbers of a collective sweep: nccl-tests' definitions (layout, algbw, busbw), NCCL's
algorithm per size, the share of what the links allow, the agreement with nccl-tests and where a slow
sweep's slowness comes from. Pure functions of the raw results in ``envcheck.model.node``."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envcheck.analysis.flags import LAUNCH_BOUND_RATIO
from envcheck.analysis.links import pair_path
from envcheck.analysis.narrowing import (
    DEFAULT_NARROW_MARGIN,
    Conclusion,
    NarrowStep,
    lost_conclusion,
    narrowing_conclusion,
)
from envcheck.model.crosscheck import NcclTestsRow, Placement
from envcheck.model.node import (
    CollectiveResult,
    Collectives,
    RankTiming,
    Topology,
)

# --------------------------------------------------------------------------- nccl-tests' definitions

ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int8": 1}

# NCCL's names for the collectives, as its debug lines print them.
NCCL_NAMES = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
              "all_to_all": "AlltoAll", "broadcast": "Broadcast"}


_BUSBW_SHARE = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "all_to_all": 1, "broadcast": 0}


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' correction from algbw to busbw (doc/PERFORMANCE.md, "Summary")."""
    if n < 1:
        raise ValueError("a group has at least one rank")
    if op not in _BUSBW_SHARE:
        raise ValueError(f"unknown collective {op!r}")
    return _BUSBW_SHARE[op] * (n - 1) / n if op != "broadcast" else 1.0


@dataclass(frozen=True)
class Layout:
    """The buffers of one collective at nccl-tests' size S on ``n`` ranks, in elements; ``size_bytes``: S after
    nccl-tests' 16-byte rounding; ``nccl_bytes``: the size NCCL's tuning line prints (None for all_to_all)."""

    count: int
    send: int
    recv: int
    size_bytes: int
    nccl_bytes: int | None


def layout(op: str, size_bytes: int, n: int, element_bytes: int = 4) -> Layout:
    """Buffers as nccl-tests' ``*GetCollByteCount`` sizes them for ``-b``/``-e`` size S (src/*.cu)."""
    elems = size_bytes // element_bytes
    if op in ("all_reduce", "broadcast"):
        return Layout(elems, elems, elems, elems * element_bytes, elems * element_bytes)
    # (count/nranks) & ~(16/eltSize - 1): per-rank chunks stay 16-byte aligned.
    per = (elems // n) & ~(max(16 // element_bytes, 1) - 1)
    total = per * n * element_bytes
    if op == "all_gather":
        return Layout(per, per, per * n, total, per * element_bytes)
    if op == "reduce_scatter":
        return Layout(per, per * n, per, total, per * element_bytes)
    if op == "all_to_all":
        return Layout(per, per * n, per * n, total, None)
    raise ValueError(f"unknown collective {op!r}")


def mean_time_us(result: CollectiveResult) -> float | None:
    """Per-call time as nccl-tests reports it by default (``-a 1``): each rank's mean, averaged over the ranks."""
    per_rank = [statistics.fmean(t.timing.samples_us) for t in result.timings if len(t.timing.samples_us)]
    return statistics.fmean(per_rank) if per_rank else None


def capture_means_us(result: CollectiveResult, registered: bool = False) -> tuple[float, ...]:
    """Each graph capture's replay mean, averaged over the ranks, in capture order (empty without GPU time);
    ``registered``: of the replays on registered buffers. A rank's samples hold the captures back to back."""
    timings, captures = ((result.registered_timings, result.registered_captures) if registered
                         else (result.gpu_timings, result.captures))
    series = [t.timing.samples_us for t in timings if len(t.timing.samples_us)]
    if not series:
        return ()
    k = captures if all(len(s) % captures == 0 for s in series) else 1

    def by_capture(s: Sequence[float]) -> list[float]:
        n = len(s) // k
        return [statistics.fmean(s[i * n:(i + 1) * n]) for i in range(k)]

    return tuple(statistics.fmean(one) for one in zip(*(by_capture(s) for s in series), strict=True))


def gpu_time_us(result: CollectiveResult) -> float | None:
    """GPU time of one call (graph replays, as ``-G``): the captures' median on one allocation (two paces), their
    mean over fresh allocations (docs/node.md). None without it."""
    if not (means := capture_means_us(result)):
        return None
    return statistics.fmean(means) if result.allocations > 1 else statistics.median(means)


def registered_time_us(result: CollectiveResult) -> float | None:
    """GPU time of one call on buffers NCCL registered: the median of its captures' means (one pool)."""
    means = capture_means_us(result, registered=True)
    return statistics.median(means) if means else None


def _cv(timings: Sequence[RankTiming]) -> float | None:
    xs = [x for t in timings for x in t.timing.samples_us]
    if len(xs) < 2:
        return None
    mean = statistics.fmean(xs)
    return statistics.pstdev(xs) / mean if mean > 0 else None


# Replays whose mean lies this far above their fastest tenth (on some rank) ran at more than one pace
# (mixed-pace runs read 3.4-4.3% above, steady ones at most 2.1%: docs/node.md).
UNSTEADY_RATIO = 1.03
UNSTEADY_MIN_SAMPLES = 10  # fewer replays than this say nothing about a second pace


def pace_spread(result: CollectiveResult) -> float | None:
    """How far the GPU replays' mean lies above their fastest tenth on the worst rank (0.043: 4.3%)."""
    if result.allocations > 1:
        return None
    spreads = []
    for t in result.gpu_timings:
        xs = sorted(t.timing.samples_us)
        if len(xs) < UNSTEADY_MIN_SAMPLES:
            continue
        fastest = xs[len(xs) // 10 - 1]
        if fastest > 0:
            spreads.append(statistics.fmean(xs) / fastest - 1)
    return max(spreads) if spreads else None


def is_unsteady(spread: float | None) -> bool:
    return spread is not None and spread > UNSTEADY_RATIO - 1


# Why a row has no GPU time: the model's reasons, and ``not_recorded`` for a report that predates them.
NO_GPU_TIME = ("no_cuda_graphs", "capture_failed", "not_captured", "not_recorded")


@dataclass(frozen=True)
class CollectiveRow:
    """One collective at one size with nccl-tests' numbers and NCCL's (algorithm, protocol) pairs. ``time_us``, the
    bandwidths and ``cv`` are of ``time_basis``: the GPU time (graph replays) where there is one, else per call."""

    op: str
    size_bytes: int
    ranks: tuple[int, ...]
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    cv: float | None
    wrong: int | None
    status: str
    algos: tuple[tuple[str, str], ...] = ()
    algo_reason: str | None = None
    time_basis: str = "per_call"
    gpu_time_us: float | None = None
    call_time_us: float | None = None
    call_busbw_gbps: float | None = None
    launch_bound: bool = False
    gpu_reason: str | None = None
    pace_spread: float | None = None
    registered_time_us: float | None = None
    registered_busbw_gbps: float | None = None
    registered_reason: str | None = None

    @property
    def unsteady(self) -> bool:
        """The GPU replays ran at more than one pace: the time is a mix, and a second run may read another."""
        return is_unsteady(self.pace_spread)

    @property
    def n(self) -> int:
        return len(self.ranks)

    @property
    def algo_label(self) -> str | None:
        return "+".join(f"{a}/{p}" for a, p in self.algos) or None


def algos_for(result: CollectiveResult, collectives: Collectives) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """The (algorithm, protocol) pairs NCCL logged for ``result``'s calls, and why none when empty."""
    if collectives.backend != "nccl":
        return (), "backend_not_nccl"
    if not collectives.choices:
        return (), collectives.choices_reason or "no_nccl_log"
    if result.op == "all_to_all":
        return (), "nccl_p2p"  # NCCL runs all-to-all as grouped send/recv: no collective algorithm
    n = len(result.ranks)
    lay = layout(result.op, result.size_bytes, n, ELEMENT_BYTES.get(result.dtype, 4))
    name = NCCL_NAMES[result.op]
    found = tuple(dict.fromkeys((c.algo, c.proto) for c in collectives.choices
                                if c.nccl_op == name and c.nccl_bytes == lay.nccl_bytes and c.nranks in (None, n)))
    return found, (None if found else "not_in_nccl_log")


def bandwidths_gbps(op: str, size_bytes: int, n: int, time_us: float | None) -> tuple[float | None, float | None]:
    """nccl-tests' (algbw, busbw) in GB/s of one call of ``time_us``: algbw = S / t, busbw = algbw x factor(op, n)."""
    if not time_us:
        return None, None
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * busbw_factor(op, n)


def collective_row(result: CollectiveResult, collectives: Collectives) -> CollectiveRow:
    """nccl-tests' algbw = S / t and busbw = algbw x factor(op, n), with t from :func:`mean_time_us`."""
    n = len(result.ranks)
    algos, why = algos_for(result, collectives)
    if result.skipped:
        return CollectiveRow(result.op, result.size_bytes, result.ranks, None, None, None, None, None, "skipped",
                             algos, why)
    call = mean_time_us(result)
    gpu = gpu_time_us(result)
    basis = "gpu" if gpu is not None else "per_call"
    t = gpu if gpu is not None else call
    algbw, busbw = bandwidths_gbps(result.op, result.size_bytes, n, t)
    call_busbw = bandwidths_gbps(result.op, result.size_bytes, n, call)[1]
    launch_bound = gpu is not None and call is not None and call > LAUNCH_BOUND_RATIO * gpu
    no_gpu = None
    if gpu is None and call is not None:
        no_gpu = result.gpu_reason if result.gpu_reason is not None else "not_recorded"
    reg = registered_time_us(result)
    wrong = result.wrong
    if wrong is not None and result.registered_wrong:
        wrong += result.registered_wrong
    status = "error" if result.error else "unverified" if wrong is None else "wrong" if wrong else "ok"
    cv = _cv(result.gpu_timings if gpu is not None else result.timings)
    return CollectiveRow(result.op, result.size_bytes, result.ranks, t, algbw, busbw, cv, wrong,
                         status, algos, why, basis, gpu, call, call_busbw, launch_bound, no_gpu,
                         pace_spread(result) if gpu is not None else None, reg,
                         bandwidths_gbps(result.op, result.size_bytes, n, reg)[1], result.registered_reason)


def collective_rows(collectives: Collectives, narrowing: bool = False) -> tuple[CollectiveRow, ...]:
    """Every sweep result (or, with ``narrowing``, every sub-group run) of one sweep, in run order."""
    source = collectives.narrowing if narrowing else collectives.results
    return tuple(collective_row(r, collectives) for r in source)


def algorithm_changes(rows: Sequence[CollectiveRow]) -> tuple[tuple[str, int, str | None, str | None], ...]:
    """(op, size, before, after) wherever NCCL switched algorithm between two consecutive sizes of one op."""
    out = []
    last: dict[str, str | None] = {}
    for r in sorted(rows, key=lambda r: (r.op, r.size_bytes)):
        label = r.algo_label
        if r.op in last and label is not None and last[r.op] is not None and label != last[r.op]:
            out.append((r.op, r.size_bytes, last[r.op], label))
        if label is not None:
            last[r.op] = label
    return tuple(out)


# --------------------------------------------------------------------------- against nccl-tests

# torch.distributed's all_reduce and broadcast work in place, the others write a separate output: each is held to
# nccl-tests' column of the same placement.
IN_PLACE_OPS = ("all_reduce", "broadcast")


def placement_of(op: str) -> str:
    return "in_place" if op in IN_PLACE_OPS else "out_of_place"


# The bar (issue 17): within 5 % at every size, within 2 % from 64 MiB up, where the links dominate.
NCCL_TESTS_TOLERANCE = 0.05
NCCL_TESTS_TOLERANCE_LARGE = 0.02
NCCL_TESTS_LARGE_BYTES = 64 << 20


def nccl_tests_tolerance(size_bytes: int) -> float:
    return NCCL_TESTS_TOLERANCE_LARGE if size_bytes >= NCCL_TESTS_LARGE_BYTES else NCCL_TESTS_TOLERANCE


@dataclass(frozen=True)
class Agreement:
    """envcheck's busbw for one op and size against nccl-tests' (``ratio`` = envcheck / nccl-tests), like against
    like: a GPU time against ``-G`` (``theirs_mode``), else the per-call time against the eager loop."""

    op: str
    size_bytes: int
    placement: str  # in_place | out_of_place
    ours_gbps: float | None
    theirs_gbps: float
    ratio: float | None
    within: bool
    ours_algo: str | None = None
    tolerance: float = NCCL_TESTS_TOLERANCE
    basis: str | None = None
    theirs_mode: str = "eager"
    call_gbps: float | None = None
    eager_gbps: float | None = None
    theirs_runs: int = 1  # nccl-tests runs the reference is the median of
    theirs_range: tuple[float, float] | None = None  # their busbw, lowest and highest run, where several
    ours_pace_spread: float | None = None  # CollectiveRow.pace_spread of envcheck's row
    held: bool = True  # False: listed, not held (nccl-tests' eager loop is launch-bound at this size)

    @property
    def ours_unsteady(self) -> bool:
        return is_unsteady(self.ours_pace_spread)

    @property
    def theirs_spread(self) -> float | None:
        """How far nccl-tests' own runs lie apart (highest / lowest busbw - 1), where there are several."""
        if self.theirs_range is None or self.theirs_range[0] <= 0:
            return None
        return self.theirs_range[1] / self.theirs_range[0] - 1

    @property
    def reference_unsteady(self) -> bool:
        """nccl-tests' own runs lie further apart than the bar: nccl-tests itself would miss it."""
        spread = self.theirs_spread
        return spread is not None and spread > self.tolerance


def _column(t: NcclTestsRow, placement: str) -> float:
    return (t.in_place if placement == "in_place" else t.out_of_place).busbw_gbps


def _median_placement(ps: list[Placement]) -> Placement:
    wrong = [p.wrong for p in ps if p.wrong is not None]
    return Placement(statistics.median(p.time_us for p in ps), statistics.median(p.algbw_gbps for p in ps),
                     statistics.median(p.busbw_gbps for p in ps), max(wrong) if wrong else None)


def medians(rows: Iterable[NcclTestsRow]) -> tuple[NcclTestsRow, ...]:
    """Several nccl-tests runs as one row per (op, size): medians, the largest ``#wrong``, the range."""
    groups: dict[tuple[str, int], list[NcclTestsRow]] = {}
    for r in rows:
        groups.setdefault((r.op, r.size_bytes), []).append(r)
    out = []
    for same in groups.values():
        if len(same) == 1:
            out.append(same[0])
            continue
        first = same[0]
        spans = tuple((min(b), max(b)) for b in ([r.out_of_place.busbw_gbps for r in same],
                                                   [r.in_place.busbw_gbps for r in same]))
        out.append(NcclTestsRow(first.op, first.size_bytes, first.count, first.dtype,
                                _median_placement([r.out_of_place for r in same]),
                                _median_placement([r.in_place for r in same]), len(same), (spans[0], spans[1])))
    return tuple(out)


def against_nccl_tests(collectives: Collectives, rows: Sequence[NcclTestsRow], graph_rows: Sequence[NcclTestsRow] = (),
                       registered_rows: Sequence[NcclTestsRow] = (), hold_eager: bool = False) -> tuple[Agreement, ...]:
    """One ``Agreement`` per size nccl-tests ran (several runs as their ``medians``): against ``graph_rows`` (``-G``,
    unregistered) where both have a GPU time, else ``rows`` (eager); ``hold_eager``: the eager loop too, where not
    launch-bound; ``registered_rows`` (``-G``, NCCL's defaults): against envcheck's time on registered buffers."""
    ours = {(r.op, r.size_bytes): r for r in collective_rows(collectives)}
    graph = {(t.op, t.size_bytes): t for t in medians(graph_rows)}
    plain = {(t.op, t.size_bytes): t for t in medians(rows)}
    out = []
    for t in plain.values():
        placement = placement_of(t.op)
        eager = _column(t, placement)
        mine = ours.get((t.op, t.size_bytes))
        g = graph.get((t.op, t.size_bytes))
        gpu_basis = mine is None or mine.time_basis == "gpu"
        use_graph = g is not None and gpu_basis
        modes = [(g if g is not None and use_graph else t, "graph_unregistered" if use_graph else "eager", True)]
        if hold_eager and use_graph:
            # nccl-tests' eager loop, held where its calls follow each other without gaps (its own graph time).
            modes.append((t, "eager", not eager_launch_bound(t, g, placement)))
        for ref, mode, held in modes:
            out.append(_agreement(t, ref, mode, placement, mine, eager, held,
                                  mine.busbw_gbps if mine is not None else None,
                                  mine.time_basis if mine is not None else None))
    for t in medians(registered_rows):
        placement = placement_of(t.op)
        mine = ours.get((t.op, t.size_bytes))
        p = plain.get((t.op, t.size_bytes))
        out.append(_agreement(t, t, "graph", placement, mine, _column(p, placement) if p is not None else None, True,
                              mine.registered_busbw_gbps if mine is not None else None, "registered"))
    return tuple(out)


def eager_launch_bound(eager: NcclTestsRow, graph: NcclTestsRow | None, placement: str) -> bool:
    """nccl-tests' eager loop is launch-bound here: its busbw lies more than the bar below its own ``-G`` run's."""
    if graph is None or not _column(graph, placement) > 0:
        return False
    return 1 - _column(eager, placement) / _column(graph, placement) > nccl_tests_tolerance(eager.size_bytes)


def _agreement(t: NcclTestsRow, ref: NcclTestsRow, mode: str, placement: str, mine: CollectiveRow | None,
               eager: float | None, held: bool, value: float | None, basis: str | None) -> Agreement:
    theirs = _column(ref, placement)
    ratio = value / theirs if value is not None and theirs > 0 else None
    tol = nccl_tests_tolerance(t.size_bytes)
    within = ratio is not None and abs(ratio - 1) <= tol
    span = None if ref.busbw_range is None else ref.busbw_range[placement == "in_place"]
    return Agreement(t.op, t.size_bytes, placement, value, theirs, ratio, within,
                     mine.algo_label if mine is not None else None, tol, basis, mode,
                     mine.call_busbw_gbps if mine is not None else None, eager, ref.runs, span,
                     mine.pace_spread if mine is not None and basis == "gpu" else None, held)


def ring_expectation(topology: Topology, gpus: Sequence[int]) -> float | None:
    """The busbw the links allow over ``gpus``: the slowest hop of the ring through them (nccl-tests'
    doc/PERFORMANCE.md), GB/s per direction; None when a hop's bandwidth is unknown."""
    if len(gpus) < 2:
        return None
    paths = [pair_path(topology, a, gpus[(i + 1) % len(gpus)]) for i, a in enumerate(gpus)]
    hops = [p.expected_gbps for p in paths if p is not None and p.expected_gbps is not None]
    return min(hops) if len(hops) == len(gpus) else None


def pct_of_links(row: CollectiveRow, expectation: float | None) -> float | None:
    """A busbw as a share of what the links allow (a ring's bottleneck hop)."""
    if row.busbw_gbps is None or not expectation:
        return None
    return 100 * row.busbw_gbps / expectation


@dataclass(frozen=True)
class SweepAnalysis:
    """One collective sweep with its numbers: ``rows`` parallel to ``collectives.results``, each with its share of
    what the links allow (``pct_links``, against the slowest ring hop), NCCL's algorithm changes and the narrowing."""

    collectives: Collectives
    rows: tuple[CollectiveRow, ...]
    pct_links: tuple[float | None, ...]
    expectation_gbps: float | None
    changes: tuple[tuple[str, int, str | None, str | None], ...]
    narrowing: tuple[CollectiveRow, ...]
    narrowing_pct: tuple[float | None, ...]
    conclusion: Conclusion | None = None

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.op for r in self.rows))

    def largest(self, op: str | None = None) -> tuple[CollectiveRow, float | None] | None:
        """The sweep's (or ``op``'s) correct row of the largest size, with its share of the links."""
        ok = [(r, pct) for r, pct in zip(self.rows, self.pct_links, strict=True)
              if (op is None or r.op == op) and r.busbw_gbps is not None and r.status == "ok"]
        return max(ok, key=lambda x: x[0].size_bytes) if ok else None


def analyse_sweep(collectives: Collectives, topology: Topology | None = None,
                  gpus: Sequence[int] = ()) -> SweepAnalysis:
    """``gpus``: the machine's GPU of each rank, by rank (a node sweep); empty across nodes."""
    def expect(ranks: Sequence[int]) -> float | None:
        if topology is None or not gpus or any(r >= len(gpus) for r in ranks):
            return None
        return ring_expectation(topology, [gpus[r] for r in ranks])

    rows = collective_rows(collectives)
    narrow = collective_rows(collectives, narrowing=True)
    whole = expect(tuple(range(collectives.world_size)))
    return SweepAnalysis(collectives, rows, tuple(pct_of_links(r, expect(r.ranks)) for r in rows), whole,
                         algorithm_changes(rows), narrow, tuple(pct_of_links(r, expect(r.ranks)) for r in narrow),
                         collective_narrowing(collectives))


# --------------------------------------------------------------------------- narrowing a sweep's slowness


def collective_narrowing(collectives: Collectives) -> Conclusion | None:
    """Where a sweep's slowness comes from, re-derived from its stored sub-group runs; None without them."""
    if not collectives.narrowing:
        return None
    lost = tuple(o.rank for o in collectives.ranks if o.status != "ok")
    if lost:  # a lost rank is named as lost: its sub-group runs say nothing about a link
        return lost_conclusion(lost)
    hosts = collectives.hosts if len(collectives.hosts) == collectives.world_size else tuple(
        str(r) for r in range(collectives.world_size))
    margin = float(collectives.settings.get("narrow_margin", DEFAULT_NARROW_MARGIN))
    steps = tuple(NarrowStep(r.ranks, r.busbw_gbps if r.status in ("ok", "unverified") else None)
                  for r in collective_rows(collectives, narrowing=True))
    return narrowing_conclusion(steps, tuple(range(collectives.world_size)), hosts, margin)
