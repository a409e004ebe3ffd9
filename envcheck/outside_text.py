"""Text from outside envcheck (a machine, a snapshot, a report, a child process): made safe once.

Two rules, each applied at one place:

* **Encodable where it is read.** JSON may spell a lone surrogate (``"\\ud800"``) and Python reads it
  as a ``str`` that no UTF-8 writer accepts: one in a GPU name made every later write of the report
  (the JSON, the terminal, a Prometheus file) a ``UnicodeEncodeError``. The readers (the report and
  snapshot loaders, the probes' results) pass what they read through ``encodable``: each lone
  surrogate becomes U+FFFD, the replacement character, as a UTF-8 decoder does with a bad byte.
* **One line where a finding is built.** A newline in a machine string (a GPU name, a driver
  version, a path) must not split a check's finding, nor stop the rule that reports it: ``visible``
  writes every control, bidi and invisible format character as a visible escape (``\\x0a``,
  ``\\u202e``). The renderers use the same function as the base of each medium's escaping
  (``render/escape.py``).
"""

from __future__ import annotations

import re
from typing import Any

# U+061C, U+200E/F: marks; U+202A-U+202E: embeddings and overrides; U+2066-U+2069: isolates.
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# Zero-width and other invisible format characters that hide text or split words unseen.
INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"
# Lone surrogates: a file name or variable that was not UTF-8, as Python hands it over (no stream
# can write one as it is).
SURROGATES = "\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{BIDI}{INVISIBLE}\u2028\u2029{SURROGATES}]")
# The same without newline and tab: for text that is already laid out in lines (a template's output).
_UNSAFE_INLINE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI}{INVISIBLE}\u2028\u2029{SURROGATES}]")
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def _show(m: re.Match[str]) -> str:
    c = m.group(0)
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def visible(text: Any, lines: bool = False) -> str:
    """``text`` with every control, bidi and invisible format character written as an escape
    (newline and tab kept with ``lines``: for a template's own layout, never for machine text)."""
    s = str(text)
    pattern = _UNSAFE_INLINE if lines else _UNSAFE
    return pattern.sub(_show, s) if pattern.search(s) else s


def encodable(value: Any) -> Any:
    """``value`` (a string, or JSON-like lists and objects of them, keys included) with every lone
    surrogate replaced by U+FFFD; anything else as it is."""
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(encodable(v) for v in value)
    return value

