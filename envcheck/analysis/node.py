"""A node analysed once: GPUs behind their siblings, what keeps a node run from passing (its problems) and the
whole ``NodeAnalysis``, built with the collective sweeps (``collectives``), the links and copies (``links``) and
the error counters (``counters``); import those names from their own modules.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.analysis.ceilings import BANDWIDTH, MEASURED, Ceilings, ceilings
from envcheck.analysis.collectives import SweepAnalysis, analyse_sweep, collective_rows
from envcheck.analysis.counters import (
    CounterChange,
    CounterRow,
    UnreadCounter,
    counter_interval_s,
    counter_rows,
)
from envcheck.analysis.links import (
    CopyRow,
    GpuNvlinks,
    PairPath,
    copy_rows,
    gpu_nvlinks,
    pair_paths,
    smi_disagreements,
)
from envcheck.analysis.results import CaseResult, case_results
from envcheck.model import Bench, Environment
from envcheck.model.bench import ParamValue
from envcheck.model.node import Node
from envcheck.outside_json import Json

if TYPE_CHECKING:
    from envcheck.analysis import BenchAnalysis

# --------------------------------------------------------------------------- GPUs against their siblings

DEFAULT_OUTLIER_MARGIN = 0.05


@dataclass(frozen=True)
class GpuRates:
    """What one GPU's suite says of its speed: its measured bandwidth and its best torch matmul rate."""

    index: int | None
    bandwidth_gbps: float | None
    matmul_tflops: float | None
    matmul_key: str | None  # which case the rate comes from, e.g. "bf16 4096x4096x4096"


def gpu_rates(bench: Bench) -> GpuRates:
    """The rates of one bench: the largest torch matmul with a GPU time, and the measured bandwidth."""
    ceils = ceilings(Environment(), bench)  # measured limits need nothing from the environment
    return rates_from(bench, ceils, case_results(bench, ceils))


def rates_from(bench: Bench, ceils: Ceilings, results: Sequence[CaseResult]) -> GpuRates:
    """:func:`gpu_rates` from a bench's ceilings and case results already derived (``BenchAnalysis``)."""
    best: tuple[int, float, str] | None = None
    # On a GPU only a GPU time counts; a suite run on the CPU has host-clock times only, and its rate is
    # the CPU's own (shown in GFLOP/s, never judged against a GPU's).
    on_gpu = bench.device.backend == "cuda"
    for r in results:
        c = r.case
        if c.op != "matmul" or c.impl != "torch" or (on_gpu and c.gpu is None) or r.status == "error" \
                or r.tflops is None:
            continue
        m, n, k = c.shape
        label = f"{c.dtype} {m}x{n}x{k}" + ("" if c.precision == c.dtype else f" {c.precision}")
        # The largest problem is the one closest to the GPU's peak; among equals, the fastest precision.
        cand = (r.traffic.flops, r.tflops, label)
        if best is None or (cand[0], cand[1]) > (best[0], best[1]):
            best = cand
    bw = ceils.get(BANDWIDTH, MEASURED)
    return GpuRates(bench.device.index, bw.value if bw else None,
                    best[1] if best else None, best[2] if best else None)


@dataclass(frozen=True)
class Outlier:
    """A GPU more than ``margin`` below the median of its siblings on one metric."""

    gpu: int | None
    metric: str  # bandwidth_gbps | matmul_tflops
    value: float
    siblings_median: float
    shortfall: float  # fraction below the median


def outliers(benches: Sequence[Bench], margin: float = DEFAULT_OUTLIER_MARGIN) -> tuple[Outlier, ...]:
    """GPUs whose copy bandwidth or matmul rate falls more than ``margin`` below their siblings' median
    (matmul rates only between GPUs whose best case is the same problem)."""
    return outliers_from_rates([gpu_rates(b) for b in benches], margin)


def outliers_from_rates(rates: Sequence[GpuRates], margin: float = DEFAULT_OUTLIER_MARGIN) -> tuple[Outlier, ...]:
    """:func:`outliers` from rates already derived."""
    out: list[Outlier] = []
    for metric in ("bandwidth_gbps", "matmul_tflops"):
        for i, r in enumerate(rates):
            value = getattr(r, metric)
            if value is None:
                continue
            sib = [getattr(s, metric) for j, s in enumerate(rates) if j != i and getattr(s, metric) is not None
                   and (metric != "matmul_tflops" or s.matmul_key == r.matmul_key)]
            if not sib:
                continue
            med = statistics.median(sib)
            if med > 0 and value < med * (1 - margin):
                out.append(Outlier(r.index, metric, value, med, 1 - value / med))
    return tuple(out)


