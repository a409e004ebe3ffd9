"""Text from outside envcheck (a machine, a snapshot, a report, a child process): made safe, by one rule each.

* Encodable where it is read: a lone surrogate becomes U+FFFD (``encodable``).
* Seen as it is wherever it is shown: a character that changes how text reads without being seen (controls, bidi,
  zero-width...) is written ``\\u{202e}`` by ``visible``, and as JSON's own escapes by ``json_text``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_UNSEEN = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0\ufffe\uffff" + "".join(
    map(chr, (*range(0xFE00, 0xFE10), *range(0xE0000, 0xE0080), *range(0xE0100, 0xE01F0)))))
# Printable as str.isprintable() sees them: the fast check below must look for these too.
_PRINTABLE_UNSEEN = re.compile(f"[{''.join(sorted(c for c in _UNSEEN if c.isprintable()))}]")
# What the rule may take: all but printable ASCII (newline and tab too, unless the text is laid out in lines).
_CANDIDATE = re.compile(r"[^\x20-\x7e]")
_CANDIDATE_IN_LINES = re.compile(r"[^\x20-\x7e\n\t]")
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


@functools.lru_cache(maxsize=4096)
def unseen(c: str) -> bool:
    """Whether the character ``c`` changes how text reads without being seen (the module docstring)."""
    return c in _UNSEEN or unicodedata.category(c) in _CATEGORIES


def visible(text: object, lines: bool = False) -> str:
    """``text`` with every ``unseen`` character written ``\\u{...}`` (newline and tab kept with ``lines``:
    for a template's own layout, never for machine text)."""
    s = str(text)
    if s.isprintable() and not _PRINTABLE_UNSEEN.search(s):
        return s
    return (_CANDIDATE_IN_LINES if lines else _CANDIDATE).sub(
        lambda m: f"\\u{{{ord(m[0]):04x}}}" if unseen(m[0]) else m[0], s)


def json_text(text: str) -> str:
    """A JSON document with every ``unseen`` character written as JSON's ``\\uXXXX``: read back the same."""
    def escape(c: str) -> str:
        units = c.encode("utf-16-be", "surrogatepass")
        return "".join(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}" for i in range(0, len(units), 2))

    return _CANDIDATE_IN_LINES.sub(lambda m: escape(m[0]) if unseen(m[0]) else m[0], text)


def encodable(value: Any) -> Any:  # JSON-like data from outside
    """``value`` (a string, or JSON-like data of them, keys included) with every lone surrogate made U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(encodable(v) for v in value)
    return value

