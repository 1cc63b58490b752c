"""The LLM proposer: contrastive prompt -> backend -> parse -> candidates for the evaluator.

``LLMProposer`` implements the search loop's ``Proposer`` protocol
(``kernels_search.proposals``): ``propose(shape, context)`` returns ``Candidate`` objects
whose ``spec`` is ``llm:<hash12>`` (the source is stored in a ``KernelStore`` the evaluator's
worker reads through the ``kernels_search.llm.plugin`` plug-in), and ``observe(shape, outcomes)``
turns the measured outcomes into rewards. Every completion, valid or not, becomes a trajectory
row (``TrajectoryStore``) at once; the reward row follows:

* invalid completion (no code, truncated, binary, too large, static cheat): reward
  ``invalid_reward`` (-1) immediately, gate "invalid completion", nothing is evaluated;
* compile failure when ``precompile`` is on (build through the same cache the evaluator uses):
  ``compile_fail_reward`` (-1) immediately, the log tail becomes the next prompt's "last compiler
  error" for that shape;
* a source identical to one already rewarded in this search: that reward again (note
  "duplicate"), not evaluated twice;
* otherwise the candidate goes to the evaluator and its reward is written by ``observe`` or
  ``record_reward``: the mean over the layouts it was measured in of the search's per-layout
  reward (each clipped log speedup, -1 for any failure), speedup the geometric mean.

No exception from a backend, a parser or a store escapes ``propose``: the search keeps going and
``stats`` counts what went wrong (``last_error`` says it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from harness.timing.stats import geomean
from kernels_search.llm.backends import Backend
from kernels_search.llm.kernels import KernelStore, source_hash
from kernels_search.llm.parse import parse_completion
from kernels_search.llm.prompt import KernelExample, Prompt, PromptContext, PromptOptions, build_prompt, select_examples
from kernels_search.llm.trajectories import TrajectoryStore, new_id, now_utc, reward_rows

log = logging.getLogger(__name__)

try:  # the search loop's types (kernels_search/proposals.py)
    from kernels_search.proposals import Candidate
except ImportError:  # pragma: no cover - only while the search package is absent
    @dataclass
    class Candidate:  # type: ignore[no-redef]
        family: str
        knobs: dict[str, Any]
        spec: str
        origin: str = "policy"
        meta: dict[str, Any] = field(default_factory=dict)

INVALID = "invalid completion"
COMPILE_ERROR = "compile error"


@dataclass
class LLMConfig:
    n: int | None = None  # completions per prompt (a GRPO group); None: the context's n
    max_n: int = 16
    max_tokens: int = 8192
    temperature: float = 0.8
    prompt: PromptOptions = field(default_factory=PromptOptions)
    precompile: bool = False  # build here first (needs nvcc); failures never reach the evaluator
    invalid_reward: float = -1.0
    compile_fail_reward: float = -1.0
    error_tail_lines: int = 40


def _layouts_of(context) -> tuple[str, ...]:
    lays = getattr(context, "layouts", None) or ("nn",)
    return tuple(lays)


def _tail(text: str, lines: int) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])


class LLMProposer:
    """Code-level proposer. ``backend``: anything with ``generate`` (see ``backends``);
    ``trajectories``: a ``TrajectoryStore`` or its directory; ``kernels``: where accepted sources
    are stored for the evaluator (``KernelStore`` or directory; default ``$HGEMM_LLM_KERNELS``)."""

    name = "llm"

    def __init__(self, backend: Backend, trajectories: TrajectoryStore | str, kernels: KernelStore | str | None = None,
                 config: LLMConfig | None = None):
        self.backend = backend
        self.traj = trajectories if isinstance(trajectories, TrajectoryStore) else TrajectoryStore(trajectories)
        self.kernels = kernels if isinstance(kernels, KernelStore) else KernelStore(kernels)
        self.cfg = config or LLMConfig()
        self._pending: dict[str, list[str]] = {}  # spec -> trajectory ids awaiting a reward
        self._rewarded: dict[str, dict] = {}  # spec -> reward fields already recorded
        self._last_error: dict[str, str] = {}  # shape name -> last compiler log tail
        self.stats = {"prompts": 0, "completions": 0, "invalid": 0, "compile_failed": 0, "duplicates": 0,
                      "candidates": 0, "backend_errors": 0, "rewarded": 0}
        self.last_error = ""

    # ------------------------------------------------------------------ prompt
    def prompt_context(self, shape, context) -> PromptContext:
        """A ``PromptContext`` from what the search hands us: one already, a ``SearchContext``
        with a kernel DB, or nothing."""
        if isinstance(context, PromptContext):
            ctx = context
        elif getattr(context, "db", None) is not None:
            ctx = context_from_db(context.db, shape, _layouts_of(context), gpu=getattr(context, "gpu", None),
                                  kernels=self.kernels, options=self.cfg.prompt)
        else:
            ctx = PromptContext()
        mine = self._last_error.get(shape.name, "")
        if mine and not ctx.last_compile_error:
            ctx = dataclasses.replace(ctx, last_compile_error=mine)
        return ctx

    def build_prompt(self, shape, context) -> Prompt:
        return build_prompt(shape.m, shape.n, shape.k, _layouts_of(context), self.prompt_context(shape, context),
                            self.cfg.prompt)

    # ------------------------------------------------------------------ propose
    def propose(self, shape, context) -> list[Candidate]:
        try:
            return self._propose(shape, context)
        except Exception as e:  # the search must survive anything we do wrong
            self.stats["backend_errors"] += 1
            self.last_error = f"{type(e).__name__}: {e}"
            log.warning("LLM proposer failed on %s: %s", getattr(shape, "name", shape), self.last_error)
            return []

    def _propose(self, shape, context) -> list[Candidate]:
        prompt = self.build_prompt(shape, context)
        want = self.cfg.n or int(getattr(context, "n", 1) or 1)
        want = max(1, min(self.cfg.max_n, want))
        t0 = time.perf_counter()
        texts = self.backend.generate([prompt.messages], want, self.cfg.max_tokens, self.cfg.temperature)
        gen_s = time.perf_counter() - t0
        self.stats["prompts"] += 1
        texts = list(texts)[:want] if texts is not None else []
        exclude = set(getattr(context, "exclude", None) or ())
        t_now = now_utc()
        base = {
            "group_id": prompt.hash, "prompt": prompt.text, "prompt_system": prompt.system,
            "prompt_user": prompt.user, "shape": shape.name, "m": shape.m, "n": shape.n, "k": shape.k,
            "layout": prompt.layout, "backend": getattr(self.backend, "name", type(self.backend).__name__),
            "model": str(getattr(self.backend, "model", "")), "temperature": float(self.cfg.temperature),
            "max_tokens": int(self.cfg.max_tokens), "gen_s": gen_s, "t_proposed": t_now,
        }
        rows: list[dict] = []
        rewards: list[dict] = []
        new: dict[str, dict] = {}  # spec -> {"source", "traj_ids"} for this batch, in order
        for text in texts:
            self.stats["completions"] += 1
            tid = new_id()
            parsed = parse_completion(text)
            completion = text if isinstance(text, str) else (
                bytes(text).decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else str(text))
            row = {**base, "traj_id": tid, "completion": completion[:400_000], "parse_ok": parsed.ok,
                   "parse_reason": parsed.reason}
            rows.append(row)
            if not parsed.ok:
                self.stats["invalid"] += 1
                rewards += reward_rows([tid], self.cfg.invalid_reward, gate=INVALID, note=parsed.reason)
                continue
            spec = self.kernels.put(parsed.source)
            row.update(candidate=spec, source_hash=source_hash(parsed.source))
            if spec in self._rewarded:
                self.stats["duplicates"] += 1
                r = self._rewarded[spec]
                rewards += reward_rows([tid], r["reward"], build_ok=r["build_ok"], gate=r["gate"],
                                       speedup=r["speedup"], note=f"duplicate of {spec}")
                continue
            if spec in self._pending:  # same source as a candidate still being evaluated
                self.stats["duplicates"] += 1
                self._pending[spec].append(tid)
                continue
            if spec in exclude:  # measured earlier (e.g. before a resume): its DB reward, if known
                self.stats["duplicates"] += 1
                known = _db_reward(getattr(context, "db", None), shape, spec, getattr(context, "gpu", None))
                if known is not None:
                    rewards += reward_rows([tid], known, note=f"duplicate of measured {spec} (DB reward)")
                continue
            if spec in new:  # the same source twice in this batch: one candidate, both rows rewarded
                self.stats["duplicates"] += 1
            new.setdefault(spec, {"source": parsed.source, "traj_ids": [], "rows": []})
            new[spec]["traj_ids"].append(tid)
            new[spec]["rows"].append(row)

        if self.cfg.precompile and new:
            from kernels_search import build as build_mod

            results = build_mod.build_many([build_mod.BuildJob(v["source"]) for v in new.values()])
            for (spec, v), res in zip(list(new.items()), results):
                for row in v["rows"]:
                    row["registers"] = int(res.resources.get("max_registers", 0)) if res.ok else None
                    row["spill_bytes"] = res.spill_bytes if res.ok else None
                if not res.ok:
                    self.stats["compile_failed"] += 1
                    tail = _tail(res.log, self.cfg.error_tail_lines)
                    self._last_error[shape.name] = tail
                    fields = {"reward": self.cfg.compile_fail_reward, "build_ok": False, "gate": COMPILE_ERROR,
                              "speedup": None}
                    self._rewarded[spec] = fields
                    rewards += reward_rows(v["traj_ids"], fields["reward"], build_ok=False, gate=COMPILE_ERROR,
                                           note=tail[-2000:])
                    del new[spec]

        self.traj.append_proposals(rows)
        self.traj.append_rewards(rewards)
        out = []
        for spec, v in new.items():
            self._pending[spec] = list(v["traj_ids"])
            out.append(Candidate(family="llm", knobs={}, spec=spec, origin="llm",
                                 meta={"traj_ids": list(v["traj_ids"]), "prompt_hash": prompt.hash,
                                       "source_hash": source_hash(v["source"]),
                                       "backend": base["backend"], "model": base["model"]}))
        self.stats["candidates"] += len(out)
        return out

    # ------------------------------------------------------------------ rewards
    def record_reward(self, candidate, reward: float | None, *, build_ok: bool | None = None,
                      gate: str | None = None, speedup: float | None = None, note: str = "") -> int:
        """Write the reward of ``candidate`` (a Candidate or its spec) for every trajectory that
        produced it; returns how many rows were written (0 if it was not pending)."""
        spec = candidate if isinstance(candidate, str) else candidate.spec
        tids = self._pending.pop(spec, [])
        if not tids:
            return 0
        if reward is not None and not math.isfinite(float(reward)):
            reward = None
        rows = reward_rows(tids, float("nan") if reward is None else reward, build_ok=build_ok, gate=gate,
                           speedup=speedup, note=note)
        if reward is None:
            for r in rows:
                r["reward"] = None
        self.traj.append_rewards(rows)
        self._rewarded[spec] = {"reward": reward, "build_ok": build_ok, "gate": gate, "speedup": speedup}
        self.stats["rewarded"] += len(rows)
        return len(rows)

    def observe(self, shape, outcomes: Sequence) -> None:
        """The search loop's callback: aggregate per-layout outcomes of our candidates."""
        by_spec: dict[str, list] = {}
        for o in outcomes:
            spec = getattr(getattr(o, "candidate", None), "spec", None)
            if spec in self._pending:
                by_spec.setdefault(spec, []).append(o)
        for spec, outs in by_spec.items():
            fields = aggregate_outcomes(outs)
            if fields["build_ok"] is False:
                self._last_error[shape.name] = _tail(fields["note"], self.cfg.error_tail_lines)
            self.record_reward(spec, **fields)

    def pending(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self._pending.items()}


