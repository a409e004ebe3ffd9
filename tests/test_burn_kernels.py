"""The burn's load on CPU tensors at tiny sizes: the memory test finds and locates planted bit
errors and address faults, the GEMM's checks find a corrupted result, and a clean run passes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from envcheck.analysis.burn import analyse_burn  # noqa: E402
from envcheck.burn import memtest  # noqa: E402
from envcheck.burn.gemm import Gemm, SdcChecker  # noqa: E402
from envcheck.burn.launch import Collected  # noqa: E402
from envcheck.burn.protocol import BurnPlan, PhaseEnded, decode, encode  # noqa: E402
from envcheck.burn.worker import BurnWorker  # noqa: E402
from envcheck.model.burn import Burn  # noqa: E402

WORDS = 4096


def _flip(word: int, bit: int, pattern: str | None = None, arg: int | None = None):
    """A read-back that flips ``bit`` of word ``word`` (only while writing (pattern, arg), if given)."""
    state = {}

    def read(chunk):
        got = chunk.clone()
        got[word] ^= 1 << bit
        state["reads"] = state.get("reads", 0) + 1
        return got
    return read, state


@pytest.mark.parametrize("name", memtest.PATTERNS)
def test_every_pattern_reads_back_clean_from_healthy_memory(name):
    buf = torch.empty(WORDS, dtype=torch.int32)
    for pattern, arg in memtest.sub_patterns(name):
        found = memtest.check_pattern(torch, buf, pattern, arg, seed=3, pass_index=0, chunk=1000)
        assert found.bits == 0 and found.ranges == ()


@pytest.mark.parametrize("name", memtest.PATTERNS)
def test_a_flipped_bit_is_counted_and_located_by_its_address(name):
    buf = torch.empty(WORDS, dtype=torch.int32)
    read, _ = _flip(77, 5)
    pattern, arg = memtest.sub_patterns(name)[0]
    # Chunks of 1000 words: the flipped word 77 of each chunk read is wrong.
    found = memtest.check_pattern(torch, buf, pattern, arg, seed=3, pass_index=2, read=read, chunk=1000)
    starts = [r.start_address for r in found.ranges]
    base = buf.data_ptr()
    assert starts == [base + (lo + 77) * 4 for lo in range(0, WORDS, 1000)]
    assert all(r.end_address == r.start_address + 4 and r.words == 1 and r.bits == 1 for r in found.ranges)
    assert found.bits == len(found.ranges) and found.ranges[0].pattern == pattern and found.ranges[0].pass_index == 2


def test_adjacent_wrong_words_make_one_range_with_every_bit_counted():
    buf = torch.empty(WORDS, dtype=torch.int32)

    def read(chunk):
        got = chunk.clone()
        got[10] ^= 0b11  # two bits
        got[11] ^= 1 << 31  # the sign bit
        return got
    found = memtest.check_pattern(torch, buf, "walking_ones", 4, seed=0, pass_index=0, read=read, chunk=WORDS)
    (r,) = found.ranges
    assert (r.start_address - buf.data_ptr(), r.end_address - buf.data_ptr(), r.words, r.bits) == (40, 48, 2, 3)
    assert found.bits == 3


def test_an_address_fault_is_found_by_address_in_address_and_missed_by_a_constant_pattern():
    """Two addresses reaching one cell: word 100 reads what word 101 holds."""
    buf = torch.empty(WORDS, dtype=torch.int32)

    def alias(chunk):
        got = chunk.clone()
        got[100] = chunk[101]
        return got
    assert memtest.check_pattern(torch, buf, "walking_ones", 0, 0, 0, read=alias, chunk=WORDS).bits == 0
    found = memtest.check_pattern(torch, buf, "address", 0, 0, 0, read=alias, chunk=WORDS)
    assert found.ranges[0].start_address == buf.data_ptr() + 400 and found.bits == 1  # 100 ^ 101 = 1 bit


def test_the_random_pattern_is_the_same_on_write_and_read_and_differs_by_seed():
    a = memtest.expected(torch, "random", 0, 0, 64, "cpu", 1)
    assert torch.equal(a, memtest.expected(torch, "random", 0, 0, 64, "cpu", 1))
    assert not torch.equal(a, memtest.expected(torch, "random", 0, 0, 64, "cpu", 2))


def _run(plan: BurnPlan, **seams) -> Burn:
    """The worker in this process, every event through the protocol's encoding, gathered as the parent does."""
    got = Collected(plan)

    def emit(ev):
        got.apply(decode(encode(ev)))
    BurnWorker(plan, emit, **seams).run()
    got.done = True  # it returned
    return Burn(0.01, "2026-11-25T00:00:00Z", 1.0, (got.gpu(None),))


