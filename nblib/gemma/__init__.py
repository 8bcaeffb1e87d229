"""The Gemma blog, Part 2 (chapters 6-10): Models A and B, RoPE clocks, YaRN extension, inference cost.

Modules: pair (Models A and B trained on one stream), training_length (their gap against training
length), inference_cost (KV-cache bytes, FLOPs), position (RoPE bands, learned positions),
extension (YaRN zero-shot and fine-tuned), breakdown_length (RoPE's breakdown past L against
training length), attention (chapter 10's attention measures over the pair). May import
nblib.training, nblib.store, nblib.data, nblib.models, nblib.metrics, nblib.budgets and
nblib.stats; never nblib.lccp or nblib.book.
"""
