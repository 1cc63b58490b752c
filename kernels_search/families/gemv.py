"""``gemv``: decode GEMMs (M <= 32, weights stored N x K) as a register-streamed GEMV on the tensor cores.

Why: on decode shapes the time is the weights' bytes; a kernel that stages them through shared
memory pays per-SM copy-issue limits (cp.async) or box set-up and pipeline barriers (TMA), and a
split-K fix-up on top. templates/gemv_mma.cu loads each lane's 16 bytes of a weight row straight
into mma.sync m16n8k16 registers (k order is free in a dot product, so the activation row is
loaded under the same permutation), keeps the activation in L1/L2, sums a CTA's k groups through
shared memory and splits K across CTAs only when the row blocks alone leave SMs idle.
Serves layout tn only (B as N x K, a linear layer's weight); nn goes to other families.
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem
from kernels_search.family import DEFAULT_SMS, Family, Knob, cuda_source

STATIC_SMEM_LIMIT = 48 * 1024


def registers(k: Mapping) -> int:
    """Registers per thread at least: the loads of one run of ``u`` chunks, the accumulators and a few
    indices (ptxas decides the rest; measured: u=8 takes 118 where this says 108)."""
    return k["u"] * (8 * k["rw"] + 4 * k["mt"]) + 4 * k["rw"] * k["mt"] + 8


def smem_bytes(k: Mapping) -> int:
    """Static shared memory: the k groups' fp32 parts handed to k group 0."""
    wr = k["warps"] // k["kw"]
    return max(k["kw"] - 1, 1) * wr * k["rw"] * k["mt"] * 32 * 16


def rows_per_cta(k: Mapping) -> int:
    return 16 * k["rw"] * (k["warps"] // k["kw"])


# pf 4: the weights loaded with an L2 evict-last policy, substituted into the template's no-hint load
# (GV_PF matches none of its branches), so the configs of pf 0-2 keep their sources and build-cache
# entries. Why: timed warm (the same weights call after call), cuBLAS reads part of a decode GEMM's
# weights from the H200's 50 MiB L2 and gemv read almost none: on 8_4608_3584 (33 MB) warm cuBLAS
# 7.6 us, gemv 11.5 us, gemv pf=4 8.5 us; cold all three stream from DRAM and pf=4 costs 2-3 %
# (lab/gemv/NOTES.md). The coherent load path (ld.global instead of .nc) measured the same as pf=1.
NO_HINT_LOAD = 'asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"\n'
EVICT_LAST = 4  # the pf value
EVICT_LAST_LOAD = (
    'uint64_t pol;  // not volatile: the same policy every call, so the compiler creates it once\n'
    '  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));\n'
    '  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4], %5;"\n')
NO_HINT_OPERANDS = '               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));\n#endif'


def load_form_source(body: str, pf: int) -> str:
    """The template with the evict-last weight load in place of the no-hint one for ``pf`` 4; the
    template itself for 0-2."""
    if pf != EVICT_LAST:
        return body
    for anchor in (NO_HINT_LOAD, NO_HINT_OPERANDS):
        assert body.count(anchor) == 1, f"gemv_mma.cu changed its no-hint weight load: {anchor!r}"
    body = body.replace(NO_HINT_LOAD, EVICT_LAST_LOAD)
    return body.replace(NO_HINT_OPERANDS, NO_HINT_OPERANDS.replace('"l"(p));', '"l"(p), "l"(pol));'))


class Gemv(Family):
    def check(self, k: Mapping) -> str:
        if k["warps"] % k["kw"]:
            return f"kw={k['kw']} k groups must divide warps={k['warps']}"
        regs = registers(k)
        if regs > 224:
            return f"u={k['u']} chunks of rw={k['rw']}, mt={k['mt']} need about {regs} registers per thread (> 224)"
        if k["minb"] * k["warps"] * 32 * max(regs, 32) > 65536:
            return f"minb={k['minb']} CTAs of {k['warps']} warps at about {regs} registers exceed an SM's 64K registers"
        smem = smem_bytes(k)
        if smem > STATIC_SMEM_LIMIT:
            return f"{smem} bytes of static shared memory > {STATIC_SMEM_LIMIT}"
        return ""

    def render(self, k: Mapping) -> str:
        defines = {"GV_MT": k["mt"], "GV_RW": k["rw"], "GV_WARPS": k["warps"], "GV_KW": k["kw"],
                   "GV_U": k["u"], "GV_PF": k["pf"], "GV_MINB": k["minb"], "GV_PDL": k["pdl"]}
        return load_form_source(cuda_source(f"hgemm-bench family {self.name}", defines, "gemv_mma.cu"), k["pf"])

    def supports(self, k: Mapping, problem: Problem) -> Support:
        if problem.layout != "tn":
            return unsupported("gemv serves layout tn only (B stored N x K)")
        if problem.m > 8 * k["mt"]:
            return unsupported(f"gemv with mt={k['mt']} serves M <= {8 * k['mt']}")
        if problem.k % 8:
            return unsupported("gemv needs K a multiple of 8 (16-byte rows)")
        return SUPPORTED

    def opts(self, k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        return [int(k["splits"])]


FAMILY = Gemv(
    name="gemv",
    # measured best per decode row count on the H200 (lab/gemv/NOTES.md): M <= 8, 9-16, 17-32
    presets=("", "mt=2", "mt=4:minb=2"),
    knobs=(
        Knob("mt", (1, 2, 4), 1, help="8-row activation fragments: serves M <= 8*mt"),
        Knob("rw", (1, 2, 4), 1, help="16-row weight fragments per warp"),
        Knob("warps", (4, 8, 16), 4, help="warps per CTA"),
        Knob("kw", (1, 2, 4, 8), 1, help="warps along K within a CTA (their parts summed in shared memory)"),
        Knob("u", (4, 2, 8, 1), 4, help="32-k chunks a lane loads before its MMAs: bytes in flight = u*rw KB per warp"),
        Knob("pf", (1, 0, 2, 4), 1, help="weight loads: an L2 prefetch hint of 0 none, 1 128 B, 2 256 B; 4: 128 B "
             "and an L2 evict-last policy (keeps weights in L2 between calls: faster warm, 2-3 % slower cold)"),
        Knob("minb", (4, 3, 2, 1), 4, help="CTAs per SM the register budget must allow"),
        Knob("pdl", (0, 1), 0, help="1 = programmatic dependent launch: this launch overlaps the previous "
                                    "grid's tail (memory access still waits for it to complete)"),
        Knob("splits", (0, 1, 2, 4, 8, 16, 32, 64), 0, runtime=True,
             help="K slices per row block (0 = the count that balances the SMs best)"),
    ),
)
