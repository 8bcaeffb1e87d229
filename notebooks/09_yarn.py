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
# # 9. Extending Model B's context 4x with YaRN
#
# *Gemma blog, "Extending Model B's context from 1024 to 4096 with YaRN".*
#
# ```{note}
# **Not built yet.** This page is a placeholder and shows no results. It will contain:
#
# - YaRN's band-by-band rescaling (fast / blended / slow bands) and the attention temperature;
# - zero-shot perplexity against position for plain RoPE, YaRN and the fine-tuned model, with paired bootstrap intervals;
# - the fine-tune's perplexity per snapshot.
# ```

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)

# %%
from nblib.chapter import Chapter

ch = Chapter("09_yarn", budget=budget, seed=seed, run_root=run_root)

# %%
ch.done()
