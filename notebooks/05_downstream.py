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
# # 5. Downstream validation: RULER along the trajectory, Table 14, retrieval heads
#
# *LCCP paper, §5.1, Fig. 7, Fig. 12, App. D.2 (Table 14) and App. D.3 (Fig. 18).*
#
# **The claims.** The lower LongPPL of longer LCCP is real capability:
#
# - RULER, 13 synthetic long-context tasks, rises along the S5 Constant trajectory at the
#   32K LCCP context, and Last4 tracks or beats the raw checkpoint (Fig. 7, and Fig. 12 per
#   subtask).
# - The gain survives a 4x context extension (Fig. 8a, Fig. 13) and SFT (Fig. 8b, Fig. 14).
# - Merging's advantage is not guaranteed to survive later training (Table 14).
# - The number of retrieval heads, which copy the needle's tokens, grows along the trajectory
#   (Fig. 18).
#
# ```{note}
# This chapter covers RULER along the trajectory (Fig. 7, Fig. 12), the LongPPL and RULER
# columns of Table 14, and the retrieval heads (Fig. 18). The 4x extension (Fig. 8a, Fig. 13)
# and the long-context SFT (Fig. 8b, Fig. 14) are not built yet, so their Table 14 columns
# are empty. Agentic SFT and GAIA, BFCL and τ² need the web and LLM judges, so they are out of
# scope offline. A user plugs them in at `nblib.evals.ruler.HFModel`, which puts any local
# Hugging Face model behind the same `generate_text` interface.
# ```
#
# **RULER offline** (`nblib.evals.ruler`): all 13 subtasks with RULER's definitions,
# templates and scorers (`string_match_all`, and `string_match_part` for QA). The haystacks
# are the project's held-out corpus. QA uses synthetic documents whose answer sits in one
# passage among distractors; `load_squad` and `load_hotpotqa` read local copies of the real
# datasets into the same form. Prompts are sized in the evaluated model's tokens. The
# queried needle's depth runs evenly over each subtask's samples, and decoding is greedy
# through the KV cache.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
scale = "S5"

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from nblib.book import findings
from nblib.book.chapter import Chapter
from nblib.lccp import downstream, experiments
from nblib.lccp.evaluation import Evaluator

ch = Chapter("05_downstream", budget=budget, seed=seed, run_root=run_root, scale=scale, allowed_scales=("S5",))
b = ch.budget
ev = Evaluator.build(b, ch.store)
run = experiments.trajectory_run(ev, scale)  # chapter 4's trajectory: read, not retrained
points = downstream.trajectory_points(b)
print(f"{scale} Constant trajectory {run.hash}; points Dl/N = {points}")

# %% [markdown]
# ## The RULER suite at the LCCP context
#
# The same prompts for every model. A subtask whose template and answer do not fit the
# context (four queried keys, UUID keys, ten common words...) is listed with the reason
# and left out of the average.

# %%
suite = downstream.ruler_suite(b, seed=seed)
length = b.ruler_len or b.long_seq_len
fits = {t: v for t, v in suite.items() if isinstance(v, list)}
pd.DataFrame([{"task": t, "samples": len(v) if isinstance(v, list) else 0,
               "tokens": f"{min(s.n_tokens for s in v)}-{max(s.n_tokens for s in v)}" if isinstance(v, list) else "-",
               "note": "" if isinstance(v, list) else v} for t, v in suite.items()]).set_index("task")

# %% [markdown]
# ## Fig. 7 and Fig. 12: RULER along the trajectory, Raw against Last4

# %%
ruler = downstream.ruler_along_trajectory(b, run, suite, points)
ch.save_table(ruler, "ruler_trajectory", runs=[run])
agg = ruler.dropna().groupby(["dl", "protocol"]).score.mean().unstack()
agg.round(1)

