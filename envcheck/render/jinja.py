"""The one Jinja environment every envcheck document is rendered with.

Shared by the report renderer and the comparison documents (diff, history) so that
escaping, number formatting and wording are the same everywhere:

* templates whose name ends in ``.html.j2`` / ``.html`` are autoescaped: every string
  from the machine (host name, GPU name, paths, check findings) is text, never markup;
* Markdown templates are not autoescaped; they pass machine strings through the
  ``md`` filter (table cells, inline text) which neutralises both Markdown table
  syntax and inline HTML, since code hosts render inline HTML in Markdown;
* ``t(key, **params)`` looks a message up in the catalogue of the ``lang`` variable
  the template was rendered with (``en`` when absent).

Filters: ``num`` (significant digits), ``bytes`` (binary units), ``duration_us``,
``seconds``, ``pct``, ``speedup``, ``sci`` (errors and tolerances), ``md``, ``code``.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

import jinja2

from envcheck.render.i18n import DEFAULT_LANG, translate

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"
DASH = "–"  # shown where a number does not exist (not measured, not applicable)


def num(x: Any, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, no exponent for everyday magnitudes."""
    if x is None or isinstance(x, bool):
        return DASH if x is None else str(x)
    if isinstance(x, int):
        return f"{x:,}".replace(",", " ") if abs(x) >= 100_000 else str(x)
    if not math.isfinite(x):
        return DASH
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if mag >= 6 or mag < -3:
        return f"{x:.{max(digits - 1, 0)}e}"
    decimals = max(digits - 1 - mag, 0)
    return f"{x:,.{decimals}f}".replace(",", " ")


def sci(x: Any) -> str:
    """An error or a tolerance: two significant digits, exponent form below 0.01."""
    if x is None:
        return DASH
    if x == 0:
        return "0"
    return f"{x:.1e}" if abs(x) < 0.01 else f"{x:.2g}"


def nbytes(x: Any) -> str:
    """Bytes in binary units (GiB for memory sizes, as nvidia-smi shows MiB)."""
    if x is None:
        return DASH
    x = float(x)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{num(x, 3)} {unit}"
        x /= 1024
    return DASH  # unreachable: the loop returns at TiB


def duration_us(x: Any) -> str:
    """A time given in microseconds, in the unit that keeps 3 significant digits readable."""
    if x is None:
        return DASH
    if x >= 1e6:
        return f"{num(x / 1e6)} s"
    if x >= 1e3:
        return f"{num(x / 1e3)} ms"
    return f"{num(x)} µs"


def seconds(x: Any) -> str:
    if x is None:
        return DASH
    return duration_us(x * 1e6)


def pct(x: Any, digits: int | None = None) -> str:
    """A percentage already scaled to 0..100: whole numbers, one decimal below 10 so small shares are not "0%"."""
    if x is None:
        return DASH
    if digits is None:
        digits = 1 if 0 < abs(x) < 9.95 else 0
    return f"{x:.{digits}f}%"


def ratio_pct(x: Any) -> str:
    """A ratio 0..1 as a percentage."""
    return DASH if x is None else pct(100 * x)


def speedup(x: Any) -> str:
    return DASH if x is None else f"{x:.2f}×"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]|#<>])")


def md(x: Any) -> str:
    """Text safe inside Markdown, including table cells.

    Escapes Markdown punctuation and ``|`` (a cell separator) with backslashes, so
    ``<script>`` stays literal text on GitHub/GitLab (which render inline HTML), and
    folds newlines into spaces (a newline would end the table row).
    """
    if x is None:
        return DASH
    text = str(x).replace("\r", " ").replace("\n", " ")
    text = text.replace("&", "&amp;")  # an entity like &lt; would otherwise be decoded by the code host
    return _MD_SPECIAL.sub(r"\\\1", text)


def code(x: Any) -> str:
    """Inline Markdown code for paths and commands (backticks inside are widened around)."""
    text = str(x).replace("\n", " ").replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


@jinja2.pass_context
def _t(ctx: jinja2.runtime.Context, key: str, **params: Any) -> str:
    return translate(ctx.get("lang") or DEFAULT_LANG, key, **params)


FILTERS = {
    "num": num,
    "sci": sci,
    "bytes": nbytes,
    "duration_us": duration_us,
    "seconds": seconds,
    "pct": pct,
    "ratio_pct": ratio_pct,
    "speedup": speedup,
    "md": md,
    "code": code,
}


@functools.cache
def environment() -> jinja2.Environment:
    """The shared environment (cached; treat it as read-only).

    ``StrictUndefined`` makes a misspelt variable an error in tests instead of an
    empty cell in a user's report.
    """
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    env.globals["t"] = _t
    return env
