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
# This chapter covers RULER along the trajectory (Fig. 7, Fig. 12), the retrieval heads
# (Fig. 18), the 4x extension (Fig. 8a, Fig. 13), long-context SFT with offline benchmark
# analogues (Fig. 8b, Fig. 14, Fig. 15) and every row of Table 14. Agentic SFT (Fig. 8c,
# Fig. 16) is out of scope offline: its training data are search-agent and tool-calling
# trajectories against live services, and GAIA, BFCL-WebSearch and τ²-telecom score a model
# by letting it browse the web or drive a simulated user through an LLM, none of which a
# closed machine can run or replace with a faithful generator. A user with those services
# plugs a model in at `nblib.evals.ruler.HFModel`, which puts any local Hugging Face model
# behind the same `generate_text` interface.
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
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none
scale = "S5"

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from nblib.book.chapter import Chapter
from nblib.chapters.part1 import downstream_figures, downstream_findings
from nblib.lccp import downstream, experiments, post_training
from nblib.lccp.evaluation import Evaluator
from nblib.lccp.sft import build_sft_mixture, mixture_summary
from nblib.training.runner import get_or_run_many

ch = Chapter("05_downstream", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root, scale=scale,
             allowed_scales=("S5",))
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
fig = downstream_figures.ruler_trajectory_figure(ruler, length, unit=b.unit)
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
#
# The paper scores them on RULER's `niah_single_2`. This budget's models read Python, not
# English, so here the prompts are the same subtask written as code (`niah_single_2_code`,
# the form described below under "RULER's single needles, written as code"): the same
# needle, depth and value, in the one form these models could answer. The definition of the
# score is unchanged.

# %%
needle_suite = downstream.code_needle_suite(b, seed=seed)
needle_task = "niah_single_2_code"
heads = downstream.retrieval_along_trajectory(b, run, needle_suite, task=needle_task, points=points)
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
# ## Fig. 8a and Fig. 13: RULER after the 4x context extension
#
# §5.2: every starting point, Raw and Last4, goes through one fixed extension recipe: ABF
# from the LCCP RoPE base to the next one, the extension mixture (more long documents,
# packed documents kept apart by span-based attention), sequences of 4x the LCCP context,
# the LR from the LCCP constant rate down to a hundredth of it, and the paper's 2.10B tokens
# at S5 (2.56N) scaled like every other budget here (`nblib.lccp.post_training`). RULER is
# then run at the extended length, with the same prompts for every model. The paper extends
# every point; a budget may take evenly spaced ones (`post_training_points`, first and last
# kept) and fewer prompts per task (`post_training_samples`; the paper too runs 100 at
# 128K against 500 at 32K).

# %%
post_points = post_training.post_training_points(b, points)
starts = post_training.start_points(b, run, post_points)
ext_cfgs = [post_training.extension_config(b, scale, run.config, s) for s in starts]
ext_runs = get_or_run_many(ch.store, ext_cfgs, desc="4x extension")
ext_len = post_training.extended_ruler_len(b)
ext_suite = post_training.extended_ruler_suite(b, seed=seed)
ruler_ext = post_training.ruler_after(b, {(s["dl"], s["protocol"]): r for s, r in zip(starts, ext_runs)}, ext_suite)
ch.save_table(ruler_ext, "ruler_after_extension", runs=ext_runs)
print(f"{len(ext_runs)} extension runs of {ext_cfgs[0].total_steps} steps x {ext_cfgs[0].tokens_per_step:,} tokens "
      f"(RoPE base {b.rope_bases[1]:g} -> {b.rope_bases[2]:g}); RULER at {ext_len} tokens, "
      f"{sum(isinstance(v, list) for v in ext_suite.values())} of 13 subtasks fit, "
      f"{b.post_training_samples or b.ruler_samples} prompts each; starting points Dl/N = {post_points}")
ruler_ext.dropna().groupby(["dl", "protocol"]).score.mean().unstack().round(1)

# %% tags=["remove-output"]
#| label: cell-ruler-ext
agg_ext = ruler_ext.dropna().groupby(["dl", "protocol"]).score.mean().unstack().reindex(columns=["Raw", "Last4"])
per_ext = ruler_ext.dropna().pivot_table(index="task", columns=["protocol", "dl"], values="score")
fig, axes = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [1, 1.6]})
for protocol, c in (("Raw", "tab:gray"), ("Last4", "tab:red")):
    axes[0].plot(agg_ext.index, agg_ext[protocol], "o-", c=c, label=protocol)
