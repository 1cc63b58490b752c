"""What CUPTI tracing costs the caller in server mode: host_us with each attribution of
``harness.timing.kernel_clock`` (``correlation``: API records and external ids; ``window``: kernel
records and a timestamp per call) and with no CUPTI (CUDA events), interleaved sessions, torch.matmul.

    python3 -m lab.throughput.cupti_overhead
"""

import statistics

import torch

from harness.tensors import InputSet
from harness.timing.kernel_clock import KernelClock, KernelClockUnavailable
from harness.timing.offline import Entry
from harness.timing.server import measure_server


def _none():
    raise KernelClockUnavailable("off for this comparison")


def main() -> None:
    entries = []
    for m, n, k in ((64, 64, 64), (256, 128, 16384), (4096, 4096, 4096)):
        a = torch.rand(m, k, device="cuda", dtype=torch.half)
        b = torch.rand(k, n, device="cuda", dtype=torch.half)
        c = torch.empty(m, n, device="cuda", dtype=torch.half)
        entries.append(Entry(f"{m}_{n}_{k}", lambda a, b, c: torch.matmul(a, b, out=c), [InputSet(a, b, c)]))
    clocks = {"events": _none, "correlation": lambda: KernelClock.open("correlation"),
              "window": lambda: KernelClock.open("window")}
    host = {(mode, e.key): [] for mode in clocks for e in entries}
    dev = {(mode, e.key): [] for mode in clocks for e in entries}
    for rep in range(3):
        for mode, opener in clocks.items():
            res = measure_server(entries, "cuda", 200.0, 60, seed=rep, open_clock=opener)
            for e in entries:
                host[(mode, e.key)] += res[e.key].host_us
                dev[(mode, e.key)] += res[e.key].device_us
                if rep == 0:
                    print(mode, e.key, res[e.key].timing_method, res[e.key].timing_note or "")
    print(f"{'shape':>16} {'mode':>12} {'host_us median':>15} {'p90':>8} {'device_us median':>17}")
    for e in entries:
        for mode in clocks:
            h = sorted(host[(mode, e.key)])
            print(f"{e.key:>16} {mode:>12} {statistics.median(h):15.1f} {h[int(0.9 * len(h))]:8.1f} "
                  f"{statistics.median(dev[(mode, e.key)]):17.2f}")


if __name__ == "__main__":
    main()
