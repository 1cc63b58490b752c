"""Where a compare's time goes per shape: stage wall times and a cProfile, in one process.

Runs ``harness.evaluate.ShapeEvaluator`` in-process (no sandbox worker) on the shapes given, with
the compare defaults (or the settings given), and writes:
* ``stages.csv``: one row per (shape, stage) with its wall seconds (stage = the reporter's stage
  text with the method/layout kept: "prepare cublaslt-autotune nn", "gate nn", "offline warm ...");
* ``profile.txt``: the top functions by cumulative and by own time.

    python -m lab.throughput.profile_compare --shapes lab/throughput/grid40-seed35.txt --out DIR
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import io
import pstats
import time
from pathlib import Path

from harness.env import collect
from harness.evaluate import CompareSettings, ShapeEvaluator
from harness.progress import Reporter
from harness.registry import load_plugins, resolve
from harness.shapes import parse_shapes


class StageClock(Reporter):
    def __init__(self):
        self.rows: list[tuple[str, str, float]] = []
        self.shape = ""
        self._stage = None
        self._t = time.perf_counter()

    def _close(self):
        now = time.perf_counter()
        if self._stage is not None:
            self.rows.append((self.shape, self._stage, now - self._t))
        self._t = now

    def stage(self, text: str) -> None:
        self._close()
        self._stage = text

    def finish(self):
        self._close()
        self._stage = None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--methods", default="torch,cublas,cublaslt,cublaslt-autotune")
    ap.add_argument("--budget", type=float, default=5.0)
    ap.add_argument("--ci-target", type=float, default=0.01)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    load_plugins()
    shapes = parse_shapes(a.shapes)
    env = collect("cuda")
    settings = CompareSettings(shapes=shapes, budget_s=a.budget, ci_target=a.ci_target, seed=7)
    clock = StageClock()
    ev = ShapeEvaluator(settings, resolve(a.methods.split(",")), env, "profile", clock)
    prof = cProfile.Profile()
    per_shape = []
    t_all = time.perf_counter()
    for i, sh in enumerate(shapes):
        clock.shape = sh.name
        clock._stage, clock._t = "start", time.perf_counter()
        t0 = time.perf_counter()
        prof.enable()
        got: list[dict] = []
        ev.evaluate(sh, [("offline", "warm")], lambda rows, samples: got.extend(rows))
        prof.disable()
        clock.finish()
        per_shape.append((sh.name, time.perf_counter() - t0))
        stops = sorted({f"{r['method']}/{r['layout']}:{r.get('stop_reason')}@{r.get('rounds')}" for r in got
                        if r.get("stop_reason") not in (None, "ci")})
        print(f"{i + 1}/{len(shapes)} {sh.name} {per_shape[-1][1]:.2f} s {' '.join(stops)}", flush=True)
    total = time.perf_counter() - t_all
    with open(out / "stages.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["shape", "stage", "seconds"])
        w.writerows(clock.rows)
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    st.sort_stats("cumulative").print_stats(60)
    st.sort_stats("tottime").print_stats(40)
    (out / "profile.txt").write_text(s.getvalue())
    prof.dump_stats(out / "profile.pstats")
    # summary: stage kinds (the text's first two words)
    agg: dict[str, float] = {}
    for _, stage, sec in clock.rows:
        words = stage.split()
        key = " ".join(words[:2]) if words and words[0] in ("prepare", "anti-cheat") else words[0]
        agg[key] = agg.get(key, 0.0) + sec
    print(f"total {total:.1f} s for {len(shapes)} shapes: {total / len(shapes):.3f} s per shape")
    for k, v in sorted(agg.items(), key=lambda kv: -kv[1]):
        print(f"  {k:40s} {v:8.2f} s  {v / len(shapes):.3f} s/shape")


if __name__ == "__main__":
    main()
