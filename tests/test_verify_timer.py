"""scripts/verify_timer.py end to end on the CPU, with the GPU's pieces faked (CUDA graphs
replay the call ``k`` times, do_bench_cudagraph times it with a host clock), so the device run
does not find a typo: every row printed, the noisy statistics and the verdict line."""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "verify_timer.py"


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("verify_timer", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "verify_timer", module)  # dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]

    from envcheck.bench import device, graphs, impls
    from envcheck.bench.timer import HostClock, Timer
    from envcheck.model import BenchDevice

    class CpuAsGpu(device.Runtime):
        """A Runtime that takes the GPU's path with CPU tensors."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.where = "cpu"

        def free_bytes(self) -> int | None:
            return 8 << 30

        def after_failure(self) -> None:
            pass

    class Graph:
        def __init__(self, fn, calls: int) -> None:
            self.fn, self.calls = fn, calls

        def replay(self) -> None:
            for _ in range(self.calls):
                self.fn()

    class NoNvml:
        def init(self) -> str:
            return "no NVML in this test"

        def call(self, name: str, *args):  # pragma: no cover - never reached without init
            raise RuntimeError(name)

        def shutdown(self) -> None:
            pass

    def do_bench_cudagraph(fn, rep: int, return_mode: str) -> float:
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    monkeypatch.setattr(module, "_unusable", lambda: None)
    monkeypatch.setattr(module, "ROWS", (("vector_add", "fp32", (4097,)), ("matmul", "bf16", (32, 33, 31))))
    monkeypatch.setattr(module, "WINDOW_MS", 20)
    monkeypatch.setattr(module, "SETTLE_MS", 2.0)
    monkeypatch.setattr(device, "Runtime", CpuAsGpu)
    monkeypatch.setattr(device, "cuda_device", lambda torch, index, nvml: BenchDevice("cuda", "Fake GPU", 0))
    monkeypatch.setattr(graphs, "capture_graph", lambda fn, calls: Graph(fn, calls))
    monkeypatch.setattr(graphs, "MAX_GRAPH_CALLS", 20)
    monkeypatch.setattr(impls, "triton_impl", lambda op, inputs, out, precision: impls.torch_impl(op, inputs, out))
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: HostClock()))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    from envcheck.probes import nvml

    monkeypatch.setattr(nvml, "Nvml", NoNvml)
    import triton.testing

    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", do_bench_cudagraph)
    return module


def test_every_row_is_printed_with_its_ratio_noise_and_the_verdict(script, capsys) -> None:
    status = script.main()
    out = capsys.readouterr().out
    assert status in (0, 1)  # a host clock against a host clock need not agree within 1%
    lines = out.splitlines()
    assert lines[0].startswith("GPU: Fake GPU")
    for label in ("vector_add fp32 4097", "matmul bf16 32x33x31"):
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
    for label in ("layer_norm fp32 64x96", "sum_lead fp32 4x8x16"):
        assert [ln.split()[3] for ln in out.splitlines() if ln.startswith(label)] == ["torch", "triton"], out
    assert "(allowed 3%)" in out
    assert script.main(["--bogus"]) == 2
