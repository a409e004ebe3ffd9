"""The NVML monitor that runs beside each group of benchmark cases: its raw window of samples."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from fake_nvml import FakeNvml

from envcheck.bench import monitor as monitor_module
from envcheck.bench.monitor import Monitor, reason_names
from envcheck.probes import nvml as n

SM = "nvmlDeviceGetClockInfo"
EVENTS = "nvmlDeviceGetCurrentClocksEventReasons"
THROTTLE = "nvmlDeviceGetCurrentClocksThrottleReasons"


def monitor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("envcheck-monitor")]


class StepSleep:
    """A sleep that lets the sampler run ``steps`` times, then reports it is done."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.waits: list[float] = []
        self.done = threading.Event()

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if len(self.waits) > self.steps:
            self.done.set()
        time.sleep(0.001)


def changing_h200() -> FakeNvml:
    """The real H200 table, with clocks, power and reasons that move from sample to sample."""
    fake = FakeNvml.fixture("h200")
    fake.set(0, f"{SM}[SM]", {"values": [1980, 1755, 1830, 1980]})
    fake.set(0, f"{SM}[MEM]", {"values": [3201]})
    fake.set(0, "nvmlDeviceGetTemperature[GPU]", {"values": [36, 61, 83, 70]})
    fake.set(0, "nvmlDeviceGetPowerUsage", {"values": [125896, 688000, 699512, 410000]})
    # open() reads once to pick the query; then idle, power cap, power cap + thermal, sync boost, idle
    fake.set(0, EVENTS, {"values": [0x1, 0x1, 0x4, 0x24, 0x10, 0x1]})
    return fake


def test_the_window_keeps_every_sample_raw_with_its_slowing_reasons():
    fake = changing_h200()
    fake.init()
    sleep = StepSleep(steps=6)
    with Monitor(fake, 0, interval_s=0.001, sleep=sleep) as m:
        assert sleep.done.wait(5)
    w = m.window()
    n = len(w.t_s)
    assert n >= 6 and w.interval_s == 0.001
    assert list(w.t_s) == sorted(w.t_s) and w.t_s[0] >= 0
    assert list(w.sm_mhz)[:4] == [1980, 1755, 1830, 1980]
    assert set(w.mem_mhz) == {3201}
    assert list(w.temperature_c)[:4] == [36, 61, 83, 70]
    assert list(w.power_w)[:3] == pytest.approx([125.896, 688.0, 699.512])
    # gpu_idle and sync_boost were seen too, but they do not slow the GPU: not recorded
    assert w.reasons[:5] == ((), ("sw_power_cap",), ("sw_power_cap", "sw_thermal_slowdown"), (), ())
    assert len(w.reasons) == n


def test_an_idle_gpu_has_no_slowing_reasons():
    fake = FakeNvml.fixture("h200")  # real capture: reasons = gpu_idle
    with Monitor(fake, 0, interval_s=0.001, sleep=StepSleep(2)) as m:
        time.sleep(0.01)
    w = m.window()
    assert len(w.t_s) >= 2 and set(w.reasons) == {()}


def test_a_very_short_window_still_gets_samples_and_exit_is_immediate():
    fake = FakeNvml.fixture("h200_throttled")
    t0 = time.perf_counter()
    with Monitor(fake, 0, interval_s=30.0) as m:
        pass
    assert time.perf_counter() - t0 < 2.0  # the stop event cut the 30 s wait short
    w = m.window()
    assert len(w.t_s) == 2  # one on enter, one on exit
    assert w.reasons == (("sw_power_cap", "sw_thermal_slowdown"),) * 2
    assert not monitor_threads()


def test_one_nvml_call_per_quantity_per_sample():
    fake = changing_h200()
    with Monitor(fake, 0, interval_s=0.001, sleep=StepSleep(4)) as m:
        time.sleep(0.05)
    samples = len(m.window().t_s)
    counts = Counter(c[0] for c in fake.calls)
    assert counts[SM] == 2 * samples  # SM and memory clocks
    assert counts["nvmlDeviceGetTemperature"] == samples
    assert counts["nvmlDeviceGetPowerUsage"] == samples
    assert counts[EVENTS] == samples + 1  # plus the one that chose the query
    assert counts[THROTTLE] == 0


def test_older_driver_uses_throttle_reasons():
    fake = FakeNvml.fixture("a100_r525")
    fake.set(0, THROTTLE, {"values": [0x1, 0x8]})
    with Monitor(fake, 0, interval_s=30.0) as m:
        pass
    assert m.window().reasons == (("hw_slowdown",),) * 2  # the first value went to choosing the query
    assert Counter(c[0] for c in fake.calls)[EVENTS] == 1  # tried once, never again


def test_unsupported_quantity_is_dropped_and_the_rest_still_sampled():
    fake = FakeNvml.fixture("h200")
    fake.set(0, "nvmlDeviceGetPowerUsage", {"error": "NVMLError_NotSupported", "text": "Not Supported"})
    with Monitor(fake, 0, interval_s=0.001, sleep=StepSleep(3)) as m:
        time.sleep(0.03)
    w = m.window()
    assert w.power_w is None
    assert set(w.sm_mhz) == {1980} and len(w.t_s) >= 2
    assert Counter(c[0] for c in fake.calls)["nvmlDeviceGetPowerUsage"] == 1


