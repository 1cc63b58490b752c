"""Server mode against offline, per method and layout, from one `compare --mode both` run.

    python3 -m lab.throughput.server_check RUN.parquet

For each cache state, shape, method and layout: offline device_us median, server device_us median,
their ratio, the server timing method (cupti or events), host_us and idle_us medians in server mode;
then per shape and method, server nn/tn against offline nn/tn (a method's layout ratio should be the
same in both modes: on an H100 1_4096_4096's layouts run different kernels, 0.84 in both); last, per
cache state, how many rows are within issue 35's bounds (server within 20 % of offline, server nn/tn
within 5 %).
"""

import json
import sys

import pandas as pd

from harness.results import read_results


def main(path: str) -> None:
    df = read_results(path).to_pandas()
    df = df[df["status"] == "ok"]
    rows = []
    for (cache, shape, method, layout), g in df.groupby(["cache", "shape", "method", "layout"]):
        off = g[g["mode"] == "offline"]
        srv = g[g["mode"] == "server"]
        if off.empty or srv.empty:
            continue
        o, s = float(off["device_us_median"].iloc[0]), float(srv["device_us_median"].iloc[0])
        info = json.loads(srv["info"].iloc[0] or "{}")
        rows.append(dict(cache=cache, shape=shape, method=method, layout=layout, offline_us=o, server_us=s, ratio=s / o,
                         timing=srv["timing_method"].iloc[0], host_us=float(srv["host_us_median"].iloc[0]),
                         idle_us=srv.get("idle_us_median", pd.Series([None])).iloc[0],
                         note=info.get("timing_note", "")))
    t = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(t.round(3).to_string(index=False))
        w = t.pivot_table(index=["cache", "shape", "method"], columns="layout", values=["offline_us", "server_us"])
        w = pd.DataFrame({"offline nn/tn": w[("offline_us", "nn")] / w[("offline_us", "tn")],
                          "server nn/tn": w[("server_us", "nn")] / w[("server_us", "tn")]})
        print(w.round(3).to_string())
    for cache, c in t.groupby("cache"):
        nt = w.loc[cache, "server nn/tn"].dropna()
        print(f"{cache}: server/offline {len(c)} rows, within 20 %: {(abs(c['ratio'] - 1) <= 0.2).sum()}, "
              f"range {c['ratio'].min():.3f}-{c['ratio'].max():.3f}; server nn/tn within 5 %: "
              f"{(abs(nt - 1) <= 0.05).sum()} of {len(nt)} (range {nt.min():.3f}-{nt.max():.3f}); "
              f"timing methods {c['timing'].value_counts().to_dict()}")


if __name__ == "__main__":
    main(sys.argv[1])
