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
# # 12. Designing the toy (2): protocols and needles on the design ladder
#
# *Appendix to chapters 4 and 5. It trains nothing: it reads the probes' records in
# `data/probes/` and the tables chapter 5 saved.*
#
# Chapter 4's protocol claims and chapter 5's needle trend depend on where the toy's LCCP sits:
# still making fast progress (where a decay costs more than it removes noise), or near its
# noise floor (where the paper's decay and average pay). The probes below measure that, on the
# designs of [appendix A](11_toy_design.ipynb)'s ladder, and what makes the S5 models answer a
# needle at all.

# %% tags=["parameters"]
budget = "toy"  # smoke | toy | full
seed = 0
run_root = ""  # empty: the repository runs/ folder (or $NBLIB_RUN_ROOT)
budget_file = ""  # a TOML budget file, a base budget and its overrides (README, Your own data); empty: none
scale = "S5"  # the scale of chapter 4's long trajectory, whose needles chapter 5 reads

# %%
import dataclasses

import pandas as pd
from IPython.display import display

from nblib.book.chapter import Chapter
from nblib.chapters import budget_words
from nblib.chapters.appendix import grid_ladder_findings, probe_findings
from nblib.chapters.figures import figures_root
from nblib.lccp import downstream, experiments, grid
from nblib.probes import record_path, records

ch = Chapter("12_toy_ladders", budget=budget, budget_file=budget_file, seed=seed, run_root=run_root, scale=scale,
             allowed_scales=("S5",))
b = ch.budget
run = ch.store.run(grid.long_trajectory(b, scale))  # chapter 4's trajectory, named, not trained

# %% [markdown]
# ## The protocols past the grid
#
# At toy, the grids with a KV head per query head (designs I-V) have Linear-Decay trailing
# Constant-Raw at S4 across the grid's $D_l$: the toy's LCCP is progress-limited there, so an
# LR decay gives up more progress than it removes noise, and the average of the last four
# checkpoints trails the newest. Fewer LCCP tokens a step (designs N, Q, R: 4, 2, 1 x 1,024)
# move the toy toward the paper's noise-limited regime (Last4 <= Raw rises; appendix A's
# ladder), but Linear-Decay still trails Constant at S4 on every design.
#
# ### Where would Linear-Decay catch up?
#
# If the toy's LCCP is progress-limited on the grid's
# $D_l$, a decayed run should catch up with the constant one further out, where progress slows
# and the iterate's noise is what is left. The probe `protocol_horizon` measures it past the
# grid: Linear-Decay runs to each $D_l$ against one Constant trajectory scored Raw and Last4 at
# the same $D_l$, from the largest $D_s$ (`python -m nblib.probes.design_probe --budget-file
# data/probes/grid_designs/R.toml protocol_horizon --scales S4 S5 --dls 30 60 120 --spacings
# 2 4`; records in `toy_protocol_horizon.jsonl`, one seed).

# %%
horizon_path = record_path("toy_protocol_horizon")
horizon = experiments.protocol_horizon_table(records("toy_protocol_horizon")) if horizon_path.exists() else None
if horizon is not None and len(horizon):
    ch.save_table(horizon, "protocol_horizon")
    display(horizon.round(3))
    ch.markdown(probe_findings.protocol_horizon_findings(horizon))
else:
    print(f"no records at {horizon_path}")

# %% [markdown]
# On design R, Linear-Decay trails Constant-Raw at $D_l$ = 30 and 60 N(S1) at S4 and S5 and is
# the best of the three at 120: the toy's grid ($D_l$ = 10-30) sits in the progress-limited
# regime, and the paper's order of LD and Raw arrives near 120 N(S1). With the budget's 1 N
# spacing, Last4 trails both Raw and LD at 60-120 on these single-seed points: four neighbouring
# checkpoints share most of their noise at one sequence a step. Spaced 4 N apart (App. B.1's
# ablation, `--spacings 2 4`), Last4 is the lowest of all at every point, below LD at 120 too.
# So at toy the spacing decides Last4 against Raw, and the grid's $D_l$ decides LD against both.

# %% [markdown]
# ### The LCCP rate on the book's grid
#
# Designs W, X and Y are the book's grid with LCCP at 15%, 20% and 30% of the short stage's LR
# (the paper's 10%, App. A.3), and Z is Y with 2 x 1,024 tokens an LCCP step instead of 4 x
# 1,024; their Linear-Decay gaps are rows of the table above. A higher rate, and a noisier
# step, reach the noise floor sooner, which is where a decay and an average pay; neither may
# bring back the erosion of S5's trajectory. Below, S5's Constant trajectory of each design,
# scored alone (`protocol_horizon --scales S5 --no-ld`; records `toy_rate_trajectory.jsonl`).

