// What does it cost a few-tile GEMM just to bring its operands onto the SMs? Kernels that only
// fetch: G CTAs, each copying its own X bytes of an L2-resident buffer into shared memory with every
// copy in flight at once, waiting for all of them, then ending (lab/fewtile/fetch_probe.py times them
// with the harness's offline loop). A split-K kernel on a shape like 256_256_4096 fetches 64-128 KB per
// CTA on about 128 CTAs; if even that fetch costs most of cuBLAS's time, no schedule can win much.
//   variant 0  cp.async: 16-byte cp.async.cg by every thread, one commit group, wait_group 0
//   variant 1  bulk: one thread issues cp.async.bulk copies of 16 KB on one mbarrier, every thread waits
// X = 0 is the empty kernel of G CTAs (the launch alone).
// hb_fetch_cluster: the bulk fetch launched in clusters of S CTAs, then what a cluster split-K sum costs on top of
// it: a cluster barrier, each CTA reading its 1/S share of rows of a T-byte fp32 tile from each of the other S - 1
// CTAs' shared memory (16-byte DSMEM loads, summed in registers), a second barrier (the peers' tiles stay alive
// until every read is done). T = 0: the two barriers alone. How the sum reads the peers (`mode`):
//   0  peer after peer, one 16-byte DSMEM load a thread at a time (on the H100: about 2 us for a 16 KB tile, 8 CTAs)
//   1  every peer's 16-byte load of a piece issued before any is summed (up to 8 peers in flight a thread)
//   2  pushed by the copy engine: after the first barrier each CTA's thread 0 bulk-copies (cp.async.bulk
//      shared::cluster.shared::cta) the rows each peer owns into that peer's inbox, completing on the peer's
//      mbarrier; each CTA waits for its inbox and sums it from its own shared memory. The second barrier stays (a
//      CTA must not leave while its outgoing copies may still read its shared memory).
//   3  pushed by the threads: every thread stores its 16-byte pieces of each peer's rows straight into that peer's
//      inbox with st.async, completing on the peer's mbarrier (what a kernel would do from its accumulator
//      registers; here the pieces come from the CTA's own shared memory and carry the sender's rank + 1, which the
//      owner checks: sink = 2 on a wrong value). The cluster barrier is split: arrived right after the mbarrier is
//      armed, waited for after the fetch, before the first store; no second barrier (a CTA leaves only after its
//      inbox is full, and its outgoing stores read registers, not its shared memory). T = 0: the split barrier alone.
// Build: nvcc -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o fetch_probe.so fetch_probe.cu
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int THREADS = 128;
constexpr int BULK = 16384;

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__global__ void __launch_bounds__(THREADS) fetch_cpasync(const char* __restrict__ buf, size_t buf_bytes, int x,
                                                         unsigned* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  const char* src = buf + ((size_t)blockIdx.x * x) % buf_bytes;
  for (int off = threadIdx.x * 16; off < x; off += THREADS * 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(smem + off)), "l"(src + off) : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  if (x > 0 && *reinterpret_cast<const unsigned*>(smem + threadIdx.x * 4) == 0x9e3779b9u) sink[blockIdx.x] = 1;
}

// One thread issues cp.async.bulk copies of this CTA's x bytes of buf (16 KB pieces) into smem on one mbarrier;
// every thread waits for them.
__device__ __forceinline__ void bulk_fetch(unsigned char* smem, const char* __restrict__ buf, size_t buf_bytes, int x) {
  __shared__ __align__(8) uint64_t bar;
  const char* src = buf + ((size_t)blockIdx.x * x) % buf_bytes;
  const uint32_t b = smem_addr(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(x) : "memory");
    for (int off = 0; off < x; off += BULK) {
      const int n = x - off < BULK ? x - off : BULK;
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   ::"r"(smem_addr(smem + off)), "l"(src + off), "r"(n), "r"(b) : "memory");
    }
  }
  uint32_t done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(b) : "memory");
}

__global__ void __launch_bounds__(THREADS) fetch_bulk(const char* __restrict__ buf, size_t buf_bytes, int x,
                                                      unsigned* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  bulk_fetch(smem, buf, buf_bytes, x);
  if (*reinterpret_cast<const unsigned*>(smem + threadIdx.x * 4) == 0x9e3779b9u) sink[blockIdx.x] = 1;
}

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

constexpr int MAX_PEERS = 8;  // mode 1's loads in flight a thread (the probe's clusters are 8)

__device__ __forceinline__ float4 ld_dsmem(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr) : "memory");
  return v;
}

__device__ __forceinline__ uint32_t peer_addr(uint32_t local, uint32_t peer) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(peer));
  return remote;
}

