"""The book's last page, "Run report": each chapter's wall time, the machine, the budget file
when one was given, and the benchmarks: their key numbers and every result table they wrote
(`python -m nblib.book run` writes it)."""

from __future__ import annotations

import json
import os
import platform
import re
import time
from pathlib import Path

from nblib.budgets.budget_file import BudgetFile
from nblib.store.provenance import REPO_ROOT, code_version


def benchmark_summary() -> list[str]:
    """Markdown lines for the run report: each benchmark result file and its key numbers."""
    bench = REPO_ROOT / "benchmarks" / "results"
    lines = []
    lp = bench / "bench_longppl.json"
    if lp.exists():
        r = json.loads(lp.read_text())["ratios"]
        lines.append(f"- `benchmarks/results/bench_longppl.md`: nblib's LongPPL against the reference "
                     f"implementation's way, same numbers; annotate {r['annotate']['wall']:.2f}x faster with "
                     f"{r['annotate']['memory']:.1f}x less peak memory, evaluate {r['evaluate']['wall']:.2f}x faster "
                     f"with {r['evaluate']['memory']:.1f}x less.")
    tt = bench / "bench_train.json"
    if tt.exists():
        d = json.loads(tt.read_text())
        rows = d.get("rows", [])
        ratio = [r.get("ours_vs_plain") for r in rows if isinstance(r, dict) and r.get("ours_vs_plain") is not None]
        lines.append(f"- `benchmarks/results/bench_train.md`: the trainer at every toy scale; MFU at the "
                     f"largest scale {100 * d['largest_scale_mfu']:.1f}% (goal: {d.get('goal', '')})"
                     + (f"; {min(ratio):.2f}-{max(ratio):.2f}x a plain training loop." if ratio else "."))
    dec = bench / "bench_decode.json"
    if dec.exists():
        rows = json.loads(dec.read_text())["rows"]
        ratio = [r["hf_generate_s"] / r["generate_s"] for r in rows]
        lines.append(f"- `benchmarks/results/bench_decode.md`: Models A and B decoding with and without the KV cache; "
                     f"`transformers`' generate() takes {min(ratio):.2f}-{max(ratio):.2f}x the time of ours "
                     f"(> 1: ours is faster), same greedy tokens: "
                     f"{'yes' if all(r['same_tokens_as_transformers'] for r in rows) else 'NO'}.")
    ev = bench / "bench_evals.json"
    if ev.exists():
        d = json.loads(ev.read_text())
        lines.append(f"- `benchmarks/results/bench_evals.md`: chapter 5's evaluations in a pool of one-thread workers "
                     "against the kernel at two threads: " + "; ".join(d["summary"]) + ".")
    mt = bench / "bench_make_test.json"
    if mt.exists():  # `make test` on fresh clones, baseline and candidate back to back
        d = json.loads(mt.read_text())
        runs = [f"{r['role']} {r['sha'][:7]} {r['wall_s']:.0f} s" + ("" if r["rc"] == 0 else " (failed)") for r in d["runs"]]
        lines.append(f"- `benchmarks/results/bench_make_test.md`: `make test`, {'; '.join(runs)} (gate {d['gate_s']} s).")
    probe = REPO_ROOT / "data" / "probes" / "toy_design_probe.jsonl"
    if probe.exists():
        n = sum(1 for line in probe.read_text().splitlines() if line.strip())
        lines.append(f"- `data/probes/toy_design_probe.jsonl`: {n} probes behind the toy budget "
                     f"(appendix A, \"The toy budget: how it was chosen\").")
    return lines


def benchmark_tables(results: Path | None = None) -> list[str]:
    """Markdown lines for the run report: each result file `benchmarks/results/<script>.md`
    whole, under its path, its own headings made small subheadings (the files are read, the
    benchmarks are not rerun)."""
    folder = results or REPO_ROOT / "benchmarks" / "results"
    lines = []
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        text = re.sub(r"(?m)^#+ ", "#### ", path.read_text()).strip()
        lines += [f"### `benchmarks/results/{path.name}`", "", text, ""]
    return lines


def run_report(times: list[dict], budget: str, elapsed: float | None = None, jobs: int = 1,
               source: BudgetFile | None = None, chapter_file: BudgetFile | None = None,
               code: dict | None = None) -> str:
    """Markdown of the 'Run report' page: each chapter's wall time and the machine (and, when
    chapters ran `jobs` at a time, the `elapsed` wall time of them all); with a budget file
    (`source`, and `chapter_file` when --set values were folded into a file of their own),
    the file, its sha256 and the fields it overrides, so every figure names its data. `code`:
    the code version the chapters ran (default: the tree's now)."""
    total = sum(t["wall_s"] for t in times)
    code = code or code_version()
    lines = [
        "# Run report", "",
        f"The book was last executed at the **{budget}** budget on "
        f"{time.strftime('%Y-%m-%d %H:%M')} (git `{code['git'][:10]}`{' + local changes' if code['dirty'] else ''}).",
        *(source.report_lines(chapter_file) if source else []),
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}.", "",
        "| chapter | status | wall time (s) | wall time (min) |", "|---|---|---:|---:|",
    ]
    lines += [f"| {t['chapter']} | {t['status']} | {t['wall_s']:.1f} | {t['wall_s'] / 60:.1f} |" for t in times]
    lines += [f"| **total** | | **{total:.1f}** | **{total / 60:.1f}** |", ""]
    if jobs > 1 and elapsed is not None:
        lines += [f"The chapters ran {jobs} at a time, so each one's time includes waiting for the cores and for "
                  f"runs another chapter was training; all of them took {elapsed:.1f} s ({elapsed / 60:.1f} min).", ""]
    bench, tables = benchmark_summary(), benchmark_tables()
    if bench or tables:
        lines += ["## Benchmarks", "",
                  "Speed targets live in `benchmarks/` (run as `python -m benchmarks.bench_train` and so on), whose "
                  "scripts write their results to `benchmarks/results/<script>.md`; this page reads those files (it "
                  "does not rerun them). The experiment probes behind the book's design choices are "
                  "`python -m nblib.probes`, with their records in `data/probes/`.", ""]
        if bench:
            lines += ["Key numbers:", "", *bench, ""]
        lines += tables
    return "\n".join(lines)
