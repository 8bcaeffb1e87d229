# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. Introduction: the claims, the budgets, how to run
#
# This book reproduces, and goes beyond, two works.
#
# **"Don't Stop Long-Context Continual Pre-Training Too Early: An Empirical Scaling Law"**
# (below, *the LCCP paper*) studies long-context continual pre-training (LCCP): a model pre-trained at a
# short context (4K) is trained further at a long one (32K). Its claims:
#
# 1. *Modeling.* log(LongPPL) follows an additive two-stage power law in the non-embedding
#    parameter count $N$, the short-context tokens $D_s$ and the LCCP tokens $D_l$,
#
#    $$\log(\mathrm{LongPPL}) = \frac{A}{N^{\alpha}} + \frac{B_s}{D_s^{\beta_s}} + \frac{B_l}{D_l^{\beta_l}} + C,$$
#
#    fitted on 109 Linear-Decay runs at five scales, and it extrapolates to held-out scales
#    ($R^2 > 0.95$, MAPE < 2%). [Chapter 3](03_scaling_law.ipynb).
# 2. *Monitoring.* Constant-Last4 (train LCCP at a constant learning rate, evaluate the
#    average of the last four checkpoints) tracks the budget-matched Linear-Decay run, and
#    with Eq. 2 early checkpoints predict a trajectory's future. [Chapter 4](04_constant_last4.ipynb).
# 3. *Validating.* The LongPPL gains carry over to RULER, to 128K context extension and to
#    SFT. [Chapter 5](05_downstream.ipynb) runs RULER offline along the S5 trajectory, the
#    retrieval heads, a 4x context extension with RULER after it, long-context SFT scored on
#    offline analogues of LongBench, GraphWalks, LongReason and BABILong, and Table 14.
#
# **"GPT-2 (124M) to Gemma 3-style (113M), Part 2"** (below, *the Gemma blog*) compares a GPT-2 (Model A)
# and a Gemma 3-style model (Model B) at inference time: the KV cache and its benchmark, how
# each represents position (RoPE "clocks" against a learned table), a 4x context extension
# with YaRN, and what the attention heads do. [Chapter 6](06_models_ab.ipynb) trains both
# models on one token stream and reads their gap against training length; [chapter 7](07_kv_cache.ipynb) measures the KV cache, decoding
# speed and long-context FLOPs; [chapter 8](08_position.ipynb) reads position out of RoPE's
# bands and Model A's table; [chapter 9](09_yarn.ipynb) extends Model B 4x with YaRN and runs
# the two checks the blog skipped; [chapter 10](10_attention.ipynb) measures what the heads
# attend to, and switches the induction heads off.
#
# The notebooks orchestrate and plot; the library `nblib` does the work. Every number and
# figure below comes from runs this book can redo, at one of three budgets. Which claims the
# toy reproduces, each with the source's number beside the toy's and a verdict by a stated
# rule: the [scorecard](../book/scorecard.md), the next page; its summary is below. How the toy
# was designed, and the grids tried before it: the appendix, [chapters 11](11_toy_design.ipynb)
# and [12](12_toy_ladders.ipynb). What the book's runs cost, and the benchmarks of the code
# they run on: the [run report](../book/run_report.md), the last page.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none

# %%
import pandas as pd
from IPython.display import display

from nblib.book.chapter import Chapter
from nblib.book.summary import chapter_summary, summary_bundle
from nblib.budgets import BUDGETS, PAPER_N, SCALES, get_budget
from nblib.chapters import budget_words
from nblib.chapters.claims.paper_map import paper_map, paper_map_markdown
from nblib.chapters.figures import figures_root

ch = Chapter("01_introduction", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root)

