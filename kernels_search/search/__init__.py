"""Knob-level kernel search (``hgemm-bench search``): policy, loop, kernel DB and library.

* ``proposer``: ``Candidate``, ``SearchContext``, ``Outcome`` and the ``Proposer`` protocol that
  the policy and the LLM proposer (``kernels_search.llm``) implement;
* ``features``: shape and config features; ``reward``: clipped log speedup over the strongest
  same-call baseline, -1 on any failure;
* ``policy``: ``Policy`` (Bayesian linear reward model shared by shapes, Thompson sampling with a
  greedy first pick and an epsilon floor, neighbour warm start, ``.npz`` checkpoint);
* ``db``: ``KernelDB`` (append-only atomic Parquet parts, query helpers);
* ``loop``: ``run_search``, ``measure_candidates``, ``first_pick_eval``;
* ``library``: ``export_library``, the ``library`` dispatcher Method, ``hgemm()`` and the
  ``hgemm_bench::hgemm`` custom op (importing it registers both);
* ``run``: ``search_main`` (what the CLI command calls), ``parse_duration``, ``holdout_shapes``.
"""
