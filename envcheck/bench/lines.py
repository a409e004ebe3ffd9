"""A child's output cut into lines, each of bounded size, whatever the child writes.

A worker runs a user's code, which may write 500 MiB without a newline, or draw a progress bar
that only ever writes ``\\r``: read with ``readline`` that would all be one line held in the
parent. Here ``\\n``, ``\\r`` and ``\\r\\n`` each end a line (a ``\\r`` progress bar is many lines,
as a terminal shows it; a protocol line is JSON, which never holds a raw ``\\r``), empty lines are
dropped, and a line over ``limit`` bytes keeps its head and its tail with a marker between them
saying how many bytes were cut. The bytes are decoded as UTF-8 with invalid sequences replaced,
so no text read here holds a lone surrogate.

At a cut, ``CUT_EDGE`` bytes more go on each side: a secret that straddled the cut would
otherwise survive in part, where the redactor, which looks for whole values, no longer finds it.
"""

from __future__ import annotations

import re

CUT_EDGE = 1024  # longer than any token or password the redactor looks for
_BREAK = re.compile(rb"\r\n|\r|\n")


def encodable(text: str) -> str:
    """``text`` with every lone surrogate replaced by ``?``: what a child sends as JSON (``"\\ud800"``)
    decodes to one, which no file or terminal can take."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")


def cut_marker(cut: int) -> str:
    return f" [envcheck: {cut} bytes cut] "


class LineCutter:
    """Feed it bytes as they come; it returns each finished line, bounded to about ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        if limit < 4 * CUT_EDGE:
            raise ValueError(f"a line limit must be at least {4 * CUT_EDGE} bytes, got {limit}")
        self.limit = limit
        self._head = bytearray()  # the whole line while it fits, then its first limit/2 bytes
        self._tail = bytearray()  # once cut: the last limit/2 bytes seen
        self._cut = 0  # bytes dropped between head and tail; 0 while the line fits

    def feed(self, data: bytes) -> list[str]:
        parts = _BREAK.split(data)
        done: list[str] = []
        for part in parts[:-1]:
            self._add(part)
            line = self._finish()
            if line:
                done.append(line)
        self._add(parts[-1])
        return done

    def close(self) -> str | None:
        """The last line, when the output ended without a line break."""
        line = self._finish()
        return line or None

    def _add(self, part: bytes) -> None:
        if not part:
            return
        half = self.limit // 2
        if not self._cut and not self._tail:
            self._head += part
            if len(self._head) <= self.limit:
                return
            part = bytes(self._head[half:])
            del self._head[half:]
        self._tail += part
        over = len(self._tail) - half
        if over > 0:
            del self._tail[:over]
            self._cut += over

    def _finish(self) -> str:
        if not self._cut and not self._tail:
            line = self._head.decode("utf-8", errors="replace")
        else:
            head = self._head[:-CUT_EDGE].decode("utf-8", errors="replace")
            tail = self._tail[CUT_EDGE:].decode("utf-8", errors="replace")
            line = head + cut_marker(self._cut + 2 * CUT_EDGE) + tail
        self._head.clear()
        self._tail.clear()
        self._cut = 0
        return line
