"""Errors people see and the exit statuses scripts read: one place, importing nothing of envcheck until a message is
said, so any layer may raise these without importing the command line."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAIL = 1  # a check or a case failed, or the run could not finish
EXIT_USAGE = 2  # bad options or a file that is not a usable report: one line on stderr
EXIT_NOTHING_COMPARED = 3  # diff --fail-on-regression judged no row: neither a pass nor a fail
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM: what finished was kept


class Said(Exception):
    """An error in envcheck's words: a catalogue key and its parameters (text already), said in the language of the
    command that shows it; ``str()`` looks the key up then (render/i18n.py), so any layer may raise one."""

    def __init__(self, key: str, **params: object) -> None:
        super().__init__(key)
        self.key, self.params = key, params

    def __str__(self) -> str:
        from envcheck.render.i18n import has, phrase

        return phrase(self.key, self.params) if has(self.key) else self.key


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
