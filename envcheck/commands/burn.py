"""``envcheck burn``: every selected GPU under sustained load at once (one isolated worker each, a line per phase on
stderr), then a dated burn report. Exit status: 0 every GPU passed; 1 a GPU failed a verdict or its worker
crashed, hung or timed out (the report is written); 130 Ctrl-C, SIGTERM or SIGHUP; 2 bad options."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TextIO

from envcheck.burn.protocol import Event, PhaseStarted, Started
from envcheck.commands import say
from envcheck.commands.options import BurnOptions
from envcheck.errors import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, UsageError
from envcheck.model import Environment
from envcheck.model.burn import Burn
from envcheck.render.i18n import t, word

MAX_MINUTES = 24 * 60.0


def exit_status(verdict: str) -> int:
    return {"pass": EXIT_OK, "stopped": EXIT_INTERRUPTED}.get(verdict, EXIT_FAIL)


def check_control(s: BurnOptions, gpus: Sequence[int]) -> tuple[str | None, int | None]:
    """``--control`` and ``--control-gpu``, checked before anything runs (``slow_gemm`` needs siblings)."""
    control, target = s.control, s.control_gpu
    if control is None:
        if target is not None:
            raise UsageError("error.control_gpu_alone")
        return None, None
    target = gpus[0] if target is None else target
    if target not in gpus:
        raise UsageError("error.control_gpu_not_burned", gpu=target, gpus=gpus)
    if control == "slow_gemm" and len(gpus) < 2:
        raise UsageError("error.control_slow_gemm_one")
    return control, target


def burn_devices(gpus: Sequence[int], minutes: float, *, cpu: bool = False, stream: TextIO | None = None,
                 control: str | None = None, control_gpu: int | None = None) -> Burn:
    """``burn.launch.burn_node`` (also ``run --burn``'s) with a line per GPU (or the CPU) and phase on ``stream``
    (default: stderr): each phase lasts minutes, no bar needed."""
    from envcheck.burn.launch import burn_node

    def on_event(gpu: int, ev: Event) -> None:
        who = "CPU" if cpu else f"GPU {gpu}"
        if isinstance(ev, Started):
            say(f"{who}: {ev.device.name}", stream, "burn")
        elif isinstance(ev, PhaseStarted):
            say(f"{who}: {word('burn.phase.', ev.phase)} ({ev.dtype}, {ev.planned_s:.0f} s)", stream, "burn")

    return burn_node(gpus, minutes, cpu=cpu, on_event=on_event, control=control, control_gpu=control_gpu)


def execute(s: BurnOptions, collect: Callable[..., Environment] | None = None, stderr: TextIO | None = None,
            stdout: TextIO | None = None) -> int:
    from envcheck.commands import anonymize_key
    from envcheck.commands.publish import output_dir, output_formats, publish

    formats = output_formats(s.format)
    if s.minutes > MAX_MINUTES:
        raise UsageError("error.burn_minutes", most=f"{MAX_MINUTES:.0f}")
    out_dir, key = output_dir(s.out_dir), anonymize_key(s.anonymize)
    err = stderr if stderr is not None else sys.stderr
    if collect is None:
        from envcheck.probes.collect import collect
    env = collect(runtime=False, reports_dir=str(out_dir))
    gpus = (0,) if s.cpu else s.gpus.pick(len(env.gpus))
    control, control_gpu = check_control(s, gpus)
    where = "cpu" if s.cpu else "gpus" if len(gpus) > 1 else "gpu"
    say(t(f"burn.cli.start.{where}", minutes=f"{s.minutes:g}", gpus=", ".join(map(str, gpus))), err, "burn")
    if control is not None:
        say(t("burn.cli.control", control=control, gpu=control_gpu), err, "burn")
    when = datetime.now(timezone.utc)
    burn = burn_devices(gpus, s.minutes, cpu=s.cpu, stream=err, control=control, control_gpu=control_gpu)
    from envcheck.probes.collect import new_report
    from envcheck.render.terminal.burn import print_burn
    from envcheck.render.terminal.console import make_console

    out = publish(new_report("burn", env, burn=burn), key, out_dir, formats, when, err, stdout, "burn")
    assert out.analysis.burn is not None
    print_burn(make_console(out.stream), out.analysis.burn, out.written)
    return exit_status(out.analysis.burn.verdict)


main = execute
