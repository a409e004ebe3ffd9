"""Evidence for the node tests on a GPU machine: envcheck's numbers against independent ones.

    python3 tools/evidence/compare_node.py --node NODE.json --nccl-tests EAGER.txt [--nccl-tests-graph GRAPH.txt] \
        [--torch-copy] --out TABLE.md

- every collective at every size nccl-tests ran (1 MiB .. 4 GiB): envcheck's busbw against nccl-tests'
  of the same placement (in place for all_reduce and broadcast, which torch runs in place; out of place
  for the others, all_to_all included), the bar being within 5 % at every size and within 2 % from
  64 MiB up; the whole table, every size, and a one-line verdict;
- every device-to-device copy-engine copy: envcheck's bandwidth against a plain ``dst.copy_(src)``
  timed here with CUDA events (``--torch-copy``), and against the link's expected bandwidth;
- the topology, per-GPU outliers, the link checks and how long the node run took.

Which nccl-tests column is the counterpart of which envcheck time:

- envcheck's **GPU time** (its calls captured in a CUDA graph and replayed) is held against nccl-tests'
  **CUDA-graph mode** (``-G N``: the timed loop captured once and launched N times) run with
  ``NCCL_GRAPH_REGISTER=0``. Both take the host out of the loop, so what remains is NCCL's kernels and
  the links on both sides, which is why the bar applies at every size. Registration must be off on
  nccl-tests' side: in a captured graph NCCL registers nccl-tests' cudaMalloc buffers and copies
  all_gather, reduce_scatter and all_to_all through them directly, while torch's captured calls run on
  caching-allocator buffers it does not register. Measured on 2 x H100 (2026-11-25): all_gather 64 MiB
  211.9 GB/s busbw with registration off, 270.2 with it on, 211.1 eager, envcheck's GPU time 207.5.
  nccl-tests' default eager loop is the same quantity only where the GPU time hides its (C, ~5 us)
  launch cost, i.e. from a few MiB up.
- envcheck's **per-call time** (eager ``torch.distributed`` calls) is shown beside nccl-tests' **eager**
  loop, without a bar: both launch each call from the host, but a Python caller pays torch's
  dispatch on top of nccl-tests' C launch, so below ~16 MiB the per-call busbw is lower by design.

Without ``--nccl-tests-graph`` (or where envcheck has no GPU time) the eager column is the reference. A file
holding several nccl-tests runs of the same sizes is one reference: each size's median over the runs, the
table naming how many and their lowest and highest busbw (nccl-tests' own spread between runs reached 2.6%
at 1 GiB, as wide as the 2% bar).
``NODE.json`` is the report ``envcheck run --gpus all --format json`` writes. Exit status 0 when every
comparison agrees, 1 otherwise (the table and its last lines say which).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from envcheck.analysis import node as an
from envcheck.analysis.collectives import (
    Agreement,
    against_nccl_tests,
    algorithm_changes,
    collective_rows,
    pct_of_links,
    ring_expectation,
)
from envcheck.analysis.crosscheck import COPY_BAR
from envcheck.analysis.links import copy_rows, pair_paths, smi_disagreements
from envcheck.model import Bench, Check, Environment, load
from envcheck.model.node import Node
from envcheck.node import nccl_tests

COPY_TOLERANCE = COPY_BAR  # the bar run --crosscheck holds copies to (envcheck/analysis/crosscheck.py)


def load_node_report(path: str) -> tuple[Environment, tuple[Check, ...], tuple[Bench, ...], Node]:
    """The report ``envcheck run --gpus`` wrote (read and validated by the model)."""
    report = load(path)
    if report.node is None:
        raise SystemExit(f"{path}: no node section (was it written by envcheck run --gpus?)")
    return report.environment, report.checks, report.benches, report.node


def crosscheck_rows(path: str) -> tuple[tuple[nccl_tests.NcclTestsRow, ...], ...]:
    """(eager, graph with registration off, graph with NCCL's defaults) rows of nccl-tests as ``envcheck run
    --crosscheck`` ran and recorded them in the report at ``path``."""
    cc = load(path).crosscheck
    if cc is None or not cc.nccl_tests:
        raise SystemExit(f"{path}: no nccl-tests runs in its cross-checks (envcheck run --crosscheck, NCCL_TESTS_DIR)")

    def rows(mode: str) -> tuple[nccl_tests.NcclTestsRow, ...]:
        return tuple(t for r in cc.nccl_tests if r.mode == mode for t in r.rows)

    return rows("eager"), rows("graph_unregistered"), rows("graph")


def collective_lines(node: Node, rows: tuple[nccl_tests.NcclTestsRow, ...],
                     graph_rows: tuple[nccl_tests.NcclTestsRow, ...] = (),
                     registered_rows: tuple[nccl_tests.NcclTestsRow, ...] = (),
                     hold_eager: bool = False) -> tuple[list[str], bool]:
    out = ["## Collectives: envcheck vs nccl-tests at every size", "",
           "Each mode of nccl-tests against its counterpart: `graph_unregistered` (-G with NCCL_GRAPH_REGISTER=0) and `eager` "
           "(its default loop, held where its calls follow each other without gaps: within the bar of its own "
           "`graph_unregistered` time) against envcheck's GPU time on plain buffers (`gpu`); `graph` (-G with NCCL's "
           "defaults: one process drives every GPU, so NCCL registers its buffers for zero-copy transfers) against "
           "envcheck's GPU time on buffers from NCCL's allocator (`registered`). Per call beside (no bar). "
           "Bar: 5 % at every size, 2 % from 64 MiB.", "",
           "| op | size | placement | envcheck busbw GB/s | time | nccl-tests busbw GB/s | mode | ratio | bar | within |"
           " per call busbw GB/s | nccl-tests eager busbw GB/s | NCCL algo |",
           "|---|---:|---|---:|---|---:|---|---:|---:|---|---:|---:|---|"]
    sweeps = [c for c in node.collectives if c.scope == "node"]
    if not sweeps:
        return out + ["", "no collective sweep in the node report"], False
    agreements = against_nccl_tests(sweeps[0], rows, graph_rows, registered_rows=registered_rows,
                                       hold_eager=hold_eager and bool(graph_rows))
    held = [a for a in agreements if a.held]
    ok = bool(held) and all(a.within for a in held)
    for a in agreements:
        ours = f"{a.ours_gbps:.1f}" if a.ours_gbps is not None else "not measured"
        ratio = f"{a.ratio:.3f}" if a.ratio is not None else "-"
        within = ("yes" if a.within else "NO") if a.held else "not held: nccl-tests' loop is launch-bound here"
        out.append(f"| {a.op} | {_size(a.size_bytes)} | {a.placement} | {ours} | {a.basis or '-'} | "
                   f"{a.theirs_gbps:.1f} | {_mode(a)} | {ratio} | {100 * a.tolerance:.0f} % | "
                   f"{within} | {_f(a.call_gbps)} | {_f(a.eager_gbps)} | {a.ours_algo or '-'} |")
    if agreements:
        # The row furthest off in units of its own bar: a 4% row within the 5% bar is nearer than a 2.4% one
        # outside the 2% bar.
        worst = max((a for a in held if a.ratio is not None), key=lambda a: abs(a.ratio - 1) / a.tolerance,
                    default=None)
        n_ok = sum(a.within for a in held)
        modes = ", ".join(f"{m} {sum(a.theirs_mode == m for a in held)}" for m in dict.fromkeys(
            a.theirs_mode for a in held))
        where = (f"; furthest off its bar {worst.op} {_size(worst.size_bytes)}: {worst.ratio:.3f} ({worst.theirs_mode})"
                 if worst is not None else "")
        if len(held) < len(agreements):
            out += ["", f"not held: {len(agreements) - len(held)} eager rows, where nccl-tests' loop is launch-bound"]
        out += ["", f"verdict: {'PASS' if ok else 'FAIL'}: {n_ok} of {len(held)} (op, size, mode) within the bar "
                    f"(5 % at every size, 2 % from 64 MiB; {modes}){where}"]
        unsteady = [a for a in held if not a.within and a.reference_unsteady]
        if unsteady:
            out.append(f"off the bar where nccl-tests' own runs lie further apart than it ({len(unsteady)} of "
                       f"{len(held) - n_ok}): " + "; ".join(
                           f"{a.op} {_size(a.size_bytes)} (runs {100 * (a.theirs_spread or 0):.1f} % apart)"
                           for a in unsteady))
        paced = [a for a in held if not a.within and a.ours_unsteady]
        if paced:
            out.append(f"off the bar where envcheck's GPU replays ran at two paces ({len(paced)} of "
                       f"{len(held) - n_ok}; its node page flags them): " + "; ".join(
                           f"{a.op} {_size(a.size_bytes)} (mean {100 * (a.ours_pace_spread or 0):.1f} % above the "
                           f"fastest tenth)" for a in paced))
    links = ring_expectation(node.topology, node.gpus) if node.topology is not None else None
    out += ["", f"### envcheck's whole sweep (links allow {_f(links)} GB/s per direction)", "",
            "| op | size | busbw GB/s | % of links | algbw GB/s | GPU time us | registered busbw GB/s | per call us |"
            " launch-bound | cv | NCCL algo | #wrong |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|"]
    for r in collective_rows(sweeps[0]):
        if r.status == "skipped":
            out.append(f"| {r.op} | {_size(r.size_bytes)} | skipped | | | | | | | | | |")
            continue
        out.append(f"| {r.op} | {_size(r.size_bytes)} | {_f(r.busbw_gbps)} | {_f(pct_of_links(r, links))} | "
                   f"{_f(r.algbw_gbps)} | {_f(r.gpu_time_us)} | "
                   f"{_f(r.registered_busbw_gbps) if r.registered_reason is None else r.registered_reason} | "
                   f"{_f(r.call_time_us)} | "
                   f"{'yes' if r.launch_bound else 'no'} | {_f(r.cv, 3)} | {r.algo_label or r.algo_reason or '-'} | "
                   f"{r.wrong} |")
    reasons = {(r.gpu_reason, res.gpu_error) for r, res in zip(collective_rows(sweeps[0]), sweeps[0].results,
                                                                strict=True) if r.gpu_reason}
    for why, err in sorted(reasons, key=str):
        out.append(f"\nno GPU time: {why}{f' ({err})' if err else ''}")
    changes = algorithm_changes(collective_rows(sweeps[0]))
    if changes:
        out += ["", "NCCL changed algorithm between sizes: "
                + "; ".join(f"{op} at {_size(size)}: {a} -> {b}" for op, size, a, b in changes)]
    return out, ok


def _mode(a: Agreement) -> str:
    """nccl-tests' mode, and where the reference is the median of several runs, how many and their spread."""
    if a.theirs_runs < 2 or a.theirs_range is None:
        return a.theirs_mode
    lo, hi = a.theirs_range
    return f"{a.theirs_mode}, median of {a.theirs_runs} ({lo:.1f}-{hi:.1f})"


def _size(b: int) -> str:
    return f"{b >> 20} MiB"


def _f(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def torch_bandwidth_gbps(src: int, dst: int, size_bytes: int, iters: int = 20, reps: int = 5) -> float:
    """A plain ``dst.copy_(src)`` across devices on the source's stream: ``iters`` copies back to back between two
    CUDA events, median over ``reps`` such loops.

    The copies are queued without a wait between them, as envcheck's are, so each copy's host launch is hidden
    behind the one before it. Timing each copy on its own, with a wait after it, as this did before, puts the
    launch into the time when the host is slow to issue it: on 2 x H100 at 256 MiB it read 368.1 GB/s in the
    1935Z call (evidence/device-logs/2026-11-26_1935Z_2x-h100_node_vs_nccl-tests.md, envcheck 393.1: "copies agree:
    False"), 382.5 at 1949Z, 384.3-388.2 before. Both ways side by side in six rounds
    (evidence/device-logs/2026-11-26_2001Z_2x-h100_torch_copy_reference.txt.gz): a wait after each copy 384.8-388.0
    GB/s, back to back 387.4-389.6, envcheck's copy engine 393.3-394.2. What is left, about 1.3% (9 us a copy),
    is not explained here: envcheck times each copy between events of its own, on streams of its own, and takes
    the median; this loop holds all that passes from its first copy's start to its last one's end on the current
    streams. It is within COPY_TOLERANCE.
    """
    import torch

    from envcheck.crosscheck.copy_worker import time_copy

    return size_bytes / (statistics.median(time_copy(torch, src, dst, size_bytes, iters, reps, 3)) * 1e-6) / 1e9


def copy_lines(node: Node, torch_copy: bool) -> tuple[list[str], bool]:
    out = ["## Peer copies", "",
           "| kind | method | src -> dst | directions | envcheck GB/s | expected GB/s | % of expected | via | wrong |"
           " plain torch copy GB/s | ratio |", "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    ok = True
    if node.peer is None:
        return out + ["", "no peer copies in the node report"], False
    for r in copy_rows(node.peer, node.topology):
        plain = ratio = "-"
        if torch_copy and r.kind == "d2d" and r.method == "copy_engine" and r.directions == 1 and r.gbps:
            g = torch_bandwidth_gbps(r.src, r.dst, node.peer.settings.get("size_bytes", 1 << 28))
            plain, ratio = f"{g:.1f}", f"{r.gbps / g:.3f}"
            ok = ok and abs(r.gbps / g - 1) <= COPY_TOLERANCE
        src = "host" if r.src is None else f"GPU {r.src}"
        dst = "host" if r.dst is None else f"GPU {r.dst}"
        out.append(f"| {r.kind} | {r.method} | {src} -> {dst} | {r.directions} | {_f(r.gbps)} | {_f(r.expected_gbps)} | "
                   f"{_f(r.pct_expected)} | {r.via or '-'} | {r.wrong if r.error is None else r.error} | {plain} | {ratio} |")
    return out, ok


def node_lines(env: Environment, checks: tuple[Check, ...], benches: tuple[Bench, ...], node: Node,
               wall_s: float | None) -> list[str]:
    out = ["## Node", "", f"host {node.host}, GPUs {list(node.gpus)}, node tests {node.duration_s} s, "
                          f"whole run {wall_s} s", ""]
    if node.topology is not None:
        for p in pair_paths(node.topology):
            out.append(f"- GPU {p.a} <-> GPU {p.b}: {p.via}, {p.nvlinks} NVLinks x {_f(p.link_gbps, 3)} GB/s = "
                       f"{_f(p.expected_gbps)} GB/s per direction expected; PCIe level {p.pcie_level}")
        for a, b, ours, smi in smi_disagreements(node.topology):
            out.append(f"- nvidia-smi topo -m disagrees for GPU {a}-{b}: NVML says {ours}, nvidia-smi {smi}")
    margin = float(node.settings.get("outlier_margin", 0.05))
    for b in benches:
        r = an.gpu_rates(b)
        out.append(f"- GPU {r.index}: copy {_f(r.bandwidth_gbps)} GB/s, matmul {_f(r.matmul_tflops)} TFLOP/s "
                   f"({r.matmul_key}), {len(b.cases)} cases, {b.duration_s} s")
    for o in an.outliers(benches, margin):
        c = an.gpu_condition(env, o.gpu)
        out.append(f"- OUTLIER GPU {o.gpu}: {o.metric} {o.value:.1f} vs siblings' median {o.siblings_median:.1f} "
                   f"({100 * o.shortfall:.1f}% below); SM {c.sm_clock_mhz}/{c.sm_clock_max_mhz} MHz, "
                   f"{c.temperature_c} C, limit {c.power_limit_w} W, PCIe Gen{c.pcie_gen} x{c.pcie_width}, "
                   f"replays {c.pcie_replay}, NVLink errors {c.nvlink_errors}")
    for s in node.skipped:
        out.append(f"- skipped {s.test}: {s.reason}")
    out.append(f"- Xid source: {node.xid.source if node.xid else None}, events: {len(node.xid.events) if node.xid else '-'}")
    out += ["", "### Link checks", ""]
    out += [f"- {c.status.upper()} {c.id}: {c.finding}" for c in checks if c.id.startswith("links.")]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--node", required=True)
    p.add_argument("--nccl-tests", help="nccl-tests' default (eager) output (else --from-crosscheck)")
    p.add_argument("--from-crosscheck", action="store_true",
                   help="nccl-tests' rows from the report's cross-checks (envcheck run --crosscheck): every mode, held")
    p.add_argument("--nccl-tests-graph", help="nccl-tests' output with -G (CUDA-graph mode), NCCL_GRAPH_REGISTER=0")
    p.add_argument("--nccl-tests-registered", help="nccl-tests' output with -G and NCCL's defaults (registration)")
    p.add_argument("--hold-eager", action="store_true",
                   help="hold nccl-tests' eager loop too (against the GPU time, where it is not launch-bound)")
    p.add_argument("--torch-copy", action="store_true")
    p.add_argument("--out", required=True)
    p.add_argument("--wall-s", type=float, help="how long the node run took (the caller timed it)")
    a = p.parse_args(argv)
    env, checks, benches, node = load_node_report(a.node)
    if a.from_crosscheck:
        rows, graph_rows, registered_rows = crosscheck_rows(a.node)
        hold_eager = True
    elif a.nccl_tests:
        rows = nccl_tests.parse(Path(a.nccl_tests).read_text(encoding="utf-8", errors="replace"))
        graph_rows = (nccl_tests.parse(Path(a.nccl_tests_graph).read_text(encoding="utf-8", errors="replace"))
                      if a.nccl_tests_graph else ())
        registered_rows = (nccl_tests.parse(Path(a.nccl_tests_registered).read_text(encoding="utf-8", errors="replace"))
                           if a.nccl_tests_registered else ())
        hold_eager = a.hold_eager
    else:
        p.error("give --nccl-tests or --from-crosscheck")
    coll, coll_ok = collective_lines(node, rows, graph_rows, registered_rows, hold_eager)
    copies, copy_ok = copy_lines(node, a.torch_copy)
    lines = ["# envcheck node tests against nccl-tests and a plain torch copy", ""] + coll + [""] + copies + [""]
    lines += node_lines(env, checks, benches, node, a.wall_s)
    lines += ["", f"collectives agree: {coll_ok}; copies agree: {copy_ok}"]
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0 if coll_ok and copy_ok else 1


if __name__ == "__main__":
    sys.exit(main())
