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
# # 2. Setup: data, models and the LongPPL metric
#
# *LCCP paper, §3.1, App. A.1 (metric and test set), A.3 (training details), A.4 (data).*
#
# Everything later chapters train and measure is defined here: the corpus and its
# length-bucket mixture, the five model scales and their token budgets, and LongPPL /
# ShortPPL with the reference model that selects their key tokens.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none

# %%
import numpy as np
import pandas as pd
from IPython.display import HTML, display

from nblib.book.chapter import Chapter
from nblib.chapters import budget_words
from nblib.chapters.appendix import toy_design, toy_figures
from nblib.chapters.figures import highlight_html
from nblib.chapters.part1 import metric_figures
from nblib.data import get_corpus, get_tokenizer, tokenize_corpus
from nblib.lccp import diagnostics, experiments, grid, kernel_spread
from nblib.lccp.evaluation import Evaluator
from nblib.metrics import format_testset_stats, testset_stats
from nblib.probes import grid_ladder, records
from nblib.store.provenance import REPO_ROOT

ch = Chapter("02_setup", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root)
b = ch.budget

# %% [markdown]
# ## Data (App. A.4)
#
# The paper's LCCP corpus is a large private mixture. The `toy` and `smoke` budgets train
# on real text that the project's own install puts on every machine: the Python standard
# library's source files of the pinned interpreter, pinned by a manifest with sha256
# hashes (`data/corpus_manifests/`). Train and evaluation documents are split by a hash of
# the document id, so the split never changes. At `full`, point the budget at your own
# `.jsonl(.xz)` or `.txt` corpus.

# %%
corpus = get_corpus(b.corpus)
tok = get_tokenizer(b.tokenizer)
train = tokenize_corpus(corpus, tok, "train")
evals = tokenize_corpus(corpus, tok, "eval")
lengths = np.asarray(train.lengths)
print(f"corpus {corpus.name}: {len(corpus.docs):,} documents, {corpus.n_chars:,} characters, identity {corpus.identity[:16]}")
print(f"train split: {len(train):,} documents, {train.n_tokens:,} tokens; eval split: {len(evals):,} documents, "
      f"{evals.n_tokens:,} tokens ({b.tokenizer} tokenizer, vocabulary {tok.vocab_size})")
print(f"document length (tokens): median {np.median(lengths):,.0f}, 90th percentile "
      f"{np.percentile(lengths, 90):,.0f}, max {lengths.max():,}")

# %% [markdown]
# **Length-aware LCCP mixture (Table 9).** The paper groups documents by length relative to
# the 32K target and samples the buckets with fixed shares, 52.57% of them from documents
# shorter than half the target. Documents longer than the target are cut into consecutive
# target-length segments with a one-token overlap, keeping every segment. Our corpus has few
# tokens in short documents (the Python library's long files hold most of its text), so
# Table 9's shares would repeat a small bucket many times over; the toy budget keeps Table 9's
# buckets but samples every piece equally often (`natural`). The table shows both shares and
# each bucket's documents, pieces and tokens; the line below it, read from the table and the
# budget, says how short the corpus runs against this budget's LCCP target.

# %%
mix = experiments.mixture_table(b)
ch.save_table(mix, "table09_length_mixture")
mix

# %%
ch.markdown(budget_words.short_documents_words(b, mix))

# %% [markdown]
# ## Models and budgets (Table 1, App. A.3 Tables 5-7)
#
# The paper's model is a Llama-style decoder (RoPE, GQA, SwiGLU, RMSNorm) trained with Muon
# (AdamW for embeddings, head and norms), weight decay 0.1, clipping at 1.0. The short stage
# uses WSD (warmup, constant, then a linear decay to lr/10 over the last ninth); LCCP starts
# from its endpoint at lr/10 with the RoPE base raised from 1e4 to 5e5 (ABF) and either decays
# linearly to a tenth (Linear-Decay) or stays constant (Constant). Tokens are rounded to whole
# optimizer steps; these are the realized budgets every fit below uses. At `toy` and `smoke`
# every scale also has smeared keys, the toy's one departure from the paper's architecture
# (measured and explained in the section on smeared keys below).

# %%
models = experiments.model_table(b)
ch.save_table(models, "table01_models")
models

# %%
budgets = experiments.budget_table(b)
ch.save_table(budgets, "table05_07_budgets")
budgets

# %% [markdown]
# ### Where the toy departs from the paper
#
# Each departure below is declared, read from the budget, and measured: [appendix
# A](11_toy_design.ipynb) holds the probes behind each choice and the grids tried before this one.

# %%
ch.markdown(budget_words.departures_markdown(b))

