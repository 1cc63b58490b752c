"""Print one line per profiled kernel from ``ncu --csv --page raw`` logs (scripts/gpu_check.sh ncu).

    python3 scripts/ncu_table.py /tmp/hb/ncu/*.csv
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd

COLUMNS = {
    "gpu__time_duration.sum": "us",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram%",
    "dram__bytes_read.sum": "dram MB",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "l2%",
    "lts__t_bytes.sum": "l2 MB",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm%",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed": "tensor%",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy%",
    "launch__grid_size": "ctas",
    "launch__registers_per_thread": "regs",
    "lts__t_sector_hit_rate.pct": "l2 hit%",
}
SCALE = {"gpu__time_duration.sum": 1e-3, "dram__bytes_read.sum": 1e-6, "lts__t_bytes.sum": 1e-6}


def read(path: Path) -> pd.DataFrame:
    text = path.read_text()
    start = text.find('"ID"')
    if start < 0:
        return pd.DataFrame()
    df = pd.read_csv(io.StringIO(text[start:]), dtype=str)
    df = df[df["ID"].astype(str).str.fullmatch(r"\d+")]  # drop the units row
    out = pd.DataFrame({"case": path.stem, "kernel": df["Kernel Name"].str.slice(0, 48)})
    for col, name in COLUMNS.items():
        if col in df:
            v = pd.to_numeric(df[col].astype(str).str.replace(",", ""), errors="coerce")
            # with --print-units base: durations in ns, sizes in bytes
            out[name] = (v * SCALE.get(col, 1.0)).round(2)
    return out


def main(paths: list[str]) -> int:
    frames = [read(Path(p)) for p in paths]
    frames = [f for f in frames if not f.empty]
    if not frames:
        print("no ncu results")
        return 1
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(pd.concat(frames).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
