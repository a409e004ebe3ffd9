"""The one Jinja environment every envcheck document is rendered with (report, diff, history).

* Templates whose name ends in ``.html.j2`` are autoescaped: every string from the machine is
  text, never markup. Markdown templates are not; they pass machine strings through ``md``
  (text) or ``code`` / ``code_cell`` (code spans), see ``render.escape``.
* ``finalize`` makes control, bidi and invisible characters visible in every value a template
  prints, in both formats (HTML autoescaping leaves a right-to-left override in place).
  Values marked safe (SVG the chart writer drew) pass as they are.
* ``t(key, **params)`` looks a message up in the catalogue of the ``lang`` variable the
  template was rendered with.
* Templates format no numbers: the views (``render.view`` and the others) hand them text made
  by ``render.fmt``, so documents and terminal agree.
* No bytecode cache: a cached template is unpickled and run, so a cache folder someone else can write runs
  their code as the user; compiling costs about half a second per process.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from envcheck.render.code_spans import fix
from envcheck.render.escape import html_command, md_code, md_code_cell, md_lead, md_text, visible
from envcheck.render.i18n import translate

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


@jinja2.pass_context
def _t(ctx: jinja2.runtime.Context, key: str, **params: Any) -> str:
    return translate(ctx["lang"], key, **params)


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return visible(value, lines=True)


FILTERS = {
    "md": md_text,
    "lead": md_lead,
    "code": md_code,
    "code_cell": md_code_cell,
    "command": html_command,
    "fix": fix,
}


@functools.cache
def environment() -> jinja2.Environment:
    """The shared environment (cached; treat it as read-only).

    ``StrictUndefined`` makes a misspelt variable an error in tests instead of an empty cell
    in a user's report.
    """
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    env.globals["t"] = _t
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
