"""GPU clocks, power and throttle reasons through NVML, sampled once per timing round.

A GEMM's time moves with the SM clock, and the clock moves with power and temperature. So the
timing core samples NVML every round and rows measured while the GPU was throttled for power or
heat are flagged. On a machine without NVML the sampler returns empty samples and nothing is
flagged (CPU results say they are CPU results instead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# NVML clocks-event (throttle) reason bits that mean "slowed by something other than idling".
# Idle (0x1) and application-clock settings (0x2) are not throttling.
_THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in _THROTTLE_BITS.items() if mask & bit]


@dataclass
class ClockSample:
    sm_mhz: float = math.nan
    mem_mhz: float = math.nan
    power_w: float = math.nan
    temp_c: float = math.nan
    throttle_mask: int = 0


@dataclass
class ClockLog:
    """Samples taken during one group of measurements, reduced to result columns."""

    samples: list[ClockSample] = field(default_factory=list)

    def columns(self) -> dict:
        def mean(vals):
            vals = [v for v in vals if not math.isnan(v)]
            return sum(vals) / len(vals) if vals else None

        mask = 0
        for s in self.samples:
            mask |= s.throttle_mask
        names = throttle_names(mask)
        temps = [s.temp_c for s in self.samples if not math.isnan(s.temp_c)]
        return {
            "sm_clock_mhz_mean": mean([s.sm_mhz for s in self.samples]),
            "mem_clock_mhz_mean": mean([s.mem_mhz for s in self.samples]),
            "power_w_mean": mean([s.power_w for s in self.samples]),
            "temp_c_max": max(temps) if temps else None,
            "throttled": bool(names),
            "throttle_reasons": ",".join(names),
        }


class ClockSampler:
    """Reads NVML for torch's CUDA device ``device_index`` (matched by UUID / PCI bus id, see
    ``harness.nvml``); a no-op when NVML or the GPU is absent or cannot be matched."""

    def __init__(self, device_index: int | None):
        self._nvml = None
        self._h = None
        if device_index is None:
            return
        try:
            from harness.nvml import open_device

            self._nvml, _, self._h = open_device(device_index)
        except Exception:
            self._nvml = None
            self._h = None

    @property
    def available(self) -> bool:
        return self._h is not None

    def sample(self) -> ClockSample:
        if self._h is None:
            return ClockSample()
        nv, h = self._nvml, self._h
        s = ClockSample()
        for attr, fn in (
            ("sm_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
            ("mem_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
            ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
            ("temp_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
        ):
            try:
                setattr(s, attr, float(fn()))
            except Exception:
                pass
        try:
            s.throttle_mask = int(nv.nvmlDeviceGetCurrentClocksEventReasons(h))
        except Exception:
            try:
                s.throttle_mask = int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))
            except Exception:
                pass
        return s
