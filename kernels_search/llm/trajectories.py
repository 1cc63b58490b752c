"""LLM trajectories in Parquet: one row per (prompt, completion), reward filled in after evaluation.

Append-only and kill-safe: nothing is ever rewritten. A directory holds two kinds of part file,
each written whole to a temporary name and renamed into place (a reader never sees half a file):

* ``proposals/part-*.parquet``: one row per completion when it is generated (``PROPOSAL_SCHEMA``:
  prompt, completion, shape, layout, backend, model, sampling settings, parse verdict, candidate
  name and source hash, ptxas figures if the proposer compiled it, timestamps);
* ``rewards/part-*.parquet``: one row per reward event (``REWARD_SCHEMA``: trajectory id, reward,
  build ok, gate verdict, speedup, note, timestamp). A later event for the same trajectory wins.

``TrajectoryStore.load()`` joins them into the trajectory table (``TRAJECTORY_COLUMNS``); a
trajectory whose candidate was never evaluated (the search was killed first) has a null reward.
``export_grpo(path)`` writes that table as one Parquet file TRL's ``GRPOTrainer`` reads with
``datasets.load_dataset("parquet", ...)``: a ``prompt`` column (the exact text, or chat messages
with ``conversational=True``), ``completion``, ``reward``, and the rest as extra columns, which
GRPO passes to reward functions as keyword arguments.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = 1
_TS = pa.timestamp("us", tz="UTC")

PROPOSAL_SCHEMA = pa.schema([
    ("traj_id", pa.string()),
    ("schema_version", pa.int32()),
    ("group_id", pa.string()),  # sha256 of the prompt text: the GRPO group
    ("prompt", pa.string()),  # flat text: system + blank line + user
    ("prompt_system", pa.string()),
    ("prompt_user", pa.string()),
    ("completion", pa.string()),
    ("shape", pa.string()),
    ("m", pa.int64()),
    ("n", pa.int64()),
    ("k", pa.int64()),
    ("layout", pa.string()),
    ("backend", pa.string()),
    ("model", pa.string()),
    ("temperature", pa.float64()),
    ("max_tokens", pa.int64()),
    ("parse_ok", pa.bool_()),
    ("parse_reason", pa.string()),
    ("candidate", pa.string()),  # method name handed to the evaluator (null if invalid)
    ("source_hash", pa.string()),
    ("registers", pa.int64()),
    ("spill_bytes", pa.int64()),
    ("gen_s", pa.float64()),  # wall seconds of the generate call this row came from
    ("t_proposed", _TS),
])

REWARD_SCHEMA = pa.schema([
    ("traj_id", pa.string()),
    ("reward", pa.float64()),
    ("build_ok", pa.bool_()),
    ("gate", pa.string()),  # "pass", "fail: ...", "invalid completion", "compile error", ...
    ("speedup", pa.float64()),
    ("note", pa.string()),
    ("t_reward", _TS),
])

TRAJECTORY_COLUMNS = [f.name for f in PROPOSAL_SCHEMA] + [f.name for f in REWARD_SCHEMA if f.name != "traj_id"]


def now_utc():
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc)


def new_id() -> str:
    return uuid.uuid4().hex


class TrajectoryStore:
    """A directory of append-only trajectory part files."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        (self.root / "proposals").mkdir(parents=True, exist_ok=True)
        (self.root / "rewards").mkdir(parents=True, exist_ok=True)

    def _write(self, kind: str, schema: pa.Schema, rows: Sequence[Mapping]) -> Path | None:
        if not rows:
            return None
        cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
        table = pa.Table.from_pydict(cols, schema=schema)
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"
        final = self.root / kind / name
        tmp = final.with_name("." + name + ".tmp")
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        return final

    def append_proposals(self, rows: Sequence[Mapping]) -> Path | None:
        rows = [{"schema_version": SCHEMA_VERSION, **r} for r in rows]
        return self._write("proposals", PROPOSAL_SCHEMA, rows)

    def append_rewards(self, rows: Sequence[Mapping]) -> Path | None:
        rows = [{"t_reward": now_utc(), **r} for r in rows]
        return self._write("rewards", REWARD_SCHEMA, rows)

    def _read(self, kind: str, schema: pa.Schema) -> pa.Table:
        files = sorted(p for p in (self.root / kind).glob("part-*.parquet"))
        if not files:
            return schema.empty_table()
        return pa.concat_tables([pq.read_table(f).cast(schema) for f in files])

    def proposals(self) -> pa.Table:
        return self._read("proposals", PROPOSAL_SCHEMA)

    def rewards(self) -> pa.Table:
        return self._read("rewards", REWARD_SCHEMA)

    def load(self):
        """The trajectory table as a pandas DataFrame (``TRAJECTORY_COLUMNS``), one row per
        proposal in the order written, with its latest reward event (nulls if none yet)."""
        props = self.proposals().to_pandas()
        rew = self.rewards().to_pandas()
        if len(rew):
            rew = rew.sort_values("t_reward", kind="stable").drop_duplicates("traj_id", keep="last")
        df = props.merge(rew, on="traj_id", how="left")
        return df[TRAJECTORY_COLUMNS]

    def export_grpo(self, path: str | os.PathLike, *, conversational: bool = False,
                    only_rewarded: bool = True) -> Path:
        """One Parquet file for TRL (see the module doc). ``only_rewarded`` drops trajectories
        whose reward never came."""
        df = self.load()
        if only_rewarded:
            df = df[df["reward"].notna()]
        table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
        if conversational:
            msg = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
            prompts = pa.array([[{"role": "system", "content": s}, {"role": "user", "content": u}]
                                for s, u in zip(df["prompt_system"], df["prompt_user"])], type=msg)
            comps = pa.array([[{"role": "assistant", "content": c}] for c in df["completion"]], type=msg)
            table = table.set_column(table.schema.get_field_index("prompt"), "prompt", prompts)
            table = table.set_column(table.schema.get_field_index("completion"), "completion", comps)
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name("." + out.name + ".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, out)
        return out


def reward_rows(traj_ids: Iterable[str], reward: float, *, build_ok=None, gate=None, speedup=None,
                note: str = "") -> list[dict]:
    return [{"traj_id": t, "reward": float(reward), "build_ok": build_ok, "gate": gate,
             "speedup": None if speedup is None else float(speedup), "note": note} for t in traj_ids]