# %% [markdown]
# ## Smeared keys: where the toy departs from the paper's Llama
#
# The paper's model is the plain Llama. Copying needs an induction circuit:
# a head that finds the earlier occurrence of the current token and attends to the token
# after it. In the plain model that takes two heads in two layers, a previous-token head whose
# output the induction head's keys then read, and at the toy's widths this circuit forms late
# or never (d32 not within 12M tokens). **Smeared keys** (Olsson et al. 2022, "In-context
# Learning and Induction Heads", the smeared-key architecture) shortcut it: in every attention
# layer, before RoPE, each key becomes $k'_t = s_h k_t + (1 - s_h) k_{t-1}$ with
# $s_h = \sigma(a_h)$, one learned scalar $a_h$ per key/value head, initialised at 0, with
# $k_{-1} = 0$ and no mixing across a document boundary. A head can then match "the token
# before this key" in one layer. It adds one parameter per KV head and layer.
#
# The ablation trains the same shape with and without smeared keys (`--variant plain` and
# `--variant smeared` of `python -m nblib.probes lr_batch`): two widths, d32 and d48, with two
# layers, heads of 16 and one KV head, a 128-token context, batch 32 x 128, constant LR 1e-2
# after 40 warmup steps, 2M tokens, seeds 0 and 1, one thread per run, one run at a time
# (records in `data/probes/toy_smear_ablation.jsonl`). The wall times were measured
# with the other core busy by other work and vary up to 2x between runs of one setting, so they
# bound the cost (about a minute per run) rather than compare step times.

# %%
smear = toy_design.smear_ablation_table(records("toy_smear_ablation"))
smear_summary = toy_design.smear_ablation_summary(smear)
ch.save_table(smear_summary, "toy_smear_ablation")
smear_summary.round(3)

# %% tags=["remove-output"]
#| label: cell-smear-ablation
ch.save_figure(toy_figures.smear_ablation_figure(smear), "toy_smear_ablation")

# %% [markdown]
# :::{figure} #cell-smear-ablation
# :label: fig-smear-ablation
# The smeared-key ablation: random-segment copy gain (loss on a 32-token segment's first copy
# minus its second) against training tokens, for the plain Llama (grey) and the same shape with
# smeared keys (orange), two seeds each (solid: seed 0, dashed: seed 1), at two widths of two
# layers. The dotted line is the 1-nat bar for "copies". Records:
# `data/probes/toy_smear_ablation.jsonl`.
# :::
#
# What the ablation says (read from the table above):

# %%
ch.markdown(toy_design.smear_ablation_findings(smear_summary))

# %% [markdown]
# So the toy departs from the paper's Llama in this one place: every toy and smoke scale has
# smeared keys (`nblib.budgets.LLAMA_VARIANTS`). What that buys is copying within the toy's
# budget: at these settings the plain model does not start to copy within the ablation's 2M
# tokens, at either width or seed, while the smeared one passes the 1-nat bar by 1M tokens
# ({numref}`fig-smear-ablation`), so the toy grid's models can use their context the way
# LongPPL measures. The `full` budget keeps the
# paper's model: its Llama has no smeared keys, and neither have the LongPPL reference model
# (a stand-in for the paper's Llama-3.1-8B) or Part 2's Models A and B. A smeared model has
# no Hugging Face counterpart, so `python -m nblib.export` refuses it.

# %% [markdown]
# ## How much the numbers move: seeds, precision and CPU kernels
#
# Two spreads bound what a toy number can say. The **seed spread**: chapter 3 trains a stable
# trunk with a second seed and compares the two seeds' held-out loss at the end of the stable
# phase. The **precision and kernel spread**: PyTorch picks its vector kernels at run time
# (AVX-512 where the CPU has it, else AVX2), bf16 autocast rounds differently again where the
# budget asks for it (the precision line above), and training amplifies rounding differences
# into a slightly different fit. What has been measured of each, read from the toy book's
# outputs and the design ladder of appendix A:

# %%
spread_csv = REPO_ROOT / "figures" / "03_scaling_law" / "stable_phase.csv"
if spread_csv.is_file():
    seed_spreads = pd.read_csv(spread_csv)
    seeded = seed_spreads.groupby("scale")["seed"].nunique().loc[lambda n: n > 1].index
    ch.markdown(f"**Seed spread** (chapter 3's `{spread_csv.relative_to(REPO_ROOT)}`, the stable trunk of "
                f"{', '.join(seeded)} at two seeds): {diagnostics.seed_spread(seed_spreads):.4f} nats of held-out "
                "loss at the end of the stable phase.")
    display(seed_spreads.round(4))
else:
    ch.markdown(f"**Seed spread**: not measured yet (chapter 3 writes `{spread_csv.relative_to(REPO_ROOT)}`).")

# %%
ladder = records("toy_grid_ladder")
ch.markdown("**Precision and kernel spread.** " + budget_words.grid_repeats_words(ladder))
book_rows = grid_ladder.book_grid_rows(ladder)
book_rows[["design", *grid_ladder.R2.values(), grid_ladder.CCC, grid_ladder.S5_RHO]].set_index("design")

# %%
kernel_csv = REPO_ROOT / "figures" / "02_setup" / "cpu_kernel_spread.csv"
if kernel_csv.is_file():
    ch.markdown(f"Run by run, two executions of chapters 3-4 (`{kernel_csv.relative_to(REPO_ROOT)}`, written by "
                "`python -m nblib.lccp.kernel_spread`):")
    display(kernel_spread.summary(pd.read_csv(kernel_csv)).round(4))
