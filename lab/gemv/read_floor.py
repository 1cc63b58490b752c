"""The read floor of the decode GEMMs: how long the fastest plain read of a weight matrix takes on
this GPU, beside cuBLAS's GEMM on that matrix, in one offline measurement per shape.

Issue 33 asks decode kernels for >= 1.10x over cuBLAS and >= 85 % of 4.8 TB/s where the weights
exceed 32 MB. A GEMM cannot be faster than reading its weights once, so the best of three read-only
streaming kernels (lab/gemv/read_floor.cu: 16-byte register loads, and cp.async.bulk streams with
one or two CTAs per SM) says how much of that bar the hardware allows at each size; two more reads
with the access patterns of GEMV kernels (the gemv family's 16 rows x 64 B a warp instruction, and a
warp per row, 512 contiguous bytes an instruction), and the gemv pattern over balanced items dealt
k-fastest or rows-fastest, say whether the pattern or the balance costs bandwidth.

Per shape (tn: weights N x K), warm (one input set) and cold (input sets rotated over >= 2x L2),
the harness's offline loop (CUDA graphs of back-to-back calls, entries interleaved per round):
torch.matmul (column ``cublas``), the reads of the same weight buffers, and any harness methods named
by ``--specs``. The summary: the best baseline's time over the best streaming read's (the most a
kernel that reads its weights once could gain), and on how many shapes over 32 MB the read reaches
85 % of 4.8 TB/s. ``--csv`` prints the summary of a saved run without a GPU.

    nvcc -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o /tmp/read_floor.so lab/gemv/read_floor.cu
    python3 -m lab.gemv.read_floor --lib /tmp/read_floor.so [--shapes lab/skinny/decode-20.txt] [--out FILE.csv]
    python3 -m lab.gemv.read_floor --csv lab/gemv/read-floor-h200.csv
"""

from __future__ import annotations

import argparse
import ctypes
import math
from pathlib import Path

import pandas as pd
import torch

from harness.method import PrepareContext
from harness.problem import Problem
from harness.registry import resolve
from harness.shapes import read_shape_file
from harness.tensors import InputSet, timing_sets
from harness.timing.offline import Entry, OfflineSettings, measure_offline, time_candidates

