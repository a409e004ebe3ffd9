"""Errors people see and the exit statuses scripts read: one place, importing nothing of envcheck, so any layer may
raise these without importing the command line."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAIL = 1  # a check or a case failed, or the run could not finish
EXIT_USAGE = 2  # bad options or a file that is not a usable report: one line on stderr
EXIT_NOTHING_COMPARED = 3  # diff --fail-on-regression judged no row: neither a pass nor a fail
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM: what finished was kept


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


def first_line(text: object, limit: int = 200) -> str:
    """The first non-empty line of a message (an exception, a child's stderr), shortened to ``limit``."""
    line = next((s.strip() for s in str(text or "").splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message`` (compiler errors run to pages): a failure's detail in a report."""
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."
