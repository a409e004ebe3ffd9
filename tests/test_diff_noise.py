"""Diffs that do not cry wolf: run-to-run noise from repeats or shipped floors, never from the pair
judged alone, the family of rows corrected for multiple testing, and the coverage the intervals
promise, checked on synthetic controls whose noise is drawn like the committed H200 runs'."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path
from typing import Any

import compare_fixtures as fx
import node_compare_fixtures as nf
import numpy as np
import pytest

from envcheck.compare import diff, export, shipped, stats
from envcheck.model import Report, Timing
from envcheck.render import compare_view

REPORTS = Path(__file__).resolve().parent.parent / "evidence"
BACK_TO_BACK = ("2026-11-22_2139Z_vm_h200.json.gz", "2026-11-22_2143Z_vm_h200.json.gz")
BACK_TO_BACK_H100 = ("2026-11-26_0245Z_vm_h100.json.gz", "2026-11-26_0248Z_vm_h100.json.gz")
# The pairs the shipped floors are learned from: full suites back to back with each implementation
# sampled in a window of its own (bench/sampling.py); the two pairs above are of the sampler before it.
FLOORS_H200 = ("2026-11-26_0456Z_vm_h200.json.gz", "2026-11-26_0459Z_vm_h200.json.gz")
FLOORS_H100 = ("2026-11-26_0449Z_vm_h100.json.gz", "2026-11-26_0452Z_vm_h100.json.gz")
# Back-to-back node runs (run --gpus all) the shipped node floors come from, baseline first.
NODE_FLOORS = nf.NODE_CONTROLS
# Negative controls whose launch-time (host-timed: JAX) rows the shipped launch/... floors come from.
LAUNCH_FLOORS = (("2026-11-25_2220Z_vm_h100_controls_baseline.json.gz", "2026-11-25_2220Z_vm_h100_controls_rerun.json.gz"),
                 ("2026-11-26_0615Z_vm_h100_matmul_a.json.gz", "2026-11-26_0615Z_vm_h100_matmul_b.json.gz"))
REPEATS = 5
PER_REPEAT = 40  # the default cap of 200 samples a timing, shared by 5 repeats


@functools.cache
def h200() -> Report:
    return fx.load(REPORTS / BACK_TO_BACK[0])


@functools.cache
def h200_noise() -> tuple[np.ndarray, np.ndarray]:
    """What the committed H200 runs' noise looks like: the within-run spread (sd of log samples)
    of every measured row of the baseline run, and the between-run shift (sd of a row's log
    ratio between the two back-to-back runs, beyond within-run noise) of every kind of row,
    as shipped for the H200."""
    within = np.array([float(np.std(np.log(c.best_time.samples_us.numpy())))
                       for c in h200().benches[0].cases if c.best_time is not None])
    kinds = shipped.for_model("NVIDIA H200").kinds
    between = np.array([k.log_sd for label, k in kinds.items() if label.count("/") == 2])  # op and size category
    return within, between


def draw_runs(rng: np.random.Generator, median: float, within: float, between: float, runs: int,
              n: int = PER_REPEAT) -> Timing:
    """``runs`` independent runs of one row, each shifted by the between-run noise, as one timing."""
    samples = [median * math.exp(rng.normal(0.0, between)) * np.exp(rng.normal(0.0, within, n)) for _ in range(runs)]
    return Timing("cuda_graph", np.concatenate(samples).tolist(), 1, (n,) * runs if runs > 1 else ())


def repeat_interval(base: Timing, other: Timing) -> stats.RatioInterval:
    ra = stats.repeats_of(base.samples_us.numpy(), base.passes)
    rb = stats.repeats_of(other.samples_us.numpy(), other.passes)
    floor = stats.repeat_floor(ra, rb)
    return stats.interval(math.exp(rb.mean_log - ra.mean_log), math.nan, floor, base.n, other.n)


# --------------------------------------------------------------------------- coverage


@pytest.mark.slow  # 10,000 synthetic rows (~4 s)
def test_repeat_intervals_cover_95_percent_of_1000_synthetic_negative_controls():
    """1,000 negative controls, nothing changed: each a family of 10 rows whose within-run and
    between-run noise are drawn from the committed H200 runs'; each side 5 independent runs
    (each with its own between-run shift). The 95% intervals cover a ratio of 1 in 95% +- 2% of
    the rows, and the corrected calls fire in at most 5% of the controls (plus sampling slack)."""
    rng = np.random.default_rng(20261125)
    within, between = h200_noise()
    covered = rows = controls_called = 0
    for _ in range(1000):
        ivs = []
        for _ in range(10):
            w, b = rng.choice(within), rng.choice(between)
            ivs.append(repeat_interval(draw_runs(rng, 10.0, w, b, REPEATS), draw_runs(rng, 10.0, w, b, REPEATS)))
        covered += sum(iv.low <= 1.0 <= iv.high for iv in ivs)
        rows += len(ivs)
        called = stats.bh_significant([stats.p_value(iv) for iv in ivs])
        controls_called += any(stats.verdict(iv, 0.0, s) != "same" for iv, s in zip(ivs, called, strict=True))
    assert 0.93 <= covered / rows <= 0.97, covered / rows
    assert controls_called / 1000 <= 0.065, controls_called


@pytest.mark.slow  # 10,000 synthetic rows (~5 s)
def test_repeats_with_the_run_share_of_a_floor_cover_95_percent_when_a_run_moves_as_a_whole():
    """1,000 negative controls of 10 rows, 5 repeats a side, where part of the run-to-run noise moves a
    whole run (every repeat of it alike; the committed controls with repeats of 2026-11-26 left 6 of 96
    intervals excluding 1 that way). Each row's shipped floor F (of single runs: F^2 = 2 s_run^2 +
    2 s_repeat^2) is drawn from the H200's, its run-level share from 20-80%. The repeats alone cover
    1 in far fewer than 95% of the rows; with the floor's run-level share added (stats.with_run_share),
    95% +- 2%."""
    rng = np.random.default_rng(20261126)
    within, between = h200_noise()
    alone = shared = rows = 0

    def side(w: float, s_run: float, s_rep: float) -> Timing:
        run = rng.normal(0.0, s_run)
        samples = [10.0 * math.exp(run + rng.normal(0.0, s_rep)) * np.exp(rng.normal(0.0, w, PER_REPEAT))
                   for _ in range(REPEATS)]
        return Timing("cuda_graph", np.concatenate(samples).tolist(), 1, (PER_REPEAT,) * REPEATS)

    for _ in range(1000):
        for _ in range(10):
            w, f, share = rng.choice(within), rng.choice(between), rng.uniform(0.2, 0.8)
            s_run, s_rep = f * math.sqrt(share / 2), f * math.sqrt((1 - share) / 2)
            a, b = side(w, s_run, s_rep), side(w, s_run, s_rep)
            ra = stats.repeats_of(a.samples_us.numpy(), a.passes)
            rb = stats.repeats_of(b.samples_us.numpy(), b.passes)
            repeats = stats.repeat_floor(ra, rb)
            single = stats.NoiseFloor(f, "shipped", ("gpu", "k"), 250, 250)
            ratio = math.exp(rb.mean_log - ra.mean_log)
            se = stats.median_log_se([a.samples_us.numpy(), b.samples_us.numpy()])
            for floor, hit in ((repeats, "alone"), (stats.with_run_share(repeats, ra, rb, single, se), "shared")):
                iv = stats.interval(ratio, math.nan, floor, a.n, b.n)
                if iv.low <= 1.0 <= iv.high:
                    alone += hit == "alone"
                    shared += hit == "shared"
            rows += 1
    assert alone / rows < 0.85, alone / rows
    assert 0.93 <= shared / rows <= 0.97, shared / rows


def test_the_committed_controls_with_repeats_meet_the_targets():
    """The four committed controls with repeats (H100 and H200, both samplers of 2026-11-26), judged
    with the floors' run-level share: no row of a negative control called, at most 5% of its 48
    intervals excluding 1 (1, 1, 0 and 0; 3 of 48 on each of the first two with the repeats alone), and
    every Triton vector add row of the positive control called slower with no other row called."""
    for stamp, model in (("2026-11-26_0431Z", "h100"), ("2026-11-26_0515Z", "h200"), ("2026-11-26_0234Z", "h100"),
                         ("2026-11-26_0024Z", "h200")):
        names = [f"{stamp}_vm_{model}_controls_{k}.json.gz" for k in ("baseline", "rerun", "control")]
        base, rerun, control = (fx.load(REPORTS / n) for n in names)
        negative = diff.diff([(names[0], base), (names[1], rerun)]).comparisons[0]
        assert negative.shipped_model is not None and dict(negative.sources) == {"repeats": 48}
        assert not [c for c in negative.cases if c.verdict in ("slower", "faster")]
        assert _excluding(negative) <= 0.05 * negative.tested, (stamp, _excluding(negative))
        said = compare_view.noise(negative, 0.95)
        assert "moves a whole run" in said and negative.shipped_model in said and "(48 rows)" in said
        positive = diff.diff([(names[0], base), (names[2], control)]).comparisons[0]
        called = {(c.impl, c.op) for c in positive.cases if c.verdict in ("slower", "faster")}
        slowed = [c for c in positive.compared if c.impl == "triton" and c.op == "vector_add"]
        assert called == {("triton", "vector_add")} and all(c.verdict == "slower" for c in slowed) and len(slowed) == 12


def test_shipped_floor_intervals_cover_95_percent_of_1000_synthetic_negative_controls():
    """Reports without repeats, judged with the floor shipped for their kind of row: one run a
    side, its between-run shift drawn with the floor's own spread, within-run noise as in the
    committed runs. 95% +- 2% of the intervals cover 1."""
    rng = np.random.default_rng(17)
    within, _ = h200_noise()
    floors = [f for label, f in shipped.for_model("NVIDIA H200").kinds.items() if label.count("/") == 2 and f.rows >= 5]
    covered = 0
    for _ in range(1000):
        f = floors[rng.integers(len(floors))]
        w = rng.choice(within)
        a = draw_runs(rng, 10.0, w, f.log_sd / math.sqrt(2), 1, 100)  # the floor is of the ratio: two runs
        b = draw_runs(rng, 10.0, w, f.log_sd / math.sqrt(2), 1, 100)
        se = stats.median_log_se([a.samples_us.numpy(), b.samples_us.numpy()])
        floor = stats.NoiseFloor(f.log_sd, "shipped", ("k",), f.rows, f.df)
        iv = stats.interval(b.median_us / a.median_us, math.hypot(*se), floor, a.n, b.n)
        covered += iv.low <= 1.0 <= iv.high
    assert 0.93 <= covered / 1000 <= 0.97, covered / 1000


def test_intervals_from_the_samples_alone_do_not_cover_when_runs_shift():
    """Why the allowance is needed: the same controls judged on the samples alone (the pair, no
    repeats, no floor) exclude 1 far more often than 5% of the time."""
    rng = np.random.default_rng(3)
    within, between = h200_noise()
    covered = 0
    for _ in range(300):
        w, b = rng.choice(within), rng.choice(between)
        iv = stats.within_interval(draw_runs(rng, 10.0, w, b, 1, 200).samples_us,
                                   draw_runs(rng, 10.0, w, b, 1, 200).samples_us)
        covered += iv.low <= 1.0 <= iv.high
    assert covered / 300 < 0.85


# --------------------------------------------------------------------------- power


def test_a_four_percent_slowdown_is_found_in_at_least_90_percent_of_the_slowed_rows():
    """The positive control in simulation: a family of 40 rows, 8 of them 4% slower (the Triton
    vector add moving 4% more bytes), 5 repeats a side with the committed runs' noise of the
    memory-bound kinds. At least 90% of the slowed rows are called slower after the correction;
    at most 5% of the unchanged ones are called at all."""
    rng = np.random.default_rng(4)
    within, _ = h200_noise()
    kinds = shipped.for_model("NVIDIA H200").kinds
    between = [kinds[k].log_sd for k in ("gpu/vector_add/large", "gpu/vector_add/xlarge", "gpu/relu/large",
                                         "gpu/relu/xlarge", "gpu/vector_add/medium")]
    quiet = within[within < np.percentile(within, 75)]  # memory-bound large rows are the quiet ones
    found = planted = false = unchanged = 0
    for _ in range(100):
        ivs, slowed = [], []
        for i in range(40):
            w, b = rng.choice(quiet), between[i % len(between)]
            factor = 1.04 if i < 8 else 1.0
            ivs.append(repeat_interval(draw_runs(rng, 10.0, w, b, REPEATS), draw_runs(rng, 10.0 * factor, w, b, REPEATS)))
            slowed.append(i < 8)
        sig = stats.bh_significant([stats.p_value(iv) for iv in ivs])
        verdicts = [stats.verdict(iv, stats.PRACTICAL, s) for iv, s in zip(ivs, sig, strict=True)]
        found += sum(v == "slower" for v, s in zip(verdicts, slowed, strict=True) if s)
        planted += sum(slowed)
        false += sum(v != "same" for v, s in zip(verdicts, slowed, strict=True) if not s)
        unchanged += sum(not s for s in slowed)
    assert found / planted >= 0.90, found / planted
    assert false / unchanged <= 0.05, false / unchanged


# --------------------------------------------------------------------------- multiple testing


def test_benjamini_hochberg_on_planted_families():
    """Families of 100 p-values, 10 from real changes (z = 4) and 90 from nothing: the share of
    false calls among the calls stays under 5% on average, nearly every real change is called,
    and a family of nulls alone calls anything at most about 5% of the time."""
    rng = np.random.default_rng(11)
    from statistics import NormalDist

    nd = NormalDist()
    fdp, power, any_null = [], [], 0
    for _ in range(500):
        z = np.concatenate([rng.normal(4.0, 1.0, 10), rng.normal(0.0, 1.0, 90)])
        p = [2 * (1 - nd.cdf(abs(x))) for x in z]
        sig = stats.bh_significant(p)
        calls = sum(sig)
        fdp.append(sum(sig[10:]) / calls if calls else 0.0)
        power.append(sum(sig[:10]) / 10)
        null = [2 * (1 - nd.cdf(abs(x))) for x in rng.normal(0.0, 1.0, 100)]
        any_null += any(stats.bh_significant(null))
    assert np.mean(fdp) <= 0.05
    assert np.mean(power) >= 0.8
    assert any_null / 500 <= 0.07


def test_benjamini_hochberg_step_up_and_rows_without_an_interval():
    # Step-up: p(3) = 0.03 <= 0.05 * 3/4 carries p(1) and p(2) with it, though p(2) > 0.05 * 2/4.
    assert stats.bh_significant([0.01, 0.026, 0.03, 0.9]) == [True, True, True, False]
    assert stats.bh_significant([0.02, 0.04, 0.9, None]) == [False, False, False, False]  # m = 3: 0.02 > 0.05/3
    assert stats.bh_significant([0.001, None]) == [True, False]
    assert stats.bh_significant([None, None]) == [False, False]


def test_p_value_agrees_with_the_interval():
    """A row's interval excludes 1 exactly when its p-value is below 1 - confidence."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        df = int(rng.integers(1, 300))
        floor = stats.NoiseFloor(0.01, "repeats", (), 10, df)
        iv = stats.interval(math.exp(rng.normal(0, 0.03)), 0.0, floor, 50, 50)
        p = stats.p_value(iv)
        assert (p < 0.05) == iv.excludes_one() or abs(p - 0.05) < 1e-6


