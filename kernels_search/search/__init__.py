"""Knob-level kernel search (``hgemm-bench search``): learner, first pick, loop, kernel DB and library.

* ``settings``: ``LearnerSettings``, ``FirstPickSettings``, ``SearchSettings`` (every default, once);
* ``proposer``: ``Candidate``, ``SearchContext``, ``Outcome`` and the ``Proposer`` protocol that
  the learner and the LLM proposer (``kernels_search.llm``) implement;
* ``features``: shape and config features; ``reward``: clipped log speedup over the strongest
  same-call baseline, -1 on any failure;
* ``learner``: ``Learner`` (Bayesian linear reward model shared by shapes, Thompson sampling with a
  greedy first pick and an epsilon floor, neighbour warm start, ``.npz`` checkpoint);
* ``first_pick``: ``FirstPick`` (one config for a shape never measured; rules ``ranked``, the
  default, through ``ranker``, and ``paired``);
* ``prior``, ``evidence``: earlier measurements folded into a learner; the packaged evidence;
* ``picks``: a search's learner rebuilt without a GPU, and ``search --dry-run``;
* ``db``: ``KernelDB`` (append-only atomic Parquet parts, query helpers);
* ``loop``: ``run_search``, ``measure_candidates``, ``first_pick_eval``;
* ``library``: ``export_library``, the ``library`` dispatcher Method, ``hgemm()`` and the
  ``hgemm_bench::hgemm`` custom op (importing it registers the op);
* ``library_build``: the packaged library rebuilt from paired evidence (compare runs, search DBs);
* ``run``: ``search_main`` (what the CLI command calls), ``parse_duration``, ``holdout_shapes``;
* ``cli``: the ``search`` command (``register(app)``).
"""
