"""The NVML clock sampler: decodes reasons, samples in a thread, and turns a missing NVML into a note."""

import sys
import time

import pytest

from core.hardware import clocks
from core.hardware.clocks import ClockReading, ClockSampler, decode_reasons


def test_decode_reasons_by_hand():
    assert decode_reasons(0) == []
    assert decode_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_reasons(0x1) == ["gpu_idle"]


def test_missing_package_is_a_note(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml → ImportError
    with ClockSampler() as s:
        pass
    assert s.samples == [] and "nvidia-ml-py" in s.note


def test_missing_driver_is_a_note(monkeypatch):
    def broken():
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(clocks, "_load_nvml", broken)
    with ClockSampler() as s:
        pass
    assert s.samples == [] and "NVML unavailable" in s.note and "Library Not Found" in s.note


class FakeNVML:
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self):
        self.calls = 0

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        raise RuntimeError("no such bus")

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("handle", index)

    def nvmlDeviceGetClockInfo(self, h, kind):
        self.calls += 1
        return 1980 if kind == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetPowerUsage(self, h):
        return 650_000  # mW

    def nvmlDeviceGetTemperature(self, h, kind):
        return 61

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return 0x4

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000  # mW

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980

    def nvmlShutdown(self):
        pass


def test_samples_in_the_background_and_summarises_a_window(monkeypatch):
    fake = FakeNVML()
    monkeypatch.setattr(clocks, "_load_nvml", lambda: fake)
    t0 = time.perf_counter()
    with ClockSampler(pci_bus_id="00000000:01:00.0", index=0, interval_s=0.01) as s:
        deadline = time.monotonic() + 30  # five samples, however loaded the machine is
        while len(s.samples) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
    t1 = time.perf_counter()
    assert s.note is None and len(s.samples) >= 5
    first = s.samples[0]
    assert (first["sm_clock_mhz"], first["mem_clock_mhz"], first["power_w"], first["temp_c"]) == (1980, 2619, 650, 61)
    assert first["reasons"] == ["sw_power_cap"]
    assert s.limits == {"power_limit_w": 700.0, "max_sm_clock_mhz": 1980.0}  # read once, for the whole run
    window = s.window(t0, t1)
    assert window["sm_clock_mhz"] == pytest.approx(1980) and window["throttled"] is True
    assert s.window(t1 + 10, t1 + 20) == {}
    n = len(s.samples)
    time.sleep(0.05)
    assert len(s.samples) == n  # the thread stopped with the block


class NVMLError_FunctionNotFound(Exception):  # noqa: N801 - the name nvidia-ml-py raises
    pass


class OldDriverNVML(FakeNVML):
    """An older driver: nvidia-ml-py defines the new name, the driver lacks the symbol; no power reading."""

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        raise NVMLError_FunctionNotFound("Function Not Found")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return 0x40

    def nvmlDeviceGetPowerUsage(self, h):
        raise NVMLError_FunctionNotFound("Not Supported")

    nvmlDeviceGetEnforcedPowerLimit = nvmlDeviceGetPowerUsage


def test_an_older_driver_loses_one_counter_not_the_clocks(monkeypatch):
    fake = OldDriverNVML()
    monkeypatch.setattr(clocks, "_load_nvml", lambda: fake)
    t0 = time.perf_counter()
    with ClockSampler(interval_s=0.01) as s:
        deadline = time.monotonic() + 30  # three samples, however loaded the machine is
        while len(s.samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(s.samples) >= 3
    assert {x["sm_clock_mhz"] for x in s.samples} == {1980.0}
    assert all(x["reasons"] == ["hw_thermal_slowdown"] for x in s.samples)  # from the older throttle call
    assert all(x["power_w"] is None for x in s.samples)  # not 0, not invented
    assert "power_w" in s.note and "Not Supported" in s.note
    assert s.limits == {"power_limit_w": None, "max_sm_clock_mhz": 1980.0}  # not said, never guessed
    window = s.window(t0, time.perf_counter())
    assert window["power_w"] is None and window["sm_clock_mhz"] == 1980.0 and window["throttled"] is True


def test_a_driver_that_answers_nothing_is_a_note(monkeypatch):
    class Silent(FakeNVML):
        def nvmlDeviceGetClockInfo(self, h, kind):
            raise NVMLError_FunctionNotFound("gone")

        nvmlDeviceGetPowerUsage = nvmlDeviceGetTemperature = nvmlDeviceGetCurrentClocksEventReasons = (
            nvmlDeviceGetCurrentClocksThrottleReasons
        ) = nvmlDeviceGetClockInfo

    monkeypatch.setattr(clocks, "_load_nvml", lambda: Silent())
    with ClockSampler(interval_s=0.01) as s:
        time.sleep(0.03)
    assert s.samples == [] and "answered no counter" in s.note


def test_a_power_cap_is_normal_and_the_faults_are_named_in_words():
    """The shipped H200's soak: 1455 MHz at 693 W, NVML sw_power_cap — power-limited, no fault."""
    capped = ClockReading(1455.0, 693.0, 700.0, 1980.0, ("sw_power_cap",))
    assert capped.state == "power-limited" and capped.faults() == []
    assert capped.text() == "SM 1455 MHz, 693 W of 700 W, NVML: sw_power_cap"
    braked = ClockReading(990.0, 400.0, 700.0, 1980.0, ("hw_power_brake_slowdown", "hw_slowdown"))
    assert braked.state == "fault"
    assert braked.faults() == [
        "power brake (hardware) (NVML hw_power_brake_slowdown)",
        "hardware slowdown (NVML hw_slowdown)",
    ]
    # 1,200 MHz < 0.8 × 1,980 = 1,584 and 300 W < 0.8 × 700 = 560 W, no power cap said: a clock held low
    low = ClockReading(1200.0, 300.0, 700.0, 1980.0, ())
    assert low.faults() == ["clock far below boost at low power (1200 of 1980 MHz at 300 of 700 W)"]
    assert ClockReading(1200.0, 600.0, 700.0, 1980.0, ()).state == "full clock"  # 600 W ≥ 560 W: not "low power"
    assert ClockReading(1600.0, 300.0, 700.0, 1980.0, ()).state == "full clock"  # 1,600 ≥ 1,584 MHz
    unknown = ClockReading(1200.0, 300.0, None, 1980.0, ())  # no limit recorded: the rule cannot say "low power"
    assert (
        unknown.faults() == []
        and unknown.text() == "SM 1200 MHz, 300 W (power limit not recorded), NVML: no slowdown reason"
    )
    assert ClockReading().state == "not sampled"
