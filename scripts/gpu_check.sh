#!/usr/bin/env bash
# One device call: install carried wheels, run the GPU tests, run short benchmarks, print a table.
#
#   scripts/gpu_check.sh [STAGE ...]      (default: env tests smoke)
# STAGES
#   env      nvidia-smi, `hgemm-bench env`
#   tests    pytest -m gpu (every GPU test in the suite; GPU_TESTS='file ...' and GPU_K='-k expr' narrow it;
#            -k matches test ids: GPU_K=streamk also selects the CUTLASS hopper stream-K cases, which need
#            the CUTLASS wheel carried, GPU_K=triton_streamk does not)
#   smoke    compare --shapes smoke, offline, all baselines, both layouts
#   server   compare --shapes smoke --mode server --qps 200
#   server4  issue 35's server-mode check: 64_64_64, 256_128_16384, 1_4096_4096 and 4096_4096_4096, the four baselines,
#            --mode both --cache both, then lab.throughput.server_check (server against offline per method and layout,
#            nn against tn); SERVER4_CACHE narrows the caches (warm or cold); SERVER4_EXTRA: more compare options
#            (e.g. --cold-by-events)
#   coldprobe lab/throughput/cold_probe.py: offline cold's time on shapes that flush, split into the events' cost on one
#            call, the flush's tail and the kernels' own (CUPTI) time
#   repeat   the same shapes twice in one run (run-to-run agreement)
#   grid50   50 shapes spread over the cuda-l2 grid (harness throughput, extrapolated to 1,000)
#   cold     compare --shapes smoke --cache cold
#   fewtile  the library against the four baselines on the 60 + 60 seeded few-tile grid shapes (lab/fewtile/),
#            scored per class by lab/skinny/table.py (needs the CUTLASS wheel and the library's binaries:
#            .hbstate/cache*.tar.xz built from lab/fewtile/few120-library-plan.txt); fewtile-noprime: the same with
#            --no-prime (what the eager call before each graph sample changes)
#   grid100  the packaged library against the four baselines on 100 seeded grid shapes (lab/library/grid-sample100-seed3401.txt),
#            scored by lab/skinny/table.py and lab.library_check (needs the CUTLASS wheel and the library's binaries, as fewtile)
#   fewtilelib the split-K cluster families' presets on the 120 few-tile class shapes, a library rebuilt from the packaged
#            sources plus that run for this GPU model, then that library beside the packaged one, measured apart
#   tune20   issue 34's tune check: `hgemm-bench build` (all cores; a carried .hbstate/cache-pool.tar.xz, unpacked into
#            .hbcache, makes it a no-op), then `tune --per-shape TUNE_PER_SHAPE (60s)` on the 10 model-config shapes and 10
#            seeded grid shapes of lab/tune/shapes20.txt, the GPU's utilization sampled every 0.5 s meanwhile, then a separate
#            compare of the library against the four baselines, scored by lab/skinny/table.py; stopped by SIGINT at
#            TUNE_LIMIT (480 s) after the stage began, or at TUNE_END (epoch seconds) when set (tune resumes from
#            $OUT/tune-state.tgz carried as .hbstate/tune-state.tgz);
#            TUNE_SHAPES replaces the shape file, TUNE_NO_COMPARE=1 skips the compare, TUNE_TOP=N measures at most
#            the N best-ranked candidates a shape (tune --top)
#   batchab  compare's defaults against --batch-us BATCHAB_US (300) on BATCHAB_SHAPES (lab/throughput/grid40-seed35.txt),
#            the four baselines, both layouts, each run's wall time, then lab/throughput/batch_ab.py: do the two rank
#            alike (speedups over cuBLASLt autotune per shape and method) and what the shorter batches saved
#   autotuneab the default cuBLASLt autotune and AUTOTUNEAB_CHEAP (cublaslt-autotune:keep=0.1,final_rounds=5; AUTOTUNEAB_CHEAP2:
#            a second variant beside it) in one compare
#            on BATCHAB_SHAPES with the other baselines, then lab/throughput/autotune_ab.py: does the cheaper tuning pick
#            as fast a kernel, and what it saves in setup_s; AUTOTUNEAB_BOTH_ORDERS=1: a second compare with the variant
#            prepared first (the second tuning of a shape finds the candidates' modules loaded); the runs come back as
#            autotuneab-runs.tgz
#   grid     the full cuda-l2 grid (1,000 shapes), the four baselines, both layouts, offline, warm, compare's
#            defaults; resumed from a carried .hbstate/grid.tgz (an earlier call's $OUT/grid.tgz), stopped by
#            SIGINT after GRID_LIMIT (540) s keeping the shapes it finished; each call's wall time is appended
#            to grid-walls.txt inside the tarball, so the calls' sum is the grid's wall time; GRID_SHAPES: another
#            --shapes (the part of the grid a state from another GPU had not reached: a run never mixes GPUs)
#   families pytest -m gpu on the kernel families, the adversarial kernels and the extern loaders
#   sweep    compare the curated family sweep (scripts/family_sweep.py --set SWEEP_SET, default
#            all) against the baselines on SWEEP_SHAPES (default smoke), then the best family
#            config per shape (SWEEP_SPECS='spec,spec' replaces the set; SWEEP_LAYOUTS narrows layouts;
#            SWEEP_LIMIT, default 480 s, interrupts the compare, keeping the shapes it finished)
#   skinny   the skinny family: its GPU tests, then the preset chosen by decode row count on the 20 decode
#            shapes (lab/skinny/decode-rule-plan.txt) against the four baselines, scored by lab/skinny/table.py
#   gemv     the gemv family: its GPU tests (GEMV_TESTS_K: another -k expression, none to skip; at most GEMV_TESTS_LIMIT
#            seconds (300) and GEMV_TESTS_MAXFAIL failures (5); when they fail, lab/fewtile/dsmem_diag.py on the
#            GEMV_DIAG cases, SPEC[@SHAPE] ...), then, unless they failed (GEMV_MEASURE_ANYWAY=1: even so), GEMV_PLAN
#            (default lab/gemv/sweep1.txt: configs per decode row count on the 20 decode shapes; any plan serves,
#            e.g. lab/fewtile/regs-plan.txt) against the four baselines (GEMV_CACHE: warm, cold or both), scored by
#            lab/skinny/table.py --pivot (GEMV_SCORE: another scoring command, given the run's Parquet; GEMV_CHOSEN: a
#            shape<TAB>method file scored alone)
#   readfloor lab/gemv/read_floor.py: the fastest plain read of each decode shape's weights (READFLOOR_SHAPES) and reads
#            with GEMV access patterns, beside torch.matmul and READFLOOR_SPECS, warm and cold
#   budget   a search with --budget BUDGET_BUDGET (2m) on BUDGET_SHAPES from an empty build cache into a pipe: its
#            progress lines and wall time
#   ncu      Nsight Compute counters (--clock-control none) of NCU_CASES (spec@shape@layout ...), or of NCU_SPECS on NCU_SHAPES in
#            NCU_LAYOUTS (one timed call each, scripts/ncu_case.py), as a table (scripts/ncu_table.py); NCU_SECTIONS
#            adds whole sections (e.g. WarpStateStats MemoryWorkloadAnalysis), NCU_EXTRA_METRICS more metrics, NCU_CACHE=none
#            keeps the caches warm from the case's warm-up call (default all: flushed), the raw CSVs come back as ncu-csv.tgz
#            (NCU_PAGE=source: per-SASS-instruction metrics instead, e.g. with NCU_SECTIONS=SourceCounters for stalls by PC)
#   search   the kernel search (40 sampled cuda-l2 shapes, SEARCH_BUDGET 20m in all) in slices of at most
#            SEARCH_RUN_LIMIT (8m) per call, resumed from $SEARCH_DIR (results/search-h200-g); the call that finishes the
#            budget also runs the held-out first pick (--holdout 20, part of the search command). State
#            and new builds come back as $OUT/search-state.tgz and $OUT/cache-new.tgz (see the stage);
#            SEARCH_HOLDOUT_SEED and SEARCH_HOLDOUT_EXCLUDE (a shape file) choose the held-out shapes,
#            SEARCH_FIRST_PICK_RULE (ranked, the default, or paired) the rule that picks on them
#            (with search's defaults: evidence on 10 shapes, 2 of them near, and this GPU's packaged evidence)
#   profile  the kernels PROFILE_SPECS launch on PROFILE_SHAPES and their durations (scripts/kernel_profile.py)
#   spread   how far apart separate instances of one method measure (SPREAD_CASES, scripts/instance_spread.py),
#            with a cuBLASLt workspace per instance and with the shared one
#   library  compare the exported library ($SEARCH_DIR/library.json, or LIBRARY_PATH) with the baselines on the
#            searched shapes (or LIBRARY_SHAPES), then lab/library_check.py's per-shape table vs cuBLASLt autotune
#   pickrules the held-out picks of two first-pick rules (PICK_RULES, default ranked/m10/n2/d/c/prior,paired/m10/n2/d/c/prior: the default and the one before it) of
#            $PICK_SEARCH_DIR's policy (default: the committed finished search of record,
#            kernels_search/library/search-h200-g), measured side by side in one compare call with
#            cuBLASLt autotune; a search stopped by a run limit is refused (lab/first_picks.py);
#            PICK_EXTRA_METHODS names a file of further specs measured in the same call; PICK_ALSO_PICKS a
#            file of picks made elsewhere (shape<TAB>spec), measured and reported as a column; PICK_SKIP_SHAPES a
#            file of shapes an earlier call finished (the rest of a draw its time limit stopped); PICK_PLAN=1
#            measures each shape's own picks only (compare --plan), not every pick on every shape; with it,
#            PICK_TOP=K measures each rule's K best-ranked configs per shape (a study of its near misses)
#   reexport lab/library/h200-sources.txt plus this call's Parquets in $OUT rebuilt into $OUT/library-reexport.json for
#            this GPU model (REEXPORT_SOURCES: more sources, e.g. an earlier call's Parquets under results/runs/); a later
#            fewtile or grid100 stage of the same call measures it beside the packaged library
#   plans    compare --plan for each of PLAN_FILES (plans written and registered beforehand, e.g. lab/studies/*.txt)
#            with cuBLASLt autotune, each stopped by SIGINT after PLAN_LIMIT (240) s keeping the shapes it
#            finished; binaries still missing are built first on every core (scripts/plan_prebuild.py);
#            then lab/study_table.py (PLAN_NEW: a file of specs set apart from the rest; PLAN_NEW_KNOB=KNOB=VALUE: every config with that knob value). What it built
#            comes back as $OUT/cache-new-<plan>.tgz (PLAN_BUILD_ONLY=1: build and pack only, measure nothing)
#   autotunegap lab/throughput/autotune_gap.py on AUTOTUNEGAP_CASES (SHAPE LAYOUT ...): autotune's kept call, the same algorithm
#            with the tuning's workspace, the heuristic's first candidate, cublaslt, timed offline, by the tuning path, offline again
#   fetchprobe lab/fewtile/fetch_probe.py --cluster: the fetch floor of G CTAs, and clusters of 8 with the DSMEM slice sum
#   timeline lab/fewtile/dsmem_timeline.py: splitk_dsmem's phases CTA by CTA (clock stamps patched into its source;
#            TIMELINE_CASES names SPEC@SHAPE cases, default the script's; stamped binaries prebuilt with --build-only
#            into a cache carried as .hbstate/cache-*.tar.xz)
#   contextab lab/throughput/context_ab.py: cuBLASLt autotune's device time on small deep-K shapes in a compare of the
#            baselines alone, in one with tune's 49 candidates of 64_64_16384 in every round, and in a fresh tune's calls
#   hostab   lab/throughput/host_rounds_ab.py: the baselines and one kernel on HOSTAB_SHAPES, HOSTAB_ROUNDS fixed rounds, with
#            nothing, the host-sampled rounds' synchronous eager call, an idle gap, or an unsynchronized eager call after
#            each device sample (which one sets cuBLAS's level on small deep-K shapes); HOSTAB_VARIANTS=none,prime,...
#            picks variants (prime: an eager call before each sample; fill: any eager kernel; direct: no graph)
#   primeab  compare with and without --no-prime, 40 fixed rounds on three small deep-K shapes, levels by round_modes
#   hostprobe lab/throughput/host_probe.py: a graph capture through torch.cuda.graph against capture_begin/end, and the
#            autotune's candidate validation with a host read per check against one read for all (issue 35, item 5)
#   ray      issue 35's scale-out on this host's GPU: Ray (the cp312 site of ray and the three packages the GPU image
#            lacks, carried packed as .hbstate/ray-site.tar.xz: too large as a wheel for the carry limit) unpacked
#            beside the carried wheels, then tests/test_scaleout.py with -m gpu (--gpus 1 against the single-process run)
#            (made by: python3 -m pip install --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
#             --platform manylinux2014_x86_64 --target DIR ray==2.60.0 jsonschema jsonschema-specifications referencing
#             rpds-py; tar -cf - -C DIR . | xz -9 > .hbstate/ray-site.tar.xz)
#   cudal2   per-shape external kernels, each judged on its own shape: CUDAL2_DIR (default .cudal2, ignored and
#            carried: kernels/M_N_K.cu, shapes.txt, claims.csv, as `python3 -m lab.cudal2.prepare` lays out CUDA-L2's
#            H100 kernels; their code is never committed) built in parallel (build --kernels-dir, at most
#            CUDAL2_BUILD_LIMIT 300 s), then compare --plan: each kernel on the shape its file is named for, the four
#            baselines on every shape, both layouts, --budget CUDAL2_BUDGET (2), stopped by SIGINT CUDAL2_DEADLINE (540) s
#            after the stage began (the shapes it finished kept); lab/cudal2/verdicts.py's table (status, the check that
#            failed and by how much, speedup vs the best baseline in the same rounds, their H100 claim) printed last.
#            Needs the nvidia-cutlass (CuTe headers) and nvmath-python (the cuBLAS baselines) wheels in .whl/.
#            Measured on an H200 from a fresh machine: 154 s (12 builds in parallel 118 s, compare 28 s; lab/cudal2/NOTES.md)
# A carried build cache (.hbcache, see scripts/family_sweep.py prebuild) saves the compiles.
# The GPU image lacks nvmath-python, the CUTLASS headers and LightGBM (the ranked first-pick rule):
# carry them as wheels in .whl/ (ignored), fetched here once (name .whl in the call's carry):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl nvidia-cutlass==4.2.0.0 nvmath-python==1.0.0 \
#     lightgbm==4.7.0
# (the device copies at most 64 MiB with the tree: name the wheels one by one in carry, and LightGBM only
# for stages that pick on the GPU host: tune20, search --holdout and pickrules; plans are picked here)
# Rows record the code's commit: a tree copied to the GPU host may carry a stale .git, so start the call with
# HGEMM_GIT_COMMIT=<git rev-parse HEAD here> (harness/provenance.py takes it first).
# Logs and results go under $OUT (or ./gpu-out when $OUT is unset): at most 8 files come back,
# so results directories are packed into one tarball.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT" /tmp/hb
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} COLUMNS=160
if ls .whl/*.whl >/dev/null 2>&1; then
  # a path ending in site-packages/ keeps build-cache keys identical to builds made elsewhere
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/hb-py/site-packages .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/hb-py/site-packages \
    || echo "wheel install failed"
fi
# a build cache may also travel packed (.hbstate/cache*.tar.xz: xz shrinks the CUTLASS binaries ~4x,
# so more fit the carry limit; packed together with a large dictionary, `tar -cf - . | xz -9e
# --lzma2=dict=192MiB`, they share most of their bytes and take half that again: 153 binaries took
# 5.4 MB. Ignored files do not always reach a new checkout; a plan's binaries can then be rebuilt
# from the plan (python -m lab.first_picks --prebuild, about 1 a minute on 2 cores);
# .hbstate/cache*.tgz: a search call's cache-new.tgz): unpacked into .hbcache
for pack in .hbstate/cache*.tar.xz .hbstate/cache*.tgz; do
  [ -f "$pack" ] || continue
  mkdir -p .hbcache && tar xf "$pack" -C .hbcache && echo "unpacked $pack into .hbcache ($(find .hbcache -name '*.so' | wc -l) binaries)"
done
[ -d .hbcache ] && export HGEMM_BUILD_CACHE=$PWD/.hbcache
# Without the CUTLASS headers every hopper-family kernel (the library's split-K entries among them) is
# skipped and its rows measure the next entry or a fallback: say so before anything is measured
python3 -c "from kernels_search.toolchain import cutlass_include_dirs; cutlass_include_dirs()" 2>/dev/null \
  || echo "WARNING: no CUTLASS headers (carry .whl/nvidia_cutlass-*.whl): hopper-family kernels and the library's CUTLASS entries will not be served"
HB="python3 -m harness.cli"
STAGES=${*:-env tests smoke}
log() { echo "== $(date -u +%H:%M:%S) $*"; }
SEARCH_DIR=${SEARCH_DIR:-results/search-h200-g}  # a finished search's folder (a new folder starts a fresh one)
restore_search() {
  # a carried copy of an earlier call's search state (see the search stage), when this machine has none
  # (only when the tarball holds that folder, $1 or $SEARCH_DIR: a new folder starts a fresh search)
  local dir=${1:-$SEARCH_DIR}
  if [ ! -d "$dir" ] && [ -f .hbstate/search-state.tgz ] \
      && tar tzf .hbstate/search-state.tgz "$dir" >/dev/null 2>&1; then
    tar xzf .hbstate/search-state.tgz "$dir" && echo "restored $dir from .hbstate/search-state.tgz"
  fi
}
for stage in $STAGES; do
  case $stage in
    env)
      log env
      nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
      $HB env 2>&1 | tee "$OUT/env.txt" ;;
    tests)
      log "pytest -m gpu"
      # test_layers.py holds no GPU test and imports import-linter, which the GPU image lacks (a collection error)
      python3 -m pytest -m gpu -q --timeout 300 -p no:cacheprovider ${GPU_TESTS:-tests} --ignore=tests/test_layers.py \
        ${GPU_K:+-k "$GPU_K"} 2>&1 | tee "$OUT/pytest-gpu.txt" | tail -30 ;;
    smoke)
      log "compare smoke offline"
      $HB compare --shapes smoke --out /tmp/hb/smoke.parquet --fresh --seed 1 2>&1 | tee "$OUT/smoke.txt" | tail -60 ;;
    server)
      log "compare smoke server"
      $HB compare --shapes smoke --mode server --qps 200 --out /tmp/hb/server.parquet --fresh --seed 2 2>&1 \
        | tee "$OUT/server.txt" | tail -40 ;;
    server4)
      log "server4: four shapes, --mode both --cache ${SERVER4_CACHE:-both}"
      $HB compare --shapes 64_64_64,256_128_16384,1_4096_4096,4096_4096_4096 --mode both --cache "${SERVER4_CACHE:-both}" \
        --seed 12 ${SERVER4_EXTRA:-} --out /tmp/hb/server4.parquet --fresh --label "server mode against offline, four shapes" > "$OUT/server4.txt" 2>&1
      tail -2 "$OUT/server4.txt"; cp /tmp/hb/server4.parquet "$OUT/"
      python3 -m lab.throughput.server_check /tmp/hb/server4.parquet 2>&1 | tee -a "$OUT/server4.txt" | tail -45 ;;
    coldprobe)
      log "coldprobe: offline cold on flushing shapes, by variant"
      python3 -m lab.throughput.cold_probe --out "$OUT/cold-probe.csv" 2>&1 | tee "$OUT/cold-probe.txt" | tail -30 ;;
    cold)
      log "compare smoke cold"
      $HB compare --shapes smoke --cache cold --out /tmp/hb/cold.parquet --fresh --seed 3 2>&1 | tee "$OUT/cold.txt" | tail -40
      cp /tmp/hb/cold.parquet "$OUT/" ;;
    repeat)
      log "repeat: 64_64_64,4096_4096_4096 measured twice in one run"
      python3 scripts/repeat_check.py /tmp/hb/repeat.parquet 2>&1 | tee "$OUT/repeat.txt" | tail -20 ;;
    grid50)
      log "grid50"
      # killed at GRID_LIMIT seconds if need be: the finished shapes still count for throughput
      start=$(date +%s)
      timeout -s INT "${GRID_LIMIT:-300}" $HB compare --shapes "$(python3 -c 'from harness.shapes import sample_grid; print(",".join(s.name for s in sample_grid(50)))')" \
        --budget "${GRID_BUDGET:-1.0}" --out /tmp/hb/grid50.parquet --fresh --seed 4 > "$OUT/grid50.txt" 2>&1
      end=$(date +%s)
      python3 scripts/throughput.py /tmp/hb/grid50.parquet $((end - start)) 2>&1 | tee -a "$OUT/grid50.txt" ;;
    fewtile|fewtile-noprime)
      # fewtile-noprime: the same compare with --no-prime (the offline timer without the eager call before each
      # graph sample), to say what the prime changes in the class figures
      name=$stage; extra=""; [ "$stage" = fewtile-noprime ] && extra="--no-prime"
      log "$name: library vs the four baselines, 60 + 60 few-tile grid shapes $extra"
      $HB compare --shapes lab/fewtile/deepk-60-seed3301.txt --shapes lab/fewtile/shallowk-60-seed3301.txt \
        --methods "library${REEXPORT_METHOD:+,$REEXPORT_METHOD},torch,cublas,cublaslt,cublaslt-autotune" --budget 1 --seed 6 \
        --out "/tmp/hb/$name.parquet" --fresh --label "few-tile classes, library${extra:+ ($extra)}" $extra > "$OUT/$name.txt" 2>&1
      grep -i "warning" "$OUT/$name.txt"; cp "/tmp/hb/$name.parquet" "$OUT/"
      python3 lab/skinny/table.py "/tmp/hb/$name.parquet" --by-class 2>&1 | tail -14 | tee -a "$OUT/$name.txt" ;;
    fewtilelib)
      # issue 33's classes through an automatic procedure after a kernel change: (1) the split-K cluster families'
      # presets with the four baselines on the 120 class shapes; (2) a library rebuilt from the packaged sources plus
      # (1), for this GPU model (lab/library/h200-sources.txt's runs count only on an H200); (3) a separate compare of
      # that library beside the packaged one and the four baselines, scored per class
      log "fewtilelib: split-K cluster presets on the 120 few-tile class shapes, a library rebuilt with them, measured apart"
      gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
      presets=$(python3 -c "from kernels_search.families import ALL
print(','.join(f'{f}:{p}' for f in ('splitk_dsmem', 'splitk_regs') for p in ALL[f].presets if 'swap=1' not in p))")
      $HB compare --shapes lab/fewtile/deepk-60-seed3301.txt --shapes lab/fewtile/shallowk-60-seed3301.txt \
        --methods "$presets,torch,cublas,cublaslt,cublaslt-autotune" --budget 1 --seed 7 --out /tmp/hb/fewtile-presets.parquet \
        --fresh --label "few-tile classes, split-K cluster presets" > "$OUT/fewtile-presets.txt" 2>&1
      tail -3 "$OUT/fewtile-presets.txt"; cp /tmp/hb/fewtile-presets.parquet "$OUT/"
      python3 -m kernels_search.search.library_build --gpu "$gpu" --out "$OUT/library-fewtile.json" \
        lab/library/h200-sources.txt /tmp/hb/fewtile-presets.parquet 2>&1 | tail -3
      $HB compare --shapes lab/fewtile/deepk-60-seed3301.txt --shapes lab/fewtile/shallowk-60-seed3301.txt \
        --methods "library,library:path=$OUT/library-fewtile.json,torch,cublas,cublaslt,cublaslt-autotune" --budget 1 --seed 6 \
        --out /tmp/hb/fewtile-lib.parquet --fresh --label "few-tile classes, library rebuilt" > "$OUT/fewtile-lib.txt" 2>&1
      tail -3 "$OUT/fewtile-lib.txt"; cp /tmp/hb/fewtile-lib.parquet "$OUT/"
      python3 lab/skinny/table.py /tmp/hb/fewtile-lib.parquet --by-class 2>&1 | tail -14 | tee -a "$OUT/fewtile-lib.txt" ;;
    grid100)
      log "grid100: library vs the four baselines, 100 seeded grid shapes"
      $HB compare --shapes lab/library/grid-sample100-seed3401.txt \
        --methods "library${REEXPORT_METHOD:+,$REEXPORT_METHOD},torch,cublas,cublaslt,cublaslt-autotune" --budget 1 --seed 6 \
        --out /tmp/hb/grid100.parquet --fresh --label "grid sample 100, library" > "$OUT/grid100.txt" 2>&1
      grep -i "warning" "$OUT/grid100.txt"; cp /tmp/hb/grid100.parquet "$OUT/"
      python3 lab/skinny/table.py /tmp/hb/grid100.parquet --by-class 2>&1 | tail -14 | tee -a "$OUT/grid100.txt"
      for lib in library ${REEXPORT_METHOD:-}; do
        python3 -m lab.library_check /tmp/hb/grid100.parquet --library "$lib" 2>&1 | tail -8 | tee -a "$OUT/grid100.txt"
      done ;;
    reexport)
      # the packaged library's sources plus this call's Parquets in $OUT (e.g. a plan's run), for this GPU model;
      # fewtile and grid100 after it measure that re-export beside the packaged library
      log "reexport: lab/library/h200-sources.txt plus $(ls "$OUT"/*.parquet 2>/dev/null | wc -l) Parquet(s) of this call ${REEXPORT_SOURCES:+and $REEXPORT_SOURCES}"
      gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
      python3 -m kernels_search.search.library_build --gpu "$gpu" --out "$OUT/library-reexport.json" \
        lab/library/h200-sources.txt $(ls "$OUT"/*.parquet 2>/dev/null) ${REEXPORT_SOURCES:-} 2>&1 | tail -2 \
        && REEXPORT_METHOD="library:path=$OUT/library-reexport.json" ;;
    tune20)
      shapes=${TUNE_SHAPES:-lab/tune/shapes20.txt}
      log "tune20: build, tune --per-shape ${TUNE_PER_SHAPE:-60s} on $shapes, compare the library"
      t0=$(date +%s)
      mkdir -p /tmp/hb/tune
      [ -f .hbstate/tune-state.tgz ] && tar xzf .hbstate/tune-state.tgz -C /tmp/hb/tune && echo "resumed tune state"
      export XDG_DATA_HOME=/tmp/hb/tune/data  # the user's library (what tune writes and compare's library reads first)
      $HB build 2>&1 | tail -1 | tee "$OUT/tune20-build.txt"
      nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 500 > /tmp/hb/tune/gpu-util.txt & util=$!
      left=$(( ${TUNE_LIMIT:-480} - ($(date +%s) - t0) ))
      [ -n "${TUNE_END:-}" ] && left=$(( TUNE_END - $(date +%s) ))  # an absolute end (epoch s) after earlier stages
      [ "$left" -lt 30 ] && left=30  # timeout 0 would mean none
      timeout -s INT "$left" $HB tune --shapes "$shapes" --per-shape "${TUNE_PER_SHAPE:-60s}" \
        ${TUNE_TOP:+--top $TUNE_TOP} --out /tmp/hb/tune/run > "$OUT/tune20.txt" 2>&1
      rc=$?; echo "tune rc=$rc after $(( $(date +%s) - t0 )) s"
      kill $util
      python3 -c "import sys; v=[float(x) for x in open(sys.argv[1]) if x.strip()]; print(f'GPU busy (utilization > 0) in {sum(x > 0 for x in v) / len(v):.0%} of {len(v)} samples, mean {sum(v) / len(v):.0f} %')" \
        /tmp/hb/tune/gpu-util.txt 2>&1 | tee -a "$OUT/tune20.txt"
      grep "^\[" "$OUT/tune20.txt" | cut -c1-100
      tar czf "$OUT/tune-state.tgz" -C /tmp/hb/tune run data
      if [ "$rc" = 0 ] && [ -z "${TUNE_NO_COMPARE:-}" ]; then
        $HB compare --shapes "$shapes" --methods library,torch,cublas,cublaslt,cublaslt-autotune \
          --budget 1 --seed 6 --out /tmp/hb/tune20.parquet --fresh --label "tune20: the library after tune" > "$OUT/tune20-compare.txt" 2>&1
        python3 lab/skinny/table.py /tmp/hb/tune20.parquet 2>&1 | tail -4 | tee -a "$OUT/tune20-compare.txt"
        # the compare's Parquet travels inside the state tarball (a call brings back at most 8 files), for
        # lab.tune.entries_vs_compare beside the library the tune wrote
        cp /tmp/hb/tune20.parquet /tmp/hb/tune/ && tar czf "$OUT/tune-state.tgz" -C /tmp/hb/tune run data tune20.parquet
      elif [ "$rc" != 0 ]; then
        echo "tune not finished: carry $OUT/tune-state.tgz as .hbstate/tune-state.tgz and run the stage again"
      fi ;;
    batchab)
      shapes=${BATCHAB_SHAPES:-lab/throughput/grid40-seed35.txt}
      log "batchab: --batch-us default against ${BATCHAB_US:-300} on $shapes"
      for us in default "${BATCHAB_US:-300}"; do
        t0=$(date +%s.%N)
        $HB compare --shapes "$shapes" --seed 11 --fresh --out "/tmp/hb/batch-$us.parquet" \
          $([ "$us" = default ] || echo --batch-us "$us") > "$OUT/batchab-$us.txt" 2>&1
        python3 -c "print(round($(date +%s.%N) - $t0, 1))" > "/tmp/hb/batch-$us.wall"
        echo "batch $us: $(cat /tmp/hb/batch-$us.wall) s"
      done
      python3 -m lab.throughput.batch_ab /tmp/hb/batch-default.parquet "/tmp/hb/batch-${BATCHAB_US:-300}.parquet" \
        --wall-a "$(cat /tmp/hb/batch-default.wall)" --wall-b "$(cat /tmp/hb/batch-${BATCHAB_US:-300}.wall)" 2>&1 | tee "$OUT/batchab.md" ;;
    autotuneab)
      cheap=${AUTOTUNEAB_CHEAP:-cublaslt-autotune:keep=0.1,final_rounds=5}
      cheap2=${AUTOTUNEAB_CHEAP2:-}  # a second variant in the same compares, scored against the default apart
      variants="$cheap${cheap2:+,$cheap2}"
      ab_score() { for v in "$cheap" $cheap2; do
        python3 -m lab.throughput.autotune_ab "$1" --cheap "$v" 2>&1 | tee -a "$OUT/autotuneab.md"; done; }
      log "autotuneab: cublaslt-autotune against $variants on ${BATCHAB_SHAPES:-lab/throughput/grid40-seed35.txt}"
      $HB compare --shapes "${BATCHAB_SHAPES:-lab/throughput/grid40-seed35.txt}" --seed 12 --fresh --out /tmp/hb/autotuneab.parquet \
        --methods "torch,cublas,cublaslt,cublaslt-autotune,$variants" > "$OUT/autotuneab.txt" 2>&1
      ab_score /tmp/hb/autotuneab.parquet
      if [ -n "${AUTOTUNEAB_BOTH_ORDERS:-}" ]; then  # the variants prepared first: what runs second finds modules loaded
        log "autotuneab: the same with $variants prepared before cublaslt-autotune"
        echo "(variants first)" >> "$OUT/autotuneab.md"
        $HB compare --shapes "${BATCHAB_SHAPES:-lab/throughput/grid40-seed35.txt}" --seed 13 --fresh --out /tmp/hb/autotuneab2.parquet \
          --methods "torch,cublas,cublaslt,$variants,cublaslt-autotune" > "$OUT/autotuneab2.txt" 2>&1
        ab_score /tmp/hb/autotuneab2.parquet
      fi
      mkdir -p /tmp/hb/ab-runs && cp /tmp/hb/autotuneab*.parquet /tmp/hb/ab-runs/ && tar czf "$OUT/autotuneab-runs.tgz" -C /tmp/hb ab-runs ;;
    autotunegap)
      log "autotunegap: autotune's kept call against its own tuning (lab/throughput/autotune_gap.py)"
      python3 -m lab.throughput.autotune_gap ${AUTOTUNEGAP_CASES:-1024_256_16384 nn 16384_1024_16384 tn 512_2048_4096 nn 256_4096_4096 tn} \
        2>&1 | tee "$OUT/autotune-gap.txt" ;;
    fetchprobe)
      log "fetchprobe: the few-tile fetch floor and the cluster split-K sum's cost (lab/fewtile/fetch_probe.py --cluster)"
      mkdir -p /tmp/hb && nvcc -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o /tmp/hb/fetch_probe.so \
        lab/fewtile/fetch_probe.cu && python3 -m lab.fewtile.fetch_probe --lib /tmp/hb/fetch_probe.so --cluster \
        --out "$OUT/fetch-probe.csv" 2>&1 | tee "$OUT/fetch-probe.txt" ;;
    timeline)
      log "timeline: splitk_dsmem CTA by CTA, clock stamps patched into its source (lab/fewtile/dsmem_timeline.py)"
      timeout -k 10 "${TIMELINE_LIMIT:-240}" python3 -m lab.fewtile.dsmem_timeline ${TIMELINE_CASES:-} --out "$OUT/timeline.jsonl" \
        2>&1 | tee "$OUT/timeline.txt" ;;
    contextab)
      # the tune-context question (lab/throughput/context_ab.py): baselines alone, with the 49 candidates tune measured
      # on 64_64_16384 in every round, then a fresh tune, on the small deep-K shapes where tune's baselines ran slow
      shapes=${CONTEXTAB_SHAPES:-64_64_16384,512_64_4096,64_512_12288,256_128_8192,512_12288_512}
      log "contextab: baselines alone, with many candidates, and in a fresh tune on $shapes"
      $HB compare --shapes "$shapes" --seed 21 --fresh --out /tmp/hb/ctx-alone.parquet > "$OUT/ctx-alone.txt" 2>&1
      specs=$(grep -v '^#' lab/throughput/context-specs.txt | paste -sd, -)
      timeout -s INT "${CONTEXTAB_MANY_LIMIT:-150}" $HB compare --shapes "${CONTEXTAB_MANY_SHAPES:-64_64_16384,64_512_12288}" --seed 21 --fresh \
        --methods "torch,cublas,cublaslt,cublaslt-autotune,$specs" --out /tmp/hb/ctx-many.parquet > "$OUT/ctx-many.txt" 2>&1
      tail -2 "$OUT/ctx-many.txt"
      mkdir -p /tmp/hb/ctx-tune && XDG_DATA_HOME=/tmp/hb/ctx-tune/data timeout -s INT "${CONTEXTAB_TUNE_LIMIT:-120}" $HB tune --shapes "$shapes" \
        --per-shape "${CONTEXTAB_PER_SHAPE:-12s}" --out /tmp/hb/ctx-tune/run > "$OUT/ctx-tune.txt" 2>&1
      tar czf "$OUT/contextab.tgz" -C /tmp/hb ctx-alone.parquet ctx-alone.samples ctx-many.parquet ctx-many.samples ctx-tune/run 2>/dev/null
      python3 -m lab.throughput.context_ab alone=/tmp/hb/ctx-alone.parquet many=/tmp/hb/ctx-many.parquet \
        tune=/tmp/hb/ctx-tune/run/db 2>&1 | tee "$OUT/contextab.md" ;;
    hostab)
      # does the host-sampled rounds' eager call set cuBLAS's level on small deep-K shapes? (lab/throughput/host_rounds_ab.py)
      log "hostab: the baselines and one kernel, fixed rounds, variants of what follows or precedes each device sample"
      timeout -s INT -k 20 "${HOSTAB_LIMIT:-300}" python3 -m lab.throughput.host_rounds_ab ${HOSTAB_SHAPES:+--shapes "$HOSTAB_SHAPES"} \
        --rounds "${HOSTAB_ROUNDS:-30}" ${HOSTAB_VARIANTS:+--variants "$HOSTAB_VARIANTS"} --out "$OUT/hostab.parquet" 2>&1 \
        | tee "$OUT/hostab.md" | tail -30 ;;
    primeab)
      # the offline timer with and without the eager call before each graph sample, 40 fixed rounds on small deep-K
      # shapes (long compares are where cuBLAS's level moved: tune's calls, contextab), per-round levels by round_modes
      shapes=${PRIMEAB_SHAPES:-64_64_16384,512_64_4096,128_256_4096}
      for v in prime noprime; do
        log "primeab $v: library and the four baselines on $shapes, 40 fixed rounds"
        $HB compare --shapes "$shapes" --methods library,torch,cublas,cublaslt,cublaslt-autotune --ci-target 1e-9 \
          --min-rounds 40 --max-rounds 40 --budget 300 --seed 21 --fresh --out "/tmp/hb/primeab-$v.parquet" \
          $([ $v = noprime ] && echo --no-prime) > "/tmp/hb/primeab-$v.txt" 2>&1
        { echo "## $v"; python3 -m lab.throughput.round_modes "/tmp/hb/primeab-$v.parquet" --min-k 2048;
          python3 lab/skinny/table.py "/tmp/hb/primeab-$v.parquet" 2>&1 | tail -6; } | tee -a "$OUT/primeab.md"
        cp "/tmp/hb/primeab-$v.parquet" "$OUT/"
      done ;;
    hostprobe)
      log "hostprobe: capture and validation host costs (lab/throughput/host_probe.py)"
      python3 -m lab.throughput.host_probe 2>&1 | tee "$OUT/hostprobe.md" ;;
    ray)
      log "ray: compare --gpus 1 against the single-process run (tests/test_scaleout.py -m gpu)"
      if [ -f .hbstate/ray-site.tar.xz ]; then
        mkdir -p /tmp/hb-ray/site-packages && tar xJf .hbstate/ray-site.tar.xz -C /tmp/hb-ray/site-packages
        export PYTHONPATH=$PYTHONPATH:/tmp/hb-ray/site-packages
      fi
      python3 -c "import ray; print('ray', ray.__version__)" 2>&1 | tail -1 | tee "$OUT/ray.txt"
      python3 -m pytest -m gpu -q --timeout 300 -p no:cacheprovider tests/test_scaleout.py 2>&1 | tee -a "$OUT/ray.txt" | tail -15 ;;
    grid)
      log "grid: cuda-l2, four baselines, nn+tn, offline warm, defaults (resumed when carried)"
      mkdir -p /tmp/hb/grid
      [ -f .hbstate/grid.tgz ] && tar xzf .hbstate/grid.tgz -C /tmp/hb/grid && echo "resumed: $(cat /tmp/hb/grid/grid-walls.txt)"
      start=$(date +%s.%N)
      timeout -s INT "${GRID_LIMIT:-540}" $HB compare --shapes "${GRID_SHAPES:-cuda-l2}" --out /tmp/hb/grid/grid.parquet --seed 11 \
        --label "cuda-l2 grid, four baselines" > "$OUT/grid.txt" 2>&1
      end=$(date +%s.%N)
      wall=$(python3 -c "print(round($end - $start, 1))")
      echo "$wall" >> /tmp/hb/grid/grid-walls.txt
      total=$(python3 -c "print(round(sum(float(x) for x in open('/tmp/hb/grid/grid-walls.txt')), 1))")
      tar czf "$OUT/grid.tgz" -C /tmp/hb/grid .
      python3 scripts/throughput.py /tmp/hb/grid/grid.parquet "$total" 2>&1 | tee -a "$OUT/grid.txt"
      echo "grid: this call $wall s; all calls $total s ($(cat /tmp/hb/grid/grid-walls.txt | tr '\n' ' '))" | tee -a "$OUT/grid.txt" ;;
    families)
      log "pytest -m gpu: families, adversarial, extern"
      timeout -s INT "${FAMILIES_LIMIT:-300}" python3 -m pytest -m gpu -q --timeout 120 -p no:cacheprovider tests/test_kernels_gpu.py \
        tests/test_adversarial_gpu.py tests/test_extern_gpu.py 2>&1 | tee "$OUT/pytest-families.txt" | tail -30 ;;
    sweep)
      specs=${SWEEP_SPECS:-$(python3 scripts/family_sweep.py specs --set "${SWEEP_SET:-all}")}
      log "family sweep ${SWEEP_SPECS:+(SWEEP_SPECS) }${SWEEP_SET:-all} on ${SWEEP_SHAPES:-smoke}, layouts ${SWEEP_LAYOUTS:-nn,tn}"
      # one results file per (methods, layouts, budget): a rerun of the same sweep on a warm machine
      # resumes it, while another sweep never finds its shapes "finished" by the last one's rows
      sweep=/tmp/hb/sweep-$(echo "$specs ${SWEEP_LAYOUTS:-nn,tn} ${SWEEP_BUDGET:-1.5}" | md5sum | cut -c1-10).parquet
      timeout -s INT -k 30 "${SWEEP_LIMIT:-480}" $HB compare --shapes "${SWEEP_SHAPES:-smoke}" \
        --methods "torch,cublas,cublaslt,cublaslt-autotune,$specs" --layouts "${SWEEP_LAYOUTS:-nn,tn}" --budget "${SWEEP_BUDGET:-1.5}" --out "$sweep" --seed 5 > "$OUT/sweep.txt" 2>&1
      tail -5 "$OUT/sweep.txt"
      python3 scripts/best_family.py "$sweep" 2>&1 | tee "$OUT/best_family.md" ;;
    plans)
      export HGEMM_BUILD_CACHE=${HGEMM_BUILD_CACHE:-$PWD/.hbcache}
      mkdir -p "$HGEMM_BUILD_CACHE"
      for plan in ${PLAN_FILES:?PLAN_FILES names the plan files}; do
        name=$(basename "$plan" .txt)
        log "plan $plan"
        stamp=/tmp/hb/plan-$name.stamp
        touch "$stamp"
        python3 scripts/plan_prebuild.py "$plan" 2>&1 | tail -3
        # what this call built comes back, to carry into the next (.hbstate/cache-new-*.tgz)
        python3 scripts/cache_pack.py "$OUT/cache-new-$name.tgz" --cache "$HGEMM_BUILD_CACHE" --newer "$stamp" \
          --limit-mib 15 2>&1 | tail -1
        [ "${PLAN_BUILD_ONLY:-0}" = 1 ] && continue
        # results and per-shape samples under /tmp/hb (packed into results.tgz): only the Parquet and the
        # table go to $OUT itself, so two plans' files stay within the 8 that come back
        timeout -s INT -k 20 "${PLAN_LIMIT:-240}" $HB compare --plan "$plan" --methods cublaslt-autotune \
          --budget "${PLAN_BUDGET:-0.3}" --out "/tmp/hb/$name.parquet" --fresh --seed 7 > "/tmp/hb/$name.txt" 2>&1
        tail -3 "/tmp/hb/$name.txt"
        [ -f "/tmp/hb/$name.parquet" ] && cp "/tmp/hb/$name.parquet" "$OUT/"  # none when no shape finished
        python3 -m lab.study_table "$OUT/$name.parquet" --plan "$plan" ${PLAN_NEW:+--new "$PLAN_NEW"} ${PLAN_NEW_KNOB:+--new-knob "$PLAN_NEW_KNOB"} \
          --per-shape > "$OUT/$name.md" 2>&1
        head -7 "$OUT/$name.md"
      done ;;
    gemv)
      log "gemv: GPU tests, the decode plan ${GEMV_PLAN:-lab/gemv/sweep1.txt}"
      tests_failed=
      if [ "${GEMV_TESTS_K:-gemv}" != none ]; then
        # a kernel that hangs blocks pytest's own timeout inside a CUDA call: the shell's timeout bounds the stage,
        # and the first failures stop it (code that has never run fails alike on every case)
        timeout -k 10 "${GEMV_TESTS_LIMIT:-300}" python3 -m pytest -m gpu -q --timeout 120 --maxfail "${GEMV_TESTS_MAXFAIL:-5}" \
          -p no:cacheprovider tests/test_kernels_gpu.py -k "${GEMV_TESTS_K:-gemv}" 2>&1 | tee "$OUT/pytest-gemv.txt" | tail -3
        last=$(tail -1 "$OUT/pytest-gemv.txt")
        { [[ "$last" != *passed* ]] || [[ "$last" == *failed* ]] || [[ "$last" == *error* ]]; } && tests_failed=1
        if [ -n "$tests_failed" ] && [ -n "${GEMV_DIAG:-}" ]; then
          # which part of a tile a failing split-K cluster kernel gets wrong (lab/fewtile/dsmem_diag.py)
          python3 -m lab.fewtile.dsmem_diag $GEMV_DIAG 2>&1 | tee "$OUT/diag.txt"
        fi
      fi
      # kernels that fail their tests are not measured (a hanging one would cost the compare up to 15 s a row)
      # unless GEMV_MEASURE_ANYWAY is set
      if [ -n "$tests_failed" ] && [ -z "${GEMV_MEASURE_ANYWAY:-}" ]; then
        echo "gemv: GPU tests failed ($last): plan not measured (GEMV_MEASURE_ANYWAY=1 measures it)"
      else
        timeout -s INT -k 20 "${GEMV_LIMIT:-400}" $HB compare --plan "${GEMV_PLAN:-lab/gemv/sweep1.txt}" \
          --methods torch,cublas,cublaslt,cublaslt-autotune --budget "${GEMV_BUDGET:-0.5}" --cache "${GEMV_CACHE:-warm}" --out /tmp/hb/gemv.parquet --fresh --seed 22 > /tmp/hb/gemv.txt 2>&1
        tail -2 /tmp/hb/gemv.txt; cp /tmp/hb/gemv.parquet "$OUT/" 2>/dev/null
        ${GEMV_SCORE:-python3 lab/skinny/table.py --pivot} /tmp/hb/gemv.parquet 2>&1 | tee "$OUT/gemv.md" | tail -45
        if [ -n "${GEMV_CHOSEN:-}" ]; then  # the rule's choice per shape (shape<TAB>method), scored alone
          python3 lab/skinny/table.py /tmp/hb/gemv.parquet --chosen "$GEMV_CHOSEN" 2>&1 | tee "$OUT/gemv-chosen.md" | tail -3
        fi
      fi ;;
    readfloor)
      # the fastest plain read of each decode shape's weights beside cuBLAS and READFLOOR_SPECS, warm and cold
      log "readfloor: lab/gemv/read_floor.py on ${READFLOOR_SHAPES:-lab/skinny/decode-20.txt}"
      nvcc -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o /tmp/hb/read_floor.so lab/gemv/read_floor.cu \
        && timeout 400 python3 -m lab.gemv.read_floor --lib /tmp/hb/read_floor.so --shapes "${READFLOOR_SHAPES:-lab/skinny/decode-20.txt}" \
          --specs "${READFLOOR_SPECS:-cublaslt-autotune,gemv:,gemv:mt=2,gemv:mt=4:minb=2}" --out "$OUT/read_floor.csv" 2>&1 \
          | tee "$OUT/read_floor.txt" | tail -50 ;;
    budget)
      # a search with --budget BUDGET_BUDGET (2m) on BUDGET_SHAPES from an empty build cache (a fresh
      # machine), its output a pipe: the progress lines and the wall time against the budget
      log "budget: search --budget ${BUDGET_BUDGET:-2m} on ${BUDGET_SHAPES:-16_6144_4096}, empty build cache, output to a pipe"
      rm -rf /tmp/hb/budget-cache /tmp/hb/budget-search
      t0=$(date +%s.%N)
      HGEMM_BUILD_CACHE=/tmp/hb/budget-cache $HB search --shapes "${BUDGET_SHAPES:-16_6144_4096}" --budget "${BUDGET_BUDGET:-2m}" \
        --out /tmp/hb/budget-search 2>&1 | cat > "$OUT/budget.txt"
      t1=$(date +%s.%N)
      grep -E "^round |budget|stop" "$OUT/budget.txt" | tail -12
      python3 -c "import sys; print(f'search wall {float(sys.argv[2]) - float(sys.argv[1]):.1f} s (budget ${BUDGET_BUDGET:-2m})')" "$t0" "$t1" | tee -a "$OUT/budget.txt" ;;
    skinny)
      log "skinny: GPU tests, decode rule"
      python3 -m pytest -m gpu -q --timeout 120 -p no:cacheprovider tests/test_kernels_gpu.py -k skinny 2>&1 \
        | tee "$OUT/pytest-skinny.txt" | tail -3
      timeout -s INT -k 20 "${SKINNY_LIMIT:-240}" $HB compare --plan lab/skinny/decode-rule-plan.txt \
        --methods torch,cublas,cublaslt,cublaslt-autotune --budget 0.5 --out /tmp/hb/skinny.parquet --fresh --seed 22 > /tmp/hb/skinny.txt 2>&1
      tail -2 /tmp/hb/skinny.txt; cp /tmp/hb/skinny.parquet "$OUT/" 2>/dev/null
      python3 lab/skinny/table.py /tmp/hb/skinny.parquet 2>&1 | tee "$OUT/skinny.md" | tail -3 ;;
    ncu)
      log "ncu: ${NCU_SPECS:-splitk} on ${NCU_SHAPES:-256_128_16384}"
      mkdir -p /tmp/hb/ncu
      metrics=${NCU_EXTRA_METRICS:+$NCU_EXTRA_METRICS,}gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread
      # NCU_CASES="spec@shape@layout ..." names each case; otherwise every NCU_SPECS x NCU_SHAPES x NCU_LAYOUTS
      cases=${NCU_CASES:-$(for shape in ${NCU_SHAPES:-256_128_16384}; do for spec in ${NCU_SPECS:-splitk}; do
        for lay in ${NCU_LAYOUTS:-tn}; do echo "$spec@$shape@$lay"; done; done; done)}
      i=0
      for case in $cases; do
        IFS=@ read -r spec shape lay <<< "$case"; i=$((i + 1))
        timeout 120 ncu --clock-control none --cache-control "${NCU_CACHE:-all}" --nvtx --nvtx-include "timed/" --csv --page "${NCU_PAGE:-raw}" $([ "${NCU_PAGE:-raw}" = source ] && echo --print-source sass) --print-units base --metrics "$metrics" \
          $(for sec in ${NCU_SECTIONS:-}; do echo "--section $sec"; done) \
          python3 scripts/ncu_case.py "$spec" "$shape" "$lay" > "/tmp/hb/ncu/$(printf %02d $i)-${shape}-${lay}-${spec//[:=,]/_}.csv" 2>&1 \
          || echo "ncu failed: $spec $shape $lay"
      done
      python3 scripts/ncu_table.py /tmp/hb/ncu/*.csv 2>&1 | tee "$OUT/ncu.md"
      tar czf "$OUT/ncu-csv.tgz" -C /tmp/hb ncu ;;
    profile)
      # the kernels each method launches and their durations inside a call (scripts/kernel_profile.py):
      # cuBLAS's kernel names say which tile, cluster and split it picked
      PROFILE_SPECS=${PROFILE_SPECS:-cublaslt-autotune} PROFILE_SHAPES=${PROFILE_SHAPES:-64_64_64,256_256_256,1024_1024_1024,4096_4096_4096}
      log "kernel profile: $PROFILE_SPECS on $PROFILE_SHAPES"
      timeout -s INT -k 30 "${PROFILE_LIMIT:-300}" python3 scripts/kernel_profile.py --specs "$PROFILE_SPECS" \
        --shapes "$PROFILE_SHAPES" --layout "${PROFILE_LAYOUT:-tn}" \
        --out "$OUT/profile.md" > /tmp/hb/profile.log 2>&1
      tail -5 /tmp/hb/profile.log; cp /tmp/hb/profile.log "$OUT/profile.log" ;;
    spread)
      # separate instances of one method timed in the same rounds (scripts/instance_spread.py):
      # SPREAD_CASES="spec@shape@layout ...", default the library-fallback rows that measured apart
      log "instance spread"
      for case in ${SPREAD_CASES:-cublaslt-autotune@512_256_4096@tn cublaslt-autotune@64_2048_8192@tn cublaslt-autotune@8192_1024_128@tn}; do
        IFS=@ read -r spec shape lay <<< "$case"
        for ws in own shared; do
          python3 scripts/instance_spread.py "$spec" "$shape" --layout "$lay" --instances 4 --workspace $ws 2>&1 | tee -a "$OUT/spread.txt"
        done
      done ;;
    search)
      # One 20-minute search as 2-3 calls of `scripts/gpu_check.sh search` (a device command may run
      # 10 minutes). Each call searches for at most SEARCH_RUN_LIMIT (default 8m: the shape in flight
      # is finished, no new one started; SEARCH_TIMEOUT, default 550 s, interrupts a call that still
      # runs long, losing nothing measured), writes checkpoint, library and summary, and prints how
      # much budget is left. Call again until the log says "stop: budget": that call also runs the
      # held-out first pick (--holdout 20) and prints its geomean; a call after that measures nothing:
      # the holdout is read back from the DB, then export and summary (a larger SEARCH_BUDGET searches on
      # and measures the first pick again). SEARCH_FAMILIES narrows the families. SEARCH_RESUME_ONLY=1: a
      # call that finds no earlier state (a fresh machine and no carried tarball) searches nothing.
      # The DB resumes on any machine with the same GPU model (rows keep the uuid that measured them).
      # Between calls, bring the state and the new builds back (<files_at>: where this call's $OUT
      # files landed on the calling side), from the repository root:
      #   mkdir -p .hbstate && cp <files_at>/search-state.tgz .hbstate/
      #   mkdir -p .hbcache && tar xzf <files_at>/cache-new.tgz -C .hbcache
      # (.hbstate/ and .hbcache/ are ignored through .git/info/exclude: name both in the next call's
      # carry; the state is unpacked when $SEARCH_DIR is not on the machine already and the tarball holds it.)
      log "search: budget ${SEARCH_BUDGET:-20m} in all, at most ${SEARCH_RUN_LIMIT:-8m} in this call"
      restore_search
      if [ -n "${SEARCH_RESUME_ONLY:-}" ] && [ ! -d "$SEARCH_DIR" ]; then
        echo "SEARCH_RESUME_ONLY: no $SEARCH_DIR here or in .hbstate/search-state.tgz; not starting a fresh search" \
          | tee -a "$OUT/search.txt"
        continue
      fi
      export HGEMM_BUILD_CACHE=${HGEMM_BUILD_CACHE:-$PWD/.hbcache}
      mkdir -p "$HGEMM_BUILD_CACHE"
      stamp=/tmp/hb/search-cache.stamp
      touch "$stamp"
      timeout -s INT -k 30 "${SEARCH_TIMEOUT:-550}" $HB search --shapes cuda-l2 --sample 40 --budget "${SEARCH_BUDGET:-20m}" \
        --holdout 20 --run-limit "${SEARCH_RUN_LIMIT:-8m}" --out "$SEARCH_DIR" --library "$SEARCH_DIR/library-export.json" \
        ${SEARCH_FAMILIES:+--families "$SEARCH_FAMILIES"} ${SEARCH_HOLDOUT_SEED:+--holdout-seed "$SEARCH_HOLDOUT_SEED"} \
        ${SEARCH_HOLDOUT_EXCLUDE:+--holdout-exclude "$SEARCH_HOLDOUT_EXCLUDE"} \
        ${SEARCH_FIRST_PICK_RULE:+--first-pick-rule "$SEARCH_FIRST_PICK_RULE"} 2>&1 | tee -a "$OUT/search.txt" | tail -70
      echo "search exit code ${PIPESTATUS[0]}" | tee -a "$OUT/search.txt"
      [ -d "$SEARCH_DIR" ] && tar czf "$OUT/search-state.tgz" "$SEARCH_DIR" && ls -l "$OUT/search-state.tgz"
      python3 scripts/cache_pack.py "$OUT/cache-new.tgz" --cache "$HGEMM_BUILD_CACHE" --newer "$stamp" \
        --library "$SEARCH_DIR/library.json" --db "$SEARCH_DIR/db" --limit-mib 15 2>&1 | tee -a "$OUT/search.txt" ;;
    library)
      # The exported library vs the baselines on the searched shapes (after the search stage: same
      # machine, or the carried .hbstate/search-state.tgz). Its kernels compile in parallel first
      # (cache hits cost nothing), so compare's prepares only load them.
      # LIBRARY_PATH (default $SEARCH_DIR/library.json) and LIBRARY_SHAPES (default the searched ones,
      # $SEARCH_DIR/shapes.txt) serve another library or shapes it was never tuned for; LIBRARY_METHODS,
      # space-separated library specs (e.g. two max_distance settings), replaces library:path=$lib
      lib=${LIBRARY_PATH:-$SEARCH_DIR/library.json}
      log "library: compare $lib on ${LIBRARY_SHAPES:-$SEARCH_DIR/shapes.txt}"
      restore_search
      if [ ! -f "$lib" ]; then
        echo "no $lib: run the search stage first" | tee "$OUT/library.txt"
      else
        python3 - "$lib" <<'PY' 2>&1 | tee "$OUT/library.txt"
import sys
from kernels_search.search.library import load_library
from kernels_search.search.loop import auto_prebuild
specs = sorted({e["spec"] for e in load_library(sys.argv[1]) if e["kind"] == "kernel"})
print(f"library: {len(specs)} kernel specs built in {auto_prebuild(specs):.0f} s")
PY
        timeout -s INT -k 30 "${LIBRARY_LIMIT:-480}" $HB compare --shapes "${LIBRARY_SHAPES:-$SEARCH_DIR/shapes.txt}" \
          --methods "$(echo ${LIBRARY_METHODS:-library:path=$lib} | tr " " ","),torch,cublas,cublaslt,cublaslt-autotune" \
          --budget "${LIBRARY_BUDGET:-5}" --out /tmp/hb/library.parquet --fresh --seed 6 >> "$OUT/library.txt" 2>&1
        tail -40 "$OUT/library.txt"
        # each library spec's table; with two, the first's also paired against the second (--versus)
        libs=($(echo "${LIBRARY_METHODS:-library:path=$lib}" | tr ' ' '\n' | grep '^library'))
        for i in "${!libs[@]}"; do
          python3 -m lab.library_check /tmp/hb/library.parquet --library "${libs[$i]}" \
            $([ "$i" = 0 ] && [ "${#libs[@]}" -gt 1 ] && echo --versus "${libs[1]}") 2>&1 | tee -a "$OUT/library_check.md"
        done
      fi ;;
    pickrules)
      # The held-out picks of two first-pick rules (PICK_RULES, default ranked/m10/n2/d/c/prior,paired/m10/n2/d/c/prior: the default and the one before it) of the
      # search in $PICK_SEARCH_DIR, measured side by side in one compare call with cuBLASLt autotune
      # (lab/first_picks.py --rules: picks and the per-rule table). PICK_HOLDOUT_SEED=S: on fresh
      # grid shapes drawn with seed S instead of the search's holdout; S1,S2: disjoint draws in this
      # one call. PICK_HOLDOUT_EXCLUDE: a shape file they avoid, e.g. lab/seen_shapes.txt.
      # PICK_HOLDOUT_SHAPES=FILE: those shapes instead (first_picks.py --holdout-shapes), e.g. off the grid.
      # (its own folder: $SEARCH_DIR stays the search's for the stages after this one)
      pick_dir=${PICK_SEARCH_DIR:-kernels_search/library/search-h200-g}
      rules=${PICK_RULES:-ranked/m10/n2/d/c/prior,paired/m10/n2/d/c/prior}
      log "pickrules: $rules picks of $pick_dir on ${PICK_HOLDOUT_SEED:+fresh shapes (seed $PICK_HOLDOUT_SEED), not }${PICK_HOLDOUT_SHAPES:+the shapes of $PICK_HOLDOUT_SHAPES, not }its held-out shapes"
      restore_search "$pick_dir"
      # fresh held-out shapes (first_picks.py), avoiding PICK_HOLDOUT_EXCLUDE's shapes too
      fresh="${PICK_HOLDOUT_SEED:+--holdout-seed $PICK_HOLDOUT_SEED}${PICK_HOLDOUT_EXCLUDE:+ --holdout-exclude $PICK_HOLDOUT_EXCLUDE}"
      fresh="$fresh${PICK_HOLDOUT_SHAPES:+ --holdout-shapes $PICK_HOLDOUT_SHAPES}"
      # PICK_ALSO_PICKS: a file of picks made elsewhere (first_picks.py --also-picks), measured and reported as a column
      also="${PICK_ALSO_PICKS:+--also-picks $PICK_ALSO_PICKS}"
      # PICK_PLAN=1: measure each shape's own picks and the reference (compare --plan), not every pick on
      # every shape: about a fifth of the time, so more shapes fit a call, but no best-of-picks column
      plan=/tmp/hb/pickrules-plan.txt; rm -f "$plan"
      # PICK_TOP=K (with PICK_PLAN=1): each rule's K best-ranked configs per shape, not only its pick (a study of
      # its near misses, first_picks.py --top); the report is still of the picks
      args=$(python3 -m lab.first_picks "$pick_dir" --rules "$rules" $fresh $also --compare-args --prebuild \
        ${PICK_PLAN:+--plan-out $plan} ${PICK_TOP:+--top $PICK_TOP} | tee /tmp/hb/pickrules-prebuild.txt | grep '^PICK_')
      grep '^built' /tmp/hb/pickrules-prebuild.txt
      shapes=$(echo "$args" | sed -n 's/^PICK_SHAPES=//p'); methods=$(echo "$args" | sed -n 's/^PICK_METHODS=//p')
      if [ -z "$methods" ]; then echo "pickrules: no picks (first_picks.py said why, above): nothing measured"; continue; fi
      # PICK_SKIP_SHAPES: a file of shapes an earlier call finished (one a line), not measured again: the
      # rest of a draw that call's time limit stopped; its report reads both calls' Parquets together
      if [ -n "${PICK_SKIP_SHAPES:-}" ]; then
        shapes=$(echo "$shapes" | tr ',' '\n' | grep -vxF -f "$PICK_SKIP_SHAPES" | paste -sd, -)
        [ -f "$plan" ] && { awk 'NR == FNR { skip[$1]; next } !/^#/ && !($1 in skip)' "$PICK_SKIP_SHAPES" "$plan" > "$plan.left"; mv "$plan.left" "$plan"; }
        echo "pickrules: $(grep -c . "$PICK_SKIP_SHAPES") shapes of $PICK_SKIP_SHAPES skipped, measuring ${shapes:-none}"
        [ -z "$shapes" ] && continue
      fi
      # PICK_EXTRA_METHODS: a file of further specs (one a line) measured in the same rounds, e.g. the
      # picks of an earlier policy computed elsewhere, for a side-by-side that first_picks.py cannot make
      # (read once: the picks with them, then them alone, for a plan's every-shape methods)
      extra=""
      if [ -n "${PICK_EXTRA_METHODS:-}" ]; then
        { read -r methods; read -r extra; } < <(python3 -c 'import sys; from harness.cli import _split_methods as split
extra = [ln.strip() for ln in open(sys.argv[2]) if ln.strip() and not ln.startswith("#")]
print(",".join(dict.fromkeys(split([sys.argv[1]]) + extra)))
print(",".join(dict.fromkeys(extra)))' "$methods" "$PICK_EXTRA_METHODS")
        echo "pickrules: $PICK_EXTRA_METHODS's specs added to the picks"
      fi
      if [ -f "$plan" ]; then  # each shape's picks from the plan; PICK_EXTRA_METHODS' specs on every shape
        what=(--plan "$plan" --methods "cublaslt-autotune${extra:+,$extra}")
      else
        what=(--shapes "$shapes" --methods "cublaslt-autotune,$methods")
      fi
      timeout -s INT -k 30 "${PICKRULES_LIMIT:-300}" $HB compare "${what[@]}" \
        --budget "${PICKRULES_BUDGET:-0.3}" --out /tmp/hb/pickrules.parquet --fresh --seed 7 > "$OUT/pickrules.txt" 2>&1
      tail -5 "$OUT/pickrules.txt"
      python3 -m lab.first_picks "$pick_dir" --rules "$rules" $fresh $also --report /tmp/hb/pickrules.parquet \
        2>&1 | tee "$OUT/pickrules.md" ;;
    cudal2)
      # each kernel on its own shape only (a plan, not --shapes: a per-shape kernel on another shape measures
      # nothing but its failure); shapes.txt's order, else the file names
      dir=${CUDAL2_DIR:-.cudal2}
      t0=$(date +%s)
      plan=/tmp/hb/cudal2-plan.txt
      if [ -f "$dir/shapes.txt" ]; then shapes=$(sed 's/#.*//' "$dir/shapes.txt" | awk 'NF {print $1}')
      else shapes=$(for f in "$dir"/kernels/*.cu; do basename "$f" .cu; done); fi
      for s in $shapes; do echo "$s ext:$s"; done > "$plan"
      log "cudal2: $(grep -c . "$plan") kernels of $dir/kernels, each on its own shape, with the four baselines"
      timeout -s INT -k 20 "${CUDAL2_BUILD_LIMIT:-300}" $HB build --kernels-dir "$dir/kernels" > "$OUT/cudal2-build.txt" 2>&1
      echo "build exit code $? after $(( $(date +%s) - t0 )) s"; grep -E '^(\[|built|kernels dir)' "$OUT/cudal2-build.txt"
      left=$(( ${CUDAL2_DEADLINE:-540} - ($(date +%s) - t0) )); [ "$left" -lt 30 ] && left=30
      timeout -s INT -k 20 "$left" $HB compare --plan "$plan" --kernels-dir "$dir/kernels" \
        --methods torch,cublas,cublaslt,cublaslt-autotune --budget "${CUDAL2_BUDGET:-2}" \
        --out /tmp/hb/cudal2.parquet --fresh --seed 35 > "$OUT/cudal2.txt" 2>&1
      echo "compare exit code $? after $(( $(date +%s) - t0 )) s (limit ${left} s)"; tail -3 "$OUT/cudal2.txt"
      cp /tmp/hb/cudal2.parquet "$OUT/" 2>/dev/null
      python3 -m lab.cudal2.verdicts /tmp/hb/cudal2.parquet --plan "$plan" \
        $([ -f "$dir/claims.csv" ] && echo "--claims $dir/claims.csv") 2>&1 | tee "$OUT/cudal2.md" ;;
    *) echo "unknown stage $stage" ;;
  esac
  tar czf "$OUT/results.tgz" -C /tmp hb 2>/dev/null
done
tar czf "$OUT/results.tgz" -C /tmp hb 2>/dev/null
log done
