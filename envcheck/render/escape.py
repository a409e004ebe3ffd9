"""Machine text made safe per medium: ``md_text`` / ``md_code`` (Markdown, GFM tables), ``term`` (rich markup),
``json_text``; unseen characters shown by one rule (``outside_text.visible``); HTML by Jinja's autoescape, with a
`command` the catalogue marks with backticks shown as ``<code>`` (``code_spans``, ``fix``)."""

from __future__ import annotations

import html
import re

from markupsafe import Markup

from envcheck.outside_text import json_text, visible

__all__ = ["code_spans", "fix", "html_command", "json_text", "md_code", "md_lead", "md_text", "term", "visible"]


# --------------------------------------------------------------------------- Markdown

# Everywhere: characters that start inline markup (emphasis, code, links, raw HTML, entities,
# GFM strikethrough and table cells, math on code hosts) and the escape character itself.
_MD_INLINE = re.compile(r"([\\`*_\[\]<>&|~$])")
# At the start of text only: what would open a block (heading, quote, list, thematic break).
_MD_BLOCK_START = re.compile(r"^(\s*)([#>+\-=]|\d+[.)])")


def md_text(text: object) -> str:
    """Literal text in Markdown, inline or in a table cell: no markup, no raw HTML, one line."""
    return _MD_INLINE.sub(r"\\\1", visible(text))


def md_lead(text: object) -> str:
    """Escaped text (``md_text``) that begins a line: a leading ``#``, ``>``, ``-``, ``1.`` would open a block."""
    return _MD_BLOCK_START.sub(_escape_block, str(text), count=1)


def _escape_block(m: re.Match[str]) -> str:
    lead, mark = m.group(1), m.group(2)
    # A backslash escapes punctuation only: "1." is kept a number by escaping its dot.
    return f"{lead}{mark[:-1]}\\{mark[-1]}" if mark[0].isdigit() else f"{lead}\\{mark}"


def md_code(text: object, in_table: bool = False) -> str:
    """A Markdown code span holding ``text`` literally: fenced one backtick longer than its longest run, padded
    where it starts or ends with one; in a GFM table ``|`` escaped (the table parser removes the backslash)."""
    s = visible(text)
    if in_table:
        s = s.replace("|", "\\|")
    longest = max((len(r) for r in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith(("`", " ")) or s.endswith(("`", " ")) or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


# --------------------------------------------------------------------------- terminal


def term(text: object) -> str:
    """Text for rich with markup on: brackets escaped, controls and bidi characters visible."""
    from rich.markup import escape

    return escape(visible(text))


# A run of a command's characters between spaces (and between CJK text, which may break anywhere).
_TOKEN = re.compile(r"[^\s\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]+")


def html_command(text: object) -> Markup:
    """A fix for HTML that wraps only between its tokens: each run of a command's characters is one unbreakable box
    (browsers also break after a hyphen and, with overflow-wrap, anywhere)."""
    shown = visible(str(text), lines=True)
    out, end = [], 0
    for m in _TOKEN.finditer(shown):
        out.append(html.escape(shown[end:m.start()], quote=False))
        out.append(f'<span class="tok">{html.escape(m.group(), quote=False)}</span>')
        end = m.end()
    out.append(html.escape(shown[end:], quote=False))
    return Markup("".join(out))


_KEEP = re.compile(r"<(code|pre|style|script|svg|title|textarea)\b.*?</\1>|<[^>]*>", re.DOTALL)
_SPAN = re.compile(r"`([^`<>\n]+)`")


def code_spans(page: str) -> str:
    """``page`` with every `span` of its text (never inside a tag, code, a chart, style or title) as ``<code>``."""
    out: list[str] = []
    end = 0
    for m in _KEEP.finditer(page):
        out += [_SPAN.sub(r"<code>\1</code>", page[end:m.start()]), m.group(0)]
        end = m.end()
    out.append(_SPAN.sub(r"<code>\1</code>", page[end:]))
    return "".join(out)


def fix(text: object) -> Markup:
    """A check's fix for HTML: the whole of it as a command, or its words with each `command` as one."""
    shown = visible(str(text), lines=True)
    parts = shown.split("`")
    if len(parts) < 3 or len(parts) % 2 == 0:  # no span, or an unpaired backtick: a command as written
        return Markup(f'<code class="fix">{html_command(shown)}</code>')
    out = [html.escape(p, quote=False) if i % 2 == 0 else f'<code class="fix">{html_command(p)}</code>'
           for i, p in enumerate(parts)]
    return Markup("".join(out))
