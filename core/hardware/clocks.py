"""GPU clocks, power, temperature and throttle reasons, sampled by NVML in a background thread.

A matmul number is only meaningful with the clock it ran at: a throttled GPU shows a lower TFLOPS
and, here, a lower SM clock and a throttle reason at the same moment. NVML comes from the optional
``nvidia-ml-py`` package (imported as ``pynvml``); where it or the driver is missing the sampler
records a note and no samples — never an error.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

# NVML "clocks event reasons" (formerly "throttle reasons") bit masks, as in nvml.h.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean "running slower than it could" (idle and sync boost are not slowdowns under load).
SLOWDOWNS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)


COUNTERS = ("sm_clock_mhz", "mem_clock_mhz", "power_w", "temp_c", "reasons")
LIMITS = ("power_limit_w", "max_sm_clock_mhz")  # read once: they hold for the whole run

# A slowdown in words, and which ones are faults. NVML's reference (nvmlClocksEventReasons): sw_power_cap "the
# clocks have been optimized to ensure not to exceed currently set power limits" — a card doing what its limit
# asks, normal under a full matmul; hw_slowdown, hw_thermal_slowdown and hw_power_brake_slowdown reduce "the core
# clocks by a factor of 2 or more" (too hot, an external power brake, power draw too high); sw_thermal_slowdown
# is the driver cooling a hot card. Those four are faults of the card or its cooling and power, never normal.
NVML_REASONS = "NVML API reference, nvmlClocksEventReasons (docs.nvidia.com/deploy/nvml-api)"
REASON_WORDS = {
    "sw_power_cap": "software power cap",
    "hw_slowdown": "hardware slowdown",
    "sw_thermal_slowdown": "thermal slowdown (software)",
    "hw_thermal_slowdown": "thermal slowdown (hardware)",
    "hw_power_brake_slowdown": "power brake (hardware)",
}
FAULTS = SLOWDOWNS - {"sw_power_cap"}
# A clock far below the card's boost while it draws far below its limit is no power cap: the shipped H200
# (examples/nvidia-h200-2026-11-26.json) held its 1,980 MHz maximum below the cap (2048³ bf16 at 594 W) and went
# down to 1,302 MHz (66 %) only at 688–701 W of its 700 W limit. Under 80 % of each is a fault.
LOW_CLOCK_FRACTION = 0.80
LOW_POWER_FRACTION = 0.80


@dataclass(frozen=True)
class ClockReading:
    """What NVML said while one throughput figure was measured: the SM clock, the power drawn, the card's power
    limit and boost ceiling, and the slowdown reasons (None: not sampled; a reason list may be empty)."""

    sm_clock_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    max_sm_clock_mhz: float | None = None
    reasons: tuple[str, ...] | None = None

    @property
    def sampled(self) -> bool:
        return self.sm_clock_mhz is not None or self.reasons is not None

    def faults(self) -> list[str]:
        """The faults named in words: the NVML reasons that are faults, else a clock far below boost at low
        power that no reason explains (with the numbers that show it)."""
        named = [f"{REASON_WORDS[r]} (NVML {r})" for r in sorted(FAULTS & set(self.reasons or ()))]
        clock, ceiling, power, limit = self.sm_clock_mhz, self.max_sm_clock_mhz, self.power_w, self.power_limit_w
        explained = named or "sw_power_cap" in (self.reasons or ())  # NVML said why the clock is down
        if clock and ceiling and power is not None and limit and not explained:
            if clock < LOW_CLOCK_FRACTION * ceiling and power < LOW_POWER_FRACTION * limit:
                named.append(
                    f"clock far below boost at low power ({clock:.0f} of {ceiling:.0f} MHz at {power:.0f} of "
                    f"{limit:.0f} W)"
                )
        return named

    @property
    def state(self) -> str:
        """fault | power-limited (the software power cap: normal) | full clock | not sampled."""
        if not self.sampled:
            return "not sampled"
        if self.faults():
            return "fault"
        return "power-limited" if "sw_power_cap" in (self.reasons or ()) else "full clock"

    def text(self) -> str:
        """ "SM 1455 MHz, 693 W of 700 W, NVML: sw_power_cap" — what was read, and what was not."""
        said = [f"SM {self.sm_clock_mhz:.0f} MHz" if self.sm_clock_mhz is not None else "SM clock not sampled"]
        if self.power_w is not None:
            limit = f" of {self.power_limit_w:.0f} W" if self.power_limit_w else " (power limit not recorded)"
            said.append(f"{self.power_w:.0f} W{limit}")
        if self.reasons is not None:
            said.append("NVML: " + (", ".join(self.reasons) if self.reasons else "no slowdown reason"))
        return ", ".join(said)

    def to_dict(self) -> dict:
        return {
            "sm_clock_mhz": self.sm_clock_mhz,
            "power_w": self.power_w,
            "power_limit_w": self.power_limit_w,
            "max_sm_clock_mhz": self.max_sm_clock_mhz,
            "reasons": list(self.reasons) if self.reasons is not None else None,
            "state": self.state,
            "faults": self.faults(),
            "text": self.text(),
        }


def decode_reasons(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def _load_nvml():
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


@dataclass
class ClockSampler:
    """``with ClockSampler(pci_bus_id, index) as s:`` fills ``s.samples`` every ``interval_s``.

    Sample times ``t_s`` are ``time.perf_counter()`` values, so callers can line them up with their
    own timestamps. ``note`` says why there are no samples, if there are none.
    """

    pci_bus_id: str | None = None
    index: int = 0
    interval_s: float = 0.05
    samples: list[dict] = field(default_factory=list)
    note: str | None = None
    missing: dict[str, str] = field(default_factory=dict)  # counter → why this driver cannot read it
    limits: dict = field(default_factory=dict)  # LIMITS' values (None where the driver does not say)
    _nvml: Any = None
    _handle: Any = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> ClockSampler:
        try:
            self._nvml = _load_nvml()
            self._handle = self._open_handle()
        except ImportError:
            self.note = "clocks not sampled: nvidia-ml-py (pynvml) is not installed"
            return self
        except Exception as exc:  # noqa: BLE001 - NVMLError subclasses vary by driver
            self.note = f"clocks not sampled: NVML unavailable ({type(exc).__name__}: {exc})"
            return self
        first = self.read()  # a counter this driver lacks is dropped here, the others go on
        if all(first[k] is None for k in COUNTERS):
            self.note = "clocks not sampled: NVML answered no counter (" + "; ".join(self.missing.values()) + ")"
            return self
        self.samples.append(first)
        self.limits = self._limits()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="gpulab-clocks")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
        if self.missing and self.samples and self.note is None:
            self.note = "not sampled on this driver: " + "; ".join(self.missing.values())

    def _open_handle(self):
        nvml = self._nvml
        if self.pci_bus_id:
            try:
                return nvml.nvmlDeviceGetHandleByPciBusId(self.pci_bus_id)
            except Exception:  # noqa: BLE001 - fall back to the index below
                pass
        return nvml.nvmlDeviceGetHandleByIndex(self.index)

    def _limits(self) -> dict:
        """The enforced power limit (W) and the SM clock's maximum (MHz), each None where the driver lacks it."""
        nvml, h = self._nvml, self._handle
        calls = {
            "power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
            "max_sm_clock_mhz": lambda: float(nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)),
        }
        out: dict = {}
        for key, call in calls.items():
            try:
                out[key] = call()
            except Exception:  # noqa: BLE001 - NVMLError_NotSupported and kin: not said, never guessed
                out[key] = None
        return out

    def _reasons(self, h) -> int:
        """Newer drivers: ...ClocksEventReasons; older ones only have ...ClocksThrottleReasons. nvidia-ml-py
        defines both names and raises NVMLError_FunctionNotFound when the driver lacks the symbol."""
        nvml = self._nvml
        try:
            return int(nvml.nvmlDeviceGetCurrentClocksEventReasons(h))
        except Exception:  # noqa: BLE001 - fall back to the older name
            return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))

    def read(self) -> dict:
        """One sample: SM and memory clock (MHz), power (W), temperature (°C), throttle reasons.

        Each counter is read on its own: one this driver does not have is None (and not asked again),
        the others are still sampled.
        """
        nvml, h = self._nvml, self._handle
        calls = {
            "sm_clock_mhz": lambda: float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
            "mem_clock_mhz": lambda: float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM)),
            "power_w": lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "temp_c": lambda: float(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)),
            "reasons": lambda: decode_reasons(self._reasons(h)),
        }
        sample: dict = {"t_s": time.perf_counter()}
        for key, call in calls.items():
            if key in self.missing:
                sample[key] = None
                continue
            try:
                sample[key] = call()
            except Exception as exc:  # noqa: BLE001 - NVMLError_NotSupported / FunctionNotFound / …
                self.missing[key] = f"{key} ({type(exc).__name__}: {exc})"
                sample[key] = None
        return sample

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(self.read())

    def window(self, t0_s: float, t1_s: float) -> dict:
        """Summary of the samples taken between two ``perf_counter`` times (empty dict if none).
        A counter the driver could not read is None in the summary, never a made-up value."""
        inside = [s for s in list(self.samples) if t0_s <= s["t_s"] <= t1_s]
        if not inside:
            return {}

        def values(key: str) -> list[float]:
            return [s[key] for s in inside if s.get(key) is not None]

        sm, power, temp = values("sm_clock_mhz"), values("power_w"), values("temp_c")
        known = [s["reasons"] for s in inside if s.get("reasons") is not None]
        reasons = sorted({r for rs in known for r in rs})
        return {
            "sm_clock_mhz": sum(sm) / len(sm) if sm else None,
            "sm_clock_min_mhz": min(sm) if sm else None,
            "power_w": sum(power) / len(power) if power else None,
            "temp_c": max(temp) if temp else None,
            "throttle_reasons": reasons if known else None,
            "throttled": bool(SLOWDOWNS.intersection(reasons)) if known else None,
        }


def device_sampler(torch_device: str) -> ClockSampler:
    """A sampler for one CUDA device, found in NVML by its PCI bus id (CUDA and NVML may number GPUs
    differently), by index where torch does not report the bus id."""
    import torch

    props = torch.cuda.get_device_properties(torch_device)
    try:
        bus_id = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
    except AttributeError:
        bus_id = None
    return ClockSampler(bus_id, torch.cuda.device(torch_device).idx)
