"""Run Python code that may crash or hang (importing torch, CUDA init, a Triton compile) in a child.

A broken CUDA install can segfault inside ``import torch``; a wedged driver can hang
``cudaInit`` forever. Neither may take envcheck down with it, so such code runs in a
subprocess with a timeout, and whatever happens comes back as data: an ``Isolated``.

The child reports by printing JSON objects, each on its own line after ``MARKER``.
It may print several as it goes (after the import, after the smoke op, ...): they are
merged in order, so a crash half-way still leaves what was learnt before it.
"""

from __future__ import annotations

import json
import re
import signal as _signal
from dataclasses import dataclass
from typing import Any

from envcheck.model import Facts, known, missing
from envcheck.probes.host import Host

MARKER = "@@envcheck-json@@ "
NOT_RUN = "not run: envcheck probe skips runtime probes"
TAIL_LINES = 40

# Defined in the child before the caller's code: ``emit(dict)`` reports, and stdout is
# flushed at once so a later crash cannot swallow what was already reported.
PRELUDE = f"""\
import json as _ec_json, sys as _ec_sys
def emit(obj):
    _ec_sys.stdout.write({MARKER!r} + _ec_json.dumps(obj, default=str) + "\\n")
    _ec_sys.stdout.flush()
"""

# A Python exception's last traceback line: "ModuleNotFoundError: No module named 'torch'".
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b.*")


@dataclass(frozen=True)
class Isolated:
    """What the child did. ``ok``: it exited 0 and reported; otherwise ``error`` says why in one line."""

    ok: bool
    data: dict[str, Any] | None
    returncode: int | None
    timed_out: bool
    signal: str | None  # "SIGSEGV" when the child was killed by a signal
    output_tail: str  # last lines of stdout + stderr, marker lines removed
    wall_s: float
    error: str | None
    reports: tuple[dict[str, Any], ...] = ()  # every JSON report, in the order printed


def signal_name(returncode: int | None) -> str | None:
    """``SIGSEGV`` for a child killed by signal 11 (returncode -11), else None."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return _signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def parse_reports(stdout: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(the JSON reports in order, the other lines) from the child's stdout."""
    reports: list[dict[str, Any]] = []
    other: list[str] = []
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            try:
                obj = json.loads(line[len(MARKER):])
            except json.JSONDecodeError:
                other.append(line)  # a report cut short by a crash mid-write
                continue
            if isinstance(obj, dict):
                reports.append(obj)
        else:
            other.append(line)
    return reports, other


def parse_output(stdout: str) -> tuple[dict[str, Any] | None, list[str]]:
    """(merged JSON reports, the other lines) from the child's stdout."""
    reports, other = parse_reports(stdout)
    data: dict[str, Any] | None = None
    for obj in reports:
        data = {**(data or {}), **obj}
    return data, other


def exception_line(text: str) -> str | None:
    """The last ``SomeError: message`` line of a traceback, if the text has one."""
    found = None
    for line in text.splitlines():
        line = line.strip()
        if _EXCEPTION_LINE.match(line):
            found = line
    return found


def _last_line(text: str) -> str | None:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else None


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_python(host: Host, code: str, timeout: float, name: str | None = None, isolated: bool = False) -> Isolated:
    """Run ``code`` with ``host.python_executable -c``; never raises.

    ``code`` may call ``emit(dict)`` (defined for it) to report; the merged reports are
    ``data``. A timeout, a crash by signal or a non-zero exit is recorded in ``error``.
    ``name``: the run's identity in snapshots. ``isolated``: ``-I -S`` (no site-packages, no
    PYTHON* variables, no current folder on sys.path): the child puts on ``sys.path`` only
    what it needs, and starts in a tenth of the time a venv's site initialisation takes.
    """
    flags = ["-I", "-S"] if isolated else []
    argv = [host.python_executable, *flags, "-c", PRELUDE + code]
    res = host.run(argv, timeout=timeout, name=name)
    reports, other = parse_reports(res.stdout)
    data: dict[str, Any] | None = None
    for obj in reports:
        data = {**(data or {}), **obj}
    combined = [*other, *res.stderr.splitlines()]
    tail = "\n".join(combined[-TAIL_LINES:]).strip()
    sig = signal_name(res.returncode)
    error: str | None = None
    if res.timed_out:
        error = f"timed out after {timeout:g} s"
    elif res.returncode is None:
        error = _one_line(f"could not start {host.python_executable or 'python'}: {res.error or 'unknown error'}")
    elif sig:
        error = f"crashed with {sig}"
    elif res.returncode != 0:
        why = exception_line(res.stderr) or _last_line(res.stderr) or _last_line("\n".join(other))
        error = _one_line(f"exited {res.returncode}: {why}" if why else f"exited {res.returncode}")
    elif data is None:
        error = "exited 0 without reporting"
    return Isolated(
        ok=error is None,
        data=data,
        returncode=res.returncode,
        timed_out=res.timed_out,
        signal=sig,
        output_tail=tail,
        wall_s=res.wall_s,
        error=error,
        reports=tuple(reports),
    )


def not_run(keys: tuple[str, ...], reason: str = NOT_RUN) -> Facts:
    """A runtime section whose child was never started: every key missing for ``reason``."""
    return {k: missing(reason) for k in keys}


def error_facts(error_text: str | None, iso: Isolated) -> Facts:
    """The ``error`` and ``output_tail`` facts every runtime section ends with."""
    return {
        "error": known(error_text) if error_text else missing("no error"),
        "output_tail": known(iso.output_tail) if (error_text and iso.output_tail) else missing("no output"),
    }
