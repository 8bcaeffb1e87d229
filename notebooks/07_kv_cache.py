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
# # 7. Generating text with a KV cache
#
# *Gemma blog, "Generating text with a KV cache" and "The KV cache of a larger model".*
#
# ```{note}
# **Not built yet.** This page is a placeholder and shows no results. It will contain:
#
# - the KV-cache size formula against measured cache tensors (75.5 MB vs 11.8 MB at 1024 tokens, fp32);
# - the decode and prefill benchmark at batch 1 and 8 with 128- and 512-token prompts, with and without the cache, on this machine (and on a GPU when one is lent);
# - step time against bytes read per step, and the 7B-class cache table.
# ```

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)

# %%
from nblib.chapter import Chapter

ch = Chapter("07_kv_cache", budget=budget, seed=seed, run_root=run_root)

# %%
ch.done()
