"""Speed benchmarks of the library and the GPU check, run from the repository root as modules:

    python -m benchmarks.bench_decode     # chapter 7: decode with and without the KV cache
    python -m benchmarks.bench_ensemble   # the batched ensemble trainer against solo runs
    python -m benchmarks.bench_fit        # chapters 3-4: every Eq. 1 and Eq. 2 fit, old and new search
    python -m benchmarks.bench_longppl    # LongPPL against the reference implementation's way
    python -m benchmarks.bench_train      # chapter 1: training throughput and MFU of the toy scales
    python -m benchmarks.gpu_check        # the full budget's code on this GPU, before the full budget

Each writes benchmarks/results/<script>.json and .md (gpu_check: one JSON) and a manifest,
<script>.manifest.json, naming the command, commit, time and machine. The experiment probes
whose records the chapters read live in `nblib.probes` (records in data/probes/).
"""
