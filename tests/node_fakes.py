"""Fakes for the node and fleet code, fed with the real 2 x H200 capture (tests/fixtures/node/).

- :func:`nvml_table` turns the capture's NVML answers (per GPU, per NVLink, per pair) into a
  ``FakeNvml`` table, on top of the H200 x2 table the GPU probes already use. Nothing is invented:
  a query the capture did not make is absent, and the fake answers it Function Not Found.
- :class:`MemoryTransport`: the fleet's key hand-over in one process (a rank per thread).
- :class:`ScriptedLauncher`: a launcher seam that records what it was asked to start and plays a
  function instead of a process (a Python child's job is its target alone).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fake_nvml import FakeNvml, load_table

from envcheck.harness.failures import Crash, Outcome, Stopped, Timeout
from envcheck.model import Bench, BenchDevice, CeilingRun, Timing
from envcheck.model.node import Launch

NODE = Path(__file__).parent / "fixtures" / "node"

# Field ids (nvml.h) of the fields the capture read by name
FIELD_IDS = {"NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON": 90, "NVML_FI_DEV_NVLINK_LINK_COUNT": 91,
             "NVML_FI_DEV_PCIE_REPLAY_COUNTER": 94, "NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER": 95,
             "NVML_FI_DEV_NVLINK_GET_SPEED": 164}
COUNTERS = ("DL_REPLAY", "DL_RECOVERY", "DL_CRC_FLIT", "DL_CRC_DATA", "DL_ECC_DATA")
PER_GPU = ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo", "nvmlDeviceGetCurrPcieLinkGeneration",
           "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth",
           "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetRemappedRows")


def capture() -> dict[str, Any]:
    return json.loads((NODE / "capture_x2.json").read_text(encoding="utf-8"))


def text(name: str) -> str:
    return (NODE / name).read_text(encoding="utf-8")


def _entry(e: dict[str, Any]) -> dict[str, Any]:
    """A capture entry as the fake's: a missing pynvml binding is what the seam calls MissingBinding."""
    if e.get("error") == "AttributeError":
        name = str(e.get("text", "")).rsplit("'", 2)[-2] if "'" in str(e.get("text", "")) else "?"
        return {"error": "MissingBinding", "text": f"pynvml has no {name}; pip install -U nvidia-ml-py"}
    return e


def nvml_table() -> dict[str, Any]:
    cap = capture()["nvml"]
    table = load_table("h200_x2")
    table["count"] = cap["count"]
    for g in cap["gpus"]:
        t = table["gpus"][g["index"]]
        for name in PER_GPU:
            if name in g:
                t[name] = _entry(g[name])
        for lk in g["nvlinks"]:
            i = lk["link"]
            t[f"nvmlDeviceGetNvLinkState[{i}]"] = _entry(lk["state"])
            for key, name in (("version", "nvmlDeviceGetNvLinkVersion"),
                              ("remote_type", "nvmlDeviceGetNvLinkRemoteDeviceType"),
                              ("remote_pci", "nvmlDeviceGetNvLinkRemotePciInfo_v2")):
                if key in lk:
                    t[f"{name}[{i}]"] = _entry(lk[key])
            for c, cname in enumerate(COUNTERS):
                if f"error[{cname}]" in lk:
                    t[f"nvmlDeviceGetNvLinkErrorCounter[{i},{c}]"] = _entry(lk[f"error[{cname}]"])
        for fname, f in g["fields"].items():
            fid = FIELD_IDS.get(fname)
            if fid is None or "nvmlReturn" not in f:
                continue
            # The capture asked without a scope, i.e. scope 0 (link 0 for per-link fields).
            t[f"nvmlDeviceGetFieldValues[[({fid}, 0)]]"] = {"value": [
                {"fieldId": fid, "scopeId": 0, "valueType": f["valueType"], "nvmlReturn": f["nvmlReturn"],
                 "value": f["value"]}]}
    for p in cap["pairs"]:
        for a, b in ((p["a"], p["b"]), (p["b"], p["a"])):
            t = table["gpus"][a]
            t[f"nvmlDeviceGetTopologyCommonAncestor[TableHandle({b})]"] = p["common_ancestor"]
            for idx, cname in enumerate(("READ", "WRITE", "NVLINK", "ATOMICS")):
                t[f"nvmlDeviceGetP2PStatus[TableHandle({b}),{idx}]"] = p[f"p2p[{cname}]"]
    return table


