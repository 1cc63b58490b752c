"""Does cupti-python record kernel activity on this machine, and map kernels to calls?

Times torch.matmul (64^3 and 4096^3) one isolated call at a time, Poisson-spaced, with CUDA events
and with CUPTI kernel records (mapped to calls by an external correlation id), and prints both.
"""

from __future__ import annotations

import random
import statistics
import time

import torch
from cupti import cupti

records: list = []


calls = {"requested": 0, "completed": 0}


def requested():
    calls["requested"] += 1
    return 8 << 20, 0


def completed(acts):
    calls["completed"] += 1
    records.extend(acts)


def main() -> None:
    try:
        print("cupti version", cupti.get_version())
    except Exception as e:
        print("get_version failed", e)
    cupti.activity_register_callbacks(requested, completed)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    cupti.activity_enable(cupti.ActivityKind.EXTERNAL_CORRELATION)
    cupti.activity_enable(cupti.ActivityKind.RUNTIME)
    cupti.activity_enable(cupti.ActivityKind.DRIVER)  # cuBLAS launches through the driver API
    rng = random.Random(0)
    kind = cupti.ExternalCorrelationKind.CUSTOM0
    for n in (64, 4096):
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        for _ in range(3):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev = []
        t_push = time.perf_counter()
        windows = []
        for i in range(40):
            time.sleep(rng.expovariate(200))
            t0 = cupti.get_timestamp()
            cupti.activity_push_external_correlation_id(kind, 1000 * n + i)
            s.record()
            torch.matmul(a, b)
            e.record()
            cupti.activity_pop_external_correlation_id(kind)
            e.synchronize()
            windows.append((t0, cupti.get_timestamp()))
            ev.append(s.elapsed_time(e) * 1000)
        t_flush = time.perf_counter()
        cupti.activity_flush_all(1)
        print(f"flush took {(time.perf_counter() - t_flush) * 1e3:.2f} ms for loop of {t_flush - t_push:.3f} s")
        from collections import Counter
        print("records by kind:", Counter(int(r.kind) for r in records), "completed callbacks:", calls["completed"],
              "requested:", calls["requested"])
        corr = {}
        kern = []
        for r in records:
            if r.kind == cupti.ActivityKind.EXTERNAL_CORRELATION:
                corr[r.correlation_id] = r.external_id
            elif r.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                kern.append(r)
        per_call: dict[int, list] = {}
        for k in kern:
            ext = corr.get(k.correlation_id)
            if ext is not None and ext // 1000 == n:
                per_call.setdefault(ext, []).append(k)
        spans = [(max(k.end for k in ks) - min(k.start for k in ks)) / 1000 for ks in per_call.values()]
        names = {k.name for ks in per_call.values() for k in ks}
        by_window = []
        for t0, t1 in windows:
            ks = [k for k in kern if t0 <= k.start and k.end <= t1]
            if ks:
                by_window.append((max(k.end for k in ks) - min(k.start for k in ks)) / 1000)
        print(f"  by CUPTI timestamp window: {len(by_window)} calls, median "
              f"{statistics.median(by_window) if by_window else float('nan'):.2f} us")
        print(f"n={n}: events median {statistics.median(ev):.2f} us (min {min(ev):.2f}); cupti calls {len(per_call)} "
              f"median {statistics.median(spans) if spans else float('nan'):.2f} us (min {min(spans) if spans else float('nan'):.2f}); kernels {sorted(names)[:3]}")
        records.clear()
    try:
        print("dropped", cupti.activity_get_num_dropped_records(0, 0, 0))
    except Exception as e:
        print("dropped: ?", e)


if __name__ == "__main__":
    main()
