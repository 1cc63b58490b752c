"""The search's settings and their defaults, defined once: what ``hgemm-bench search`` reads its
option defaults from and what ``run.search_main`` takes.

One dataclass per part it configures: ``LearnerSettings`` (``learner.Learner``, the model shared
by shapes that proposes what to measure), ``FirstPickSettings`` (``first_pick.FirstPick``, the one
choice for a shape never measured) and ``SearchSettings`` (one search run: budget, timing, output,
and the two above). They live in this module, apart from the code they configure, so that the CLI
can read them without importing numpy, pandas or LightGBM (``hgemm-bench --help`` stays fast).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

CUDA_MAX_NEW_BUILDS = 2  # new binaries per shape batch on CUDA: a CUTLASS sm90 build takes 1-2 min
CUDA_LOOKAHEAD = 8  # shapes whose candidates compile while the GPU measures, on CUDA


@dataclass(frozen=True)
class LearnerSettings:
    """How the learner proposes (``learner.Learner``: pool, acquisition, trust region, design)."""

    epsilon: float = 0.05  # share of picks drawn uniformly from the pool (the floor on exploration)
    explore: float = 1.0  # spread of a Thompson draw (0: greedy)
    compile_penalty: float = 0.02  # reward units a new binary costs in the acquisition (builds are slow)
    max_new_builds: int | None = None  # new binaries one batch may need; None: no cap (the search uses
    #                                    CUDA_MAX_NEW_BUILDS on CUDA)
    design: bool = True  # a shape's first batch is every family preset that supports it
    local_share: float = 0.75  # share of a batch (after the design) spent next to the shape's incumbents
    local_elites: int = 2  # incumbents whose one-knob mutations make the trust region
    random_per_family: int = 64  # random valid configs per family in the pool
    neighbours: int = 4  # nearest measured shapes whose best configs warm-start the pool
    elites: int = 3  # best configs kept per shape (warm start)
    greedy_first: bool = True  # a batch's first pick is the posterior mean's argmax
    lam: float = 1.0  # ridge prior precision
    sigma: float = 0.3  # reward noise scale

    def __post_init__(self):
        if not 0.0 <= self.local_share <= 1.0:
            raise ValueError(f"local_share {self.local_share}: a fraction of the batch, 0 to 1")
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"epsilon {self.epsilon}: a probability, 0 to 1")
        if self.max_new_builds is not None and self.max_new_builds < 1:
            raise ValueError(f"max_new_builds {self.max_new_builds}: at least 1 (or None: no cap)")


@dataclass(frozen=True)
class FirstPickSettings:
    """How the first pick chooses a config for a shape never measured (``first_pick.FirstPick``).

    Only configs measured correctly on ``min_shapes`` other shapes compete, of those the ones
    measured on ``min_near`` shapes within ``near_distance`` (log2 M, N, K) while any is, less
    split-K configs left with one slice and clustered configs leaving a cluster partly empty on
    the shape; ``rule`` orders them. Each default beat the setting before it in a paired test on
    fresh H200 shapes (``first_pick``'s docstring)."""

    rule: str = "ranked"  # ranked (first_pick.RULES: LightGBM LambdaRank) or paired
    min_shapes: int = 10  # other shapes a config must have run correctly on
    min_near: int = 2  # ... of them within near_distance of the shape (0: off)
    near_distance: float = 2.0  # log2 (M, N, K) distance: two dimensions 2x apart, or one 4x
    decline_one_slice: bool = True  # leave out split-K configs whose one-wave count is one slice here
    decline_partial_cluster: bool = True  # leave out clustered configs that leave a cluster partly empty
    caution: float = 1.0  # the paired rule's prior: posterior mean minus this many std
    paired_bandwidth: float = 1.0  # the paired rule's shape weights: exp(-(distance / bandwidth)^2)
    paired_shrink: float = 1.0  # ... and its pull towards the prior, in shapes at distance 0
    prior: str | tuple[Path, ...] = "auto"  # what the pick learns besides the search: "auto" (this GPU
    #                                         model's packaged evidence), "none", or compare Parquets

    def __post_init__(self):
        if self.min_shapes < 1:
            raise ValueError(f"first-pick min_shapes {self.min_shapes}: at least 1 other shape")
        if self.min_near < 0 or self.near_distance <= 0:
            raise ValueError("first-pick min_near >= 0 and near_distance > 0")
        if self.paired_bandwidth <= 0 or self.paired_shrink <= 0:
            raise ValueError("first-pick paired_bandwidth and paired_shrink must be > 0")

    @property
    def name(self) -> str:
        """The rule and its constraints in one word, e.g. ``ranked/m10/n2/d/c``."""
        return (f"{self.rule}/m{self.min_shapes}" + (f"/n{self.min_near}" if self.min_near else "")
                + ("/d" if self.decline_one_slice else "") + ("/c" if self.decline_partial_cluster else ""))


@dataclass(frozen=True)
class SearchSettings:
    """One ``hgemm-bench search`` run (``run.search_main``)."""

    budget: str | float = "20m"  # the whole search id's budget (20m, 90s, 1h, or seconds)
    run_limit: str | float | None = None  # stop this invocation after this long; a rerun resumes
    device: str = "cuda"
    layouts: tuple[str, ...] = ("nn", "tn")
    batch: int = 4  # candidates per shape per round, per proposer
    families: tuple[str, ...] | None = None  # None: every family available on the device
    seed: int = 0  # the learner's and the timing's seed
    timing_budget_s: float = 2.0  # per shape call
    ci_target: float = 0.02  # relative CI half-width of each median
    anticheat: bool = True
    baselines: tuple[str, ...] | None = None  # None: every cuBLAS-family method on CUDA, torch on CPU
    min_speedup: float = 1.02  # a kernel enters the library only this much faster than its baseline
    library: Path | None = None  # also export the library here
    search_id: str | None = None  # None: the output folder's name
    max_rounds: int | None = None
    lookahead: int | None = None  # None: CUDA_LOOKAHEAD on CUDA, 0 elsewhere
    plugins: tuple[str, ...] = ()  # modules to import (methods, search families)
    prior: tuple[Path, ...] = ()  # compare Parquets the learner learns from before it searches
    learner: LearnerSettings = field(default_factory=LearnerSettings)
    first_pick: FirstPickSettings = field(default_factory=FirstPickSettings)

    def __post_init__(self):
        if self.batch < 1 or self.timing_budget_s <= 0 or self.ci_target <= 0:
            raise ValueError("batch >= 1, timing budget > 0 and CI target > 0")
        if not self.layouts or any(x not in ("nn", "tn") for x in self.layouts):
            raise ValueError(f"unknown layout(s) {self.layouts!r}: use nn and/or tn")


@dataclass(frozen=True)
class PoolSettings:
    """What the pool is (``search.pool``): the binaries ``hgemm-bench build`` compiles once per machine
    and ``tune`` ranks and measures. Family configs take M, N, K at run time, so one binary serves
    every shape it supports; configs that differ only in runtime options share one binary."""

    presets: bool = True  # every preset of every CUDA family (the search's initial design)
    library: bool = True  # every kernel spec of the packaged library (search.library.DEFAULT_PATH)
    families: tuple[str, ...] | None = None  # None: every CUDA family


@dataclass(frozen=True)
class TuneSettings:
    """One ``hgemm-bench tune`` run (``search.tune``): per shape, the pool ranked by the first pick,
    its top candidates measured with the baselines in the search's loop, the winners merged into the
    user's library."""

    per_shape: str | float = "60s"  # wall-clock budget per shape (the search loop's budget)
    # ranked candidates per shape: the most a shape's budget may measure (None: the whole ranked pool).
    # The budget, not this count, ends a shape: measured on an H200, 8 ranked left `--per-shape 60s`
    # at 1-7 s a shape, and 48 at 9-30 s (tune20 at 60 s: 1.041x, the same as at 10 s a shape)
    top: int | None = None
    batch: int = 4  # candidates per paired call (each call measures the baselines again)
    # configs per layout measured in a second paired call before any may enter the library (0: none,
    # one call decides): an entry is the best of 50-80 single calls, and on an H100 two of 21 such
    # entries lost to their baseline when compared again (lab/tune/tune20-60s-h100.log)
    confirm: int = 3
    device: str = "cuda"
    layouts: tuple[str, ...] = SearchSettings.layouts
    timing_budget_s: float = SearchSettings.timing_budget_s
    ci_target: float = SearchSettings.ci_target
    anticheat: bool = True
    baselines: tuple[str, ...] | None = None  # None: the search's (every cuBLAS-family method on CUDA)
    min_speedup: float = SearchSettings.min_speedup  # a kernel enters the library only this much faster
    library: Path | None = None  # None: the user's library (search.user_library.default_path)
    ranker: Path | None = None  # the search folder whose learner ranks; None: the packaged record
    plugins: tuple[str, ...] = ()  # modules to import (methods, search families)
    pool: PoolSettings = field(default_factory=PoolSettings)
    first_pick: FirstPickSettings = field(default_factory=FirstPickSettings)

    def __post_init__(self):
        if (self.top is not None and self.top < 1) or self.batch < 1 or self.confirm < 0:
            raise ValueError("top >= 1, batch >= 1 and confirm >= 0")
        if not self.layouts or any(x not in ("nn", "tn") for x in self.layouts):
            raise ValueError(f"unknown layout(s) {self.layouts!r}: use nn and/or tn")
