"""Times a GPU's headline cases with ``triton.testing.do_bench_cudagraph`` (``main``; the parent:
``crosscheck.kernels``), each the suite's own call (bench.impls, its TF32 switch, sets of buffers, matmul tile)
after an untimed ``settle_ms``. Plan and events::

    {"gpu", "rounds", "seed", "control", "rows": [{"op", "impl", "dtype", "precision", "shape", "rep_ms",
                                                  "settle_ms", "sets", "kernel"}, ...]}
    {"event": "ready", "torch", "triton", "device"}, then per row
    {"event": "row", "i", "samples_us", "kernel"} or {"event": "row", "i", "error"}"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.errors import one_line

if TYPE_CHECKING:
    from envcheck.bench.kernels.tuning import Tile
    from envcheck.outside_json import Json

Emit = Callable[[dict[str, "Json"]], None]
Call = Callable[[], object]


def build_call(torch: ModuleType, row: dict[str, Json], control: str | None, seed: int, device: str) -> Call:
    """The suite's call of ``row`` (op, implementation, dtype, precision, shape) on fresh inputs."""
    from envcheck.bench import impls

    op, dtype, precision, shape = row["op"], row["dtype"], row["precision"], tuple(row["shape"])
    gen = torch.Generator(device=device).manual_seed(seed)
    inputs = impls.make_inputs(op, shape, dtype, device, gen)
    out = impls.make_output(op, shape, dtype, device)
    if row["impl"] == "torch":
        return impls.torch_impl(op, inputs, out, shape)
    if row["impl"] == "triton":
        return impls.triton_impl(op, inputs, out, precision, shape, control)
    raise ValueError(f"no cross-check for implementation {row['impl']!r}")


def cycled(torch: ModuleType, row: dict[str, Json], control: str | None, seed: int, device: str) -> Call:
    """One call on each of the row's ``sets`` of fresh buffers in turn, as the suite's case cycled."""
    calls = [build_call(torch, row, control, seed + j, device) for j in range(max(1, int(row.get("sets", 1))))]
    if len(calls) == 1:
        return calls[0]

    def each() -> None:
        for call in calls:
            call()
    return each


@contextlib.contextmanager
def pinned(kernel: str | None) -> Iterator[None]:
    """The matmul race picks the tile labelled ``kernel`` (the suite's winner) where it is a candidate."""
    from envcheck.bench.kernels import tuning

    race = tuning.fastest

    def pick(candidates: Mapping[Tile, Call], measure: object = None) -> Tile:
        return next((t for t in candidates if t.label == kernel), None) or race(candidates, measure)
    tuning.fastest = pick if kernel else race
    try:
        yield
    finally:
        tuning.fastest = race


def time_row(bench: Callable[..., object], fn: Call, row: dict[str, Json], rounds: int) -> list[float]:
    """``fn`` settled, then timed ``rounds`` times by ``bench``: every replay, us per call of one set."""
    bench(fn, rep=max(1, round(float(row["settle_ms"]))), return_mode="median")  # settling, untimed
    sets = max(1, int(row.get("sets", 1)))
    samples: list[float] = []
    for _ in range(rounds):
        got = bench(fn, rep=max(1, round(float(row["rep_ms"]))), return_mode="all")
        samples += [float(ms) * 1e3 / sets for ms in (got if isinstance(got, (list, tuple)) else [got])]
    return samples


def run(plan: dict[str, Json], emit: Emit, torch: ModuleType | None = None,
        bench: Callable[..., object] | None = None) -> None:
    """Every row of ``plan``; ``torch`` and ``bench``: tests' CPU stand-ins."""
    if torch is None:
        import torch as torch_module

        torch = torch_module
    versions: dict[str, Json] = {"torch": torch.__version__}
    if bench is None:
        import triton
        import triton.testing

        bench = triton.testing.do_bench_cudagraph
        versions["triton"] = triton.__version__
    device = "cpu"
    if torch.cuda.is_available():
        torch.cuda.set_device(int(plan["gpu"]))
        device = "cuda"
        from envcheck.bench import compile_cache

        compile_cache.use_for(torch, int(plan["gpu"]))  # the suite's kernels and matmul tiles
    emit({"event": "ready", **versions, "device": device})
    from envcheck.bench.impls import tf32_matmul, triton_kernel
    from envcheck.ops import lookup

    rounds = int(plan.get("rounds", 3))
    for i, row in enumerate(plan["rows"]):
        fn = None
        try:
            with tf32_matmul(row["precision"]) if lookup(row["op"]).compute_bound else contextlib.nullcontext():
                fn = cycled(torch, row, plan.get("control"), int(plan.get("seed", 0)), device)
                with pinned(row.get("kernel")):
                    fn()  # compiles (Triton) and picks the suite's matmul tile, outside the tool's estimate
                samples = time_row(bench, fn, row, rounds)
            kernel = triton_kernel(row["op"], tuple(row["shape"]), row["dtype"], row["precision"]) \
                if row["impl"] == "triton" and device == "cuda" else None
            emit({"event": "row", "i": i, "samples_us": samples, **({"kernel": kernel} if kernel else {})})
        except Exception as e:  # noqa: BLE001 - one row's failure is that row's result
            print(f"envcheck cross-check worker: row {i} ({row.get('op')} {row.get('impl')}) failed: {one_line(e)}",
                  file=sys.stderr)
            emit({"event": "row", "i": i, "error": one_line(e)})
        finally:
            fn = None
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.empty_cache()


def main(plan: object, out: Emit) -> None:
    if not isinstance(plan, dict) or not isinstance(plan.get("rows"), list):
        raise ValueError("the plan is a JSON object with a list of rows")
    run(plan, out)