axes[0].set(xlabel="Dl / N of the starting point", ylabel="RULER, mean over the subtasks that fit",
            title=f"Fig. 8a: RULER at {ext_len} tokens after the 4x extension")
axes[0].legend(fontsize=8)
for i, task in enumerate(per_ext.index):
    for protocol, c, off in (("Raw", "tab:gray", -0.2), ("Last4", "tab:red", 0.2)):
        axes[1].scatter(np.full(len(post_points), i + off), per_ext.loc[task, protocol], c=c,
                        s=10 + 30 * np.arange(len(post_points)) / len(post_points), alpha=0.7, label=protocol if i == 0 else None)
axes[1].set_xticks(range(len(per_ext.index)), per_ext.index, rotation=45, ha="right", fontsize=8)
axes[1].set(ylabel="score (x100)", title="Fig. 13: per subtask (larger dots: later starting points)")
axes[1].legend(fontsize=8)
ch.save_figure(fig, "fig08a_ruler_after_extension", runs=ext_runs)

# %% [markdown]
# :::{figure} #cell-ruler-ext
# :label: fig-ruler-ext
# RULER at 4x the LCCP context after the same extension recipe from every starting point of
# the S5 trajectory: the mean over the subtasks that fit (left, Fig. 8a) and each subtask
# (right, Fig. 13), from the raw checkpoint and from Last4.
# :::
#
# ### RULER's single needles, written as code, with values sized to the model
#
# This budget's LCCP models are trained on Python source only, and RULER asks in English:
# the needle reads "One of the special magic numbers for {key} is: {value}." and the answer
# prefix "The special magic numbers for {key} mentioned in the provided text are" does not
# repeat the needle's words, so even a model that copies cannot answer it.
# `nblib.evals.code_niah` keeps RULER's three single-needle subtasks (one key-value needle at
# an even spread of depths, asked for at the end, `string_match_all`, the same sizing and
# keys) and writes them as code: the needle is a line `magic_number_{key} = {value}`, the
# question a comment, and the answer prefix repeats the needle's left side, so an induction
# head can answer.
#
# RULER's values are sized to a 32K-context LLM: a 7-digit number is one or two tokens of
# Llama's tokenizer and 7-8 pieces of a 1,024-entry BPE, and greedy decoding must get every
# piece. A budget scales the values as it scales the contexts (`needle_value_form`): `full`
# keeps RULER's; `toy` and `smoke` draw values of at most two pieces (a 2-3 digit number, or
# an identifier that the prompt's haystack never contains, as a string), and generation stops
# two tokens past the value, so that a short value is not matched by chance in a long
# continuation. Every prompt has a **control**: the same prompt with the needle line removed,
# decoded and scored the same way; its score is what guessing earns.
#
# Beside the score, two teacher-forced measures that move before a needle is answered: the
# **per-piece hit rate** (each value piece the model's argmax, given the true pieces before
# it) and the **needle gain** (the value's log-probability per token with the needle in the
# prompt minus without it). The same S5 models as above at every point of the trajectory,
# and after the extension. Each prompt scores 0 or 100, so a mean over 20 prompts has a
# standard error of up to 11 points: the trajectory's last point, where the score is read,
# takes more prompts per needle (`needle_samples_last`; the `prompts` column).

# %%
lccp_stage, ext_stage = f"LCCP, {length} tokens", f"after the 4x extension, {ext_len} tokens"
needles = downstream.needles_along_trajectory(b, run, downstream.code_needle_suites(b, points, seed=seed), points)
needles_ext = post_training.needles_after(b, {(s["dl"], s["protocol"]): r for s, r in zip(starts, ext_runs)},
                                          post_training.extended_code_needle_suite(b, seed=seed))
