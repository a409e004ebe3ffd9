"""Copy bandwidth matrices of one node, in a child (``run``, started by ``envcheck.node.peer``), as nvbandwidth
measures them: for every ordered pair ``copy_engine`` (``dst.copy_(src)``) and ``sm_kernel`` (a Triton kernel on
the destination pulling over peer access), one way and both ways at once; then pinned host copies. CUDA events on
each copy's own streams, ``iters`` calls after ``warmup``, the destination checked against ``i % 251``. Events::

    {"event": "devices", "devices": n}
    {"event": "access", "a", "b", "allowed"}
    {"event": "copy", "kind", "method", "src", "dst", "bytes_per_direction", "bidirectional", "pinned",
     "samples_us", "wrong", "error"}                          src / dst: CUDA indices in this process"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.errors import one_line

if TYPE_CHECKING:
    from torch import Tensor
    from torch.cuda import Event

    from envcheck.outside_json import Json

PATTERN_MOD = 251
Job = tuple[int, "int | None", Callable[[], object]]  # (its device, the peer or None, the call)
CHUNK = 1 << 25


class Copier:
    def __init__(self, torch: ModuleType, n_elems: int, warmup: int, iters: int) -> None:
        self.torch = torch
        self.n = n_elems
        self.warmup = warmup
        self.iters = iters
        self._kernel: Callable[..., object] | None = None

    def _chunks(self, device: object) -> Iterator[tuple[slice, Tensor]]:
        """Each chunk of a buffer and the pattern's values there."""
        t = self.torch
        for lo in range(0, self.n, CHUNK):
            hi = min(self.n, lo + CHUNK)
            yield slice(lo, hi), (t.arange(lo, hi, dtype=t.int64, device=device) % PATTERN_MOD).to(t.float32)

    def pattern(self, device: object, pinned: bool = False) -> Tensor:
        out = self.torch.empty(self.n, dtype=self.torch.float32, device=device, pin_memory=pinned)
        for part, values in self._chunks(device):
            out[part] = values
        return out

    def wrong(self, x: Tensor) -> int:
        return sum(int((x[part] != want).sum().item()) for part, want in self._chunks(x.device))

    def sm_copy(self, src: Tensor, dst: Tensor) -> None:
        """A Triton kernel on ``dst``'s device pulling ``src`` over peer access."""
        import triton

        if self._kernel is None:
            import triton.language as tl

            @triton.jit
            def pull(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):  # noqa: N803 - Triton's constexpr style
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                mask = offs < n
                tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)

            self._kernel = pull
        block = 4096
        # Launched on the current device and stream, which the caller set to the destination's.
        self._kernel[(triton.cdiv(self.n, block),)](src, dst, self.n, BLOCK=block, num_warps=8)

    def _timed(self, jobs: list[Job]) -> list[float]:
        """Each ``(device, peer, fn)`` job at once per iteration; a sample is the longest job's time. Each job gets
        streams of its own on both its GPUs: torch orders a cross-device copy against the current streams of
        both, so two directions on the default streams would run one after the other."""
        t = self.torch
        streams = [(t.cuda.Stream(device=dev), t.cuda.Stream(device=peer) if peer is not None else None)
                   for dev, peer, _ in jobs]

        def within(k: int) -> contextlib.ExitStack:
            dev = jobs[k][0]
            stack = contextlib.ExitStack()
            own, other = streams[k]
            # Setting a stream makes its device current: the peer's first, the job's own last.
            if other is not None:
                stack.enter_context(t.cuda.stream(other))
            stack.enter_context(t.cuda.stream(own))
            stack.enter_context(t.cuda.device(dev))
            return stack

        devices = sorted({d for dev, peer, _ in jobs for d in (dev, peer) if d is not None})
        for _ in range(self.warmup):
            for k, (_, _, fn) in enumerate(jobs):
                with within(k):
                    fn()
        for d in devices:
            t.cuda.synchronize(d)
        marks: list[list[tuple[Event, Event]]] = []
        for _ in range(self.iters):
            starts = []
            for k in range(len(jobs)):
                with within(k):
                    a = t.cuda.Event(enable_timing=True)
                    a.record()
                    starts.append(a)
            row = []
            for k, (_, _, fn) in enumerate(jobs):
                with within(k):
                    fn()
                    b = t.cuda.Event(enable_timing=True)
                    b.record()
                    row.append((starts[k], b))
            marks.append(row)
        for d in devices:
            t.cuda.synchronize(d)
        return [max(max(a.elapsed_time(b) * 1e3 for a, b in row), 1e-3) for row in marks]

    def d2d(self, a: int, b: int, method: str, both: bool) -> dict[str, Json]:
        t = self.torch
        if method == "sm_kernel" and not (t.cuda.can_device_access_peer(b, a)
                                          and (not both or t.cuda.can_device_access_peer(a, b))):
            # Without peer access a kernel's load from the other GPU faults and poisons the context.
            return {"error": "no_peer_access"}
        src_a, dst_b = self.pattern(f"cuda:{a}"), t.empty(self.n, dtype=t.float32, device=f"cuda:{b}")
        src_b = self.pattern(f"cuda:{b}") if both else None
        dst_a = t.empty(self.n, dtype=t.float32, device=f"cuda:{a}") if both else None
        if method == "copy_engine":
            # torch runs a cross-device copy on the source device's current stream
            jobs: list[Job] = [(a, b, lambda: dst_b.copy_(src_a, non_blocking=True))]
            if both:
                jobs.append((b, a, lambda: dst_a.copy_(src_b, non_blocking=True)))
        else:
            jobs = [(b, a, lambda: self.sm_copy(src_a, dst_b))]
            if both:
                jobs.append((a, b, lambda: self.sm_copy(src_b, dst_a)))
        dst_b.fill_(-1.0)
        if dst_a is not None:
            dst_a.fill_(-1.0)
        t.cuda.synchronize(a)
        t.cuda.synchronize(b)
        samples = self._timed(jobs)
        wrong = self.wrong(dst_b) + (self.wrong(dst_a) if dst_a is not None else 0)
        return {"samples_us": samples, "wrong": wrong}

    def host(self, gpu: int, to_device: bool) -> dict[str, Json]:
        t = self.torch
        if to_device:
            src, dst = self.pattern("cpu", pinned=True), t.empty(self.n, dtype=t.float32, device=f"cuda:{gpu}")
        else:
            src = self.pattern(f"cuda:{gpu}")
            dst = t.empty(self.n, dtype=t.float32, pin_memory=True)
        dst.fill_(-1.0)
        t.cuda.synchronize(gpu)
        samples = self._timed([(gpu, None, lambda: dst.copy_(src, non_blocking=True))])
        return {"samples_us": samples, "wrong": self.wrong(dst)}


