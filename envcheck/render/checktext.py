"""A check's title, finding and fix in the reader's language, from its keys; a check recorded before checks
carried keys, which today's rules do not say the same way, keeps its English, marked as recorded."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from envcheck.checks.said import nested_keys, title_key
from envcheck.model import Check
from envcheck.render.i18n import DEFAULT_LANG, current, escaping, has, phrase, t


def localized(check: Check) -> Check:
    """``check`` with its title, finding and fix phrased in the render's language (plain text: escape it for the
    medium)."""
    tk = title_key(check.id)
    title = t(tk) if has(tk) else check.title
    if check.key is None or not has(check.key):
        finding = check.finding if current() == DEFAULT_LANG else t("check.recorded", text=check.finding)
        return dataclasses.replace(check, title=title, finding=finding)
    with escaping(str):  # plain text: the medium escapes the whole sentence
        # A phrase inside the fix (a driver upgrade, an install) is phrased first, with the same parameters.
        inner = {name: phrase(key, check.params) for name, key in nested_keys(check.params).items() if has(key)}
        fix = phrase(check.fix_key, check.params, raw=inner) if check.fix_key and has(check.fix_key) else check.fix
        return dataclasses.replace(check, title=title, finding=phrase(check.key, check.params), fix=fix)


def all_localized(checks: Iterable[Check]) -> tuple[Check, ...]:
    return tuple(localized(c) for c in checks)