HBM_TBS = 4.8
STREAMING = ("ldg", "bulk1", "bulk2")  # the reads in long contiguous runs: the floor
BASELINES = ("cublas", "torch", "cublaslt", "cublaslt-autotune")
READS = {"ldg": 0, "bulk1": 1, "bulk2": 2, "gemvpat": 3, "rowpat": 4, "items_k": 5, "items_row": 6,
         **{f"bulk{kb}k": 100 + kb for kb in (1, 2, 4, 8, 24)}, **{f"bulk{kb}k32": 200 + kb for kb in (1, 2, 4)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", help="read_floor.cu built as a shared library (measure)")
    ap.add_argument("--csv", help="a saved run (--out) to summarize instead")
    ap.add_argument("--shapes", default="lab/skinny/decode-20.txt")
    ap.add_argument("--out", default="")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds a shape and cache state")
    ap.add_argument("--specs", default="", help="comma-separated harness methods timed in the same groups where they "
                    "serve the shape (e.g. cublaslt-autotune,gemv:,gemv:mt=2)")
    args = ap.parse_args()
    if args.csv:
        summarize(pd.read_csv(args.csv))
        return
    if not args.lib:
        ap.error("--lib (to measure) or --csv (to summarize a saved run) is needed")
    lib = ctypes.CDLL(args.lib)
    lib.hb_read_floor.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_void_p,
                                  ctypes.c_void_p]
    assert lib.hb_read_floor_init() == 0
    props = torch.cuda.get_device_properties(0)
    sms, l2 = props.multi_processor_count, props.L2_cache_size
    sink = torch.zeros(sms * 4, dtype=torch.int32, device="cuda")

    def reader(variant: int):
        def fn(a, b, c):
            rc = lib.hb_read_floor(b.data_ptr(), b.numel() * b.element_size(), b.shape[0], b.shape[1],
                                   variant, sms,
                                   torch.cuda.current_stream().cuda_stream, sink.data_ptr())
            if rc:
                raise RuntimeError(f"read_floor variant {variant}: CUDA error {rc}")
        return fn

    def cublas(a, b, c):
        torch.matmul(a, b.t(), out=c)

    specs = [x for x in args.specs.split(",") if x]
    methods = resolve(specs)
    rows = []
    for shape in read_shape_file(Path(args.shapes)):
        problem = Problem(shape, "tn")
        wbytes = shape.n * shape.k * 2
        for cache in ("warm", "cold"):
            n_sets = 1 if cache == "warm" else max(2, math.ceil(2 * l2 / wbytes))
            sets: list[InputSet] = timing_sets(problem, "cuda", n_sets, seed=7)
            entries = [Entry("cublas", cublas, sets)] + [Entry(name, reader(v), sets) for name, v in READS.items()]
            a, b, c = sets[0].a, sets[0].b, sets[0].c
            ctx = PrepareContext(device="cuda", inputs=(a, b, c),
                                 time_candidates=lambda fns, **kw: time_candidates(fns, (a, b, c), "cuda", **kw))
            for spec, method in zip(specs, methods):
                if method.supports(problem, "cuda"):
                    entries.append(Entry(spec, method.prepare(problem, ctx).fn, sets))
            got = measure_offline(entries, "cuda", OfflineSettings(budget_s=args.budget, seed=5))
            for key, m in got.items():
                us = float(pd.Series(m.device_us).median()) if m.device_us else float("nan")
                rows.append(dict(shape=str(shape), weights_mb=wbytes / 1e6, cache=cache, method=key, us=us,
                                 tbs=wbytes / us / 1e6, rounds=len(m.device_us), error=m.error or ""))
            del sets, entries
            torch.cuda.empty_cache()
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    summarize(df)


def summarize(df: pd.DataFrame) -> None:
    wide = df.pivot_table(index=["cache", "shape", "weights_mb"], columns="method", values="us").reset_index()
    pd.set_option("display.width", 250)
    ours = [c for c in wide.columns if c not in ("cache", "shape", "weights_mb", *READS, *BASELINES)]
    if ours:
        print(wide[["cache", "shape", *ours, *[c for c in READS if c in wide and c not in STREAMING]]].round(2)
              .to_string(index=False))
    base = [c for c in BASELINES if c in wide]
    wide["read_best"] = wide[list(STREAMING)].min(axis=1)
    wide["base_best"] = wide[base].min(axis=1)
    wide["base_tbs"] = wide.weights_mb / wide.base_best
    wide["read_tbs"] = wide.weights_mb / wide.read_best
    wide["room"] = wide.base_best / wide.read_best  # the most a kernel that only reads its weights could gain
    print(wide[["cache", "shape", "weights_mb", *base, "read_best", "base_tbs", "read_tbs", "room"]]
          .sort_values(["cache", "weights_mb"]).round(3).to_string(index=False))
    for cache, g in wide.groupby("cache"):
        gm = math.exp(g.room.map(math.log).mean())
        big = g[g.weights_mb > 32]
        print(f"{cache}: best baseline ({', '.join(base)}) / best read, geomean {gm:.3f}x "
              f"({g.room.min():.3f}-{g.room.max():.3f}); over 32 MB of weights ({len(big)} shapes) the read reaches "
              f"85 % of {HBM_TBS} TB/s on {int((big.read_tbs >= 0.85 * HBM_TBS).sum())}, the best baseline on "
              f"{int((big.base_tbs >= 0.85 * HBM_TBS).sum())}")
        others = [c for c in [*ours, *READS] if c in g and c != "ldg"]
        ratios = {c: math.exp((g[c] / g.ldg).dropna().map(math.log).mean()) for c in others}
        print(f"{cache}: time over the 32 KB-run read (ldg), geomean: " + ", ".join(f"{c} {r:.3f}" for c, r in ratios.items()))
    err = df["error"].astype("string").fillna("") if "error" in df else pd.Series([], dtype="string")
    if (err != "").any():
        print(df[err != ""][["shape", "cache", "method", "error"]].to_string(index=False))


if __name__ == "__main__":
    main()