def aggregate_outcomes(outs: Sequence) -> dict:
    """Reward fields of one candidate from its per-layout ``Outcome``s: mean reward (layouts
    without a reward, i.e. no baseline, are left out; None if none has one), geometric-mean
    speedup over the layouts timed correctly, gate "pass" only if every layout passed."""
    rewards = [float(o.reward) for o in outs if o.reward is not None and math.isfinite(float(o.reward))]
    sp = [o.baseline_us / o.device_us for o in outs
          if getattr(o, "status", "") == "ok" and o.device_us and o.baseline_us and o.device_us > 0]
    bad = [f"{o.layout}: {o.status} {getattr(o, 'status_reason', '') or ''}".strip()
           for o in outs if getattr(o, "status", "") != "ok"]
    build_failed = any(getattr(o, "failure", "") == "compile" or "BuildError" in (o.status_reason or "")
                       or "build failed" in (o.status_reason or "") for o in outs)
    return {
        "reward": sum(rewards) / len(rewards) if rewards else None,
        "build_ok": False if build_failed else (True if any(o.status == "ok" for o in outs) else None),
        "gate": "pass" if not bad else "; ".join(bad)[:2000],
        "speedup": geomean(sp) if sp else None,
        "note": "; ".join(bad)[:4000],
    }


