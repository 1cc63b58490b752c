#!/usr/bin/env bash
# One device call after the product/lab split (issue 32) and the skinny study (issue 33):
#   1. the GPU tests of the harness, baselines, sandbox/anti-cheat, extern loaders and the mma.sync
#      families (skinny, smalltile);
#   2. 10 library shapes with the four baselines and `library`, measured by the tree before the split
#      (.before/, an export of bdb6ce7's packages) and by this tree, one after the other: the library's
#      speedup over cuBLASLt autotune per shape must agree within noise;
#   3. the skinny preset chosen by decode row count on the 20 decode shapes (lab/skinny/decode-rule-plan.txt).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT" /tmp/hb
export PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/hb-py/site-packages .whl/*.whl \
  || echo "wheel install failed"
export HGEMM_BUILD_CACHE=$PWD/.hbcache
log() { echo "== $(date -u +%H:%M:%S) $*"; }
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
SHAPES=64_128_2048,64_256_2048,64_16384_64,128_512_64,256_128_64,512_2048_64,1024_128_64,2048_8192_64,8192_256_256,1024_4096_2048
METHODS=torch,cublas,cublaslt,cublaslt-autotune,library
for stage in ${*:-tests beforeafter decode ncu}; do
  case $stage in
    tests)
      log "pytest -m gpu"
      PYTHONPATH=$PWD:/tmp/hb-py/site-packages timeout -s INT "${TEST_LIMIT:-240}" python3 -m pytest -m gpu -q --timeout 120 -p no:cacheprovider \
        tests/test_timing_gpu.py tests/test_baselines_gpu.py tests/test_adversarial_gpu.py tests/test_extern_gpu.py \
        tests/test_kernels_gpu.py -k "${GPU_K:-skinny or smalltile or not kernels_gpu}" 2>&1 | tee "$OUT/pytest-gpu.txt" | tail -8 ;;
    beforeafter)
      for tree in before after; do
        dir=$PWD; [ $tree = before ] && dir=$PWD/.before
        log "compare ($tree)"
        (cd "$dir" && PYTHONPATH=$dir:/tmp/hb-py/site-packages timeout -s INT 150 python3 -m harness.cli compare --shapes "$SHAPES" \
          --methods "$METHODS" --budget 0.5 --out "/tmp/hb/$tree.parquet" --fresh --seed 21 > "/tmp/hb/$tree.txt" 2>&1; tail -2 "/tmp/hb/$tree.txt")
        cp "/tmp/hb/$tree.parquet" "$OUT/"
      done
      PYTHONPATH=$PWD:/tmp/hb-py/site-packages python3 lab/restructure/compare_trees.py /tmp/hb/before.parquet /tmp/hb/after.parquet | tee "$OUT/beforeafter.md" ;;
    decode)
      log "skinny rule on decode-20"
      PYTHONPATH=$PWD:/tmp/hb-py/site-packages timeout -s INT 200 python3 -m harness.cli compare --plan lab/skinny/decode-rule-plan.txt \
        --methods torch,cublas,cublaslt,cublaslt-autotune --budget 0.5 --out /tmp/hb/decode-rule.parquet --fresh --seed 22 > /tmp/hb/decode-rule.txt 2>&1
      tail -2 /tmp/hb/decode-rule.txt; cp /tmp/hb/decode-rule.parquet "$OUT/"
      PYTHONPATH=$PWD:/tmp/hb-py/site-packages python3 lab/skinny/table.py /tmp/hb/decode-rule.parquet | tee "$OUT/decode-rule.md" | tail -4 ;;
    ncu)
      log "ncu"
      mkdir -p /tmp/hb/ncu
      metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread
      i=0
      for case in $NCU_CASES; do
        IFS=@ read -r spec shape lay <<< "$case"; i=$((i + 1))
        PYTHONPATH=$PWD:/tmp/hb-py/site-packages timeout 90 ncu --clock-control none --nvtx --nvtx-include "timed/" --csv --page raw --print-units base --metrics "$metrics" \
          python3 scripts/ncu_case.py "$spec" "$shape" "$lay" > "/tmp/hb/ncu/$(printf %02d $i)-${shape}-${lay}-${spec//[:=,]/_}.csv" 2>&1 \
          || echo "ncu failed: $case"
      done
      PYTHONPATH=$PWD:/tmp/hb-py/site-packages python3 scripts/ncu_table.py /tmp/hb/ncu/*.csv 2>&1 | tee "$OUT/ncu.md" ;;
  esac
done
log done
