"""Pick CUDA-L2's per-shape H100 kernels with the largest claimed speedups and lay them out for
``--kernels-dir`` (the ``cudal2`` stage of scripts/gpu_check.sh).

    python3 -m lab.cudal2.prepare CUDA_L2_CHECKOUT [--top 12] [--out .cudal2] [--column cuBLASLt-auto-tuning-max]

CUDA_L2_CHECKOUT is a checkout (or a ``git show``-able mirror: ``--rev HEAD``) of
github.com/deepreinforce-ai/CUDA-L2. Their offline H100 results
(``eval_results/cuda_l2_h100_F32F16F16F32_speedup_offline.csv``: one row per shape, their kernel's
speedup over each baseline) rank the shapes by ``--column`` (default: over cuBLASLt auto-tuning, best
of its two layouts: their strongest baseline). The ``--top`` shapes' kernels
(``kernels/h100_F32F16F16F32/<M_N_K>.cu``, one per shape, no local headers) are copied to
``OUT/kernels/``, their shapes to ``OUT/shapes.txt`` in rank order, and their result rows to
``OUT/claims.csv`` (lab/cudal2/verdicts.py prints the claim beside each verdict).

Their code is only carried to the test machine, never committed here: keep OUT ignored
(``/.cudal2/`` in .git/info/exclude).
"""

from __future__ import annotations

import argparse
import io
import subprocess
from pathlib import Path

import pandas as pd

RESULTS = "eval_results/cuda_l2_h100_F32F16F16F32_speedup_offline.csv"
KERNELS = "kernels/h100_F32F16F16F32"
DEFAULT_COLUMN = "cuBLASLt-auto-tuning-max"


def _reader(repo: Path, rev: str | None):
    """A function path -> text reading the checkout's work tree, or ``git show REV:path``."""
    if rev is None:
        return lambda rel: (repo / rel).read_text()
    return lambda rel: subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{rel}"], check=True,
                                      capture_output=True, text=True).stdout


def top_shapes(results: pd.DataFrame, column: str, top: int) -> pd.DataFrame:
    """The ``top`` rows with the largest claimed speedup in ``column`` (ties: the order of their file)."""
    if column not in results.columns:
        raise SystemExit(f"no column {column!r} in their results; columns: {', '.join(results.columns)}")
    return results.sort_values(column, ascending=False, kind="stable").head(top)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=Path, help="CUDA-L2 checkout or git mirror")
    ap.add_argument("--rev", help="read files with git show REV:path (a bare mirror) instead of the work tree")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--out", type=Path, default=Path(".cudal2"))
    ap.add_argument("--column", default=DEFAULT_COLUMN, help="their speedup column to rank by")
    args = ap.parse_args(argv)
    read = _reader(args.repo, args.rev)
    results = pd.read_csv(io.StringIO(read(RESULTS)))
    picked = top_shapes(results, args.column, args.top)
    kdir = args.out / "kernels"
    kdir.mkdir(parents=True, exist_ok=True)
    for shape in picked["mnk"]:
        (kdir / f"{shape}.cu").write_text(read(f"{KERNELS}/{shape}.cu"))
    (args.out / "shapes.txt").write_text("".join(f"{s}\n" for s in picked["mnk"]))
    picked.to_csv(args.out / "claims.csv", index=False)
    for _, r in picked.iterrows():
        print(f"{r['mnk']:>16}  {r[args.column]:.3f}x over {args.column} (H100, offline, their measurement)")
    print(f"{len(picked)} kernels in {kdir}; shapes in {args.out / 'shapes.txt'}; claims in {args.out / 'claims.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
