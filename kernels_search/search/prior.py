"""Earlier measurements folded into a learner: what a search or a first pick knows before it starts.

A search's learner learns only from its own DB: a few dozen shapes. ``fold_prior`` turns
``compare`` results (Parquets, or the packaged evidence: ``search.evidence``) into the learner's
observations, with the search's own reward (``reward.reward``: clipped log speedup over the
fastest correct baseline row of the same run and shape, over both layouts; -1 for a failed row),
so one learner learns from every shape measured on this GPU model. Only offline warm rows count,
as the search measures.

The held-out first pick folds this GPU model's packaged evidence into a copy of the finished
search's learner by default (``search --first-pick-prior auto``); the search itself learns from a
prior only when asked (``search --prior``): measured on an H200, a prior folded into the search
did not improve its held-out picks (paired 0.998x over 80 fresh shapes), while the first pick with
evidence required near the shape did (paired 1.047x over 40).

Rows are keyed ``prior:<run_id>:<shape>:<method>:<layout>``, so folding the same rows twice, or
into a learner restored from a checkpoint that had them, adds nothing. Baseline rows set the
reference only; rows of methods the learner does not search (``library``, ``extern``, a family
it lacks, a spec its family no longer parses) are skipped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from harness.shapes import parse_shape
from kernels_search.proposals import Outcome
from kernels_search.search.learner import UPDATE_ROWS
from kernels_search.search.reward import failure_kind, reward, strongest_baseline

NEEDED = ("run_id", "shape", "method", "layout", "is_baseline", "status", "status_reason", "device_us_median")


class PriorError(ValueError):
    """A prior file that cannot be read as compare results (names the file and the problem)."""


@dataclass
class PriorSummary:
    files: int
    rows: int  # folded into the learner (new observations)
    shapes: set
    skipped: int  # rows of methods the learner does not search
    no_baseline: int  # rows of shapes whose run has no correct baseline row
    other_gpu: int = 0  # rows measured on another GPU model than the learner's
    source: str = ""  # what was folded in, when not files named by the user (e.g. the packaged evidence)

    def line(self) -> str:
        return (f"prior: {self.rows} rows on {len(self.shapes)} shapes from "
                f"{self.source or f'{self.files} files'} folded in"
                f" ({self.skipped} rows of methods the learner does not search, {self.no_baseline} without a baseline"
                + (f", {self.other_gpu} of another GPU model" if self.other_gpu else "") + ")")


def prior_paths(specs: Iterable[str | Path], root: Path = Path("."),
                missing: Callable[[Path], Exception] = lambda p: PriorError(f"prior {p}: no such file")) -> list[Path]:
    """Paths from ``specs``, in order: each spec itself, or for a list file (``.txt``: one path a line,
    relative to ``root``, ``#`` comments) the paths it lists. A missing one raises ``missing(path)``."""
    out: list[Path] = []
    for spec in specs:
        p = Path(spec)
        if not p.exists():
            raise missing(p)
        if p.suffix == ".txt":
            for ln in p.read_text().splitlines():
                ln = ln.split("#", 1)[0].strip()
                if ln:
                    out.extend(prior_paths([root / ln], root, missing))
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


def prior_outcomes(learner, df) -> tuple[list[tuple], int, int]:
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
            cand = learner.candidate_for(str(r["method"]))
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


def with_prior(learner, sources: Sequence, exclude_shapes: Iterable[str] = (),
               gpu: str | None = None, source: str = "") -> tuple[object, PriorSummary]:
    """A copy of ``learner`` that has also learnt ``sources`` (``fold_prior``), and the fold's summary;
    the learner itself is untouched (a search's own)."""
    import copy

    out = copy.deepcopy(learner)
    return out, fold_prior(out, sources, exclude_shapes, gpu, source)


def searched_rows(df, gpu: str | None = None):
    """(the rows of ``df`` a learner takes: offline warm, as the search measures, of GPU model
    ``gpu`` when given (rows naming no GPU kept); how many rows named another model). The one
    filter of folding a prior and of building the packaged evidence from the same Parquets."""
    other = 0
    if gpu and "gpu_name" in df.columns:
        mask = df["gpu_name"].notna() & (df["gpu_name"] != gpu)
        other = int(mask.sum())
        df = df[~mask]
    for col, want in (("mode", "offline"), ("cache", "warm")):
        if col in df.columns:
            df = df[df[col] == want]
    return df, other


def fold_prior(learner, sources: Sequence, exclude_shapes: Iterable[str] = (), gpu: str | None = None,
               source: str = "") -> PriorSummary:
    """Fold every row of ``sources`` (compare Parquet paths, or DataFrames of their rows such as
    ``Evidence.parts``), in order, that the learner has not seen into it (``Learner.observe``),
    except rows of ``exclude_shapes`` (names): a held-out check keeps its own shapes out of what it
    learns from. With ``gpu`` (a GPU model name), rows that name another model are left out and
    counted: which kernel wins depends on the GPU, and a learner learns for one. ``source`` names
    what was folded in for the summary line (default: the number of files)."""
    excluded = set(exclude_shapes)
    summary = PriorSummary(len(sources), 0, set(), 0, 0, source=source)
    for src in sources:
        df = read_prior(src) if isinstance(src, (str, Path)) else src
        df, other = searched_rows(df[~df["shape"].isin(excluded)], gpu)
        summary.other_gpu += other
        groups, skipped, no_base = prior_outcomes(learner, df)
        summary.skipped += skipped
        summary.no_baseline += no_base
        # model updates in batches of rows, not one per shape group (that cost ~50 s over the evidence)
        X, r = [], []
        for shape, outs in groups:
            new = [o for o in outs if o.row_id not in learner.seen]
            x, rr = learner.record(shape, new)
            X += x
            r += rr
            summary.rows += len(new)
            if new:
                summary.shapes.add(shape.name)
            if len(X) >= UPDATE_ROWS:
                learner.update_model(X, r)
                X, r = [], []
        learner.update_model(X, r)
    return summary


def prior_shapes(paths: Sequence[Path]) -> set[str]:
    """Every shape named in the prior files (a fresh draw must avoid them all)."""
    out: set[str] = set()
    for path in paths:
        out |= set(read_prior(path)["shape"])
    return out
