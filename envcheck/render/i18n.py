"""Message catalogues: every sentence a rendered document shows, per language.

One flat JSON file per language under ``catalog/`` (``en.json``, ``zh-CN.json``),
keys identical across languages, placeholders in ``str.format`` style
(``{size}``). Numbers are formatted before they are passed in, so they read the
same in every language.
"""

from __future__ import annotations

import functools
import json
import string
from pathlib import Path

LANGS: tuple[str, ...] = ("en", "zh-CN")
DEFAULT_LANG = "en"
_CATALOG_DIR = Path(__file__).with_name("catalog")


class UnknownLanguage(ValueError):
    """A language with no catalogue."""


@functools.cache
def load_catalog(directory: Path, lang: str) -> dict[str, str]:
    """The messages of ``lang`` in ``directory`` (cached: catalogues are read-only package data).

    Keys starting with ``_`` are notes for translators, not messages.
    """
    if lang not in LANGS:
        raise UnknownLanguage(f"unknown language {lang!r} (choose from {', '.join(LANGS)})")
    with (directory / f"{lang}.json").open(encoding="utf-8") as f:
        data = json.load(f)
    return {k: v for k, v in data.items() if not k.startswith("_")}


def catalog(lang: str) -> dict[str, str]:
    """The messages of ``lang`` for the report documents."""
    return load_catalog(_CATALOG_DIR, lang)


def placeholders(message: str) -> set[str]:
    """Names of the ``{placeholders}`` in one message."""
    return {name for _, name, _, _ in string.Formatter().parse(message) if name}


def translate(lang: str, key: str, **params: object) -> str:
    """The message ``key`` in ``lang`` with ``params`` filled in.

    A key missing from the catalogue is a programming error and raises KeyError,
    so a typo fails the tests instead of shipping a raw key to users.
    """
    message = catalog(lang)[key]
    return message.format(**params) if params else message
