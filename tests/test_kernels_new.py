"""The new Triton kernels (issue 22) through the worker's own path, under the Triton interpreter:
correct kernels pass at every precision; planted bugs fail the case.

Each case runs exactly what the worker runs for a Triton case: ``impls.make_inputs`` (seeded),
``impls.triton_impl`` (workspaces bound once), ``accuracy.checked_call`` (NaN-poisoned output),
``accuracy.compare`` against the float64 reference, and the analysis's ``judge`` at the
tolerance of the precision used. A planted bug swaps one of the module's kernels (or the
function it calls) for a wrong one: a wrong stride, a dropped tail, a wrong axis, a gradient off
by a factor; each must fail the case at every dtype.

As in test_kernels.py, ``TRITON_INTERPRET=1`` must be set before Triton decorates a kernel, so
the cases run in a child process (this file executed as a script).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# One pytest-xdist worker runs this module: its module fixture starts the child process(es) once.
pytestmark = pytest.mark.xdist_group("kernels_new")
ROOT = Path(__file__).resolve().parents[1]
DTYPES = ("fp32", "fp16", "bf16")

# Small shapes no block divides; a*b == c for the reductions, so a reduction over the wrong axis
# still fills an output of the right size (and shows only in its values).
SHAPES: dict[str, tuple[int, ...]] = {
    "conv2d": (2, 3, 9, 10, 5, 3, 2),
    "layer_norm": (7, 300),
    "softmax_fwbw": (7, 300),
    "linear_fwbw": (9, 7, 11),
    **{f"{how}_{over}": (2, 4, 8) for how in ("sum", "max") for over in ("inner", "lead")},
    "sum_all": (4, 64, 65),
    "max_all": (4, 64, 65),
}
CONV_SHAPES = ((2, 3, 9, 10, 5, 3, 2), (1, 4, 8, 7, 3, 5, 1), (1, 2, 11, 9, 4, 7, 2))


@dataclass(frozen=True)
class Case:
    op: str
    dtype: str
    precision: str
    shape: tuple[int, ...]
    plant: str = ""

    @property
    def id(self) -> str:
        return f"{self.op}-{self.dtype}-{self.precision}-{'x'.join(map(str, self.shape))}-{self.plant or 'correct'}"


def _precisions(op: str, dtype: str) -> tuple[str, ...]:
    if dtype == "fp32" and op in ("conv2d", "linear_fwbw"):
        return ("fp32", "tf32")
    return (dtype,)


# Planted bugs per op: name -> what it breaks (applied in the child by ``_plant``).
PLANTS: dict[str, tuple[str, ...]] = {
    "conv2d": ("wrong_stride", "dropped_tail"),
    "layer_norm": ("wrong_stride", "dropped_tail"),
    "softmax_fwbw": ("dropped_tail", "gradient_factor"),
    "linear_fwbw": ("gradient_factor", "dropped_tail"),
    "sum_inner": ("dropped_tail", "wrong_axis"),
    "max_inner": ("wrong_axis",),
    "sum_lead": ("wrong_axis",),
    "max_lead": ("wrong_axis",),
    "sum_all": ("dropped_tail",),
    "max_all": ("dropped_tail",),
}


def cases() -> list[Case]:
    out = []
    for op, shape in SHAPES.items():
        for dtype in DTYPES:
            for precision in _precisions(op, dtype):
                shapes = CONV_SHAPES if op == "conv2d" else (shape,)
                out += [Case(op, dtype, precision, s) for s in shapes]
                out += [Case(op, dtype, precision, shape, plant) for plant in PLANTS[op]]
    return out


# ----------------------------------------------------------------------------------------------
# Child process


class _Planted:
    """A jitted kernel whose launch arguments ``change`` rewrites: ``kernel[grid](*args, **kw)``."""

    def __init__(self, kernel: Any, change: Callable[[list[Any], dict[str, Any]], None]) -> None:
        self.kernel, self.change = kernel, change

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        launch = self.kernel[grid]

        def call(*args: Any, **kw: Any) -> Any:
            args_l = list(args)
            self.change(args_l, kw)
            return launch(*args_l, **kw)

        return call


def _plant(case: Case) -> list[tuple[Any, str, Any]]:
    """Patch the kernel module for ``case.plant``; returns (module, name, old value) to restore."""
    from envcheck.bench import kernels

    def module(name: str) -> Any:
        return importlib.import_module(f"envcheck.bench.kernels.{name}")

    patches: list[tuple[Any, str, Any]] = []

    def patch(mod: Any, name: str, value: Any) -> None:
        patches.append((mod, name, getattr(mod, name)))
        setattr(mod, name, value)

    def arg(index: int, delta: int) -> Callable[[list[Any], dict[str, Any]], None]:
        def change(args: list[Any], kw: dict[str, Any]) -> None:
            args[index] += delta
        return change

    op, plant = case.op, case.plant
    if op == "conv2d":
        mod = module("conv2d")
        if plant == "wrong_stride":  # the output pixels read the input as if at stride 1
            patch(mod, "_conv2d_kernel", _Planted(mod._conv2d_kernel, lambda a, kw: kw.update(STRIDE=1)))
        else:  # the reduction's last element (last channel's last tap) dropped
            patch(mod, "_conv2d_kernel", _Planted(mod._conv2d_kernel, arg(10, -1)))
    elif op == "layer_norm":
        mod = module("layer_norm")
        # args: x, w, b, out, rows, cols, stride_xr, ...
        patch(mod, "_layer_norm_kernel", _Planted(mod._layer_norm_kernel, arg(6, -1) if plant == "wrong_stride"
                                                  else arg(5, -1)))
    elif op == "softmax_fwbw":
        mod = module("softmax_fwbw")
        if plant == "dropped_tail":  # args: x, dy, y, dx, rows, cols, ...
            patch(mod, "_softmax_fwbw_kernel", _Planted(mod._softmax_fwbw_kernel, arg(5, -1)))
        else:
            real = mod.softmax_fwbw

            def doubled(x: Any, dy: Any, y: Any, out: Any) -> Any:
                return real(x, dy, y, out).mul_(2.0)

            patch(kernels, "softmax_fwbw", doubled)
    elif op == "linear_fwbw":
        mod = module("linear_fwbw")
        real = mod.matmul
        if plant == "gradient_factor":
            def halved(a: Any, b: Any, out: Any, precision: str) -> Any:
                return real(a, b, out, precision).mul_(0.5)

            patch(mod, "matmul", halved)
        else:  # dW = dy^T x without the last sample (a ragged last batch row forgotten)
            def dropped(a: Any, b: Any, out: Any, precision: str) -> Any:
                if a.shape[1] == b.shape[0] and not a.is_contiguous():  # the dW call: a = dy^T
                    return real(a[:, :-1], b[:-1], out, precision)
                return real(a, b, out, precision)

            patch(mod, "matmul", dropped)
    else:
        mod = module("reduce")
        if plant == "wrong_axis":  # the inner path for the leading axes, and the reverse
            patch(mod, "path", lambda over: {"inner": "lead", "lead": "inner"}.get(over, over))
        elif op == "sum_inner":  # each row's last column dropped: args x, out, rows, cols, ...
            patch(mod, "_inner_kernel", _Planted(mod._inner_kernel, arg(3, -1)))
        else:  # all: stage one reads one element of each chunk (args x, out, n, chunk, ...)
            def first_only(args: list[Any], kw: dict[str, Any]) -> None:
                if args[2] > 1024:  # stage one only, not the partials
                    args[3] = 1
            patch(mod, "_flat_kernel", _Planted(mod._flat_kernel, first_only))
    return patches


def run_case(case: Case, device: str = "cpu") -> dict[str, Any]:
    """One case through the worker's path on ``device`` (shared with test_kernels_new_gpu.py)."""
    import torch

    from envcheck.analysis.tolerance import judge, tolerance
    from envcheck.bench import accuracy, impls

    gen = torch.Generator(device=device).manual_seed(sum(map(ord, case.id.rsplit("-", 1)[0])))
    inputs = impls.make_inputs(case.op, case.shape, case.dtype, device, gen)
    out = impls.make_output(case.op, case.shape, case.dtype, device)
    patches = _plant(case) if case.plant else []
    try:
        fn = impls.triton_impl(case.op, inputs, out, case.precision, shape=case.shape)
        result, poisoned = accuracy.checked_call(fn, out)
        if device != "cpu":
            torch.cuda.synchronize()
    finally:
        for mod, name, old in reversed(patches):
            setattr(mod, name, old)
    acc = accuracy.compare(result, accuracy.reference_chunks(case.op, inputs, shape=case.shape), case.dtype)
    verdict = judge(acc, tolerance(case.op, case.dtype, case.precision, case.shape))
    return {"passed": verdict.passed, "broken": list(verdict.broken), "ratio": verdict.ratio,
            "poisoned": poisoned, "rel_l2": acc.rel_l2}


