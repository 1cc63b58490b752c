"""Packaged evidence: earlier measurements of one GPU model that the first pick learns from.

A held-out first pick chooses a kernel for a shape nobody measured, so it learns from every shape
measured on this GPU model, not only from the search's own DB. Those measurements ship inside the
package as one compact Parquet per GPU model (``kernels_search/data/evidence-<model>.parquet``,
e.g. ``evidence-h200.parquet``), read through ``importlib.resources`` so an installed copy has
them. It holds only what ``search.prior`` folds into a learner: the offline warm rows of
``compare`` results, in the columns ``COLUMNS``, plus ``part`` (the index of the source file, so
the rows fold in the order and grouping of the source files, which keeps the picks identical).
Its Parquet metadata names the format version (``VERSION_KEY``), the GPU model and the sources.

Rebuild (from the repository root; the list of runs that feed it is ``lab/evidence/h200-sources.txt``)::

    python -m kernels_search.search.evidence build --gpu "NVIDIA H200" \\
        --out kernels_search/data/evidence-h200.parquet lab/evidence/h200-sources.txt

``build`` takes compare Parquets or ``.txt`` lists of them (one path a line, relative to the
current directory, ``#`` comments); ``show`` prints a dataset's metadata.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

from kernels_search.search.prior import NEEDED, prior_paths, read_prior, searched_rows

FORMAT_VERSION = 1
VERSION_KEY = b"hgemm_bench.evidence_version"
GPU_KEY = b"hgemm_bench.evidence_gpu"
SOURCES_KEY = b"hgemm_bench.evidence_sources"
COLUMNS = (*NEEDED, "gpu_name")  # what search.prior reads, and the GPU model it filters on
PACKAGE_DIR = "data"  # under kernels_search/


class EvidenceError(ValueError):
    """An evidence file that is missing, of another format version, or not evidence at all."""


def gpu_model_slug(gpu_name: str) -> str:
    """``"NVIDIA H200"`` -> ``"h200"``: the GPU model as the dataset's file name carries it."""
    words = gpu_name.replace("NVIDIA", "").split()
    return "-".join(w.lower() for w in words)


def file_name(gpu_name: str) -> str:
    return f"evidence-{gpu_model_slug(gpu_name)}.parquet"


@dataclass
class Evidence:
    """One GPU model's evidence: the rows of each source file, in order (``parts``)."""

    gpu_name: str
    parts: list  # [pandas.DataFrame], one per source file
    sources: list[str]

    @property
    def rows(self) -> int:
        return sum(len(p) for p in self.parts)

    @property
    def label(self) -> str:
        n = len(self.parts)
        return f"the packaged {self.gpu_name} evidence ({n} run{'s' if n != 1 else ''})"

    def shapes(self) -> set[str]:
        return set().union(*(set(p["shape"]) for p in self.parts)) if self.parts else set()


def build(paths: Sequence[Path], out: Path, gpu_name: str) -> Path:
    """Write the evidence of ``gpu_name`` from compare Parquets ``paths`` (in this order) to ``out``:
    their offline warm rows of that GPU model (rows naming no GPU kept), ``COLUMNS`` and ``part``,
    zstd-compressed, with the format version, GPU model and source names in the metadata."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    frames, sources = [], []
    for i, path in enumerate(paths):
        df, _ = searched_rows(read_prior(path), gpu_name)
        df = df.assign(gpu_name=df["gpu_name"] if "gpu_name" in df.columns else None)
        frames.append(df[list(COLUMNS)].assign(part=i))
        sources.append(Path(path).name)
    if not frames:
        raise EvidenceError("evidence build: no source files")
    table = pa.Table.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False)
    table = table.replace_schema_metadata({
        VERSION_KEY: str(FORMAT_VERSION).encode(), GPU_KEY: gpu_name.encode(),
        SOURCES_KEY: json.dumps(sources).encode()})
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd", compression_level=19, use_dictionary=True)
    tmp.replace(out)
    return out


def read(source) -> Evidence:
    """An evidence file (a path or a binary file object); ``EvidenceError`` when it is not one of
    this format version."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(source)
    except Exception as e:  # pyarrow raises several kinds for a truncated or foreign file
        raise EvidenceError(f"evidence {source}: not a readable Parquet ({type(e).__name__}: {e})") from e
    meta = table.schema.metadata or {}
    version = meta.get(VERSION_KEY, b"").decode()
    if version != str(FORMAT_VERSION):
        raise EvidenceError(f"evidence {source}: format version {version or 'none'}, this code reads {FORMAT_VERSION}")
    df = table.to_pandas()
    parts = [grp.drop(columns="part").reset_index(drop=True) for _, grp in df.groupby("part", sort=True)]
    return Evidence(meta[GPU_KEY].decode(), parts, json.loads(meta[SOURCES_KEY]))


def packaged(gpu_name: str):
    """The packaged evidence file of ``gpu_name``'s model (an ``importlib.resources`` Traversable),
    or None where the package has none."""
    res = resources.files("kernels_search").joinpath(PACKAGE_DIR, file_name(gpu_name))
    return res if res.is_file() else None


def load(gpu_name: str | None) -> Evidence | None:
    """The packaged evidence of this GPU model, or None (another model, the CPU, no GPU name)."""
    if not gpu_name:
        return None
    res = packaged(gpu_name)
    if res is None:
        return None
    with res.open("rb") as fh:
        return read(fh)


def resolve(prior, gpu_name: str | None) -> tuple[list, str]:
    """What a first pick folds in for ``FirstPickSettings.prior``, as (sources for
    ``prior.fold_prior``, a label for its summary line): ``"auto"``, this GPU model's packaged
    evidence (nothing where the package has none); ``"none"``, nothing; else the compare Parquets
    (or ``.txt`` lists) it names, which must exist (``PriorError``)."""
    if prior == "auto":
        ev = load(gpu_name)
        return (ev.parts, ev.label) if ev is not None else ([], "")
    if prior in ("none", None, ()):
        return [], ""
    return prior_paths([prior] if isinstance(prior, (str, Path)) else list(prior)), ""


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels_search.search.evidence", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write an evidence Parquet from compare Parquets (or .txt lists of them)")
    b.add_argument("files", nargs="+", type=Path)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--gpu", required=True, help='the GPU model, e.g. "NVIDIA H200"')
    s = sub.add_parser("show", help="print an evidence file's metadata and size")
    s.add_argument("file", type=Path)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "build":
            out = build(prior_paths(a.files), a.out, a.gpu)
            ev = read(out)
        else:
            ev = read(a.file)
    except ValueError as e:  # PriorError, EvidenceError
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{a.out if a.cmd == 'build' else a.file}: {ev.gpu_name}, {ev.rows} rows on {len(ev.shapes())} shapes "
          f"from {len(ev.sources)} runs, format version {FORMAT_VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
