"""One group of cases (every implementation of one op, dtype, precision and shape, on shared inputs): ``open_group``
draws its tensors; ``prepare`` takes an implementation through its first call, checked calls, warm-up and graph
capture. A failed step is its case's result (out of memory a Skip, else a failed Case), never the run's end.
"""
from __future__ import annotations

import dataclasses
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from envcheck.bench import accuracy, compile_cache, jax_impl
from envcheck.bench.device import Runtime
from envcheck.bench.graphs import graph_region
from envcheck.bench.impls import Impl, Inputs
from envcheck.bench.interpret import checked_only
from envcheck.bench.l2 import Rotation, rotation_sets
from envcheck.bench.suite import PlannedCase
from envcheck.bench.timer import Region
from envcheck.errors import one_line
from envcheck.model import Accuracy, Case, Note, OutputAccuracy, Skip, Timing

if TYPE_CHECKING:
    import torch

    from envcheck.bench.impls import Sets

# Share of free device memory a group may use; rotating buffers get half of what it leaves (the other half:
# outputs torch.compile allocates per set, the graphs' pools).
MEMORY_FRACTION = 0.8
CHECK_ROUNDS = 8  # checked calls of a built-in op whose output has fewer than SMALL_OUTPUT elements
SMALL_OUTPUT = 16
T = TypeVar("T")


class Stopwatch:
    """Where the worker's time goes: host seconds per named phase (model.BENCH_PHASES, CASE_PHASES) since
    ``zero`` (``clock``: seconds, the test seam)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter, zero: float | None = None) -> None:
        self._clock = clock
        self.zero = clock() if zero is None else zero
        self.seconds: dict[str, float] = {}

    def now(self) -> float:
        return self._clock() - self.zero

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + max(0.0, seconds)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as part of ``name`` (also when it raises: the time was spent)."""
        start = self._clock()
        try:
            yield
        finally:
            self.add(name, self._clock() - start)

    def child(self) -> Stopwatch:
        """A stopwatch of its own (a case's phases) on the same clock and zero."""
        return Stopwatch(self._clock, self.zero)

    def rounded(self) -> dict[str, float]:
        """The phases in milliseconds' precision, as a report keeps them."""
        return {name: round(s, 4) for name, s in self.seconds.items()}


def log(what: str, exc: BaseException | None = None) -> None:
    """A line (and the traceback of ``exc``) on the worker's stderr."""
    print(f"envcheck worker: {what}", file=sys.stderr)
    if exc is not None:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)


def guarded(rt: Runtime, planned: PlannedCase, stage: str, step: Callable[[], T]) -> T | Case | Skip:
    """``step()``, with out-of-memory turned into a Skip and any other exception into a failed Case."""
    try:
        return step()
    except rt.oom:
        rt.after_failure()
        need = rt.spec(planned.op).memory_needed_bytes(planned.shape, planned.dtype)
        return planned.skip(Note("skip.out_of_memory", {"need_bytes": need, "free_bytes": rt.free_bytes()}))
    except Exception as e:  # noqa: BLE001 - one case's failure is that case's result, never the run's end
        log(f"{planned.label} failed ({stage}):", e)
        rt.after_failure()
        return planned.failed(stage, one_line(e))


@dataclass
class Group:
    """The tensors a group's implementations share (``inputs`` / ``out`` checked, ``extra_sets`` rotated); ``skip``:
    why it could not be set up; ``notes``: said of every case."""

    key: tuple[str, str, str, tuple[int, ...]]
    inputs: Inputs = field(default_factory=dict)
    out: torch.Tensor | None = None
    extra_sets: Sets = field(default_factory=list)
    skip: Note | None = None
    notes: tuple[Note, ...] = ()
    seed: int = 0
    rounds: int = 1  # checked calls per implementation (CHECK_ROUNDS for a tiny output)

    @property
    def sets(self) -> int:
        return 1 + len(self.extra_sets)


