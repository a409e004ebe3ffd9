"""SIGTERM and SIGHUP (a scheduler's end of job, a closed terminal) handled as Ctrl-C is, and several children
driven from threads while the main thread, the only one signals reach, waits."""

from __future__ import annotations

import contextvars
import functools
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from envcheck.harness.failures import Stopped

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
JOIN_S = 10.0  # after a stop, how long each thread may take to hand over what its child sent
T, R = TypeVar("T"), TypeVar("R")


class Signalled(BaseException):
    """SIGTERM or SIGHUP reached envcheck: unwinds like KeyboardInterrupt does."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.name = signal.Signals(signum).name


def as_interrupt(signum: int) -> KeyboardInterrupt:
    """A stop signal as Ctrl-C, naming the signal (for ``stop_signals``)."""
    return KeyboardInterrupt(signal.Signals(signum).name)


class Received:
    """The stop signals seen; ``armed`` while the first may still raise."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.armed = True


@contextmanager
def stop_signals(exc: Callable[[int], BaseException] = Signalled) -> Iterator[Received]:
    """While armed, the first SIGTERM or SIGHUP raises ``exc(signum)`` in the main thread; later ones are only
    noted, so saving what finished is never cut short. Outside the main thread nothing is installed."""
    got = Received()

    def handle(signum: int, frame: object) -> None:
        got.names.append(signal.Signals(signum).name)
        if got.armed and len(got.names) == 1:
            got.armed = False
            raise exc(signum)

    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
    try:
        yield got
    finally:
        got.armed = False
        for sig, old in previous.items():
            signal.signal(sig, old)  # type: ignore[arg-type]


def together(jobs: Sequence[Callable[[threading.Event], None]]) -> Stopped | None:
    """Each job in a thread of its own (given the event that stops its child) and the caller's context (the command's
    language), waited for here; Ctrl-C, SIGTERM or SIGHUP stops them all, waits for what they gathered and is returned."""
    stop, left, lock, finished = threading.Event(), [len(jobs)], threading.Lock(), threading.Event()

    def run(job: Callable[[threading.Event], None]) -> None:
        try:
            job(stop)
        finally:
            with lock:
                left[0] -= 1
                if not left[0]:
                    finished.set()

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(run, job), daemon=True) for job in jobs]
    for t in threads:
        t.start()
    stopped: Stopped | None = None
    with stop_signals() as got:
        try:
            # Not Thread.join: interrupted, it can mark a running thread as ended.
            while jobs and not finished.wait(0.2):
                pass
        except KeyboardInterrupt:
            stopped = Stopped("SIGINT")
        except Signalled as s:
            stopped = Stopped(s.name)
        got.armed = False
    if stopped is None and got.names:
        stopped = Stopped(got.names[0])
    if stopped is not None:
        stop.set()
        finished.wait(JOIN_S)
    return stopped


def each(items: Sequence[T], job: Callable[[T, threading.Event], R]) -> tuple[list[R | None], Stopped | None]:
    """``job(item, stop)`` for every item at once (``together``): the results in order (None: it did not finish)."""
    got: list[R | None] = [None] * len(items)

    def run(k: int, stop: threading.Event) -> None:
        got[k] = job(items[k], stop)

    return got, together([functools.partial(run, k) for k in range(len(items))])


def serial(fn: Callable[..., None] | None) -> Callable[..., None]:
    """``fn`` (None: nothing) called from one thread at a time."""
    lock = threading.Lock()

    def call(*args: Any) -> None:
        if fn is not None:
            with lock:
                fn(*args)

    return call
