// l2_promo (hopper family knob): every TMA descriptor CUTLASS encodes asks the L2 to promote a miss
// to a HG_L2_PROMOTION request (cute's make_tma_copy_desc hard-codes CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
// DeepGEMM's hand-made descriptors use 256 B). With a 64-element K tile each row of an A or B box
// is 128 bytes, so a 256-byte promotion also fetches the row's next k-tile from DRAM.
// How: with CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL, cutlass::call_cuTensorMapEncodeTiled calls
// cuTensorMapEncodeTiled by name; that name is defined below to hg_encode_tiled, which resolves
// the driver's function through the runtime (as CUTLASS does, so nothing links libcuda) and
// passes every argument on but the promotion. Substituted into the source only when the knob is
// set, so every other config renders (and caches) the source it had before.
#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
static CUresult hg_encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* addr,
                                const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                const cuuint32_t* elem_strides, CUtensorMapInterleave interleave,
                                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion /*CUTLASS's*/,
                                CUtensorMapFloatOOBfill oob) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    void* pfn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pfn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess || found != cudaDriverEntryPointSuccess || pfn == nullptr)
      return CUDA_ERROR_UNKNOWN;
    encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(pfn);
  }
  return encode(map, type, rank, addr, dims, strides, box, elem_strides, interleave, swizzle,
                HG_L2_PROMOTION, oob);
}
#define cuTensorMapEncodeTiled hg_encode_tiled