# --------------------------------------------------------------------------- repeats


def test_repeats_of_splits_samples_by_pass_and_refuses_a_wrong_split():
    x = np.array([1.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 4.0])
    r = stats.repeats_of(x, (3, 2, 3))
    assert r.count == 3
    assert r.mean_log == pytest.approx(math.log(2.0))
    assert r.var_log == pytest.approx(np.var(np.log([1.0, 2.0, 4.0]), ddof=1))
    assert stats.repeats_of(x, (8,)) is None
    with pytest.raises(ValueError, match="add up"):
        stats.repeats_of(x, (3, 3))


def test_repeat_floor_one_side_only_borrows_that_sides_spread():
    r = stats.Repeats(0.0, 0.0004, 5)
    one = stats.repeat_floor(None, r)
    assert one.source == "repeats" and one.df == 4
    assert one.log_sd == pytest.approx(math.sqrt(0.0004 * 1.2))
    both = stats.repeat_floor(r, r)
    assert both.log_sd == pytest.approx(math.sqrt(0.0004 * 2 / 5)) and both.df == 8
    assert stats.repeat_floor(None, None) is None


# --------------------------------------------------------------------------- through envcheck diff


def with_repeats(r: Report, rng: np.random.Generator, factor: dict | None = None) -> Report:
    """A copy of a committed run whose GPU times are 5 independent repeats drawn around each row's
    median with its own within-run spread and a between-run shift of its kind's shipped size."""
    kinds = shipped.for_model("NVIDIA H200").kinds
    cases = []
    for c in r.benches[0].cases:
        if c.gpu is None:
            cases.append(c)
            continue
        x = np.log(c.gpu.samples_us.numpy())
        kind = f"gpu/{c.op}/{_category(c)}"
        between = kinds[kind].log_sd if kind in kinds else kinds["gpu"].log_sd
        f = (factor or {}).get(c.key, 1.0)
        t = draw_runs(rng, float(np.exp(np.median(x))) * f, float(np.std(x)), between / math.sqrt(2), REPEATS)
        cases.append(dataclasses.replace(c, gpu=t))
    return fx.with_cases(r, tuple(cases))


