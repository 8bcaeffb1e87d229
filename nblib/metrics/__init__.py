"""Evaluation metrics: LongPPL and ShortPPL (LCCP paper §3.1, §4.1, App. A.1).

    ann = load_or_annotate("runs/longppl/annotation.json", ref_model, ref_tok, texts, spec)
    res = evaluate(model, tok, texts, ann, max_len=spec_len)   # long_ppl, short_ppl, counts
    print(format_testset_stats(testset_stats(ann, texts, tok, max_len)))   # Table 2

Models: an nblib decoder + nblib tokenizer, a transformers causal LM + fast tokenizer, or a
local Hugging Face folder path (scoring.py, hf.py). Also: copy and NLL probes (copy.py,
probes.py) and attention maps, retrieval heads and head measures (attention_maps.py).

May import nblib.budgets, nblib.data, nblib.models and nblib.store; nothing that trains.
"""

from .longppl import (Annotation, annotate, chunk_windows, evaluate, format_testset_stats, hash_texts,
                      key_token_positions, load_or_annotate, long_ppl, merge_intervals, select_key_tokens,
                      short_ppl, tail_nll, testset_stats)
from .hf import HFScorer  # transformers itself is imported only when an HF model is loaded
from .nll import module_fingerprint, nll_from_hidden
from .scoring import NblibScorer, as_encoder, as_scorer


__all__ = [
    "Annotation", "HFScorer", "NblibScorer", "annotate", "as_encoder", "as_scorer", "chunk_windows", "evaluate",
    "format_testset_stats", "hash_texts", "key_token_positions", "load_or_annotate", "long_ppl",
    "merge_intervals", "module_fingerprint", "nll_from_hidden", "select_key_tokens", "short_ppl", "tail_nll", "testset_stats",
]
