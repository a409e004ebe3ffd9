"""The burn on a real GPU at small sizes (skipped without one): the isolated worker with the GPU's own
dtype (fp8 where it runs), bit-exact GEMM results between iterations, NVML telemetry at least once a
second, the memory test over the buffer it was given, and a planted bit flip found on the device."""

from __future__ import annotations

import pytest

from envcheck.analysis.burn import analyse_burn
from envcheck.burn.launch import burn_gpus
from envcheck.burn.protocol import plans
from envcheck.model.node import XidScan

pytestmark = pytest.mark.gpu


def test_a_short_burn_of_gpu_0_passes_with_telemetry_and_every_check():
    (plan,) = plans([0], 0.25, "cuda", gemm_n=2048, max_bytes=1 << 30, interval_s=0.5)
    burn = burn_gpus([plan], 0.25, xid_scanner=lambda: XidScan(None))
    a = analyse_burn(burn)
    g = a.gpus[0]
    assert g.gpu.stop is None, g.gpu.stop
    assert g.gpu.sdc.mismatch_count == 0 and g.gpu.sdc.iterations > 10 and g.gpu.sdc.fp64_max_error <= 1
    tel = g.gpu.telemetry
    assert tel is not None and len(tel.t_s) >= 10 and tel.power_w is not None and tel.sm_mhz is not None
    gaps = [b - x for x, b in zip(tel.t_s, list(tel.t_s)[1:], strict=False)]
    assert max(gaps) <= 1.0  # at least once a second throughout
    assert g.gpu.memtest.passes >= 1 and g.gpu.memtest.error_bits == 0
    assert g.rate("gemm") > 1 and g.rate("bandwidth") > 10
    # Power and clock verdicts need minutes at the limit: only what a short run can prove is asserted.
    assert not {f.key for f in g.findings} & {"sdc", "bit_errors", "xids", "ecc_uncorrected", "incomplete"}


def test_a_bit_flipped_in_device_memory_is_found_at_its_address():
    import torch

    from envcheck.burn import memtest

    buf = torch.empty(1 << 22, dtype=torch.int32, device="cuda")

    def read(chunk):
        got = chunk.clone()
        if chunk.data_ptr() == buf.data_ptr():
            got[12345] ^= 1 << 17
        return got
    found = memtest.check_pattern(torch, buf, "address", 0, 0, 0, read=read)
    (r,) = found.ranges
    assert r.start_address == buf.data_ptr() + 12345 * 4 and r.bits == 1