@dataclass
class Prepared:
    """One implementation of a group, made ready; its timings land here when sampled."""

    planned: PlannedCase
    fn: Callable[[], object]  # one call of the op (a Rotation over the sets, or the bound call)
    compile_s: float | None
    accuracy: Accuracy
    rotation_sets: int
    notes: list[Note] = field(default_factory=list)
    outputs: tuple[OutputAccuracy, ...] = ()
    exact: Accuracy | None = None  # on the op's exact inputs (exact.py)
    kernel: str | None = None
    graph: Region | None = None  # the captured graph to replay, until the GPU time is taken
    gpu: Timing | None = None
    launch: Timing | None = None
    failure: BaseException | None = None  # raised while sampling: the case's failure, or skip if OOM
    watch: Stopwatch = field(default_factory=Stopwatch)  # its phases (model.CASE_PHASES) and span
    start_s: float = 0.0  # its span, on ``watch``: preparation began, sampling ended
    end_s: float | None = None
    sustained: bool | None = None  # timed sustained (sampling.settle decides; None: not settled)
    cache: str | None = None  # model.CACHE_STATES
    sampled_until: str | None = None  # model.SAMPLING_STOPS


def open_group(rt: Runtime, first: PlannedCase, seed: int) -> Group:
    """The tensors of ``first``'s group, drawn from a generator seeded with ``seed``."""
    op, dtype, shape = first.op, first.dtype, first.shape
    group = Group(first.group, seed=seed)
    spec = rt.spec(op)
    code = rt.code(op)  # a user's op: importing their file here, inside the group's guard
    need = spec.memory_needed_bytes(shape, dtype)
    free = rt.free_bytes()
    spare: float | None = None
    if free is not None:
        if need > MEMORY_FRACTION * free:
            group.skip = Note("skip.out_of_memory", {"need_bytes": need, "free_bytes": free})
            return group
        spare = (MEMORY_FRACTION * free - need) / 2
    gen = rt.torch.Generator(device=rt.where).manual_seed(seed)
    try:
        group.inputs = code.make_inputs(shape, dtype, rt.where, gen)
        group.out = code.make_output(shape, dtype, rt.where)
    except rt.oom:
        group.inputs, group.out = {}, None
        rt.after_failure()
        group.skip = Note("skip.out_of_memory", {"need_bytes": need, "free_bytes": rt.free_bytes()})
        return group
    ws, cold = spec.working_set_bytes(shape, dtype), rt.settings.cold_l2 and rt.cuda
    wanted, sets = (rotation_sets(ws, rt.device.l2_bytes, memory_bound=not spec.compute_bound, enabled=cold,
                                  spare_bytes=limit) for limit in (None, spare))  # the sets wanted, and those that fit
    try:  # fresh random data for every set, outside every timed region
        for _ in range(sets - 1):
            group.extra_sets.append((code.make_inputs(shape, dtype, rt.where, gen),
                                     code.make_output(shape, dtype, rt.where)))
    except rt.oom:
        group.extra_sets = []
        rt.after_failure()
    if wanted > group.sets:
        group.notes = (Note("case.l2_not_cold", {"sets": wanted, "set_bytes": ws}),)
    if spec.declared is None and spec.output_elements(shape) < SMALL_OUTPUT:
        group.rounds = CHECK_ROUNDS
    return group


def _draw_round(rt: Runtime, planned: PlannedCase, group: Group, r: int) -> None:
    """Round ``r``'s inputs, drawn into the group's bound tensors; round 0 is the group's first draw again."""
    gen = rt.torch.Generator(device=rt.where).manual_seed(group.seed * CHECK_ROUNDS + r if r else group.seed)
    fresh = rt.code(planned.op).make_inputs(planned.shape, planned.dtype, rt.where, gen)
    for name, t in group.inputs.items():
        t.copy_(fresh[name])


