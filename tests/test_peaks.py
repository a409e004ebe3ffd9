"""Peaks: every datasheet row against real NVML names and against its own SMs x clock x rate."""

from __future__ import annotations

import pytest

from envcheck.analysis import peaks as P
from envcheck.ops import PRECISIONS

# Names NVML returns for each row (nvidia-smi --query-gpu=name); older drivers drop "NVIDIA".
NVML_NAMES: dict[str, tuple[str, ...]] = {
    "v100_sxm2": ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"),
    "v100_pcie": ("Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"),
    "v100s_pcie": ("Tesla V100S-PCIE-32GB",),
    "t4": ("Tesla T4",),
    "a100_sxm4_40gb": ("NVIDIA A100-SXM4-40GB",),
    "a100_sxm4_80gb": ("NVIDIA A100-SXM4-80GB",),
    "a100_pcie_40gb": ("NVIDIA A100-PCIE-40GB",),
    "a100_pcie_80gb": ("NVIDIA A100 80GB PCIe",),
    "a800_pcie_80gb": ("NVIDIA A800 80GB PCIe",),
    "a800_sxm4_80gb": ("NVIDIA A800-SXM4-80GB",),
    "a10": ("NVIDIA A10",),
    "a40": ("NVIDIA A40",),
    "rtx_3060": ("NVIDIA GeForce RTX 3060", "GeForce RTX 3060"),
    "rtx_3070": ("NVIDIA GeForce RTX 3070",),
    "rtx_3080": ("NVIDIA GeForce RTX 3080",),
    "rtx_3090": ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090"),
    "rtx_3060_laptop": ("NVIDIA GeForce RTX 3060 Laptop GPU", "GeForce RTX 3060 Laptop GPU"),
    "rtx_3070_laptop": ("NVIDIA GeForce RTX 3070 Laptop GPU",),
    "rtx_3080_laptop": ("NVIDIA GeForce RTX 3080 Laptop GPU",),
    "l4": ("NVIDIA L4",),
    "l40": ("NVIDIA L40",),
    "l40s": ("NVIDIA L40S",),
    "rtx_4060": ("NVIDIA GeForce RTX 4060",),
    "rtx_4070": ("NVIDIA GeForce RTX 4070",),
    "rtx_4080": ("NVIDIA GeForce RTX 4080",),
    "rtx_4090": ("NVIDIA GeForce RTX 4090",),
    "rtx_4060_laptop": ("NVIDIA GeForce RTX 4060 Laptop GPU",),
    "rtx_4070_laptop": ("NVIDIA GeForce RTX 4070 Laptop GPU",),
    "rtx_4080_laptop": ("NVIDIA GeForce RTX 4080 Laptop GPU",),
    "rtx_4090_laptop": ("NVIDIA GeForce RTX 4090 Laptop GPU",),
    "h100_sxm": ("NVIDIA H100 80GB HBM3",),
    "h100_pcie": ("NVIDIA H100 PCIe",),
    "h100_nvl": ("NVIDIA H100 NVL",),
    "h200": ("NVIDIA H200",),
    "h200_nvl": ("NVIDIA H200 NVL",),
    "h20": ("NVIDIA H20",),
    "b200": ("NVIDIA B200",),
    "rtx_5090": ("NVIDIA GeForce RTX 5090",),
}

# Real parts whose names contain a row's name but which no row describes: each must fall
# through to the derivation, not borrow a sibling's figures.
NEAR_MISSES = (
    "NVIDIA GeForce RTX 3060 Ti", "NVIDIA GeForce RTX 3070 Ti", "NVIDIA GeForce RTX 3080 Ti",
    "NVIDIA GeForce RTX 3090 Ti", "NVIDIA GeForce RTX 3080 Ti Laptop GPU", "NVIDIA GeForce RTX 3050 Laptop GPU",
    "NVIDIA GeForce RTX 4060 Ti", "NVIDIA GeForce RTX 4070 Ti", "NVIDIA GeForce RTX 4070 SUPER",
    "NVIDIA GeForce RTX 4070 Ti SUPER", "NVIDIA GeForce RTX 4080 SUPER", "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 5090 D", "NVIDIA GeForce RTX 5080", "NVIDIA A10G", "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
    "Tesla V100-SXM3-32GB", "Tesla V100-FHHL-16GB", "NVIDIA H800", "NVIDIA H800 PCIe", "NVIDIA GH200 480GB",
    "NVIDIA H20 HBM3e", "NVIDIA H100 NVL MIG 1g.12gb", "NVIDIA RTX A6000", "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA L20", "NVIDIA B100", "NVIDIA GB200", "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "Quadro RTX 6000", "NVIDIA TITAN RTX", "NVIDIA A2",
)

