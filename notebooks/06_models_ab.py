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
# # 6. Models A and B: GPT-2 (124M) and a Gemma 3-style model (113M)
#
# *Gemma blog, "The two models".*
#
# ```{note}
# **Not built yet.** This page is a placeholder and shows no results. It will contain:
#
# - both architectures at full size (124,439,808 and ~113M parameters) and as toy analogues trained on the same byte-level corpus;
# - parameter and FLOPs accounting per token, exact for causal and windowed layers ("FLOPs at long contexts", the 6.7B-15.4B table);
# - the training curves of the two toy models side by side.
# ```

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)

# %%
from nblib.chapter import Chapter

ch = Chapter("06_models_ab", budget=budget, seed=seed, run_root=run_root)

# %%
ch.done()
