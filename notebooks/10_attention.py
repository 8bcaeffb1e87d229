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
# # 10. What the two models attend to
#
# *Gemma blog, "Visualizing attention" and "Where the two models disagree".*
#
# ```{note}
# **Not built yet.** This page is a placeholder and shows no results. It will contain:
#
# - attention maps of a copied line, per layer;
# - attention distance and sinks (first position, separators) per head;
# - induction scores with the repeat inside and beyond Model B's window, and the copy loss;
# - token-level KL(A || B) disagreement and the strongest cases.
# ```

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)

# %%
from nblib.chapter import Chapter

ch = Chapter("10_attention", budget=budget, seed=seed, run_root=run_root)

# %%
ch.done()
