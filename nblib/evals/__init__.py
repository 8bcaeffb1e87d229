"""Behavioural evaluations beyond perplexity: RULER (nblib.evals.ruler)."""