PLAN = BurnPlan("cpu", 0, gemm_s=0.3, bandwidth_s=0.1, memtest_s=0.1, gemm_n=32, max_bytes=1 << 16, interval_s=0.05)
# Long enough for iteration 2 on a loaded machine (iteration 0 is the reference, 1 the first interval).
LONGER = BurnPlan("cpu", 0, gemm_s=1.5, bandwidth_s=0.1, memtest_s=0.1, gemm_n=32, max_bytes=1 << 16, interval_s=0.05)


def test_a_clean_cpu_burn_passes_with_every_check_done():
    a = analyse_burn(_run(PLAN))
    g = a.gpus[0]
    assert a.verdict == "pass", g.findings
    sdc = g.gpu.sdc
    assert sdc.mismatch_count == 0 and sdc.iterations > 1 and sdc.checksums == sdc.iterations - 1
    assert sdc.full_compares >= 1 and sdc.fp64_checks >= 2 and sdc.fp64_max_error <= 1
    m = g.gpu.memtest
    assert m.passes >= 1 and m.error_bits == 0 and m.bytes_tested >= 0.9 * m.free_bytes - 4
    assert [p.phase for p in g.gpu.phases] == ["gemm", "bandwidth", "memtest"] and all(p.finished for p in g.gpu.phases)
    assert all(p.t_s and min(p.work) > 0 for p in g.gpu.phases)  # a CPU burn derives no rate: its intervals ran


def test_a_result_corrupted_once_mid_run_fails_the_gpu_at_that_iteration():
    def corrupt(iteration, out):
        if iteration == 2:
            out.view(-1)[7] += 1.0
    a = analyse_burn(_run(LONGER, corrupt=corrupt))
    g = a.gpus[0]
    assert a.verdict == "fail" and [f.key for f in g.findings] == ["sdc"]
    m = g.gpu.sdc.mismatches[0]
    assert (m.check, m.iteration) == ("checksum", 2) and g.findings[0].params["iteration"] == 2
    assert {x.iteration for x in g.gpu.sdc.mismatches} == {2}  # that iteration only: the later ones were right


@pytest.mark.slow  # a third 1.5 s burn; the fast loop catches a corruption (once) and the flip-bit control
def test_a_result_corrupted_from_then_on_is_located_to_its_element():
    def corrupt(iteration, out):
        if iteration >= 2:
            out.view(-1)[37] += 4.0
    g = analyse_burn(_run(LONGER, corrupt=corrupt)).gpus[0]
    full = [m for m in g.gpu.sdc.mismatches if m.check == "full"]
    assert full and {m.element for m in full} == {37}
    assert full[0].got - full[0].expected == pytest.approx(4.0, abs=0.1)


def test_the_float64_spot_check_catches_a_wrong_first_result():
    """A result wrong from the first iteration on agrees with itself: only float64 sees it."""
    g = Gemm.make(torch, "bf16", 16, 16, "cpu", seed=0)
    checker = SdcChecker(torch, g, seed=0)
    out = g()
    checker.first(out)
    i, j = checker._sample[0]
    out[i, j] += 10.0
    checker.fp64(out, 0, 0.0)
    assert [(m.check, m.element) for m in checker.mismatches] == [("fp64", i * 16 + j)]


def test_a_bit_flipped_in_the_memory_test_fails_the_gpu_with_its_address():
    read, state = _flip(3, 0)
    g = analyse_burn(_run(PLAN, read=read)).gpus[0]
    assert [f.key for f in g.findings] == ["bit_errors"]
    r = g.gpu.memtest.errors[0]
    assert g.findings[0].params["address"] == f"{r.start_address:#x}" and r.bits == 1 and state["reads"] > 0


