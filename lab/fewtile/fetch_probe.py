"""The fetch floor of few-tile GEMMs: how long a kernel of G CTAs takes when each only copies its own X
bytes of an L2-resident buffer into shared memory (every copy in flight at once) and ends, beside
torch.matmul on two few-tile shapes, in one offline measurement (the harness's loop: CUDA graphs of
back-to-back calls, entries interleaved per round, warm).

Why: split-K kernels on shapes such as 256_256_4096 (cuBLAS 6.5 us against a 1 us floor) fetch 64-128 KB
per CTA on about 128 CTAs and spend 4-6 us; Nsight Compute shows every unit nearly idle. If the fetch
alone costs most of that, the room is not there; if it costs 1-2 us, the kernels are far from it.
lab/fewtile/fetch_probe.cu: variant 0 cp.async by every thread, variant 1 cp.async.bulk of 16 KB pieces.
``--cluster``: also the bulk fetch launched in clusters of 8 (kind ``cluster``), then the cluster split-K sum's
cost on top: two cluster barriers around each CTA reading its eighth of a 16 KB (64x64) or 64 KB (128x128) fp32
tile from the 7 peers through DSMEM (column ``tile_kb``; 0: the barriers only; ``sum_mode``: peer by peer, all
peers' loads in flight, pushed by bulk copies into each owner's shared memory, or pushed by every thread's st.async
with one split barrier and no second), against the same fetch unclustered.

    nvcc -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o /tmp/fetch_probe.so lab/fewtile/fetch_probe.cu
    python3 -m lab.fewtile.fetch_probe --lib /tmp/fetch_probe.so [--out FILE.csv]
"""

from __future__ import annotations

import argparse
import ctypes

import pandas as pd
import torch

from harness.problem import Problem
from harness.shapes import parse_shape
from harness.tensors import timing_sets
from harness.timing.offline import Entry, OfflineSettings, measure_offline

CTAS = (16, 64, 128, 132, 256)
KB = (0, 16, 32, 64, 128, 192)
VARIANTS = {0: "cpasync", 1: "bulk"}
SHAPES = ("256_256_4096", "128_64_4096")
BUF_BYTES = 8 << 20  # L2-resident: the few-tile deep-K shapes hold 1.5-8 MB of operands


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--budget", type=float, default=4.0)
    ap.add_argument("--cluster", action="store_true", help="also the cluster launches and DSMEM sums")
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.hb_fetch.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_void_p, ctypes.c_void_p]
    # the cluster probe's pushed sum (mode 2) needs the fetch, the tile and an inbox of the tile's size
    assert lib.hb_fetch_init(max(max(KB), max(CLUSTER_KB) + max(TILE_KB)) * 1024) == 0
    buf = torch.randint(0, 255, (BUF_BYTES,), dtype=torch.uint8, device="cuda")
    sink = torch.zeros(max(CTAS), dtype=torch.int32, device="cuda")
    sets = {s: timing_sets(Problem(parse_shape(s), "tn"), "cuda", 1, seed=7) for s in SHAPES}
    dummy = sets[SHAPES[0]]

    def fetch(ctas: int, x: int, variant: int):
        def fn(a, b, c):
            rc = lib.hb_fetch(buf.data_ptr(), BUF_BYTES, ctas, x, variant, torch.cuda.current_stream().cuda_stream,
                              sink.data_ptr())
            if rc:
                raise RuntimeError(f"fetch {ctas} CTAs x {x} B variant {variant}: CUDA error {rc}")
        return fn

    def matmul(a, b, c):
        torch.matmul(a, b.t(), out=c)

    entries = [Entry(("torch.matmul", s, 0, 0), matmul, sets[s]) for s in SHAPES]
    for ctas in CTAS:
        for kb in KB:
            for v, name in VARIANTS.items():
                if kb == 0 and v:
                    continue
                entries.append(Entry((name if kb else "empty", "", ctas, kb), fetch(ctas, kb * 1024, v), dummy))
    if args.cluster:
        lib.hb_fetch_cluster.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                         ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        entries += cluster_entries(lib, buf, sink, dummy, fetch)
    got = measure_offline(entries, "cuda", OfflineSettings(budget_s=args.budget, seed=5))
    torch.cuda.synchronize()
    # mode 3's owners check every pushed value (fetch_probe.cu): 2 marks a CTA that received a wrong one
    wrong = int((sink == 2).sum())
    rows = [dict(kind=k[0], shape=k[1], ctas=k[2], kb=k[3], tile_kb=k[4] if len(k) > 4 else 0,
                 sum_mode=k[5] if len(k) > 5 else 0,
                 us=float(pd.Series(m.device_us).median()) if m.device_us else float("nan"),
                 rounds=len(m.device_us), error=m.error or "") for k, m in got.items()]
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    summarize(df)
    print(f"st.async sum check: {wrong} CTAs received a wrong value" if wrong else
          "st.async sum check: every CTA received its peers' values")


