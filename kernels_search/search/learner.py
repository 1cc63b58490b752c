"""The learner: the knob-level model shared by shapes, which observes measured outcomes and proposes.

Every (shape, family, knobs, layout) maps to a feature vector (``features.FeatureSpace``): one-hot
family / knob values / layout, each multiplied by the shape features (log M, N, K, tiles per wave,
last-wave fill, arithmetic intensity, skinniness), plus the config's launch geometry on this shape
(CTA waves, wave efficiency, tile fill, split-K partials' traffic). A Bayesian ridge regression
``reward ~ N(x . theta, sigma^2)`` with prior ``theta ~ N(0, sigma^2 / lam I)`` is fit to every
measured reward, over all shapes at once, so one shape's measurements move the predictions for every
other shape through the shared shape-feature terms. Besides the model it keeps, per config, the
shapes it ran correctly on and its best reward there (``measured_on``): the evidence the first pick
(``first_pick.FirstPick``) reads.

How it proposes (``propose``, the ``Proposer`` protocol). For a shape it builds a candidate pool:
random valid configs of every family that supports the shape (every valid config when a family has
at most 5 x ``random_per_family``), every family's defaults and presets, and the best configs
measured on this shape and on its nearest measured neighbours (warm start) with all their one-knob
mutations. Configs already measured on the shape, and compile-time configs that failed to build
anywhere, are left out. A candidate's value is the max over layouts of its reward.

* Initial design (``design``): a shape's first batch is every family preset that supports it
  (``Family.presets``: configs that win on some shape class), whatever the batch size. A model that
  starts from nothing ranks random configs at random, and a sample of a large space rarely holds
  its few good corners; every shape first measures the corners known to be good somewhere, and the
  model learns where each wins. ``max_new_builds`` does not cap the design batch.
* Local picks (``local_share``, ``local_elites``): after the design, the first ``local_share`` of
  each batch (rounded down) are one-knob mutations of the shape's ``local_elites`` best measured
  configs (a trust region around the incumbents), the first by the posterior mean, the others by
  Thompson draws. The linear model ranks knob mixes it has not measured badly, while a good
  config's neighbours are often good: measured on the H200 search DBs, such a mutation beat the
  shape's best 22-29 % of the time, against 5-6.5 % for the other picks.
* The rest of the batch comes from the whole pool: the first pick of a batch is the argmax of the
  posterior mean (``greedy_first``), every other pick Thompson sampling (one posterior draw per
  pick; ``explore`` scales its spread), and with probability ``epsilon`` a pick is uniform over the
  pool. A new compile-time config costs ``compile_penalty`` reward units in the acquisition, and
  ``max_new_builds`` caps how many new binaries one batch may need (the rest of the batch varies
  runtime options of binaries already built, or of the new one).

It checkpoints to one ``.npz`` (posterior, ids of the rows it has seen, per-shape elites, evidence);
``sync(db)`` replays every DB row it has not seen, so a checkpoint older than the DB (a kill
between the two writes) loses nothing and nothing is counted twice.
"""

from __future__ import annotations

import json
import math
import os
import random
import zlib
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from harness.problem import Problem, Shape
from harness.shapes import parse_shape
from kernels_search.family import KnobError
from kernels_search.search.features import FeatureSpace, shape_distance, shape_features
from kernels_search.proposals import Candidate, Outcome, SearchContext
from kernels_search.search.settings import LearnerSettings

CHECKPOINT_VERSION = 5  # a checkpoint of another version (other features, other state) is replayed from the DB
UPDATE_ROWS = 4096  # feature rows gathered before one model update when folding many shapes
ENUMERATE_POINTS = 4096  # knob spaces up to this many points are enumerated for valid configs


_EXTRA_FAMILIES: dict[str, Any] = {}


def register_search_family(family) -> None:
    """Add a family (a kernels_search.family.Family whose configs resolve as ``<name>:<knobs>``
    method specs) to the search space of devices matching its ``backend`` ("cuda", or e.g.
    "cpu" for test families registered by a plug-in)."""
    _EXTRA_FAMILIES[family.name] = family


