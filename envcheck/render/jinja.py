"""The one Jinja environment of every document: ``.html.j2`` autoescaped, Markdown escaped by ``md`` / ``code``,
unseen characters shown by ``finalize``, gettext as ``i18n.t``, views as ``v``, ``bv``, ``cv``, ``dv``. No bytecode
cache: a cached template is unpickled and run, so a cache folder someone else can write would run their code."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from envcheck.analysis.verdict import verdict
from envcheck.render import burn_view, compare_view, crosscheck_view, fmt, i18n, view
from envcheck.render.escape import fix, html_command, md_code, md_lead, md_text, visible

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return visible(value, lines=True)


FILTERS = {
    "md": md_text, "lead": md_lead, "code": md_code, "code_cell": functools.partial(md_code, in_table=True),
    "command": html_command, "fix": fix,
    "esc": i18n.esc, "num": fmt.num, "pct": fmt.pct, "ratio_pct": fmt.ratio_pct, "sci": fmt.sci,
    "speedup": fmt.speedup, "ratio": fmt.ratio, "duration": fmt.duration_us, "seconds": fmt.seconds,
    "size_bytes": fmt.size_bytes, "shape": fmt.shape, "general": fmt.general,
    "variant": lambda c: fmt.precision_label(c.dtype, c.precision),
}
GLOBALS = {"t": i18n.t, "phrase": i18n.phrase, "has": i18n.has, "word": i18n.word, "check_counts": i18n.check_counts,
           "v": view, "bv": burn_view, "cv": crosscheck_view, "dv": compare_view, "fmt": fmt, "lang": i18n.current,
           "verdict_of": verdict}


@functools.cache
def environment() -> jinja2.Environment:
    """The shared environment (cached; read-only). ``StrictUndefined``: a misspelt variable fails the tests
    instead of leaving an empty cell in a user's report."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), extensions=["jinja2.ext.i18n"],
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        undefined=jinja2.StrictUndefined, finalize=_finalize, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    env.globals.update(GLOBALS)
    env.install_gettext_callables(gettext=i18n.t, ngettext=i18n.nt, newstyle=False)  # type: ignore[attr-defined]
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
