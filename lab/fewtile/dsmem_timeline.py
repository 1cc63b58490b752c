"""Where a `splitk_dsmem` call's time goes, CTA by CTA: the family's rendered source with clock stamps patched in at
fixed points (lab only; the product's template is untouched), built with the family's flags, run through its ABI.

Stamps (thread 0 of each CTA; SM clock cycles, and %globaltimer ns for the CTAs' start and end across SMs):
  0 entry, 1 barriers initialised, 2 first stage landed, 3 last stage landed, 4 WGMMAs done, 5 fp32 tile written,
  6 first cluster barrier passed (every slice's tile written), 7 slice sum stored, 8 second cluster barrier passed.
Printed per case: the median over CTAs of each phase's cycles (and in us at the SM clock), the spread of the CTAs'
start and end times, and the call's device time from CUDA events over 200 graph-replayed calls without stamps'
cost removed (a stamp is one clock read and two global stores from one thread).

    python3 -m lab.fewtile.dsmem_timeline [--build-only] [--lib-dir DIR] SPEC@SHAPE ...
    (default: the cases below; SPEC as `compare` names it, e.g. splitk_dsmem:mma_pipe=1,stages=8)
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

CASES = ("splitk_dsmem:mma_pipe=1,stages=8@128_256_4096", "splitk_dsmem:mma_pipe=1,stages=8,sum=1@128_256_4096",
         "splitk_dsmem:mma_pipe=1,stages=8,sum=1,prefetch=1@128_256_4096", "splitk_dsmem:mma_pipe=1,stages=8@256_256_4096",
         "splitk_dsmem:mma_pipe=1,stages=8,sum=1,prefetch=1@256_256_4096",
         "splitk_dsmem:swap=1,bn=16,mma_pipe=1,stages=8,sum=1,prefetch=1@16_4096_4096",
         "splitk_dsmem:mma_pipe=1,stages=8@128_64_4096", "splitk_dsmem:mma_pipe=1,stages=8@256_256_16384",
         "splitk_dsmem:swap=1,bn=16,mma_pipe=1,stages=8@16_4096_4096",
         "splitk_dsmem:swap=1,bm=256,bn=16,mma_pipe=1,stages=6@16_4096_4096",
         "splitk_dsmem:swap=1,bn=32,mma_pipe=1,stages=8@32_28672_5120",
         "splitk_dsmem:swap=1,bm=256,bn=32,mma_pipe=1,stages=6@32_28672_5120")
PHASES = ("init", "first stage", "last stage", "mma tail", "tile to smem", "barrier 1", "sum+store", "barrier 2")
SLOTS = 24  # a CTA's stamps: 9 clocks, 9 global times, its SM
MAX_CTAS = 8192

STAMP_DEFS = r"""
__device__ long long sd_stamps[%(max_ctas)d * %(slots)d];
__device__ __forceinline__ void sd_stamp(int i) {
  if (threadIdx.x != 0) return;
  const int cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (cta >= %(max_ctas)d) return;
  unsigned long long g;
  unsigned sm;
  asm volatile("mov.u64 %%0, %%%%globaltimer;" : "=l"(g));
  asm volatile("mov.u32 %%0, %%%%smid;" : "=r"(sm));
  sd_stamps[cta * %(slots)d + i] = clock64();
  sd_stamps[cta * %(slots)d + 9 + i] = (long long)g;
  sd_stamps[cta * %(slots)d + 18] = sm;
}
extern "C" int sd_read_stamps(void* dst, size_t bytes) { return (int)cudaMemcpyFromSymbol(dst, sd_stamps, bytes); }
extern "C" int sd_write_stamps(const void* src, size_t bytes) { return (int)cudaMemcpyToSymbol(sd_stamps, src, bytes); }
""" % {"max_ctas": MAX_CTAS, "slots": SLOTS}

# (anchor in the rendered source, text inserted after it); each anchor must occur exactly once
PATCHES = (
    ("SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_raw);\n", "  sd_stamp(0);\n"),
    ("  __syncthreads();\n\n  // k-tile kt of A and B into stage s; the stage's barrier expects both\n", "  sd_stamp(1);\n"),
    ("    FullBar::wait(&smem.full[s], (i / STAGES) & 1);\n", "    if (i == 0) sd_stamp(2);\n    if (i == n_kt - 1) sd_stamp(3);\n"),
    ("  if constexpr (MMA_PIPE) {\n    warpgroup_wait<0>();\n    fence_acc();\n  }\n", "  sd_stamp(4);\n"),
    ("  for (int e = 0; e < size(acc); ++e) tCsP(e) = acc(e);\n", "  sd_stamp(5);\n"),
    ("  if (splits > 1) cluster.sync();\n  else __syncthreads();\n", "  sd_stamp(6);\n"),
)
END_ANCHOR = "  if (splits > 1) cluster.sync();\n}\n"
END_PATCH = "  sd_stamp(7);\n  if (splits > 1) cluster.sync();\n  sd_stamp(8);\n}\n"


def stamped_source(source: str) -> str:
    """The rendered source with the stamp buffer defined before the shared cluster header and the stamps patched in."""
    head = "namespace cs {"
    assert source.count(head) == 1, "the cluster header's namespace"
    out = source.replace(head, STAMP_DEFS + head, 1)
    for anchor, text in PATCHES:  # the sum's anchors occur once in each of the header's two sums
        assert out.count(anchor) >= 1, f"anchor not found: {anchor!r}"
        out = out.replace(anchor, anchor + text)
    assert out.count(END_ANCHOR) >= 1, "end of sum_slices_store"
    return out.replace(END_ANCHOR, END_PATCH)


def parse_case(case: str):
    from harness.shapes import parse_shape

    spec, _, shape = case.partition("@")
    family, _, args = spec.partition(":")
    return family, args, parse_shape(shape)


def build_case(case: str) -> tuple[str, dict]:
    from kernels_search import build
    from kernels_search.families import ALL

    family, args, _ = parse_case(case)
    fam = ALL[family]
    k = fam.parse(args.replace(":", ","))
    src = stamped_source(fam.render(k))
    res = build.build(src, fam.extra_flags(k), extra_key=fam.extra_key(k) + " stamps")
    if not res.ok:
        raise SystemExit(f"{case}: build failed\n{res.log[-3000:]}")
    return res.lib_path, k


def run_case(case: str, lib_path: str, k: dict) -> dict:
    import numpy as np
    import torch

    from kernels_search.families import ALL
    from harness.problem import Problem

    family, _, shape = parse_case(case)
    fam = ALL[family]
    lib = ctypes.CDLL(lib_path)
    p = Problem(shape, "tn")
    opts = fam.opts(k, p)
    arr = (ctypes.c_int * max(1, len(opts)))(*opts)
    a = torch.randn(shape.m, shape.k, device="cuda", dtype=torch.float16)
    b = torch.randn(shape.n, shape.k, device="cuda", dtype=torch.float16)
    c = torch.empty(shape.m, shape.n, device="cuda", dtype=torch.float16)

    def call():
        rc = lib.hgemm_run(ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()), ctypes.c_void_p(c.data_ptr()),
                           shape.m, shape.n, shape.k, 1, arr, len(opts), None, ctypes.c_size_t(0),
                           ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        assert rc == 0, f"hgemm_run returned {rc}"

    for _ in range(20):
        call()
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    err = (c.float() - ref).abs().max().item() / max(1e-6, ref.abs().max().item())
    # device time a call: CUDA events around 200 graph-replayed calls, warm
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        call()
        g = torch.cuda.CUDAGraph()
        g.capture_begin()
        for _ in range(20):
            call()
        g.capture_end()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    g.replay()
    e0.record()
    for _ in range(10):
        g.replay()
    e1.record()
    torch.cuda.synchronize()
    call_us = e0.elapsed_time(e1) * 1e3 / 200
    # one more call, alone, for the stamps (the buffer cleared first: a binary shared by two cases keeps the last's)
    zero = np.zeros(MAX_CTAS * SLOTS, dtype=np.int64)
    assert lib.sd_write_stamps(ctypes.c_void_p(zero.ctypes.data), ctypes.c_size_t(zero.nbytes)) == 0
    call()
    torch.cuda.synchronize()
    buf = np.zeros(MAX_CTAS * SLOTS, dtype=np.int64)
    rc = lib.sd_read_stamps(ctypes.c_void_p(buf.ctypes.data), ctypes.c_size_t(buf.nbytes))
    assert rc == 0, f"sd_read_stamps: {rc}"
    st = buf.reshape(MAX_CTAS, SLOTS)
    ctas = int((st[:, 0] != 0).sum())
    st = st[:ctas]
    clk, glob, sm = st[:, :9].astype(float), st[:, 9:18].astype(float), st[:, 18]
    span_ns = glob[:, 8] - glob[:, 0]  # the SM clock from the CTAs' own spans (cycles over globaltimer ns)
    mhz = float(np.median((clk[:, 8] - clk[:, 0])[span_ns > 0] / span_ns[span_ns > 0] * 1e3))
    phases = {name: float(np.median(clk[:, i + 1] - clk[:, i])) for i, name in enumerate(PHASES)}
    t0 = glob[:, 0].min()
    return {"case": case, "ctas": ctas, "sms": int(len(set(sm.tolist()))), "max_rel_err": err, "call_us": call_us,
            "phases_cycles": phases, "total_cycles_median": float(np.median(clk[:, 8] - clk[:, 0])),
            "start_spread_us": float((glob[:, 0].max() - t0) / 1e3), "end_first_us": float((glob[:, 8].min() - t0) / 1e3),
            "end_last_us": float((glob[:, 8].max() - t0) / 1e3),
            "last_stage_landed_us": [float(np.percentile((glob[:, 3] - t0) / 1e3, q)) for q in (0, 50, 100)],
            "mhz": mhz,
            "landed_by_cta": [[int(m), float((g - t0) / 1e3)] for m, g in zip(sm, glob[:, 3])]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", default=list(CASES))
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--out", default=None, help="write the results as JSON lines here")
    a = ap.parse_args(argv)
    built = [(c, *build_case(c)) for c in a.cases]
    print(f"built {len(built)} stamped binaries", flush=True)
    if a.build_only:
        return 0
    rows = []
    for case, lib, k in built:
        try:
            r = run_case(case, lib, k)
        except Exception as e:  # one case's failure costs that case only
            print(f"{case}: {type(e).__name__}: {e}", flush=True)
            continue
        rows.append(r)
        ph = "  ".join(f"{n} {v:.0f}" for n, v in r["phases_cycles"].items())
        print(f"{r['case']}: {r['ctas']} CTAs on {r['sms']} SMs, call {r['call_us']:.2f} us (graph, warm), err {r['max_rel_err']:.1e}\n"
              f"  median cycles a CTA: {ph}  (entry to exit {r['total_cycles_median']:.0f}; at {r['mhz']:.0f} MHz "
              f"{r['total_cycles_median'] / r['mhz']:.2f} us)\n"
              f"  across CTAs (globaltimer, us from the first CTA's entry): starts spread {r['start_spread_us']:.2f}, "
              f"last stage landed min/median/max {'/'.join(f'{x:.2f}' for x in r['last_stage_landed_us'])}, "
              f"exits {r['end_first_us']:.2f}-{r['end_last_us']:.2f}", flush=True)
        landed = sorted(t for _, t in r["landed_by_cta"])
        print("  last stage landed, deciles over CTAs (us): " + " ".join(f"{landed[int(q * (len(landed) - 1))]:.1f}"
                                                                   for q in (0, .1, .25, .5, .75, .9, 1)), flush=True)
    if a.out:
        Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    raise SystemExit(main())