@dataclass(frozen=True)
class GpuCondition:
    """What an outlier GPU looked like when probed: clocks, heat, power limit, PCIe link, error counters."""

    index: int
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    temperature_c: float | None = None
    power_limit_w: float | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    throttle_reasons: list[str] | None = None
    pcie_replay: int | None = None
    nvlink_errors: dict[str, int] | None = None  # totals per counter over the GPU's links


def gpu_condition(env: Environment, index: int) -> GpuCondition:
    """The facts shown beside an outlier, read from the environment (``gpus`` and the ``links`` section)."""
    gpu = next((g for g in env.gpus if g.index == index), None)

    def g(key: str) -> Json:
        return gpu.get(key) if gpu is not None else None

    links = env.get("links", f"gpu{index}.nvlink_errors")
    totals: dict[str, int] | None = None
    if isinstance(links, list):
        totals = {}
        for lk in links:
            for k, v in lk.items():
                if k != "link" and isinstance(v, int):
                    totals[k] = totals.get(k, 0) + v
    return GpuCondition(index, g("sm_clock_mhz"), g("sm_clock_max_mhz"), g("temperature_c"), g("power_limit_w"),
                        g("pcie_gen"), g("pcie_gen_max"), g("pcie_width"), g("pcie_width_max"), g("throttle_reasons"),
                        env.get("links", f"gpu{index}.pcie_replay"), totals)


# --------------------------------------------------------------------------- what went wrong on a node

# Node tests that were skipped because they do not apply here, not because something failed.
NOT_APPLICABLE = ("no_cuda", "not_requested", "single_gpu")
# A node test that raised: ``envcheck.node.steps`` records ``f"{CRASHED}: {exception}"`` as its reason.
CRASHED = "crashed"

# Every key the node runner and this module hand to the presentation, each phrased in the catalogues
# (tests/test_node_view.py holds them against the string literals of the modules that write them).
PROBLEM_KEYS = ("step_failed", "peer_failed", "copy_failed", "copy_wrong", "sweep_failed", "collective_wrong",
                "collective_failed", "collective_not_run", "outlier")
NODE_TESTS = ("topology", "counters", "peer_copies", "collectives", "xid")
SKIP_REASONS = (*NOT_APPLICABLE, CRASHED)
# A size not run (CollectiveResult.skipped) and why no algorithm is known for a row (CollectiveRow.algo_reason).
SIZE_SKIPS = ("out_of_memory", "not_run")
ALGO_REASONS = ("backend_not_nccl", "no_nccl_log", "nccl_p2p", "not_in_nccl_log")
# Errors recorded as keys by the copy worker's and the sweep's runners; any other error is an exception's last line.
RUN_ERRORS = ("interrupted", "timed_out", "launch_failed", "exit_status", "ranks_failed", "no_done_event",
              "no_peer_access")
COLLECTIVE_STATUSES = ("ok", "wrong", "error", "skipped", "unverified")
OUTLIER_METRICS = ("bandwidth_gbps", "matmul_tflops")


def skip_reason(reason: str) -> tuple[str, str | None]:
    """A ``NodeSkip`` reason as (key, detail): ``crashed: OSError: x`` is (``crashed``, ``OSError: x``)."""
    head, sep, detail = reason.partition(": ")
    return (CRASHED, detail) if head == CRASHED and sep else (reason, None)


@dataclass(frozen=True)
class NodeProblem:
    """Something about a node run a user must hear about: a key (``PROBLEM_KEYS``) and its parameters."""

    key: str
    params: tuple[tuple[str, ParamValue], ...] = ()


def node_problems(node: Node, benches: Sequence[Bench] = (), margin: float | None = None,
                  found: Sequence[Outlier] | None = None) -> tuple[NodeProblem, ...]:
    """Everything that keeps a node run from passing (a size skipped for memory is none; one never reached is).
    ``found``: the outliers already derived from ``benches``."""
    out: list[NodeProblem] = []
    for s in node.skipped:
        if s.reason not in NOT_APPLICABLE:
            key, detail = skip_reason(s.reason)
            out.append(NodeProblem("step_failed", (("test", s.test), ("reason", key), ("detail", detail))))
    if node.peer is not None:
        if node.peer.error:
            out.append(NodeProblem("peer_failed", (("error", node.peer.error),)))
        for c in node.peer.copies:
            where = (("kind", c.kind), ("method", c.method), ("src", c.src), ("dst", c.dst))
            if c.error and c.error != "no_peer_access":
                out.append(NodeProblem("copy_failed", (*where, ("error", c.error))))
            elif c.wrong:
                out.append(NodeProblem("copy_wrong", (*where, ("wrong", c.wrong))))
    for sweep in node.collectives:
        if sweep.error:
            out.append(NodeProblem("sweep_failed", (("scope", sweep.scope), ("error", sweep.error))))
        for r in collective_rows(sweep):
            at = (("op", r.op), ("size_bytes", r.size_bytes))
            if r.status == "wrong":
                out.append(NodeProblem("collective_wrong", (*at, ("wrong", r.wrong))))
            elif r.status in ("error", "unverified"):
                out.append(NodeProblem("collective_failed", (*at, ("status", r.status))))
            elif r.status == "skipped" and not any(
                    x.skipped == "out_of_memory" for x in sweep.results if x.op == r.op and x.size_bytes == r.size_bytes):
                out.append(NodeProblem("collective_not_run", at))
    for o in (outliers(benches, outlier_margin(node, margin)) if found is None else found):
        out.append(NodeProblem("outlier", (("gpu", o.gpu), ("metric", o.metric), ("shortfall", o.shortfall))))
    return tuple(out)


