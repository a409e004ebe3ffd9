"""Every number the README and docs/ quote from the committed evidence is the number the evidence gives today.

A quoted number is marked where it stands with the expression that computes it from its file, and tables and
output excerpts are generated blocks (``tools/docs/doc_numbers.py``, the functions in
``tools/docs/evidence_values.py``); ``python tools/docs/doc_numbers.py`` writes them anew after an intended
change. Numbers are rounded once, where they are written (issue 51).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "docs"))

import doc_numbers  # noqa: E402  (tools/docs, put on the path above)
import evidence_values  # noqa: E402

# Pages that quote measured numbers: each carries markers, so a quoted number cannot drift unseen.
QUOTING = ("README.md", "docs/README.md", "docs/burn.md", "docs/compare.md", "docs/evidence.md", "docs/measurement.md", "docs/node.md")


@pytest.fixture(scope="module")
def namespace() -> dict[str, object]:
    return doc_numbers.namespace()


@pytest.mark.parametrize("page", doc_numbers.pages(ROOT), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_marked_number_is_what_its_evidence_gives(page: Path, namespace) -> None:
    text = page.read_text(encoding="utf-8")
    again, found = doc_numbers.regenerate(text, page.relative_to(ROOT).as_posix(), namespace)
    assert not found, "numbers that differ from the evidence (python tools/docs/doc_numbers.py writes them):\n" + \
        "\n".join(map(str, found))
    assert again == text


@pytest.mark.parametrize("page", QUOTING)
def test_pages_that_quote_the_evidence_carry_markers(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert text.count("<!-- value: ") == text.count("<!-- /value -->") >= 1
    assert text.count("<!-- generated: ") == text.count("<!-- /generated -->")


def test_a_number_that_drifted_is_caught_and_written_anew(namespace) -> None:
    text = (ROOT / "docs" / "burn.md").read_text(encoding="utf-8")
    marker = '<!-- value: least_room("power_share") :.1f -->'
    right = f"{evidence_values.least_room('power_share'):.1f}"
    assert marker + right in text
    drifted = text.replace(marker + right, marker + "24.2")
    again, found = doc_numbers.regenerate(drifted, "docs/burn.md", namespace)
    assert [(m.found, m.expected) for m in found] == [("24.2", right)]
    assert again == text


def test_a_generated_table_that_drifted_is_caught(namespace) -> None:
    text = (ROOT / "docs" / "burn.md").read_text(encoding="utf-8")
    drifted = text.replace("| 1x-h200 | healthy | 2 | pass |", "| 1x-h200 | healthy | 2 | fail |")
    assert drifted != text
    again, found = doc_numbers.regenerate(drifted, "docs/burn.md", namespace)
    assert len(found) == 1 and found[0].expr == "burn_table()" and again == text


def test_a_marker_that_cannot_be_computed_names_its_page_and_line(namespace) -> None:
    page = "intro\n\nthe room was <!-- value: least_room(\"no_such_rule\") :.1f -->1.0<!-- /value --> points\n"
    with pytest.raises(doc_numbers.MarkerError, match=r"^x\.md:3: least_room"):
        doc_numbers.regenerate(page, "x.md", namespace)
    with pytest.raises(doc_numbers.MarkerError, match="say how to write it"):
        doc_numbers.regenerate("<!-- value: 0.5 -->0.5<!-- /value -->", "x.md", namespace)


def test_values_are_written_once_with_their_format() -> None:
    assert doc_numbers.written(24.451, ".1f") == "24.5"
    assert doc_numbers.written((0.1054, 1.222), ".1f") == "0.1-1.2"
    assert doc_numbers.written([1231.17, 1224.86], ".1f") == "1231.2 and 1224.9"
    assert doc_numbers.written(16, "") == "16" and doc_numbers.written("9 of 16", None) == "9 of 16"


def test_a_burn_margin_is_rounded_once_where_it_is_shown() -> None:
    """The room on each rule is shown from its unrounded value: a power room of 24.451 points reads 24.5, not the
    24.4 that rounding it to two decimals first (24.45) made of it."""
    from envcheck.render import burn_view as bv
    from envcheck.render import fmt

    for name in evidence_values.burns():
        a = evidence_values.burn(name)
        margins = bv.margins(a)
        for column, g in enumerate(a.gpus):
            cells = [row[column] for _, row in margins]
            for m in g.margins:
                assert any(c.endswith(f"room {fmt.num(m.room)}") for c in cells), (name, g.gpu.index, m.rule)
    power = [m for m in evidence_values.burn("2026-11-28_1737Z_vm_2x-h200_burn_healthy.json.gz").gpus[0].margins
             if m.rule == "power_share"][0]
    assert 24.45 < power.room < 24.46 and fmt.num(power.room) == "24.5"


def test_a_marker_shown_as_an_example_is_left_alone(namespace) -> None:
    page = "how:\n\n```markdown\nroom <!-- value: no_such_function() :.1f -->1.0<!-- /value -->\n```\n\n" \
           "and <!-- value: len(burns(healthy=True)) :d -->0<!-- /value --> burns\n"
    again, found = doc_numbers.regenerate(page, "x.md", namespace)
    assert [(m.line, m.found) for m in found] == [(7, "0")]
    assert again == page.replace(":d -->0<", f":d -->{len(evidence_values.burns(healthy=True))}<")
