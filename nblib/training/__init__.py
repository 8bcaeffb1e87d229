"""Training: the trainer, its optimizer (Muon + AdamW), LR schedules, and the runner that gets or trains a run.

Modules: train (one run, resumable, `python -m nblib.training.train CONFIG`), optim (Muon),
schedules (WSD, linear decay, constant), runner (`get_or_run`, `get_or_run_many`). May import
nblib.store, nblib.data, nblib.models and nblib.cli; never a chapter's package (lccp, gemma, book).
"""
