// How fast can one kernel read B bytes of weights on this GPU, and what does an access pattern or a
// copy size cost? Read-only kernels, each xor-reducing what it reads so nothing is optimised away
// (lab/gemv/read_floor.py times them beside cuBLAS on the decode shapes' weight matrices).
// Streaming reads in long contiguous runs (the floor):
//   variant 0  ldg: 16-byte ld.global.nc loads, 8 in flight per thread, 4 CTAs of 256 threads per SM,
//              blocks interleaved over the buffer in 32 KB runs
//   variant 1  bulk: one CTA per SM, its contiguous share of the buffer streamed by cp.async.bulk
//              (the TMA's 1-D copy) through STAGES x CHUNK bytes of shared memory, one mbarrier a stage
//   variant 2  bulk with two CTAs per SM, half the stages each
// GEMV access patterns:
//   variant 3  gemvpat: the gemv family's default load pattern without its math: CTAs of 4 warps own
//              64 rows and one K slice (slices filling 4 CTAs per SM), lane (g, t) of a warp loads 16 B
//              of rows g and g + 8 of its 16 at k = 8t + 32u, 4 chunks u in flight, L2::128B hint
//   variant 4  rowpat: a warp owns whole rows, lane l loads 16 B at k = 8l + 256u (512 contiguous bytes
//              an instruction), 8 in flight; 4 CTAs of 8 warps per SM, warps strided over the rows
//   variant 5  items-k: the gemv lane pattern (16 rows x 64 B a warp instruction, 4 in flight) over items of
//              (16-row group, run of 4 chunks) dealt to all warps of 4 x SMs CTAs of 4 warps in turn, k
//              fastest: neighbouring warps read neighbouring runs of the same rows (work balanced to one item)
//   variant 6  items-row: the same items dealt row group fastest (neighbouring warps read other rows)
// Bulk copy sizes:
//   variant 1CC / 2CC  bulk, each 24 KB stage made of copies of CC KB (1, 2, 4, 8, 24), issued by one thread
//              (1CC) or by the 32 lanes of a warp (2CC): what a bulk copy costs beyond its bytes
// Build: nvcc -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o read_floor.so read_floor.cu
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace {

constexpr int LDG_THREADS = 256;
constexpr int LDG_UNROLL = 8;
constexpr int CHUNK = 24576;  // bytes a bulk copy moves

// 16-byte non-coherent loads that skip L1, with or without the 128-byte L2 prefetch hint (the gemv
// family's default), and the xor fold that keeps what was read live
__device__ __forceinline__ uint4 ld_nc(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 ld_nc_128(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ unsigned fold(const uint4& v) { return v.x ^ v.y ^ v.z ^ v.w; }

__global__ void __launch_bounds__(LDG_THREADS) read_ldg(const uint4* __restrict__ p, size_t nvec, unsigned* sink) {
  unsigned acc = 0;
  const size_t step = (size_t)gridDim.x * LDG_THREADS * LDG_UNROLL;
  for (size_t base = (size_t)blockIdx.x * LDG_THREADS * LDG_UNROLL + threadIdx.x; base < nvec; base += step) {
    uint4 v[LDG_UNROLL];
#pragma unroll
    for (int u = 0; u < LDG_UNROLL; ++u) {
      size_t i = base + (size_t)u * LDG_THREADS;
      v[u] = i < nvec ? ld_nc(p + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < LDG_UNROLL; ++u) acc ^= fold(v[u]);
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(128) read_gemvpat(const __half_raw* __restrict__ B, int N, int K, int splits,
                                                     int per, unsigned* sink) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int block = blockIdx.x / splits, split = blockIdx.x % splits;
  const int row0 = block * 64 + warp * 16;
  int r0 = min(row0 + g, N - 1), r1 = min(row0 + g + 8, N - 1);
  const char* w0 = reinterpret_cast<const char*>(B) + ((size_t)r0 * K + 8 * t) * 2;
  const char* w1 = reinterpret_cast<const char*>(B) + ((size_t)r1 * K + 8 * t) * 2;
  const int nch = K / 32, c0 = split * per, c1 = min(c0 + per, nch);
  unsigned acc = 0;
#pragma unroll 1
  for (int c = c0; c + 4 <= c1; c += 4) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      v[2 * u] = ld_nc_128(w0 + (size_t)(c + u) * 64);
      v[2 * u + 1] = ld_nc_128(w1 + (size_t)(c + u) * 64);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= fold(v[u]);
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(128) read_items(const __half_raw* __restrict__ B, int N, int K, int k_fastest,
                                                  unsigned* sink) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int warps = gridDim.x * 4, wid = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int groups = (N + 15) / 16, runs = K / 128;  // 4 chunks of 32 k a run
  const long long items = (long long)groups * runs;
  unsigned acc = 0;
  for (long long it = wid; it < items; it += warps) {
    const int grp = k_fastest ? (int)(it / runs) : (int)(it % groups);
    const int run = k_fastest ? (int)(it % runs) : (int)(it / groups);
    const int r0 = min(grp * 16 + g, N - 1), r1 = min(grp * 16 + g + 8, N - 1);
    const char* w0 = reinterpret_cast<const char*>(B) + ((size_t)r0 * K + 8 * t + (size_t)run * 128) * 2;
    const char* w1 = reinterpret_cast<const char*>(B) + ((size_t)r1 * K + 8 * t + (size_t)run * 128) * 2;
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      v[2 * u] = ld_nc_128(w0 + u * 64);
      v[2 * u + 1] = ld_nc_128(w1 + u * 64);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= fold(v[u]);
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(256) read_rowpat(const uint4* __restrict__ B, int N, int K, unsigned* sink) {
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * (blockDim.x >> 5), wid = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int vrow = K / 8;  // 16-byte vectors in a row
  unsigned acc = 0;
  for (int r = wid; r < N; r += warps) {
    const uint4* row = B + (size_t)r * vrow;
    for (int base = lane; base < vrow; base += 32 * 8) {
      uint4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        int i = base + 32 * u;
        v[u] = i < vrow ? ld_nc(row + i) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) acc ^= fold(v[u]);
    }
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// this CTA's even share of nchunks stages: the first c0, cn of them
__device__ __forceinline__ void chunk_share(size_t nchunks, size_t& c0, size_t& cn) {
  const size_t per = nchunks / gridDim.x, extra = nchunks % gridDim.x;
  c0 = blockIdx.x * per + (blockIdx.x < extra ? blockIdx.x : extra);
  cn = per + (blockIdx.x < extra ? 1 : 0);
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; selp.u32 %0, 1, 0, q; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  }
}

// thread 0 keeps `stages` bulk copies in flight; every other thread only waits at the end
__global__ void read_bulk(const char* __restrict__ p, size_t bytes, int stages, unsigned* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[16];
  if (threadIdx.x != 0) return;
  // this CTA's share, in whole chunks (the last CTA takes the ragged tail)
  size_t c0, cn;
  chunk_share((bytes + CHUNK - 1) / CHUNK, c0, cn);
  for (int s = 0; s < stages; ++s) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bars[s])));
  }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  auto issue = [&](size_t c, int s) {
    size_t off = (c0 + c) * CHUNK;
    uint32_t n = (uint32_t)((bytes - off) < (size_t)CHUNK ? (bytes - off) : (size_t)CHUNK);
    uint32_t bar = smem_addr(&bars[s]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(n) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem_addr(smem + (size_t)s * CHUNK)), "l"(p + off), "r"(n), "r"(bar) : "memory");
  };
  for (int s = 0; s < stages && (size_t)s < cn; ++s) issue(s, s);
  unsigned acc = 0;
  for (size_t c = 0; c < cn; ++c) {
    int s = (int)(c % stages);
    uint32_t parity = (uint32_t)((c / stages) & 1);
    mbar_wait(smem_addr(&bars[s]), parity);
    acc ^= *reinterpret_cast<const unsigned*>(smem + (size_t)s * CHUNK);
    if (c + stages < cn) issue(c + stages, s);
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
}

// one warp; stage s's 24 KB arrive as CHUNK / copy copies, issued by lane 0 or by all lanes
__global__ void read_bulk_multi(const char* __restrict__ p, size_t bytes, int stages, int copy, int lanes,
                                unsigned* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[16];
  const int lane = threadIdx.x;
  size_t c0, cn;
  chunk_share(bytes / CHUNK, c0, cn);  // whole stages only (the tail is not read)
  if (lane == 0) {
    for (int s = 0; s < stages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bars[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
  const int ncopy = CHUNK / copy;
  auto issue = [&](size_t c, int s) {
    uint32_t bar = smem_addr(&bars[s]);
    if (lane == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(CHUNK) : "memory");
    __syncwarp();
    for (int i = (lanes > 1 ? lane : 0); i < ncopy; i += lanes) {
      if (lanes == 1 && lane != 0) break;
      size_t off = (c0 + c) * CHUNK + (size_t)i * copy;
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   ::"r"(smem_addr(smem + (size_t)s * CHUNK + (size_t)i * copy)), "l"(p + off), "r"(copy), "r"(bar) : "memory");
    }
  };
  for (int s = 0; s < stages && (size_t)s < cn; ++s) issue(s, s);
  unsigned acc = 0;
  for (size_t c = 0; c < cn; ++c) {
    int s = (int)(c % stages);
    uint32_t parity = (uint32_t)((c / stages) & 1);
    mbar_wait(smem_addr(&bars[s]), parity);
    acc ^= *reinterpret_cast<const unsigned*>(smem + (size_t)s * CHUNK + lane * 4);
    __syncwarp();
    if (c + stages < cn) issue(c + stages, s);
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
}

}  // namespace

// once, before any launch (not inside a graph capture): the bulk kernels' shared memory
extern "C" int hb_read_floor_init() {
  cudaFuncSetAttribute(read_bulk_multi, cudaFuncAttributeMaxDynamicSharedMemorySize, 8 * CHUNK);
  return (int)cudaFuncSetAttribute(read_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, 8 * CHUNK);
}

extern "C" int hb_read_floor(const void* p, size_t bytes, int n, int k, int variant, int sms, void* stream,
                             unsigned* sink) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (variant >= 100) {
    const int lanes = variant >= 200 ? 32 : 1, copy = (variant % 100) * 1024;
    read_bulk_multi<<<sms, 32, 8 * CHUNK, st>>>(static_cast<const char*>(p), bytes, 8, copy, lanes, sink);
  } else if (variant == 3) {
    const int blocks = (n + 63) / 64, nch = k / 32;
    int splits = (4 * sms + blocks - 1) / blocks;
    splits = splits < nch / 4 ? splits : (nch / 4 > 0 ? nch / 4 : 1);
    int per = (nch + splits - 1) / splits;
    per = (per + 3) / 4 * 4;
    splits = (nch + per - 1) / per;
    read_gemvpat<<<blocks * splits, 128, 0, st>>>(static_cast<const __half_raw*>(p), n, k, splits, per, sink);
  } else if (variant == 5 || variant == 6) {
    read_items<<<sms * 4, 128, 0, st>>>(static_cast<const __half_raw*>(p), n, k, variant == 5, sink);
  } else if (variant == 4) {
    read_rowpat<<<sms * 4, 256, 0, st>>>(static_cast<const uint4*>(p), n, k, sink);
  } else if (variant == 0) {
    read_ldg<<<sms * 4, LDG_THREADS, 0, st>>>(static_cast<const uint4*>(p), bytes / 16, sink);
  } else {
    int per_sm = variant == 1 ? 1 : 2;
    int stages = variant == 1 ? 8 : 4;
    size_t smem = (size_t)stages * CHUNK;
    read_bulk<<<sms * per_sm, 32, smem, st>>>(static_cast<const char*>(p), bytes, stages, sink);
  }
  return (int)cudaGetLastError();
}