@functools.cache
def _categories() -> dict:
    from envcheck.analysis import analyse

    return {res.key: res.category for res in analyse(h200()).bench.results}


def _category(c) -> str:
    return _categories()[c.key]


def test_diff_of_repeated_runs_calls_nothing_and_names_its_allowance():
    rng = np.random.default_rng(8)
    a, b = with_repeats(h200(), rng), with_repeats(h200(), rng)
    cmp = diff.diff([("a.json", a), ("b.json", b)]).comparisons[0]
    assert dict(cmp.sources)["repeats"] == cmp.tested > 200
    assert not [c for c in cmp.cases if c.verdict in ("slower", "faster")]
    excluding = sum(c.low > 1 or c.high < 1 for c in cmp.compared if c.low is not None)
    assert excluding <= 0.05 * cmp.tested
    data = export.to_data(diff.diff([("a.json", a), ("b.json", b)]))["comparisons"][0]
    assert data["correction"] == "benjamini-hochberg" and data["tested"] == cmp.tested
    assert data["allowance_sources"]["repeats"] == cmp.tested


def test_diff_of_repeated_runs_finds_the_positive_control():
    """The Triton vector add rows at memory-bound sizes 4% slower (the control's extra bytes):
    at least 90% of them are called slower, no other row is."""
    rng = np.random.default_rng(9)
    slowed = {c.key for c in h200().benches[0].cases
              if c.op == "vector_add" and c.impl == "triton" and c.shape[0] >= 1 << 20}
    a = with_repeats(h200(), rng)
    b = with_repeats(h200(), rng, {k: 1.04 for k in slowed})
    cmp = diff.diff([("a.json", a), ("b.json", b)]).comparisons[0]
    called = {c.key for c in cmp.cases if c.verdict == "slower"}
    assert len(called & slowed) >= 0.9 * len(slowed) and len(slowed) >= 5
    assert not {c.key for c in cmp.cases if c.verdict in ("slower", "faster")} - slowed


