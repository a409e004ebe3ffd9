"""Cutting a machine's string out of a rendered page, whole occurrences only (the language tests)."""

from __future__ import annotations

import re


def without(text: str, s: str, whole: re.Pattern[str]) -> str:
    """``re.sub(whole, " ", text)`` for the string ``s``, where ``whole`` matches ``s`` at an occurrence that stands
    whole (a lookbehind and a lookahead around it). Its occurrences are found with str.find and each checked with
    ``whole``: a pattern that opens with a lookbehind would be tried at every position of a long page for every
    machine string (most of the language tests' time)."""
    parts, start, at = [], 0, 0
    while (at := text.find(s, at)) >= 0:
        if whole.match(text, at):  # the lookbehind sees the text before ``at``
            parts.append(text[start:at])
            start = at = at + len(s)
        else:
            at += 1
    return " ".join([*parts, text[start:]]) if parts else text
