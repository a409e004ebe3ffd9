"""A table of contents before a long document's first section, read from the document's own headings (HTML
section ids, GitHub's Markdown slugs), so every document gets one without its template knowing."""

from __future__ import annotations

import html
import re

from envcheck.render.i18n import t

MIN_SECTIONS = 3
# A top-level section: <section id=...><h2>, or a heading that carries its own id (<h2 id=...>, <h3 id=...>).
_HTML_HEADING = re.compile(r'<section id="([^"]+)"[^>]*>\s*<h(2)[^>]*>(.*?)</h2>|<h([23]) id="([^"]+)"[^>]*>(.*?)</h\4>',
                           re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_BADGE = re.compile(r'<span class="badge[^"]*">.*?</span>', re.DOTALL)  # a status beside a heading: not its name
_MD_HEADING = re.compile(r"^(##|###) (.*\S)", re.MULTILINE)
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>])")


def _outline(found: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """The level-2 entries; the level-3 ones too where there are too few of those (a diff of two reports)."""
    top = [f for f in found if f[0] == 2]
    return top if len(top) >= MIN_SECTIONS else found


def html_toc(page: str) -> str:
    """``page`` with a ``<nav class="toc">`` before its first section."""
    found = [(2, m[0], m[2]) if m[0] else (int(m[3]), m[4], m[5]) for m in _HTML_HEADING.findall(page)]
    entries = _outline(found)
    if len(entries) < MIN_SECTIONS:
        return page
    title = html.escape(t("toc.title"))
    items = "".join(f'<li class="toc-{level}"><a href="#{sid}">{_TAG.sub("", _BADGE.sub("", text)).strip()}</a></li>'
                    for level, sid, text in entries)
    nav = f'<nav class="toc" aria-label="{title}"><div class="label">{title}</div><ol>{items}</ol></nav>\n'
    first = _HTML_HEADING.search(page)
    assert first is not None  # entries were found
    at = page.rfind("<section ", 0, first.start() + 1)
    at = first.start() if at < 0 or "</section>" in page[at:first.start()] else at
    return page[:at] + nav + page[at:]


def slug(heading: str, seen: dict[str, int]) -> str:
    """GitHub's anchor for a Markdown heading (lower case, punctuation dropped, spaces to hyphens; a
    repeated heading gets ``-1``, ``-2``), from the heading as written (escapes and links undone)."""
    text = _MD_ESCAPE.sub(r"\1", heading)
    text = re.sub(r"\[([^][]*)\]\([^()]*\)", r"\1", text).replace("`", "").replace("*", "")
    base = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


def markdown_toc(doc: str) -> str:
    """``doc`` with a linked list of its sections before the first of them."""
    # Headings inside fenced code are not headings.
    fences = [m.span() for m in re.finditer(r"^```.*?^```", doc, re.MULTILINE | re.DOTALL)]
    found = [m for m in _MD_HEADING.finditer(doc) if not any(a <= m.start() < b for a, b in fences)]
    seen: dict[str, int] = {}
    anchors = {m.start(): slug(m.group(2), seen) for m in found}  # every heading counts for GitHub's numbering
    entries = _outline([(len(m.group(1)), str(m.start()), m.group(2)) for m in found])
    if len(entries) < MIN_SECTIONS:
        return doc
    lines = [f"**{t('toc.title')}**", ""]
    lines += [f"{'  ' * (level - 2)}- [{text}](#{anchors[int(at)]})" for level, at, text in entries]
    at = found[0].start()
    return doc[:at] + "\n".join(lines) + "\n\n" + doc[at:]
