"""The LCCP paper (chapters 2-5): its run grid, evaluations, mergers, the scaling law and the monitor.

Modules: grid (the paper's runs as configs), evaluation (LongPPL/ShortPPL of runs and merges),
experiments (the tables the chapters plot), merge (App. B mergers), scaling (Eq. 1-2 fits),
monitor (`python -m nblib.lccp.monitor`), downstream (RULER along a trajectory, §5),
diagnostics (does the grid copy, learn and fall monotonically?), kernel_spread (the same runs
under two CPU kernel sets).
May import nblib.training, nblib.store, nblib.data, nblib.models, nblib.metrics, nblib.evals,
nblib.budgets and nblib.stats; never nblib.gemma or nblib.book.
"""