# NVIDIA prints B200's TF32 as "2.2 PFLOPS" with sparsity: 2.25 truncated, 2.2% below the
# bf16 figure's 4.5 / 2. Every other figure is within 1.5% of SMs x clock x rate.
TOLERANCE = {("b200", "tf32"): 0.025}
ROWS = [pytest.param(spec, id=spec.key) for spec in P.SPECS]
PRINTED_ROWS = [pytest.param(spec, id=spec.key) for spec in P.SPECS if spec.tflops]
COMPUTED_ROWS = [pytest.param(spec, id=spec.key) for spec in P.SPECS if not spec.tflops]


def peaks_by_precision(*args: object) -> tuple[dict[str, P.Peak], dict[str, P.Missing]]:
    peaks, missing = P.compute_peaks(*args)  # type: ignore[arg-type]
    return {p.precision: p for p in peaks}, {m.precision: m for m in missing}


@pytest.mark.parametrize("spec", ROWS)
def test_each_rows_nvml_names_match_it_and_no_other_row(spec: P.GpuSpec) -> None:
    names = NVML_NAMES.get(spec.key)
    assert names, f"give {spec.key} the NVML names it must match"
    for name in names:
        assert [s.key for s in P.SPECS if s.matches(name)] == [spec.key], name
        assert P.spec_for(name) is spec


@pytest.mark.parametrize("name", NEAR_MISSES)
def test_near_miss_names_match_no_row(name: str) -> None:
    assert P.spec_for(name) is None


@pytest.mark.parametrize("spec", PRINTED_ROWS)
def test_printed_figures_equal_sms_times_clock_times_rate(spec: P.GpuSpec) -> None:
    # Catches a typo in a figure, an SM count, a clock or a per-SM rate: they must agree.
    for precision, printed in spec.tflops.items():
        rate = P.row_rate(spec, precision)
        assert rate is not None, f"{spec.key} prints {precision}, which its architecture lacks"
        expected = spec.sm_count * P.row_clock_mhz(spec, precision) * rate / 1e6
        if spec.capped:
            assert printed < expected, (spec.key, precision)  # a cap only lowers
        else:
            tolerance = TOLERANCE.get((spec.key, precision), 0.015)
            assert printed == pytest.approx(expected, rel=tolerance), (spec.key, precision)


@pytest.mark.parametrize("spec", COMPUTED_ROWS)
def test_rows_without_printed_figures_follow_the_geforce_rule(spec: P.GpuSpec) -> None:
    # Only GeForce product pages print no TFLOP/s: their tensor rates must be the halved ones,
    # the same per-SM ratios as the printed GeForce rows (RTX 3090: 71 fp16 = 2 x 35.6 fp32).
    assert P.is_geforce(spec.label)
    got = P.spec_tflops(spec)
    assert got["fp32"] == pytest.approx(spec.sm_count * spec.clock_mhz * 256 / 1e6)
    assert got["tf32"] == pytest.approx(got["fp32"])
    assert got["fp16"] == pytest.approx(2 * got["fp32"]) and got["bf16"] == got["fp16"]


@pytest.mark.parametrize("spec", ROWS)
def test_a_row_prints_every_precision_its_architecture_has(spec: P.GpuSpec) -> None:
    have = set(P.spec_tflops(spec))
    arch = set(P.ARCHS[spec.cc].per_sm)
    if spec.capped:
        assert have < arch  # H20's fp32 is left out on purpose (see its row)
    else:
        assert have == arch


