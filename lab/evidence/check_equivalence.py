"""Check that the packaged evidence picks as its source Parquets do (no GPU).

Folds lab/evidence/h200-sources.txt's Parquets, and then the packaged
kernels_search/data/evidence-h200.parquet, into the learner of the packaged search of record, and
compares the learner states (posterior, evidence per config, rows seen) and, for the search's
held-out shapes plus the shapes given, the first pick's top-K ranking under ranked and paired.

    python -m lab.evidence.check_equivalence [--shapes 100_1000_3000,...] [--top 8]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
    from harness.shapes import parse_shapes
    from kernels_search.search import evidence, picks
    from kernels_search.search.first_pick import FirstPick
    from kernels_search.search.prior import prior_paths, with_prior
    from kernels_search.search.settings import FirstPickSettings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="100_1000_3000,96_1536_5120,3000_200_700,12000_48_2000,640_640_640")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args(argv)
    folder = picks.record_folder()
    learner, db = picks.learner_for_search(folder)
    gpu = picks.gpu_of(db)
    shapes = parse_shapes(str(folder / "holdout.txt")) + parse_shapes(a.shapes)
    exclude = [s.name for s in shapes]
    files = prior_paths([ROOT / "lab" / "evidence" / "h200-sources.txt"], root=ROOT)
    ev = evidence.load(gpu)
    from_files, s1 = with_prior(learner, files, exclude, gpu)
    from_data, s2 = with_prior(learner, ev.parts, exclude, gpu, ev.label)
    print(s1.line())
    print(s2.line())
    same = dict(A=np.array_equal(from_files.model.A, from_data.model.A), b=np.array_equal(from_files.model.b, from_data.model.b),
                measured_on=from_files.measured_on == from_data.measured_on, seen=from_files.seen == from_data.seen,
                history=from_files.history == from_data.history)
    print("learner state equal:", same)
    differ = 0
    for rule in ("ranked", "paired"):
        st = FirstPickSettings(rule=rule)
        fa, fb = FirstPick(from_files, st), FirstPick(from_data, st)
        for shape in shapes:
            ra = [c.spec for c in fa.ranking(shape, db, gpu, top=a.top)]
            rb = [c.spec for c in fb.ranking(shape, db, gpu, top=a.top)]
            differ += ra != rb
            if ra != rb:
                print(f"{rule} {shape.name}: rankings differ\n  files: {ra}\n  data:  {rb}")
        print(f"{rule}: {len(shapes)} shapes ranked (top {a.top}), picks {'equal' if not differ else 'DIFFER'}")
    ok = all(same.values()) and not differ
    print("equivalent" if ok else "NOT equivalent")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
