"""First-pick rules kept for studies, registered into the product's rule registry on import.

The product ships ``ranked`` (the default) and ``paired`` (``kernels_search.search.first_pick``).
The rules they replaced, each measured against its successor on fresh H200 shapes (lab/NOTEBOOK.md):

* ``model``: the learner's posterior-mean argmax over the candidates;
* ``cautious``: its lower bound, mean minus ``caution`` std (the paired rule's prior);
* ``neighbours``: each config's best-of-layouts reward on its ``NEIGHBOURS`` nearest measured shapes
  (Gaussian weights, ``BANDWIDTH`` in log2 M, N, K); a config whose evidence weighs less than
  ``MIN_WEIGHT`` ranks below every config with enough, in the model's order;
* ``geopaired``: the paired fit with each row also weighted by how alike the config launches on
  the measured shape and on the target (``features.launch_mismatch``, scale ``GEOMETRY_SCALE``).

Import this module (``from lab import first_pick_rules``) before naming one of them in a
``FirstPickSettings``.
"""

from __future__ import annotations

import math

import numpy as np

from harness.shapes import parse_shape
from kernels_search.search.features import launch, launch_mismatch, shape_distance
from kernels_search.search.first_pick import FirstPick, paired_tag, register_rule

NEIGHBOURS, BANDWIDTH, MIN_WEIGHT = 5, 1.5, 0.2
GEOMETRY_SCALE = 0.3


def neighbour_value(fp: FirstPick, spec: str, shape) -> tuple[float, float]:
    """The config's best-of-layouts reward on its nearest measured shapes other than ``shape``
    (Gaussian weights over the ``NEIGHBOURS`` nearest), and the weight of that evidence (the sum of
    weights: 1 per shape at distance 0, ~0 for shapes far away)."""
    near = sorted((shape_distance(shape, parse_shape(nm)), r) for nm, r in fp.learner.measured_on.get(spec, {}).items()
                  if nm != shape.name)[:NEIGHBOURS]
    w = np.exp(-((np.array([d for d, _ in near]) / BANDWIDTH) ** 2))
    if w.sum() <= 0:
        return -math.inf, 0.0
    return float((w * np.array([r for _, r in near])).sum() / w.sum()), float(w.sum())


def model_values(fp: FirstPick, shape, cands) -> np.ndarray:
    return fp.learner.predict(shape, cands)[0].max(axis=1)


def cautious_values(fp: FirstPick, shape, cands) -> np.ndarray:
    return fp.lower_bound(shape, cands)


def neighbour_values(fp: FirstPick, shape, cands) -> np.ndarray:
    mean = model_values(fp, shape, cands)
    out = np.empty(len(cands))
    for i, c in enumerate(cands):
        v, weight = neighbour_value(fp, c.spec, shape)
        # far evidence: below any near config (rewards are clipped to [-1, 1]), in model order
        out[i] = v if weight >= MIN_WEIGHT else -10.0 + mean[i]
    return out


def geopaired_values(fp: FirstPick, shape, cands, prior=None) -> np.ndarray:
    """The paired fit (``prior``: default the lower bound), each row weighted by how alike the
    config launches on the measured shape and on ``shape``."""
    swapped = [c.family in fp.learner.space.swapped for c in cands]
    here = [launch(shape, c.knobs, sw) for c, sw in zip(cands, swapped)]

    def weigh(other, idx):
        mismatch = np.array([launch_mismatch(here[i], launch(other, cands[i].knobs, swapped[i])) for i in idx])
        return np.exp(-(mismatch / GEOMETRY_SCALE) ** 2)

    prior = fp.lower_bound(shape, cands) if prior is None else prior
    return fp.paired_values(shape, cands, prior, weigh=weigh)


register_rule("model", model_values, lambda st: "")
register_rule("cautious", cautious_values, lambda st: f"lcb{st.caution:g}-")
register_rule("neighbours", neighbour_values, lambda st: "nb-")
register_rule("geopaired", geopaired_values, lambda st: f"gp{GEOMETRY_SCALE:g}-{paired_tag(st)}")
