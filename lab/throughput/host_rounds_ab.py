"""Do the host-sampled rounds set cuBLAS's level? (the offline timer's first ``host_rounds`` rounds)

Why: on an H100 (contextab, runs e59dd03316c7 and 6c05087e27bb, `lab/throughput/contextab-h100.md`) the cuBLAS-family
baselines on small deep-K shapes ran at three discrete levels (64_64_16384 tn: 5.8, 6.2 and 6.85 us), our kernels
flat (max/min per entry 1.03). In a compare of 48 rounds with 49 candidates, 30 % of the baselines' rounds 0-9 were
within 3 % of their fastest round and none of rounds 10-47; a compare of the baselines alone stops at 6 rounds, all at
the low level; in a tune, the short calls sat low and the long ones high. Rounds 0-9 are the ones where the offline
loop follows each device sample with one synchronous eager call of the same entry (``host_call_us``).

This times the four baselines and one kernel method (the library by default) on each shape and layout, a fixed number of rounds (no early
stop), with the offline loop as `compare` runs it, under variants of what follows each device sample:

- ``none``: nothing (host_rounds 0);
- ``host``: the synchronous eager call, every round (what rounds 0-9 do);
- ``idle``: a synchronize and a 50 us host sleep, no call (the GPU idle as long as a host call keeps it);
- ``eager``: one eager call of the entry, not synchronized (the call without the idle gap);
- ``prime``: one eager call of the entry just before each of its own samples, none after (what the offline loop's
  graph samples do by default; every other variant turns it off);
- ``fill``: an eager elementwise kernel on a small buffer after each sample (does any eager launch do it?);
- ``direct``: nothing after a sample, and the batch launched directly behind the spin instead of replayed as a graph
  (is the higher level the graph's?).

``--variants`` picks some (default: the first four).

Per variant, method and layout: the median device time and the share of rounds within 3 % of that entry's fastest
round over all variants.

    python -m lab.throughput.host_rounds_ab [--shapes 64_64_16384,512_64_4096] [--kernel SPEC] [--rounds 30]
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import pandas as pd
import torch

import harness.timing.offline as offline
from harness.method import PrepareContext
from harness.problem import Problem
from harness.registry import resolve
from harness.shapes import parse_shapes
from harness.tensors import InputSet, timing_sets
from harness.timing.offline import Entry, OfflineSettings, measure_offline, time_candidates
from harness.timing.samplers import host_call_us

BASELINES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")
VARIANTS = ("none", "host", "idle", "eager", "prime", "fill", "direct")
DEFAULT_VARIANTS = VARIANTS[:4]


def _idle(fn, s, device) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    time.sleep(50e-6)
    return float("nan")


def _eager(fn, s, device) -> float:
    fn(s.a, s.b, s.c)
    return float("nan")


_FILL = {}


def _fill(fn, s, device) -> float:
    buf = _FILL.setdefault(device, torch.zeros(1 << 16, device=device))
    buf.add_(1.0)
    return float("nan")


def _sampler_factory(variant: str, make):
    """``make`` (the offline loop's make_sampler) as the variant needs it: direct launches, or unchanged."""

    def direct(fn, sets, device, capturable, *a, **kw):
        return make(fn, sets, device, False, *a, **kw)

    return direct if variant == "direct" else make


def entries_for(shape: str, specs: list[str], seed: int = 0, device: str = "cuda") -> list[Entry]:
    import kernels_search  # noqa: F401  (registers the families and the library)

    (s,) = parse_shapes(shape)
    out = []
    for layout in ("nn", "tn"):
        p = Problem(s, layout)
        (st,) = timing_sets(p, device, 1, seed)
        ins = (st.a, st.b, st.c)
        for m in resolve(specs):
            if not m.supports(p, device):
                continue
            ctx = PrepareContext(device, ins, partial(time_candidates, inputs=ins, device=device))
            prep = m.prepare(p, ctx)
            out.append(Entry((m.name, layout), prep.fn, [InputSet(*ins)], prep.capturable))
    return out


def run(shape: str, specs: list[str], rounds: int, seed: int, device: str = "cuda",
        variants: tuple[str, ...] = DEFAULT_VARIANTS) -> pd.DataFrame:
    entries = entries_for(shape, specs, device=device)
    rows = []
    make = offline.make_sampler
    try:
        for variant in variants:
            offline.host_call_us = {"idle": _idle, "eager": _eager, "fill": _fill}.get(variant, host_call_us)
            offline.make_sampler = _sampler_factory(variant, make)
            st = OfflineSettings(ci_target=0.0, min_rounds=rounds, max_rounds=rounds, budget_s=1e9, seed=seed,
                                 host_rounds=0 if variant in ("none", "prime", "direct") else rounds,
                                 prime=variant == "prime")
            meas = measure_offline(entries, device, st)
            for (method, layout), m in meas.items():
                for r, us in enumerate(m.device_us):
                    rows.append(dict(shape=shape, variant=variant, method=method, layout=layout, round=r, us=us))
    finally:
        offline.host_call_us = host_call_us
        offline.make_sampler = make
    return pd.DataFrame(rows)


def report(df: pd.DataFrame) -> str:
    fastest = df.groupby(["shape", "method", "layout"])["us"].transform("min")
    df = df.assign(low=df["us"] <= fastest * 1.03)
    g = df.groupby(["shape", "method", "layout", "variant"])
    t = pd.DataFrame({"median_us": g["us"].median(), "low": g["low"].mean()}).unstack("variant")
    variants = [v for v in VARIANTS if v in set(df["variant"])]
    t = t.reindex(columns=[(c, v) for c in ("median_us", "low") for v in variants])
    t.columns = [f"{c} {v}" for c, v in t.columns]
    return t.round(3).to_string()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="64_64_16384,512_64_4096")
    ap.add_argument("--kernel", default="library", help="one kernel method timed beside the baselines (default: "
                    "the packaged library, whose binaries the carried pool cache holds)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"some of {', '.join(VARIANTS)}")
    ap.add_argument("--out", default=None, help="also write the per-round samples here (Parquet)")
    a = ap.parse_args(argv)
    variants = tuple(v for v in a.variants.split(",") if v)
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(sorted(unknown))}; known: {', '.join(VARIANTS)}")
    specs = list(BASELINES) + ([a.kernel] if a.kernel else [])
    df = pd.concat([run(s, specs, a.rounds, a.seed, variants=variants) for s in a.shapes.split(",")],
                   ignore_index=True)
    if a.out:
        df.to_parquet(a.out)
    print(f"GPU: {torch.cuda.get_device_name()}; {a.rounds} rounds a variant; 'low': share of rounds within 3 % of "
          "the entry's fastest round over all variants")
    print(report(df))


if __name__ == "__main__":
    main()
