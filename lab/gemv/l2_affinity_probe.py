"""Does a streamed buffer stay in the H200's L2 between calls only when each byte is always read by
the same SM? (The decode GEMMs' warm-L2 gap: cuBLAS keeps a 33 MB weight matrix in L2 between
calls, the gemv family does not.)

One kernel reads S bytes (16-byte non-coherent loads, summed so nothing is optimised away) in
NCHUNK chunks, one chunk per CTA, 4 CTAs per SM, one wave. Three ways to pick a CTA's chunk:
  block  chunk = blockIdx.x (whatever SM the block lands on)
  smid   chunk = 4 * %smid + (per-SM arrival counter % 4): a chunk is always read by the same SM
  shift  chunk = (blockIdx.x + 37 * call) % NCHUNK: a chunk moves to another SM every call
Per size: the median over 5 samples of 20 back-to-back calls of the device time per call (CUDA events, after warm-up),
and the rate S / time. If L2 keeps data per SM side (partition), `smid` is fast well past half of
L2 while `shift` falls to DRAM speed near half of L2.

    python3 lab/gemv/l2_affinity_probe.py
"""

import cupy as cp
import numpy as np

SRC = r"""
extern "C" __global__ void stream(const uint4* __restrict__ buf, size_t chunk_vecs, int mode, int call,
                                  int nchunk, unsigned* counters, float* sink) {
  __shared__ int chunk_s;
  if (threadIdx.x == 0) {
    int chunk;
    if (mode == 0) chunk = blockIdx.x;
    else if (mode == 1) {
      unsigned smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
      unsigned slot = atomicAdd(&counters[smid], 1u) % 4u;
      chunk = (int)((smid * 4u + slot) % (unsigned)nchunk);
    } else chunk = (int)((blockIdx.x + 37u * (unsigned)call) % (unsigned)nchunk);
    chunk_s = chunk;
  }
  __syncthreads();
  const uint4* p = buf + (size_t)chunk_s * chunk_vecs;
  unsigned acc = 0;
  #pragma unroll 4
  for (size_t i = threadIdx.x; i < chunk_vecs; i += blockDim.x) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p + i));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) sink[blockIdx.x] = 1.f;
}
"""


def main():
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    l2 = dev.attributes["L2CacheSize"]
    print(f"SMs {sms}, L2 {l2 / 2**20:.0f} MiB")
    k = cp.RawKernel(SRC, "stream")
    nchunk = sms * 4
    counters = cp.zeros(sms, dtype=cp.uint32)
    sink = cp.zeros(nchunk, dtype=cp.float32)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    print(f"{'MiB':>6} {'block us':>9} {'smid us':>9} {'shift us':>9}   {'block':>6} {'smid':>6} {'shift':>6} TB/s")
    for mib in (8, 16, 24, 28, 32, 36, 40, 48, 56, 64, 256):
        vecs_per_chunk = (mib << 20) // 16 // nchunk
        buf = cp.random.randint(0, 2**31, size=vecs_per_chunk * nchunk * 4, dtype=cp.int32).view(cp.uint32)
        times = {}
        for mode in (0, 1, 2):
            for call in range(5):
                k((nchunk,), (256,), (buf, np.uint64(vecs_per_chunk), np.int32(mode), np.int32(call), np.int32(nchunk), counters, sink))
            ts = []
            for rep in range(5):  # 5 samples of 20 back-to-back calls each
                start.record()
                for call in range(20):
                    k((nchunk,), (256,), (buf, np.uint64(vecs_per_chunk), np.int32(mode), np.int32(5 + rep * 20 + call),
                                          np.int32(nchunk), counters, sink))
                end.record()
                end.synchronize()
                ts.append(cp.cuda.get_elapsed_time(start, end) * 1000 / 20)
            times[mode] = float(np.median(ts))
        nbytes = vecs_per_chunk * nchunk * 16
        rates = [nbytes / (times[m] * 1e-6) / 1e12 for m in (0, 1, 2)]
        print(f"{nbytes / 2**20:6.1f} {times[0]:9.2f} {times[1]:9.2f} {times[2]:9.2f}   {rates[0]:6.2f} {rates[1]:6.2f} {rates[2]:6.2f}")
        del buf


if __name__ == "__main__":
    main()
