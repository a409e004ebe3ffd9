"""A burn with a line per GPU and phase on stderr: what ``envcheck burn`` and ``run --burn`` both run."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from envcheck.burn.protocol import Event, PhaseStarted, Started
from envcheck.commands import say
from envcheck.model.burn import Burn
from envcheck.render.i18n import word


def progress(stream: TextIO, cpu: bool = False) -> Callable[[int, Event], None]:
    """One line per GPU (or the CPU) per phase on stderr (each phase lasts minutes: no bar needed)."""

    def on_event(gpu: int, ev: Event) -> None:
        who = "CPU" if cpu else f"GPU {gpu}"
        if isinstance(ev, Started):
            say(f"{who}: {ev.device.name}", stream, "burn")
        elif isinstance(ev, PhaseStarted):
            say(f"{who}: {word('burn.phase.', ev.phase)} ({ev.dtype}, {ev.planned_s:.0f} s)", stream, "burn")
    return on_event


def burn_devices(gpus: Sequence[int], minutes: float, *, cpu: bool = False, stream: TextIO | None = None,
                 control: str | None = None, control_gpu: int | None = None) -> Burn:
    """``burn.launch.burn_node`` with a progress line per GPU and phase on ``stream`` (stderr)."""
    from envcheck.burn.launch import burn_node

    return burn_node(gpus, minutes, cpu=cpu, on_event=progress(stream if stream is not None else sys.stderr, cpu),
                     control=control, control_gpu=control_gpu)
