"""Compiling the planned Triton kernels while the worker measures: a few niced children (``child``), with no GPU
visible, run each Triton case's first call on stand-in tensors, Triton's JIT compiling for the GPU's architecture
without launching, into the run's cache where the worker's own first call finds them.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from envcheck.bench.suite import PlannedCase
from envcheck.model import BenchDevice
from envcheck.ops import OPS

if TYPE_CHECKING:
    import torch

    from envcheck.bench.kernels.tuning import Tile

NICE = 10  # below the worker, whose host thread times launches
COMPILE_S = 3600.0  # a child's own limit: the worker ends them when it ends
# Children per worker (a core each): the worker, Inductor's compile pool and the host keep the rest.
MAX_CHILDREN = 4
SPARE_CPUS = 4


AheadCase = list[Any]  # JSON: [op, dtype, precision, [dims]]


class AheadPlan(TypedDict):
    cc: list[int]
    sms: int
    control: str | None
    cases: list[AheadCase]


def children(cpus: int | None) -> int:
    return max(0, min(MAX_CHILDREN, ((cpus or 1) - SPARE_CPUS) // 3))


def shares(cases: Sequence[PlannedCase], n: int) -> list[list[AheadCase]]:
    """Triton cases of built-in ops dealt to ``n`` children by family (op, dtype, precision): it shares compiles."""
    families: dict[tuple[str, str, str], list[AheadCase]] = {}
    for c in dict.fromkeys(c for c in cases if c.impl == "triton" and c.op in OPS):
        families.setdefault((c.op, c.dtype, c.precision), []).append([c.op, c.dtype, c.precision, list(c.shape)])
    out: list[list[AheadCase]] = [[] for _ in range(n)]
    for i, family in enumerate(families.values()):
        out[i % n] += family
    return [s for s in out if s]


Ahead = tuple[threading.Thread, threading.Event]


def start(cases: Sequence[PlannedCase], device: BenchDevice, control: str | None,
          cpus: int | None = None) -> list[Ahead]:
    """The children compiling ``cases``' Triton kernels ahead (none where the host has few cores to spare)."""
    if device.compute_capability is None or device.sm_count is None:
        return []
    cc = [int(x) for x in device.compute_capability.split(".")]
    started = []
    for share in shares(cases, children(os.cpu_count() if cpus is None else cpus)):
        plan, stop_it = AheadPlan(cc=cc, sms=device.sm_count, control=control, cases=share), threading.Event()
        t = threading.Thread(target=_run, args=(plan, stop_it), daemon=True, name="envcheck-compile-ahead")
        t.start()
        started.append((t, stop_it))
    return started


def _run(plan: AheadPlan, stop_it: threading.Event) -> None:
    from envcheck.harness.spawn import spawn

    out = spawn(f"{__name__}:child", plan, timeout=COMPILE_S, heartbeat=COMPILE_S, stop=stop_it, grace_s=0.0,
                env={"CUDA_VISIBLE_DEVICES": ""})
    print(f"envcheck compile-ahead: {out.result if out.done else out.failure}", file=sys.stderr)


def stop(started: Sequence[Ahead]) -> None:
    for _, stop_it in started:
        stop_it.set()
    for t, _ in started:
        t.join()


class Stand:
    """A meta tensor that passes for a CUDA tensor of device 0 to Triton's JIT: its data pointer is its byte offset
    (a real allocation is 512-byte aligned), its views stand-ins too."""

    is_cuda = True

    def __init__(self, meta: torch.Tensor) -> None:
        self._t = meta

    def __getattr__(self, name: str) -> Any:  # the meta tensor's, stand-ins for tensors
        got = getattr(self._t, name)
        if not callable(got):
            return got
        return lambda *a, **k: _stand(got(*(x._t if isinstance(x, Stand) else x for x in a), **k))

    def __getitem__(self, key: object) -> Stand:
        return Stand(self._t[key])

    def __len__(self) -> int:
        return len(self._t)

    def data_ptr(self) -> int:
        return int(self._t.storage_offset() * self._t.element_size())

    def get_device(self) -> int:
        return 0


def _stand(x: object) -> object:
    import torch

    return Stand(x) if isinstance(x, torch.Tensor) else x


def compile_cases(plan: AheadPlan) -> tuple[int, int]:
    """Each case's first call, compiled only; (cases compiled, cases that failed)."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    from envcheck.bench import impls
    from envcheck.bench.kernels import tuning

    cc = tuple(plan["cc"])

    class Target:  # what Triton's JIT asks of its driver, answered for the GPU the worker opened
        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_current_target(self) -> GPUTarget:
            return GPUTarget("cuda", cc[0] * 10 + cc[1], 32)

    driver.set_active(Target())
    try:
        from triton.backends.nvidia.driver import CudaLauncher, CudaUtils

        CudaUtils()  # Triton's own driver module, built into the cache
    except Exception:  # noqa: BLE001 - no CUDA headers or library here: kernels only
        CudaLauncher = None  # noqa: N806
    run = JITFunction.run

    def compile_only(self: JITFunction, *args: object, grid: object, warmup: bool, **kwargs: object) -> object:
        kernel = run(self, *args, grid=grid, warmup=True, **kwargs)
        if kernel is not None and CudaLauncher is not None:
            with contextlib.suppress(Exception):  # the launcher's C module, built into the cache (else by the worker)
                CudaLauncher(kernel.src, kernel.metadata)
        return kernel

    def race(candidates: Mapping[Tile, Callable[[], object]], measure: object = None) -> Tile:
        tuning.first_calls(list(candidates.values()))
        return next(iter(candidates))

    JITFunction.run = compile_only  # type: ignore[method-assign]
    tuning.fastest = race  # type: ignore[assignment]
    import importlib

    importlib.import_module("envcheck.bench.kernels.matmul").DEVICES[0] = (int(plan["sms"]), cc)
    done = failed = 0
    for op, dtype, precision, shape in plan["cases"]:
        shape = tuple(shape)
        try:
            inputs = {k: Stand(v) for k, v in impls.make_inputs(op, shape, dtype, "meta", None).items()}
            out = Stand(impls.make_output(op, shape, dtype, "meta"))
            impls.triton_impl(op, inputs, out, precision, shape, plan.get("control"))()
            done += 1
        except Exception:  # noqa: BLE001 - not compiled ahead: the worker compiles it
            failed += 1
    return done, failed


def warm_inductor() -> None:
    """Start Inductor's compile workers now, while the first groups are prepared, not at the first torch.compile."""
    try:
        from torch._inductor.async_compile import maybe_warm_pool

        maybe_warm_pool()
    except Exception as e:  # noqa: BLE001 - a private API: without it they start at the first compile
        print(f"envcheck worker: Inductor's compile workers not started early ({e})", file=sys.stderr)


def child(plan: AheadPlan, out: object) -> str:
    os.nice(NICE)
    t0 = time.monotonic()
    done, failed = compile_cases(plan)
    return f"{done} cases compiled, {failed} left to the worker, {time.monotonic() - t0:.1f} s"