def run(plan: dict[str, Json], emit: Callable[[dict[str, Json]], None]) -> None:
    import torch

    n_dev = torch.cuda.device_count()
    emit({"event": "devices", "devices": n_dev})
    size = int(plan.get("size_bytes", 1 << 28))
    c = Copier(torch, size // 4, int(plan.get("warmup", 3)), int(plan.get("iters", 20)))
    methods = plan.get("methods", ["copy_engine", "sm_kernel"])
    for a, b in itertools.permutations(range(n_dev), 2):
        emit({"event": "access", "a": a, "b": b, "allowed": bool(torch.cuda.can_device_access_peer(a, b))})

    def record(kind: str, method: str, src: int | None, dst: int | None, both: bool, fn: Callable[[], dict[str, Json]],
               pinned: bool | None = None) -> None:
        ev: dict[str, Json] = {"event": "copy", "kind": kind, "method": method, "src": src, "dst": dst,
                              "bytes_per_direction": c.n * 4, "bidirectional": both, "pinned": pinned}
        try:
            ev.update(fn())
        except Exception as e:  # noqa: BLE001 - one failed copy is a result; the others still run
            ev["error"] = one_line(e)
        finally:
            torch.cuda.empty_cache()
        emit(ev)

    for method in methods:
        for a, b in itertools.permutations(range(n_dev), 2):
            record("d2d", method, a, b, False, lambda a=a, b=b, m=method: c.d2d(a, b, m, False))
        for a, b in itertools.combinations(range(n_dev), 2) if plan.get("bidirectional", True) else ():
            record("d2d", method, a, b, True, lambda a=a, b=b, m=method: c.d2d(a, b, m, True))
    for g in range(n_dev):
        record("h2d", "copy_engine", None, g, False, lambda g=g: c.host(g, True), pinned=True)
        record("d2h", "copy_engine", g, None, False, lambda g=g: c.host(g, False), pinned=True)
