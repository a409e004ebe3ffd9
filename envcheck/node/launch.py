"""The seam through which node and fleet code starts processes, both through the harness: programs (torchrun,
nccl-tests) with ``run``, Python children (the copies) with ``spawn``.

torchrun starts each worker in a session of its own, so ending torchrun's session leaves them alive: a job
names the pids it started (``orphans``: the workers report theirs first), killed by id after it. Once they all
said done (``finished``), torchrun only waits in its exit barrier for the other nodes' agents (300 s for a node
that was lost): after the grace it is stopped, and the job has succeeded as its workers did."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any, Protocol

from envcheck.harness import command
from envcheck.harness.failures import Outcome
from envcheck.harness.lines import LineCutter
from envcheck.model.node import Launch
from envcheck.redact import Redactor

TERMINATE_GRACE_S = 10.0
TAIL_LINES = 40
LINE_BYTES = 64 << 10


def torchrun_argv(nproc: int, module: str, args: Sequence[str] = (), *, nnodes: int = 1, node_rank: int = 0,
                  master_addr: str | None = None, master_port: int | None = None,
                  python: str = sys.executable) -> list[str]:
    """``python -m torch.distributed.run ... -m module args``: standalone, or a static rendezvous across nodes."""
    argv = [python, "-m", "torch.distributed.run"]
    if nnodes == 1 and master_addr is None:
        argv += ["--standalone", f"--nproc-per-node={nproc}"]
    else:
        argv += [f"--nnodes={nnodes}", f"--nproc-per-node={nproc}", f"--node-rank={node_rank}",
                 f"--master-addr={master_addr}", f"--master-port={master_port}"]
    return argv + ["-m", module, *args]


def envcheck_pythonpath(extra: str | None) -> str:
    """A worker's PYTHONPATH: this envcheck's folder first, then ``extra`` (the user's)."""
    from envcheck.harness.spawn import package_root

    return os.pathsep.join(p for p in (package_root(), extra) if p)


class Launcher(Protocol):
    """Runs one job to its end or its time limit; never raises for anything the job does."""

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: float, *, log_path: str | None = None,
            orphans: Callable[[], Iterable[int]] | None = None, finished: Callable[[], bool] | None = None
            ) -> Launch: ...

    def spawn(self, target: str, args: Any, env: Mapping[str, str], timeout: float,
              on_event: Callable[[Any], None]) -> Outcome: ...


def _kill_orphans(orphans: Callable[[], Iterable[int]] | None) -> None:
    """SIGKILL to each orphan's process group, or to the orphan alone when it leads none."""
    for pid in (orphans() if orphans is not None else ()):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


class SubprocessLauncher:
    """Output into ``log_path`` as it comes, its last lines kept; on a time limit SIGTERM first (torchrun tears
    its workers down), SIGKILL after the grace."""

    def __init__(self, grace_s: float = TERMINATE_GRACE_S) -> None:
        self.grace_s = grace_s

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: float, *, log_path: str | None = None,
            orphans: Callable[[], Iterable[int]] | None = None, finished: Callable[[], bool] | None = None
            ) -> Launch:
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        cutter = LineCutter(LINE_BYTES)
        log: IO[bytes] | None = open(log_path, "ab") if log_path else None  # noqa: SIM115
        done_at: list[float] = []  # when ``finished`` first held

        def sink(data: bytes) -> None:
            tail.extend(cutter.feed(data))
            if log:
                log.write(data)
                log.flush()

        def over() -> bool:
            if not done_at and finished is not None and finished():
                done_at.append(time.monotonic())
            return bool(done_at) and time.monotonic() - done_at[0] > self.grace_s

        try:
            ran = command.run(argv, timeout, env=env, merge=True, sink=sink, grace_s=self.grace_s,
                              die_with_parent=True, over=over)
        except KeyboardInterrupt:
            ran = None
        finally:
            _kill_orphans(orphans)  # also after an exit of its own: torchrun killed by the OOM killer
            if log:
                log.close()
        tail.extend(line for line in [cutter.close()] if line)
        if ran is not None and ran.returncode is None:
            return Launch(tuple(argv), None, timeout, round(ran.wall_s, 3), error=f"could not start ({ran.error})")
        return Launch(tuple(argv), 0 if ran and ran.over else ran.returncode if ran else None, timeout,
                      round(ran.wall_s, 3) if ran else 0.0,
                      timed_out=bool(ran and ran.timed_out), interrupted=ran is None,
                      stderr_tail=Redactor({**os.environ, **env}).text("\n".join(tail)))

    def spawn(self, target: str, args: Any, env: Mapping[str, str], timeout: float,
              on_event: Callable[[Any], None]) -> Outcome:
        from envcheck.harness.spawn import spawn

        return spawn(target, args, timeout=timeout, env=env, on_event=on_event, grace_s=self.grace_s)
