"""The judge's error model, fitted: the error of many correct implementations of every op, and of
the planted bugs (tests/planted.py), measured on one GPU; the constants derived from it on the CPU.

    python tools/evidence/judge_fit.py [--out DIR] [--seeds 5] [--budget-s 220]       # one GPU
    python tools/evidence/judge_fit.py --cpu-smoke [--out DIR]                          # the same, interpreted
    python tools/evidence/judge_fit.py --fit FILE... [--update | --write JSON | --markdown]  # the CPU

Measuring: every group (op, dtype, precision, shape) of the GPU suites (default and ``--quick``,
the workloads), smallest first, the ops taken in turns. Per group and seed, fresh inputs as the
worker draws them (``impls.make_inputs``; the rounds of a tiny output as group.py checks them),
each implementation's checked call on poisoned output and its statistics per output against the
float64 reference (accuracy.py): PyTorch, envcheck's Triton kernels (matmul: two tiles of its race,
taken in turns over the shapes, none raced; conv2d, the reductions and row_sum also at another
block size), and, on the first seed, each planted bug of the op. Then the op's exact inputs
(bench/exact.py) through the same implementations. While time is left (``--budget-s``: a share
of it), torch.compile and JAX at the suite's compile shapes. Writes ``judge_fit_<gpu>.json.gz``
(records of statistics, no verdict) to ``--out`` (default ``$OUT``, else the current folder).

Fitting (``--fit``, also envcheck reports): per (op or op.output, precision) and criterion, the
worst correct implementation's statistic over the model's scale (analysis/tolerance.py's
``scales``): ``--write JSON`` writes them (envcheck/analysis/judge_fit.json: analysis/tolerance.py's FIT),
``--update`` writes that file and docs/judge.md's sources and table from the same files;
by default, per op and precision, the worst correct implementation's err/bound and the mildest
planted bug's under the constants as they are now; ``--markdown``: that table as docs/judge.md holds it.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FIELDS = ("rel_l2", "max_abs", "max_rel_elem", "nonfinite", "elements", "excess_l2", "max_ulps")
CORRECT = ("torch", "triton", "compile", "jax")
Q_FLOOR = 0.02  # a fitted constant never below this share of the scale (an exact op measures 0)


# --------------------------------------------------------------------------- measuring


def _groups(smoke: bool, ops: list[str] | None = None) -> list[tuple[str, str, str, tuple[int, ...], bool]]:
    """(op, dtype, precision, shape, at a compile shape) of every suite, the ops in turns."""
    from envcheck.bench import suite
    from envcheck.ops import OP_NAMES, spec

    per_op = []
    for op in ops or OP_NAMES:
        if smoke:
            triples = suite._default_shapes(op, "interpret", False)
        else:
            triples = [t for q in (False, True) for t in suite._default_shapes(op, "cuda", q)]
        compiled = set(suite.SUITES[op].compile) | set(suite.SUITES[op].quick_compile)
        unique = dict.fromkeys(triples)
        per_op.append(sorted(((op, d, p, s, s in compiled) for d, p, s in unique),
                             key=lambda g: spec(g[0]).memory_needed_bytes(g[3], g[1])))
    out = []
    while any(per_op):
        out += [groups.pop(0) for groups in per_op if groups]
    return out


def _kernels(module: str) -> Any:
    """A kernel module (``from envcheck.bench.kernels import matmul`` gives its function)."""
    import importlib

    return importlib.import_module(f"envcheck.bench.kernels.{module}")


def _tiles(a: Any, b: Any, out: Any, precision: str) -> tuple[list[Any], Callable[..., Any]]:
    """The tiles matmul's race chooses among for this problem, and a launcher of one of them."""
    matmul = _kernels("matmul")
    sms, cc = matmul._device(a.get_device())
    ip = matmul._validate(a, b, out, precision)
    return list(matmul.candidates(a, b, out, precision, cc)), lambda tile: matmul.launcher(
        tile, a, b, out, ip, precision == "tf32", programs=sms)


