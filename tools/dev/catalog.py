#!/usr/bin/env python3
"""envcheck's message catalogues: gettext .po files (the source of truth) compiled to the .mo files envcheck reads.

    python tools/dev/catalog.py compile                  # after editing a .po: write both .mo files
    python tools/dev/catalog.py from-json EN.json ZH.json [BASE_EN.json BASE_ZH.json]

The msgids are the keys the model and the code store (``report.title``); ``en.po`` gives the English, and a key
with a one-form (``key`` and ``key.one`` in the JSON catalogues of older branches) is one plural entry. ``from-json``
ports the keys another branch added to ``envcheck/render/catalog/en.json`` and ``zh-CN.json`` before the move to
gettext: ``git show BRANCH:envcheck/render/catalog/en.json > /tmp/en.json`` (likewise zh-CN), then run it on the
two files: the keys the .po lacks are added. Given the JSON of the commit the branch started from as well
(``git show $(git merge-base BRANCH HEAD~):envcheck/render/catalog/en.json``, before the move), the messages the
branch changed or removed are changed or removed too, and no other. Needs Babel (the ``test`` extra).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "envcheck" / "render" / "locale"
LANGS = {"en": "en", "zh-CN": "zh_CN"}
# Chinese has one plural form by CLDR, but envcheck's Chinese says one thing differently ("唯一一行", "全部"):
# both catalogues keep English's two forms.
PLURAL_FORMS = "nplurals=2; plural=(n != 1);"
DATE = datetime(2026, 12, 1, tzinfo=timezone.utc)  # fixed: the same .po for the same messages
HEADER = ("# envcheck's messages: msgid is the key the code and the reports store, msgstr the text, placeholders in\n"
          "# str.format style ({name}); numbers arrive formatted. Same keys and placeholders in every language.\n"
          "# Edit the .po, then: python tools/dev/catalog.py compile")


def po_path(lang: str) -> Path:
    return LOCALE / LANGS[lang] / "LC_MESSAGES" / "envcheck.po"


def load(lang: str) -> Catalog:
    if po_path(lang).exists():
        with po_path(lang).open("rb") as f:
            return read_po(f, locale=LANGS[lang], domain="envcheck")
    catalog = Catalog(locale=LANGS[lang], domain="envcheck", project="envcheck", version="1", fuzzy=False,
                      header_comment=HEADER, creation_date=DATE, revision_date=DATE, msgid_bugs_address="-",
                      last_translator="envcheck", language_team="envcheck")
    catalog.mime_headers = [("Plural-Forms", PLURAL_FORMS)]
    return catalog


def add_json(catalog: Catalog, messages: dict[str, str]) -> list[str]:
    """The JSON's keys the catalogue lacks, added in the JSON's order (a ``.one`` key folded into its plural)."""
    added = []
    for key, text in messages.items():
        if key.startswith("_") or key.endswith(".one") and key[:-4] in messages or key in catalog:
            continue
        one = messages.get(f"{key}.one")
        catalog.add((key, key) if one is not None else key, (one, text) if one is not None else text)
        added.append(key)
    return added


def apply_changes(catalog: Catalog, messages: dict[str, str], base: dict[str, str]) -> list[str]:
    """The keys ``messages`` changed or removed against ``base``, done in the catalogue (a ``.one`` key: its entry's
    singular)."""
    done = []
    for key in dict.fromkeys([*messages, *base]):
        if key.startswith("_") or messages.get(key) == base.get(key) or key not in base:
            continue
        name, form = (key[:-4], 0) if key.endswith(".one") and key[:-4] in catalog else (key, 1)
        entry = catalog.get(name)
        if entry is None:
            continue
        if key not in messages:  # removed: the entry, or the plural's singular
            if isinstance(entry.string, tuple) and form == 0:
                catalog.delete(name)
                catalog.add(name, entry.string[1])
            else:
                catalog.delete(name)
        elif isinstance(entry.string, tuple):
            entry.string = tuple(messages[key] if i == form else x for i, x in enumerate(entry.string))
        else:
            entry.string = messages[key]
        done.append(key)
    return done


def save(lang: str, catalog: Catalog) -> None:
    po_path(lang).parent.mkdir(parents=True, exist_ok=True)
    with po_path(lang).open("wb") as f:
        write_po(f, catalog, width=0, sort_output=False, omit_header=False)
    with po_path(lang).with_suffix(".mo").open("wb") as f:
        write_mo(f, catalog)


def main(argv: list[str]) -> int:
    if argv[:1] == ["compile"] and len(argv) == 1:
        for lang in LANGS:
            save(lang, load(lang))
        return 0
    if argv[:1] == ["from-json"] and len(argv) in (3, 5):
        read = [json.loads(Path(p).read_text(encoding="utf-8")) for p in argv[1:]]
        for i, lang in enumerate(LANGS):
            catalog = load(lang)
            changed = apply_changes(catalog, read[i], read[i + 2]) if len(read) == 4 else []
            added = add_json(catalog, read[i])
            save(lang, catalog)
            print(f"{po_path(lang).relative_to(ROOT)}: {len(added)} added, {len(changed)} changed or removed: "
                  f"{', '.join(added + changed) or '-'}")
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