def _cpu_run(rng: np.random.Generator, r: Report, repeats: int, factor: dict | None = None) -> Report:
    """A copy of a CPU run (host-clock times) whose rows are ``repeats`` independent runs of as many samples as
    one run takes, each run shifted by 1% (sd) and its samples spread by 3%."""
    n = r.benches[0].settings.max_samples
    cases = []
    for c in r.benches[0].cases:
        t = draw_runs(rng, c.launch.median_us * (factor or {}).get(c.key, 1.0), 0.03, 0.01, repeats, n)
        cases.append(dataclasses.replace(c, launch=Timing("host_clock", list(t.samples_us), 1, t.passes)))
    return fx.with_cases(r, tuple(cases))


def test_a_cpu_diff_advises_repeats_only_where_they_help_and_following_the_advice_helps():
    """Issue 49, item 5: a diff of two CPU runs never judged a row, even with --repeat 3 on both sides, and its
    advice to repeat cut each repeat's samples from 100 to 33. Without repeats or a shipped floor no row is
    judged and the advice is given; followed (each repeat sampling as a single run does), every row is judged,
    a planted 10% slowdown is called and nothing else."""
    import factories_cpu
    from in_lang import render_diff

    from envcheck.bench.runner import pass_settings
    from envcheck.model import Note

    rng = np.random.default_rng(49)
    base = factories_cpu.report()
    slowed = {c.key for c in base.benches[0].cases if c.op == "relu"}
    slow = {k: 1.10 for k in slowed}
    single = diff.diff([("a.json", _cpu_run(rng, base, 1)), ("b.json", _cpu_run(rng, base, 1, slow))])
    rows = single.comparisons[0].compared
    assert rows and all(c.verdict == diff.NOT_JUDGED and c.reasons == (Note(diff.NO_FLOOR),) for c in rows)
    assert "`envcheck run --repeat 3`" in render_diff(single, "md")
    settings = base.benches[0].settings
    per = pass_settings(settings, 3)
    assert (per.max_samples, per.min_samples, per.repeat) == (settings.max_samples, settings.min_samples, 3)
    repeated = diff.diff([("a.json", _cpu_run(rng, base, 3)), ("b.json", _cpu_run(rng, base, 3, slow))])
    cmp = repeated.comparisons[0]
    assert all(c.judged and c.floor.source == "repeats" for c in cmp.compared) and len(cmp.compared) == len(rows)
    assert {c.key for c in cmp.cases if c.verdict == "slower"} == slowed
    assert not [c for c in cmp.cases if c.verdict == "faster"]
    assert "--repeat 3" not in render_diff(repeated, "md")


