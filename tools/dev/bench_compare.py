"""How fast, and in how much memory, ``envcheck diff`` compares two large reports.

Synthesises two schema-2 reports of ``--cases`` cases each through the model classes (the
environment and checks of a committed H200 report, every op, implementation and dtype, sample
counts drawn from those of the committed H200 runs, lognormal noise per sample, one NVML
window per group of cases, a run-to-run shift per case and a 10% slowdown of one case in
twenty on the second side), writes them, then runs ``envcheck diff A B --format json`` in a
child process and reports its wall time and peak resident memory (``ru_maxrss`` of the
child), and, in this process, the time of each stage (load, analyse, compare, JSON).

    python tools/dev/bench_compare.py                    # 230 and 20,000 cases
    python tools/dev/bench_compare.py --cases 20000 --keep /tmp/big   # keep the reports
    python tools/dev/bench_compare.py --samples schema1                # up to 1000 samples a timing

Budget (README of the compare issue): 2 full-suite reports (~230 cases) in 2 s; 20,000 cases
in 10 s and 500 MB, on a 2-core machine.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from envcheck import model  # noqa: E402
from envcheck.model import Accuracy, Bench, BenchDevice, Case, CeilingRun, MonitorWindow, Report, Settings, Timing  # noqa: E402

TEMPLATE = ROOT / "evidence" / "2026-11-22_0104Z_vm_h200.json.gz"

# Sample counts of the committed H200 runs: GPU time (graph replay) and launch time (eager).
GPU_SAMPLES = (1000, 1000, 994, 993, 990, 978, 880, 756, 731, 600, 420, 311, 270, 136, 95, 68, 60, 48, 33, 16)
LAUNCH_SAMPLES = (1000, 980, 700, 520, 420, 374, 354, 300, 250, 200, 141, 138, 95, 71, 48, 30)

VARIANTS = (("fp32", "fp32"), ("fp16", "fp16"), ("bf16", "bf16"))
MATMUL_VARIANTS = (("fp32", "fp32"), ("fp32", "tf32"), ("fp16", "fp16"), ("bf16", "bf16"))
IMPLS = ("torch", "triton", "compile")
BANDWIDTH_GBPS = 4300.0


# Sample counts: ``current`` caps the committed runs' counts at what a timing of this version
# holds (``Settings.max_samples``, 150: model/codec keeps every sample, so the cap is what keeps
# a report small); ``schema1`` keeps them as the committed schema-1 runs had them (up to 1000).
SAMPLE_CAPS = {"current": 150, "schema1": 1000}
SAMPLE_CAP = SAMPLE_CAPS["current"]
SAMPLE_NAME = "current"


def _timing(rng: random.Random, method: str, median_us: float, counts: tuple[int, ...], cv: float) -> Timing:
    n = min(rng.choice(counts), SAMPLE_CAP)
    return Timing.from_samples(method, [median_us * math.exp(rng.gauss(0.0, cv)) for _ in range(n)])


def _groups(count: int):
    """(op, dtype, precision, shape) groups, each measured by every implementation, until
    ``count`` cases: the suite's ops and sizes, stepped so every group is a distinct problem."""
    made = 0
    i = 0
    while made < count:
        op = ("vector_add", "relu", "matmul", "softmax", "row_sum")[i % 5]
        step = i // 5
        if op == "matmul":
            dtype, precision = MATMUL_VARIANTS[step % 4]
            s = 256 + 16 * (step // 4)
            shape: tuple[int, ...] = (s, s, s)
        elif op in ("softmax", "row_sum"):
            dtype, precision = VARIANTS[step % 3]
            shape = (1024 + 8 * (step // 3), 4096)
        else:
            dtype, precision = VARIANTS[step % 3]
            # Powers of two first, then sizes that are never a power of two: every key distinct.
            shape = (1024 << (step % 19) if step < 19 * 3 else 1000 + 64 * step,)
        yield op, dtype, precision, shape
        made += len(IMPLS)
        i += 1


def _base_us(op: str, dtype: str, shape: tuple[int, ...]) -> float:
    from envcheck.ops import spec

    t = spec(op).traffic(shape, dtype)
    if spec(op).compute_bound:
        return max(3.0, t.flops / 600e12 * 1e6)
    return max(1.1, t.bytes / (BANDWIDTH_GBPS * 1e3))


def synthesise(cases: int, seed: int, template: Report, *, shift: float = 0.0, slow_every: int = 0) -> Report:
    """A report of ``cases`` cases. ``shift``: sd of a per-case run-to-run log shift;
    ``slow_every``: every k-th case 10% slower (0: none)."""
    rng = random.Random(seed)
    truth_rng = random.Random(0)  # the same true times on both sides, drawn apart from the noise
    out: list[Case] = []
    windows: list[MonitorWindow] = []
    for op, dtype, precision, shape in _groups(cases):
        w = len(windows)
        nt = rng.randint(10, 40)
        windows.append(MonitorWindow(
            interval_s=0.02, t_s=[0.02 * k for k in range(nt)], sm_mhz=[1980.0] * nt, mem_mhz=[3201.0] * nt,
            temperature_c=[40.0 + rng.random() for _ in range(nt)], power_w=[300.0 + 50 * rng.random() for _ in range(nt)],
            reasons=tuple(() for _ in range(nt))))
        truth = _base_us(op, dtype, shape)
        for impl in IMPLS:
            if len(out) >= cases:
                break
            t = truth * truth_rng.uniform(0.9, 1.1) * math.exp(rng.gauss(0.0, shift))
            if slow_every and len(out) % slow_every == 0:
                t *= 1.10
            out.append(Case(
                op=op, impl=impl, dtype=dtype, precision=precision, shape=shape,
                gpu=_timing(rng, "cuda_graph", t, GPU_SAMPLES, 0.01),
                launch=_timing(rng, "cuda_events", t + 4.0, LAUNCH_SAMPLES, 0.05),
                compile_s=0.4 if impl != "torch" else None,
                accuracy=Accuracy(1e-7, 1e-6, 1e-7, 0, math.prod(shape)),
                window=w, rotation_sets=2 if op != "matmul" else 1,
                kernel="pointer 64x128x64 s4 w4" if impl == "triton" and op == "matmul" else None,
            ))
    tb = template.bench
    assert tb is not None
    device = BenchDevice("cuda", "NVIDIA H200", 0, None, 132, 62914560, 150109880320, "9.0")
    runs = (CeilingRun("copy", "fp32", (1 << 28,), Timing.from_samples("cuda_graph", [500.0 + rng.random() for _ in range(100)])),)
    bench = Bench(device=device, settings=Settings(max_samples=SAMPLE_CAP), cases=tuple(out), ceiling_runs=runs,
                  windows=tuple(windows), started=template.created, duration_s=3600.0, versions=dict(tb.versions))
    return Report(tool_version=template.tool_version, created=template.created, host=template.host, kind="run",
                  environment=template.environment, checks=template.checks, benches=(bench,))


def _child_run(args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MiB, of this child alone: ``wait4``) and exit status of a child."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stderr is not None
    err = proc.stderr.read()  # small: one line per regression at most
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        print(err, file=sys.stderr)
    return wall, usage.ru_maxrss / 1024, proc.returncode  # KiB on Linux


def stages(a: Path, b: Path) -> None:
    """The time of each stage of a diff, in this process."""
    from envcheck.analysis import analyse
    from envcheck.compare.diff import diff_analysed
    from envcheck.compare.export import to_json

    t0 = time.perf_counter()
    ra, rb = model.load(a), model.load(b)
    t1 = time.perf_counter()
    aa, ab = analyse(ra), analyse(rb)
    t2 = time.perf_counter()
    d = diff_analysed([(a.name, aa), (b.name, ab)])
    t3 = time.perf_counter()
    to_json(d)
    t4 = time.perf_counter()
    cmp = d.comparisons[0]
    # The second report slowed every 20th case (in plan order, which the pairs keep) by 10%.
    planted = [c for i, c in enumerate(cmp.cases) if i % 20 == 0]
    rest = [c for i, c in enumerate(cmp.cases) if i % 20]
    print(f"  stages in-process: load {t1 - t0:.2f} s, analyse {t2 - t1:.2f} s, compare {t3 - t2:.2f} s, "
          f"json {t4 - t3:.2f} s; peak RSS of this process "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"  planted 10% slowdowns called slower: {sum(c.verdict == 'slower' for c in planted)} of {len(planted)}; "
          f"other rows called slower or faster: {sum(c.verdict in ('slower', 'faster') for c in rest)} of {len(rest)} "
          f"(1% run-to-run noise per case)")


def write(cases: int, folder: Path) -> tuple[Path, Path]:
    template = model.load(TEMPLATE)
    start = time.perf_counter()
    pa, pb = folder / f"a_{cases}.json", folder / f"b_{cases}.json"
    for p in (pa, pb):
        if p.exists():
            p.unlink()
    model.dump(synthesise(cases, 1, template), pa)
    model.dump(synthesise(cases, 2, template, shift=0.01, slow_every=20), pb)
    print(f"{cases} cases per report: synthesised and written in {time.perf_counter() - start:.1f} s "
          f"({pa.stat().st_size / 2**20:.0f} MiB each)", flush=True)
    return pa, pb


def bench(cases: int, folder: Path, with_stages: bool) -> None:
    # Each step in a child of this small process: a child's peak RSS counts the memory of the
    # process it was forked from (Linux keeps the high-water mark across exec), so the
    # reports are never synthesised here.
    me = [sys.executable, str(Path(__file__).resolve())]
    subprocess.run([*me, "--write", str(cases), str(folder), "--samples", SAMPLE_NAME], check=True)
    pa, pb = folder / f"a_{cases}.json", folder / f"b_{cases}.json"
    wall, rss, rc = _child_run([sys.executable, "-m", "envcheck", "diff", str(pa), str(pb), "--format", "json"])
    print(f"  envcheck diff --format json: {wall:.2f} s wall, peak RSS {rss:.0f} MiB (exit {rc})", flush=True)
    if with_stages:
        subprocess.run([*me, "--stages-of", str(pa), str(pb)], check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, action="append", help="cases per report (repeatable; default 230 and 20000)")
    ap.add_argument("--keep", type=Path, help="write the reports here and keep them (default: a temporary folder)")
    ap.add_argument("--stages", action="store_true", help="also time each stage in a process of its own")
    ap.add_argument("--samples", choices=tuple(SAMPLE_CAPS), default="current",
                    help="samples per timing: as this version writes them (at most 150, default), or as "
                         "schema-1 reports had them (up to 1000)")
    ap.add_argument("--write", nargs=2, metavar=("CASES", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--stages-of", nargs=2, type=Path, metavar=("A", "B"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    global SAMPLE_CAP, SAMPLE_NAME
    SAMPLE_CAP, SAMPLE_NAME = SAMPLE_CAPS[args.samples], args.samples
    if args.write:
        write(int(args.write[0]), Path(args.write[1]))
        return 0
    if args.stages_of:
        stages(*args.stages_of)
        return 0
    sizes = args.cases or [230, 20000]
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            bench(n, args.keep, args.stages)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for n in sizes:
                bench(n, Path(tmp), args.stages)
    return 0


if __name__ == "__main__":
    sys.exit(main())
