# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5. Downstream validation: RULER, 128K extension, SFT
#
# *LCCP paper, §5, App. C, D.2 and D.3.*
#
# ```{note}
# **Not built yet.** This page is a placeholder and shows no results. It will contain:
#
# - **Fig. 7 / Fig. 12**: RULER scores (13 tasks, offline haystacks) along the S5 Constant
#   trajectory, Raw against Last4;
# - **Fig. 8a / Fig. 13**: the same after a 4x context extension (ABF base 5e5 -> 5e6,
#   the 128K-analogue mixture, span-based attention), from checkpoints at
#   Dl/N in {10, 20, 40, 60, 80, 100, 120} (scaled at toy);
# - **Fig. 8b-c, 14-16**: a small SFT stage on synthetic long-context QA, with 3 seeds;
# - **Table 14** (App. D.2): Last4 - Raw across training stages;
# - **Fig. 18** (App. D.3): retrieval-head score and count along the trajectory.
# ```
# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)

# %%
from nblib.chapter import Chapter

ch = Chapter("05_downstream", budget=budget, seed=seed, run_root=run_root)

# %%
ch.done()
