"""The ``cublaslt-autotune`` baseline: the fastest correct of up to 100 cuBLASLt candidates.

This is the strongest cuBLAS-family baseline and the one searched kernels must beat, so it is
given every advantage cuBLASLt offers:

* candidates: the BEST_FIT list, the ``cublaslt`` baseline's own pick (BEST_FIT's first at cuBLAS's 32 MiB
  workspace recommendation), the BEST_FIT lists restricted to each split-K reduction scheme, and every algorithm
  id's configurations (see ``baselines.lt_candidates`` for what limits the count and why), up to
  ``max_candidates``. The heuristic's pick at 32 MiB is asked for apart because with the larger limit BEST_FIT can
  rank other algorithms (split-K variants that need the room) and leave it out of every list: on
  16384_1024_16384 tn autotune then kept an algorithm at 831 us against ``cublaslt``'s 746 us (H100,
  lab/throughput/autotune-gap-h100.txt), so the strongest baseline was weaker than the heuristic;
* workspace: up to ``max_workspace`` (default 1 GiB). CUDA-L2 gives 20 GB, i.e. "unlimited". What
  needs workspace is split-K / stream-K, whose fp32 partial sums take about splits x M x N x 4
  bytes. Splitting only helps when the output has too few 128x128 tiles to fill the 132 SMs
  (M x N up to ~2e6): 512x512 at 16 splits needs 16 MiB, a full wave (M x N = 2.2e6) at 8 splits
  70 MiB. 1 GiB allows 64 splits of a 2048x2048 output, already past where splitting pays, so it
  excludes nothing useful while keeping a runaway request off the 141 GB card. The buffer used
  while tuning is the largest any candidate asks for; the kept call holds exactly what the winner
  needs;
* correctness: each candidate runs once on fresh uniform [-1, 1] inputs of the problem's shape
  (the harness's ``ctx.inputs`` may hold anything, e.g. zeros, on which wrong kernels look
  right) and is kept only if its output is within ``lt_candidates.REL_TOL`` of the heuristic
  top-1's output; a candidate that raises is dropped;
* timing: ``ctx.time_candidates`` (the harness's timing core, on ``ctx.inputs``) times all valid
  candidates, interleaved; the fastest median wins. This module times nothing itself. ``keep`` (the
  fraction of candidates screened into the final rounds), ``final_rounds`` and ``screen_us`` (a
  screening sample's batch, microseconds: on small shapes each candidate's screening is mostly the
  host time of capturing that batch) override the timing core's successive halving; set, they make
  a differently named method, so a cheaper autotune can be
  measured beside the default one in the same run (its pick's time and its ``setup_s``);
* screening: by default (``screen="auto"``) a call of ``AUTO_SCREEN_FLOP`` FLOPs or more (about 1 ms) is
  screened by the validation pass's own calls (each candidate's one call timed by the harness's ``CallTimes`` from
  CUPTI records): no screening rounds, so no graph capture a candidate and one full call a candidate fewer; the
  finalists are still timed in the harness's rounds. Shorter calls are screened by graph rounds, where the clock's
  two synchronizations and window a candidate cost more than the rounds they would replace. ``screen="validation"``
  and ``screen="graph"`` choose one way for every call (``screen_us`` sizes the graph rounds' samples). Where the
  kernel clock cannot trace, the graph screening serves and ``info["screened_by"]`` says so. Measured on an H100,
  40 grid shapes (lab/throughput/ab-h100.md): validation screening picked as fast as graph screening in both prepare
  orders and took calls over 1 ms to 0.62x of their tuning time, calls of 50-1,000 us to 1.13x; ``auto`` 0.74x in all.
  ``drop`` (a fraction, e.g. 0.05): on calls long enough that each final sample is one call, finalists more than
  that far behind the best after ``DROP_AFTER`` final rounds are timed no further (``time_candidates``'
  ``drop_after``);
* one tuning per process and problem: the winner is kept (``_TUNED``, keyed by device, shape,
  layout, alignment and the limits above) and a later instance prepared for the same problem in
  the same process serves it without timing again (``info["tuned"]`` says "timed" or "reused").
  Separate tunings can pick different algorithms among near-ties (measured on an H200: the
  library's fallback and the baseline differed on 7 of 65 shape-layout pairs). A dispatcher that
  falls back to this method (the search library) then serves the
  baseline's own choice, not a second draw, as a deployment that tunes once would.

``Prepared.setup_s`` is the whole autotune (queries, validation, timing) in seconds.
"""

