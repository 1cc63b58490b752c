"""Earlier measurements folded into a policy: what a search or a first pick knows before it starts.

A search's policy learns only from its own DB: on search-h200-g, 40 shapes, where a config was
measured either on all of them (the presets) or on at most 6. Every held-out check since has
measured 15-25 configs on 20 fresh grid shapes with cuBLASLt autotune in the same call, and those
rows taught the policy nothing. ``fold_prior`` turns such ``compare`` Parquets into the policy's
observations, with the search's own reward (``reward.reward``: clipped log speedup over the
fastest correct baseline row of the same run and shape, over both layouts; -1 for a failed row),
so one policy learns from every shape measured on this GPU, not only the searched ones. Only
offline warm rows count, as the search measures.

Why it was tried (sixteenth session, CPU, before any device call): leave-one-draw-out over the
held-out Parquets of seeds 3-12 (``scripts/prior_cv.py``), ranking only the configs measured on
the left-out shapes, search-h200-g's policy with the other draws folded in picked better on every
draw (over the 180 shapes, 0.894x to 0.966x under ``cautious/m10``). What the registered tests on
fresh shapes found (BENCHMARKS.md, sixteenth session): no gain. With the prior, 0.976x and 0.951x
on seeds 13-14 and 15-16; without, 0.972x and 0.959x in the same calls, paired 0.998x (95 % CI
0.972-1.024) over the 80 shapes. The gains (deep-K shapes, 0.57x to 0.99x) were paid for by
losses where the prior's evidence lay far from the shape (a split-K config measured on 18 deep-K
shapes, picked for 128_64_512: 0.56x). So it is opt-in for the search itself (``search --prior``).
With evidence required near the shape as well (``first_pick_min_near`` 2), it won its registered
test (seventeenth session, seeds 17-18: 0.980x against 0.936x for ``cautious/m10``, paired 1.047x,
95 % CI 1.011-1.090). So the held-out first pick folds this GPU model's committed list in by
default (``prior_for_gpu``; ``search --first-pick-prior``), into a copy of the finished search's
policy. ``first_picks.py``'s default rule was ``cautious/m10/n2/prior`` until the nineteenth
session, and is ``paired/m10/n2/prior`` since (``policy.Policy.paired_values``).

Rows are keyed ``prior:<run_id>:<shape>:<method>:<layout>``, so folding the same file twice, or
into a policy restored from a checkpoint that had it, adds nothing. Baseline rows set the
reference only; rows of methods the policy does not search (``library``, ``extern``, a family
it lacks, a spec its family no longer parses) are skipped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from harness.shapes import parse_shape
from kernels_search.search.proposer import Outcome
from kernels_search.search.reward import failure_kind, reward, strongest_baseline

NEEDED = ("run_id", "shape", "method", "layout", "is_baseline", "status", "status_reason", "device_us_median")


class PriorError(ValueError):
    """A prior file that cannot be read as compare results (names the file and the problem)."""


@dataclass
class PriorSummary:
    files: int
    rows: int  # folded into the policy (new observations)
    shapes: set
    skipped: int  # rows of methods the policy does not search
    no_baseline: int  # rows of shapes whose run has no correct baseline row
    other_gpu: int = 0  # rows measured on another GPU model than the policy's

    def line(self) -> str:
        return (f"prior: {self.rows} rows on {len(self.shapes)} shapes from {self.files} files folded in"
                f" ({self.skipped} rows of methods the policy does not search, {self.no_baseline} without a baseline"
                + (f", {self.other_gpu} of another GPU model" if self.other_gpu else "") + ")")


PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parents[1]  # the repository root: a list's paths are relative to it


def gpu_model_slug(gpu_name: str) -> str:
    """``"NVIDIA H200"`` -> ``"h200"``: the GPU model as a prior list's file name carries it."""
    words = gpu_name.replace("NVIDIA", "").split()
    return "-".join(w.lower() for w in words)


def prior_for_gpu(gpu_name: str | None) -> list[Path]:
    """The committed prior of this GPU model: the Parquets ``kernels_search/search/prior_<model>.txt``
    lists (``prior_h200.txt`` for an "NVIDIA H200"), or [] where the model has none (another GPU,
    the CPU). What ``search``'s held-out first pick adds by default (``--first-pick-prior auto``)."""
    if not gpu_name:
        return []
    listed = PACKAGE / f"prior_{gpu_model_slug(gpu_name)}.txt"
    return prior_paths([listed], root=ROOT) if listed.exists() else []


