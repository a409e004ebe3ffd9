#!/usr/bin/env python3
"""envcheck's message catalogues: gettext .po files (the source of truth) compiled to the .mo files envcheck reads.

    python tools/dev/catalog.py compile                  # after editing a .po: write both .mo files
    python tools/dev/catalog.py from-json EN.json ZH.json  # add the keys a JSON catalogue has and the .po lacks

The msgids are the keys the model and the code store (``report.title``); ``en.po`` gives the English, and a key
with a one-form (``key`` and ``key.one`` in the JSON catalogues of older branches) is one plural entry. ``from-json``
ports the keys another branch added to ``envcheck/render/catalog/en.json`` and ``zh-CN.json`` before the move to
gettext: ``git show BRANCH:envcheck/render/catalog/en.json > /tmp/en.json`` (likewise zh-CN), then run it on the
two files; keys already in the .po are left as they are (edit those in the .po). Needs Babel (the ``test`` extra).
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
    if argv[:1] == ["from-json"] and len(argv) == 3:
        for lang, path in zip(LANGS, argv[1:], strict=True):
            catalog = load(lang)
            added = add_json(catalog, json.loads(Path(path).read_text(encoding="utf-8")))
            save(lang, catalog)
            print(f"{po_path(lang).relative_to(ROOT)}: {len(added)} key(s) added{': ' if added else ''}"
                  f"{', '.join(added)}")
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