def _check(rt: Runtime, planned: PlannedCase, group: Group, fn: Impl
           ) -> tuple[accuracy.Tally, accuracy.Tally | None, bool]:
    """``fn``'s checked calls on the group's and the op's exact inputs: (random, exact or None, all poisoned)."""
    code, spec = rt.code(planned.op), rt.spec(planned.op)

    def checked(tally: accuracy.Tally) -> bool:
        result, ok = accuracy.checked_call(fn, group.out)
        rt.timer.clock.synchronize()
        tally.add(result, code.reference_chunks(group.inputs, planned.shape))
        return ok

    tally, exact, made, poisoned = accuracy.Tally(planned.dtype, spec, planned.precision), None, None, True
    try:
        for r in range(group.rounds):
            if group.rounds > 1:
                _draw_round(rt, planned, group, r)
            poisoned = checked(tally) and poisoned
        made = code.exact_inputs(planned.shape, planned.dtype, rt.where,
                                 rt.torch.Generator(device=rt.where).manual_seed(group.seed))
        if made is not None:
            # A compute-bound op's exact inputs are exact in its arithmetic: its roundings are not allowed for.
            exact = accuracy.Tally(planned.dtype, None if spec.compute_bound and spec.declared is None else spec,
                                   planned.precision)
            for name, t in group.inputs.items():
                t.copy_(made.pop(name))
            poisoned = checked(exact) and poisoned
    finally:
        if group.rounds > 1 or made is not None:
            _draw_round(rt, planned, group, 0)
    return tally, exact, poisoned


def _bound(rt: Runtime, planned: PlannedCase, group: Group) -> list[Impl]:
    return rt.code(planned.op).bound(planned, [(group.inputs, group.out), *group.extra_sets])


def prepare(rt: Runtime, planned: PlannedCase, group: Group, watch: Stopwatch | None = None) -> Prepared | Case | Skip:
    """The steps of one implementation, each a phase of ``watch`` (out of memory propagates: guarded)."""
    timer = rt.timer
    watch = watch if watch is not None else Stopwatch()
    start = watch.now()
    try:
        with watch.phase("first_call"):  # binding it (torch.compile's wrapper) and its first call
            fns = _bound(rt, planned, group)
            before = compile_cache.mark()
            first_s = timer.first_call_s(fns[0])
            cache = compile_cache.state(planned.impl, before, compile_cache.mark())
    except rt.oom:
        raise
    except jax_impl.NoDevice as e:  # a CPU-only jaxlib on a GPU machine: JAX cannot run here, not a failure
        return planned.skip(Note("skip.jax_no_gpu", {"backend": e.backend}))
    except Exception as e:  # noqa: BLE001 - a compile or launch failure of this implementation
        log(f"{planned.label}: first call failed:", e)
        rt.after_failure()
        return planned.failed("compile" if planned.impl == "compile" else "first_call", one_line(e))
    compile_s = first_s if planned.impl != "torch" else None

    notes = list(group.notes)
    try:
        with watch.phase("check"):
            tally, exact, poisoned = _check(rt, planned, group, fns[0])
    except rt.oom:
        raise
    except Exception as e:  # noqa: BLE001 - the checked call or the comparison raised
        log(f"{planned.label}: checked call failed:", e)
        rt.after_failure()
        return planned.failed("check", one_line(e), compile_s)
    if not poisoned:
        notes.append(Note("case.output_not_poisoned"))

    run = Rotation(fns) if len(fns) > 1 else fns[0]
    if not checked_only(rt, planned):  # an interpreted kernel is checked, never timed: no warm-up
        with watch.phase("warmup"):
            timer.warmup(run)
    exact_parts = {o.name: o.accuracy for o in exact.outputs()} if exact is not None else {}
    prepared = Prepared(planned, run, compile_s, tally.accuracy(), rotation_sets=len(fns), notes=notes,
                        kernel=rt.code(planned.op).kernel(planned), watch=watch, start_s=start, cache=cache,
                        outputs=tuple(dataclasses.replace(o, exact=exact_parts.get(o.name)) for o in tally.outputs()),
                        exact=exact.accuracy() if exact is not None else None)
    if rt.cuda and planned.impl == "jax":  # its own streams: no CUDA graph captures them
        prepared.notes.append(Note("case.jax_host_timed"))
    elif rt.cuda:
        try:
            with watch.phase("graph"):
                prepared.graph = graph_region(timer, run, len(fns))
        except rt.oom:
            raise
        except Exception as e:  # noqa: BLE001 - e.g. an op that cannot be captured: launch time still stands
            log(f"{planned.label}: CUDA graph capture failed:", e)
            rt.after_failure()
            prepared.notes.append(Note("case.no_gpu_time", {"stage": "capture", "detail": one_line(e)}))
    return prepared
