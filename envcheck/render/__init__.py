"""Reports people read: Markdown and self-contained HTML with charts, from a report JSON alone.

``write_documents`` is what ``envcheck render`` and ``envcheck run`` call; the
``render_*`` functions return the text without touching the disk. Everything here
is a pure function of the report, so rendering the same JSON anywhere gives the
same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envcheck.model import Report
from envcheck.render.html import render_html
from envcheck.render.i18n import LANGS
from envcheck.render.markdown import render_markdown

FORMATS: tuple[str, ...] = ("md", "html")

__all__ = ["FORMATS", "LANGS", "render_html", "render_markdown", "write_documents"]


def _validate(formats: Sequence[str], lang: str) -> list[str]:
    from envcheck.errors import UsageError

    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise UsageError(f"unknown format {unknown[0]!r}: choose from {', '.join(FORMATS)}")
    if not formats:
        raise UsageError(f"no format given: choose from {', '.join(FORMATS)}")
    if lang not in LANGS:
        raise UsageError(f"unknown language {lang!r}: choose from {', '.join(LANGS)}")
    return list(dict.fromkeys(formats))


def write_documents(report: Report, json_path: Path, formats: Sequence[str], lang: str = "en",
                    out_dir: Path | None = None, force: bool = False) -> list[Path]:
    """Write ``<stem>.md`` (+ ``<stem>_charts/*.svg``) and/or ``<stem>.html``; return the paths written.

    ``stem`` is the JSON file's stem, plus ``.zh-CN`` for Chinese. Every target is
    checked before anything is written, so a refusal leaves the folder untouched:
    an existing file is replaced only with ``force``.
    """
    from envcheck.errors import UsageError
    from envcheck.model import write_new
    from envcheck.render import charts as ch

    fmts = _validate(formats, lang)
    folder = Path(out_dir) if out_dir is not None else Path(json_path).parent
    stem = Path(json_path).stem + ("" if lang == "en" else f".{lang}")
    charts_dir = f"{stem}_charts"
    plans = ch.plan(report)

    targets: list[Path] = []
    if "md" in fmts:
        targets.append(folder / f"{stem}.md")
        targets += [folder / charts_dir / f"{p.name}.svg" for p in plans]
    if "html" in fmts:
        targets.append(folder / f"{stem}.html")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is not a folder")
    existing = [p for p in targets if p.exists()]
    if existing and not force:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise UsageError(f"{existing[0]} already exists{more}; --force replaces it")

    drawn = [ch.draw(report, p, lang) for p in plans]
    contents: dict[Path, str] = {}
    if "md" in fmts:
        contents[folder / f"{stem}.md"] = render_markdown(report, lang, charts_dir)
        for c in drawn:
            contents[folder / charts_dir / f"{c.plan.name}.svg"] = c.svg
    if "html" in fmts:
        contents[folder / f"{stem}.html"] = render_html(report, lang, drawn)

    written = []
    for path, text in contents.items():
        if force and path.exists():
            path.unlink()  # the user asked for it; write_new then places the new file whole
        written.append(write_new(path, text))
    return written
