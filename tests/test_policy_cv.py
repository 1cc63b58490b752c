"""scripts/policy_cv.py: leave-one-shape-out ranking on a recorded kernel DB.

A synthetic DB whose rewards follow a rule that holds on every shape (``pad`` costs, the other
knobs do not matter) must be ranked right on a shape the scorers never saw: top-1 equals the
best measured row and is above a random pick. A DB whose rewards are noise must not look
learnable (the rank correlation stays near zero)."""

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

import test_search_plugin  # noqa: F401  (the cpuk family)

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("policy_cv", ROOT / "scripts" / "policy_cv.py")
policy_cv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(policy_cv)

SHAPES = ["16_16_32", "32_16_64", "16_32_16", "64_32_32", "32_64_128", "128_16_16"]


def _db(reward_of) -> pd.DataFrame:
    rows = []
    for i, shape in enumerate(SHAPES):
        for pad in range(4):
            for split in (1, 2, 4):
                knobs = dict(pad=pad, split=split, bug=0, small=0)
                method = "cpuk:" + ",".join(f"{k}={v}" for k, v in knobs.items())
                rows.append(dict(kind="candidate", origin="policy", search_id="s", shape=shape, layout="nn",
                                 family="cpuk", knobs=json.dumps(knobs), method=method,
                                 reward=reward_of(i, pad, split), row_id=f"{shape}-{pad}-{split}",
                                 status="ok", status_reason="", failure=""))
    return pd.DataFrame(rows)


def test_a_rule_that_holds_across_shapes_is_ranked_right_on_unseen_shapes():
    fams = {"cpuk": test_search_plugin.FAMILY}
    cv = policy_cv.cross_validate(_db(lambda i, pad, split: 0.3 - 0.2 * pad), layouts=("nn",), families=fams)
    s = policy_cv.summarize(cv)
    assert set(s.index) == {"policy", "knn"} and (s["shapes"] == len(SHAPES)).all()
    for scorer in ("policy", "knn"):
        assert s.loc[scorer, "top1"] == s.loc[scorer, "oracle"] == round(math.exp(0.3), 3)
        assert s.loc[scorer, "top1"] > s.loc[scorer, "random"]
    assert s.loc["policy", "spearman"] > 0.8


def test_noise_does_not_look_learnable():
    rng = np.random.default_rng(0)
    noise = {(i, p, q): rng.uniform(-1, 1) for i in range(len(SHAPES)) for p in range(4) for q in (1, 2, 4)}
    cv = policy_cv.cross_validate(_db(lambda i, p, q: noise[(i, p, q)]), layouts=("nn",),
                                  families={"cpuk": test_search_plugin.FAMILY})
    assert abs(policy_cv.summarize(cv).loc["policy", "spearman"]) < 0.35
