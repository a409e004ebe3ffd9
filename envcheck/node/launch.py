"""The one seam through which the node and fleet code starts processes: torchrun, the peer-copy
worker, nccl-tests. Every child gets the same environment rules (NVLink multicast off), runs in its
own session with a time limit, and is stopped with everything it started on timeout or Ctrl-C.

torchrun starts each worker in a session of its own (torch.distributed.elastic's SubprocessHandler
uses ``start_new_session=True``), so killing torchrun's process group leaves the workers alive. A
job therefore names the pids of the processes it started (``orphans``: the workers report theirs as
their first act), and those are stopped by id after the group.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

from envcheck.bench.process import parent_death_signal, stop_tree
from envcheck.model.node import Launch

# NVLink multicast stays off in every child: the lent multi-GPU machines must not create multicast
# objects (NCCL's NVLS algorithms, torch symmetric memory, NVSHMEM all create them).
TERMINATE_GRACE_S = 10.0
TAIL_LINES = 40


def torchrun_argv(nproc: int, module: str, args: Sequence[str] = (), *, nnodes: int = 1, node_rank: int = 0,
                  master_addr: str | None = None, master_port: int | None = None,
                  python: str = sys.executable) -> list[str]:
    """``python -m torch.distributed.run ... -m module args``: standalone on one node, a static
    rendezvous at ``master_addr:master_port`` across nodes."""
    argv = [python, "-m", "torch.distributed.run"]
    if nnodes == 1 and master_addr is None:
        argv += ["--standalone", f"--nproc-per-node={nproc}"]
    else:
        argv += [f"--nnodes={nnodes}", f"--nproc-per-node={nproc}", f"--node-rank={node_rank}",
                 f"--master-addr={master_addr}", f"--master-port={master_port}"]
    return argv + ["-m", module, *args]


def envcheck_pythonpath(extra: str | None) -> str:
    """A worker's PYTHONPATH: envcheck's own folder first, then ``extra`` (the user's), so the workers
    import this envcheck wherever torchrun starts them."""
    import envcheck

    root = str(Path(envcheck.__file__).resolve().parent.parent)
    return os.pathsep.join(p for p in (root, extra) if p)


class Launcher(Protocol):
    """Runs one job to its end or its time limit; never raises for anything the job does."""

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: float, *, log_path: str | None = None,
            orphans: Callable[[], Iterable[int]] | None = None) -> Launch: ...


def _kill_orphans(orphans: Callable[[], Iterable[int]] | None) -> None:
    """SIGKILL to each orphan's process group (a torchrun worker leads a session of its own), or to
    the orphan alone when it leads none."""
    for pid in (orphans() if orphans is not None else ()):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class SubprocessLauncher:
    """The real launcher: ``subprocess.Popen`` in a new session, output into ``log_path`` (or a pipe)."""

    def __init__(self, grace_s: float = TERMINATE_GRACE_S) -> None:
        self.grace_s = grace_s

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: float, *, log_path: str | None = None,
            orphans: Callable[[], Iterable[int]] | None = None) -> Launch:
        start = time.monotonic()
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        log: IO[str] | None = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=dict(env), text=True, encoding="utf-8",
                                    errors="replace", start_new_session=True, preexec_fn=parent_death_signal())
        except OSError as e:
            if log:
                log.close()
            return Launch(tuple(argv), None, timeout, time.monotonic() - start,
                          error=f"could not start ({type(e).__name__}: {e})")

        def pump() -> None:
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    tail.append(line.rstrip("\n"))
                    if log:
                        log.write(line)
                        log.flush()
            except (OSError, ValueError):
                pass

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        timed_out = interrupted = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        except KeyboardInterrupt:
            interrupted = True
        if timed_out or interrupted:
            self._stop(proc, orphans)
        else:
            # A job that exited can still leave workers behind (torchrun killed by the OOM killer).
            _kill_orphans(orphans)
        reader.join(timeout=2.0)
        if log:
            log.close()
        return Launch(tuple(argv), proc.returncode, timeout, round(time.monotonic() - start, 3), timed_out=timed_out,
                      interrupted=interrupted, stderr_tail="\n".join(tail))

    def _stop(self, proc: subprocess.Popen[str], orphans: Callable[[], Iterable[int]] | None) -> None:
        # SIGTERM first (torchrun forwards it to its workers and tears them down itself), SIGKILL to
        # the whole tree after the grace; workers in sessions of their own are then stopped by id.
        stop_tree(proc, self.grace_s)
        _kill_orphans(orphans)
