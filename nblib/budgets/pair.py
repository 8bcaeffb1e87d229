"""The Gemma blog's Models A and B at each budget (`ModelPairSpec`): the pair's shapes, its
token budget and optimisation, and chapter 9's YaRN fine-tune. `nblib.budgets` gives each
budget its pair through these builders."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ModelPairSpec:
    """The Gemma blog's Models A and B at one budget (Gemma blog, "The two models"; Part 1).

    Both train on the same token stream (same corpus, tokenizer, seed, batch and token
    budget), so any difference between them is the architecture. `model_a` holds
    `GPT2Config` fields, `model_b` `Gemma3Config` fields. `seq_len` is the training context
    L (the blog: 1024); Model B's window is L/2 in three layers of four, the fourth global
    and first in its group (layers 0, 4, 8, ...: the blog's "global layer 8" of twelve,
    `Gemma3Config.layer_pattern="blog"`).
    """

    model_a: dict
    model_b: dict
    seq_len: int
    n_tokens: int
    batch_size: int
    lr: float
    warmup_steps: int
    decay_frac: float  # WSD: the last fraction of steps decays to a tenth of lr
    n_checkpoints: int  # evenly spaced checkpoints kept for the loss curves and later chapters
    corpus: str
    tokenizer: str
    n_eval_windows: int  # held-out windows of L tokens behind the loss curves and the analyses
    # Chapter 9, YaRN (Gemma blog, "Extending Model B's context"): scale s, the fine-tune's
    # steps (tokens per step kept, sequences of s*L), its snapshot spacing, and the held-out
    # documents of at least s*L tokens it is scored on.
    yarn_factor: int = 4
    finetune_steps: int = 200
    # Chapter 6's training-length ladder: shorter WSD budgets as fractions of n_tokens, each a
    # decay branched from the pair's stable phase (nblib.gemma.training_length). At toy:
    # 0.8, 1.6 and 3.1 tokens per parameter of Model A beside the pair's 6.2.
    length_fractions: tuple = (0.125, 0.25, 0.5)
    # Chapter 9's all-global control (Model B with no window): a WSD run on this fraction of
    # n_tokens, and the shorter budgets of length_fractions below it as decay branches, so the
    # breakdown past L is read against training length. Toy trains it as long as the pair: at
    # half the tokens its page perplexity at 4L rose 1.12x over L, against 1.36x at full length
    # (the four-layer toy pair before issue 65).
    control_fraction: float = 1.0
    finetune_snapshot_every: int = 25
    n_long_docs: int = 500


def _pair_shapes(*, vocab_a: int, vocab_b: int, d: int, layers: int, heads: int, seq_len: int,
                 layer_pattern: str = "blog") -> tuple[dict, dict]:
    """Models A and B with the blog's proportions at width d: head size d/heads, MLP 4d (A)
    and GeGLU 8d/3 (B, rounded to a multiple of 8), GQA 4:1, window L/2 in 3 layers of 4,
    the global layer first in each group of four (`layer_pattern` "blog": layers 0, 4, 8, ...;
    "hf" puts it last, as transformers' Gemma 3 does)."""
    head_dim = d // heads
    a = dict(vocab_size=vocab_a, max_seq_len=seq_len, d_model=d, n_layers=layers, n_heads=heads)
    b = dict(vocab_size=vocab_b, d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=heads // 4,
             head_dim=head_dim, d_ff=8 * round(d / 3), max_seq_len=seq_len, window=seq_len // 2,
             layer_pattern=layer_pattern)
    return a, b


def _pair_full() -> ModelPairSpec:
    # The blog's exact models (GPT2Config.gpt2_124m, Gemma3Config.gemma3_113m: 124,439,808 and
    # 112,990,464 parameters), 9.8B FineWeb-Edu tokens with the GPT-2 tokenizer, 1024 context;
    # 512 x 1024 tokens per step gives ~18.7K steps, so the blog's 200-step YaRN fine-tune
    # is ~1% of pre-training, as it says.
    a, b = _pair_shapes(vocab_a=50257, vocab_b=50304, d=768, layers=12, heads=12, seq_len=1024)
    return ModelPairSpec(model_a=a, model_b=b, seq_len=1024, n_tokens=9_800_000_000, batch_size=512, lr=6e-4,
                         warmup_steps=700, decay_frac=0.2, n_checkpoints=20,
                         corpus="jsonl:data/fineweb-edu/train.jsonl", tokenizer="hf:data/tokenizer/gpt2.json",
                         n_eval_windows=64, finetune_steps=200, finetune_snapshot_every=25, n_long_docs=500)


def _pair_toy() -> ModelPairSpec:
    # The blog's shapes scaled down together: width 768 -> 80, 12 -> 8 layers (Model B: G L L
    # L G L L L, so a global layer follows local ones as the blog's layers 4 and 8 do), 12 -> 4
    # query heads over 1 key/value head (GQA 4:1), heads of 20 (10 RoPE bands instead of 32),
    # context 1024 -> 256 with the window at L/2 = 128. Until issue 65 the toy pair had 4
    # layers of width 128 (heads of 32) and Model B's one global layer last; eight layers at
    # width 80 cost 1.15-1.17x the four-layer pair's training step (A + B, the same 16 x 256
    # tokens, one thread, measured back to back on a loaded 2-core host), eight at 96 already
    # 1.39-1.46x, eight at 128 1.8-2.2x. Model A has 725,280 parameters (957,184 before), so
    # the 4.5M tokens are 6.2 per parameter of A (4.7 before).
    # 4.5M tokens (1,100 steps of 16 x 256), one thread per model. The probes behind the
    # training length were run on the four-layer pair (nblib.probes.pair, chapter 6): after
    # 600 steps Model B copied a repeated random segment (gain 1.8 nats at L/2) but Model A
    # did not (0.1); at 1,200 steps Model A did (2.3). Natural text alone suffices: no
    # synthetic repeats are mixed in.
    a, b = _pair_shapes(vocab_a=1024, vocab_b=1024, d=80, layers=8, heads=4, seq_len=256)
    return ModelPairSpec(model_a=a, model_b=b, seq_len=256, n_tokens=4_505_600, batch_size=16, lr=1e-2,
                         warmup_steps=50, decay_frac=0.2, n_checkpoints=8, corpus="python-stdlib",
                         tokenizer="bpe:stdlib-1024", n_eval_windows=64,
                         # 60 steps (5% of pre-training, the blog's 1% would be 11 steps) so the
                         # snapshot curve can show where the gain saturates; 97 held-out files
                         # have at least 4 x 256 + 1 tokens
                         finetune_steps=60, finetune_snapshot_every=10, n_long_docs=96)


def _pair_smoke() -> ModelPairSpec:
    # eight layers as toy has, so Model B's layout (G L L L G L L L) is the toy's
    a, b = _pair_shapes(vocab_a=257, vocab_b=257, d=32, layers=8, heads=4, seq_len=64)
    return ModelPairSpec(model_a=a, model_b=b, seq_len=64, n_tokens=40 * 4 * 64, batch_size=4, lr=1e-2,
                         warmup_steps=4, decay_frac=0.2, n_checkpoints=4, corpus="python-stdlib",
                         tokenizer="byte", n_eval_windows=8, finetune_steps=6, finetune_snapshot_every=2, n_long_docs=8,
                         length_fractions=(0.25, 0.5, 0.75), control_fraction=0.75)  # 40 steps: every branch decays over 2+ steps
