"""A probe's child (importing torch, CUDA init, a Triton compile) as an ``Isolated``: its events, merged in order
(a crash half-way keeps what came before), and how it ended. Run through ``Host.run_python``, which gives the
events as stdout lines after ``MARKER``: the form snapshots record, so a recorded machine replays alike."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.harness.failures import signal_name
from envcheck.model import Facts, known, missing
from envcheck.probes.host import MARKER, Host

if TYPE_CHECKING:
    from envcheck.outside_json import Json

NOT_RUN = "not run: envcheck probe skips runtime probes"
TAIL_LINES = 40

# A Python exception's last traceback line: "ModuleNotFoundError: No module named 'torch'".
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b.*")


@dataclass(frozen=True)
class Isolated:
    """What the child reported (merged in order), why it failed in one line (None: it exited 0 and reported),
    and the last lines it wrote."""

    data: dict[str, Json] | None
    error: str | None
    output_tail: str


def parse_reports(stdout: str) -> tuple[dict[str, Json] | None, list[str]]:
    """(the JSON reports merged in order, None without one; the other lines) from a run's stdout."""
    data: dict[str, Json] | None = None
    other: list[str] = []
    for line in stdout.splitlines():
        try:
            obj = json.loads(line[len(MARKER):]) if line.startswith(MARKER) else line
        except json.JSONDecodeError:
            obj = line  # a report cut short by a crash mid-write (a recorded run of old)
        if obj is line:
            other.append(line)
        elif isinstance(obj, dict):
            data = {**(data or {}), **obj}
    return data, other


def last_line(text: str, match: re.Pattern[str] | None = None) -> str | None:
    """The last non-blank line of ``text`` (that ``match`` matches: a traceback's ``SomeError: message``)."""
    lines = (ln.strip() for ln in reversed(text.splitlines()))
    return next((ln for ln in lines if ln and (match is None or match.match(ln))), None)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_python(host: Host, target: str, timeout: float, name: str, args: object = None,
               paths: Sequence[str] = ()) -> Isolated:
    """Run ``target`` (``module:function``) in a child through ``host``; never raises. The merged reports are
    ``data``; a timeout, a crash by signal or a non-zero exit is recorded in ``error``. ``name``: the run's
    identity in snapshots."""
    res = host.run_python(target, timeout, name, args, paths=paths)
    data, other = parse_reports(res.stdout)
    combined = [*other, *res.stderr.splitlines()]
    tail = "\n".join(combined[-TAIL_LINES:]).strip()
    sig = signal_name(res.returncode)
    error = None
    if res.timed_out:
        error = f"timed out after {timeout:g} s"
    elif res.returncode is None:
        error = _one_line(f"could not start {host.python_executable or 'python'}: {res.error or 'unknown error'}")
    elif sig:
        error = f"crashed with {sig}"
    elif res.returncode != 0:
        why = last_line(res.stderr, EXCEPTION_LINE) or last_line(res.stderr) or last_line("\n".join(other))
        error = _one_line(f"exited {res.returncode}: {why}" if why else f"exited {res.returncode}")
    elif data is None:
        error = "exited 0 without reporting"
    return Isolated(data, error, tail)


def not_run(keys: tuple[str, ...], reason: str = NOT_RUN) -> Facts:
    """A runtime section whose child was never started: every key missing for ``reason``."""
    return {k: missing(reason) for k in keys}


def error_facts(error_text: str | None, iso: Isolated) -> Facts:
    """The ``error`` and ``output_tail`` facts every runtime section ends with."""
    return {
        "error": known(error_text) if error_text else missing("no error"),
        "output_tail": known(iso.output_tail) if (error_text and iso.output_tail) else missing("no output"),
    }
