"""Speed benchmarks of the library and the GPU check, run from the repository root as modules:

    python -m benchmarks.bench_decode     # chapter 7: decode with and without the KV cache
    python -m benchmarks.bench_ensemble   # the batched ensemble trainer against solo runs
    python -m benchmarks.bench_evals      # chapter 5's evaluations: in the kernel against the worker pool
    python -m benchmarks.bench_fit        # chapters 3-4: every Eq. 1 and Eq. 2 fit, old and new search
    python -m benchmarks.bench_longppl    # LongPPL against the reference implementation's way
    python -m benchmarks.bench_make_test  # `make test` on fresh clones of two commits, back to back
    python -m benchmarks.bench_train      # chapter 1: training throughput and MFU of the toy scales
    python -m benchmarks.gpu_check        # the full budget's code on this GPU, before the full budget

Each writes benchmarks/results/<script>.json and .md (gpu_check: one JSON) and a manifest,
<script>.manifest.json, naming the command, commit, time and machine. The experiment probes
whose records the chapters read live in `nblib.probes` (records in data/probes/).
"""

import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def run_facts(load_at_start, t_start: float) -> dict:
    """The facts every result file records beside its numbers: date, wall time, the load
    average at start and end (a busy machine explains a slow timing), and the machine."""
    import torch

    return {"date": time.strftime("%Y-%m-%d"), "wall_s": round(time.time() - t_start, 1),
            "load_average_at_start": [round(x, 2) for x in load_at_start],
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "machine": {"cpu_count": os.cpu_count(), "machine": platform.machine(), "torch": torch.__version__}}


def cpu_name() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else platform.processor()."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def markdown_table(columns, rows) -> str:
    """A Markdown table of `rows` (lists of cells) under `columns`: the first column
    left-aligned, the others (numbers) right-aligned."""
    lines = ["| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 1)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write_results(name: str, data: dict, markdown: str, argv) -> None:
    """benchmarks/results/<name>.json and .md, atomically, and the manifest naming the command
    (`python -m benchmarks.<name> argv`), commit, time and machine of this write."""
    from nblib.probes.results import command_line, write_manifest
    from nblib.store.atomic import atomic_write_json, atomic_write_text

    RESULTS.mkdir(parents=True, exist_ok=True)
    atomic_write_json(RESULTS / f"{name}.json", data)
    atomic_write_text(RESULTS / f"{name}.md", markdown)
    write_manifest([RESULTS / f"{name}.json", RESULTS / f"{name}.md"], RESULTS / f"{name}.manifest.json",
                   module=f"benchmarks.{name}", command=command_line(f"python -m benchmarks.{name}", argv))