@contextlib.contextmanager
def _patched(module: Any, **values: Any) -> Iterator[None]:
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _no_race(turn: list[int]) -> Callable[..., Any]:
    """matmul's race replaced by a tile taken in turns (compiled, never timed): the fit measures the
    tiles the race chooses among, not the race."""

    def race(a: Any, b: Any, out: Any, precision: str) -> tuple[Any, Any]:
        tiles, launcher = _tiles(a, b, out, precision)
        tile = tiles[turn[0] % len(tiles)]
        turn[0] += 1
        return tile, launcher(tile)

    return race


def _variants(op: str, dtype: str, precision: str, shape: tuple[int, ...], inputs: dict[str, Any], out: Any,
              turn: int) -> list[tuple[str, Callable[[], Any]]]:
    """envcheck's Triton kernel at another block size than it ships (where it has one)."""
    from envcheck.bench import impls

    if op == "matmul":
        a, b = inputs["a"], inputs["b"]
        if not a.is_cuda:
            return []  # the interpreter runs one tile
        tiles, launcher = _tiles(a, b, out, precision)
        tile = tiles[(turn + len(tiles) // 2) % len(tiles)]
        launch = launcher(tile)
        return [(tile.label, lambda: (launch(a, b, out), out)[1])]
    module, values = {"conv2d": ("conv2d", {"_BLOCK_K": 16}), "row_sum": ("row_sum", None),
                      **{f"{h}_{o}": ("reduce", {"_FLAT_BLOCK": 1024, "_LEAD_BLOCK_B": 8})
                         for h in ("sum", "max") for o in ("all", "inner", "lead")}}.get(op, (None, None))
    if module is None:
        return []
    mod = _kernels(module)
    if values is None:  # row_sum: half the columns per loop step
        config = mod._config
        values = {"_config": lambda rows, cols, size: (lambda r, c, w: (r, max(16, c // 2), w))(*config(rows, cols, size))}
    with _patched(mod, **values):
        fn = impls.triton_impl(op, inputs, out, precision, shape)  # a reduction's workspace sized for it

    def call() -> Any:
        with _patched(mod, **values):
            return fn()

    return [(",".join(f"{k}={v}" for k, v in values.items() if not callable(v)) or "half-block", call)]


def _impls(op: str, dtype: str, precision: str, shape: tuple[int, ...], inputs: dict[str, Any], out: Any,
           which: tuple[str, ...], turn: int) -> list[tuple[str, str, Any]]:
    """(implementation, configuration, call or the exception binding it raised) bound to ``inputs``."""
    from envcheck.bench.code import BuiltinCode
    from envcheck.bench.suite import PlannedCase

    code = BuiltinCode(op)
    out_list: list[tuple[str, str, Any]] = []
    for impl in which:
        try:
            if impl == "planted":
                out_list += _planted(op, dtype, precision, shape, inputs, out)
                continue
            out_list.append((impl, "", code.bound(PlannedCase(op, impl, dtype, precision, shape), [(inputs, out)])[0]))
            if impl == "triton":
                out_list += [("triton", label, f) for label, f in _variants(op, dtype, precision, shape, inputs, out,
                                                                             turn)]
        except Exception as e:  # noqa: BLE001 - e.g. JAX without a GPU backend: a record, not the run's end
            out_list.append((impl, "", e))
    return out_list


def _planted(op: str, dtype: str, precision: str, shape: tuple[int, ...], inputs: dict[str, Any],
             out: Any) -> list[tuple[str, str, Callable[[], Any]]]:
    from envcheck.bench.code import BuiltinCode
    from envcheck.bench.suite import PlannedCase
    from tests import planted

    found = []
    for name, plant in planted.PLANTED.items():
        if plant.op != op or not plant.applies(dtype, shape):
            continue
        planted.install(name)
        try:
            fn = BuiltinCode(op).bound(PlannedCase(op, "triton", dtype, precision, shape), [(inputs, out)])[0]
        finally:
            planted.restore(name)
        found.append((f"planted:{name}", "", fn))
    return found


def _records(op: str, dtype: str, precision: str, shape: tuple[int, ...], device: str, seed: int,
             which: tuple[str, ...], exact: bool, turn: int) -> list[dict[str, Any]]:
    """Every implementation's statistics per output on one seed's inputs (and the exact inputs)."""
    import torch

    from envcheck.bench import accuracy, group
    from envcheck.bench.code import BuiltinCode
    from envcheck.ops import spec

    code = BuiltinCode(op)
    gen = torch.Generator(device=device).manual_seed(seed)
    inputs = code.make_inputs(shape, dtype, device, gen)
    out = code.make_output(shape, dtype, device)
    rounds = group.CHECK_ROUNDS if spec(op).output_elements(shape) < group.SMALL_OUTPUT else 1
    bound = _impls(op, dtype, precision, shape, inputs, out, which, turn)
    first = {k: t.clone() for k, t in inputs.items()}

    def sets() -> Iterator[tuple[str, dict[str, Any] | None]]:
        """Each round's inputs (drawn as group.py draws them), then the exact inputs: one at a time."""
        for r in range(rounds):
            g = torch.Generator(device=device).manual_seed(seed * group.CHECK_ROUNDS + r)
            yield "random", first if r == 0 else code.make_inputs(shape, dtype, device, g)
        if exact:
            yield "exact", _exact(op, shape, dtype, device, seed)

    tallies: dict[tuple[str, str, str], Any] = {}
    for kind, values in sets():
        if values is None:
            continue
        for name, t in inputs.items():
            t.copy_(values[name])
        del values
        chunks = list(code.reference_chunks(inputs, shape))
        for impl, config, fn in bound:
            key = (impl, config, kind)
            if isinstance(fn, Exception) or isinstance(tallies.get(key), str):
                tallies[key] = tallies.get(key) or _failure(fn)
                continue
            try:
                result, _ = accuracy.checked_call(fn, out)
                if device == "cuda":
                    torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - one implementation's failure is a record, not the run's end
                tallies[key] = _failure(e)
                continue
            # As group.py: a compute-bound op's exact inputs are exact in its arithmetic.
            allowed = None if kind == "exact" and spec(op).compute_bound else spec(op)
            tallies.setdefault(key, accuracy.Tally(dtype, allowed, precision)).add(result, chunks)
            del result
        del chunks
    records = []
    for (impl, config, kind), tally in tallies.items():
        base = {"op": op, "dtype": dtype, "precision": precision, "shape": list(shape), "impl": impl, "config": config,
                "seed": seed, "inputs": kind}
        if isinstance(tally, str):
            records.append({**base, "output": "", "error": tally})
            continue
        parts = [(o.name, o.accuracy) for o in tally.outputs()] or [("", tally.accuracy())]
        for name, acc in parts:
            records.append({**base, "output": name, "stats": [_short(getattr(acc, f)) for f in FIELDS]})
    return records


def _failure(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def _exact(op: str, shape: tuple[int, ...], dtype: str, device: str, seed: int) -> dict[str, Any] | None:
    try:
        from envcheck.bench import exact
    except ImportError:
        return None
    import torch

    return exact.inputs(op, shape, dtype, device, torch.Generator(device=device).manual_seed(seed))


def _short(x: Any) -> Any:
    return float(f"{x:.4g}") if isinstance(x, float) else x


def _environment(device: str) -> dict[str, Any]:
    import torch
    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda, "device": "cpu"}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(device=props.name, capability=f"{props.major}.{props.minor}", sms=props.multi_processor_count,
                   cudnn=torch.backends.cudnn.version())
    with contextlib.suppress(Exception):
        import jax

        env["jax"] = jax.__version__
    return env


def measure(args: argparse.Namespace) -> int:
    if args.cpu_smoke:
        from envcheck.bench import interpret

        interpret.enable()
    import torch

    from envcheck.bench import jax_impl
    from envcheck.bench.impls import tf32_matmul
    from envcheck.ops import spec

    matmul = _kernels("matmul")

    device = "cpu" if args.cpu_smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("judge_fit: no CUDA GPU (use --cpu-smoke on a machine without one)", file=sys.stderr)
        return 2
    start = time.monotonic()
    first_pass_end = start + args.budget_s * 0.75
    records: list[dict[str, Any]] = []
    skipped: list[list[Any]] = []
    turn = [0]
    groups = _groups(args.cpu_smoke, args.ops)
    heavy = ("compile", *(("jax",) if jax_impl.installed() and not args.cpu_smoke else ()))
    for passes, deadline, which_of in ((1, first_pass_end, lambda g: ("torch", "triton", "planted")),
                                       (2, start + args.budget_s, lambda g: heavy if g[4] else ())):
        for n, g in enumerate(groups):
            op, dtype, precision, shape, _ = g
            which = which_of(g)
            if not which:
                continue
            if time.monotonic() > deadline:
                skipped.append([passes, op, dtype, precision, list(shape)])
                continue
            t0 = time.monotonic()
            seeds = range(args.seeds) if passes == 1 else range(1)
            with tf32_matmul(precision) if spec(op).compute_bound else contextlib.nullcontext(), \
                    _patched(matmul, _race=_no_race(turn)):
                for seed in seeds:
                    records += _records(op, dtype, precision, shape, device, seed,
                                        which if seed == 0 else tuple(w for w in which if w != "planted"),
                                        exact=seed == 0, turn=n)
            print(f"pass {passes} {op} {dtype}/{precision} {'x'.join(map(str, shape))}: "
                  f"{time.monotonic() - t0:.1f} s", flush=True)
            if device == "cuda":
                torch.cuda.empty_cache()
    env = _environment(device)
    slug = "".join(ch if ch.isalnum() else "-" for ch in env["device"].lower()).strip("-")
    out_dir = Path(args.out or os.environ.get("OUT") or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"judge_fit_{'smoke_' if args.cpu_smoke else ''}{slug}.json.gz"
    doc = {"format": "envcheck-judge-fit", "version": 1, "environment": env, "fields": FIELDS,
           "seeds": args.seeds, "budget_s": args.budget_s, "elapsed_s": round(time.monotonic() - start, 1),
           "skipped": skipped, "records": records}
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    failed = [r for r in records if "error" in r]
    print(f"{len(records)} records ({len(failed)} failed calls), {len(skipped)} groups skipped, "
          f"{doc['elapsed_s']} s: {path}")
    for r in failed[:20]:
        print(f"  failed: {r['op']} {r['impl']} {r['config']} {r['dtype']}/{r['precision']} {r['shape']}: {r['error']}")
    return 0


# --------------------------------------------------------------------------- fitting


def load_records(paths: list[str]) -> list[dict[str, Any]]:
    """The records of judge_fit files, and of envcheck reports (each case's statistics per output,
    on random inputs: seed, implementation and precision as recorded)."""
    out: list[dict[str, Any]] = []
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("format") == "envcheck-judge-fit":
            gpu = doc["environment"]["device"] != "cpu"
            out += [{**r, "gpu": gpu} for r in doc["records"] if "stats" in r]
            continue
        from envcheck.model import load
        from envcheck.ops import OPS

        report = load(path)
        for bench in report.benches:
            for c in bench.cases:
                if c.accuracy is None or c.op not in OPS:  # a user's op: not the built-in model's
                    continue
                parts = [(o.name, o.accuracy, o.exact) for o in c.outputs] or [("", c.accuracy, c.exact)]
                for name, acc, exact in parts:
                    base = {"op": c.op, "dtype": c.dtype, "precision": c.precision, "shape": list(c.shape),
                            "impl": c.impl, "config": c.kernel or "", "seed": bench.settings.seed, "output": name,
                            "gpu": bench.device.backend == "cuda"}
                    out.append({**base, "inputs": "random", "stats": [getattr(acc, f) for f in FIELDS]})
                    if exact is not None:
                        out.append({**base, "inputs": "exact", "stats": [getattr(exact, f) for f in FIELDS]})
    return out


def _stats(r: dict[str, Any]) -> Any:
    from envcheck.model import Accuracy

    return Accuracy(**dict(zip(FIELDS, r["stats"], strict=True)))


def ratios(records: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, float]]]:
    """Each random-input record with its statistics over the model's scales (``l2``, ``element``,
    ``excess``), and each exact-input record with its ``exact`` statistic (max_ulps)."""
    from envcheck.analysis.tolerance import scales
    from envcheck.ops import spec

    for r in records:
        acc = _stats(r)
        s = scales(spec(r["op"]), r["dtype"], r["precision"], tuple(r["shape"]), r["output"], acc.elements)
        if r["inputs"] == "exact":
            yield r, {"exact": math.inf if acc.nonfinite else acc.max_ulps or 0.0}
            continue
        q = {"l2": acc.rel_l2 / s.l2}
        if acc.max_rel_elem is not None:
            q["element"] = acc.max_rel_elem / s.element
        if acc.excess_l2 is not None:
            q["excess"] = acc.excess_l2 / s.excess
        yield r, q


def fit(records: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[float, float, float]]:
    """Per (op or op.output, precision) measured on a GPU: the worst correct implementation's statistic
    over each scale, on a GPU or under the interpreter (a CPU measurement raises a constant, never
    makes one: the interpreter's numpy order says nothing of a GPU's)."""
    from envcheck.analysis.tolerance import fit_key

    worst: dict[tuple[str, str], list[float]] = {}
    on_gpu: dict[tuple[str, str], set[int]] = {}
    for r, q in ratios(records):
        if r["impl"] not in CORRECT or r["inputs"] != "random":
            continue
        key = (fit_key(r["op"], r["output"]), r["precision"])
        w = worst.setdefault(key, [0.0, 0.0, 0.0])
        for i, name in enumerate(("l2", "element", "excess")):
            if name in q:
                w[i] = max(w[i], q[name])
                if r.get("gpu", True):
                    on_gpu.setdefault(key, set()).add(i)
    # A statistic no GPU record holds (reports before schema 4 have no excess) keeps the theory's 1.
    return {k: tuple(_round_up(max(x, Q_FLOOR)) if i in on_gpu[k] else 1.0 for i, x in enumerate(v))  # type: ignore[misc]
            for k, v in sorted(worst.items()) if k in on_gpu}


def _round_up(x: float) -> float:
    digits = 2 - int(math.floor(math.log10(x))) - 1
    return math.ceil(x * 10**digits) / 10**digits


def err_bound(records: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], float]]:
    """Each record's err/bound under analysis/tolerance.py as it is (a random-input record's worst
    criterion; an exact-input record's exact criterion)."""
    from envcheck.analysis.tolerance import judge, tolerance

    for r in records:
        acc = _stats(r)
        tol = tolerance(r["op"], r["dtype"], r["precision"], tuple(r["shape"]), r["output"], acc.elements)
        if acc.nonfinite:
            yield r, math.inf
        elif r["inputs"] == "exact":
            yield r, (acc.max_ulps or 0.0) / tol.exact
        else:
            yield r, judge(acc, tol).ratio or 0.0


def summary(records: list[dict[str, Any]]) -> list[tuple[str, str, float, str, float, str]]:
    """Per (op, precision): the worst correct err/bound (and what reached it), the mildest planted
    bug's err/bound (each bug's case judged on all its outputs and both inputs) and which bug."""
    from envcheck.ops import variant

    correct: dict[tuple[str, str], tuple[float, str]] = {}
    cases: dict[tuple[Any, ...], float] = {}
    for r, ratio in err_bound(records):
        key = (r["op"], variant(r["dtype"], r["precision"]))
        if r["impl"] in CORRECT:
            what = f"{r['impl']}{' ' + r['config'] if r['config'] else ''} {'x'.join(map(str, r['shape']))}"
            what += f" {r['output']}" if r["output"] else ""
            what += " (exact)" if r["inputs"] == "exact" else ""
            if ratio >= correct.get(key, (-1.0, ""))[0]:
                correct[key] = (ratio, what)
        elif r["impl"].startswith("planted:"):
            case = (*key, r["impl"], tuple(r["shape"]), r["seed"])
            cases[case] = max(cases.get(case, 0.0), ratio)
    mildest: dict[tuple[str, str], tuple[float, str]] = {}
    for (op, var, impl, shape, _), ratio in cases.items():
        if (op, var) not in mildest or ratio < mildest[(op, var)][0]:
            mildest[(op, var)] = (ratio, f"{impl.split(':', 1)[1]} {'x'.join(map(str, shape))}")
    keys = sorted(set(correct) | set(mildest))
    return [(op, var, *correct.get((op, var), (math.nan, "")), *mildest.get((op, var), (math.nan, "")))
            for op, var in keys]


def markdown(rows: list[tuple[str, str, float, str, float, str]]) -> str:
    lines = ["| op | precision | worst correct err/bound | reached by | mildest bug err/bound | bug | gap |",
             "|---|---|---|---|---|---|---|"]
    for op, var, good, what, bad, bug in rows:
        gap = math.nan if math.isnan(bad) or math.isnan(good) else bad / good if good > 0 else math.inf
        lines.append(f"| {op} | {var} | {_fmt(good)} | {what} | {_fmt(bad)} | {bug or '-'} | {_fmt(gap, 'x')} |")
    return "\n".join(lines) + "\n"


def _fmt(x: float, unit: str = "") -> str:
    if math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf" + unit
    return (f"{x:.2g}" if x < 100 else f"{x:.3g}") + unit


def run_fit(args: argparse.Namespace) -> int:
    records = load_records(args.fit)
    if not records:
        print("judge_fit: no records in " + ", ".join(args.fit), file=sys.stderr)
        return 2
    if args.write or args.update:
        fitted = fit(records)
        table = {"sources": [Path(f).name for f in args.fit],
                 "fit": [[key, precision, *q] for (key, precision), q in fitted.items()]}
        text = json.dumps(table, separators=(",", ":")).replace("],[", "],\n[")
        target = Path(args.write or ROOT / "envcheck" / "analysis" / "judge_fit.json")
        target.write_text(text + "\n", encoding="utf-8")
        print(f"{len(fitted)} constants: {target}")
        if not args.update:
            return 0
        from envcheck.analysis import tolerance

        tolerance.FIT.clear()
        tolerance.FIT.update(fitted)
        doc = ROOT / "docs" / "judge.md"
        files = " ".join(str(Path(f).resolve().relative_to(ROOT)) for f in args.fit)
        text = re.sub(r"(python tools/evidence/judge_fit.py --markdown --fit ).*", lambda m: m.group(1) + files,
                      doc.read_text(encoding="utf-8"))
        text = re.sub(r"(<!-- judge table[^>]*-->\n).*?(<!-- end judge table -->)",
                      lambda m: m.group(1) + markdown(summary(records)) + m.group(2), text, flags=re.S)
        doc.write_text(text, encoding="utf-8")
        print(f"its table and sources: {doc}")
        return 0
    rows = summary(records)
    if args.markdown:
        sys.stdout.write(markdown(rows))
        return 0
    for op, var, good, what, bad, bug in rows:
        print(f"{op:13} {var:10} correct {_fmt(good):>8} ({what})   bug {_fmt(bad):>8} ({bug or '-'})")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="folder for judge_fit_<gpu>.json.gz (default: $OUT, else .)")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--budget-s", type=float, help="wall time of the measurement, compiles included (220; smoke 3600)")
    p.add_argument("--cpu-smoke", action="store_true", help="Triton's interpreter on the CPU, tiny shapes, one seed")
    p.add_argument("--ops", type=lambda s: s.split(","), help="only these ops (comma-separated)")
    p.add_argument("--fit", nargs="+", metavar="FILE", help="fit from judge_fit files or envcheck reports (CPU)")
    p.add_argument("--write", metavar="JSON", help="with --fit: write the constants (envcheck/analysis/judge_fit.json)")
    p.add_argument("--markdown", action="store_true", help="with --fit: docs/judge.md's table")
    p.add_argument("--update", action="store_true", help="with --fit (files in the repository): write the constants "
                   "and docs/judge.md's sources and table")
    args = p.parse_args(argv)
    if args.fit:
        return run_fit(args)
    if args.cpu_smoke:
        args.seeds = 1
    args.budget_s = args.budget_s or (3600.0 if args.cpu_smoke else 220.0)
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
