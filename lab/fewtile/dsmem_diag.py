"""Where a split-K cluster kernel goes wrong, if it does: for each spec and shape, one call against an fp32 torch
reference, and when it is off, which part of the tile is (rows and columns within the tile, per K slice count).

Written for splitk_dsmem's (and splitk_regs') first GPU run: the GPU tests say pass or fail with the largest error;
this says whether the main loop (wrong with one slice), the slice sum (right with one slice, wrong with several:
compare against the reference divided by the slice count) or the tile mapping (errors in some rows or columns of
every tile) is at fault. Each case runs in a child process with a time limit, so a hang costs its case only.

    python3 -m lab.fewtile.dsmem_diag [--timeout 30] SPEC[@SHAPE] ...   (default shapes: 256_256_4096 1_4096_4096)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

SHAPES = ("256_256_4096", "1_4096_4096")


def one_case(spec: str, shape: str) -> dict:
    import torch

    from harness.method import PrepareContext
    from harness.problem import Problem, Shape
    from kernels_search import make_method

    family, _, args = spec.partition(":")
    m = make_method(family, args or None)
    p = Problem(Shape(*map(int, shape.split("_"))), "tn")
    sup = m.supports(p, "cuda")
    if not sup:
        return {"spec": spec, "shape": shape, "unsupported": sup.reason}
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(p.m, p.k, device="cuda", generator=g).sub_(0.5).half()
    b = torch.rand(p.n, p.k, device="cuda", generator=g).sub_(0.5).half()
    c = torch.full((p.m, p.n), float("nan"), device="cuda", dtype=torch.float16)
    prep = m.prepare(p, PrepareContext(device="cuda", inputs=(a, b, c), time_candidates=lambda fns, **kw: [0.0] * len(fns)))
    prep.fn(a, b, c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    out = c.float()
    tol = 2e-3 * ref.abs().max().item() + 1e-3
    bad = ~((out - ref).abs() <= tol)  # NaN counts as bad
    res = {"spec": spec, "shape": shape, "max_err": float((out - ref).abs().nan_to_num(float("inf")).max()),
           "tol": tol, "bad": float(bad.float().mean()), "nan": float(torch.isnan(out).float().mean())}
    if bad.any():
        k = m.knobs
        if "fm" in k:  # splitk_regs: 16 x fm rows, 8 x fn columns
            tm, tn = 16 * k["fm"], 8 * k["fn"]
        else:  # splitk_dsmem: swapped, bn rows of C and bm columns
            tm, tn = (k["bn"], k["bm"]) if k.get("swap") else (k["bm"], k["bn"])
        rows = bad.float().mean(1).cpu()
        cols = bad.float().mean(0).cpu()
        res["bad_rows_in_tile"] = sorted({int(i) % tm for i in torch.nonzero(rows > 0.5).flatten().tolist()})[:32]
        res["bad_cols_in_tile"] = sorted({int(j) % tn for j in torch.nonzero(cols > 0.5).flatten().tolist()})[:32]
        for s in (2, 4, 8, 16):  # a sum that kept one slice of S equal ones looks like ref / S
            if ((out - ref / s).abs() <= tol).float().mean() > 0.9:
                res["looks_like_ref_over"] = s
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+", help="SPEC or SPEC@SHAPE")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        spec, shape = a.cases[0].split("@")
        print(json.dumps(one_case(spec, shape)))
        return 0
    for case in a.cases:
        spec, _, shape = case.partition("@")
        for sh in [shape] if shape else SHAPES:
            try:
                r = subprocess.run([sys.executable, "-m", "lab.fewtile.dsmem_diag", "--child", f"{spec}@{sh}"],
                                   capture_output=True, text=True, timeout=a.timeout)
                line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else f"failed: {r.stderr.strip()[-300:]}"
            except subprocess.TimeoutExpired:
                line = f"hung: no answer in {a.timeout:g} s"
            print(f"{spec} {sh}: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
