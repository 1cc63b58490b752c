"""lab/seen_shapes.txt and lab/seen_shapes.py: every cuda-l2 grid shape measured so far, which a fresh
held-out draw avoids, and every shape of the packaged evidence is one a fresh check must avoid."""

from __future__ import annotations

import json
from pathlib import Path

from harness.shapes import parse_shapes, read_shape_file
from kernels_search.search import evidence
from kernels_search.search.run import holdout_shapes

ROOT = Path(__file__).resolve().parents[2]


def test_the_seen_list_is_the_whole_grid_and_holds_the_librarys_shapes():
    seen = parse_shapes(str(ROOT / "lab" / "seen_shapes.txt"))
    names = {s.name for s in seen}
    assert names == {s.name for s in parse_shapes("cuda-l2")}
    lib = json.loads((ROOT / "kernels_search" / "library" / "library.json").read_text())
    assert {e["shape"] for e in lib["entries"]} <= names
    from harness.shapes import sample_grid

    assert holdout_shapes(sample_grid(40, 0), 20, 3, exclude=seen) == []


def test_seen_shapes_script_lists_grid_shapes_named_in_a_text_by_size():
    from lab import seen_shapes

    assert seen_shapes.seen_grid_shapes(["16384_64_12288, 64_64_64 and 100_200_300."]) == ["64_64_64", "16384_64_12288"]


# The sizes an off-grid draw takes each of M, N and K from (the header of every studies/offgrid-test*-shapes.txt)
OFFGRID_SIZES = (96, 160, 192, 224, 320, 384, 448, 640, 768, 896, 1280, 1536, 1792, 2560, 3072, 3584, 5120, 6144,
                 7168, 10240, 14336)


def test_every_shape_of_the_packaged_evidence_is_one_a_fresh_check_avoids():
    """A grid shape in seen_shapes.txt, one of an off-grid file's (studies/offgrid-*shapes.txt), which a later
    off-grid draw excludes, or a shape no off-grid draw can produce (a size outside the draw's list, such as the
    decode shapes' M of 1-32)."""
    seen = set((ROOT / "lab" / "seen_shapes.txt").read_text().split())
    offgrid = sorted((ROOT / "lab" / "studies").glob("offgrid-*shapes.txt"))
    assert len(offgrid) >= 2
    header = (ROOT / "lab" / "studies" / "offgrid-test13-shapes.txt").read_text().splitlines()[2]
    assert header.endswith("V = " + ", ".join(map(str, OFFGRID_SIZES))), header
    seen |= {s.name for f in offgrid for s in read_shape_file(f)}
    drawable = {s for s in evidence.load("NVIDIA H200").shapes()
                if all(int(x) in OFFGRID_SIZES for x in s.split("_"))}
    assert drawable <= seen
    assert drawable, "the evidence holds off-grid shapes a draw could produce"