def default_families(device: str = "cuda") -> dict[str, Any]:
    """The kernel families a search on ``device`` walks: every built-in family on CUDA (triton
    families only where Triton imports), plus families plug-ins registered for this device."""
    fams: dict[str, Any] = {}
    if device == "cuda":
        from kernels_search.families import ALL

        fams = dict(ALL)
        for name in [n for n, f in fams.items() if f.backend == "triton"]:
            tri = fams[name]
            if not tri.supports(tri.defaults(), Problem(Shape(128, 128, 128))):
                fams.pop(name)
    for name, fam in _EXTRA_FAMILIES.items():
        if getattr(fam, "backend", "cuda") in (device, "triton" if device == "cuda" else device):
            fams[name] = fam
    return fams


class LinearTS:
    """Bayesian linear regression with Thompson sampling (precision-matrix form)."""

    def __init__(self, dim: int, lam: float = 1.0, sigma: float = 0.3):
        self.dim, self.lam, self.sigma = dim, lam, sigma
        self.A = lam * np.eye(dim)
        self.b = np.zeros(dim)
        self.n = 0
        self._cache: tuple[np.ndarray, np.ndarray] | None = None

    def update(self, X: np.ndarray, r: np.ndarray) -> None:
        X = np.atleast_2d(X)
        self.A += X.T @ X
        self.b += X.T @ np.asarray(r, dtype=float)
        self.n += len(X)
        self._cache = None

    def _factor(self) -> tuple[np.ndarray, np.ndarray]:
        """(L^-1, mean) with A = L L^T, cached until the next update."""
        if self._cache is None:
            L = np.linalg.cholesky(self.A)
            Linv = np.linalg.solve(L, np.eye(self.dim))
            mu = Linv.T @ (Linv @ self.b)
            self._cache = (Linv, mu)
        return self._cache

    @property
    def mean(self) -> np.ndarray:
        return self._factor()[1]

    def sample(self, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
        """theta ~ N(mean, sigma^2 A^-1) = mean + sigma * L^-T z, A = L L^T."""
        Linv, mu = self._factor()
        return mu + scale * self.sigma * (Linv.T @ rng.standard_normal(self.dim))

    def std(self, X: np.ndarray) -> np.ndarray:
        """Posterior std of x . theta for each row of X."""
        Linv, _ = self._factor()
        V = Linv @ np.atleast_2d(X).T
        return self.sigma * np.sqrt((V * V).sum(axis=0))


def _key(knobs: Mapping[str, Any]) -> str:
    return json.dumps(dict(knobs), sort_keys=True, default=str)


class Learner:
    """See the module docstring. ``families``: name -> kernels_search.family.Family."""

    name = "policy"  # the proposer name: it seeds proposals and tags DB rows (``policy:<how>``)

    def __init__(self, families: Mapping[str, Any], layouts: Sequence[str] = ("nn", "tn"),
                 settings: LearnerSettings = LearnerSettings(), seed: int = 0):
        if not families:
            raise ValueError("the learner needs at least one kernel family")
        self.families = dict(families)
        self.layouts = tuple(layouts)
        self.settings = settings
        self.space = FeatureSpace(self.families, self.layouts)
        self.model = LinearTS(self.space.dim, settings.lam, settings.sigma)
        # spec -> {shape it ran correctly on: its best reward there over layouts}
        self.measured_on: dict[str, dict[str, float]] = {}
        # family -> its presets as full knob dicts (the initial design)
        self.presets = {name: f.preset_configs() for name, f in self.families.items()}
        self.preset_specs = {self.families[name].spec(k) for name, ks in self.presets.items() for k in ks}
        self.rng = np.random.default_rng(seed)
        self.seen: set[str] = set()
        # shape name -> [(reward, family, knobs json)], best first, a few per shape
        self.history: dict[str, list[tuple[float, str, str]]] = {}
        self.built: set[str] = set()  # compile keys that built (any shape)
        self.broken: set[str] = set()  # compile keys that failed to build
        self._enumerated: dict[str, list[dict] | None] = {}  # family -> all valid configs (small spaces)
        self.revision = 0  # moves whenever ``measured_on`` may have: what a fitted first-pick ranker keys on

    # ------------------------------------------------------------------ helpers
    def compile_key(self, family: str, knobs: Mapping[str, Any]) -> str:
        fam = self.families[family]
        return family + ":" + _key(fam.compile_knobs(knobs))

    def candidate(self, family: str, knobs: Mapping[str, Any], origin: str = "policy") -> Candidate:
        fam = self.families[family]
        return Candidate(family, dict(knobs), fam.spec(knobs), origin)

    def supported(self, family: str, knobs: Mapping[str, Any], shape: Shape) -> bool:
        fam = self.families[family]
        return any(fam.supports(knobs, Problem(shape, lay)) for lay in self.layouts)

    def _valid_configs(self, family: str) -> list[dict] | None:
        """Every valid config of a family whose space has at most ENUMERATE_POINTS points (found
        once, then kept), else None."""
        if family not in self._enumerated:
            fam = self.families[family]
            full = None
            if math.prod(len(k.values) for k in fam.knobs) <= ENUMERATE_POINTS:
                import itertools

                names = [k.name for k in fam.knobs]
                full = [kn for combo in itertools.product(*(k.values for k in fam.knobs))
                        if fam.is_valid(kn := dict(zip(names, combo)))]
            self._enumerated[family] = full
        return self._enumerated[family]

    def _random_configs(self, family: str, n: int, rng: random.Random) -> list[dict]:
        """``n`` random valid configs; every valid config when the family has at most 5n of them
        (counted, not bounded by the knob product: splitk_tma's 540 points hold 270 valid
        configs, which the model then ranks whole instead of through a sample that may miss its
        few good corners). A larger family (splitk_tma_swap, 324; smalltile, 723) stays at n, so no
        family floods the pool."""
        fam = self.families[family]
        full = self._valid_configs(family)
        if full is not None:
            return [dict(kn) for kn in full] if len(full) <= 5 * n else [dict(kn) for kn in rng.sample(full, n)]
        out, keys = [], set()
        for _ in range(n * 20):
            if len(out) >= n:
                break
            knobs = {k.name: rng.choice(k.values) for k in fam.knobs}
            key = _key(knobs)
            if key in keys or not fam.is_valid(knobs):
                continue
            keys.add(key)
            out.append(knobs)
        return out

    def _mutations(self, family: str, knobs: Mapping[str, Any]) -> list[dict]:
        fam = self.families[family]
        out = []
        for k in fam.knobs:
            for v in k.values:
                if v != knobs.get(k.name):
                    m = dict(knobs, **{k.name: v})
                    if fam.is_valid(m):
                        out.append(m)
        return out

    def local_specs(self, shape: Shape) -> set[str]:
        """The trust region around the shape's incumbents: every one-knob mutation of the
        ``local_elites`` best configs measured on this shape (module docstring, "Local picks")."""
        out: set[str] = set()
        for r, fam, kj in self.history.get(shape.name, [])[: self.settings.local_elites]:
            if r > -1.0 and fam in self.families:
                f = self.families[fam]
                out.update(f.spec(m) for m in self._mutations(fam, f.complete(json.loads(kj))))
        return out

    def elites_for(self, shape: Shape, db=None, gpu: str | None = None) -> list[tuple[str, dict]]:
        """Best configs measured on this shape and its nearest measured neighbours."""
        out: list[tuple[str, dict]] = []
        names = [shape.name]
        if db is not None:
            names += [s.name for s, _ in db.neighbours(shape, gpu, self.settings.neighbours)]
        else:
            others = sorted((shape_distance(shape, parse_shape(nm)), nm) for nm in self.history if nm != shape.name)
            names += [nm for _, nm in others[: self.settings.neighbours]]
        for nm in names:
            for r, fam, kj in self.history.get(nm, [])[: self.settings.elites]:
                if r > -1.0 and fam in self.families:
                    out.append((fam, json.loads(kj)))
        return out

    def pool(self, shape: Shape, exclude: Iterable[str] = (), db=None, gpu: str | None = None,
             seed: int | None = None) -> list[Candidate]:
        """Every config the learner considers for ``shape`` this time (see module docstring)."""
        rng = random.Random(seed if seed is not None else int(self.rng.integers(1 << 31)))
        exclude = set(exclude)
        seen: set[str] = set()
        out: list[Candidate] = []

        def add(fam: str, knobs: Mapping[str, Any], origin: str) -> None:
            f = self.families[fam]
            if any(k.name not in knobs for k in f.knobs) or not f.is_valid(knobs):
                return
            spec = f.spec(knobs)
            if spec in seen or spec in exclude or self.compile_key(fam, knobs) in self.broken:
                return
            if not self.supported(fam, knobs, shape):
                return
            seen.add(spec)
            out.append(Candidate(fam, dict(knobs), spec, origin))

        for fam, knobs in self.elites_for(shape, db, gpu):
            add(fam, knobs, "policy:elite")
            for m in self._mutations(fam, knobs):
                add(fam, m, "policy:mutation")
        for fam, f in self.families.items():
            for knobs in self.presets[fam]:
                add(fam, knobs, "policy:preset")
            add(fam, f.defaults(), "policy:default")
            for knobs in self._random_configs(fam, self.settings.random_per_family, rng):
                add(fam, knobs, "policy:random")
        return out

    def _features(self, shape: Shape, cands: Sequence[Candidate]) -> np.ndarray:
        """(len(cands), len(layouts), dim) feature tensor."""
        sf = shape_features(shape)
        X = np.empty((len(cands), len(self.layouts), self.space.dim))
        for i, c in enumerate(cands):
            for j, lay in enumerate(self.layouts):
                X[i, j] = self.space.features(shape, c.family, c.knobs, lay, sf)
        return X

    # ------------------------------------------------------------------ predicting
    def predict(self, shape: Shape, cands: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and std of each candidate's reward, per layout: (n, layouts) each."""
        X = self._features(shape, cands)
        flat = X.reshape(-1, self.space.dim)
        return (flat @ self.model.mean).reshape(X.shape[:2]), self.model.std(flat).reshape(X.shape[:2])

    def candidate_for(self, spec: str) -> Candidate | None:
        """The candidate a measured spec names, under its canonical spec today (a DB row recorded
        before the family gained a knob names it with the knob's default, as ``measured_on`` does);
        None for a family this learner does not search or knobs it no longer has."""
        fam, _, body = spec.partition(":")
        if fam not in self.families:
            return None
        try:
            knobs = self.families[fam].parse(body)
        except KnobError:
            return None
        return Candidate(fam, knobs, self.families[fam].spec(knobs), "policy:measured")

    def explain(self, shape: Shape, cand: Candidate, layout: str, top: int = 8) -> list[tuple[str, float]]:
        """The model inputs that contribute most to this candidate's predicted reward."""
        x = self.space.features(shape, cand.family, cand.knobs, layout)
        contrib = x * self.model.mean
        names = self.space.names()
        order = np.argsort(-np.abs(contrib))[:top]
        return [(names[i], float(contrib[i])) for i in order if contrib[i] != 0]

    # ------------------------------------------------------------------ the Proposer protocol
    def propose(self, shape: Shape, context: SearchContext) -> list[Candidate]:
        cands = self.pool(shape, context.exclude, context.db, context.gpu, seed=context.seed)
        if not cands or context.n <= 0:
            return []
        if self.settings.design and not (self.preset_specs & set(context.exclude)):
            # the shape's first batch: every supported preset (module docstring, "Initial design")
            design = [c for c in cands if c.spec in self.preset_specs]
            if design:
                for c in design:
                    c.meta["pool_origin"] = c.origin
                    c.origin = "policy:design"
                return design
        X = self._features(shape, cands)
        flat = X.reshape(-1, self.space.dim)
        keys = [self.compile_key(c.family, c.knobs) for c in cands]
        needs_build = np.array([getattr(self.families[c.family], "backend", "") == "cuda" and key not in self.built
                                for c, key in zip(cands, keys)])
        penalty = self.settings.compile_penalty * needs_build
        rng = np.random.default_rng(context.seed)
        chosen: list[int] = []
        new_keys: set[str] = set()
        near = self.local_specs(shape)
        n_local = math.floor(context.n * self.settings.local_share) if near else 0

        def add_runtime_twins(i: int) -> None:
            """Under a build cap, the new binary's runtime-option variants join the pool."""
            nonlocal X, flat, needs_build, penalty
            fam = self.families[cands[i].family]
            have = {c.spec for c in cands} | set(context.exclude)
            twins = []
            for k in fam.knobs:
                if not k.runtime:
                    continue
                for v in k.values:
                    kn = dict(cands[i].knobs, **{k.name: v})
                    if fam.is_valid(kn) and fam.spec(kn) not in have and self.supported(cands[i].family, kn, shape):
                        have.add(fam.spec(kn))
                        twins.append(Candidate(cands[i].family, kn, fam.spec(kn), "policy:runtime-twin"))
            if not twins:
                return
            Xt = self._features(shape, twins)
            cands.extend(twins)
            keys.extend(keys[i] for _ in twins)
            X = np.concatenate([X, Xt])
            flat = X.reshape(-1, self.space.dim)
            needs_build = np.concatenate([needs_build, np.ones(len(twins), dtype=bool)])
            penalty = self.settings.compile_penalty * needs_build
        for pick in range(min(context.n, len(cands))):
            # at most ``max_new_builds`` new binaries per batch: picks sharing one count once
            blocked = np.zeros(len(cands), dtype=bool)
            if self.settings.max_new_builds is not None and len(new_keys) >= self.settings.max_new_builds:
                blocked = needs_build & np.array([k not in new_keys for k in keys])
            left = [i for i in range(len(cands)) if i not in chosen and not blocked[i]]
            # the first picks stay in the trust region around the incumbents, while it has any left
            in_local = pick < n_local and any(cands[i].spec in near for i in left)
            if in_local:
                blocked = blocked | np.array([c.spec not in near for c in cands])
                left = [i for i in left if not blocked[i]]
            if not left:
                break
            if pick == 0 and self.settings.greedy_first:
                theta, why = self.model.mean, "policy:local-greedy" if in_local else "policy:greedy"
            elif not in_local and rng.random() < self.settings.epsilon:
                i = int(rng.choice(left))
                chosen.append(i)
                if needs_build[i] and keys[i] not in new_keys:
                    new_keys.add(keys[i])
                    if self.settings.max_new_builds is not None:
                        add_runtime_twins(i)
                cands[i].meta["pool_origin"] = cands[i].origin
                cands[i].origin = "policy:epsilon"
                continue
            else:
                theta, why = (self.model.sample(rng, self.settings.explore),
                              "policy:local" if in_local else "policy:thompson")
            value = (flat @ theta).reshape(X.shape[:2]).max(axis=1) - penalty
            value[chosen] = -np.inf
            value[blocked] = -np.inf
            i = int(np.argmax(value))
            chosen.append(i)
            cands[i].meta["pool_origin"] = cands[i].origin
            cands[i].origin = why
            if needs_build[i] and keys[i] not in new_keys:
                new_keys.add(keys[i])
                if self.settings.max_new_builds is not None:
                    add_runtime_twins(i)
        return [cands[i] for i in chosen]

    def observe(self, shape: Shape, outcomes: Sequence[Outcome]) -> None:
        """Fold measured rewards into the model (rows seen before are ignored)."""
        self.update_model(*self.record(shape, outcomes))

    def record(self, shape: Shape, outcomes: Sequence[Outcome]) -> tuple[list, list]:
        """Everything ``observe`` learns from ``outcomes`` except the model's update: rows seen,
        builds, per-shape records; returns the feature rows and rewards for ``update_model``, so a
        caller folding many shapes (``prior.fold_prior``, ``sync``) updates the model once."""
        X, r = [], []
        for o in outcomes:
            if o.row_id and o.row_id in self.seen:
                continue
            if o.row_id:
                self.seen.add(o.row_id)
            c = o.candidate
            if c.family not in self.families:
                continue
            ckey = self.compile_key(c.family, c.knobs)
            if o.failure == "compile":
                self.broken.add(ckey)
            elif o.failure != "unsupported":
                self.built.add(ckey)
            if o.reward is None:
                continue
            if not o.failure:
                spec = self.families[c.family].spec(c.knobs)
                best = self.measured_on.setdefault(spec, {})
                best[shape.name] = max(o.reward, best.get(shape.name, -math.inf))
                self.revision += 1
            X.append(self.space.features(shape, c.family, c.knobs, o.layout))
            r.append(o.reward)
            self._remember(shape, o.reward, c.family, c.knobs)
        return X, r

    def update_model(self, X: list, r: list) -> None:
        """One rank-len(X) update of the model (the sum of per-row updates, in fewer, larger steps)."""
        if X:
            self.model.update(np.array(X), np.array(r))

    def _remember(self, shape: Shape, reward: float, family: str, knobs: Mapping[str, Any]) -> None:
        h = self.history.setdefault(shape.name, [])
        key = _key(knobs)
        for i, (r0, f0, k0) in enumerate(h):
            if f0 == family and k0 == key:
                if reward > r0:
                    h[i] = (reward, family, key)
                break
        else:
            h.append((reward, family, key))
        h.sort(key=lambda t: -t[0])
        del h[max(8, self.settings.elites):]

    def sync(self, db) -> int:
        """Replay every DB candidate row this learner has not seen; returns how many were folded in.

        Held-out first-pick rows (origin ``policy:first-pick``, ``loop.first_pick_eval``) are not
        replayed: the learner never learns from the holdout, also when a finished search is rerun."""
        df = db.df
        if df.empty:
            return 0
        df = df[~df["is_baseline"].astype(bool) & ~df["row_id"].isin(self.seen) & df["family"].isin(list(self.families))
                & (df["origin"] != "policy:first-pick")]
        n = 0
        X, rewards = [], []
        for shape_name, grp in df.groupby("shape", sort=False):
            shape = parse_shape(shape_name)
            outs = []
            for r in grp.itertuples(index=False):
                knobs = self.families[r.family].complete(json.loads(r.config or "{}"))
                cand = Candidate(r.family, knobs, r.method, r.origin or "")
                rew = (None if r.reward is None or (isinstance(r.reward, float) and math.isnan(r.reward))
                       else float(r.reward))
                outs.append(Outcome(cand, r.layout, r.status, rew, None, None,
                                    status_reason=r.status_reason or "", failure=r.failure or "",
                                    row_id=r.row_id))
            x, r = self.record(shape, outs)
            X += x
            rewards += r
            n += len(outs)
            if len(X) >= UPDATE_ROWS:
                self.update_model(X, rewards)
                X, rewards = [], []
        self.update_model(X, rewards)
        return n

    # ------------------------------------------------------------------ checkpoint
    def save(self, path: str | Path) -> None:
        """One .npz, written atomically (temp file + os.replace)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "version": CHECKPOINT_VERSION, "vocab": self.space.vocab, "layouts": list(self.layouts),
            "lam": self.model.lam, "sigma": self.model.sigma, "n": self.model.n,
            "seen": sorted(self.seen), "history": self.history,
            "measured_on": self.measured_on,
            "built": sorted(self.built), "broken": sorted(self.broken),
        }
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, A=self.model.A, b=self.model.b, meta=np.array(json.dumps(meta)))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def load(self, path: str | Path) -> bool:
        """Restore a checkpoint; False (and nothing changed) when absent or for other families."""
        path = Path(path)
        if not path.exists():
            return False
        with np.load(path) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("version") != CHECKPOINT_VERSION or meta["vocab"] != self.space.vocab \
                    or tuple(meta["layouts"]) != self.layouts:
                return False
            self.model.A, self.model.b = z["A"].copy(), z["b"].copy()
        self.model.lam, self.model.sigma, self.model.n = meta["lam"], meta["sigma"], meta["n"]
        self.model._cache = None
        self.seen = set(meta["seen"])
        self.history = {k: [tuple(t) for t in v] for k, v in meta["history"].items()}
        self.measured_on = {k: dict(v) for k, v in meta["measured_on"].items()}
        self.built, self.broken = set(meta["built"]), set(meta["broken"])
        self.revision += 1
        return True
