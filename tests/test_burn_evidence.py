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


def _reference_room(g) -> float | None:
    return next((m.room for m in g.margins if m.rule == "reference_margin"), None)


def test_every_committed_gpu_of_a_known_sku_passes_its_reference_with_room_and_a_20pct_slow_one_fails():
    """Issue 49, item 9: a uniformly slow GPU passed every rule that compares it with itself or its siblings."""
    import dataclasses

    from envcheck.analysis.burn import REFERENCES
    from envcheck.render import burn_view as bv

    seen = set()
    for path in BURNS:
        report = model.load(path)
        for g in analyse(report).burn.gpus:
            if g.gpu.control == "slow_gemm":
                continue
            assert g.reference is REFERENCES[g.gpu.device.name], path.name
            assert _reference_room(g) >= 5.0, (path.name, g.gpu.index, _reference_room(g))
            seen.add(g.gpu.device.name)
        assert "is held against a healthy" in " ".join(bv.notes(analyse(report).burn))
        slow = dataclasses.replace(report.burn, gpus=tuple(
            dataclasses.replace(g, phases=tuple(dataclasses.replace(p, work=[w * 0.8 for w in p.work])
                                                if p.phase == "gemm" else p for p in g.phases))
            for g in report.burn.gpus))
        for g in analyse(dataclasses.replace(report, burn=slow)).burn.gpus:
            assert "below_reference" in {f.key for f in g.findings}, (path.name, g.gpu.index)
    assert seen == set(REFERENCES)
    # A model with no committed burn is held against nothing, and says so.
    other = model.load(BURNS[0])
    renamed = dataclasses.replace(other.burn, gpus=tuple(
        dataclasses.replace(g, device=dataclasses.replace(g.device, name="NVIDIA A100-SXM4-80GB"))
        for g in other.burn.gpus))
    a = analyse(dataclasses.replace(other, burn=renamed)).burn
    assert all(g.reference is None and _reference_room(g) is None for g in a.gpus)
    notes = " ".join(bv.notes(a))
    assert "no healthy figure of this GPU model" in notes and "NVIDIA A100-SXM4-80GB" in notes
