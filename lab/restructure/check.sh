#!/usr/bin/env bash
# The device check after the product/lab split (issue 32) and of the skinny family (issue 33), one call:
#   GPU tests of the harness, baselines, sandbox/anti-cheat, extern loaders and the mma.sync families,
#   the skinny stage, Nsight Compute cases (scripts/gpu_check.sh tests skinny ncu; set NCU_CASES), and
#   10 library shapes with the four baselines and `library`, measured by the tree before the split
#   (.before/, an export of bdb6ce7's packages) and by this tree one after the other: the library's
#   speedup over cuBLASLt autotune per shape must agree within noise (lab/restructure/compare_trees.py).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT" /tmp/hb
GPU_TESTS="tests/test_timing_gpu.py tests/test_baselines_gpu.py tests/test_adversarial_gpu.py tests/test_extern_gpu.py tests/test_kernels_gpu.py" \
  GPU_K="${GPU_K:-skinny or smalltile or not kernels_gpu}" bash scripts/gpu_check.sh tests skinny ncu
export PYTHONUNBUFFERED=1 COLUMNS=200 HGEMM_BUILD_CACHE=$PWD/.hbcache PYTHONPATH=/tmp/hb-py/site-packages  # wheels from gpu_check
SHAPES=64_128_2048,64_256_2048,64_16384_64,128_512_64,256_128_64,512_2048_64,1024_128_64,2048_8192_64,8192_256_256,1024_4096_2048
for tree in before after; do
  dir=$PWD; [ $tree = before ] && dir=$PWD/.before
  echo "== $(date -u +%H:%M:%S) compare ($tree)"
  (cd "$dir" && PYTHONPATH=$dir:$PYTHONPATH timeout -s INT 150 python3 -m harness.cli compare --shapes "$SHAPES" \
    --methods torch,cublas,cublaslt,cublaslt-autotune,library --budget 0.5 --out "/tmp/hb/$tree.parquet" --fresh --seed 21 \
    > "/tmp/hb/$tree.txt" 2>&1; tail -2 "/tmp/hb/$tree.txt")
  cp "/tmp/hb/$tree.parquet" "$OUT/"
done
PYTHONPATH=$PWD:$PYTHONPATH python3 lab/restructure/compare_trees.py /tmp/hb/before.parquet /tmp/hb/after.parquet | tee "$OUT/beforeafter.md"
