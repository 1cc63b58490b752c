"""Research material: study drivers, plans, prior lists, cross-validation scripts (not packaged).

Nothing in the product (``harness``, ``baselines``, ``kernels_search``, ``reports``) imports or
reads this folder. Run its scripts from the repository root as modules, e.g.
``python -m lab.first_picks kernels_search/library/search-h200-g``; their tests run with
``python -m pytest lab/tests`` (CI collects ``tests/`` only).
"""
