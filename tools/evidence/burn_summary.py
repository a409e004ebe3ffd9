"""One burn report judged by today's rules, from its JSON alone: each GPU's status, findings and every
rule's margin, and one verdict line for the burn. With ``--control NAME --control-gpu N`` the burn is a
positive control: CAUGHT when GPU N fails with the control's finding and every other GPU passes. With
``--independent`` (on the GPU machine the burn ran on): an independent GEMM loop on every GPU at once, with
the burn's dtype and shape, that the burn's sustained TFLOP/s must match within 3%.

    python tools/evidence/burn_summary.py REPORT.json [--control slow_gemm --control-gpu 1] [--independent]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from envcheck import model
from envcheck.analysis import analyse

# The finding each control must raise on its GPU.
CAUGHT_BY = {"slow_gemm": "below_siblings", "flip_bit": "sdc"}


def independent(dtype: str, n: int, k: int, index: int, seconds: float = 15.0) -> float:
    """A plain GEMM loop, not envcheck's: 1-s windows timed with CUDA events, the median after 3 s (TFLOP/s)."""
    import torch

    dev = torch.device("cuda", index)
    torch.cuda.set_device(index)
    a = torch.randn(n, k, device=dev) * 0.5
    b = torch.randn(k, n, device=dev) * 0.5
    if dtype == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)
        call = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
    else:
        t = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        a, b = a.to(t), b.to(t)
        call = lambda: torch.matmul(a, b)  # noqa: E731
    for _ in range(10):
        call()
    torch.cuda.synchronize()
    rates, start, count = [], time.monotonic(), 10
    while time.monotonic() - start < seconds:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(count):
            call()
        e.record()
        e.synchronize()
        took = s.elapsed_time(e) / 1e3
        if time.monotonic() - start > 3.0:
            rates.append(2 * n * n * k * count / took / 1e12)
        count = max(1, int(count / took))
    return statistics.median(rates)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("report")
    p.add_argument("--control", choices=sorted(CAUGHT_BY))
    p.add_argument("--control-gpu", type=int, default=0)
    p.add_argument("--independent", action="store_true")
    args = p.parse_args(argv)
    a = analyse(model.load(args.report)).burn
    assert a is not None
    print(f"{args.report}: verdict {a.verdict}; {len(a.gpus)} GPU(s), {a.burn.minutes} min, {a.burn.duration_s:.0f} s")
    for g in a.gpus:
        gr = g.rates.get("gemm")
        rate = f"GEMM {gr.phase.dtype} {gr.median:.1f} TFLOP/s (settled p95 {gr.settled or float('nan'):.1f}, " \
               f"cold best {gr.best:.1f})" if gr is not None and gr.median else "no GEMM rate"
        print(f"  GPU {g.gpu.index} {g.gpu.device.name if g.gpu.device else '?'}: {g.status}; control "
              f"{g.gpu.control}; {rate}; power {100 * (g.power_share or 0):.1f}% of {g.power_limit_w} W")
        for f in g.findings:
            print(f"    finding {f.key} {dict(f.params)}")
        for m in g.margins:
            print(f"    margin {m.rule:<18} value {m.value:9.3f} limit {m.limit:7.2f} room {m.room:8.3f}"
                  f"{'  FIRED' if m.fired else ''}")
    if args.independent:
        jobs = {g.gpu.index: g.rates["gemm"] for g in a.gpus if g.rates.get("gemm") and g.rates["gemm"].median}
        with ThreadPoolExecutor(max(1, len(jobs))) as pool:
            futures = {i: pool.submit(independent, r.phase.dtype, r.phase.shape[0], r.phase.shape[2], i)
                       for i, r in jobs.items()}
            for i, f in futures.items():
                loop, burned = f.result(), jobs[i].median
                gap = 100 * (burned - loop) / loop
                print(f"  GPU {i}: burn {burned:.1f} TFLOP/s, independent loop {loop:.1f}: {gap:+.2f}% "
                      f"({'within' if abs(gap) <= 3 else 'OUTSIDE'} 3%)")
    if args.control:
        target = next((g for g in a.gpus if g.gpu.index == args.control_gpu), None)
        caught = target is not None and CAUGHT_BY[args.control] in {f.key for f in target.findings}
        others = all(g.status == "pass" for g in a.gpus if g is not target)
        print(f"verdict: control {args.control} on GPU {args.control_gpu}: {'CAUGHT' if caught else 'MISSED'}; "
              f"other GPUs {'all pass' if others else 'NOT all pass'}")
        return 0 if caught and others else 1
    rooms = {}
    for g in a.gpus:
        for m in g.margins:
            rooms[m.rule] = min(rooms.get(m.rule, m.room), m.room)
    least = ", ".join(f"{r} {v:.2f}" for r, v in rooms.items() if r in (
        "power_share", "ceiling_margin", "sibling_margin", "throughput_drift", "clock_drift", "throttle_share"))
    print(f"verdict: healthy burn: {'PASS' if a.verdict == 'pass' else 'FALSE FAILURE'}; least room per rule: {least}")
    return 0 if a.verdict == "pass" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
