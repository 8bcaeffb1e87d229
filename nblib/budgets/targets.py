"""Every threshold the book judges a claim by, in one place.

The scorecard (`nblib.chapters.claims`), the chapters' verdict sentences (`nblib.chapters.part1`'s
findings, `nblib.chapters.part2.blog_findings`) and the appendix's ladders (`nblib.probes.grid_ladder`,
`nblib.probes.needle_ladder`, `nblib.chapters.appendix.grid_ladder_findings`) all read them from
here, so a claim has one target wherever it is judged. Each value says what it is a threshold of; where a
source gives the number, the source is named. Thresholds are numbers, not code: this module
imports nothing.

The scaling-law fit's search bounds are frozen beside them (`EXP_FLOOR`, `EXP_CEILING`): a
rule that asks for interior exponents must not pass because the bounds moved.
"""

# --- Part 1 (the LCCP paper) ---------------------------------------------------------------
# §3.3, Fig. 3 and §4.2, Table 4: Eq. 1 fitted on the smaller scales predicts the held-out one.
LAW_R2 = 0.85  # held-out R² on every split (the paper: 0.95-0.97)
LAW_MAX_REFITS_AT_BOUND = 25  # of 100 bootstrap refits with an exponent on a bound of the search
EXP_FLOOR = 1e-3  # the exponents' search floor (nblib.lccp.scaling.profile.EXP_FLOOR), frozen
EXP_CEILING = 3.0  # the exponents' search ceiling (nblib.lccp.scaling.laws._exp), frozen

# §4.1, Fig. 4b: Constant-Last4 against Linear-Decay across S4 (Lin's CCC on LongPPL).
CCC = 0.9  # the paper: 0.98
CCC_PARTLY = 0.5  # and the mean gap to Linear-Decay within the LongPPL seed spread

# §4.1, Fig. 4a: Last4 (or Linear-Decay) at or below Constant-Raw, share of S1-S4 points.
AT_OR_BELOW_RAW_PCT = 85.0
MAJORITY_PCT = 50.0

# Title claim, §4.2: S5's Constant-Last4 LongPPL keeps falling with Dl (Spearman ρ, Dl ≥ 10).
S5_RHO = -0.9

# §4.3, Fig. 6: Eq. 2 on a prefix forecasts the trajectory's end (|error| in %).
PREFIX_ERROR_PCT = 5.0
PREFIX_ERROR_PARTLY_PCT = 20.0

# App. D.1, Fig. 17: elasticity ratio R of LongPPL to ShortPPL at the trajectory's end.
ELASTICITY_RATIO = 2.0  # the paper's end: 2.22
ELASTICITY_RATIO_PARTLY = 1.0  # LongPPL improves faster than ShortPPL at all

# §5.1, Fig. 7 (code needles at toy): the rise with Dl and the score at the last point.
NEEDLE_RHO = 0.8  # Spearman ρ of per-piece hit rate and needle gain against Dl
NEEDLE_SCORE = 15.0  # needle score (0-100) of Raw and of Last4 at the trajectory's last point
NEEDLE_ABOVE_CONTROL = 10.0  # ... and that far above the no-needle control's score

# App. D.3, Fig. 18: retrieval heads form. The tracked heads' mean retrieval score rises with Dl.
RETRIEVAL_RHO = 0.8  # Spearman ρ of the tracked heads' mean score against Dl
RETRIEVAL_HEAD = 0.1  # a head with a retrieval score above this is a retrieval head (the paper's)

# §5.2-5.3, Table 14: every stage of the table measured (the appendix's needle ladder).
TABLE14_ROWS = 5

# The noise a "within noise" verdict is read against: two-sided intervals at this level.
NOISE_LEVEL = 0.95

# --- Part 2 (the Gemma blog) ---------------------------------------------------------------
PAIR_TIE_NATS = 0.05  # Models A and B tie: both ends of B − A's 95% interval within this
PAIR_TIE_PARTLY_NATS = 0.2
KV_FORMULA_REL_ERROR = 0.0  # the KV cache holds exactly the bytes the formula counts
KV_FORMULA_REL_ERROR_PARTLY = 0.01
BLOG_FRACTION = 0.5  # the blog's effect sizes: "reproduced" at half the blog's effect or more
