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
# # 8. How each model represents position: RoPE clocks and a learned table
#
# *Gemma blog, "How each model represents position" and the appendix "How the band measures are computed".*
#
# ```{note}
# **Not built yet.** This page is a placeholder and shows no results. It will contain:
#
# - RoPE's 32 clocks: wavelengths and which bands turn within the context;
# - the band-usage heatmap and slow-band weight of every head, from the weights;
# - the per-band decomposition of three heads' mean scores on real text;
# - Model A's learned position table: cosine similarity, its R^2 against distance, principal components.
# ```

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)

# %%
from nblib.chapter import Chapter

ch = Chapter("08_position", budget=budget, seed=seed, run_root=run_root)

# %%
ch.done()