# %%
rate_path = record_path("toy_rate_trajectory")
if rate_path.exists():
    rate_traj = experiments.rate_trajectory_table(records("toy_rate_trajectory"))
    ch.save_table(rate_traj, "rate_trajectory")
    display(rate_traj.round(3))
else:
    print(f"no records at {rate_path}")

# %% [markdown]
# ### Past the turn, run whole (design Z3)
#
# Z puts the turn near $D_l$ = 40 N(S1) at S4. Design Z3 is Z on a grid past it: $D_l$ = 40 /
# 60 / 80 N(S1) for chapter 3's Linear-Decay runs and chapter 4's Constant runs alike, the same
# $D_s$, Last4 at the paper's 1 N(S1) spacing (`data/probes/grid_designs/Z3.toml`, chapters 3-5
# run whole on the book's short stages). Below, its row of
# [appendix A](11_toy_design.ipynb)'s ladder against the book's grid, with each target.

# %%
grid_ladder = grid_ladder_findings.grid_ladder_table(records("toy_grid_ladder"))
for past_turn in ("Z3", "Z4"):
    if past_turn in set(grid_ladder.design):
        ch.markdown(f"**{past_turn}**\n\n" + grid_ladder_findings.past_turn_findings(grid_ladder, past_turn))
    else:
        print(f"no ladder row for design {past_turn} (python -m nblib.probes grid_ladder)")

# %% [markdown]
# Past the turn the toy comes close to the paper's protocol claims: Last4 near Linear-Decay
# (CCC) and at or below Raw on most points. It loses what the book's grid has: LongPPL
# flattens in $D_l$ there, so the held-out scale's points span much less (the spread above),
# and the held-out $R^2$ of both laws falls with the spread it has to explain. On this toy the
# two halves of the paper's Part 1 sit in different regimes of $D_l$: the law in the
# progress-limited one, the protocols in the noise-limited one. Z4 is Z3 on the ends of the
# paper's $D_s$ range (90 / 270 / 450 N(S1)): the wider $D_s$ axis widens the held-out spread
# and brings S4's fits back, while the short stages at $D_s$ = 90, far from trained at S3 and
# S4, put those scales above S2 and cost chapter 4's CCC.

# %% [markdown]
# ### The spacing on the grid (designs U and T)
#
# The budget field `last4_spacing` sets Last4's
# spacing for the grid, the S5 trajectory and chapter 5's starts. U and T are R's runs merged
# 2 N and 3 N(S1) apart (appendix A's ladder; R re-measured on the same reference for the
# comparison). The wider window lowers S5's trajectory at its end (Last4 at 120 N(S1): 4.77,
# 4.53, 4.28) and Last4 at S4's $D_l$ = 30. At $D_l$ = 10 it reaches back to LCCP's first
# steps: there T's Last4 is 7.63 against Linear-Decay's 7.00 and Raw's 6.47. T's CCC of 0.80, with
# a mean gap to Linear-Decay of 0.00, is that excess at 10 offsetting the shortfall at 20-30.
# Last4 <= Raw falls to 76% on U and 39% on T, against 81% on R. No spacing brings Last4 onto
# Linear-Decay while Linear-Decay trails Raw (S4 means 6.40 against 6.07 on all three). Only a
# grid whose $D_l$ reaches the horizon above, near 120 N(S1), would.

# %% [markdown]
# ## Which models answer the needles? A ladder over the project's models that copy
#
# A probe (`python -m nblib.probes ruler_copy`) runs both forms, RULER as written and the
# code form, on the project's models that copy a random segment: appendix A's d64 LCCP rung
# (copying at its 128-token short context, continued at 1,024 tokens) at each LCCP
# checkpoint, and Part 2's Models A and B and the all-global control (gains of 1.4-3.2 nats
# at L/2), with Model B's and the control's YaRN x4 fine-tunes at 4x their context. A third
# run scores the code form along Part 2's training-length ladder (chapter 6): each model
# after 1/8, 1/4, 1/2 and all of its tokens.

# %%
probe_path = record_path("toy_ruler_copy_probe")
ruler_probe = None
if probe_path.exists():
    probe = pd.read_json(probe_path, lines=True)
    probe["format"] = probe["format"].fillna("ruler") if "format" in probe else "ruler"
    probe_rows = [{"format": r["format"], "probe": r["name"], "model": r["model"], "width": r["d"],
                   "trained at": r["train_len"], "samples": r["samples"], "RULER length": int(n),
                   "single-needle mean": r["single_needle_mean"][n]}
                  for _, r in probe.iterrows() for n in r["ruler"]]
    ruler_probe = pd.DataFrame(probe_rows).drop_duplicates(["format", "probe", "model", "RULER length"], keep="last")
    display(ruler_probe.pivot_table(index=["probe", "model", "RULER length"], columns="format",
                                    values="single-needle mean", sort=False).round(1))
