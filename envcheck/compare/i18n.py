"""Messages of ``envcheck diff`` / ``envcheck history`` in every language, and the sentences built from them.

The catalogues live in ``render/catalog_compare/`` (same format as the report's
catalogues in ``render/catalog/``: flat JSON, ``str.format`` placeholders, keys
identical across languages). Terminal, Markdown and HTML output share them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from envcheck.compare.diff import CaseDiff
from envcheck.compare.envdiff import version_story
from envcheck.compare.history import Step
from envcheck.render.i18n import DEFAULT_LANG, load_catalog
from envcheck.render.jinja import DASH

_DIR = Path(__file__).resolve().parent.parent / "render" / "catalog_compare"


def catalog(lang: str) -> dict[str, str]:
    return load_catalog(_DIR, lang)


def translate(lang: str, key: str, **params: object) -> str:
    """Message ``key`` in ``lang``; a missing key raises KeyError (a typo fails tests, not users)."""
    message = catalog(lang or DEFAULT_LANG)[key]
    return message.format(**params) if params else message


def translator(lang: str) -> Callable[..., str]:
    """``t(key, **params)`` bound to ``lang``: what templates and the terminal renderer call."""

    def t(key: str, **params: object) -> str:
        return translate(lang, key, **params)

    return t


def general(x: float) -> str:
    """A setting such as a threshold or a confidence level: shortest exact form (2, 95, 2.5)."""
    return f"{x:g}"


def ratio(x: float | None) -> str:
    return DASH if x is None else f"{x:.3f}×"


def interval(low: float | None, high: float | None) -> str:
    return DASH if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def step_sentence(s: Step, t: Callable[..., str]) -> str:
    """"matmul triton bf16 got 7.0% faster at 2026-12-01 when driver 575.57 -> 580.159"."""
    if s.factor >= 2:  # "281x slower" reads better than "28024% slower"
        head = t(f"history.step.{s.direction}_x", group=s.group, factor=f"{s.factor:.3g}", when=s.created[:10])
    else:
        head = t(f"history.step.{s.direction}", group=s.group, pct=f"{s.change_pct:.1f}", when=s.created[:10])
    story = version_story(list(s.changes))
    return head + (t("history.step.when", changes=story) if story else t("history.step.nochange"))


def numeric_label(c: CaseDiff, t: Callable[..., str]) -> str:
    n = c.numeric
    if n is None:
        return ""
    if n.kind == "grew":
        return t("numeric.grew", factor=f"{n.factor:.0f}×" if n.factor else "")
    return t(f"numeric.{n.kind}")
