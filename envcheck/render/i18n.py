"""The message catalogue: every sentence envcheck shows, per language, and how keys become text.

One flat JSON file per language under ``catalog/`` (``en.json``, ``zh-CN.json``), the same keys
in both, placeholders in ``str.format`` style. Terminal, Markdown, HTML and charts of a run,
a diff and a history all read it.

Two ways in:

* ``translate(lang, key, **params)``: a key the presentation code names itself; a missing key
  is a programming error (KeyError), so a typo fails the tests instead of reaching a user;
* ``phrase(lang, key, params, escape)``: a key that came from data (a note, a skip reason, a
  finding, a ceiling's source). Its parameters are formatted by the unit their names carry
  and escaped for the medium; a key this version does not know (a newer worker's note) is
  shown generically, key and parameters, instead of failing the render; a placeholder the
  data did not supply shows as a dash; a parameter of a small vocabulary (``VOCABULARY``: which
  side of a comparison, which stage of a case) is phrased too. ``legacy.text`` (a schema-1
  report's English) is shown as it was recorded.
"""

from __future__ import annotations

import functools
import json
import string
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envcheck.model.facts import STATUSES, Check
from envcheck.model.reasons import KEYS as REASON_KEYS
from envcheck.ops import OPS
from envcheck.render import fmt

LANGS: tuple[str, ...] = ("en", "zh-CN")
DEFAULT_LANG = "en"
CATALOG_DIR = Path(__file__).with_name("catalog")
LEGACY_TEXT = "legacy.text"

Escape = Callable[[str], str]


def _same(text: str) -> str:
    return text


class UnknownLanguage(ValueError):
    """A language with no catalogue."""


@functools.cache
def catalog(lang: str) -> Mapping[str, str]:
    """The messages of ``lang`` (cached: read-only package data). Keys starting with ``_`` are notes for translators."""
    if lang not in LANGS:
        raise UnknownLanguage(f"unknown language {lang!r} (choose from {', '.join(LANGS)})")
    with (CATALOG_DIR / f"{lang}.json").open(encoding="utf-8") as f:
        data = json.load(f)
    return {k: v for k, v in data.items() if not k.startswith("_")}


def placeholders(message: str) -> set[str]:
    """Names of the ``{placeholders}`` in one message."""
    return {name for _, name, _, _ in string.Formatter().parse(message) if name}


def has(lang: str, key: str) -> bool:
    return key in catalog(lang)


def _singular(lang: str, key: str, params: Mapping[str, Any]) -> str:
    """``key.one`` where the sentence has a count of one and the catalogue has a singular form of it."""
    if str(params.get("count")) == "1" and f"{key}.one" in catalog(lang):
        return f"{key}.one"
    return key


def translate(lang: str, key: str, **params: Any) -> str:
    """The message ``key`` in ``lang`` with ``params`` (already text) filled in; KeyError when unknown."""
    message = catalog(lang)[_singular(lang, key, params)]
    return message.format(**params) if params else message


def size(lang: str, dims: Sequence[int], op: str) -> str:
    """``fmt.shape``, but a convolution's dimensions each with its name in ``lang`` (``N64 C64 … R7 stride 2``)."""
    if op in OPS and OPS[op].family == "conv" and len(dims) == 7:
        return translate(lang, "size.conv", **dict(zip(("n", "c", "h", "w", "k", "r", "stride"), dims, strict=True)))
    return fmt.shape(dims)


def case_label(lang: str, key: Sequence[Any]) -> str:
    """One case: ``matmul triton fp32/tf32 4096×4096×4096`` (a ``CaseKey``)."""
    op, impl, dtype, precision, dims = key
    return f"{op} {impl} {fmt.precision_label(dtype, precision)} {size(lang, dims, op)}"


# Parameters whose values are words of a small vocabulary, phrased in the reader's language.
VOCABULARY = {"side": "diff.side.", "stage": "stage.", "method": "timing_method."}


class _Dashes(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return fmt.DASH


def phrase(lang: str, key: str, params: Mapping[str, Any] | None = None, escape: Escape = _same,
           raw: Mapping[str, str] | None = None) -> str:
    """A data-supplied key phrased in ``lang``; ``escape`` is applied to each parameter's text.
    ``raw``: parameters that are text of this medium already (a phrase inside a phrase)."""
    params = dict(params or {})
    if key == LEGACY_TEXT:
        return escape(str(params.get("text", "")))
    values = fmt.params(params, escape) | dict(raw or {})
    # A fact's reason passed on as a parameter (a check quoting why a fact is missing): envcheck's own ones phrased.
    values |= {k: translate(lang, REASON_KEYS[v]) for k, v in params.items() if isinstance(v, str) and v in REASON_KEYS}
    for name, prefix in VOCABULARY.items():
        if isinstance(params.get(name), str) and f"{prefix}{params[name]}" in catalog(lang):
            values[name] = translate(lang, f"{prefix}{params[name]}")
    # A nested reason (a missing ceiling inside a finding) is phrased first, with the same parameters.
    if "reason_key" in params:
        inner = {k: v for k, v in params.items() if k != "reason_key"}
        values["reason"] = phrase(lang, str(params["reason_key"]), inner, escape)
    message = catalog(lang).get(_singular(lang, key, params))
    if message is None:
        shown = ", ".join(f"{escape(k)}={values[k]}" for k in sorted(values))
        return f"{escape(key)} ({shown})" if shown else escape(key)
    return message.format_map(_Dashes(values))


def join(lang: str, parts: Sequence[str]) -> str:
    """``parts`` as one list in ``lang`` (its separator is the catalogue's ``list.sep``)."""
    return translate(lang, "list.sep").join(parts)


def check_counts(lang: str, checks: Sequence[Check]) -> str:
    """``1 failed, 14 passed``: how many checks have each status, worst first, none of those with none."""
    n = {s: sum(c.status == s for c in checks) for s in STATUSES}
    return join(lang, [translate(lang, f"checks.count.{s}", count=n[s]) for s in STATUSES if n[s]])


def document_stem(stem: str, lang: str) -> str:
    """The file stem of a document rendered in ``lang`` from the report ``<stem>.json``."""
    return stem if lang == DEFAULT_LANG else f"{stem}.{lang}"


def translator(lang: str) -> Callable[..., str]:
    """``t(key, **params)`` bound to ``lang``."""
    return functools.partial(translate, lang)