from __future__ import annotations

import time
from typing import Any

from baselines import cuda_handles as ch
from baselines.cublaslt import closer, inputs_alignment
from baselines.operands import cublas_supports
from baselines.lt_candidates import FMA_MAX_FLOP, merge_candidates, relative_errors, REL_TOL
from baselines.lt_plan import ALL_IMPLS, IMPL_FLAGS_FMA, LtPlan, algo_config
from harness.method import PrepareContext, Prepared, Support
from harness.problem import Problem

DEFAULT_MAX_CANDIDATES = 100
DEFAULT_MAX_WORKSPACE = 1 << 30
# CUBLASLT_REDUCTION_SCHEME_NONE (no split-K), INPLACE, COMPUTE_TYPE, OUTPUT_TYPE.
REDUCTION_MASKS = (0, 1, 2, 4)
PER_ID_REQUEST = 32  # configurations asked per algorithm id (the merge caps the total)
SCREENS = ("graph", "validation", "auto")  # how the candidates are screened before the final rounds (module docstring)
# screen="auto": validation screening from this many FLOPs a call up (2 M N K), about 1 ms at the 700 TFLOP/s cuBLAS
# holds on an H100 or H200 (the module docstring says why there and not below)
AUTO_SCREEN_FLOP = 7e11
DEFAULT_SCREEN = "auto"
DROP_AFTER = 3  # with ``drop``: final rounds every finalist runs before the trailing ones stop (module docstring)

# (device, M, N, K, layout, dtype, alignment, max_candidates, max_workspace, halving, screen) -> (winner, info)
_TUNED: dict[tuple, tuple[Any, dict]] = {}


def forget_tuning() -> None:
    """Drop every kept autotune result of this process (the next prepare times again)."""
    _TUNED.clear()


def validation_buffers(problem: Problem, device: int, seed: int = 0):
    """Fresh (a, b, ref, out) for validation: a, b uniform in [-1, 1] in the problem's layout.

    Fresh CUDA allocations are 256-byte aligned, as the candidates (chosen for the alignment of
    the harness's buffers, at most 256) require.
    """
    import torch

    gen = torch.Generator(device=torch.device("cuda", device)).manual_seed(seed)
    opts = dict(dtype=torch.float16, device=torch.device("cuda", device))
    a = torch.empty(problem.m, problem.k, **opts).uniform_(-1, 1, generator=gen)
    b = torch.empty(*problem.b_shape, **opts).uniform_(-1, 1, generator=gen)
    ref = torch.empty(problem.m, problem.n, **opts)
    out = torch.empty(problem.m, problem.n, **opts)
    return a, b, ref, out


