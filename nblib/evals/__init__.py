"""Behavioural evaluations beyond perplexity: RULER (nblib.evals.ruler).

Imports no other nblib package (a model and tokenizer come in as arguments).
"""
