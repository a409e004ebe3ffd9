"""One collective at one size on one group of ranks, measured the way nccl-tests measures it:
warm-up calls, then timed iterations back to back (a CUDA event between consecutive calls on a GPU,
the host clock between synchronous calls on the CPU), then a separate call on freshly written inputs whose output
is checked element by element against the exact expected values (nccl-tests' #wrong).

Runs inside a torchrun worker (``envcheck.node.collective_worker``) with a process group already up.
The same code drives NCCL on GPUs and gloo on the CPU: only the device of the tensors and the clock
differ. Every rank of the group must call :func:`measure` with the same arguments in the same
order, as with any collective; decisions that could differ between ranks (out of memory) are agreed
on with a tiny collective first, so one rank never skips a size the others run.

Inputs hold small integers (exact in float32 for any rank count envcheck meets), so every expected
output is exact and the check is equality, not a tolerance:

- rank r's element i of an input is ``r + 1 + i % 7`` (all_reduce, broadcast, all_gather,
  reduce_scatter, i counted over the rank's whole input);
- all_to_all: rank r's chunk for rank j, element k, is ``8 (r n + j) + 1 + k % 7``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envcheck.analysis.node import layout

CHUNK_ELEMS = 1 << 25  # 128 MiB of float32 per step when writing inputs and checking outputs
MEMORY_HEADROOM = 0.85  # share of the free memory a size may use (NCCL's own buffers need the rest)
MiB = 1 << 20


@dataclass(frozen=True)
class Measured:
    """What one rank saw of one (op, size, group): its samples, its wrong count, or why not."""

    op: str
    size_bytes: int
    count: int
    ranks: tuple[int, ...]
    samples_us: tuple[float, ...] = ()
    method: str = "cuda_events"
    wrong: int | None = None
    error: str | None = None
    skipped: str | None = None
    need_bytes: int | None = None
    free_bytes: int | None = None


def need_bytes(op: str, size_bytes: int, n: int, element_bytes: int = 4) -> int:
    """Device memory one rank needs for ``op`` at size S: its input and output buffers, plus one
    chunk of expected values and one of indices for the check."""
    lay = layout(op, size_bytes, n, element_bytes)
    inplace = op in ("all_reduce", "broadcast")
    buffers = lay.send if inplace else lay.send + lay.recv
    return buffers * element_bytes + CHUNK_ELEMS * (element_bytes + 8)


class CollectiveBench:
    """Measures collectives for one rank. ``dist`` is ``torch.distributed``; ``torch`` the module."""

    def __init__(self, torch: Any, dist: Any, device: str, rank: int, world_size: int) -> None:
        self.torch = torch
        self.dist = dist
        self.device = device  # "cuda:<i>" or "cpu"
        self.rank = rank
        self.world_size = world_size
        self.cuda = device.startswith("cuda")
        if self.cuda:
            from envcheck.bench.timer import CudaEventClock

            self.clock: Any = CudaEventClock()
        else:
            from envcheck.bench.timer import HostClock

            self.clock = HostClock()
        self.method = "cuda_events" if self.cuda else "host_clock"

    # ----------------------------------------------------------------- agreement

    def _min_over(self, value: int, group: Any) -> int:
        """The smallest ``value`` over the group (every member calls it)."""
        t = self.torch.tensor([value], dtype=self.torch.int64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN, group=group)
        return int(t.item())

    def free_bytes(self) -> int | None:
        if not self.cuda:
            return None
        free, _total = self.torch.cuda.mem_get_info(self.torch.device(self.device))
        return int(free)

    # ----------------------------------------------------------------- inputs and expected outputs

    def _fill(self, t: Any, value_at: Any) -> None:
        """Write ``value_at(indices)`` into the flat tensor ``t``, one chunk at a time."""
        n = t.numel()
        for lo in range(0, n, CHUNK_ELEMS):
            hi = min(n, lo + CHUNK_ELEMS)
            idx = self.torch.arange(lo, hi, dtype=self.torch.int64, device=self.device)
            t[lo:hi] = value_at(idx).to(t.dtype)

    def _count_wrong(self, t: Any, value_at: Any) -> int:
        n = t.numel()
        wrong = 0
        for lo in range(0, n, CHUNK_ELEMS):
            hi = min(n, lo + CHUNK_ELEMS)
            idx = self.torch.arange(lo, hi, dtype=self.torch.int64, device=self.device)
            wrong += int((t[lo:hi] != value_at(idx).to(t.dtype)).sum().item())
        return wrong

    def _patterns(self, op: str, n: int, me: int, per: int) -> tuple[Any, Any]:
        """(input value at index, expected output value at index) for this rank (index ``me`` in the group)."""
        tri = n * (n + 1) // 2
        if op == "all_reduce":
            return (lambda i: me + 1 + i % 7), (lambda i: tri + n * (i % 7))
        if op == "broadcast":
            return (lambda i: me + 1 + i % 7), (lambda i: 1 + i % 7)
        if op == "all_gather":
            return (lambda i: me + 1 + i % 7), (lambda i: (i // per) + 1 + (i % per) % 7)
        if op == "reduce_scatter":
            return (lambda i: me + 1 + i % 7), (lambda i: tri + n * ((me * per + i) % 7))
        if op == "all_to_all":
            return ((lambda i: 8 * (me * n + i // per) + 1 + (i % per) % 7),
                    (lambda i: 8 * ((i // per) * n + me) + 1 + (i % per) % 7))
        raise ValueError(f"unknown collective {op!r}")

    # ----------------------------------------------------------------- the call

    def _call(self, op: str, send: Any, recv: Any, group: Any, root: int) -> None:
        d = self.dist
        if op == "all_reduce":
            d.all_reduce(send, group=group)
        elif op == "broadcast":
            d.broadcast(send, src=root, group=group)
        elif op == "all_gather":
            # torch 2.13 renames the single-tensor forms; 2.11 (the lent GPUs) has only the old names.
            (getattr(d, "all_gather_single", None) or d.all_gather_into_tensor)(recv, send, group=group)
        elif op == "reduce_scatter":
            (getattr(d, "reduce_scatter_single", None) or d.reduce_scatter_tensor)(recv, send, group=group)
        elif op == "all_to_all":
            d.all_to_all_single(recv, send, group=group)
        else:
            raise ValueError(f"unknown collective {op!r}")

    def measure(self, op: str, size_bytes: int, ranks: tuple[int, ...], group: Any, warmup: int,
                iters: int) -> Measured:
        """Measure ``op`` at nccl-tests' size ``size_bytes`` on the group of global ``ranks`` (this
        rank among them). Errors inside the call are caught and returned; after one, the process
        group may be unusable and the caller stops."""
        n = len(ranks)
        me = ranks.index(self.rank)
        lay = layout(op, size_bytes, n, 4)
        base = Measured(op, lay.size_bytes, lay.count, ranks, method=self.method)
        need = need_bytes(op, size_bytes, n)
        free = self.free_bytes()
        if self.cuda:
            ok = self._min_over(int(free is not None and need <= MEMORY_HEADROOM * free), group)
            if not ok:
                least = self._min_over(free or 0, group)
                return _replace(base, skipped="out_of_memory", need_bytes=need, free_bytes=least)
        torch = self.torch
        send = recv = None
        try:
            try:
                send = torch.empty(lay.send, dtype=torch.float32, device=self.device)
                if op not in ("all_reduce", "broadcast"):
                    recv = torch.empty(lay.recv, dtype=torch.float32, device=self.device)
                allocated = 1
            except RuntimeError:  # torch.cuda.OutOfMemoryError is a RuntimeError
                allocated = 0
            if self.cuda and not self._min_over(allocated, group):
                return _replace(base, skipped="out_of_memory", need_bytes=need, free_bytes=free)
            root = ranks[0]
            value_in, value_out = self._patterns(op, n, me, lay.count)
            self._fill(send, value_in)
            for _ in range(warmup):
                self._call(op, send, recv, group, root)
            self.clock.synchronize()
            # One mark between consecutive calls, as nccl-tests times its loop: the samples add up to
            # the whole loop, so their mean is its time per call (the host runs ahead of the GPU on
            # large sizes; on small ones the samples show the launch cost a real caller pays too).
            marks = [self.clock.mark()]
            for _ in range(iters):
                self._call(op, send, recv, group, root)
                marks.append(self.clock.mark())
            self.clock.synchronize()
            samples = tuple(max(self.clock.elapsed_us(a, b), 1e-3) for a, b in zip(marks[:-1], marks[1:], strict=True))
            # The check runs on fresh inputs: timed all_reduce iterations summed in place.
            self._fill(send, value_in)
            if recv is not None:
                recv.fill_(-1.0)  # poison: an element the collective never wrote shows as wrong
            self._call(op, send, recv, group, root)
            self.clock.synchronize()
            wrong = self._count_wrong(recv if recv is not None else send, value_out)
            return _replace(base, samples_us=samples, wrong=wrong)
        except Exception as e:  # noqa: BLE001 - a failed collective is a result, reported by the caller
            return _replace(base, error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
        finally:
            del send, recv
            if self.cuda:
                torch.cuda.empty_cache()


def _replace(m: Measured, **changes: Any) -> Measured:
    from dataclasses import replace

    return replace(m, **changes)