@pytest.mark.parametrize("spec", ROWS)
def test_rows_cite_documents_and_say_how_far_they_were_checked(spec: P.GpuSpec) -> None:
    assert spec.doc.url.startswith("https://") and spec.doc.title
    if spec.verified:
        assert spec.evidence is None
    elif spec.evidence is not None:
        assert spec.evidence.url.startswith("https://")
    assert (spec.clock_basis == "up_to") == ("Laptop" in spec.label)
    assert ("GeForce" in spec.label) == P.is_geforce(spec.label)


def test_laptop_figures_use_the_top_of_nvidias_boost_range_not_nvmls_clock() -> None:
    got, _ = peaks_by_precision("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9", 24, 3105.0)
    assert got["fp16"].tflops == pytest.approx(24 * 2370 * 512 / 1e6)
    assert got["fp16"].source.kind == "datasheet_computed_up_to"
    assert got["fp16"].source.params["clock_mhz"] == 2370
    assert got["fp32"].tflops == pytest.approx(24 * 2370 * 256 / 1e6)


def test_a_listed_gpu_gets_its_datasheet_figure_not_the_max_clock_one() -> None:
    got, missing = peaks_by_precision("NVIDIA H100 80GB HBM3", "9.0", 132, 1980.0)
    assert not missing
    assert got["bf16"].tflops == 989.4 and got["tf32"].tflops == 494.7 and got["fp32"].tflops == 66.9
    assert got["bf16"].source == P.Source("datasheet", {"gpu": "H100 SXM5", "doc": P.H100_WP.title,
                                                        "url": P.H100_WP.url})


def test_a_row_needs_no_nvml_numbers() -> None:
    got, missing = peaks_by_precision("NVIDIA GeForce RTX 3090", None, None, None)
    assert not missing and got["fp16"].tflops == 71.0


def test_unverified_rows_say_so_in_their_sources() -> None:
    got, _ = peaks_by_precision("NVIDIA H200", "9.0", 132, 1980.0)
    assert got["bf16"].tflops == 989.5 and got["bf16"].source.verified is False
    bandwidth = P.spec_bandwidth("NVIDIA H200")
    assert bandwidth is not None and bandwidth[0] == 4800.0 and bandwidth[1].verified is False


def test_another_sm_count_under_a_rows_name_scales_the_row() -> None:
    # The RTX 3080 12GB has 70 SMs under the 10GB card's name: 70 x 1710 MHz x 512 = 61.3.
    got, _ = peaks_by_precision("NVIDIA GeForce RTX 3080", "8.6", 70, 2100.0)
    assert got["fp16"].tflops == pytest.approx(59.5 * 70 / 68)
    assert got["fp16"].source.kind == "datasheet_scaled"
    assert got["fp16"].source.params["spec_sm_count"] == 68 and got["fp16"].source.params["sm_count"] == 70


