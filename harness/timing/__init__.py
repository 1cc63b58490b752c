"""The timing core: every number hgemm-bench reports is produced here and nowhere else.

* ``samplers``: one device-time sample of a batch of calls (graph replay, spin + events,
  L2 flush + events, host clock on CPU) and one host-time sample of a synchronous call.
* ``offline``: interleaved rounds until the medians' CIs are tight or the budget ends.
* ``server``: Poisson arrivals at a target QPS with the GPU idle between calls.
* ``kernel_clock``: the GPU's own timestamps on each server call (CUPTI activity records).
* ``stats``: median CIs, quantiles, paired speedups with bootstrap CIs.
* ``clocks``: NVML clock, power and throttle sampling per round.
"""

from harness.timing.offline import Entry, Measurement, OfflineSettings, measure_offline, time_candidates
from harness.timing.server import measure_server

__all__ = ["Entry", "Measurement", "OfflineSettings", "measure_offline", "measure_server", "time_candidates"]