__global__ void __launch_bounds__(THREADS) fetch_cluster(const char* __restrict__ buf, size_t buf_bytes, int x,
                                                         int tile, int mode, unsigned* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t inbox_bar;  // mode 2: the peers' pushed rows landed
  uint32_t rank, ranks;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ranks));
  const int share = tile / (int)ranks;  // this CTA's rows of the tile, in bytes
  // the tile is the first `tile` bytes of shared memory; mode 2's inbox (a share from each rank) follows the larger
  // of the fetch and the tile
  const int inbox_off = x > tile ? x : tile;
  const uint32_t inbox = smem_addr(smem) + inbox_off;
  const uint32_t bar = smem_addr(&inbox_bar);
  if ((mode == 2 || mode == 3) && tile > 0 && threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"((int)(ranks - 1) * share)
                 : "memory");
  }
  if (mode == 3) {
    // armed above; the fetch runs while the other CTAs arrive
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    if (x > 0) bulk_fetch(smem, buf, buf_bytes, x);
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  } else {
    if (x > 0) bulk_fetch(smem, buf, buf_bytes, x);
    cluster_sync();  // every CTA's tile written and (mode 2) its inbox barrier armed
  }
  float acc = 0.f;
  const uint32_t mine = smem_addr(smem) + rank * share;
  if (tile > 0 && mode == 0) {
    for (uint32_t peer = 1; peer < ranks; ++peer) {
      const uint32_t remote = peer_addr(mine, (rank + peer) % ranks);
      for (int off = threadIdx.x * 16; off < share; off += THREADS * 16) {
        const float4 v = ld_dsmem(remote + off);
        acc += v.x + v.y + v.z + v.w;
      }
    }
  } else if (tile > 0 && mode == 1) {
    for (int off = threadIdx.x * 16; off < share; off += THREADS * 16) {
      float4 v[MAX_PEERS];
#pragma unroll
      for (int p = 1; p < MAX_PEERS; ++p)
        if (p < (int)ranks) v[p] = ld_dsmem(peer_addr(mine, (rank + p) % ranks) + off);
#pragma unroll
      for (int p = 1; p < MAX_PEERS; ++p)
        if (p < (int)ranks) acc += v[p].x + v[p].y + v[p].z + v[p].w;
    }
  } else if (tile > 0 && mode == 2) {
    if (threadIdx.x == 0) {
      for (uint32_t p = 1; p < ranks; ++p) {
        const uint32_t peer = (rank + p) % ranks;
        asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(peer_addr(inbox + rank * share, peer)), "r"(smem_addr(smem) + peer * share), "r"(share),
                     "r"(peer_addr(bar, peer)) : "memory");
      }
    }
    uint32_t done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(bar) : "memory");
    for (uint32_t p = 0; p < ranks; ++p) {
      if (p == rank) continue;
      for (int off = threadIdx.x * 16; off < share; off += THREADS * 16) {
        const float4 v = *reinterpret_cast<const float4*>(smem + inbox_off + p * share + off);
        acc += v.x + v.y + v.z + v.w;
      }
    }
  } else if (tile > 0 && mode == 3) {
    const float mark = (float)(rank + 1);
    for (uint32_t p = 1; p < ranks; ++p) {
      const uint32_t peer = (rank + p) % ranks;
      const uint32_t to = peer_addr(inbox + rank * share, peer), to_bar = peer_addr(bar, peer);
      for (int off = threadIdx.x * 16; off < share; off += THREADS * 16) {
        const float4 v = *reinterpret_cast<const float4*>(smem + peer * share + off);
        // the piece's bytes as they would leave the accumulators; the value the owner checks
        const float w = (v.x == 1.2345f) ? v.y : mark;
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
                     ::"r"(to + off), "f"(w), "f"(mark), "f"(mark), "f"(mark), "r"(to_bar) : "memory");
      }
    }
    uint32_t done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0; "
                   "selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar) : "memory");
    bool wrong = false;
    for (uint32_t p = 0; p < ranks; ++p) {
      if (p == rank) continue;
      for (int off = threadIdx.x * 16; off < share; off += THREADS * 16) {
        const float4 v = *reinterpret_cast<const float4*>(smem + inbox_off + p * share + off);
        acc += v.x + v.y + v.z + v.w;
        wrong |= v.y != (float)(p + 1) || v.z != (float)(p + 1) || v.w != (float)(p + 1);
      }
    }
    if (wrong) sink[blockIdx.x] = 2;
  }
  if (mode != 3) cluster_sync();
  if (acc == 1.2345f || (x > 0 && *reinterpret_cast<const unsigned*>(smem + threadIdx.x * 4) == 0x9e3779b9u))
    sink[blockIdx.x] = 1;
}

}  // namespace

extern "C" int hb_fetch_init(int max_bytes) {
  cudaFuncSetAttribute(fetch_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, max_bytes);
  cudaFuncSetAttribute(fetch_cluster, cudaFuncAttributeMaxDynamicSharedMemorySize, max_bytes);
  return (int)cudaFuncSetAttribute(fetch_cpasync, cudaFuncAttributeMaxDynamicSharedMemorySize, max_bytes);
}

// x: bytes a CTA fetches (a multiple of 16; 0: the empty kernel)
extern "C" int hb_fetch(const void* buf, size_t buf_bytes, int ctas, int x, int variant, void* stream, unsigned* sink) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const char* p = static_cast<const char*>(buf);
  if (variant == 1 && x > 0)
    fetch_bulk<<<ctas, THREADS, x, st>>>(p, buf_bytes, x, sink);
  else
    fetch_cpasync<<<ctas, THREADS, x, st>>>(p, buf_bytes, x, sink);
  return (int)cudaGetLastError();
}

// ctas: a multiple of cluster; x: bytes a CTA fetches (a multiple of 16); tile: bytes of the fp32 tile summed across
// the cluster (a multiple of 16 x cluster; 0: the barriers only); mode: how the sum reads the peers (see the top)
extern "C" int hb_fetch_cluster(const void* buf, size_t buf_bytes, int ctas, int x, int cluster, int tile, int mode,
                                void* stream, unsigned* sink) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = (x > tile ? x : tile) + (mode >= 2 ? tile : 0);
  cfg.stream = static_cast<cudaStream_t>(stream);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return (int)cudaLaunchKernelEx(&cfg, fetch_cluster, static_cast<const char*>(buf), buf_bytes, x, tile, mode, sink);
}
