"""How a fleet's ranks hand results to rank 0, on torch.distributed alone: a gloo group, a ``TCPStore`` rank 0 opens
and announces, a store key of JSON per hand-over. Keys, unlike a gather, wait per rank with a time limit: a dead or
hung rank costs rank 0 its ``timeout_s``, beside the ranks that answered."""

from __future__ import annotations

import contextlib
import socket
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from torch.distributed import TCPStore

POLL_S = 0.2  # how often a waiting rank asks the store for a key


class Transport(Protocol):
    """Key/value hand-over between the ranks of one fleet run."""

    def put(self, key: str, value: str) -> None: ...

    def get(self, key: str, timeout_s: float) -> str | None:
        """The value under ``key`` once some rank put it; None after ``timeout_s`` without it."""

    def close(self) -> None: ...


class StoreTransport:
    """A ``torch.distributed.TCPStore`` hosted by rank 0."""

    def __init__(self, store: TCPStore, rank: int, world_size: int) -> None:
        self.store = store
        self.rank = rank
        self.world_size = world_size

    def put(self, key: str, value: str) -> None:
        self.store.set(key, value)

    def get(self, key: str, timeout_s: float) -> str | None:
        # Polled, not ``store.wait``-ed: a key already there is read however slowly a loaded store answers, and
        # a signal (SIGTERM from torchrun or Slurm) is handled within a poll, not after minutes in the C++ wait.
        deadline = time.monotonic() + max(timeout_s, 0.0)
        try:
            while not self.store.check([key]):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                time.sleep(min(POLL_S, left))
            data = self.store.get(key)
        except Exception:  # noqa: BLE001 - the store's host is gone
            return None
        return data.decode("utf-8") if isinstance(data, bytes) else str(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # nothing useful to do about a failed teardown
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def open_store_transport(rank: int, world_size: int, master_addr: str, timeout_s: float) -> StoreTransport:
    """Join the gloo group (env:// rendezvous) and the store rank 0 opens; raises what torch raises."""
    import torch.distributed as dist

    timeout = timedelta(seconds=timeout_s)
    dist.init_process_group("gloo", timeout=timeout)
    endpoint: list[str | int | None] = [None, None]
    store = None
    if rank == 0:
        store = dist.TCPStore(master_addr, 0, world_size, is_master=True, timeout=timeout, wait_for_workers=False)
        endpoint = [master_addr or socket.gethostname(), int(store.port)]
    dist.broadcast_object_list(endpoint, src=0)
    if rank != 0:
        store = dist.TCPStore(str(endpoint[0]), int(endpoint[1]), world_size, is_master=False, timeout=timeout)
    return StoreTransport(store, rank, world_size)