def test_a_floor_never_comes_from_the_pair_judged_and_the_output_names_where_it_came_from():
    """Issue 49, item 6: with neither repeats nor a shipped floor, a floor learned from the pair judged called
    real 1.8-4% changes "same within noise". Now such rows are not judged; a shipped floor names its controls."""
    from in_lang import render_diff

    r = h200()
    other = fx.scaled(r, 1.04, fx.keys(r, op="vector_add"))
    cmp = diff.diff([("a.json", r), ("b.json", other)], floors={}).comparisons[0]
    assert cmp.compared and all(c.verdict == diff.NOT_JUDGED and c.floor is None for c in cmp.compared)
    assert cmp.tested == 0 and not cmp.floors
    with_floors = diff.diff([("a.json", r), ("b.json", other)])
    shipped_cmp = with_floors.comparisons[0]
    assert dict(shipped_cmp.sources)["shipped"] == shipped_cmp.tested > 0 and shipped_cmp.shipped_pairs
    md = render_diff(with_floors, "md")
    assert all(name.replace("_", "\\_") in md for pair in shipped_cmp.shipped_pairs for name in pair)


def test_the_committed_back_to_back_control_uses_the_shipped_floors_and_calls_nothing():
    a, b = (fx.load(REPORTS / name) for name in FLOORS_H200)
    cmp = diff.diff([(FLOORS_H200[0], a), (FLOORS_H200[1], b)]).comparisons[0]
    assert cmp.shipped_model == "NVIDIA H200" and cmp.shipped_pairs == (FLOORS_H200,)
    assert dict(cmp.sources) == {"shipped": cmp.tested}
    assert not [c for c in cmp.cases if c.verdict in ("slower", "faster")]
    # In-sample (the floors were learned from this pair); an estimate from the pair itself left 26 of 254
    # intervals excluding 1 and called 7 rows.
    assert sum(c.low > 1 or c.high < 1 for c in cmp.compared) <= 0.05 * cmp.tested


