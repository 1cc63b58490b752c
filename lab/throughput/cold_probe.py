"""Where offline ``--cache cold``'s time goes on shapes that flush instead of rotating input sets.

Offline cold times one call between CUDA events queued right behind the L2 flush (``FlushSampler``);
server mode flushes, synchronizes and times the call's kernels by CUPTI. On an H100, 64^3 measured
4.9 us the first way and 2.4 us the second (warm, graph-timed: 2.1 us). This probe splits the gap,
each variant on the same calls (torch.matmul into a preallocated C, i.e. cuBLAS), medians of N:

* ``warm graph``: the harness's warm sampler (a captured batch of about 1 ms);
* ``warm events x1``: spin, events around one call, no flush (the events' own cost on one call);
* ``cold offline``: ``FlushSampler`` as compare uses it (flush, spin, events around one call);
* ``cold sync+events``: flush, synchronize, spin, events around one call;
* ``cold cupti``: flush, then the call, CUPTI's record of the call's kernels (no sync between);
* ``cold sync+cupti``: flush, synchronize, the call, CUPTI (server mode's way, without the idle wait).

    python -m lab.throughput.cold_probe [--shapes 64_64_64,256_256_256] [-n 60] [--out FILE.csv]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys


def main(argv=None) -> int:
    import torch

    from harness.problem import Problem
    from harness.shapes import parse_shapes
    from harness.tensors import InputSet, timing_sets
    from harness.timing.kernel_clock import KernelClock, KernelClockUnavailable
    from harness.timing.samplers import FlushSampler, GraphSampler, SpinEventsSampler, estimate_call_us

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="64_64_64,128_128_128,256_256_256,128_64_4096")
    p.add_argument("-n", type=int, default=60)
    p.add_argument("--out", default="")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("cold_probe: needs a CUDA device", file=sys.stderr)
        return 2
    flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size  # what compare flushes (harness.evaluate)
    rows = []

    def mm(x, y, c):
        torch.matmul(x, y, out=c)

    for shape in parse_shapes(a.shapes):
        prob = Problem(shape, "nn")
        (s,) = timing_sets(prob, "cuda", 1, seed=0)
        sets = [InputSet(s.a, s.b, s.c)]
        est = estimate_call_us(mm, sets[0], "cuda")
        res: dict[str, list[float]] = {}
        g = GraphSampler(mm, sets, max(1, round(1000 / max(est, 0.5))), warmed=True)
        res["warm graph"] = [g.sample() for _ in range(max(10, a.n // 4))]
        g.close()
        ev = SpinEventsSampler(mm, sets, 1)
        res["warm events x1"] = [ev.sample() for _ in range(a.n)]
        fs = FlushSampler(mm, sets, flush)
        res["cold offline"] = [fs.sample() for _ in range(a.n)]
        scratch = fs.scratch

        def sync_events() -> float:
            scratch.zero_()
            torch.cuda.synchronize()
            return ev.sample()

        res["cold sync+events"] = [sync_events() for _ in range(a.n)]
        for name, sync in (("cold cupti", False), ("cold sync+cupti", True)):
            try:
                clock = KernelClock.open()
            except KernelClockUnavailable as ex:
                print(f"{shape.name}: {name}: {ex}", file=sys.stderr)
                continue
            torch.cuda.synchronize()
            for i in range(a.n):
                clock.begin(-(i + 1))
                scratch.zero_()
                clock.end()
                if sync:
                    torch.cuda.synchronize()
                clock.begin(i)
                mm(s.a, s.b, s.c)
                clock.end()
                torch.cuda.synchronize()
            spans = clock.close()
            res[name] = [spans[i].device_us for i in range(a.n) if i in spans]
        for name, xs in res.items():
            rows.append({"shape": shape.name, "variant": name, "n": len(xs),
                         "median_us": round(statistics.median(xs), 3) if xs else float("nan"),
                         "p10_us": round(sorted(xs)[len(xs) // 10], 3) if xs else float("nan")})
    print(f"{'shape':<16}{'variant':<20}{'n':>4}{'median us':>11}{'p10 us':>9}")
    for r in rows:
        print(f"{r['shape']:<16}{r['variant']:<20}{r['n']:>4}{r['median_us']:>11}{r['p10_us']:>9}")
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
