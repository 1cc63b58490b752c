#!/usr/bin/env bash
# One device call of the skinny-kernel study: GPU tests of the family, a paired sweep of its configs
# against the four cuBLAS-family baselines, Nsight Compute of representative shapes. Stages as args:
#   tests  sweep  ncu   (env: SWEEP_SHAPES, SWEEP_SPECS, SWEEP_BUDGET, SWEEP_LIMIT, NCU_CASES="spec@shape@layout ...")
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT" /tmp/hb
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD COLUMNS=200
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/hb-py/site-packages .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/hb-py/site-packages || echo "wheel install failed"
fi
[ -d .hbcache ] && export HGEMM_BUILD_CACHE=$PWD/.hbcache
log() { echo "== $(date -u +%H:%M:%S) $*"; }
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader
for stage in ${*:-tests sweep}; do
  case $stage in
    tests)
      log "pytest skinny"
      timeout -s INT "${TEST_LIMIT:-240}" python3 -m pytest -m gpu -q -x --timeout 120 -p no:cacheprovider tests/test_kernels_gpu.py -k skinny 2>&1 \
        | tee "$OUT/pytest-skinny.txt" | tail -15 ;;
    sweep)
      log "sweep"
      timeout -s INT -k 20 "${SWEEP_LIMIT:-300}" python3 -m harness.cli compare --shapes "$SWEEP_SHAPES" \
        --methods "torch,cublas,cublaslt,cublaslt-autotune,$SWEEP_SPECS" --budget "${SWEEP_BUDGET:-0.5}" \
        --out "$OUT/sweep.parquet" --fresh --seed 11 > "$OUT/sweep.txt" 2>&1
      tail -3 "$OUT/sweep.txt"
      python3 lab/skinny/table.py "$OUT/sweep.parquet" 2>&1 | tee "$OUT/sweep-table.md" ;;
    ncu)
      log "ncu"
      mkdir -p /tmp/hb/ncu
      metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
      i=0
      for case in $NCU_CASES; do
        IFS=@ read -r spec shape lay <<< "$case"; i=$((i + 1))
        timeout 90 ncu --clock-control none --nvtx --nvtx-include "timed/" --csv --page raw --print-units base --metrics "$metrics" \
          python3 scripts/ncu_case.py "$spec" "$shape" "$lay" > "/tmp/hb/ncu/$(printf %02d $i)-${shape}-${lay}-${spec//[:=,]/_}.csv" 2>&1 \
          || echo "ncu failed: $case"
      done
      python3 scripts/ncu_table.py /tmp/hb/ncu/*.csv 2>&1 | tee "$OUT/ncu.md"
      tar czf "$OUT/ncu.tgz" -C /tmp/hb ncu ;;
  esac
done
log done