# %% [markdown]
# ## Which claims hold at toy
#
# The scorecard's summary: how many claims got each verdict, and the claims the toy reproduces,
# each linked to the chapter whose figures give its number. The book runner writes it once,
# after the chapters, from the same figures as the scorecard page. This chapter runs first, so
# it computes the summary from the tables the figures folder holds now with the same function;
# the line under it says whether that is the file the runner wrote, or the chapters have changed
# the tables since (the scorecard page, written after them, then has the newer numbers).

# %%
summary, how = chapter_summary(figures_root(ch.budget.name), ch.budget.name)
display(summary_bundle(summary, how), raw=True)

# %% [markdown]
# ## Three budgets, one code path
#
# The same notebooks run at every budget; one parameter sets everything else
# (`nblib/budgets/`). `full` carries the paper's numbers; `toy` and `smoke` are
# scaled-down analogues: small models on real text (the Python standard library's
# sources, in a 1,024-entry BPE), with the paper's ratios between stages and a compressed
# span of model sizes ([chapter 2](02_setup.ipynb) shows why).

# %%
rows = []
for name in BUDGETS:
    b = get_budget(name)
    rows.append({
        "budget": name,
        "contexts (short / LCCP / ext.)": f"{b.short_seq_len} / {b.long_seq_len} / {b.ext_seq_len}",
        "N of S1..S5": ", ".join(f"{b.n_params(s):,}" for s in SCALES),
        "token unit": f"N of {b.token_unit} at every scale" if b.token_unit else "each scale's N",
        "Ds / unit": ", ".join(map(str, b.ds_multiples)),
        "Dl / unit": ", ".join(map(str, b.dl_multiples)),
        "S5 trajectory": f"{b.s5_trajectory}{b.unit}",
        "seeds per Constant run": b.n_constant_seeds,
        "corpus": b.corpus,
        "LongPPL chunk / window": f"{b.longppl.trunc_len} / {b.longppl.sliding_window}",
    })
budgets_table = pd.DataFrame(rows).set_index("budget")
budgets_table

# %%
b = ch.budget
ch.markdown(budget_words.grid_size_words(b, get_budget("full")))

# %% [markdown]
# The paper's model sizes are listed below next to ours; our full-budget shapes are our own
# (the paper gives only $N$) and land within 1% of it.

# %%
pd.DataFrame({
    "paper N": [f"{PAPER_N[s] / 1e6:.2f}M" for s in SCALES],
    "full N (ours)": [f"{get_budget('full').n_params(s) / 1e6:.2f}M" for s in SCALES],
    f"{b.name} N": [f"{b.n_params(s):,}" for s in SCALES],
}, index=list(SCALES))

# %% [markdown]
# ## How to run
#
# ```bash
# make book          # the main job: every chapter at the toy budget, figures, HTML book
# make test          # unit tests + every chapter at smoke (executed once, under nbval-lax) + book check
# papermill notebooks/04_constant_last4.ipynb out.ipynb -p scale S5           # one chapter
# papermill notebooks/03_scaling_law.ipynb out.ipynb -p budget full           # the paper's scale
# torchrun --standalone --nproc_per_node 8 -m nblib.training.train runs/<hash>/config.json --strategy fsdp
# ```
#
# Runs are cached in `runs/`, named by a hash of their configuration, and resumed from their
# last checkpoint if they were interrupted; a chapter never retrains what the store has.
#
# To run the book on your own corpus, tokenizer or LongPPL reference without editing the
# library, give it a budget file (a named budget and the fields you change: `make book
# BUDGET_FILE=my.toml`, `make plan BUDGET_FILE=my.toml`, `-p budget_file my.toml`); the
# README's section "Your own data" has one for each budget.
#
# ## The paper map
#
# Every equation, figure and table of both works, the function and chapter that produce
# it, and its status, every row. `tests/test_paper_map.py` checks that each function exists
# and each chapter is in the book.

# %%
pm = paper_map()
print(f"{len(pm)} rows:")
print(pm.groupby(["work", "status"]).size().to_string())
ch.markdown(paper_map_markdown(pm))

# %%
ch.done()