else:
    ch.markdown("No run-by-run comparison of two executions is committed, so the spread above is the ladder's, one "
                "number per measure (`python -m nblib.lccp.kernel_spread` compares two executions run by run; its "
                "docstring has the commands).")

# %% [markdown]
# ## The metric: LongPPL and ShortPPL (§3.1, §4.1, App. A.1)
#
# A reference model scores every token twice: with the full context, $\ell^{full}$, and with
# only a local chunk, $\ell^{chunk}$ (chunks of `trunc_len` tokens plus a scored window of
# `sliding_window`, as in the reference implementation). With $\Delta = \ell^{chunk} -
# \ell^{full}$, long key tokens are those with $\ell^{full} < 2$ and $\Delta > 2$ (they need
# distant context), short key tokens those with $\ell^{full} < 2$ and $\Delta < 0$. The key
# tokens are stored as character spans, so any model with any tokenizer is evaluated on the
# same text: LongPPL is the exponentiated mean NLL over all long key tokens of the set.
#
# The paper's reference is Llama-3.1-8B at a 4K chunk of 32K sequences. Here, at the toy
# budget, the reference is a larger model than any evaluated one, trained directly at the
# long context (its training curve is {numref}`fig-reference-training`), and the chunk's
# share of the long context is printed below against the paper's 4K of 32K.

# %%
ev = Evaluator.build(b, ch.store)
spec = b.longppl
print(f"test set: {ev.annotation.n_docs} documents; trunc_len {spec.trunc_len}, sliding_window {spec.sliding_window}; "
      f"the chunk is {spec.trunc_len / b.long_seq_len:.3g} of the {b.long_seq_len:,}-token LCCP context "
      f"(the paper: 4K of 32K, {4096 / 32768:.3g})")

# %% tags=["remove-output"]
#| label: cell-reference-training
ref_run = ch.store.run(grid.reference_config(b)) if b.reference["kind"] == "nblib" else None
fig = metric_figures.reference_training_figure(ref_run.metrics() if ref_run else None, b.reference.get("path"))
ch.save_figure(fig, "figA1_reference_training", runs=[ref_run] if ref_run else [])
if ref_run:  # its training speed, and the host's speed index: the README scales chapter times by it
    print(metric_figures.training_speed_line(ref_run.metrics(), "LongPPL reference"))
    print(metric_figures.speed_index_line(b))

# %% [markdown]
# :::{figure} #cell-reference-training
# :label: fig-reference-training
# Training loss of the LongPPL reference model against tokens seen, at budget {{ budget }}
# (trained here at the long context; at `full` the reference is a pretrained model).
# :::

# %% [markdown]
# **Table 2** (statistics of the PPL test set). The paper reports 1.42% long key tokens and
# 25.20% short key tokens over 10,000 GovReport sequences of 32K tokens. {numref}`fig-key-tokens`
# shows how every scored token falls against the two thresholds.

# %%
stats = testset_stats(ev.annotation, texts=ev.texts, tokenizer=ev.tokenizer, max_len=b.long_seq_len)
_ = ch.save_table(pd.DataFrame([{k: v for k, v in stats.items() if not isinstance(v, dict)}]), "table02_test_set")
ch.markdown(format_testset_stats(stats))

# %% tags=["remove-output"]
#| label: cell-key-tokens
fig = metric_figures.key_token_figure(ev.annotation.per_token(), spec)
ch.save_figure(fig, "figA1_key_token_selection")

# %% [markdown]
# :::{figure} #cell-key-tokens
# :label: fig-key-tokens
# Key-token selection (App. A.1) at budget {{ budget }}: every scored token of the test set by
# its full-context loss $\ell^{full}$ and its loss gap $\Delta$; long key tokens (red) have
# $\ell^{full} < 2$ and $\Delta > 2$, short key tokens (blue) $\ell^{full} < 2$ and
# $\Delta < 0$ (dashed lines: the thresholds).
# :::
#
# One test document with its long key tokens (red) and short key tokens (blue). The long
# ones are mostly the continuations of names defined earlier in the file: exactly the
# tokens only distant context can predict.

# %%
doc = int(np.argmax([len(iv) for iv in ev.annotation.intervals("long")]))
display(HTML(highlight_html(ev.texts[doc], ev.annotation.intervals("long")[doc],
                            ev.annotation.intervals("short")[doc])))

# %% [markdown]
# ## Recap
#
# - The corpus, split and tokenization are pinned and cached; the LCCP stream keeps Table
#   9's buckets (with the natural shares at toy, for the reason above).
# - Five scales span a compressed range of $N$ (the departures above); budgets are whole
#   optimizer steps.
# - LongPPL and ShortPPL are defined by a reference model's key tokens, stored as character
#   spans; the same annotation serves every model in [Chapter 3](03_scaling_law.ipynb) and
#   [Chapter 4](04_constant_last4.ipynb).

# %%
ch.done()