else:
    print(f"no probe records at {probe_path}")

# %%
# chapter 5's code-form needles on the book's S5 trajectory, from its saved table
code_needles_csv = figures_root(b.name) / "05_downstream" / "code_needles.csv"
code_needles = pd.read_csv(code_needles_csv) if code_needles_csv.is_file() else None
if code_needles is not None:
    ch.markdown(probe_findings.code_needle_findings(code_needles, ruler_probe))
else:
    print(f"no {code_needles_csv}: run chapter 5 first")

# %% [markdown]
# The code form moves the question from "can it read English" to "can it retrieve". The
# bullets above say which models answer, from the numbers of this run. Copying is necessary
# and not sufficient: the S5 models copy a random segment from twice the short context back
# ([chapter 3](03_scaling_law.ipynb)'s `copy_gain.csv`), but a needle asks for a match on a
# key name several tokens long, among many assignments with the same shape, where a random
# segment matches on every token.

# %% [markdown]
# ## What would make S5 answer? The levers, measured
#
# The code form removes English; it does not remove the competition. A needle asks the model
# to find `magic_number_{key} =` among the haystack's assignments and copy what follows. A
# 2-layer model with smeared keys matches one token back: from the final ` =`, its induction
# head can attend to every token that follows an ` =`, and a Python haystack has many. The
# ladder below (`python -m nblib.probes code_needle_levers`) changes one thing at a time and keeps
# RULER's sizing, depths and `string_match_all` (`code_niah.make_task`'s `haystack_form`,
# `key_form` and `value_form`; RULER's values unless the form says `short`):
#
# - **comments**: every haystack line a comment (RULER's own noise sentences for
#   `niah_single_1_code`, the held-out files' lines commented out for the others);
# - **prose**: as comments, with every line holding an `=` dropped, so the needle is the only
#   assignment in the prompt;
# - **word key**: the key one token that is never assigned in the haystack (`{key} = ...`), so
#   the key and ` =` together occur only in the needle;
# - **short values** (`value_form`): values of at most two pieces, generation stopped two
#   tokens past them, each prompt scored against its control without the needle line;
# - **LCCP tokens**: the first and the last trajectory point, Raw and Last4.
#
# Besides RULER's score it records two teacher-forced measures that move before a needle is
# answered: the needle gain (the value's log-probability per token with the needle in the
# prompt minus without it) and how often the value's first token is the model's argmax.

# %%
lever_path = record_path("toy_code_needle_levers")
lever_records = pd.read_json(lever_path, lines=True) if lever_path.exists() else pd.DataFrame({"run": []})
# this trajectory's records, and its deeper variants' (the model lever); the levers were
# measured on the fp32 twin of a trajectory the budget trains in bf16 (`long_precision`)
lever_records = downstream.needle_lever_records(lever_records, b, scale)
if not len(lever_records) and b.long_precision != "fp32":
    fp32_twin = dataclasses.replace(b, long_precision="fp32")
    lever_records = downstream.needle_lever_records(pd.read_json(lever_path, lines=True) if lever_path.exists()
                                                    else pd.DataFrame({"run": []}), fp32_twin, scale)
    if len(lever_records):
        print(f"the levers below were measured on this trajectory trained in fp32 "
              f"({grid.long_trajectory(fp32_twin, scale).hash}); the book's trains LCCP in {b.long_precision}")
if len(lever_records):
    levers = downstream.needle_lever_table(lever_records)
    ch.save_table(levers, "code_needle_levers", runs=[run],
                  extra={"lever runs": sorted(set(lever_records["run"]) - {run.hash})})
    display(levers.round(3))
    ch.markdown(probe_findings.needle_lever_findings(levers))
else:
    print(f"no lever records for this trajectory ({run.hash}) in {lever_path}; "
          f"run python -m nblib.probes code_needle_levers after chapter 4")

# %% [markdown]
# ## The needles on the trajectories of the design ladder
#
# The same probe reads the S5 trajectory of any design of appendix A's ladder (`python -m
# nblib.probes.design_needles --budget-file data/probes/grid_designs/X.toml`): designs whose
# Constant LCCP keeps improving LongPPL to the end of the trajectory, and F, where it erodes. The rows
# below are those records (`code_needle_designs.csv`), the mean over the three single needles,
# with Fig. 18's best retrieval head on `niah_single_2_code`'s prompts at each point.

