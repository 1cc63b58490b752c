"""Why cuBLASLt autotune's kept algorithm can run slower in the offline rounds than its own tuning timed it.

Over the cuda-l2 grid (runs 915074d0546c, 2dffb321df79) autotune's pick was > 2 % slower than the cuBLASLt
heuristic's pick in the same layout on 35 of 2,000 shape-layouts. Its tuning had timed the kept algorithm faster
than the offline rounds then did: 1024_256_16384 nn 18.9 us tuned against 22.1 us offline; 16384_1024_16384 tn, the
heuristic's first candidate, 772.7 us tuned against 860.4 us offline. The two timings differ in two ways that this
script separates, one shape and layout at a time, in one process:

* the workspace a call passes: a candidate being tuned gets the largest workspace any candidate needs, the kept
  call exactly its own (``cublaslt_autotune.prepare``);
* the timing path: ``time_candidates`` (successive halving, the tuning's) against ``measure_offline`` (compare's).

It prepares ``cublaslt`` and ``cublaslt-autotune`` on one input set, then times, in the same interleaved rounds of
``measure_offline``: autotune's kept call; the same algorithm passed the tuning's workspace; the heuristic's first
candidate of autotune's list with its own and with the tuning's workspace; the ``cublaslt`` method's call. The
same five go through ``time_candidates`` after that, and ``measure_offline`` once more, so drift over time shows as
the two offline passes disagreeing. Prints one table: microseconds per entry and pass.

    python3 -m lab.throughput.autotune_gap 1024_256_16384 nn 16384_1024_16384 tn 512_2048_4096 nn
"""

from __future__ import annotations

import statistics
import sys
from functools import partial


def entries_for(shape: str, layout: str, device: str = "cuda"):
    """(names, fns, the input set, what to close) for one shape and layout; see the module docstring."""
    from baselines import cuda_handles as ch
    from baselines.cublaslt import inputs_alignment
    from baselines.lt_plan import LtPlan
    from harness.method import PrepareContext
    from harness.problem import Problem
    from harness.registry import resolve
    from harness.shapes import parse_shape
    from harness.tensors import timing_sets
    from harness.timing import time_candidates

    problem = Problem(parse_shape(shape), layout)
    (st,) = timing_sets(problem, device, 1, 0)
    ins = (st.a, st.b, st.c)
    ctx = PrepareContext(device, ins, partial(time_candidates, inputs=ins, device=device))
    (lt,) = resolve(["cublaslt"])
    (auto,) = resolve(["cublaslt-autotune"])
    p_lt, p_auto = lt.prepare(problem, ctx), auto.prepare(problem, ctx)
    dev = ch.current_device()
    plan = LtPlan(problem, dev, inputs_alignment(ctx))
    _, cands, _ = auto._candidates(plan, problem)
    tune_bytes = int(cands["workspace_size"].max())
    chosen = int(p_auto.info["algo_index"])
    kept = cands[chosen:chosen + 1].copy()
    first = cands[0:1].copy()

    def own(res):
        return ch.lt_workspace(int(res["workspace_size"][0]), dev)

    fns = {
        "autotune kept call": p_auto.fn,
        "kept algorithm, tuning workspace": plan.make_fn(kept, ch.lt_workspace(tune_bytes, dev), fallback=False),
        "first candidate, own workspace": plan.make_fn(first, own(first), fallback=False),
        "first candidate, tuning workspace": plan.make_fn(first, ch.lt_workspace(tune_bytes, dev), fallback=False),
        "cublaslt call": p_lt.fn,
    }
    info = (f"{shape} {layout}: autotune kept candidate {chosen} of {len(cands)} (tuned {p_auto.info.get('tuned_us'):.2f} us, "
            f"first candidate {p_auto.info.get('top1_us'):.2f} us in the tuning); workspace kept "
            f"{p_auto.info.get('workspace_bytes')} B, tuning {tune_bytes} B")
    return info, fns, st, (p_lt, p_auto, plan)


def measure(shape: str, layout: str, rounds: int = 15, device: str = "cuda") -> tuple[str, dict[str, list[float]]]:
    from harness.timing import Entry, OfflineSettings, measure_offline, time_candidates

    info, fns, st, keep = entries_for(shape, layout, device)
    names = list(fns)
    settings = OfflineSettings(ci_target=0.0, min_rounds=rounds, max_rounds=rounds, budget_s=1e9, seed=3, host_rounds=0)

    def offline() -> list[float]:
        res = measure_offline([Entry(n, fns[n], [st]) for n in names], device, settings)
        return [statistics.median(res[n].device_us) for n in names]

    first = offline()
    tuned = list(time_candidates([fns[n] for n in names], (st.a, st.b, st.c), device, warmed=True))
    second = offline()
    keep[0].close and keep[0].close()
    keep[1].close and keep[1].close()
    keep[2].close()
    return info, {n: [first[i], tuned[i], second[i]] for i, n in enumerate(names)}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or len(args) % 2:
        print("usage: python3 -m lab.throughput.autotune_gap SHAPE LAYOUT [SHAPE LAYOUT ...]", file=sys.stderr)
        return 2
    for shape, layout in zip(args[::2], args[1::2]):
        info, got = measure(shape, layout)
        print(info)
        print(f"  {'entry':36s} {'offline 1':>10s} {'tuning path':>12s} {'offline 2':>10s}  (us)")
        for name, (a, b, c) in got.items():
            print(f"  {name:36s} {a:10.2f} {b:12.2f} {c:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
