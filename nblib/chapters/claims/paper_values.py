"""Numbers the papers publish, quoted with their source, for side-by-side comparison.

These are known answers, never used as results: every chapter computes its own numbers
from runs and prints the paper's next to them.
"""

# LCCP paper, App. A.2 Table 3 (Linear-Decay) and Table 4 (Constant-Last4):
# variant -> (S4 R², S4 MAPE %, S5 R², S5 MAPE %), in log(LongPPL) space.
TABLE3_LD = {
    "no_offset": (0.7995, 3.62, -0.1031, 9.05),
    "nonneg_offset": (0.7995, 3.62, -0.1031, 9.05),
    "additive": (0.9663, 1.43, 0.9516, 1.71),
    "combined_budget": (0.8935, 2.53, 0.8494, 2.40),
    "effective_data": (0.9079, 2.14, 0.8280, 2.94),
    "scale_dependent_effective_data": (0.0980, 7.68, 0.8346, 3.19),
    "powered_pair_N_Ds": (0.5311, 5.44, 0.7990, 2.82),
    "powered_pair_N_Dl": (0.4370, 6.37, 0.4530, 5.22),
    "powered_pair_Ds_Dl": (0.7984, 3.58, 0.9488, 1.57),
    "cpt_interaction": (0.7557, 4.14, 0.7163, 3.50),
}
TABLE4_CL4 = {
    "no_offset": (0.9354, 1.89, -4.0917, 11.01),
    "nonneg_offset": (0.9354, 1.89, -4.0917, 11.01),
    "additive": (0.9747, 1.08, 0.9718, 0.66),
    "combined_budget": (0.8901, 1.95, 0.1388, 4.02),
    "effective_data": (0.9155, 1.46, 0.7943, 1.49),
    "scale_dependent_effective_data": (0.4727, 5.45, -0.7878, 6.20),
    "powered_pair_N_Ds": (0.8190, 3.20, -0.3086, 5.49),
    "powered_pair_N_Dl": (0.7268, 4.19, -2.3259, 8.86),
    "powered_pair_Ds_Dl": (0.9454, 1.61, 0.0805, 4.58),
    "cpt_interaction": (0.9537, 1.59, -0.2800, 5.34),
}
# App. A.2: fitted free offsets C (S1-S3 fit, S1-S4 fit).
OFFSET_C = {"LD": (-0.60, -0.82), "CL4": (-0.71, -0.61)}
# App. A.2 / Fig. 9: Ds = Dl zero crossing at N = 10B, tokens per stage.
ZERO_CROSSING_10B = {"LD": 11.0e12, "CL4": 29.5e12}
# App. A.1 / Table 2: share of evaluated tokens that are key tokens.
KEY_TOKEN_PCT = {"long": 1.42, "short": 25.20}
# App. B: LongPPL of observation rules on the S4 (Ds = 450N, Dl = 50N) pool.
FIG4A_LONGPPL = {"raw": 3.6233, "ties_0.5": 3.7950, "dare_0.5": 3.5217, "one_sqrt": 3.4724, "ema_0.9": 3.4720}
# App. B.1 / Table 12: mean LongPPL over eleven targets, Raw vs Last4 (about 2.20 for every spacing).
TABLE12_MEAN_LONGPPL = {"raw": 2.284, "last4": 2.20}
# App. D.1: elasticity ratio R(Dl) along the S5 trajectory.
FIG17_RATIO = {"5N": 3.35, "120N": 2.22}
# §3.2: held-out-scale fit quality of Eq. 1 on Linear-Decay data.
HELDOUT_CLAIM = {"r2_min": 0.95, "mape_max_pct": 2.0}

# Gemma blog, "How each model represents position" and its appendix (h = 64, L = 1024):
# band groups; slow-band weight of Model B's heads; Model A's learned table against RoPE.
BLOG_BAND_GROUPS = {"fast": 6, "middle": 12, "slow": 14, "complete a turn": 18}
BLOG_SLOW_WEIGHT = {"median": 0.53, "even": 14 / 32, "max": 0.84, "min": 0.42, "above_75pct": 5}
BLOG_POSITION_TABLE = {"r2": 0.71, "sim_at_10": 0.91, "negative_by": 500, "rope_sim_at_10": 0.66,
                       "rope_sim_at_end": 0.2}

# Gemma blog, "Extending Model B's context ... with YaRN" (s = 4, L = 1024, 500 pages):
# perplexity of the whole 4096-token page and of its first 1024 tokens; intervals of the
# two stated differences; share of the fine-tune's gain after 25 of 200 steps.
BLOG_YARN = {"page": {"plain RoPE": 37.7, "zero-shot YaRN": 23.2, "YaRN fine-tuned": 21.0},
             "first L": {"plain RoPE": 20.6, "zero-shot YaRN": 22.4, "YaRN fine-tuned": 20.5},
             "plain_minus_zero": (14.6, 14.1, 15.1), "zero_minus_ft": (2.2, 2.1, 2.3),
             "gain_share_after_first_snapshot": 0.77, "loss_jump": (3.0, 4.2)}

# Gemma blog, "Visualizing attention" and after (L = 1024, W = 512): mean attention distance;
# sink shares; induction at 256 and 768 tokens back; token-level KL(A||B).
BLOG_ATTENTION = {"distance": {"A": 132, "B": 81}, "first_position_max": {"A": 0.13, "B": 0.0},
                  "separator_max": {"A": 0.29, "B": 0.11},
                  "induction": {("A", 256): (0.93, 1.6), ("B", 256): (0.90, 6.1), ("A", 768): (0.90, 3.0),
                                ("B", 768): (0.05, 12.3)}, "first_copy_loss": 13.3,
                  "kl": {"mean": 0.29, "median": 0.21, "share > 1 nat": 0.03, "share > 3 nats": 0.001}}

# LCCP paper, App. C.1 (Constant-Last4 at 5N -> 120N, RULER-32K), App. D.2 Table 14 text
# (Last4 - Raw after later stages) and App. D.3 (retrieval heads above 0.1: 10 -> 13-14).
RULER_SUBTASK_ENDPOINTS = {"niah_multikey_2": (51.20, 71.20), "niah_multivalue": (10.20, 28.75),
                           "niah_multiquery": (18.75, 45.00)}
# App. C.2 (Fig. 13): RULER-128K after the extension, first (10N) and last (120N) starting point
RULER_128K_SUBTASKS = {"niah_multikey_2": {"Raw": (5.0, 20.0), "Last4": (8.0, 25.0)},
                       "niah_multiquery": {"Raw": (23.00, 37.50), "Last4": (26.75, 36.25)}}
# App. C.3 (Fig. 15): four-benchmark average after the doubled (4.20B) SFT, from 10N to 120N
FIG15_AVERAGE = {"Raw": (26.40, 29.49), "Last4": (26.49, 29.97)}
TABLE14_LATER = {"RULER-128K after extension": 0.60, "SFT 2.10B": 0.51, "SFT 4.20B": -0.16, "agentic SFT": 0.15}
RETRIEVAL_HEADS = {"count_start": 10, "count_end": (13, 14), "threshold": 0.1}