def _h100_pair(pair: tuple[str, str]) -> Any:
    """The diff of a committed H100 pair with the shipped floors."""
    a, b = (fx.load(REPORTS / name) for name in pair)
    return diff.diff([(pair[0], a), (pair[1], b)]).comparisons[0]


def _excluding(cmp: Any) -> int:
    return sum(c.low > 1 or c.high < 1 for c in cmp.compared if c.low is not None)


def test_the_committed_h100_back_to_back_control_uses_its_floors():
    """The H100's full-suite pair the floors come from: at most 5% of intervals exclude 1 (in-sample: 11 of
    254; an estimate from the pair itself left 21)."""
    cmp = _h100_pair(FLOORS_H100)
    assert cmp.shipped_model == "NVIDIA H100 80GB HBM3" and cmp.shipped_pairs == (FLOORS_H100,)
    assert dict(cmp.sources) == {"shipped": cmp.tested}
    assert _excluding(cmp) <= 0.05 * cmp.tested


@pytest.mark.xfail(strict=True, reason="a Triton tf32 matmul 1000^3 (same kernel and tile in both runs) "
                   "ran 15.2 then 13.6 us: 0.898 [0.853, 0.944], called faster even in-sample")
def test_the_committed_h100_back_to_back_control_calls_nothing():
    cmp = _h100_pair(FLOORS_H100)
    assert not [c for c in cmp.cases if c.verdict in ("slower", "faster")]