def test_the_events_survive_their_json_encoding():
    events = []
    BurnWorker(PLAN, events.append).run()
    assert isinstance(events[-1], PhaseEnded)
    assert all(decode(encode(e)) == e for e in events)



def test_every_wrong_word_is_in_exactly_one_range_and_every_wrong_bit_is_counted():
    hypothesis = pytest.importorskip("hypothesis")  # a test extra: without it this test alone skips
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=40, deadline=None)
    @hypothesis.given(flips=st.dictionaries(st.integers(0, 511), st.integers(1, 2**32 - 1), min_size=1, max_size=12),
                      chunk=st.sampled_from([64, 100, 512]))
    def every_wrong_word_once(flips, chunk):
        buf = torch.empty(512, dtype=torch.int32)

        def read(part):
            got = part.clone()
            lo = (part.data_ptr() - buf.data_ptr()) // 4
            for word, mask in flips.items():
                if lo <= word < lo + part.numel():
                    got[word - lo] ^= memtest._as_int32(mask)
            return got
        found = memtest.check_pattern(torch, buf, "random", 0, seed=5, pass_index=0, read=read, chunk=chunk)
        covered = [w for r in found.ranges for w in range((r.start_address - buf.data_ptr()) // 4,
                                                          (r.end_address - buf.data_ptr()) // 4)]
        assert sorted(covered) == sorted(flips)  # each wrong word once, nothing else
        assert found.bits == sum(bin(m).count("1") for m in flips.values()) == sum(r.bits for r in found.ranges)

    every_wrong_word_once()


def test_the_flip_bit_control_is_caught_at_its_iteration_and_recorded_on_its_gpu():
    from envcheck.burn.worker import FLIP_AT

    plan = BurnPlan("cpu", 0, gemm_s=1.5, bandwidth_s=0.1, memtest_s=0.1, gemm_n=32, max_bytes=1 << 16,
                    interval_s=0.05, control="flip_bit")
    b = _run(plan)
    g = analyse_burn(b).gpus[0]
    assert b.gpus[0].control == "flip_bit"
    assert [f.key for f in g.findings] == ["sdc"] and g.findings[0].params["iteration"] == FLIP_AT
    assert {m.iteration for m in g.gpu.sdc.mismatches} == {FLIP_AT}


def test_the_slow_gemm_control_runs_one_uncounted_gemm_after_every_nine(monkeypatch):
    from envcheck.burn import gemm as gemm_mod
    from envcheck.model.burn import SLOW_GEMM_EVERY

    calls = []
    real = gemm_mod.Gemm.__call__
    monkeypatch.setattr(gemm_mod.Gemm, "__call__", lambda self: calls.append(1) or real(self))
    plan = BurnPlan("cpu", 0, gemm_s=0.3, bandwidth_s=0.0, memtest_s=0.0, gemm_n=32, interval_s=0.05,
                    control="slow_gemm")
    b = _run(plan)
    phase = b.gpus[0].phases[0]
    counted = b.gpus[0].sdc.iterations  # the reference call, then every timed one
    extra = sum(1 for i in range(1, counted) if i % SLOW_GEMM_EVERY == 0)
    assert extra >= 1 and len(calls) == counted + extra
    flop = 2 * 32 * 32 * 32
    assert sum(phase.work) == pytest.approx(flop * (counted - 1))  # the extra calls are timed, never counted


def test_a_control_runs_on_its_gpu_alone():
    from envcheck.burn.protocol import plans

    assert [p.control for p in plans((0, 1, 2), 1.0, control="slow_gemm", control_gpu=1)] == [None, "slow_gemm", None]
    assert [p.control for p in plans((2, 3), 1.0, control="flip_bit")] == ["flip_bit", None]
    assert [p.control for p in plans((0, 1), 1.0)] == [None, None]
    with pytest.raises(ValueError, match="unknown burn control"):
        BurnPlan("cpu", 0, 1.0, 1.0, 1.0, control="nothing")