def test_a_mig_slice_is_derived_from_its_own_sms() -> None:
    got, _ = peaks_by_precision("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "8.0", 14, 1410.0)
    assert got["bf16"].tflops == pytest.approx(14 * 1410 * 2048 / 1e6)
    assert got["bf16"].source.kind == "derived"


def test_volta_has_no_tf32_or_bf16_tensor_path() -> None:
    got, missing = peaks_by_precision("Tesla V100-SXM2-16GB", "7.0", 80, 1530.0)
    assert got["fp16"].tflops == 125.0 and set(got) == {"fp32", "fp16"}
    assert {p: (m.key, dict(m.params)) for p, m in missing.items()} == {
        "tf32": ("peak.no_tensor_path", {"cc": "7.0", "arch": "Volta"}),
        "bf16": ("peak.no_tensor_path", {"cc": "7.0", "arch": "Volta"}),
    }


def test_h20s_tensor_cap_holds_whatever_the_sm_count_and_fp32_comes_from_nvml() -> None:
    for sms in (78, 60):
        got, _ = peaks_by_precision("NVIDIA H20", "9.0", sms, 1980.0)
        assert got["bf16"].tflops == 148.0 and got["bf16"].source.kind == "datasheet"
        assert got["fp32"].tflops == pytest.approx(sms * 1980 * 256 / 1e6)
        assert got["fp32"].source.kind == "derived"


def test_geforce_rule_halves_tensor_rates_of_an_unlisted_geforce_laptop() -> None:
    # RTX 3050 Laptop GPU: 16 SMs (2048 cores); 1740 MHz as NVML's max.
    got, missing = peaks_by_precision("NVIDIA GeForce RTX 3050 Laptop GPU", "8.6", 16, 1740.0)
    assert not missing
    assert got["fp16"].tflops == pytest.approx(16 * 1740 * 512 / 1e6)  # 14.3, not the A10-class 28.5
    assert got["bf16"].tflops == got["fp16"].tflops
    assert got["tf32"].tflops == pytest.approx(16 * 1740 * 256 / 1e6)
    assert got["fp32"].tflops == pytest.approx(16 * 1740 * 256 / 1e6)
    assert got["fp16"].source.kind == "derived_geforce" and got["fp16"].source.params["per_sm"] == 512
    assert got["fp32"].source.kind == "derived"


@pytest.mark.parametrize(("cc", "geforce", "full_rate"), [
    ("7.5", "NVIDIA GeForce RTX 2080 Ti", "Quadro RTX 6000"),
    ("8.6", "NVIDIA GeForce RTX 3050 Laptop GPU", "NVIDIA RTX A2000 Laptop GPU"),
    ("8.9", "NVIDIA GeForce RTX 4060 Ti", "NVIDIA RTX 4000 Ada Generation"),
    ("12.0", "NVIDIA GeForce RTX 5080", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
])
def test_geforce_rule_against_full_rate_parts_of_the_same_architecture(cc: str, geforce: str,
                                                                       full_rate: str) -> None:
    consumer, _ = peaks_by_precision(geforce, cc, 40, 2000.0)
    pro, _ = peaks_by_precision(full_rate, cc, 40, 2000.0)
    assert consumer["fp32"].tflops == pro["fp32"].tflops
    for precision in set(consumer) - {"fp32"}:
        assert consumer[precision].tflops == pytest.approx(pro[precision].tflops / 2)
        assert (consumer[precision].source.kind, pro[precision].source.kind) == ("derived_geforce", "derived")


def test_turing_without_rtx_has_no_tensor_cores() -> None:
    got, missing = peaks_by_precision("NVIDIA GeForce GTX 1650", "7.5", 14, 1665.0)
    assert set(got) == {"fp32"}
    assert missing["fp16"].key == "peak.no_tensor_cores"
    assert missing["bf16"].key == "peak.no_tensor_path"


def test_without_a_name_a_split_architecture_gets_no_tensor_peak() -> None:
    got, missing = peaks_by_precision(None, "8.6", 28, 1777.0)
    assert set(got) == {"fp32"}
    assert {m.key for m in missing.values()} == {"peak.no_name"}


def test_unlisted_hopper_uses_the_datasheet_tensor_clock_not_nvmls_max() -> None:
    got, _ = peaks_by_precision("NVIDIA GH200 480GB", "9.0", 132, 1980.0)
    sheet = P.SPEC_BY_KEY["h100_sxm"].tflops
    max_clock_value = 132 * 1980 * 4096 / 1e6  # 1070.5: 8% above the datasheet
    assert got["bf16"].tflops == pytest.approx(sheet["bf16"], rel=0.01)
    assert got["bf16"].tflops < max_clock_value / 1.05
    assert got["tf32"].tflops == pytest.approx(sheet["tf32"], rel=0.01)
    assert got["fp32"].tflops == pytest.approx(sheet["fp32"], rel=0.01)  # CUDA cores run at the max clock
    source = got["bf16"].source
    assert source.kind == "derived_tensor_clock" and source.params["nvml_clock_mhz"] == 1980.0
    assert source.params["ref_gpu"] == "H100 SXM5" and source.params["ratio"] == pytest.approx(1830 / 1980, abs=1e-4)


def test_rates_inferred_rather_than_printed_are_marked_unverified() -> None:
    # B200's and Orin's per-SM tensor rates are inferred (see ARCHS); Hopper's are printed.
    assert peaks_by_precision("NVIDIA B100", "10.0", 148, 1965.0)[0]["bf16"].source.verified is False
    assert peaks_by_precision("Orin", "8.7", 16, 1300.0)[0]["fp16"].source.verified is False
    assert peaks_by_precision("NVIDIA GH200 480GB", "9.0", 132, 1980.0)[0]["bf16"].source.verified is True


def test_the_hopper_ratio_reproduces_another_hopper_datasheet() -> None:
    # H100 PCIe as if unlisted: 114 SMs at its NVML max 1755 MHz, scaled by H100 SXM's ratio.
    got, _ = peaks_by_precision(None, "9.0", 114, 1755.0)
    assert got["bf16"].tflops == pytest.approx(P.SPEC_BY_KEY["h100_pcie"].tflops["bf16"], rel=0.01)


def test_unknown_architecture_is_missing_with_its_key_for_every_precision() -> None:
    got, missing = peaks_by_precision("NVIDIA Thor", "11.0", 20, 1575.0)
    assert not got
    assert {p: (m.key, dict(m.params)) for p, m in missing.items()} == {
        p: ("peak.unknown_arch", {"cc": "11.0"}) for p in PRECISIONS}


@pytest.mark.parametrize(("sms", "clock", "key"), [(None, 1800.0, "peak.no_sm_count"), (0, 1800.0, "peak.no_sm_count"),
                                                    (20, None, "peak.no_clock")])
def test_missing_sm_count_or_clock_is_missing_with_its_key(sms: int | None, clock: float | None, key: str) -> None:
    got, missing = peaks_by_precision("NVIDIA GeForce RTX 3050", "8.6", sms, clock)
    assert not got
    assert {m.key for m in missing.values()} == {key} and set(missing) == set(PRECISIONS)
    assert dict(missing["fp32"].params) == {"cc": "8.6", "arch": "Ampere"}


def test_no_compute_capability_and_no_row_is_missing() -> None:
    got, missing = peaks_by_precision("Some Future GPU", None, 100, 2000.0)
    assert not got and {m.key for m in missing.values()} == {"peak.no_cc"}


@pytest.mark.parametrize("cc", sorted(P.ARCHS))
@pytest.mark.parametrize("name", [None, "NVIDIA GeForce RTX 9090", "NVIDIA X100", "NVIDIA H100 80GB HBM3"])
def test_every_precision_gets_a_peak_or_a_reason(cc: str, name: str | None) -> None:
    peaks, missing = P.compute_peaks(name, cc, 100, 2000.0)
    assert sorted([p.precision for p in peaks] + [m.precision for m in missing]) == sorted(PRECISIONS)
    for item in [p.source.params for p in peaks] + [m.params for m in missing]:
        assert all(isinstance(v, (str, int, float)) for v in item.values())


def test_spec_bandwidth_only_where_one_name_means_one_memory() -> None:
    bandwidth = P.spec_bandwidth("NVIDIA H100 80GB HBM3")
    assert bandwidth is not None and bandwidth[0] == 3350.0 and bandwidth[1].kind == "datasheet"
    assert bandwidth[1].params["gpu"] == "H100 SXM5"
    assert P.spec_bandwidth("NVIDIA GeForce RTX 3060") is None  # 12GB: 360 GB/s, 8GB: 240 GB/s
    assert P.spec_bandwidth("NVIDIA GeForce RTX 4060 Laptop GPU") is None
    assert P.spec_bandwidth("Some Future GPU") is None and P.spec_bandwidth(None) is None


def test_one_table_of_architecture_names() -> None:
    assert P.ARCH_NAMES["8.9"] == "Ada Lovelace" and P.ARCH_NAMES["9.0"] == "Hopper"
    assert all(spec.cc in P.ARCH_NAMES for spec in P.SPECS)
    assert P.arch_name("10.7") == "Blackwell" and P.arch_name("9.1") == "Hopper"
    assert P.arch_name("8.8") is None  # Ampere and Ada share major 8
    assert P.arch_name("4.0") is None and P.arch_name(None) is None


def test_normalise_drops_vendor_words_and_punctuation() -> None:
    assert P.normalise("Tesla V100-SXM2-16GB") == "v100 sxm2 16gb"
    assert P.normalise("NVIDIA GeForce RTX 3060 Laptop GPU") == "geforce rtx 3060 laptop gpu"
    assert P.normalise("  NVIDIA   A100_PCIE_40GB ") == "a100 pcie 40gb"