def test_the_h100_floors_out_of_sample_on_the_earlier_pair_call_nothing():
    """The H100 pair of the earlier sampler, never used to learn the floors: no row called and at
    most 5% of intervals excluding 1 (6 of 253; an estimate from the pair itself left 26, and called 2)."""
    cmp = _h100_pair(BACK_TO_BACK_H100)
    assert cmp.shipped_pairs == (FLOORS_H100,) and dict(cmp.sources) == {"shipped": cmp.tested}
    assert not [c for c in cmp.cases if c.verdict in ("slower", "faster")]
    assert _excluding(cmp) <= 0.05 * cmp.tested


SUSTAINED_H100 = ("2026-11-26_0615Z_vm_h100_matmul_a.json.gz", "2026-11-26_0615Z_vm_h100_matmul_b.json.gz")


def test_sustained_matmul_rows_move_less_between_runs_and_the_floors_call_none():
    """Two matmul-only runs back to back on one H100 with compute-bound rows timed sustained: their
    run-to-run change is under half the full-suite pair's over the 55 rows both diffs compare (1.05%
    against 3.07% root mean square), and the shipped floors call no row and leave every interval they set
    covering 1, the nine JAX rows (host-timed) with the launch floors too."""
    import statistics

    a, b = (fx.load(REPORTS / name) for name in SUSTAINED_H100)
    assert all(any(n.key == "bench.sustained" for n in bench.notes) for r in (a, b) for bench in r.benches)
    cmp = diff.diff([(SUSTAINED_H100[0], a), (SUSTAINED_H100[1], b)]).comparisons[0]
    assert not [c for c in cmp.cases if c.verdict in ("slower", "faster")]
    floored = [c for c in cmp.compared if c.floor is not None and c.floor.source == "shipped"]
    assert len(floored) >= 70 and not [c for c in floored if c.low > 1 or c.high < 1]

    def moves(pair: tuple[str, str]) -> dict[Any, float]:
        x, y = (fx.load(REPORTS / name) for name in pair)
        cmp = diff.diff([(pair[0], x), (pair[1], y)]).comparisons[0]
        return {(c.impl, c.dtype, c.shape): math.log(c.ratio) for c in cmp.compared
                if c.op == "matmul" and c.impl != "jax"}

    now, before = moves(SUSTAINED_H100), moves(FLOORS_H100)
    common = sorted(set(now) & set(before))
    assert len(common) >= 50

    def rms(m: dict[Any, float]) -> float:
        return math.sqrt(statistics.fmean(m[k] ** 2 for k in common))

    assert rms(now) < 0.5 * rms(before)


def test_a_shipped_floor_is_used_only_for_the_implementations_its_controls_measured():
    """The H200's controls measured torch, Triton and torch.compile: the same rows under another
    implementation's name (as JAX's would be) are not judged without repeats, the rest get the floor."""
    assert shipped.for_model("NVIDIA H200").impls == {"torch", "triton", "compile"}

    def renamed(r: Report) -> Report:
        benches = tuple(dataclasses.replace(bench, cases=tuple(
            dataclasses.replace(c, impl="jax") if c.impl == "torch" and c.op == "vector_add" else c
            for c in bench.cases)) for bench in r.benches)
        return dataclasses.replace(r, benches=benches)

    a, b = (renamed(fx.load(REPORTS / name)) for name in BACK_TO_BACK)
    cmp = diff.diff([(BACK_TO_BACK[0], a), (BACK_TO_BACK[1], b)]).comparisons[0]
    jax = [c for c in cmp.compared if c.impl == "jax"]
    others = [c for c in cmp.compared if c.impl != "jax"]
    assert len(jax) >= 10 and others
    assert all(c.floor is None and c.verdict == diff.NOT_JUDGED for c in jax)
    assert all(c.floor is not None and c.floor.source == "shipped" for c in others)


def test_shipped_floors_never_cross_gpu_models_or_physical_gpus():
    """The H100 against an H200, and two H200s with different UUIDs: no floor, no row judged."""
    cmp = diff.diff([("a.json", fx.h100()), ("b.json", fx.h200_before())]).comparisons[0]
    assert cmp.shipped_model is None and "shipped" not in dict(cmp.sources)
    cmp = diff.diff([("a.json", fx.h200_before()), ("b.json", fx.h200_after())]).comparisons[0]
    assert not cmp.same_machine and "shipped" not in dict(cmp.sources)


