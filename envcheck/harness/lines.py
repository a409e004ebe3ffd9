"""A child's output cut into bounded lines, whatever it writes: any line break ends a line, empty lines are dropped,
a long line keeps its head and tail around a marker, cut ``CUT_EDGE`` further each side so no part of a secret
straddling the cut survives the redactor."""

from __future__ import annotations

import re

CUT_EDGE = 1024  # longer than any token or password the redactor looks for
_BREAK = re.compile(rb"\r\n|\r|\n")


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
        return self._finish() or None

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
            line = f"{head} [envcheck: {self._cut + 2 * CUT_EDGE} bytes cut] {tail}"
        self._head.clear()
        self._tail.clear()
        self._cut = 0
        return line
