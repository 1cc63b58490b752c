"""Which cupti-python setup delivers kernel records on this machine, and do they time a lone call?

The first probe (call1/cupti-probe1.log) enabled CONCURRENT_KERNEL + EXTERNAL_CORRELATION, pushed an
external id around each torch.matmul, flushed, and mapped 0 calls. Its counts were taken only
after the mapping, so "no kernel record" and "no external-correlation record" looked alike, and it
read CUPTI's record objects after the buffer callback had returned (they view CUPTI's buffer).
CUPTI writes an external-correlation record only for a CUDA API record made under the pushed id,
so without DRIVER/RUNTIME activity no call can be mapped by correlation even when every kernel
record arrives.

Each variant runs in its own process (CUPTI state is per process; a variant that hangs or
crashes must not take the others), once per cupti-python given by --site:

  repro          CONCURRENT_KERNEL + EXTERNAL_CORRELATION after torch made its context (probe 1's set-up)
  api            + DRIVER + RUNTIME + MEMSET + MEMCPY (what the product's default ``correlation`` enables)
  early          as api, CUPTI set up before torch makes its CUDA context
  enable-first   as api, activity_enable before activity_register_callbacks (NVIDIA's samples' order)
  kernel-only    CONCURRENT_KERNEL + MEMSET + MEMCPY, no push/pop: calls found by CUPTI timestamp windows
  flush0         as api, activity_flush_all(0) (not forced) instead of 1
  late-read      as api, records kept and read after the callback returned (may crash: that is the answer)
  torch-profiler control: torch.profiler's CUPTI (kineto) on the same calls
  product        harness measure_server (attribution correlation, then window) against measure_offline
                 on 64_64_64, 256_128_16384, 1_4096_4096, 4096_4096_4096, torch nn and tn
  env            versions, which libcupti files exist and which one the process maps

Every variant prints its raw counts (callbacks, records by kind, callback threads, dropped records,
every exception) and a RESULT line; the parent ends with one table.

    PYTHONPATH=$PWD python3 lab/throughput/cupti_probe.py [--site DIR ...] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

VARIANTS = ["env", "repro", "api", "early", "enable-first", "kernel-only", "flush0", "late-read", "torch-profiler",
            "product"]
SIZES = (64, 4096)
CALLS = 30
QPS = 200.0
BUF_BYTES = 64 << 20
REPO = Path(__file__).resolve().parents[2]


def log(*a) -> None:
    print(*a, flush=True)


def attempt(label: str, fn, *args):
    """Call fn; print and swallow any exception (the probe reports, it never stops at one)."""
    try:
        return fn(*args)
    except Exception as e:
        log(f"  [{label}] EXCEPTION {type(e).__module__}.{type(e).__name__}: {e}")
        return None


def cupti_maps() -> list[str]:
    try:
        return sorted({line.split()[-1] for line in open("/proc/self/maps") if "libcupti" in line})
    except OSError as e:
        return [f"? {e}"]


# --------------------------------------------------------------------------------------------- child side


class Collector:
    """Buffer callbacks that copy what they need inside the callback, and count everything."""

    def __init__(self, cupti, keep_raw: bool = False):
        self.cupti, self.keep_raw = cupti, keep_raw
        self.main = threading.get_ident()
        self.requested = self.completed = 0
        self.threads: Counter = Counter()
        self.by_kind: Counter = Counter()
        self.ops: list[tuple] = []  # (start, end, correlation_id, kind name, kernel name)
        self.ext: dict[int, int] = {}
        self.ext_kinds: Counter = Counter()
        self.raw: list = []
        self.errors: list[str] = []
        k = cupti.ActivityKind
        self.op_kinds = {int(k.CONCURRENT_KERNEL), int(k.KERNEL), int(k.MEMSET), int(k.MEMCPY)}
        self.ext_kind = int(k.EXTERNAL_CORRELATION)

    def name(self, k: int) -> str:
        try:
            return self.cupti.ActivityKind(k).name
        except Exception:
            return str(k)

    def req(self):
        self.requested += 1
        self.threads["requested@" + ("main" if threading.get_ident() == self.main else "other")] += 1
        return BUF_BYTES, 0

    def done(self, activities):
        self.completed += 1
        self.threads["completed@" + ("main" if threading.get_ident() == self.main else "other")] += 1
        try:
            n = 0
            for a in activities:
                n += 1
                k = int(a.kind)
                self.by_kind[self.name(k)] += 1
                if self.keep_raw:
                    self.raw.append(a)
                    continue
                self.take(a, k)
            log(f"  completed callback #{self.completed}: {n} records, thread "
                f"{'main' if threading.get_ident() == self.main else 'other'}")
        except Exception:
            self.errors.append(traceback.format_exc(limit=3))

    def take(self, a, k: int) -> None:
        if k in self.op_kinds:
            nm = ""
            if k in (int(self.cupti.ActivityKind.CONCURRENT_KERNEL), int(self.cupti.ActivityKind.KERNEL)):
                nm = str(a.name)[:60]
            self.ops.append((int(a.start), int(a.end), int(a.correlation_id), self.name(k), nm))
        elif k == self.ext_kind:
            self.ext_kinds[int(a.external_kind)] += 1
            if int(a.external_kind) == int(self.cupti.ExternalCorrelationKind.CUSTOM0):
                self.ext[int(a.correlation_id)] = int(a.external_id)

    def read_raw(self) -> None:
        log(f"  reading {len(self.raw)} kept record objects after their callback returned ...")
        for a in self.raw:
            try:
                self.take(a, int(a.kind))
            except Exception:
                self.errors.append(traceback.format_exc(limit=2))
                break


def dropped(cupti) -> int:
    """Records CUPTI dropped for want of buffer space (the third argument is where it writes the count)."""
    import numpy as np
    out = np.zeros(1, dtype=np.uint64)
    cupti.activity_get_num_dropped_records(0, 0, out.ctypes.data)
    return int(out[0])


def graph_us(a, b, c, reps: int = 20) -> float:
    """Per-call time of ``reps`` matmuls replayed as one CUDA graph (the offline reference)."""
    import torch
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(reps):
            torch.matmul(a, b, out=c)
    g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(7):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        out.append(e0.elapsed_time(e1) * 1000 / reps)
    return statistics.median(out)


def lone_calls(cupti, n: int, calls: int, tag: bool, base: int, seed: int) -> list[dict]:
    """``calls`` isolated torch.matmul calls on n^3, Poisson-spaced at QPS, as server mode makes them."""
    import random
    import torch
    rng = random.Random(seed)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    for _ in range(3):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    kind = cupti.ExternalCorrelationKind.CUSTOM0 if cupti else None
    out = []
    for i in range(calls):
        time.sleep(rng.expovariate(QPS))
        t_host = time.perf_counter()
        t0 = cupti.get_timestamp() if cupti else 0
        if tag:
            cupti.activity_push_external_correlation_id(kind, base + i)
        s.record()
        torch.matmul(a, b, out=c)
        e.record()
        if tag:
            cupti.activity_pop_external_correlation_id(kind)
        e.synchronize()
        host = (time.perf_counter() - t_host) * 1e6
        t1 = cupti.get_timestamp() if cupti else 0
        out.append(dict(id=base + i, t0=t0, t1=t1, event_us=s.elapsed_time(e) * 1000, host_us=host))
    return out


def med(xs):
    xs = [x for x in xs if x is not None and x == x]
    return round(statistics.median(xs), 2) if xs else None


def analyse(col: Collector, calls: list[dict], n: int) -> dict:
    """Per-call spans by correlation and by window, against events."""
    ops = [o for o in col.ops if o[0] > 0 and o[1] >= o[0]]
    invalid = len(col.ops) - len(ops)
    by_corr: dict[int, list] = {}
    for o in ops:
        call = col.ext.get(o[2])
        if call is not None:
            by_corr.setdefault(call, []).append(o)
    ids = {c["id"] for c in calls}
    by_corr = {k: v for k, v in by_corr.items() if k in ids}
    # window: an op belongs to the call whose CUPTI timestamps [t0, t1] (t1 after its synchronize) hold its start
    starts = sorted((c["t0"], c["t1"], c["id"]) for c in calls)
    ts = [t for t, _, _ in starts]
    by_win: dict[int, list] = {}
    for o in ops:
        i = bisect.bisect_right(ts, o[0]) - 1
        if i >= 0 and o[0] <= starts[i][1]:
            by_win.setdefault(starts[i][2], []).append(o)
    span = lambda os: (max(o[1] for o in os) - min(o[0] for o in os)) / 1000
    corr_us = [span(v) for v in by_corr.values()]
    win_us = [span(v) for v in by_win.values()]
    ends = sorted(o[1] for o in ops)
    idle = []
    for v in by_win.values():
        st = min(o[0] for o in v)
        j = bisect.bisect_left(ends, st)
        if j > 0:
            idle.append((st - ends[j - 1]) / 1000)
    agree = sum(1 for k, v in by_corr.items() if k in by_win and abs(span(v) - span(by_win[k])) < 0.01)
    names = Counter(o[4] for v in by_win.values() for o in v if o[4])
    res = dict(n=n, calls=len(calls), ops=len(ops), invalid_ops=invalid, mapped_corr=len(by_corr),
               mapped_window=len(by_win), corr_window_agree=agree,
               events_us=med(c["event_us"] for c in calls), host_us=med(c["host_us"] for c in calls),
               cupti_corr_us=med(corr_us), cupti_window_us=med(win_us), idle_us=med(idle),
               ops_per_call=med([len(v) for v in by_win.values()]), kernels=dict(names.most_common(3)))
    log(f"  n={n}: {json.dumps(res)}")
    return res


def setup(cupti, col: Collector, kinds: list, enable_first: bool) -> None:
    if enable_first:
        for k in kinds:
            attempt(f"enable {k.name}", cupti.activity_enable, k)
        attempt("register_callbacks", cupti.activity_register_callbacks, col.req, col.done)
    else:
        attempt("register_callbacks", cupti.activity_register_callbacks, col.req, col.done)
        for k in kinds:
            attempt(f"enable {k.name}", cupti.activity_enable, k)


def teardown(cupti, kinds: list) -> None:
    for k in kinds:
        attempt(f"disable {k.name}", cupti.activity_disable, k)


def flush(cupti, col: Collector, flag: int) -> dict:
    t = time.perf_counter()
    attempt(f"flush_all({flag})", cupti.activity_flush_all, flag)
    first = dict(ms=round((time.perf_counter() - t) * 1e3, 2), completed=col.completed,
                 records=sum(col.by_kind.values()))
    time.sleep(0.3)
    attempt("flush_all(1) again", cupti.activity_flush_all, 1)
    second = dict(completed=col.completed, records=sum(col.by_kind.values()))
    log(f"  flush: right after {first}; after 0.3 s and a forced flush {second}")
    return dict(flush_ms=first["ms"], records_after_flush=first["records"], records_later=second["records"])


def variant_cupti(name: str) -> dict:
    import torch
    from cupti import cupti
    k = cupti.ActivityKind
    api = [k.CONCURRENT_KERNEL, k.EXTERNAL_CORRELATION, k.DRIVER, k.RUNTIME, k.MEMSET, k.MEMCPY]
    kinds = {"repro": [k.CONCURRENT_KERNEL, k.EXTERNAL_CORRELATION],
             "kernel-only": [k.CONCURRENT_KERNEL, k.MEMSET, k.MEMCPY]}.get(name, api)
    tag = name != "kernel-only"
    col = Collector(cupti, keep_raw=(name == "late-read"))
    result: dict = dict(variant=name)
    if name == "early":
        log(f"  CUDA initialised before CUPTI set-up: {torch.cuda.is_initialized()}")
        setup(cupti, col, kinds, enable_first=False)
        torch.cuda.init()
    else:
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        ref = {n: None for n in SIZES}
        host_before = {}
        for n in SIZES:
            a = torch.randn(n, n, device="cuda", dtype=torch.float16)
            ref[n] = round(graph_us(a, a, torch.empty_like(a)), 2)
            host_before[n] = med(c["host_us"] for c in lone_calls(None, n, CALLS, False, 0, 1))
        result.update(graph_us_before=ref, host_us_before=host_before)
        log(f"  before CUPTI: graph-replay us per call {ref}; lone-call host us {host_before}")
        setup(cupti, col, kinds, enable_first=(name == "enable-first"))
    log(f"  libcupti mapped: {cupti_maps()}")
    runs = {}
    for j, n in enumerate(SIZES):
        runs[n] = attempt(f"calls n={n}", lone_calls, cupti, n, CALLS, tag, 1000 * (j + 1), 2)
    torch.cuda.synchronize()
    result.update(flush(cupti, col, 0 if name == "flush0" else 1))
    if name == "late-read":
        col.read_raw()
    result["dropped"] = attempt("dropped", dropped, cupti)
    teardown(cupti, kinds)
    result.update(requested=col.requested, completed=col.completed, threads=dict(col.threads),
                  records_by_kind=dict(col.by_kind), ext_by_external_kind=dict(col.ext_kinds),
                  callback_errors=col.errors[:3])
    log(f"  callbacks requested={col.requested} completed={col.completed} threads={dict(col.threads)}")
    log(f"  records by kind: {dict(col.by_kind)}; external-correlation kinds: {dict(col.ext_kinds)}")
    for e in col.errors[:3]:
        log("  callback error:\n" + e)
    result["sizes"] = [analyse(col, runs[n], n) for n in SIZES if runs[n]]
    after = {}
    for n in SIZES:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        after[n] = round(graph_us(a, a, torch.empty_like(a)), 2)
    host_after = {n: med(c["host_us"] for c in lone_calls(None, n, CALLS, False, 0, 3)) for n in SIZES}
    result.update(graph_us_after=after, host_us_after=host_after)
    log(f"  after disabling: graph-replay us per call {after}; lone-call host us {host_after}")
    if name == "api":  # does CUPTI, attached but idle, still cost anything that cuptiFinalize would save?
        attempt("finalize", cupti.finalize)
        fin = {n: med(c["host_us"] for c in lone_calls(None, n, CALLS, False, 0, 4)) for n in SIZES}
        result["host_us_after_finalize"] = fin
        log(f"  after cupti.finalize: lone-call host us {fin}; libcupti mapped {cupti_maps()}")
    return result


def variant_env() -> dict:
    import ctypes
    import importlib.metadata as md
    out: dict = {"python": sys.version.split()[0]}

    def note(key, value):
        out[key] = value
        log(f"  {key}: {value}")

    for dist in ("cupti-python", "nvidia-cuda-cupti", "nvidia-cuda-cupti-cu12", "torch", "cuda-bindings", "numpy"):
        try:
            note(dist, md.version(dist))
        except Exception:
            note(dist, None)
    note("libcupti_on_path", sorted({str(lib) for p in sys.path if p and Path(p).is_dir()
                                     for lib in Path(p).glob("nvidia/*/lib/libcupti.so*")}))
    note("maps_before_torch", cupti_maps())
    import torch
    note("torch_cuda", torch.version.cuda)
    note("maps_after_import_torch", cupti_maps())
    attempt("torch CUDA init", lambda: torch.zeros(1, device="cuda"))
    note("maps_after_cuda_init", cupti_maps())
    try:
        v = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
        note("driver_cuda_version", v.value)
    except Exception as e:
        note("driver_cuda_version", f"? {e}")
    from cupti import cupti
    note("cupti_module", cupti.__file__)
    note("get_timestamp", attempt("get_timestamp", cupti.get_timestamp))
    note("maps_after_cupti_call", cupti_maps())
    versions = {}
    for path in out["maps_after_cupti_call"]:
        try:
            v = ctypes.c_uint32()
            versions[path] = (ctypes.CDLL(path).cuptiGetVersion(ctypes.byref(v)), v.value)
        except Exception as e:
            versions[path] = f"? {e}"
    note("cupti_api_versions (rc, version)", versions)
    out["cupti_api_versions"] = out.pop("cupti_api_versions (rc, version)")
    return dict(variant="env", **out)


def variant_torch_profiler() -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.init()
    res = {"variant": "torch-profiler"}
    for n in SIZES:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            lone_calls(None, n, CALLS, False, 0, 2)
        ev = [e for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")]
        dur = [getattr(e, "device_time", None) or getattr(e, "cuda_time", None) for e in ev]
        res[f"n{n}"] = dict(cuda_events=len(ev), names=dict(Counter(e.name[:50] for e in ev).most_common(3)),
                            op_us_median=med(dur))
        log(f"  n={n}: {res[f'n{n}']}")
    return res


def variant_product() -> dict:
    import torch
    sys.path.insert(0, str(REPO))
    from harness.problem import Problem, Shape
    from harness.tensors import timing_sets
    from harness.timing import Entry, OfflineSettings, measure_offline, measure_server
    from harness.timing.kernel_clock import KernelClock

    def fn(layout):
        def call(a, b, c):
            torch.matmul(a, b if layout == "nn" else b.t(), out=c)
        return call

    torch.cuda.init()
    rows = []
    for shape in ("64_64_64", "256_128_16384", "1_4096_4096", "4096_4096_4096"):
        m, n, k = map(int, shape.split("_"))
        entries = [Entry(lay, fn(lay), timing_sets(Problem(Shape(m, n, k), lay), "cuda", 1, seed=0))
                   for lay in ("nn", "tn")]
        off = measure_offline(entries, "cuda", OfflineSettings(min_rounds=10, max_rounds=100, budget_s=2))
        for attribution in ("correlation", "window"):
            t = time.perf_counter()
            srv = measure_server(entries, "cuda", QPS, 40, seed=5, open_clock=lambda a=attribution: KernelClock.open(a))
            wall = time.perf_counter() - t
            for lay in ("nn", "tn"):
                s, o = srv[lay], off[lay]
                row = dict(shape=shape, layout=lay, attribution=attribution, timing_method=s.timing_method,
                           note=s.timing_note[:160], error=s.error, offline_us=med(o.device_us),
                           server_us=med(s.device_us), host_us=med(s.host_us), idle_us=med(s.idle_us),
                           server_p90_us=round(sorted(s.device_us)[int(0.9 * len(s.device_us))], 2) if s.device_us else None,
                           wall_s=round(wall, 2))
                row["server_over_offline"] = (round(row["server_us"] / row["offline_us"], 3)
                                              if row["server_us"] and row["offline_us"] else None)
                rows.append(row)
                log(f"  {json.dumps(row)}")
        off2 = measure_offline(entries, "cuda", OfflineSettings(min_rounds=10, max_rounds=100, budget_s=2))
        log(f"  {shape}: offline after the server sessions nn {med(off2['nn'].device_us)} tn {med(off2['tn'].device_us)}"
            f" (before: nn {med(off['nn'].device_us)} tn {med(off['tn'].device_us)})")
        rows.append(dict(shape=shape, offline_after=dict(nn=med(off2["nn"].device_us), tn=med(off2["tn"].device_us))))
    return dict(variant="product", rows=rows)


def child(name: str) -> None:
    log(f"== variant {name} (pid {os.getpid()}, python {sys.executable})")
    try:
        if name == "env":
            res = variant_env()
        elif name == "torch-profiler":
            res = variant_torch_profiler()
        elif name == "product":
            res = variant_product()
        else:
            res = variant_cupti(name)
    except Exception:
        log("  VARIANT FAILED:\n" + traceback.format_exc())
        res = dict(variant=name, failed=traceback.format_exc(limit=1).strip().splitlines()[-1])
    log("RESULT " + json.dumps(res, default=str))


# -------------------------------------------------------------------------------------------- parent side


def summary_line(site: str, res: dict | None, rc: int | None, secs: float) -> str:
    if res is None:
        return f"{site:>12} | no RESULT (rc {rc}{', crashed by signal ' + str(-rc) if rc and rc < 0 else ''}, {secs:.0f} s)"
    v = res.get("variant")
    if res.get("failed"):
        return f"{site:>12} | {v}: FAILED {res['failed']}"
    if v == "env":
        return (f"{site:>12} | env: cupti-python {res.get('cupti-python')}, nvidia-cuda-cupti {res.get('nvidia-cuda-cupti')}, "
                f"torch {res.get('torch')} cu{res.get('torch_cuda')}, driver CUDA {res.get('driver_cuda_version')}, "
                f"maps {res.get('maps_after_cupti_call')}, cuptiGetVersion {res.get('cupti_api_versions')}")
    if v == "torch-profiler":
        return f"{site:>12} | torch-profiler: " + "; ".join(f"{k}: {res[k]}" for k in res if k.startswith("n"))
    if v == "product":
        return f"{site:>12} | product: " + "\n".join(
            f"{'':>14} {r['shape']:>15} {r['layout']} {r['attribution']:>11} {r['timing_method']:>6} "
            f"server {r['server_us']} offline {r['offline_us']} (x{r['server_over_offline']}) host {r['host_us']} "
            f"idle {r['idle_us']} {r['note'][:60]}" if "layout" in r else f"{'':>14} {r['shape']:>15} offline after {r['offline_after']}"
            for r in res["rows"])
    sizes = "; ".join(f"n={s['n']}: ops {s['ops']} mapped corr {s['mapped_corr']}/win {s['mapped_window']} of "
                      f"{s['calls']}, events {s['events_us']} corr {s['cupti_corr_us']} win {s['cupti_window_us']} "
                      f"idle {s['idle_us']} host {s['host_us']}" for s in res.get("sizes", []))
    return (f"{site:>12} | {v}: callbacks {res.get('requested')}/{res.get('completed')} {res.get('threads')}, "
            f"records {res.get('records_by_kind')}, dropped {res.get('dropped')}, flush {res.get('flush_ms')} ms "
            f"(later {res.get('records_later')}), errors {len(res.get('callback_errors') or [])}\n{'':>14} {sizes}\n"
            f"{'':>14} graph before {res.get('graph_us_before')} after {res.get('graph_us_after')}; "
            f"lone host before {res.get('host_us_before')} after {res.get('host_us_after')}"
            + (f" after finalize {res['host_us_after_finalize']}" if "host_us_after_finalize" in res else ""))


def parent(sites: list[str], only: list[str], timeout: float) -> None:
    table = []
    for site in sites or [""]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (site, str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        for name in only or VARIANTS:
            log(f"\n######## site {site or '(default)'} variant {name}")
            t = time.perf_counter()
            res, rc = None, None
            try:
                p = subprocess.run([sys.executable, __file__, "--child", name], env=env, timeout=timeout,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                rc, text = p.returncode, p.stdout
            except subprocess.TimeoutExpired as e:
                rc, text = None, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                text += f"\n  TIMED OUT after {timeout:.0f} s (a hang: a callback waiting on the GIL?)"
            for line in text.splitlines():
                if line.startswith("RESULT "):
                    res = json.loads(line[7:])
                else:
                    log(line)
            log(f"  (exit {rc}, {time.perf_counter() - t:.1f} s)")
            table.append(summary_line(Path(site).name if site else "default", res, rc, time.perf_counter() - t))
    log("\n================ summary")
    for line in table:
        log(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site", action="append", default=[], help="a directory holding a cupti-python, put first on "
                    "PYTHONPATH for every variant (repeat: each is probed)")
    ap.add_argument("--only", action="append", default=[], choices=VARIANTS)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per variant")
    ap.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
    else:
        parent(args.site, args.only, args.timeout)


if __name__ == "__main__":
    main()
