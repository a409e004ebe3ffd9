"""Errors people see and the exit statuses scripts read: one place, importing nothing of envcheck, so any layer may
raise these without importing the command line or the renderer."""

from __future__ import annotations

from collections.abc import Callable, Mapping

EXIT_OK = 0
EXIT_FAIL = 1  # a check or a case failed, or the run could not finish
EXIT_USAGE = 2  # bad options or a file that is not a usable report: one line on stderr
EXIT_NOTHING_COMPARED = 3  # diff --fail-on-regression judged no row: neither a pass nor a fail
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM: what finished was kept


def _unsaid(key: str, params: Mapping[str, object]) -> str | None:
    return None


# How a catalogue key is said in the command's language (None: not a key). render/i18n.py puts its lookup here as
# it loads: it imports this module, never the other way round.
say: Callable[[str, Mapping[str, object]], str | None] = _unsaid


class Said(Exception):
    """An error in envcheck's words: a catalogue key and its parameters (text already), said in the language of the
    command that shows it when ``str()`` is asked (``say``)."""

    def __init__(self, key: str, **params: object) -> None:
        super().__init__(key)
        self.key, self.params = key, params

    def __str__(self) -> str:
        return say(self.key, self.params) or self.key


class UsageError(Said):
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
