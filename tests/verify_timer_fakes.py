"""tools/evidence/verify_timer.py loaded as a module, and its GPU's pieces faked for the CPU: CPU tensors
on the GPU's path, CUDA graphs that replay the call ``k`` times, a host clock, no NVML, and
``do_bench_cudagraph`` timing ten calls with the host clock (tests/test_verify_timer*.py)."""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "evidence" / "verify_timer.py"


def load_script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_timer", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "verify_timer", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def fake_gpu(monkeypatch: pytest.MonkeyPatch, module: ModuleType, l2: dict[str, int] | None = None) -> None:
    """Fake the GPU for ``module`` (the loaded script); its L2 is ``l2["bytes"]``, read when the
    script asks for the device (a test may change it after this), unknown without ``l2``."""
    torch = pytest.importorskip("torch")
    triton_testing = pytest.importorskip("triton.testing")
    from envcheck.bench import device, graphs
    from envcheck.bench.timer import HostClock, Timer
    from envcheck.model import BenchDevice
    from envcheck.probes import nvml

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
    monkeypatch.setattr(module, "WINDOW_MS", 20)
    monkeypatch.setattr(module, "SETTLE_MS", 2.0)
    # The same path on the fake's time scale. A compute-bound row (matmul) is sampled sustained on both sides
    # (a GPU's 400 ms settle and 1 s window); every implementation settles before each of five rounds, and a
    # CPU's time never holds within 0.5%, so each settle ran to its 1 s cap: tens of seconds a row.
    from envcheck.bench import sampling, timer

    for where in (timer, sampling):
        monkeypatch.setattr(where, "SUSTAIN_SETTLE_MS", 4.0, raising=False)
        monkeypatch.setattr(where, "SUSTAIN_WINDOW_MS", 20.0, raising=False)
    monkeypatch.setattr(timer, "SETTLE_MAX_MS", 50.0, raising=False)
    monkeypatch.setattr(device, "Runtime", CpuAsGpu)
    monkeypatch.setattr(device, "cuda_device",
                        lambda torch, index, nvml: BenchDevice("cuda", "Fake GPU", 0,
                                                               l2_bytes=l2["bytes"] if l2 else None))
    monkeypatch.setattr(graphs, "capture_graph", lambda fn, calls: Graph(fn, calls))
    monkeypatch.setattr(graphs, "MAX_GRAPH_CALLS", 20)
    monkeypatch.setattr(Timer, "clock_factory", staticmethod(lambda backend: HostClock()))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(nvml, "Nvml", NoNvml)
    monkeypatch.setattr(triton_testing, "do_bench_cudagraph", do_bench_cudagraph)