@pytest.mark.slow  # the script over every committed control pair (~4 s): a check of the data, not of a rule
def test_the_shipped_data_file_is_what_the_script_makes_from_the_committed_controls(tmp_path):
    """Provenance: regenerating from the committed pairs (H200, H100), launch and node pairs gives the file shipped."""
    import runpy
    import sys

    out = tmp_path / "floors.json"
    argv = sys.argv
    node = [x for a, b in NODE_FLOORS for x in ("--node", str(REPORTS / a), str(REPORTS / b))]
    node += [x for a, b in LAUNCH_FLOORS for x in ("--launch", str(REPORTS / a), str(REPORTS / b))]
    sys.argv = ["noise_floors.py", *(str(REPORTS / n) for n in FLOORS_H200 + FLOORS_H100), *node, "--out", str(out)]
    try:
        with pytest.raises(SystemExit) as e:
            runpy.run_path(str(REPORTS.parent / "tools" / "evidence" / "noise_floors.py"), run_name="__main__")
        assert e.value.code == 0
    finally:
        sys.argv = argv
    shipped_text = (REPORTS.parent / "envcheck" / "compare" / "noise_floors.json").read_text()
    assert json.loads(out.read_text()) == json.loads(shipped_text)


def test_a_malformed_floor_file_is_refused():
    with pytest.raises(ValueError, match="envcheck-noise-floors"):
        shipped.parse({"format": "something", "version": 1})


def test_floors_learned_from_runs_with_repeats_find_the_planted_between_run_noise(tmp_path):
    """The generator on a pair of runs with repeats (as tools/evidence/controls.sh writes them):
    it learns from their first repeats, and the floor of every-row comes out near the between-run
    noise planted (the committed H200 one, per kind), not near zero and not near the repeats' sum."""
    import runpy
    import sys

    from envcheck import model

    rng = np.random.default_rng(12)
    paths = []
    for name in ("a.json", "b.json"):
        path = tmp_path / name
        path.write_text(model.dumps(with_repeats(h200(), rng)))
        paths.append(str(path))
    out = tmp_path / "floors.json"
    argv = sys.argv
    sys.argv = ["noise_floors.py", *paths, "--out", str(out)]
    try:
        with pytest.raises(SystemExit) as e:
            runpy.run_path(str(REPORTS.parent / "tools" / "evidence" / "noise_floors.py"), run_name="__main__")
        assert e.value.code == 0
    finally:
        sys.argv = argv
    learned = shipped.parse(json.loads(out.read_text()))["NVIDIA H200"]
    planted = shipped.for_model("NVIDIA H200").kinds
    assert learned.pairs == (("a.json", "b.json"),)
    assert 0.5 * planted["gpu"].log_sd < learned.kinds["gpu"].log_sd < 1.5 * planted["gpu"].log_sd


def test_rows_compared_on_launch_time_never_share_the_gpu_time_rows_allowance():
    """The H100 controls of 2026-11-25, one repeat of each side: the JAX rows have launch time only
    (moving by 0.61-1.50x where nothing changed), the torch and Triton rows GPU time. The JAX rows'
    allowance is the floor shipped for their own kind of timing (launch/...: vector add's 24% a row, where
    the GPU-time rows' is a tenth of a percent); judged with the GPU-time rows' allowance, 16 of the 72 were
    called.
    (JAX's relu rows all moved by about 0.8x together: a kind that moves as a whole is what a pair
    without repeats cannot tell from a change.)"""
    import runpy

    cut = runpy.run_path(str(REPORTS.parent / "tools" / "evidence" / "noise_floors.py"))["first_repeat"]
    names = ("2026-11-25_2220Z_vm_h100_controls_baseline.json.gz", "2026-11-25_2220Z_vm_h100_controls_rerun.json.gz")
    a, b = (cut(fx.load(REPORTS / n)) for n in names)
    cmp = diff.diff([(names[0], a), (names[1], b)]).comparisons[0]
    jax = [c for c in cmp.compared if c.impl == "jax"]
    gpu = [c for c in cmp.compared if c.impl != "jax"]
    assert len(jax) == 24 and len(gpu) == 48
    assert all(c.timing == "launch" and c.floor.kind[0] == "launch" and c.floor.source == "shipped" for c in jax)
    assert all(c.timing == "gpu" and c.floor.kind[0] == "gpu" and c.floor.source == "shipped" for c in gpu)
    assert max(c.floor.log_sd for c in jax) > 5 * max(c.floor.log_sd for c in gpu)
