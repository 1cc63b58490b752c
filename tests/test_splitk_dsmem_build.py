"""CPU tests of the ``splitk_dsmem`` family: its knob rules, what it serves, and that its configs build for sm_90a
without spills, loading A and B by TMA into shared memory for WGMMAs and summing the slices through distributed
shared memory between cluster barriers."""

from __future__ import annotations

import pytest

from harness.problem import Problem, Shape
from kernels_search.families import ALL as FAMILIES
from kernels_search.families.splitk_dsmem import smem_bytes
from kernels_search.family import KnobError

from conftest import build_config, needs_nvcc, sass_of

FAM = FAMILIES["splitk_dsmem"]


@pytest.mark.parametrize("spec, why", [
    ("bm=128,bn=128,stages=8", "shared memory"),
    ("bm=32", "not in"),
    ("splits=32", "not in"),
])
def test_rules_refuse_with_a_reason(spec, why):
    with pytest.raises(KnobError, match=why):
        FAM.parse(spec)


def test_serves_tn_with_k_a_multiple_of_8_and_passes_the_slice_count():
    k = FAM.defaults()
    assert FAM.supports(k, Problem(Shape(256, 256, 4096), "tn"))
    assert "layout tn" in FAM.supports(k, Problem(Shape(256, 256, 4096), "nn")).reason
    assert "multiple of 8" in FAM.supports(k, Problem(Shape(256, 256, 100), "tn")).reason
    assert FAM.opts(FAM.parse("splits=8"), Problem(Shape(256, 256, 4096), "tn")) == [8]
    swapped = FAM.parse("swap=1,bn=8")
    assert FAM.supports(swapped, Problem(Shape(1, 4096, 4096), "tn"))
    assert "tiles along M" in FAM.supports(swapped, Problem(Shape(8 * 65536, 64, 64), "tn")).reason
    # swapped, the tile lies in shared memory as C lays it out: 8 rows (M) of 64 + 4 columns (N)
    assert smem_bytes(swapped) == 4 * (64 + 8) * 64 * 2 + 8 * 68 * 4 + 16 * 4 + 1024
    # 4 stages of (64 + 64) x 64 fp16, the 64 x 68 fp32 tile, barriers and the 1 KB alignment
    assert smem_bytes(k) == 4 * 128 * 64 * 2 + 64 * 68 * 4 + 16 * 4 + 1024


def test_source_carries_the_shared_cluster_header_verbatim():
    """The DSMEM slice sum and the cluster launch come from templates/cluster_slices.cuh, rendered into the source
    (so the build key and the source hash change with it), shared with splitk_regs."""
    from kernels_search.family import template

    part = template("cluster_slices.cuh")
    for fam in (FAM, FAMILIES["splitk_regs"]):
        src = fam.render(fam.defaults())
        assert part in src and src.count("namespace cs {") == 1


@needs_nvcc
@pytest.mark.parametrize("spec", ["", "stages=8", "bn=128", "bn=32,stages=8", "bm=128,bn=128", "swap=1,bn=8,stages=12",
                                  "mma_pipe=1,stages=6"])
def test_configs_compile_without_spills_on_tma_and_wgmma(spec, cache):
    k = FAM.parse(spec)
    res = build_config(FAM, k)
    assert res.ok, res.log[-3000:]
    assert len(res.kernels) == 1
    assert res.spill_bytes == 0, res.kernels
    sass = sass_of(res.lib_path)
    assert "UTMALDG" in sass and "HGMMA" in sass and ".F32" in sass  # TMA loads, WGMMA with fp32 accumulators
    assert "LDGSTS" not in sass and "LDG.E" not in sass  # no other loads of A or B
    assert "UCGABAR_ARV" in sass and "UCGABAR_WAIT" in sass  # the cluster barriers around the DSMEM reduction
    # mma_pipe: one stage's WGMMAs left in flight while the previous stage is freed
    assert ("WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass) == bool(k["mma_pipe"])
