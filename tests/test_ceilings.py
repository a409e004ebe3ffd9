"""Ceilings against numbers computed by hand from NVML values and NVIDIA datasheets."""

from __future__ import annotations

import pytest

from envcheck.bench import ceilings


def test_bandwidth_from_nvml_clock_and_bus() -> None:
    # H200: 2 x 3201 MHz x 6016 bit / 8 = 4,814,304 MB/s = 4814.3 GB/s
    assert ceilings.bandwidth_from_clock(3201, 6016) == pytest.approx(4814.304)
    # H100 SXM: 2 x 2619 MHz x 5120 bit / 8 = 3,352,320 MB/s
    assert ceilings.bandwidth_from_clock(2619, 5120) == pytest.approx(3352.32)


def test_theoretical_bandwidth_prefers_the_plan_then_the_spec_table() -> None:
    c = ceilings.theoretical_bandwidth({"theoretical_bandwidth_gbps": 4814.4,
                                        "bandwidth_source": "NVML: 2 x 3201 MHz x 6016 bit / 8",
                                        "name": "NVIDIA H200"})
    assert c is not None and c.value == 4814.4 and c.kind == "theoretical" and "3201 MHz" in c.source
    fallback = ceilings.theoretical_bandwidth({"theoretical_bandwidth_gbps": None, "name": "NVIDIA H100 80GB HBM3"})
    assert fallback is not None and fallback.value == 3350.0 and "datasheet" in fallback.source
    assert ceilings.theoretical_bandwidth({"name": "Some Future GPU"}) is None


def test_hopper_rates_from_the_architecture() -> None:
    # 132 SMs x 1980 MHz x 4096 FLOP/clk = 1070.5 TFLOP/s dense bf16 at NVML's max clock ...
    assert ceilings.arch_tflops("9.0", 132, 1980, "bf16") == pytest.approx(1070.5, abs=0.1)
    # ... and 989.4 at the 1830 MHz NVIDIA's datasheet uses for tensor ops.
    assert ceilings.arch_tflops("9.0", 132, 1830, "bf16") == pytest.approx(989.4, abs=0.1)
    assert ceilings.arch_tflops("9.0", 132, 1980, "fp32") == pytest.approx(66.9, abs=0.05)
    assert ceilings.arch_tflops("9.0", 132, 1830, "tf32") == pytest.approx(494.7, abs=0.1)


def test_a100_and_ada_rates_match_their_datasheets() -> None:
    assert ceilings.arch_tflops("8.0", 108, 1410, "bf16") == pytest.approx(312.0, rel=0.002)
    assert ceilings.arch_tflops("8.0", 108, 1410, "tf32") == pytest.approx(156.0, rel=0.002)
    assert ceilings.arch_tflops("8.0", 108, 1410, "fp32") == pytest.approx(19.5, rel=0.002)
    assert ceilings.arch_tflops("8.9", 142, 2520, "fp32") == pytest.approx(91.6, rel=0.002)  # L40S


def test_unknown_parts_give_none() -> None:
    assert ceilings.arch_tflops("7.0", 80, 1530, "bf16") is None  # Volta has no bf16 tensor cores
    assert ceilings.arch_tflops("12.3", 100, 2000, "fp16") is None
    assert ceilings.arch_tflops("9.0", None, 1980, "fp16") is None


def test_spec_table_matches_nvml_names() -> None:
    assert ceilings.spec_for("NVIDIA H100 80GB HBM3").label == "H100 SXM"
    assert ceilings.spec_for("NVIDIA H100 PCIe").label == "H100 PCIe"
    assert ceilings.spec_for("NVIDIA H200").label == "H200"
    assert ceilings.spec_for("NVIDIA H200 NVL") is None  # different power and clocks: not the SXM numbers
    assert ceilings.spec_for("NVIDIA A100-SXM4-80GB").label == "A100"
    assert ceilings.spec_for("NVIDIA GeForce RTX 4090").label == "RTX 4090"
    assert ceilings.spec_for("NVIDIA L40S").label == "L40S"
    assert ceilings.spec_for(None) is None


def test_compute_ceilings_state_both_numbers_when_the_datasheet_differs() -> None:
    cs = {c.name: c for c in ceilings.compute_ceilings("NVIDIA H200", "9.0", 132, 1980)}
    assert set(cs) == {"fp32", "tf32", "fp16", "bf16"}
    bf16 = cs["bf16"]
    assert bf16.value == 989.4 and bf16.unit == "TFLOP/s" and bf16.kind == "theoretical"
    assert "datasheet" in bf16.source and "1070.5" in bf16.source and "1980 MHz" in bf16.source
    # fp32 at 1980 MHz equals the datasheet's 66.9: one number, no second opinion needed.
    assert "from the architecture" not in cs["fp32"].source


def test_compute_ceilings_for_an_unlisted_gpu_come_from_the_architecture() -> None:
    cs = {c.name: c for c in ceilings.compute_ceilings("NVIDIA A10", "8.6", 72, 1695)}
    assert cs["fp16"].value == pytest.approx(72 * 1695e6 * 1024 / 1e12)
    assert "72 SMs x 1695 MHz" in cs["fp16"].source
    assert ceilings.compute_ceilings("Mystery", None, None, None) == []


def test_rtx_4090_uses_the_geforce_rate_not_the_ada_table() -> None:
    cs = {c.name: c for c in ceilings.compute_ceilings("NVIDIA GeForce RTX 4090", "8.9", 128, 2520)}
    assert cs["fp16"].value == 165.2  # half of 128 x 2520 MHz x 1024 (data-centre Ada rate)
    assert "330.3" in cs["fp16"].source


def test_measured_bandwidth_counts_read_and_write() -> None:
    # 2 GiB moved (1 GiB read + 1 GiB written) in 502.4 us
    c = ceilings.measured_bandwidth(2 << 30, 502.4, 50)
    assert c.value == pytest.approx(2 * 2**30 / 502.4e-6 / 1e9)
    assert c.kind == "measured" and "1.00 GiB" in c.source and "50" in c.source


def test_percent() -> None:
    c = ceilings.measured_matmul("bf16", 8192, 700.0, 30)
    assert ceilings.percent(350.0, c) == pytest.approx(50.0)
    assert ceilings.percent(None, c) is None
    assert ceilings.percent(1.0, None) is None


def test_measured_matmul_source_says_one_size_at_the_start_of_the_run() -> None:
    c = ceilings.measured_matmul("bf16", 8192, 788.4, 72)
    assert c.source == "torch.matmul (cuBLAS) 8192^3 bf16 at the start of this run, median of 72"
    assert "best" not in c.source and c.kind == "measured" and c.unit == "TFLOP/s"
    assert "best cuBLAS rate" not in (ceilings.__doc__ or "")