class CublasLtAutotune:
    family = "baseline"
    source_hash = ""
    is_baseline = True
    devices = ("cuda",)

    def __init__(self, max_candidates: int = DEFAULT_MAX_CANDIDATES, max_workspace: int = DEFAULT_MAX_WORKSPACE,
                 keep: float | None = None, final_rounds: int | None = None, screen_us: float | None = None,
                 screen: str = DEFAULT_SCREEN, drop: float | None = None):
        if max_candidates < 1:
            raise ValueError("max_candidates must be >= 1")
        if max_workspace < 0:
            raise ValueError("max_workspace must be >= 0")
        if keep is not None and not 0 < keep <= 1:
            raise ValueError("keep must be in (0, 1]")
        if final_rounds is not None and final_rounds < 1:
            raise ValueError("final_rounds must be >= 1")
        if screen_us is not None and not screen_us > 0:
            raise ValueError("screen_us must be > 0")
        if screen not in SCREENS:
            raise ValueError(f"screen must be one of {', '.join(SCREENS)}, got {screen!r}")
        if screen == "validation" and screen_us is not None:
            raise ValueError("screen_us sizes the graph screening's samples; screen=validation has none")
        if drop is not None and not drop > 0:
            raise ValueError("drop must be > 0 (a fraction: 0.05 drops finalists 5 % behind)")
        self.screen = screen
        self.max_candidates = max_candidates
        self.max_workspace = max_workspace
        # the timing core's successive halving, where set (None: time_candidates' own defaults)
        self.halving = {k: v for k, v in (("keep_fraction", keep), ("rounds", final_rounds),
                                          ("screen_batch_us", screen_us), ("drop_margin", drop)) if v is not None}
        if drop is not None:
            self.halving["drop_after"] = DROP_AFTER
        knobs = []
        if max_candidates != DEFAULT_MAX_CANDIDATES:
            knobs.append(f"max_candidates={max_candidates}")
        if max_workspace != DEFAULT_MAX_WORKSPACE:
            knobs.append(f"max_workspace={max_workspace}")
        if keep is not None:
            knobs.append(f"keep={keep:g}")
        if final_rounds is not None:
            knobs.append(f"final_rounds={final_rounds}")
        if screen_us is not None:
            knobs.append(f"screen_us={screen_us:g}")
        if screen != DEFAULT_SCREEN:
            knobs.append(f"screen={screen}")
        if drop is not None:
            knobs.append(f"drop={drop:g}")
        self.name = "cublaslt-autotune" + (":" + ",".join(knobs) if knobs else "")
        self.config: dict[str, Any] = {
            "api": "cublasLtMatmul",
            "compute_type": "CUBLAS_COMPUTE_32F",
            "scale_type": "CUDA_R_32F",
            "search": "BEST_FIT (and its first at 32 MiB) + LIMITED_BY_ALGO_ID per id, timed by the harness",
            "max_candidates": max_candidates,
            "max_workspace_bytes": max_workspace,
            "rel_tol": REL_TOL,
            **{f"halving_{k}": v for k, v in self.halving.items()},
            "screen": screen,
        }

    def supports(self, problem: Problem, device: str) -> Support:
        return cublas_supports(problem, device)

    def _candidates(self, plan: LtPlan, problem: Problem):
        """(BEST_FIT list, merged candidates, counts per source) for this problem."""
        best = plan.best_fit(self.max_candidates, self.max_workspace)
        # the ``cublaslt`` baseline's pick (module docstring), first of the further lists so no cap cuts it
        try:
            heuristic = [plan.best_fit(1, min(self.max_workspace, ch.CUBLAS_WORKSPACE_BYTES))]
        except Exception:  # nothing fits that workspace: the lists below are all there is
            heuristic = []
        # The same ranked query restricted to one reduction scheme at a time surfaces
        # configurations the default ranking cuts off (e.g. the best non-split-K kernels).
        filtered = heuristic + [
            plan.best_fit(self.max_candidates, self.max_workspace, reduction_mask=mask)
            for mask in REDUCTION_MASKS
        ]
        impl_mask = ALL_IMPLS if problem.flops <= FMA_MAX_FLOP else ALL_IMPLS & ~IMPL_FLAGS_FMA
        ids = plan.algo_ids()
        per_id = []
        for algo_id in ids:
            try:
                per_id.append(plan.by_algo_id(algo_id, PER_ID_REQUEST, self.max_workspace, impl_mask))
            except Exception:  # an id this problem cannot use
                continue
        # Counts per source before the max_candidates cap, to show what the count depends on.
        everything = 1 << 62
        n_heuristic = len(merge_candidates(best, heuristic, everything))
        n_filtered = len(merge_candidates(best, filtered, everything))
        n_all = len(merge_candidates(best, filtered + per_id, everything))
        sources = {
            "candidates_heuristic": int(len(best)),
            "candidates_added_by_default_workspace": int(n_heuristic - len(best)),
            "candidates_added_by_reduction_filters": int(n_filtered - n_heuristic),
            "candidates_added_by_algo_id": int(n_all - n_filtered),
            "candidates_found": int(n_all),
            "algo_ids_listed": len(ids),
            "algo_ids_with_configs": sum(1 for r in per_id if len(r)),
        }
        return best, merge_candidates(best, filtered + per_id, self.max_candidates), sources

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        import torch

        t0 = time.perf_counter()
        device = ch.current_device()
        align = inputs_alignment(ctx)
        plan = LtPlan(problem, device, align)
        key = (device, problem.m, problem.n, problem.k, problem.layout, problem.dtype, align,
               self.max_candidates, self.max_workspace, tuple(sorted(self.halving.items())), self.screen)
        if key in _TUNED:
            winner, info = _TUNED[key]
            try:
                fn = plan.make_fn(winner.copy(), ch.lt_workspace(info["workspace_bytes"], device))
            except Exception:
                plan.close()
                raise
            return Prepared(fn=fn, setup_s=time.perf_counter() - t0, info={**info, "tuned": "reused"},
                            close=closer(plan, fn))
        try:
            best, cands, sources = self._candidates(plan, problem)
            if len(best) == 0:
                raise RuntimeError(f"{problem}: cuBLASLt heuristic returned no algorithm")
            tune_ws = ch.lt_workspace(int(cands["workspace_size"].max()), device)
            fns = [plan.make_fn(cands[i : i + 1].copy(), tune_ws, fallback=False) for i in range(len(cands))]

            # Validate every candidate against the heuristic top-1 (candidate 0) on fresh inputs.
            a, b, ref, out = validation_buffers(problem, device)
            fns[0](a, b, ref)
            by_validation = self.screen == "validation" or (
                self.screen == "auto" and problem.flops >= AUTO_SCREEN_FLOP)
            clock = ctx.call_times() if by_validation and ctx.call_times is not None else None

            def outputs():  # each candidate's output in turn (None: it raised), its error taken on the device
                for i, fn in enumerate(fns):
                    try:
                        out.fill_(float("nan"))
                        if clock is None:
                            fn(a, b, out)
                        else:
                            clock.call(i, fn, a, b, out)
                    except Exception:
                        yield None
                        continue
                    yield out

            try:
                errors = dict(enumerate(relative_errors(outputs(), ref)))
            finally:
                call_us = clock.close() if clock is not None else {}
            valid = [i for i, err in errors.items() if err <= REL_TOL]
            del a, b, out, ref
            if not valid:
                raise RuntimeError(f"{problem}: no cuBLASLt candidate passed validation")
            screened, screened_by = None, "graph rounds"
            if by_validation:
                times = [call_us.get(i) for i in valid]
                missing = f"{times.count(None)} valid candidates without a record" if None in times else ""
                why = "no kernel clock on this device" if clock is None else clock.unavailable or missing
                if why:
                    screened_by = f"graph rounds (validation calls untimed: {why})"
                else:
                    screened, screened_by = times, "validation calls (CUPTI)"

            # every candidate just ran in the validation pass: no warm-up call before its timing
            extra = {} if screened is None else {"screened": screened}
            medians = list(ctx.time_candidates([fns[i] for i in valid], warmed=True, **self.halving, **extra))
            if len(medians) != len(valid):
                raise RuntimeError("time_candidates returned a wrong number of timings")
            best_pos = min(range(len(valid)), key=lambda p: medians[p])
            if medians[best_pos] == float("inf"):
                raise RuntimeError(f"{problem}: every cuBLASLt candidate failed when timed")
            chosen = valid[best_pos]
            winner = cands[chosen : chosen + 1].copy()
            ws_bytes = int(winner["workspace_size"][0])
            fns.clear()
            del tune_ws
            fn = plan.make_fn(winner, ch.lt_workspace(ws_bytes, device))
            torch.cuda.synchronize(device)
        except Exception:
            plan.close()
            raise
        # candidate 0's time where it was timed in the rounds (screened out: inf, reported as nan)
        top1_us = medians[0] if valid[0] == 0 and medians[0] != float("inf") else float("nan")
        info = {
            "candidates": int(len(cands)),
            "candidates_valid": len(valid),
            **sources,
            "algo_index": chosen,
            "workspace_bytes": ws_bytes,
            "alignment_bytes": align,
            "waves_count": float(winner["waves_count"][0]),
            "tuned_us": float(medians[best_pos]),
            "top1_us": float(top1_us),
            "max_rel_err_valid": max(errors[i] for i in valid),
            "screened_by": screened_by,
            **algo_config(winner.ctypes.data),
        }
        _TUNED[key] = (winner.copy(), info)
        return Prepared(fn=fn, setup_s=time.perf_counter() - t0, info={**info, "tuned": "timed"},
                        close=closer(plan, fn))