def _db_reward(db, shape, spec: str, gpu) -> float | None:
    if db is None:
        return None
    try:
        df = db.candidates(gpu, shape)
        sel = df[df["method"] == spec]["reward"].dropna()
        return float(sel.mean()) if len(sel) else None
    except Exception:
        return None


# ------------------------------------------------------------------ kernel DB -> prompt context
def example_source(family: str, knobs: Mapping | str | None, spec: str, kernels: KernelStore | None = None) -> str:
    """Source text of a measured kernel: an LLM kernel from the store, a CUDA family config
    re-rendered from its knobs; '' when there is none (Triton families, unknown names)."""
    try:
        if family == "llm" or spec.startswith("llm:"):
            return (kernels or KernelStore()).get(spec)
        from kernels_search.families import ALL

        fam = ALL.get(family)
        if fam is None or getattr(fam, "backend", "cuda") != "cuda":
            return ""
        return fam.render(fam.complete(json.loads(knobs) if isinstance(knobs, str) else dict(knobs or {})))
    except Exception:
        return ""


def _example_from_row(r: Mapping, kernels: KernelStore | None) -> KernelExample:
    status = str(r.get("status") or "")
    reason = str(r.get("status_reason") or "")
    sp = r.get("speedup")
    regs, spills = r.get("registers"), r.get("spill_bytes")
    return KernelExample(
        name=str(r.get("method")), m=int(r["m"]), n=int(r["n"]), k=int(r["k"]), layout=str(r.get("layout") or "nn"),
        speedup=float(sp) if sp is not None and isinstance(sp, (int, float)) and math.isfinite(sp) else None,
        spec=str(r.get("method") or ""),
        verdict="pass" if status == "ok" else f"{status}: {reason[:160]}".strip(": "),
        registers=int(regs) if isinstance(regs, (int, float)) and math.isfinite(regs) else None,
        spill_bytes=int(spills) if isinstance(spills, (int, float)) and math.isfinite(spills) else None,
        note=f"family {r.get('family')}" if r.get("family") else "",
    )