def outlier_margin(node: Node, margin: float | None = None) -> float:
    """The margin a node run was judged with: the one given, else the run's setting, else the default."""
    return float(node.settings.get("outlier_margin", DEFAULT_OUTLIER_MARGIN)) if margin is None else margin


@dataclass(frozen=True)
class GpuRow:
    """One GPU of a node: its rates, cases' tally, whether it fell behind its siblings and its condition."""

    index: int | None
    name: str
    backend: str
    rates: GpuRates
    cases: int
    passed: int
    failed: int
    errors: int
    outliers: tuple[Outlier, ...] = ()
    condition: GpuCondition | None = None


@dataclass(frozen=True)
class NodeAnalysis:
    """Everything derived from one node's results (``node`` None: a fleet node whose tests did not report)."""

    node: Node | None
    gpus: tuple[GpuRow, ...]
    margin: float
    outliers: tuple[Outlier, ...]
    paths: tuple[PairPath, ...]
    disagreements: tuple[tuple[int, int, str, str], ...]
    copies: tuple[CopyRow, ...]
    sweeps: tuple[SweepAnalysis, ...]
    counters: tuple[CounterRow, ...]
    counters_over_limit: tuple[CounterChange, ...]
    counters_unread: tuple[UnreadCounter, ...]
    problems: tuple[NodeProblem, ...]
    # Seconds between the counter readings around the node tests (None: not both read, or a reboot between).
    counters_interval_s: float | None = None
    nvlinks: tuple[GpuNvlinks, ...] = ()  # per GPU of the topology, in its order

    @property
    def status(self) -> str:
        return "fail" if self.problems else "pass"

    @property
    def slowest_copy(self) -> CopyRow | None:
        """The slowest one-way copy between two GPUs: the node's weakest peer link."""
        d2d = [r for r in self.copies if r.kind == "d2d" and r.directions == 1 and r.gbps is not None]
        return min(d2d, key=lambda r: r.gbps or 0.0) if d2d else None

    def path(self, a: int, b: int) -> PairPath | None:
        return next((p for p in self.paths if {p.a, p.b} == {a, b}), None)

    def gpu_nvlinks(self, gpu: int) -> GpuNvlinks | None:
        return next((g for g in self.nvlinks if g.gpu == gpu), None)


def analyse_node(node: Node | None, benches: Sequence[BenchAnalysis], env: Environment | None, margin: float | None = None) -> NodeAnalysis:
    """``benches``: the node's ``BenchAnalysis`` per GPU; ``env``: where the GPUs' conditions are read."""
    m = outlier_margin(node, margin) if node is not None else (DEFAULT_OUTLIER_MARGIN if margin is None else margin)
    rates = [rates_from(ba.bench, ba.ceilings, ba.results) for ba in benches]
    found = outliers_from_rates(rates, m)
    rows = []
    for ba, r in zip(benches, rates, strict=True):
        mine = tuple(o for o in found if o.gpu == r.index and r.index is not None)
        t = ba.summary.overall
        cond = gpu_condition(env, r.index) if mine and env is not None and r.index is not None else None
        rows.append(GpuRow(r.index, ba.bench.device.name, ba.bench.device.backend, r, t.cases, t.passed, t.failed,
                           t.errors, mine, cond))
    if node is None:
        return NodeAnalysis(None, tuple(rows), m, found, (), (), (), (), (), (), (), ())
    topo = node.topology
    counters, over, unread = counter_rows(node.counters_before, node.counters_after)
    sweeps = tuple(analyse_sweep(c, topo, node.gpus if c.scope == "node" else ()) for c in node.collectives)
    return NodeAnalysis(
        node, tuple(rows), m, found,
        pair_paths(topo) if topo is not None else (), smi_disagreements(topo) if topo is not None else (),
        copy_rows(node.peer, topo) if node.peer is not None else (), sweeps, counters, over, unread,
        node_problems(node, (), m, found), counter_interval_s(node.counters_before, node.counters_after),
        tuple(gpu_nvlinks(g) for g in topo.gpus) if topo is not None else ())