def prior_paths(specs: Iterable[str | Path], root: Path = Path(".")) -> list[Path]:
    """Parquet paths from ``specs``: Parquet files, or list files (``.txt``: one path a line, relative
    to ``root``, ``#`` comments). A missing file is an error that names it."""
    out: list[Path] = []
    for spec in specs:
        p = Path(spec)
        if not p.exists():
            raise PriorError(f"prior {p}: no such file")
        if p.suffix == ".txt":
            for ln in p.read_text().splitlines():
                ln = ln.split("#", 1)[0].strip()
                if ln:
                    out.extend(prior_paths([root / ln], root))
        else:
            out.append(p)
    return out


def read_prior(path: Path):
    """One compare Parquet's rows, the columns ``fold_prior`` needs; ``PriorError`` naming the file
    when it is not a Parquet or lacks them."""
    import pandas as pd

    try:
        df = pd.read_parquet(path)
    except Exception as e:  # pyarrow raises several kinds for a truncated or foreign file
        raise PriorError(f"prior {path}: not a readable Parquet ({type(e).__name__}: {e})") from e
    missing = [c for c in NEEDED if c not in df.columns]
    if missing:
        raise PriorError(f"prior {path}: not hgemm-bench compare results (missing columns {', '.join(missing)})")
    return df


def prior_outcomes(policy, df) -> tuple[list[tuple], int, int]:
    """([(Shape, [Outcome])], rows skipped, rows without a baseline) from compare rows, grouped
    by (run, shape) so each row's reward is against its own run's baselines."""
    groups, skipped, no_base = [], 0, 0
    for (run_id, shape_name), grp in df.groupby(["run_id", "shape"], sort=True):
        rows = grp.to_dict("records")
        base_us, _ = strongest_baseline(rows)
        outs = []
        for r in rows:
            if r["is_baseline"]:
                continue
            cand = policy.candidate_for(str(r["method"]))
            if cand is None:
                skipped += 1
                continue
            rew = reward(r, base_us)
            if rew is None:
                no_base += 1
                continue
            outs.append(Outcome(cand, str(r["layout"]), str(r["status"]), rew, None, base_us,
                                status_reason=str(r.get("status_reason") or ""), failure=failure_kind(r),
                                row_id=f"prior:{run_id}:{shape_name}:{r['method']}:{r['layout']}"))
        if outs:
            groups.append((parse_shape(shape_name), outs))
    return groups, skipped, no_base


def with_prior(policy, paths: Sequence[Path], exclude_shapes: Iterable[str] = (),
               gpu: str | None = None) -> tuple[object, PriorSummary]:
    """A copy of ``policy`` that has also learnt ``paths`` (``fold_prior``), and the fold's summary;
    the policy itself is untouched (a search's own, or the one a rule without the prior picks with)."""
    import copy

    out = copy.deepcopy(policy)
    return out, fold_prior(out, paths, exclude_shapes, gpu)


def fold_prior(policy, paths: Sequence[Path], exclude_shapes: Iterable[str] = (), gpu: str | None = None) -> PriorSummary:
    """Fold every row of ``paths`` the policy has not seen into it (``Policy.observe``), except rows
    of ``exclude_shapes`` (names): a held-out check keeps its own shapes out of what it learns from.
    With ``gpu`` (a GPU model name), rows that name another model are left out and counted: which
    kernel wins depends on the GPU, and a policy learns for one."""
    excluded = set(exclude_shapes)
    summary = PriorSummary(len(paths), 0, set(), 0, 0)
    for path in paths:
        df = read_prior(path)
        df = df[~df["shape"].isin(excluded)]
        if gpu and "gpu_name" in df.columns:
            other = df["gpu_name"].notna() & (df["gpu_name"] != gpu)
            summary.other_gpu += int(other.sum())
            df = df[~other]
        for col, want in (("mode", "offline"), ("cache", "warm")):  # as the search measures
            if col in df.columns:
                df = df[df[col] == want]
        groups, skipped, no_base = prior_outcomes(policy, df)
        summary.skipped += skipped
        summary.no_baseline += no_base
        for shape, outs in groups:
            new = [o for o in outs if o.row_id not in policy.seen]
            policy.observe(shape, new)
            summary.rows += len(new)
            if new:
                summary.shapes.add(shape.name)
    return summary


def prior_shapes(paths: Sequence[Path]) -> set[str]:
    """Every shape named in the prior files (a fresh draw must avoid them all)."""
    out: set[str] = set()
    for path in paths:
        out |= set(read_prior(path)["shape"])
    return out
