"""nblib: the library behind the book. The notebooks orchestrate and plot; this package does the work.

The layout is the book's table of contents, lowest layer first (a package imports only
packages above it in this list, never one below; tests/test_architecture.py checks it):

    stats              statistics (bootstrap, Lin's CCC)
    models             GPT-2, Llama and Gemma 3 in one file each, the decode engine
    cli                one error path for every command line, the errors users can fix; the old module names
    store              the run store: configs by hash, checkpoints, atomic writes
    data               corpora, tokenizers, token shards, training streams
    budgets            the budgets smoke/toy/full, the scales S1-S5, the targets every claim is judged by,
                       and budget files (a budget file names a corpus and a tokenizer, so budgets read data)
    export             a run's checkpoint or merge as a Hugging Face folder (transformers, vLLM)
    metrics, evals     LongPPL, copy and NLL probes, attention maps; RULER
    training           the trainer, Muon, schedules, the runner that gets or trains a run
    lccp, gemma        the LCCP paper (chapters 2-5); the Gemma blog (chapters 6-10)
    probes             the experiments behind the book's design choices; their records in data/probes
    chapters           what each part says and draws: part1 (LCCP), part2 (Gemma blog), appendix, claims
                       (the scorecard, the paper map, the sources' values); figures, shared by every part
    book               the book runner: run, time, build, check, plan and report

Submodules are imported by the chapters that need them, so `import nblib` stays cheap.
"""

from nblib.cli import install_moved_module_finder

__version__ = "0.1.0"

install_moved_module_finder()