def _child(ids: list[str]) -> int:
    if "triton" in sys.modules or os.environ.get("TRITON_INTERPRET") != "1":
        print(json.dumps({"fatal": "run me with TRITON_INTERPRET=1 in a fresh process"}))
        return 2
    from envcheck.bench.interpret import fix_scalar_index

    fix_scalar_index()
    wanted = set(ids)
    for case in cases():
        if case.id not in wanted:
            continue
        try:
            result = run_case(case)
        except Exception as exc:  # noqa: BLE001 - reported per case, so one failure hides no other
            result = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps({"id": case.id, **result}), flush=True)
    return 0


# ----------------------------------------------------------------------------------------------
# Parent

_CHILD_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    wanted = [item.callspec.params["case"].id for item in request.session.items
              if getattr(item, "originalname", "") in ("test_correct_kernel_passes", "test_planted_bug_fails")]
    groups = [[i for i in wanted if i.startswith("conv2d")], [i for i in wanted if not i.startswith("conv2d")]]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        groups = [[i for g in groups for i in g]]  # under pytest-xdist the cores are the workers': one child
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, __file__, *ids], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for ids in groups if ids]
    out: dict[str, dict[str, Any]] = {}
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=_CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        for line in stdout.splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                assert "fatal" not in record, record["fatal"]
                out[record.pop("id")] = record
        if proc.returncode != 0:
            out.setdefault("_stderr", {})[str(proc.pid)] = stderr[-2000:]
    return out


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in cases() if not c.plant])
def test_correct_kernel_passes(case: Case, results: dict[str, dict[str, Any]]) -> None:
    r = results.get(case.id)
    assert r is not None, f"child process gave no result: {results.get('_stderr')}"
    assert "error" not in r, r.get("error")
    assert r["poisoned"], "the kernel must write into the NaN-filled output it was given"
    assert r["passed"], f"judged wrong: broke {r['broken']}, error {r['ratio']:.3g} x its bound"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in cases() if c.plant])
def test_planted_bug_fails(case: Case, results: dict[str, dict[str, Any]]) -> None:
    r = results.get(case.id)
    assert r is not None, f"child process gave no result: {results.get('_stderr')}"
    assert "error" not in r, r.get("error")
    assert not r["passed"] and r["broken"], f"planted {case.plant} passed (error {r['ratio']:.3g} x its bound)"


def test_every_new_kernel_has_a_planted_bug_and_every_kind_is_planted():
    from envcheck.bench.suite import OP_GROUPS

    assert set(PLANTS) == set(OP_GROUPS["workloads"])
    assert {p for ps in PLANTS.values() for p in ps} == {"wrong_stride", "dropped_tail", "wrong_axis",
                                                        "gradient_factor"}


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