CLUSTER = 8
CLUSTER_CTAS = (16, 64, 112, 128)  # 112: 14 clusters of 8, all at once on the H200 (15 fit); 128: 16, two waves
CLUSTER_KB = (0, 16, 64, 128)
TILE_KB = (0, 16, 64)
SUM_MODES = {0: "peer by peer", 1: "all peers in flight", 2: "pushed by bulk copy",
             3: "pushed by st.async, one split barrier"}  # fetch_probe.cu's `mode`
BARRIER_MODES = (0, 3)  # tile 0: the two barriers (modes 0-2), or the one split barrier (mode 3)


def cluster_entries(lib, buf, sink, dummy, fetch) -> list[Entry]:
    """The fetch in clusters of CLUSTER, with and without the DSMEM tile sum, and the same fetch unclustered at
    112 CTAs (``fetch(ctas, bytes, variant)``: main's launcher; the other CTA counts' unclustered fetch is in the
    main table)."""

    def launch(ctas: int, x: int, tile: int, mode: int):
        def fn(a, b, c):
            rc = lib.hb_fetch_cluster(buf.data_ptr(), BUF_BYTES, ctas, x, CLUSTER, tile, mode,
                                      torch.cuda.current_stream().cuda_stream, sink.data_ptr())
            if rc:
                raise RuntimeError(f"cluster fetch {ctas} CTAs x {x} B, tile {tile} B, mode {mode}: CUDA error {rc}")
        return fn

    out = [Entry(("bulk" if kb else "empty", "", 112, kb), fetch(112, kb * 1024, 1), dummy) for kb in CLUSTER_KB]
    for ctas in CLUSTER_CTAS:
        for kb in CLUSTER_KB:
            for t in TILE_KB:
                for mode in SUM_MODES if t else BARRIER_MODES:
                    out.append(Entry(("cluster", "", ctas, kb, t, mode), launch(ctas, kb * 1024, t * 1024, mode), dummy))
    return out


def summarize(df: pd.DataFrame) -> None:
    pd.set_option("display.width", 200)
    print(df[df.kind == "torch.matmul"][["shape", "us"]].round(2).to_string(index=False))
    plain = df[(df.kind != "torch.matmul") & (df.kind != "cluster")]
    t = plain.pivot_table(index=["kind", "ctas"], columns="kb", values="us")
    print("device us of a kernel of CTAS CTAs each fetching KB kilobytes (columns), warm L2:")
    print(t.round(2).to_string())
    cl = df[df.kind == "cluster"]
    if len(cl):
        print(f"the bulk fetch in clusters of {CLUSTER}, then a DSMEM sum of a TILE_KB fp32 tile (0: the barriers alone):")
        print(cl.pivot_table(index=["ctas", "tile_kb", "sum_mode"], columns="kb", values="us").round(2).to_string())
        print("sum_mode: " + "; ".join(f"{k} {v}" for k, v in SUM_MODES.items()))
    bad = df[df.error.astype(str) != ""]
    if len(bad):
        print(bad.to_string(index=False))


if __name__ == "__main__":
    main()