# %% tags=["remove-output"]
#| label: cell-ruler
fig, axes = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [1, 1.6]})
for protocol, c in (("Raw", "tab:gray"), ("Last4", "tab:red")):
    axes[0].plot(agg.index, agg[protocol], "o-", c=c, label=protocol)
axes[0].set(xlabel="Dl / N", ylabel=f"RULER, mean of {len(fits)} subtasks", title=f"Fig. 7: RULER at {length} tokens")
axes[0].legend(fontsize=8)
per = ruler.dropna().pivot_table(index="task", columns=["protocol", "dl"], values="score")
for i, task in enumerate(per.index):
    for protocol, c, off in (("Raw", "tab:gray", -0.2), ("Last4", "tab:red", 0.2)):
        axes[1].scatter(np.full(len(points), i + off), per.loc[task, protocol], c=c, s=10 + 30 * np.arange(len(points)) / len(points),
                        alpha=0.7, label=protocol if i == 0 else None)
axes[1].set_xticks(range(len(per.index)), per.index, rotation=45, ha="right", fontsize=8)
axes[1].set(ylabel="score (x100)", title="Fig. 12: per subtask (larger dots: later points)")
axes[1].legend(fontsize=8)
ch.save_figure(fig, "fig07_ruler_trajectory", runs=[run])

# %% [markdown]
# :::{figure} #cell-ruler
# :label: fig-ruler
# RULER along the S5 Constant trajectory at this budget's LCCP context: the mean over the
# subtasks that fit (left, Fig. 7), and each subtask's score at every point (right, Fig. 12),
# for the raw checkpoint and for Last4.
# :::
#
# ## Fig. 18: retrieval heads
#
# A head is a retrieval head on a single-needle prompt when, producing the needle's value,
# it attends most to that very token inside the needle (Wu et al., 2024). Its score is the
# share of the value's tokens it retrieves that way. Heads above 0.1 at the first point are
# followed along the trajectory, and the heads above 0.1 are counted again at every point.

# %%
needle_task = "niah_single_2" if isinstance(suite["niah_single_2"], list) else "niah_single_1"
heads = downstream.retrieval_along_trajectory(b, run, suite, task=needle_task, points=points)
ch.save_table(heads, "retrieval_heads", runs=[run])
retrieval = downstream.retrieval_summary(heads)
retrieval.round(3)

# %% tags=["remove-output"]
#| label: cell-retrieval
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.plot(retrieval.index, retrieval["best head"], "o-", c="tab:purple", label="best head's score")
if retrieval["tracked heads' mean"].notna().any():
    ax.plot(retrieval.index, retrieval["tracked heads' mean"], "o--", c="tab:blue", label="heads found at the first point")
ax2 = ax.twinx()
ax2.bar(retrieval.index, retrieval["heads above threshold"], width=0.3 * (points[1] - points[0]), alpha=0.25,
        color="tab:green")
ax2.set_ylabel("heads above 0.1 (bars)")
ax.set(xlabel="Dl / N", ylabel="retrieval score", title=f"Fig. 18: retrieval heads on {needle_task}")
ax.legend(fontsize=8)
ch.save_figure(fig, "fig18_retrieval_heads", runs=[run])

# %% [markdown]
# :::{figure} #cell-retrieval
# :label: fig-retrieval
# Retrieval heads along the trajectory: the best head's score, the mean score of the heads
# found above 0.1 at the first point, and the number of heads above 0.1 at each point (bars).
# :::
#
# ## Table 14: does merging's advantage survive?
#
# Last4 minus Raw at every stage this chapter runs (LongPPL: lower is better; RULER: higher
# is better).

# %%
longppl = experiments.trajectory_points(ev, run, points, b.s5_ckpt_every)
t14 = downstream.table14(longppl, ruler)
ch.save_table(t14, "table14", runs=[run])
t14.round(3)

# %% [markdown]
# ## What we see

# %%
ch.markdown(findings.downstream_findings(suite, ruler, heads, t14, length))

# %%
ch.done()