# %%
all_lever_records = pd.read_json(lever_path, lines=True) if lever_path.exists() else pd.DataFrame()
needle_designs = downstream.needle_design_table(all_lever_records)
if len(needle_designs):
    ch.save_table(needle_designs, "code_needle_designs")
    display(needle_designs.round(3))
    ch.markdown(probe_findings.needle_design_findings(needle_designs))
else:
    print(f"no records of a ladder design in {lever_path}")

# %% [markdown]
# ## Chapter 5 run whole on the ladder's trajectories
#
# The rows above probe a few points. Below, chapter 5 ran whole on each design's S5
# trajectory (`python -m nblib.book run --budget-file data/probes/grid_designs/X.toml --chapters
# 05_downstream`), and `python -m nblib.probes needle_ladder` read its tables into one row per
# design (`toy_needle_ladder.csv`): F's trajectory, and the ladder's designs whose
# Constant LCCP keeps improving LongPPL to Dl = 120 N(S1). Each row is held to the targets
# for §5.1's trend at toy scale:
# - Last4's per-piece hit rate and needle gain rise along the trajectory (Spearman ρ ≥ 0.8
#   against Dl).
# - Raw and Last4 score at least 20 at the last point, and at least 10 above the control.
# - The mean score rises from the first point to the last.
# - The needles score above 0 after the 4x extension.
# - A retrieval head above 0.1 exists at the last point, and Table 14 has all five rows.
#
# The grid ladder's S5 LongPPL ρ and chapter 3's held-out R² sit beside each row: they show
# what the design costs the other chapters.

# %%
needle_ladder = records("toy_needle_ladder")
grid_cols = ["S5 Last4 rho(Dl, LongPPL)", "S1-S3 -> S4 R²", "S1-S4 -> S5 R²"]
needle_ladder = needle_ladder.merge(records("toy_grid_ladder").rename(columns={"design": "grid row"})
                                    [["grid row", *grid_cols]], on="grid row", how="left")
display(needle_ladder.drop(columns=["code", "measured"]).set_index("design"))
ch.markdown(probe_findings.needle_ladder_findings(needle_ladder))

# %% [markdown]
# What the ladder says about §5.1 at toy scale: the trend needs a trajectory that keeps
# improving. On F's trajectory, whose LongPPL turns up after its minimum, the needle measures
# do not rise and the scores stay at the floor. On the designs whose LongPPL falls to the end,
# the needle gain rises with Dl and retrieval heads above 0.9 form. How far the scores go
# depends on the S5 model's width: K (the book's d128 S5 with a KV head per query head) meets
# every target but breaks chapter 3's law; N keeps the law with a d160 S5 and reads the
# needles at about half K's score; V compresses N's ladder to a d128 S5, keeps the law, and
# reads them as K does (the design table above, with 100 prompts per needle and binomial
# standard errors). The book's grid descends from V, with its trajectory carried to the point
# where its needles were read best ([chapter 5](05_downstream.ipynb) scores them there):

# %%
ch.markdown(budget_words.book_grid_words(records("toy_grid_ladder"), origin="V"))

# %% [markdown]
# With RULER's values, S5 reads the needle: with it in the prompt, every value token is more
# likely by most of a nat or more, in every form, and fewer competing assignments help the
# first token. What S5 does not do is copy the rest: a 7-digit value is seven or eight pieces
# of the 1,024-entry BPE (` `, `8`, `4`, ...), each of which follows many other tokens in the
# prompt, so a one-token-back match loses the thread after the first piece and the model goes
# on with the haystack's own text. `string_match_all` needs the whole value. That is why this
# budget's needles carry short values (the value lever above: `code:magic:short` and the other
# forms with `short`), and why the ladder of trajectories matters: on F's eroding
# trajectory the needle gain and the first-token hit rate fall with more LCCP tokens, as S5's
# LongPPL rises after its minimum,
# while on the ladder's designs that keep improving they rise (the design rows above).
#
# **The model lever: depth.** In the probe rows above, Part 2's Model B (four layers, Gemma
# 3-style) answers some code-form needles at its context and Model A of the same depth none.
# The rows at 4 layers are S5 with four layers and everything else the grid's (width, heads,
# smeared keys, $D_s$ = 270 N(S1), Constant LCCP at the grid's rate to $D_l$ = 30 N(S1), before
# the 2-layer trajectory's LongPPL minimum), trained by the probe (`--layers 4`) into the
# store under an identity of its own. Depth keeps the needle gain from falling over $D_l$ = 10-30
# and, with the prose haystack and a one-token key, makes the first value token the argmax on
# about half the prompts; it still copies no whole value, so every score stays 0. The value is
# where it fails: after the first piece the model needs to match on the value's own earlier
# pieces, and every piece follows many other tokens in the prompt.

# %%
ch.done()
