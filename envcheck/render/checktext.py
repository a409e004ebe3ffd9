"""A check's title, finding and fix in the reader's language, from its catalogue keys.

Every human view (terminal, Markdown, HTML, the diff and the fleet page) shows checks through
``localized``: the title's key follows from the check id, the finding and the fix from the keys
the rule recorded, with the same parameters (versions, paths, commands: shown as recorded). A
check recorded before checks carried keys, which the rules today do not say the same way
(``checks.keyed``), keeps its recorded English, marked as recorded outside English.
JUnit and the health line read the English the check carries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from envcheck.checks.said import nested_keys, title_key
from envcheck.model import Check
from envcheck.render.i18n import DEFAULT_LANG, has, phrase, translate


def localized(check: Check, lang: str) -> Check:
    """``check`` with its title, finding and fix phrased in ``lang`` (plain text: escape it for the medium)."""
    tk = title_key(check.id)
    title = translate(lang, tk) if has(lang, tk) else check.title
    if check.key is None or not has(lang, check.key):
        finding = check.finding if lang == DEFAULT_LANG else translate(lang, "check.recorded", text=check.finding)
        return dataclasses.replace(check, title=title, finding=finding)
    # A phrase inside the fix (a driver upgrade, an install) is phrased first, with the same parameters.
    inner = {name: phrase(lang, key, check.params) for name, key in nested_keys(check.params).items() if has(lang, key)}
    fix = (phrase(lang, check.fix_key, check.params, raw=inner) if check.fix_key and has(lang, check.fix_key)
           else check.fix)
    return dataclasses.replace(check, title=title, finding=phrase(lang, check.key, check.params), fix=fix)


def all_localized(checks: Iterable[Check], lang: str) -> tuple[Check, ...]:
    return tuple(localized(c, lang) for c in checks)
