"""Every sentence envcheck shows, in the render's language, escaped for its medium. The catalogues are gettext's
(``locale/<ll_CC>/LC_MESSAGES/envcheck.po``, msgids the keys code and reports store, compiled by tools/dev/catalog.py).
The language is chosen once (``language``) and the medium's escaping once (``escaping``; none for HTML, which escapes
whole sentences). ``t`` names a key (KeyError when unknown); ``phrase`` says a key from data: parameters formatted by
unit and escaped, an unknown key shown generically, a missing placeholder as a dash, ``legacy.text`` as recorded."""

from __future__ import annotations

import functools
import gettext
import string
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from envcheck import errors
from envcheck.model import CaseKey
from envcheck.model.facts import STATUSES, Check
from envcheck.model.reasons import KEYS as REASON_KEYS
from envcheck.ops import OPS
from envcheck.render import fmt

LANGS: tuple[str, ...] = ("en", "zh-CN")
DEFAULT_LANG = "en"
LOCALE_DIR = Path(__file__).with_name("locale")
LEGACY_TEXT = "legacy.text"

Escape = Callable[[str], str]


_LANG: ContextVar[str] = ContextVar("envcheck_lang", default=DEFAULT_LANG)
_ESCAPE: ContextVar[Escape] = ContextVar("envcheck_escape", default=str)  # none until a medium sets one


class UnknownLanguage(ValueError):
    """A language with no catalogue."""


def _check(lang: str) -> str:
    if lang not in LANGS:
        raise UnknownLanguage(f"unknown language {lang!r} (choose from {', '.join(LANGS)})")
    return lang


@contextmanager
def language(lang: str) -> Iterator[None]:
    token = _LANG.set(_check(lang))
    try:
        yield
    finally:
        _LANG.reset(token)


@contextmanager
def escaping(escape: Escape) -> Iterator[None]:
    token = _ESCAPE.set(escape)
    try:
        yield
    finally:
        _ESCAPE.reset(token)


def current() -> str:
    return _LANG.get()


def esc(text: object) -> str:
    """Machine text made safe for the medium being rendered."""
    return _ESCAPE.get()(str(text))


@functools.cache
def translations(lang: str) -> gettext.GNUTranslations:
    """The compiled catalogue of ``lang``."""
    with (LOCALE_DIR / _check(lang).replace("-", "_") / "LC_MESSAGES" / "envcheck.mo").open("rb") as f:
        return gettext.GNUTranslations(f)


def _messages() -> dict[str | tuple[str, int], str]:
    # gettext's own table (plural entries under (msgid, form)): the one way to ask whether a key is known.
    return translations(_LANG.get())._catalog  # type: ignore[attr-defined,no-any-return]


def catalog(lang: str) -> dict[str, str]:
    """The messages of ``lang`` by key; a plural entry as ``key`` and, its singular, ``key.one``."""
    with language(lang):
        return {k if isinstance(k, str) else k[0] + (".one" if k[1] == 0 else ""): v for k, v in _messages().items()
                if k}


def placeholders(message: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(message) if name}


def has(key: str) -> bool:
    return _message(key, {}) is not None


def _message(key: str, params: Mapping[str, object]) -> str | None:
    table = _messages()
    one = key.endswith(".one") and (key[:-4], 0) in table  # the singular as reports store it (checks.said)
    base = key[:-4] if one else key
    if (base, 0) in table:  # a plural entry: the form of its count
        n = 1 if one or str(params.get("count")) == "1" else 2
        return translations(_LANG.get()).ngettext(base, base, n)
    return table.get(key)


def t(key: str, **params: object) -> str:
    """The message ``key`` with ``params`` (already text) filled in; KeyError when unknown."""
    message = _message(key, params)
    if message is None:
        raise KeyError(key)
    return message.format(**params) if params else message


def nt(singular: str, plural: str, n: int, **params: object) -> str:
    """``ngettext`` for the templates' i18n extension: the keys' plural entries are chosen by ``count``."""
    return t(singular if n == 1 else plural, count=n, **params)


def word(prefix: str, value: object) -> str:
    """A word of a small vocabulary (``diff.verdict.slower``); a value without one as it is, escaped."""
    if value is None:
        return fmt.DASH
    return t(f"{prefix}{value}") if has(f"{prefix}{value}") else esc(value)


def size(dims: Sequence[int], op: str) -> str:
    """``fmt.shape``, but a convolution's dimensions each with its name (``N64 C64 … R7 stride 2``)."""
    if op in OPS and OPS[op].family == "conv" and len(dims) == 7:
        return t("size.conv", **dict(zip(("n", "c", "h", "w", "k", "r", "stride"), dims, strict=True)))
    return fmt.shape(dims)


def case_label(key: CaseKey) -> str:
    """One case: ``matmul triton fp32/tf32 4096×4096×4096`` (a ``CaseKey``)."""
    op, impl, dtype, precision, dims = key
    return f"{op} {impl} {fmt.precision_label(dtype, precision)} {size(dims, op)}"


# Parameters whose values are words of a small vocabulary, phrased in the reader's language.
VOCABULARY = {"side": "diff.side.", "stage": "stage.", "method": "timing_method.", "what": "noun."}


def phrase(key: str, params: Mapping[str, object] | None = None, raw: Mapping[str, str] | None = None) -> str:
    """A data-supplied key phrased; ``raw``: parameters that are text of this medium already."""
    params = dict(params or {})
    if key == LEGACY_TEXT:
        return esc(params.get("text", ""))
    values = fmt.params(params, esc) | dict(raw or {})
    # A fact's reason passed on as a parameter (a check quoting why a fact is missing): envcheck's own ones phrased.
    values |= {k: t(REASON_KEYS[v]) for k, v in params.items() if isinstance(v, str) and v in REASON_KEYS}
    for name, prefix in VOCABULARY.items():
        if isinstance(params.get(name), str) and has(f"{prefix}{params[name]}"):
            values[name] = t(f"{prefix}{params[name]}")
    if "reason_key" in params:  # a nested reason (a missing ceiling inside a finding), phrased first
        values["reason"] = phrase(str(params["reason_key"]), {k: v for k, v in params.items() if k != "reason_key"})
    message = _message(key, params)
    if message is None:
        shown = ", ".join(f"{esc(k)}={values[k]}" for k in sorted(values))
        return f"{esc(key)} ({shown})" if shown else esc(key)
    return message.format_map(defaultdict(lambda: fmt.DASH, values))  # a missing placeholder: a dash


def join(parts: Sequence[str]) -> str:
    return t("list.sep").join(parts)


def check_counts(checks: Sequence[Check]) -> str:
    """``1 failed, 14 passed``: how many checks have each status, worst first."""
    n = {s: sum(c.status == s for c in checks) for s in STATUSES}
    return join([t(f"checks.count.{s}", count=n[s]) for s in STATUSES if n[s]])


def document_stem(stem: str, lang: str | None = None) -> str:
    """The file stem of a document rendered in ``lang`` (default: the render's) from ``<stem>.json``."""
    lang = lang or _LANG.get()
    return stem if lang == DEFAULT_LANG else f"{stem}.{lang}"


errors.say = lambda key, params: phrase(key, params) if has(key) else None  # how an error of any layer is said
