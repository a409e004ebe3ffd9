"""Every committed report (evidence, goldens, fixtures) loads and writes back with the values, the key order
and the fields left out exactly as the codec before msgspec wrote them: ``fixtures/report_digests.json`` holds
the SHA-256 of each one's written JSON in a canonical form (Python's ``json``, no spaces), made by that codec."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from envcheck import model

ROOT = Path(__file__).resolve().parents[1]
DIGESTS: dict[str, str] = json.loads((Path(__file__).parent / "fixtures" / "report_digests.json").read_text())


def canonical_digest(text: str) -> str:
    canon = json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_committed_report_writes_back_as_before(name: str) -> None:
    report = model.load(ROOT / name)
    text = model.dumps(report)
    assert canonical_digest(text) == DIGESTS[name]
    assert model.loads(text) == report

