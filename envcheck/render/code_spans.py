"""Code spans in HTML: a `command` the catalogue marks with backticks becomes ``<code>`` in a finished page's text
(never inside a tag, code, a chart, style or title); ``fix`` lays a check's fix out as code."""

from __future__ import annotations

import html
import re

from markupsafe import Markup

from envcheck.render.escape import html_command, visible

_KEEP = re.compile(r"<(code|pre|style|script|svg|title|textarea)\b.*?</\1>|<[^>]*>", re.DOTALL)
_SPAN = re.compile(r"`([^`<>\n]+)`")


def _text(part: str) -> str:
    return _SPAN.sub(r"<code>\1</code>", part)


def code_spans(page: str) -> str:
    """``page`` with every `span` of its text shown as ``<code>``."""
    out: list[str] = []
    end = 0
    for m in _KEEP.finditer(page):
        out.append(_text(page[end:m.start()]))
        out.append(m.group(0))
        end = m.end()
    out.append(_text(page[end:]))
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
