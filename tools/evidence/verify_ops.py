"""Check the new ops' headline numbers in an ``envcheck run`` report against ``triton.testing``'s timers.

    python tools/evidence/verify_ops.py [--ops OP,OP,...] REPORT.json [REPORT.json ...]

For every op of issue 22 (conv2d, layer_norm, the six reductions, softmax_fwbw, linear_fwbw; or the
ops ``--ops`` names, e.g. the default suite's) in the reports, its headline case is the one that moves
the most (memory-bound ops: bytes; compute-bound: FLOPs); a compute-bound op has a second one where
the report has it, the largest case not timed sustained (sampled over ``rep_ms`` because the GPU held
its clock under it: envcheck/bench/sampling.py). Its torch and Triton implementations (and JAX's,
where it ran) are timed again here, in this process, on fresh inputs of the same shape and dtype, and
compared with the report's time for the case:

* torch and Triton: the report's GPU time (CUDA-graph replay, launch gaps removed) against
  ``triton.testing.do_bench_cudagraph`` (the calls captured in one graph and replayed; median),
  its counterpart; each row must agree within 3%. ``do_bench`` (one eager call between two
  events after an L2 flush) is printed beside it for information: where the host takes longer to
  launch a call than the GPU to run it, its window holds the host's gaps. On an H200
  (evidence/device-logs/2026-11-26_0024Z_h200_verify_ops.txt.gz) linear forward + backward through
  autograd cost its caller 1037 us a call against 608 us of GPU time, and do_bench read 667 us;
* a case the report timed sustained (its note ``case.sustained``: the GPU slowed for power or heat
  under it) meets the reference in the same state: the call runs back to back for ``SUSTAIN_REF_S``
  first (past the first dip of the limiter's one-second average), and ``do_bench_cudagraph`` replays
  over ``SUSTAIN_REP_MS``, one period of the limiter's swing, as the report's window spans one;
* JAX: the report's launch time (one synchronised call between events, jax_impl.py), beside
  do_bench of the same blocking call. Printed for information, not judged: both are host wall
  times of a call that waits for its result, and do_bench's L2 flush on torch's stream overlaps
  JAX's work on its own.

Beside each row, the mean SM clock and power of the report's monitor window for the case and of
the reference's runs here (NVML): a power-capped kernel (cuDNN's conv2d on an H100 at its 700 W cap)
runs at the clock its GPU's temperature and recent load allow, so two processes minutes apart can
time the same kernel at clocks a few percent apart, and the clocks say when that is the difference.

Exit status: 0 all within, 1 one is not (or a headline case is missing from the reports), 2 no
CUDA GPU / torch / Triton, or a report that does not load.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# Run from a checkout without installing: the package sits beside this folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

TOLERANCE = 0.03
NEW_OPS = ("conv2d", "layer_norm", "sum_all", "sum_inner", "sum_lead", "max_all", "max_inner", "max_lead",
           "softmax_fwbw", "linear_fwbw")
ROUNDS = 3  # each timer runs this many times; the median of their medians is compared
SUSTAINED = "case.sustained"
SUSTAIN_REF_S = 1.5
SUSTAIN_REP_MS = 1000


def sustained(case: Any) -> bool:
    return any(n.key == SUSTAINED for n in case.notes)


def headline(cases: list[Any], ops: tuple[str, ...] = NEW_OPS, held: bool = False) -> dict[str, Any]:
    """op -> the measured torch case that moves the most (its key names the group); ``held``: of the
    compute-bound ops, the largest case not timed sustained."""
    from envcheck.ops import spec

    best: dict[str, Any] = {}
    for c in cases:
        if c.op not in ops or c.impl != "torch" or c.failure is not None or c.gpu is None:
            continue
        if held and (not spec(c.op).compute_bound or sustained(c)):
            continue
        t = spec(c.op).traffic(c.shape, c.dtype)
        size = t.flops if spec(c.op).compute_bound else t.bytes
        if c.op not in best or size > best[c.op][0]:
            best[c.op] = (size, c)
    return {op: c for op, (_, c) in best.items()}


def parse(argv: list[str]) -> tuple[tuple[str, ...], list[str]] | None:
    """The ops (``--ops``) and the report paths, or None for a usage error."""
    ops, paths, rest = NEW_OPS, [], list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--ops" and rest:
            ops = tuple(o.strip() for o in rest.pop(0).split(",") if o.strip())
        elif arg.startswith("--ops="):
            ops = tuple(o.strip() for o in arg.removeprefix("--ops=").split(",") if o.strip())
        elif arg.startswith("--"):
            return None
        else:
            paths.append(arg)
    return (ops, paths) if paths and ops else None


def bound_call(impl: str, op: str, dtype: str, precision: str, shape: tuple[int, ...]) -> Any:
    import torch

    from envcheck.bench import impls, jax_impl

    gen = torch.Generator(device="cuda").manual_seed(1234)
    inputs = impls.make_inputs(op, shape, dtype, "cuda", gen)
    out = impls.make_output(op, shape, dtype, "cuda")
    if impl == "torch":
        return impls.torch_impl(op, inputs, out, shape)
    if impl == "triton":
        return impls.triton_impl(op, inputs, out, precision, shape)
    return jax_impl.on_sets(op, [(inputs, out)], precision, shape)[0]


def main(argv: list[str]) -> int:
    parsed = parse(argv)
    if parsed is None:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    ops, paths = parsed
    try:
        import torch
        import triton.testing
    except Exception as e:  # noqa: BLE001 - any import failure means nothing can be checked
        print(f"cannot check: {type(e).__name__}: {e}")
        return 2
    if not torch.cuda.is_available():
        print("cannot check: no CUDA GPU")
        return 2
    from envcheck import model
    from envcheck.bench.impls import tf32_matmul
    from envcheck.bench.monitor import Monitor, window_state
    from envcheck.ops import spec
    from envcheck.probes.nvml import Nvml

    cases = []
    states: dict[Any, str] = {}  # case key -> its monitor window's clock and power
    for path in paths:
        try:
            report = model.load(path)
        except Exception as e:  # noqa: BLE001 - a report that does not load is bad input
            print(f"{path}: does not load: {e}")
            return 2
        for b in report.benches:
            cases += b.cases
            states.update((c.key, window_state(b.window_of(c))) for c in b.cases)
    heads = headline(cases, ops)
    held = {op: c for op, c in headline(cases, ops, held=True).items() if heads.get(op) is not c}
    by_key = {c.key: c for c in cases}
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}")
    nvml = Nvml()
    nvml.init()
    target = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    print(f"{'case':<52} {'impl':<7} {'envcheck us':>12} {'cudagraph us':>13} {'ratio':>7}  verdict"
          f"  {'do_bench us':>12}  SM MHz / W (report | cudagraph)")
    bad = [op for op in ops if op not in heads]
    rows = [(op, heads.get(op)) for op in ops] + list(held.items())
    for op, head in rows:
        if head is None:
            print(f"{op}: no measured torch case in the reports")
            continue
        label = f"{op} {head.dtype}/{head.precision} {'x'.join(map(str, head.shape))}"
        if spec(op).compute_bound:
            label += " (sustained)" if sustained(head) else " (held clock)"
        for impl in ("torch", "triton", "jax"):
            case = by_key.get((op, impl, head.dtype, head.precision, head.shape))
            if case is None or case.failure is not None:
                if impl != "jax":
                    print(f"{label:<52} {impl:<7} not measured in the report")
                    bad.append(f"{op}/{impl}")
                continue
            timing = case.launch if impl == "jax" else case.gpu
            if timing is None:
                print(f"{label:<52} {impl:<7} no {'launch' if impl == 'jax' else 'GPU'} time in the report")
                bad.append(f"{op}/{impl}")
                continue
            ours = timing.stats.median
            with tf32_matmul(head.precision) if spec(op).compute_bound else contextlib.nullcontext():
                fn = bound_call(impl, op, head.dtype, head.precision, head.shape)
                fn()
                torch.cuda.synchronize()
                eager_monitor, graph_monitor = Monitor(nvml, target, 0.01), Monitor(nvml, target, 0.01)
                with eager_monitor:
                    eager = 1000.0 * statistics.median(
                        triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median") for _ in range(ROUNDS))
                # JAX's own streams are not captured: do_bench only.
                if impl == "jax":
                    theirs, their_state = eager, window_state(eager_monitor.window())
                else:
                    rep = 200
                    if sustained(case):  # the state the report's window was in: the limiter's (docstring)
                        rep = SUSTAIN_REP_MS
                        until = time.perf_counter() + SUSTAIN_REF_S
                        while time.perf_counter() < until:
                            for _ in range(8):
                                fn()
                            torch.cuda.synchronize()
                    with graph_monitor:
                        theirs = 1000.0 * statistics.median(
                            triton.testing.do_bench_cudagraph(fn, rep=rep, return_mode="median") for _ in range(ROUNDS))
                    their_state = window_state(graph_monitor.window())
            ratio = ours / theirs
            ok = abs(ratio - 1.0) <= TOLERANCE
            if impl == "jax":
                verdict = "info"
            else:
                verdict = "ok" if ok else "DIFFERS"
                if not ok:
                    bad.append(f"{op}/{impl}")
            print(f"{label:<52} {impl:<7} {ours:>12.1f} {theirs:>13.1f} {ratio:>7.3f}  {verdict:<7}  {eager:>12.1f}"
                  f"  {states.get(case.key, 'n/a')} | {their_state}")
            del fn
            torch.cuda.empty_cache()
    nvml.shutdown()
    print(f"{'all within' if not bad else 'not within'} {TOLERANCE:.0%}" + (f": {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
