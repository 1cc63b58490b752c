"""Two host-side costs of a compare, measured on their own (issue 35, the grid in 10 minutes): what a graph capture
costs through ``torch.cuda.graph`` (which synchronizes and empties the allocator cache on entry) against
``CUDAGraph.capture_begin/capture_end`` on a side stream, and what the autotune's candidate validation costs with
three host reads per candidate (its form before) against one read for all candidates
(``baselines.lt_candidates.relative_errors``, its form now).

Why: in lab/throughput/call4/ (small18) graph captures took about 20 % of a small shape's compare time and the
validation's relative errors about 7 %. Neither change alters a measured number; this says what each would save.

    python3 -m lab.throughput.host_probe [--captures 40] [--calls 30] [--candidates 23] [--shape 1024]
"""

from __future__ import annotations

import argparse
import sys
import time


def capture_ms(fn, captures: int, calls: int, direct: bool) -> float:
    import torch

    side = torch.cuda.Stream()
    graphs = []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(captures):
        g = torch.cuda.CUDAGraph()
        if direct:
            with torch.cuda.stream(side):
                g.capture_begin()
                for _ in range(calls):
                    fn()
                g.capture_end()
        else:
            with torch.cuda.graph(g):
                for _ in range(calls):
                    fn()
        graphs.append(g)
    dt = (time.perf_counter() - t0) * 1e3 / captures
    for g in graphs:  # each graph replays and gives the same answer as the other way of capturing it
        g.replay()
    torch.cuda.synchronize()
    return dt


def validation_ms(candidates: int, n: int, batched: bool) -> float:
    import torch

    from baselines.lt_candidates import relative_errors

    def three_reads(out, ref) -> float:  # the validation's form before relative_errors
        if not bool(torch.isfinite(out).all()):
            return float("inf")
        ref_norm = float(torch.linalg.vector_norm(ref.float()))
        err = float(torch.linalg.vector_norm(out.float() - ref.float()))
        return err / ref_norm if ref_norm > 0 else err

    g = torch.Generator(device="cuda").manual_seed(0)
    ref = torch.rand(n, n, device="cuda", generator=g).half()
    outs = [ref + torch.rand(n, n, device="cuda", generator=g).half() * 1e-3 for _ in range(candidates)]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if batched:
        errs = relative_errors(iter(outs), ref)
    else:
        errs = [three_reads(o, ref) for o in outs]
    dt = (time.perf_counter() - t0) * 1e3
    assert len(errs) == candidates
    return dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--captures", type=int, default=40)
    ap.add_argument("--calls", type=int, default=30, help="calls a captured graph holds")
    ap.add_argument("--candidates", type=int, default=23, help="the autotune's median candidate count (run 89)")
    ap.add_argument("--shape", type=int, default=1024, help="n of the n x n outputs validated")
    a = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("host_probe: no CUDA device")
        return 1
    x = torch.rand(64, 64, device="cuda").half()
    y = torch.rand(64, 64, device="cuda").half()
    z = torch.empty(64, 64, device="cuda").half()

    def fn():
        torch.matmul(x, y, out=z)

    fn()
    torch.cuda.synchronize()
    print("| what | ms each (3 repeats) |\n|---|---|")
    for direct in (False, True, False, True):
        name = "capture_begin/end on a side stream" if direct else "torch.cuda.graph"
        vals = [capture_ms(fn, a.captures, a.calls, direct) for _ in range(3)]
        print(f"| {name}, {a.calls} torch.matmul calls | {' / '.join(f'{v:.3f}' for v in vals)} |")
    for batched in (False, True, False, True):
        name = "relative_errors, one read for all" if batched else "three reads each (the form before)"
        vals = [validation_ms(a.candidates, a.shape, batched) for _ in range(3)]
        print(f"| validation of {a.candidates} candidates {a.shape}^2, {name} | {' / '.join(f'{v:.2f}' for v in vals)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