code_needles = pd.concat([needles.assign(stage=lccp_stage), needles_ext.assign(stage=ext_stage)], ignore_index=True)
code_needles = code_needles[["stage", *needles.columns]]
ch.save_table(code_needles, "code_needles", runs=[run, *ext_runs])
needle_traj = downstream.needle_trajectory(needles)
needle_ext = downstream.needle_trajectory(needles_ext)
ch.save_table(needle_traj, "needle_trajectory", runs=[run])
print(f"values: {b.needle_value_form} ({', '.join(str(s.answers[0]) for s in needle_suite[needle_task][:3])}, ...)")
needle_traj.set_index(["dl", "protocol", "prompts"]).round(3)

# %% tags=["remove-output"]
#| label: cell-needles
fig = downstream_figures.needle_trajectory_figure(needle_traj, needle_ext, length, b.needle_value_form, unit=b.unit)
ch.save_figure(fig, "fig07b_needle_trajectory", runs=[run, *ext_runs])

# %% [markdown]
# :::{figure} #cell-needles
# :label: fig-needles
# The code-form single needles along the S5 trajectory, Raw and Last4: the score and its
# control (the prompt without the needle line), the per-piece hit rate and the needle gain,
# at the LCCP context (filled) and after the 4x extension from the starting points that go
# on to it (hollow squares, at 4x the context).
# :::

# %%
ch.markdown(downstream_findings.needle_trajectory_findings(needle_traj, needle_ext))

# %% [markdown]
# Which measure carries §5.1's trend at this budget: the paper's claim is that retrieval
# improves with more LCCP tokens. The score is that claim as RULER scores it, but a small
# model's score moves in steps of whole values; the per-piece hit rate is the same greedy
# test taken one piece at a time, and the needle gain says whether the model uses the needle
# at all. Where the score stays near its control, the two teacher-forced measures are the
# ones that can show a trend, and the bullets above give their rank correlation with Dl.
# Which of the project's models answer a needle at all, the levers that make S5 answer, and
# the needle trend on every grid design: [appendix B](12_toy_ladders.ipynb).

# %% [markdown]
# ## Fig. 8b, Fig. 14 and Fig. 15: long-context SFT
#
# §5.3: one SFT recipe for every starting point, three data seeds each. The mixture is
# fixed (Table 10's families, built offline from the corpus's train split by
# `nblib.lccp.sft`); the loss counts the answer tokens only; examples are packed into
# sequences of the LCCP context with attention kept inside each example; the LR decays
# linearly. Fig. 15's check doubles the SFT budget with one seed. The SFT models are scored
# on offline analogues of the paper's four benchmarks (`nblib.evals.long_benchmarks`:
# LongBench-style QA and code completion, GraphWalks, LongReason-style puzzles and
# BABILong-style facts in held-out text), at the SFT context, and averaged with equal weight.

# %%
mixture = build_sft_mixture(b)
mixture_summary(mixture)

# %%
sft_jobs = post_training.sft_start_configs(b, scale, run.config, starts)
sft_2x_jobs = post_training.sft_start_configs(b, scale, run.config, starts, seeds=(0,), budget_factor=2.0)
sft_runs = get_or_run_many(ch.store, [c for _, _, c in sft_jobs + sft_2x_jobs], desc="long-context SFT")
bench_suite = post_training.benchmark_suite(b)
keyed = {(s["dl"], s["protocol"], sd): r for (s, sd, _), r in zip(sft_jobs, sft_runs)}
keyed_2x = {(s["dl"], s["protocol"], sd): r for (s, sd, _), r in zip(sft_2x_jobs, sft_runs[len(sft_jobs):])}
bench = post_training.benchmarks_after(b, keyed, bench_suite)
bench_2x = post_training.benchmarks_after(b, keyed_2x, bench_suite, desc="benchmarks after SFT, 2x budget")
ch.save_table(bench, "sft_benchmarks", runs=sft_runs)
ch.save_table(bench_2x, "sft_benchmarks_2x", runs=sft_runs)
sft_models = post_training.model_averages(bench)
sft_models_2x = post_training.model_averages(bench_2x)
pd.DataFrame([{"task": t, "fits": isinstance(v, list), "note": "" if isinstance(v, list) else v[:120]}
              for t, v in bench_suite.items()]).set_index("task")

