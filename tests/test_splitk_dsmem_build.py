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
    ("bm=128,bn=128,chains=2", "accumulator registers"),
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
    # bm 256: the fp32 tile reuses the stages, so six stages of 256 weight rows and 32 columns fit, and seven do not
    fat = FAM.parse("swap=1,bm=256,bn=32,stages=6")
    assert smem_bytes(fat) == 6 * (256 + 32) * 64 * 2 + 16 + 16 * 6 + 1024
    with pytest.raises(KnobError, match="shared memory"):
        FAM.parse("swap=1,bm=256,bn=32,stages=8")
    # all 16 k-tiles of a K-1024 slice in flight: at bn 32 sixteen stages fit, at bn 64 they do not
    assert smem_bytes(FAM.parse("bn=32,stages=16")) == 16 * (64 + 32) * 64 * 2 + 64 * 36 * 4 + 16 * 16 + 1024
    with pytest.raises(KnobError, match="shared memory"):
        FAM.parse("bn=64,stages=16")


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
                                  "mma_pipe=1,stages=6", "chains=4,mma_pipe=1,stages=8",
                                  "swap=1,bn=32,chains=4,mma_pipe=1,stages=8", "bm=128,chains=2",
                                  "swap=1,bm=256,bn=32,mma_pipe=1,stages=6", "bm=256,bn=64,stages=4",
                                  "sum=1,prefetch=1,mma_pipe=1,stages=8", "swap=1,bn=16,sum=1,mma_pipe=1,stages=8",
                                  "nn=1,swap=1,bn=8,mma_pipe=1,stages=8", "nn=1,bn=128,mma_pipe=1,stages=6,sum=1",
                                  "bn=16,mma_pipe=1,stages=16"])
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


PICK_SLICES_MAIN = r"""
#include <cstdio>
#include "hgemm_abi.cuh"
#include "cluster_slices.cuh"
// held(s): clusters of s one-CTA-a-SM CTAs a 132-SM GPU holds at once; HELD8 for s = 8 (15 on the H200, where a
// cluster's CTAs share one GPC), 132 / s otherwise
int main() {
  auto held = [](int s) { return s == 8 ? HELD8 : 132 / s; };
  std::printf("%d %d %d %d\n", cs::pick_slices(16, 64, 2, 132, held), cs::pick_slices(32, 64, 2, 132, held),
              cs::pick_slices(200, 64, 2, 132, held), cs::pick_slices(2, 6, 2, 132, held));
}
"""


@needs_nvcc
@pytest.mark.parametrize("held8, want", [(16, "8 4 1 3"), (15, "7 4 1 3")])
def test_automatic_slices_fit_the_clusters_the_gpu_holds(held8, want, tmp_path):
    """The automatic slice count takes only as many slices as let the GPU hold all the tiles' clusters at once: 16
    tiles of 64 k-tiles take 8 slices when 16 clusters of 8 fit, 7 when only 15 do (the 16th cluster would run as a
    second wave); 32 tiles take 4 (26 clusters of 5 fit), 200 tiles take 1, and 6 k-tiles at least 2 a slice take 3."""
    import subprocess
    from pathlib import Path

    from kernels_search import toolchain
    import kernels_search.family

    templates = Path(kernels_search.family.__file__).parent / "templates"
    src = tmp_path / "pick.cu"
    src.write_text(PICK_SLICES_MAIN)
    exe = tmp_path / "pick"
    subprocess.run([toolchain.find_nvcc(), "-std=c++17", f"-DHELD8={held8}", f"-I{templates}", str(src),
                    "-o", str(exe)],
                   check=True, capture_output=True)
    assert subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split() == want.split()


@needs_nvcc
@pytest.mark.parametrize("spec, chains", [("mma_pipe=1,stages=8", 1), ("chains=2,mma_pipe=1,stages=8", 2),
                                          ("swap=1,bn=16,chains=4,mma_pipe=1,stages=8", 4)])
def test_chains_give_the_wgmmas_independent_accumulators(spec, chains, cache):
    """``chains``: a stage's k16 WGMMAs alternate over that many accumulator sets, so as many distinct accumulator
    registers head the main loop's HGMMAs (one set: every HGMMA reads and writes the same registers)."""
    import re

    res = build_config(FAM, FAM.parse(spec))
    assert res.ok and res.spill_bytes == 0, res.log[-3000:]
    accs = set(re.findall(r"HGMMA\.64x\d+x16\.F32 (R\d+),", sass_of(res.lib_path)))
    assert len(accs) == chains, accs


def test_the_gpu_tests_specs_are_valid_configs():
    """A spec the GPU tests name that the family refuses fails there only, on the GPU host (a slice count not among
    the knob's values did): every one parses here."""
    import test_kernels_gpu as gpu

    for spec in gpu.SPLITK_DSMEM_SPECS + gpu.SPLITK_DSMEM_FAT_SPECS + gpu.SPLITK_DSMEM_NN_SPECS:
        family, _, args = spec.partition(":")
        FAMILIES[family].parse(args)
