"""The paper map: every equation, figure and table of both works, the function and the
chapter that produce it, and its status. The introduction chapter renders it whole, every row
(`paper_map_markdown`); tests/test_paper_map.py checks that every function named here exists
and every chapter named here is a notebook of the book.

Status vocabulary: "done" (the chapter regenerates it at every budget), "library" (the
function exists and is tested; no chapter shows it yet), "planned" (its chapter is a
placeholder), "not reproduced" (with the reason).
"""

from __future__ import annotations

import pandas as pd

W1 = "LCCP paper (Don't Stop LCCP Too Early)"
W2 = "Gemma blog (GPT-2 to Gemma 3, Part 2)"

# (work, item, what, function(s), chapter, status)
PAPER_MAP = [
    # --- the LCCP paper: equations --------------------------------------------------------------
    (W1, "Eq. 1", "additive two-stage law log(LongPPL) = A/N^α + Bs/Ds^βs + Bl/Dl^βl + C",
     "nblib.lccp.scaling.fit_additive_law", "03_scaling_law", "done"),
    (W1, "Eq. 2", "fixed-model law log(LongPPL) = Bl/Dl^βl + C'", "nblib.lccp.scaling.fit_fixed_model_law",
     "04_constant_last4", "done"),
    (W1, "Eq. 3", "weighted parameter average", "nblib.lccp.merge.weighted_average", "04_constant_last4", "done"),
    (W1, "Eq. 4", "LastM weights", "nblib.lccp.merge.last_m_merge", "04_constant_last4", "done"),
    (W1, "Eqs. 5-6", "1-Sqrt weights on actual iterations", "nblib.lccp.merge.one_sqrt_merge", "04_constant_last4", "done"),
    (W1, "Eq. 7", "post-hoc EMA weights", "nblib.lccp.merge.ema_merge", "04_constant_last4", "done"),
    (W1, "§3.1 LongPPL", "key tokens (loss_full < 2, Δ > 2) and LongPPL", "nblib.metrics.annotate; nblib.metrics.long_ppl",
     "02_setup", "done"),
    (W1, "§4.1 ShortPPL", "key tokens (loss_full < 2, Δ < 0) and ShortPPL", "nblib.metrics.short_ppl", "02_setup", "done"),
    (W1, "App. A.2 R², MAPE", "held-out metrics in log(LongPPL) space", "nblib.lccp.scaling.r2_log; nblib.lccp.scaling.mape_log",
     "03_scaling_law", "done"),
    (W1, "App. A.5 regulariser", "one-sided exponent penalty with slice-fit medians", "nblib.lccp.scaling.fit_law",
     "03_scaling_law", "done"),
    (W1, "App. A.5 fit", "Huber fit from a start grid, then a local optimiser; optima on a bound reported",
     "nblib.lccp.scaling.fit_law; nblib.lccp.scaling.profile.huber_regression; nblib.lccp.scaling.at_bound",
     "03_scaling_law", "done (the search is variable projection, beyond the paper; benchmarks/bench_fit.py)"),
    (W1, "App. B CCC", "Lin's concordance correlation coefficient", "nblib.stats.lins_ccc", "04_constant_last4", "done"),
    (W1, "App. B DARE, TIES", "task-vector merges", "nblib.lccp.merge.dare_merge; nblib.lccp.merge.ties_merge",
     "04_constant_last4", "done"),
    (W1, "App. D.1 e_M, R(Dl)", "log-scale elasticity and its ratio", "nblib.lccp.scaling.elasticity_ratio",
     "04_constant_last4", "done"),
    # --- the LCCP paper: figures ----------------------------------------------------------------
    (W1, "Fig. 1", "overview schematic", "-", "01_introduction", "not reproduced: a diagram, summarised in text"),
    (W1, "Fig. 2", "log(LongPPL) against Ds and Dl", "nblib.lccp.experiments.linear_decay_table", "03_scaling_law", "done"),
    (W1, "Fig. 3", "held-out parity plots S1-S3→S4, S1-S4→S5", "nblib.lccp.scaling.holdout_evals", "03_scaling_law", "done"),
    (W1, "Fig. 4a", "observation rules on one S4 trajectory", "nblib.lccp.experiments.observation_rules", "04_constant_last4", "done"),
    (W1, "Fig. 4b", "Raw, Last4, Linear-Decay across S4, with CCC", "nblib.lccp.experiments.protocol_agreement", "04_constant_last4",
     "done"),
    (W1, "Fig. 5", "Eq. 1 on Constant-Last4: S4 and the S5 trajectory", "nblib.lccp.scaling.holdout_eval",
     "04_constant_last4", "done"),
    (W1, "Fig. 6", "Eq. 2 prefix fits (20N, 40N, 60N)", "nblib.lccp.scaling.prefix_forecast", "04_constant_last4",
     "done"),
    (W1, "Fig. 7", "RULER (13 subtasks, offline) along the S5 trajectory, Raw vs Last4",
     "nblib.evals.ruler.make_task; nblib.lccp.downstream.ruler_along_trajectory", "05_downstream", "done"),
    (W1, "Fig. 8", "(a) RULER after 4x extension, (b) benchmark average after long-context SFT, 3 seeds; (c) agentic "
     "SFT not reproduced offline", "nblib.lccp.post_training.ruler_after; nblib.lccp.post_training.sft_average",
     "05_downstream", "done (a, b); (c) out of scope offline"),
    (W1, "Fig. 9", "zero contours of the S1-S4 fits", "nblib.lccp.scaling.zero_contour_ds_dl", "03_scaling_law", "done"),
    (W1, "Fig. 10", "checkpoint-weight profiles", "nblib.lccp.merge.last_m_weights; nblib.lccp.merge.ema_weights",
     "04_constant_last4", "done"),
    (W1, "Fig. 11", "Last4 spacing ablation", "nblib.lccp.experiments.spacing_ablation", "04_constant_last4", "done"),
    (W1, "Fig. 12", "RULER per subtask along the trajectory", "nblib.lccp.downstream.ruler_along_trajectory",
     "05_downstream", "done"),
    (W1, "Fig. 13", "RULER per subtask after 4x extension", "nblib.lccp.post_training.ruler_after", "05_downstream",
     "done"),
    (W1, "Fig. 14", "per-benchmark scores after SFT (offline LongBench/GraphWalks/LongReason/BABILong analogues)",
     "nblib.lccp.post_training.benchmarks_after; nblib.evals.long_benchmarks.make_task", "05_downstream", "done"),
    (W1, "Fig. 15", "doubled SFT budget, one seed", "nblib.lccp.post_training.sft_start_configs",
     "05_downstream", "done"),
    (W1, "Fig. 16", "GAIA and BFCL after agentic SFT", "-", "05_downstream",
     "not reproduced: needs live web agents and an LLM judge"),
    (W1, "Fig. 17", "elasticity ratio R(Dl)", "nblib.lccp.scaling.elasticity_ratio", "04_constant_last4", "done"),
    (W1, "Fig. 18", "retrieval-head score of the fixed heads and the count above 0.1",
     "nblib.metrics.attention_maps.retrieval_head_scores; nblib.lccp.downstream.retrieval_along_trajectory", "05_downstream", "done"),
    (W1, "RULER's single needles as code (beyond)", "niah_single_1-3 written in the code corpus's format (needle an "
     "assignment, answer prefix its left side) at the LCCP context and after 4x extension, with a probe ladder over "
     "models that copy, and a ladder of levers on S5 (comment and prose haystacks, a one-token key, values of at "
     "most two pieces, LCCP tokens) with a no-needle control, per-piece hits and teacher-forced needle gains along "
     "the trajectory (100 prompts per needle at its last point)", "nblib.evals.code_niah.make_task; "
     "nblib.evals.code_niah.needle_measures; nblib.lccp.downstream.needles_along_trajectory; "
     "nblib.lccp.downstream.code_needle_suites; nblib.lccp.post_training.needles_after", "05_downstream",
     "done: RULER's 7-digit values score 0 on the toy's S5 trajectory; short values are read (the scorecard "
     "gives the score at the trajectory's end)"),
    (W1, "Needle levers and the design ladder (beyond)", "which of the project's models answer a needle, the levers "
     "that make S5 answer, and chapter 5 run whole on every grid design's trajectory",
     "nblib.lccp.downstream.needle_lever_table; nblib.lccp.downstream.needle_design_table; "
     "nblib.probes.needle_ladder.needle_measures", "12_toy_ladders", "done: toy only"),
    (W1, "Protocol horizon (beyond)", "Linear-Decay against Constant Raw and Last4 past the grid's Dl, and Last4's "
     "spacing on the grid (designs R, U, T)", "nblib.lccp.experiments.protocol_horizon_table; "
     "nblib.chapters.appendix.probe_findings.protocol_horizon_findings", "12_toy_ladders", "done: toy only"),
    (W1, "Scorecard (beyond)", "every claim of both works: the source's number, the toy's from the build's figures, "
     "and a verdict by a rule per claim", "nblib.chapters.claims.scorecard.scorecard", "01_introduction",
     "done: book/scorecard.md, after chapter 1"),
    # --- the LCCP paper: tables -----------------------------------------------------------------
    (W1, "Table 1", "model configurations S1-S5", "nblib.lccp.experiments.model_table", "02_setup", "done"),
    (W1, "§3.1 model (toy departure)", "smeared keys (Olsson et al. 2022) in the toy and smoke Llama, with the "
     "plain-vs-smeared copy ablation at two widths and two seeds", "nblib.models.layers.smear_previous_key; "
     "nblib.budgets.llama_variant; nblib.chapters.appendix.toy_design.smear_ablation_summary", "02_setup",
     "done: toy and smoke only; `full` keeps the paper's Llama"),
    (W1, "§3.1 grid checks (beyond)", "does the grid show what the law needs: every endpoint's copy gain, the stable "
     "phase still learning by more than a two-seed spread, LongPPL/ShortPPL monotone in N, Ds, Dl, held-out R² "
     "with bootstrap intervals, the reference stronger past the local chunk",
     "nblib.lccp.diagnostics.copy_gain_table; nblib.lccp.diagnostics.stable_phase_table; "
     "nblib.lccp.diagnostics.monotonicity_table; nblib.lccp.scaling.holdout_r2_intervals; "
     "nblib.lccp.diagnostics.reference_margin", "03_scaling_law", "done"),
    (W1, "§3.1 toy departures", "where the toy departs from the paper, read from the budget",
     "nblib.chapters.budget_words.departures_markdown", "02_setup", "done"),
    (W1, "§3.1 toy grid design (beyond)", "each toy choice with its measurement: shapes, contexts, token unit, LR "
     "and batch, the LCCP LR, the grid designs tried and what erodes",
     "nblib.chapters.appendix.toy_design.grid_design_table; nblib.chapters.appendix.toy_design.lccp_lr_table; "
     "nblib.chapters.appendix.grid_ladder_findings.book_grid_findings", "11_toy_design",
     "done: toy only"),
    (W1, "Table 2", "test-set statistics", "nblib.metrics.testset_stats", "02_setup", "done"),
    (W1, "Table 3", "formula ablation on Linear-Decay data", "nblib.lccp.scaling.variant_ablation", "03_scaling_law", "done"),
    (W1, "Table 4", "formula ablation on Constant-Last4 data", "nblib.lccp.scaling.variant_ablation", "04_constant_last4",
     "done"),
    (W1, "Table 5", "short-context (WSD) configurations, realized Ds", "nblib.lccp.grid.short_stage", "02_setup", "done"),
    (W1, "Table 6", "Linear-Decay LCCP configurations, realized Dl", "nblib.lccp.grid.lccp_linear_decay", "02_setup",
     "done"),
    (W1, "Table 7", "Constant LCCP configurations", "nblib.lccp.grid.lccp_constant", "02_setup", "done"),
    (W1, "Table 8", "extension and SFT configurations (ours: Table 8's values are not in the text)",
     "nblib.lccp.post_training.extension_config; nblib.lccp.sft.sft_config", "05_downstream", "done"),
    (W1, "Table 9", "length-bucket mixture", "nblib.lccp.experiments.mixture_table", "02_setup", "done"),
    (W1, "Table 10", "SFT mixture (offline analogues of its task families)",
     "nblib.lccp.sft.build_sft_mixture; nblib.lccp.sft.mixture_summary", "05_downstream", "done"),
    (W1, "Table 11", "fitted parameters (LD and CL4)", "nblib.lccp.scaling.parameter_table", "03_scaling_law",
     "done"),
    (W1, "Table 12", "Last4 spacing means", "nblib.lccp.experiments.spacing_ablation", "04_constant_last4", "done"),
    (W1, "Table 13", "agentic context lengths", "-", "05_downstream", "not reproduced: needs live agent runs"),
    (W1, "Table 14", "Last4 - Raw across training stages: LCCP LongPPL and RULER, RULER after 4x extension, SFT "
     "at both budgets (agentic SFT out of scope)", "nblib.lccp.downstream.table14; nblib.lccp.downstream.table14_by_point",
     "05_downstream", "done"),
    # --- the Gemma blog --------------------------------------------------------------------------
    (W2, "Models A and B", "GPT-2 124M (124,439,808 params) and Gemma 3-style 113M (112,990,464), trained on one "
     "stream; toy: the same proportions", "nblib.gemma.pair.pair_configs; nblib.gemma.pair.train_pair; nblib.budgets.ModelPairSpec",
     "06_models_ab", "done"),
    (W2, "Parameter tables", "embedding vs non-embedding, by component", "nblib.gemma.pair.parameter_table", "06_models_ab",
     "done"),
    (W2, "Loss curves (Part 1)", "training and held-out loss of A and B; the tie, with a paired interval",
     "nblib.gemma.pair.loss_curves; nblib.stats.paired_bootstrap", "06_models_ab", "done"),
    (W2, "A/B gap vs training length (beyond)", "B - A held-out loss at several tokens per parameter (WSD decay "
     "branches of the pair's run), with paired intervals, a line in ln(D/N) and its value at the blog's 79",
     "nblib.gemma.pair.ladder_configs; nblib.gemma.training_length.gap_table; "
     "nblib.gemma.training_length.fit_gap_trend", "06_models_ab", "done"),
    (W2, "KV cache bytes", "2·n_kv·h·b·Σ T_l: 75.5 MB vs 11.8 MB, measured against the formula",
     "nblib.gemma.inference_cost.measured_cache_bytes; nblib.models.engine.kv_cache_bytes", "07_kv_cache", "done"),
    (W2, "KV decode path", "prefill then step; windowed layers keep W-1 past positions; greedy, top-k and nucleus "
     "sampling, seeded", "nblib.models.engine.generate; nblib.models.engine.sample_next", "07_kv_cache", "done"),
    (W2, "Decode/prefill benchmark table", "tokens/s with and without the cache, batch 1 and 8, vs transformers",
     "nblib.models.engine.prefill; nblib.models.engine.decode_step", "07_kv_cache", "done (benchmarks/bench_decode.py)"),
    (W2, "Decode step time plot", "step time against bytes read per step", "nblib.chapters.part2.blog_findings.decode_findings",
     "07_kv_cache", "done (benchmarks/bench_decode.py)"),
    (W2, "7B-class cache table", "cache per sequence at 8k/32k/128k", "nblib.gemma.inference_cost.kv_cache_table",
     "07_kv_cache", "done"),
    (W2, "FLOPs at long contexts", "forward FLOPs per token, 1k and 128k, attention share",
     "nblib.gemma.inference_cost.long_context_flops; nblib.models.base.DecoderLM.flops_breakdown", "07_kv_cache", "done"),
    (W2, "k̄_W", "average keys per query of a windowed layer", "nblib.gemma.inference_cost.mean_keys_table; "
     "nblib.models.layers.mean_keys", "07_kv_cache", "done"),
    (W2, "RoPE clocks", "wavelengths; bands that turn within the context; fast/middle/slow 6/12/14",
     "nblib.gemma.position.rope_bands", "08_position", "done"),
    (W2, "score(Δ) decomposition", "S_j(Δ) per band on held-out text, summing to the mean score",
     "nblib.gemma.position.band_scores; nblib.gemma.position.head_band_scores", "08_position", "done"),
    (W2, "Band heatmap", "q·k weight share per band and slow-band weight per head", "nblib.gemma.position.band_weights; "
     "nblib.gemma.position.slow_band_weight", "08_position", "done"),
    (W2, "Learned position table", "cosine similarity, s̄(Δ), R² against distance, PCs, RoPE's curve",
     "nblib.gemma.position.position_similarity; nblib.gemma.position.distance_r2; nblib.gemma.position.position_pcs; "
     "nblib.gemma.position.rope_similarity", "08_position", "done"),
    (W2, "YaRN", "inv_freq ramp and mscale = 0.1 ln s + 1; bands moved (trained vs stretched wavelengths)",
     "nblib.models.layers.yarn_inv_freq", "09_yarn", "done"),
    (W2, "YaRN fine-tune", "continue Model B with its optimizer state, no warmup, long pages only, snapshots",
     "nblib.gemma.extension.finetune_config; nblib.data.DocStartStream", "09_yarn", "done"),
    (W2, "YaRN perplexity", "ppl of the first L' tokens and loss by position: plain RoPE, zero-shot, fine-tuned",
     "nblib.gemma.extension.page_nll; nblib.gemma.extension.ppl_by_length; nblib.gemma.extension.loss_by_position", "09_yarn", "done"),
    (W2, "YaRN intervals", "paired bootstrap 95% intervals over pages for the stated differences",
     "nblib.gemma.extension.extension_intervals; nblib.stats.paired_bootstrap", "09_yarn", "done"),
    (W2, "RoPE breakdown past L (control)", "Model B and an all-global Model B on pages of 2sL: plain RoPE, "
     "zero-shot YaRN at s and 2s, fine-tuned; rise past L and its recovery with paired intervals",
     "nblib.gemma.pair.all_global_config; nblib.gemma.extension.breakdown_table; "
     "nblib.gemma.extension.breakdown_intervals", "09_yarn", "done (toy: see chapter 9 for whether it breaks)"),
    (W2, "RoPE breakdown vs training length (beyond)", "plain RoPE's ppl(sL)/ppl(L) of Model B's and the "
     "all-global control's shorter WSD budgets, with a line in ln(D/N) toward the blog's 79 tokens/param",
     "nblib.gemma.pair.ladder_configs; nblib.gemma.breakdown_length.breakdown_by_length; "
     "nblib.gemma.breakdown_length.breakdown_trend", "09_yarn", "done (toy: see chapter 9)"),
    (W2, "Snapshot curve", "whole-page and first-L ppl per fine-tune snapshot", "nblib.gemma.extension.page_nll_cached",
     "09_yarn", "done"),
    (W2, "Whole page vs last L (beyond)", "the blog's unrun check: last tokens scored with the whole page and "
     "with only the last L", "nblib.gemma.extension.whole_vs_window", "09_yarn", "done"),
    (W2, "Passkey retrieval (beyond)", "the YaRN paper's check the blog skipped, at depths across sL",
     "nblib.gemma.extension.passkey_prompts; nblib.gemma.extension.passkey_accuracy", "09_yarn", "done"),
    (W2, "Attention maps", "per-layer maps of the emoji prompt and its greedy continuation, legible tokens",
     "nblib.metrics.attention_maps.attention_probs; nblib.metrics.attention_maps.token_labels", "10_attention", "done"),
    (W2, "Attention distance and sinks", "distance, first-position share, separator share per head",
     "nblib.metrics.attention_maps.head_measures", "10_attention", "done"),
    (W2, "Sinks: data format and training length (beyond)", "the pair's training format against the blog's "
     "(separator, packing, cross-document attention) and the largest sink shares at each training length",
     "nblib.gemma.pair.data_format; nblib.metrics.attention_maps.sink_summary", "10_attention", "done"),
    (W2, "Induction heads", "scores inside and beyond B's window (256/768 at L=1024, scaled) and the repeat's loss",
     "nblib.metrics.attention_maps.induction_test; nblib.metrics.attention_maps.induction_scores", "10_attention", "done"),
    (W2, "Head ablation (beyond)", "zero the induction heads and measure the copy loss; a control set",
     "nblib.metrics.attention_maps.head_ablation; nblib.metrics.attention_maps.copy_loss", "10_attention", "done"),
    (W2, "Copy loss (toy check)", "random-segment copy gain and loss by position of the chapter 3 models",
     "nblib.metrics.probes.copy_gain_table; nblib.metrics.probes.context_use_table", "03_scaling_law", "done"),
    (W2, "KL disagreement", "token-level KL(A||B), its tail and the top disagreements in context",
     "nblib.metrics.attention_maps.disagreements; nblib.metrics.attention_maps.kl_divergence", "10_attention", "done"),
]

COLUMNS = ("work", "item", "what", "function", "chapter", "status")


def paper_map():
    """The paper map as a pandas DataFrame."""
    return pd.DataFrame(PAPER_MAP, columns=COLUMNS)


def _cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def paper_map_markdown(table: pd.DataFrame | None = None) -> str:
    """The whole paper map as one Markdown table, every row (no "..." as pandas' display
    shortens a long frame); `|` inside a cell is escaped."""
    t = paper_map() if table is None else table
    lines = ["| " + " | ".join(map(str, t.columns)) + " |", "|" + "---|" * len(t.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in t.itertuples(index=False)]
    return "\n".join(lines) + "\n"
