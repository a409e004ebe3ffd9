"""How a rule says its verdict: a finding key (``check.<key>``) and, when not passing, a fix key, sharing one set of
parameters; the English comes from the catalogue, every human view phrases the keys in the reader's language."""

from __future__ import annotations

import collections
import functools
import gettext
import re
from collections.abc import Mapping
from importlib import resources

from envcheck.model import Check, Status
from envcheck.outside_text import visible

_GPU_INDEX = re.compile(r"\.\d+$")
# A parameter longer than this (a 100k-character "GPU name") is cut, marked "...".
MAX_PARAM_CHARS = 2000


@functools.cache
def _english() -> Mapping[str, str]:
    """The English catalogue (gettext's, render/locale/en): a plural entry as ``key`` and, its singular, ``key.one``."""
    with resources.files("envcheck.render").joinpath("locale", "en", "LC_MESSAGES", "envcheck.mo").open("rb") as f:
        table = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
    return {k if isinstance(k, str) else k[0] + (".one" if k[1] == 0 else ""): v for k, v in table.items() if k}


def nested_keys(params: Mapping[str, str]) -> dict[str, str]:
    """Parameters ``<name>_key``: a catalogue key phrased (with the same parameters) into ``<name>``."""
    return {k[:-4]: v for k, v in params.items() if k.endswith("_key") and v.startswith("check.")}


def title_key(check_id: str) -> str:
    """``check.title.gpu.ecc`` for ``gpu.ecc.3``: one title per rule, whichever GPU it judged."""
    return f"check.title.{_GPU_INDEX.sub('', check_id)}"


def said(check_id: str, status: Status, key: str, fix: str | None = None, details: str | None = None, /,
         **params: object) -> Check:
    """The check ``check_id`` with finding ``check.<key>`` and fix ``check.<fix>``, both given ``params``."""
    en = _english()
    text = {k: s if len(s := visible(v)) <= MAX_PARAM_CHARS else s[:MAX_PARAM_CHARS - 3] + "..."
            for k, v in params.items()}
    for name, nested in nested_keys(text).items():  # a phrase inside the fix: a driver upgrade, an install
        if name in params:  # it would land where the finding's own value belongs (issue 49)
            raise ValueError(f"{check_id}: parameter {name!r} is also the phrase of {name}_key")
        text[name] = en[nested].format_map(collections.defaultdict(str, text))
    finding_key = f"check.{key}"
    if text.get("count") == "1" and f"{finding_key}.one" in en:  # the singular form, as the renderers pick it
        finding_key = f"{finding_key}.one"
    fix_key = f"check.{fix}" if fix else None
    return Check(check_id, status, en[title_key(check_id)], en[finding_key].format(**text),
                 fix=en[fix_key].format(**text) if fix_key else None, details=details,
                 key=finding_key, fix_key=fix_key, params=text)
