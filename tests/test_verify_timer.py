"""tools/evidence/verify_timer.py end to end on the CPU, with the GPU's pieces faked (CUDA graphs
replay the call ``k`` times, do_bench_cudagraph times it with a host clock), so the device run
does not find a typo: every row printed, the noisy statistics and the verdict line."""

from __future__ import annotations

import pytest
from verify_timer_fakes import fake_gpu, load_script

torch = pytest.importorskip("torch")


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch):
    from envcheck.bench import impls

    module = load_script(monkeypatch)
    fake_gpu(monkeypatch, module)
    monkeypatch.setattr(module, "ROWS", (("vector_add", "fp32", (4097,)), ("matmul", "bf16", (32, 33, 31))))
    monkeypatch.setattr(impls, "triton_impl", lambda op, inputs, out, precision: impls.torch_impl(op, inputs, out))
    return module


@pytest.mark.slow  # two rounds of real sampling on the CPU (~4 s); --workloads below takes the same path fast
def test_every_row_is_printed_with_its_ratio_noise_and_the_verdict(script, capsys) -> None:
    status = script.main()
    out = capsys.readouterr().out
    assert status in (0, 1)  # a host clock against a host clock need not agree within 1%
    lines = out.splitlines()
    assert lines[0].startswith("GPU: Fake GPU")
    for label in ("vector_add fp32 4097", "matmul bf16 32×33×31"):
        rows = [ln for ln in lines if ln.startswith(label)]
        assert [ln.split()[len(label.split())] for ln in rows] == ["torch", "triton"], out
    assert any(ln.startswith("largest deviation from do_bench_cudagraph:") for ln in lines)
    assert any(ln.startswith("rows the noisy flag fires on") for ln in lines)
    assert "failed" not in out


def test_workloads_rows_are_the_first_users_headline_cases_at_3_percent(script, capsys, monkeypatch) -> None:
    """``--workloads``: the issue-22 headline cases through the same path, judged at 3%."""
    monkeypatch.setattr(script, "WORKLOAD_ROWS", (("layer_norm", "fp32", (64, 96)), ("sum_lead", "fp32", (4, 8, 16))))
    status = script.main(["--workloads"])
    out = capsys.readouterr().out
    assert status in (0, 1)
    for label in ("layer_norm fp32 64×96", "sum_lead fp32 4×8×16"):
        assert [ln.split()[3] for ln in out.splitlines() if ln.startswith(label)] == ["torch", "triton"], out
    assert "(allowed 3%)" in out
    assert script.main(["--bogus"]) == 2
