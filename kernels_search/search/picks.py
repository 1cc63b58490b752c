"""First picks without a GPU: the learner a search folder holds, and ``search --dry-run``.

``learner_for_search(folder)`` rebuilds a finished search's learner as ``search_main`` does
(checkpoint, then every DB row it lacks), so the picks computed here are the ones a device call
would make. ``dry_run(shapes)`` ranks, for each shape, the configs the first pick would choose
among, with the packaged search of record (``RECORD``, under ``kernels_search/library/``) and this
GPU model's packaged evidence (``search.evidence``): what a tuner would measure on a new shape, and
the evidence each candidate's place rests on.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable, Sequence

from harness.problem import Shape
from kernels_search.search.settings import FirstPickSettings, LearnerSettings

RECORD = "search-h200-g"  # the packaged search whose learner the dry run picks with
TOP = 8  # candidates the dry run lists per shape


def record_folder() -> Path:
    """The packaged search of record (its kernel DB and shape lists), as installed."""
    return Path(str(resources.files("kernels_search").joinpath("library", RECORD)))


def search_families(device: str = "cuda", plugins: Sequence[str] = ()) -> dict:
    """The families a search on ``device`` walked, as a learner rebuilt elsewhere needs them: on
    CUDA every built-in family, Triton's configs kept pickable where Triton does not import here
    (they need no build), plus the families plug-ins register."""
    from kernels_search.families import ALL, triton_gemm
    from kernels_search.search.learner import default_families

    for mod in plugins:  # plug-ins register their families, as in the search
        importlib.import_module(mod)
    if device != "cuda":
        return default_families(device)
    fams = dict(ALL)
    if not triton_gemm.triton_available():
        for name in (n for n, f in ALL.items() if f.backend == "triton"):
            tri = dataclasses.replace(fams[name])
            tri.supports = lambda knobs, problem: True
            fams[name] = tri
    fams.update({n: f for n, f in default_families("cuda").items() if n not in fams})
    return fams


def learner_for_search(folder: Path, device: str = "cuda", plugins: Sequence[str] = (),
                       settings: LearnerSettings = LearnerSettings(), log: Callable[[str], None] = lambda s: None):
    """(the learner of the search in ``folder``, its KernelDB): the checkpoint where it matches the
    families, then every DB row it has not seen (a folder without a checkpoint replays the DB)."""
    from kernels_search.search.db import KernelDB
    from kernels_search.search.learner import Learner

    db = KernelDB(Path(folder) / "db")
    layouts = tuple(sorted(set(db.df["layout"]))) if not db.df.empty else ("nn", "tn")
    learner = Learner(search_families(device, plugins), layouts, settings)
    if not learner.load(Path(folder) / "policy.npz"):
        log(f"{folder}: no checkpoint of these families: replaying the DB")
    learner.sync(db)
    return learner, db


def gpu_of(db) -> str | None:
    """The GPU model a search ran on (its DB rows' ``gpu_name``), or None for an empty DB."""
    gpus = db.df["gpu_name"].dropna() if not db.df.empty else []
    return gpus.iloc[0] if len(gpus) else None


@dataclass
class Ranked:
    """One candidate of a dry run: its place, spec, the rule's score and its evidence
    (``FirstPick.evidence``)."""

    rank: int
    spec: str
    score: float
    evidence: dict

    def lines(self) -> list[str]:
        """Two lines: the place, score and spec; then the evidence."""
        e = self.evidence
        why = (f"measured on {e['shapes']} other shapes ({e['near']} near); nearest {e['nearest']} "
               f"(distance {e['distance']:.2f}): {e['speedup']:.3f}x of the strongest baseline there"
               if e["shapes"] else "measured on no other shape: the learner's prediction")
        return [f"  #{self.rank:<2} score {self.score:8.3f}  {self.spec}", f"      {why}"]


def picker_for(shapes: Sequence[Shape], settings: FirstPickSettings = FirstPickSettings(), folder: Path | None = None,
               device: str = "cuda", plugins: Sequence[str] = (), keep_own: bool = False):
    """(the first pick, its KernelDB, the GPU model, what it learnt from in words) of the search in
    ``folder`` (default the packaged ``RECORD``) with what ``settings.prior`` adds, the rows of
    ``shapes`` left out of the prior (each is ranked as a shape never measured) unless ``keep_own``
    (``tune``: what was measured on the very shape is the best guide to it). No GPU."""
    from kernels_search.search import evidence
    from kernels_search.search.first_pick import FirstPick
    from kernels_search.search.prior import with_prior

    folder = record_folder() if folder is None else Path(folder)
    learner, db = learner_for_search(folder, device, plugins)
    gpu = gpu_of(db)
    sources, label = evidence.resolve(settings.prior, gpu)
    what = f"the learner of {folder.name} ({len(learner.seen)} rows)"
    if sources:
        learner, folded = with_prior(learner, sources, [] if keep_own else [s.name for s in shapes], gpu, label)
        what += f" and {label} ({folded.rows} rows on {len(folded.shapes)} {'shapes' if keep_own else 'other shapes'})"
    return FirstPick(learner, settings), db, gpu, what


def dry_run(shapes: Sequence[Shape], settings: FirstPickSettings = FirstPickSettings(), top: int = TOP,
            folder: Path | None = None, print_fn: Callable[[str], None] = print) -> dict[str, list[Ranked]]:
    """For each shape, the ``top`` configs the first pick ranks first (the first is what it would
    measure), with the learner of the search in ``folder`` (default the packaged ``RECORD``) and
    what ``settings.prior`` adds (default this GPU model's packaged evidence). The shapes' own rows
    are left out of it, as for held-out shapes: each is ranked as a shape never measured. Prints a
    block per shape; touches no GPU."""
    from kernels_search.search.first_pick import best_first

    picker, db, gpu, what = picker_for(shapes, settings, folder)
    print_fn(f"dry run, no GPU used: first picks for {gpu or 'this GPU model'} by {settings.name} with {what}; "
             "scores order the candidates, higher first")
    out: dict[str, list[Ranked]] = {}
    for shape in shapes:
        known, values = picker.scored(shape, db, gpu)
        out[shape.name] = [Ranked(r + 1, known[i].spec, float(values[i]), picker.evidence(shape, known[i]))
                           for r, i in enumerate(best_first(values, top))]
        print_fn(f"{shape.name}: {len(known)} candidates; the first pick measures #1")
        for got in out[shape.name]:
            for line in got.lines():
                print_fn(line)
    return out