def context_from_db(db, shape, layouts: Sequence[str] = ("nn",), *, gpu: str | None = None,
                    kernels: KernelStore | None = None, options: PromptOptions | None = None) -> PromptContext:
    """Prompt context from a search ``KernelDB``: this shape's candidates (all layouts asked
    for) and the best correct row of each nearby measured shape, sources filled in only for the
    examples the prompt will show; the last compiler error of an LLM kernel on this shape."""
    opt = options or PromptOptions()
    rows = []
    here = db.candidates(gpu, shape)
    if len(here):
        rows += here[here["layout"].isin(list(layouts))].to_dict("records")
    for s, _d in db.neighbours(shape, gpu, k=max(1, opt.n_nearby) * 2):
        best = db.best(gpu, s)
        if len(best):
            rows += best.to_dict("records")
    ex_rows = {}
    for r in rows:
        try:
            e = _example_from_row(r, kernels)
        except (KeyError, TypeError, ValueError):
            continue
        ex_rows.setdefault((e.name, e.m, e.n, e.k, e.layout), (e, r))
    examples = [e for e, _ in ex_rows.values()]
    best, worse, nearby = select_examples(examples, shape.m, shape.n, shape.k, tuple(layouts), opt)
    chosen = []
    for e in best + worse + nearby:
        r = ex_rows[(e.name, e.m, e.n, e.k, e.layout)][1]
        src = example_source(str(r.get("family") or ""), r.get("config"), e.name, kernels)
        note = e.note
        if src and re.search(r"#\s*include\s*[<\"](?:cutlass|cute)/", src):
            # LLM kernels are built alone, without CUTLASS: show the figures, not the source
            src, note = "", (note + "; " if note else "") + "CUTLASS-based (source not shown: not available to you)"
        chosen.append(dataclasses.replace(e, source=src, note=note))
    last_err = ""
    if len(here) and "failure" in here.columns:
        fails = here[(here["failure"] == "compile") & (here["origin"] == "llm")]
        if len(fails):
            key = "recorded_at" if "recorded_at" in fails.columns else None
            last = fails.sort_values(key).iloc[-1] if key else fails.iloc[-1]
            last_err = str(last.get("status_reason") or "")
    return PromptContext(examples=chosen, last_compile_error=last_err)