def fake_nvml() -> FakeNvml:
    return FakeNvml(nvml_table())


class MemoryTransport:
    """The fleet's hand-over in one process: ranks are threads sharing one dict."""

    def __init__(self, shared: dict[str, str], cond: threading.Condition, rank: int, world_size: int) -> None:
        self.shared = shared
        self.cond = cond
        self.rank = rank
        self.world_size = world_size

    @classmethod
    def fleet(cls, world_size: int) -> list[MemoryTransport]:
        shared: dict[str, str] = {}
        cond = threading.Condition()
        return [cls(shared, cond, r, world_size) for r in range(world_size)]

    def put(self, key: str, value: str) -> None:
        with self.cond:
            self.shared[key] = value
            self.cond.notify_all()

    def get(self, key: str, timeout_s: float) -> str | None:
        with self.cond:
            self.cond.wait_for(lambda: key in self.shared, timeout=timeout_s)
            return self.shared.get(key)

    def close(self) -> None:
        pass


class ScriptedLauncher:
    """Records each job and runs ``play(argv, env)`` instead of starting it; ``play`` returns the exit
    status (a Python child's: the events it sends, then returns), or raises TimeoutError (a job killed at
    its time limit) or KeyboardInterrupt (Ctrl-C)."""

    def __init__(self, play: Callable[[Sequence[str], Mapping[str, str]], int] | None = None) -> None:
        self.play = play or (lambda argv, env: 0)
        self.jobs: list[tuple[tuple[str, ...], dict[str, str]]] = []

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: float, *, log_path: str | None = None,
            orphans: Callable[[], Iterable[int]] | None = None, finished: Callable[[], bool] | None = None
            ) -> Launch:
        self.jobs.append((tuple(argv), dict(env)))
        try:
            rc = self.play(argv, env)
        except TimeoutError:
            return Launch(tuple(argv), None, timeout, timeout, timed_out=True)
        except KeyboardInterrupt:
            return Launch(tuple(argv), None, timeout, 0.01, interrupted=True)
        return Launch(tuple(argv), rc, timeout, 0.01)

    def spawn(self, target: str, args: Any, env: Mapping[str, str], timeout: float,
              on_event: Callable[[Any], None]) -> Outcome:
        self.jobs.append(((target,), dict(env)))
        try:
            got = self.play((target,), env)
        except TimeoutError:
            return Outcome(failure=Timeout(timeout), returncode=-15, wall_s=timeout)
        except KeyboardInterrupt:
            return Outcome(failure=Stopped("SIGINT"), returncode=-15, wall_s=0.01)
        if isinstance(got, int):
            return Outcome(failure=Crash(got), returncode=got, wall_s=0.01)
        for ev in got:
            on_event(ev)
        return Outcome(done=True, returncode=0, wall_s=0.01)


def bench_with_bandwidth(gpu: int, gbps: float) -> Bench:
    """A GPU's bench whose measured bandwidth ceiling is ``gbps``: one copy kernel run (1 GiB read
    and written) timed at what that bandwidth takes."""
    n = 1 << 28
    us = 2 * n * 4 / (gbps * 1e9) * 1e6
    return Bench(BenchDevice("cuda", "NVIDIA H200", gpu),
                 ceiling_runs=(CeilingRun("copy", "fp32", (n,), Timing.from_samples("cuda_graph", [us] * 5)),))
