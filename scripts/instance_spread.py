"""How far apart separate instances of one method measure, on one shape: the placement check.

Two instances of one method (two prepares: each its own plan, workspace and wrapper) timed in the
same interleaved rounds on the same inputs should agree within timing noise. On the H200 they
did not: the cuBLASLt autotune baseline and the library's fallback to it ran the same algorithm
up to 4 % apart, and only where the algorithm uses a workspace.
This script prepares ``--instances`` instances and times each one as two entries (the two entries
of one instance share everything, so their gap is the timing core's own noise floor), all in
the same rounds of the offline timing core, then prints each entry's median device time.

    python3 scripts/instance_spread.py cublaslt-autotune 512_256_4096 --layout tn --instances 4 [--workspace own]

``--workspace own`` gives every prepared cuBLASLt call its own workspace buffer, as the baselines
did before they shared one per device (``baselines.cuda_handles.SHARED_LT_WORKSPACE``): run both
to see whether the buffer's placement was the cause.

Output: one line per instance (median of its two entries, their gap, workspace bytes when the
method reports them), then ``spread`` (slowest / fastest instance) against ``noise`` (the largest
gap between the two entries of one instance).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from functools import partial


def measure(spec: str, shape: str, layout: str = "nn", instances: int = 4, rounds: int = 15,
            device: str | None = None, seed: int = 0) -> dict:
    """Per-instance medians of ``spec`` on ``shape``; see the module docstring."""
    from harness.method import PrepareContext
    from harness.problem import Problem
    from harness.registry import resolve
    from harness.shapes import parse_shape
    from harness.tensors import timing_sets
    from harness.timing import Entry, OfflineSettings, measure_offline, time_candidates

    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    problem = Problem(parse_shape(shape), layout)
    (st,) = timing_sets(problem, device, 1, seed)
    ins = (st.a, st.b, st.c)
    preps = []
    for _ in range(instances):
        (m,) = resolve([spec])  # a fresh method object per instance
        preps.append(m.prepare(problem, PrepareContext(device, ins, partial(time_candidates, inputs=ins, device=device))))
    entries = [Entry((i, half), p.fn, [st], p.capturable) for i, p in enumerate(preps) for half in (0, 1)]
    settings = OfflineSettings(ci_target=0.0, min_rounds=rounds, max_rounds=rounds, budget_s=1e9, seed=seed,
                               target_batch_us=300.0, host_rounds=0)
    res = measure_offline(entries, device, settings)
    rows = []
    for i, p in enumerate(preps):
        meds = [statistics.median(res[(i, h)].device_us) for h in (0, 1)]
        info = p.info or {}
        ws = info.get("workspace_bytes", info.get("inner_workspace_bytes"))
        rows.append(dict(instance=i, median_us=statistics.mean(meds), entry_gap=max(meds) / min(meds) - 1.0,
                         workspace_bytes=ws, algo=info.get("algo_index", info.get("inner_algo_index")),
                         tuned=info.get("tuned", info.get("inner_tuned"))))
    for p in preps:
        if p.close:
            p.close()
    med = [r["median_us"] for r in rows]
    return dict(spec=spec, shape=shape, layout=layout, device=device, rounds=rounds, instances=rows,
                spread=max(med) / min(med) - 1.0, noise=max(r["entry_gap"] for r in rows))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec")
    ap.add_argument("shape")
    ap.add_argument("--layout", default="nn", choices=["nn", "tn"])
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workspace", default="shared", choices=["shared", "own"],
                    help="cuBLASLt workspace: one per device (default) or one per prepared call")
    a = ap.parse_args(argv)
    from baselines import cuda_handles

    cuda_handles.SHARED_LT_WORKSPACE = a.workspace == "shared"
    if a.instances < 2:
        ap.error("--instances must be at least 2")
    out = measure(a.spec, a.shape, a.layout, a.instances, a.rounds, seed=a.seed)
    print(f"{out['spec']} {out['shape']} {out['layout']} on {out['device']}, {out['rounds']} rounds, "
          f"{a.workspace} cuBLASLt workspace")
    for r in out["instances"]:
        print(f"  instance {r['instance']}: {r['median_us']:9.3f} us  (entry gap {r['entry_gap'] * 100:5.2f} %)"
              f"  workspace {r['workspace_bytes']}  algo {r['algo']}  {r['tuned'] or ''}")
    print(f"spread {out['spread'] * 100:.2f} % between instances; noise {out['noise'] * 100:.2f} % within one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
