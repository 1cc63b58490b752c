"""A run's results-file writes replayed on the host: the store as it is against a rebuild of every row per shape.

    python -m lab.throughput.store_replay results/runs/111-h200-grid-886/h200-grid-886.parquet

Feeds the run's rows, one (shape, mode, cache) group at a time in measured order, to
``harness.results.ResultStore`` (which appends each group to the table it keeps), then does the
same writes by converting every stored row again for each group (what the store did before).
Prints both wall times and checks the two files hold the same rows. Host time only: no GPU.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from harness.results import (RESULT_SCHEMA, ResultStore, _with_meta, atomic_write_table, group_key, read_results,
                             rows_to_table)


def groups_in_order(path: str) -> list[list[dict]]:
    rows = sorted(read_results(Path(path)).to_pylist(), key=lambda r: r["measured_at"])
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault(group_key(r), []).append(r)
    return list(out.values())


def main(path: str) -> None:
    groups = groups_in_order(path)
    with tempfile.TemporaryDirectory() as tmp:
        kept, rebuilt = Path(tmp) / "kept.parquet", Path(tmp) / "rebuilt.parquet"
        t0 = time.perf_counter()
        store = ResultStore(kept, "replay")
        for g in groups:
            store.add_group(g, [])
        t1 = time.perf_counter()
        rows: list[dict] = []
        for g in groups:
            rows += g
            table = rows_to_table(rows, RESULT_SCHEMA)
            atomic_write_table(table.replace_schema_metadata(_with_meta(RESULT_SCHEMA, "replay").metadata), rebuilt)
        t2 = time.perf_counter()
        same = read_results(kept).equals(read_results(rebuilt))
    print(f"{path}: {len(groups)} groups, {sum(map(len, groups))} rows; kept table {t1 - t0:.1f} s, "
          f"every row again per group {t2 - t1:.1f} s; same file content: {same}")


if __name__ == "__main__":
    main(sys.argv[1])
