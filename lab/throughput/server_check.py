"""Server mode against offline, per method and layout, from one `compare --mode both` run.

    python3 -m lab.throughput.server_check RUN.parquet

For each shape, method and layout: offline device_us median, server device_us median, their ratio,
the server timing method (cupti or events), host_us and idle_us medians in server mode; then per
shape and method, server nn/tn against offline nn/tn (the same algorithm in both layouts should time
alike in both modes).
"""

import json
import sys

import pandas as pd

from harness.results import read_results


def main(path: str) -> None:
    df = read_results(path).to_pandas()
    df = df[df["status"] == "ok"]
    rows = []
    for (shape, method, layout), g in df.groupby(["shape", "method", "layout"]):
        off = g[g["mode"] == "offline"]
        srv = g[g["mode"] == "server"]
        if off.empty or srv.empty:
            continue
        o, s = float(off["device_us_median"].iloc[0]), float(srv["device_us_median"].iloc[0])
        info = json.loads(srv["info"].iloc[0] or "{}")
        rows.append(dict(shape=shape, method=method, layout=layout, offline_us=o, server_us=s, ratio=s / o,
                         timing=srv["timing_method"].iloc[0], host_us=float(srv["host_us_median"].iloc[0]),
                         idle_us=srv.get("idle_us_median", pd.Series([None])).iloc[0],
                         note=info.get("timing_note", "")))
    t = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(t.round(3).to_string(index=False))
        w = t.pivot_table(index=["shape", "method"], columns="layout", values=["offline_us", "server_us"])
        w["offline nn/tn"] = w[("offline_us", "nn")] / w[("offline_us", "tn")]
        w["server nn/tn"] = w[("server_us", "nn")] / w[("server_us", "tn")]
        print(w[["offline nn/tn", "server nn/tn"]].round(3).to_string())
    print(f"server/offline: {len(t)} rows, within 20 %: {(abs(t['ratio'] - 1) <= 0.2).sum()}, "
          f"range {t['ratio'].min():.3f}-{t['ratio'].max():.3f}; timing methods {t['timing'].value_counts().to_dict()}")


if __name__ == "__main__":
    main(sys.argv[1])