# %% tags=["remove-output"]
#| label: cell-sft
fig, axes = plt.subplots(1, 3, figsize=(15, 4))
if len(sft_models):
    avg = post_training.sft_average(bench)
    for protocol, c in (("Raw", "tab:gray"), ("Last4", "tab:red")):
        a = avg.xs(protocol, level="protocol")
        axes[0].plot(a.index, a["mean"], "o-", c=c, label=protocol)
        axes[0].fill_between(a.index, a["min"], a["max"], color=c, alpha=0.2)
    benches = [c for c in sft_models.columns if c not in ("average", "benchmarks")]
    per_b = sft_models.groupby(["dl", "protocol"])[benches].mean()
    for j, bench_name in enumerate(benches):
        for protocol, ls in (("Raw", "--"), ("Last4", "-")):
            s_ = per_b.xs(protocol, level="protocol")[bench_name]
            axes[1].plot(s_.index, s_, ls, marker="o", c=f"C{j}", label=f"{bench_name} {protocol}")
    if len(sft_models_2x):
        a2 = sft_models_2x.groupby(["dl", "protocol"])["average"].mean()
        for protocol, c in (("Raw", "tab:gray"), ("Last4", "tab:red")):
            axes[2].plot(a2.xs(protocol, level="protocol").index, a2.xs(protocol, level="protocol"), "o-", c=c,
                         label=protocol)
    for ax in axes:
        ax.legend(fontsize=7)
else:
    for ax in axes:
        ax.text(0.5, 0.5, "no benchmark task fits\nthis budget's SFT context", ha="center", transform=ax.transAxes)
axes[0].set(xlabel="Dl / N of the starting point", ylabel="benchmark average (x100)",
            title="Fig. 8b: after SFT (seed mean, min-max band)")
axes[1].set(xlabel="Dl / N of the starting point", ylabel="score (x100)", title="Fig. 14: per benchmark (seed mean)")
axes[2].set(xlabel="Dl / N of the starting point", ylabel="benchmark average (x100)", title="Fig. 15: 2x SFT budget, one seed")
ch.save_figure(fig, "fig08b_sft_benchmarks", runs=sft_runs)

# %% [markdown]
# :::{figure} #cell-sft
# :label: fig-sft
# Long-context SFT from every starting point of the S5 trajectory, Raw and Last4: the
# equal-weight benchmark average with the min-max range over three data seeds (left,
# Fig. 8b), each benchmark (middle, Fig. 14) and the doubled SFT budget with one seed
# (right, Fig. 15). Benchmarks whose prompts do not fit the SFT context are left out of the
# average; the table above lists them.
# :::
#
# What the two later stages show at this budget, next to the paper:

# %%
ch.markdown(downstream_findings.post_training_findings(ext_suite, ruler_ext, ext_len, bench_suite, sft_models,
                                                      b.ruler_len or b.long_seq_len))

# %% [markdown]
# ## Table 14: does merging's advantage survive?
#
# Raw and Last4 means over the starting points, and Delta = Last4 - Raw, at every stage:
# LCCP (LongPPL: lower is better; RULER: higher is better), after the 4x extension, and
# after SFT at both budgets (higher is better). The second table gives Delta at each point.

# %%
longppl = experiments.trajectory_points(ev, run, points, b.s5_last4_gap)
sft_frame = sft_models.reset_index() if len(sft_models) else None
sft_2x_frame = sft_models_2x.reset_index() if len(sft_models_2x) else None
t14 = downstream.table14(longppl, ruler, ruler_ext, sft_frame, sft_2x_frame)
ch.save_table(t14, "table14", runs=[run])
t14_points = downstream.table14_by_point(longppl, ruler, ruler_ext, sft_frame, sft_2x_frame)
ch.save_table(t14_points, "table14_by_point", runs=[run])
t14.round(3)

# %% [markdown]
# Each later stage's Last4 − Raw is a mean over cells (RULER: each task at each starting point;
# the SFT benchmarks: each benchmark at each point and data seed). Resampling those cells in pairs
# gives its sampling error: a difference whose interval holds 0 is within noise.

# %%
ch.verdict("§5.2-5.3, Table 14")
ch.table14_noise().round(3)

# %% [markdown]
# ## What we see

# %%
ch.markdown(downstream_findings.downstream_findings(suite, ruler, heads, t14, length))

# %% [markdown]
# The scorecard's verdict on each of this chapter's claims, from the tables above:

# %%
for where in ("§5.1, Fig. 7", "App. D.3, Fig. 18"):
    ch.verdict(where)

# %%
ch.done()
