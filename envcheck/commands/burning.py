"""Burning the selected GPUs with progress on stderr: what ``envcheck burn`` and ``run --burn`` share."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from envcheck.burn.protocol import Event, PhaseStarted, Started
from envcheck.model.burn import Burn
from envcheck.render.i18n import word


def say(text: str, stream: Any) -> None:
    print(f"envcheck burn: {text}", file=stream, flush=True)


def progress(stream: Any, cpu: bool = False) -> Any:
    """One line per GPU (or the CPU) per phase on stderr (each phase lasts minutes: no bar needed)."""

    def on_event(gpu: int, ev: Event) -> None:
        who = "CPU" if cpu else f"GPU {gpu}"
        if isinstance(ev, Started):
            say(f"{who}: {ev.device.name}", stream)
        elif isinstance(ev, PhaseStarted):
            say(f"{who}: {word('burn.phase.', ev.phase)} ({ev.dtype}, {ev.planned_s:.0f} s)", stream)
    return on_event


def burn_devices(gpus: Sequence[int], minutes: float, *, cpu: bool = False, stream: Any = None,
                 control: str | None = None, control_gpu: int | None = None) -> Burn:
    """``burn.run.burn_node`` with a progress line per GPU and phase on ``stream`` (stderr)."""
    from envcheck.burn.run import burn_node

    return burn_node(gpus, minutes, cpu=cpu, on_event=progress(stream if stream is not None else sys.stderr, cpu),
                     control=control, control_gpu=control_gpu)
