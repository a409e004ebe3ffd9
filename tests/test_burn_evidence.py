"""Every committed burn of a lent machine, judged again by today's rules from its JSON alone: each
healthy burn passes with room to spare on every graded rule (no rule a healthy GPU passes by a point),
and each positive control fails its GPU with its own finding while every other GPU passes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envcheck import model
from envcheck.analysis import analyse

REPORTS = Path(__file__).resolve().parents[1] / "evidence"
BURNS = sorted(p for p in REPORTS.glob("*_burn*.json.gz") if "before-checksum-fix" not in p.name)
CONTROL = re.compile(r"_control-(?P<control>[a-z_]+)-gpu(?P<gpu>\d+)\.json\.gz$")
CAUGHT_BY = {"slow_gemm": "below_siblings", "flip_bit": "sdc"}
GRADED = ("power_share", "ceiling_margin", "sibling_margin", "throughput_drift", "clock_drift")
ROOM = 2.5  # points a healthy GPU keeps on every graded rule


def test_the_evidence_holds_five_healthy_burns_on_every_lent_kind_and_both_controls():
    healthy = [p for p in BURNS if not CONTROL.search(p.name)]
    assert len(healthy) >= 5
    kinds = {re.search(r"_vm_(\w+-h\d00)_", p.name)[1] for p in BURNS}
    assert {"1x-h200", "2x-h200", "4x-h200"} <= kinds
    controls = {CONTROL.search(p.name)["control"] for p in BURNS if CONTROL.search(p.name)}
    assert controls == set(CAUGHT_BY)


@pytest.mark.parametrize("path", BURNS, ids=lambda p: p.stem)
def test_a_committed_burn_is_judged_as_it_should_be(path):
    a = analyse(model.load(path)).burn
    m = CONTROL.search(path.name)
    if m is None:
        assert a.verdict == "pass", [(g.gpu.index, g.findings) for g in a.gpus]
        for g in a.gpus:
            rooms = {x.rule: x.room for x in g.margins}
            assert g.gpu.control is None
            assert {"power_share", "ceiling_margin", "throughput_drift", "clock_drift"} <= set(rooms)
            assert all(rooms[r] >= ROOM for r in GRADED if r in rooms), (g.gpu.index, rooms)
        return
    control, gpu = m["control"], int(m["gpu"])
    for g in a.gpus:
        if g.gpu.index == gpu:
            assert g.gpu.control == control and CAUGHT_BY[control] in {f.key for f in g.findings}
        else:
            assert g.gpu.control is None and g.status == "pass", g.findings