def test_a_quantity_failing_every_time_is_left_out_and_the_samples_kept():
    fake = FakeNvml.fixture("h200")
    fake.set(0, "nvmlDeviceGetTemperature[GPU]", {"error": "NVMLError_Timeout", "text": "Timeout"})
    with Monitor(fake, 0, interval_s=30.0) as m:
        pass
    w = m.window()
    assert w.temperature_c is None and len(w.t_s) == 2
    assert Counter(c[0] for c in fake.calls)["nvmlDeviceGetTemperature"] == 2  # asked again on exit


def test_a_sample_missing_a_quantity_once_is_left_out_to_keep_the_window_aligned():
    fake = FakeNvml.fixture("h200")
    fake.set(0, "nvmlDeviceGetPowerUsage", {"values": [125896, None, 130000, 131000]})  # None: no answer that once
    fake.init()
    with Monitor(fake, 0, interval_s=0.001, sleep=StepSleep(4)) as m:
        time.sleep(0.03)
    w = m.window()
    assert w.power_w is not None and len(w.power_w) == len(w.t_s) == len(w.sm_mhz)
    assert list(w.power_w)[:2] == pytest.approx([125.896, 130.0])  # the sample without an answer left out
    assert len(w.t_s) == Counter(c[0] for c in fake.calls)["nvmlDeviceGetPowerUsage"] - 1


def test_gpu_lost_mid_window_keeps_earlier_samples():
    fake = FakeNvml.fixture("h200")
    with Monitor(fake, 0, interval_s=30.0) as m:
        fake.lose_gpu(0)
    w = m.window()
    assert len(w.t_s) == 1 and list(w.sm_mhz) == [1980]


@pytest.mark.parametrize("nvml", [
    None,
    FakeNvml.fixture("h200", init_error="NVMLError_DriverNotLoaded"),
    FakeNvml.fixture("h200", init_error="NVMLError_LibRmVersionMismatch"),
])
def test_without_nvml_there_is_no_window_and_no_errors(nvml):
    with Monitor(nvml, 0) as m:
        pass
    assert m.window() is None
    assert not monitor_threads()


def test_missing_gpu_index():
    with Monitor(FakeNvml.fixture("h200"), 3) as m:
        pass
    assert m.window() is None


def test_fixed_rate_schedule_absorbs_nvml_latency():
    """Each wait is the interval minus what the NVML calls took, so samples do not drift."""
    now = [1000.0]

    class SlowNvml(FakeNvml):
        def call(self, name: str, *args: Any) -> Any:
            now[0] += 0.001  # every NVML call costs 1 ms of (fake) time
            return super().call(name, *args)

    waits: list[float] = []
    stop_after = threading.Event()

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds
        if len(waits) >= 5:
            stop_after.set()
            time.sleep(0.001)

    fake = SlowNvml(FakeNvml.fixture("h200").table)
    with Monitor(fake, 0, interval_s=0.02, clock=lambda: now[0], sleep=sleep):
        assert stop_after.wait(5)
    # 5 calls per sample at 1 ms each: 15 ms left of each 20 ms interval
    assert waits[1:4] == pytest.approx([0.015] * 3)


def test_reason_names_is_shared_with_the_probe():
    assert reason_names is n.reason_names
    assert "reason_names" in monitor_module.__all__


def test_interval_must_be_positive():
    with pytest.raises(ValueError, match="interval_s"):
        Monitor(None, 0, interval_s=0)


@pytest.mark.parametrize("device", [
    "GPU-c0e1d2f3-a4b5-4c6d-8e7f-90a1b2c3d4e5",  # NVML's UUID
    "c0e1d2f3-a4b5-4c6d-8e7f-90a1b2c3d4e5",  # torch's props.uuid
    "00000000:00:07.0",  # NVML's bus id
    "0000:00:07.0",  # the short form (lspci, sysfs)
])
def test_gpu_chosen_by_uuid_or_bus_id(device):
    fake = FakeNvml.fixture("h200_x2")
    fake.set(1, f"{SM}[SM]", {"value": 1590})  # tell the two GPUs apart
    with Monitor(fake, device, interval_s=30.0) as m:
        pass
    assert set(m.window().sm_mhz) == {1590}


def test_unknown_uuid_means_no_samples():
    with Monitor(FakeNvml.fixture("h200_x2"), "GPU-00000000-0000-0000-0000-000000000000") as m:
        pass
    assert m.window() is None


def test_one_window_across_repeated_blocks_with_times_from_the_first_start():
    fake = FakeNvml.fixture("h200")  # real capture: SM 1980 MHz, memory 3201 MHz, 125.896 W
    now = [10.0]
    m = Monitor(fake, 0, interval_s=30.0, clock=lambda: now[0])
    assert m.window() is None
    for _ in range(2):
        with m:
            now[0] += 1.0
    w = m.window()
    assert list(w.t_s) == [0.0, 1.0, 1.0, 2.0]  # enter and exit of each block
    assert list(w.power_w) == pytest.approx([125.896] * 4)


def test_window_state_is_the_mean_clock_and_power_or_says_it_has_none() -> None:
    from envcheck.bench.monitor import window_state
    from envcheck.model import MonitorWindow, Samples

    t = Samples([0.0, 0.01, 0.02])
    both = MonitorWindow(0.01, t, sm_mhz=Samples([1800.0, 1900.0, 1850.0]), power_w=Samples([500.0, 600.0, 700.0]))
    assert window_state(both) == "1850 MHz 600 W"
    assert window_state(MonitorWindow(0.01, t, sm_mhz=Samples([1980.0, 1980.0, 1977.0]))) == "1979 MHz"
    assert window_state(MonitorWindow(0.01, t, power_w=Samples([500.0, 600.0, 700.0]))) == "n/a"
    assert window_state(None) == "n/a"
