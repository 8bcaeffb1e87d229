"""The plan before any work: which inputs the chosen chapters need and whether they are here,
and how much compute and disk those chapters will take.

    python -m nblib.book.plan --budget full                 # `make plan BUDGET=full`; exit 2 if inputs are missing
    python -m nblib.book.plan --budget full --chapters 03_scaling_law,06_models_ab
    python -m nblib.book.plan --budget-file examples/full-own-data.toml --set workers=4   # `make plan BUDGET_FILE=...`
    require_inputs(get_budget("full"), "03_scaling_law")    # what every chapter calls first

Every missing input is listed at once, each with what it is, where it is expected and how to
provide it. With a budget file (nblib.budgets.budget_file) the plan first shows each field the
file overrides beside the base budget's value, then the inputs at the file's paths. The
compute table counts the training runs each chapter adds (a run is counted in the first
chapter that trains it), from the run configs the chapters train: tokens, FLOPs from the
models' analytic count (`flops_per_token`, App. A.3's 6N plus attention), GPU-hours at a
stated MFU on a stated GPU, and the checkpoint disk the run store will hold: the weights of
every kept checkpoint and each optimizer state kept beside them (every checkpoint of a trunk
that later runs branch from, the newest `KEEP_RESUMABLE` of any other run).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from nblib.book.toc import input_chapters
from nblib.budgets import Budget, BudgetError, get_budget
from nblib.budgets.budget_file import BudgetFile, read_budget_file
from nblib.budgets.own_data import TOKENIZER_FOLDER, own_data, retrained_bpe
from nblib.cli import run_cli
from nblib.data.bpe import TOKENIZER_DIR
from nblib.data.corpus import STDLIB_SPEC, find_manifest, stdlib_root
from nblib.gemma import extension, pair
from nblib.lccp import grid
from nblib.models import build_model
from nblib.store.provenance import REPO_ROOT
from nblib.store.runstore import Run
from nblib.training.train import KEEP_RESUMABLE, _ckpt_steps

LCCP_CHAPTERS = input_chapters("lccp")  # the chapters that read the LCCP inputs (nblib.book.toc)
PAIR_CHAPTERS = input_chapters("gemma")  # those that read Models A and B's corpus and tokenizer
# The default GPU of the compute table: H100 SXM, dense bf16 (the paper trained on H800s,
# the same compute die). MFU 0.4 is a good single-node figure for these model sizes.
DEFAULT_PEAK_TFLOPS = 989.0
DEFAULT_MFU = 0.4
WEIGHT_BYTES = 4  # a parameter's fp32 weight in a checkpoint
OPTIMIZER_BYTES = 12  # a parameter's share of one optimizer state, as the estimate counts it (an upper bound)


class MissingInputsError(BudgetError):
    """Inputs a chapter needs are not where the budget expects them (all of them are listed)."""


@dataclass(frozen=True)
class Input:
    """One input a budget's chapters read: what it is, where it is expected, how to provide it."""

    name: str
    spec: str  # the budget's spec string (corpus / tokenizer / model path)
    path: Path | None  # where it is expected on disk (None: built into the project)
    what: str
    how: str
    chapters: tuple[str, ...]
    where: str = "built in"  # what the plan says of an input with no path

    @property
    def found(self) -> bool:
        return self.path is None or self.path.exists()


def _spec_path(spec: str) -> Path | None:
    """The file or folder a corpus / tokenizer spec reads; None for the built-in stdlib corpus."""
    if spec == STDLIB_SPEC:
        manifest = find_manifest()
        return manifest if manifest is None else stdlib_root()
    if spec == "byte":
        return None
    kind, _, rest = spec.partition(":")
    if kind == "bpe":
        return TOKENIZER_DIR / f"{rest}.json"
    path = Path(rest)
    return path if path.is_absolute() else REPO_ROOT / path


# How a user names an input of their own (README, "Your own data")
IN_A_BUDGET_FILE = "or name yours as `{key}` in a budget file (README, \"Your own data\"; examples/)"
RETRAINED = f"trained on the corpus at first use, pinned in <run store>/{TOKENIZER_FOLDER}/"


def inputs(b: Budget) -> list[Input]:
    """Every input of budget `b`, with the chapters that read it (LCCP paper App. A.3-A.4;
    the Gemma blog's FineWeb-Edu and GPT-2 tokenizer for chapters 6-10). A base budget's
    BPE kept over another corpus is trained by the chapter (nblib.budgets.own_data): not missing."""
    retrained = retrained_bpe(b)
    out = [
        Input("LCCP corpus", b.corpus, _spec_path(b.corpus),
              "the pre-training and LCCP documents (the paper: a 4K/32K/128K mixture, Table 9-10)",
              "write one JSON object per line with a string `text` field (.jsonl, .jsonl.gz or .jsonl.xz) "
              "there, " + IN_A_BUDGET_FILE.format(key="corpus"),
              LCCP_CHAPTERS),
        Input("tokenizer", b.tokenizer, None if "tokenizer" in retrained else _spec_path(b.tokenizer),
              "the tokenizer of the LCCP runs (the paper: a Llama-3-style 128K vocabulary)",
              "save a Hugging Face `tokenizer.json` there (tokenizers' Tokenizer.save, or the file from a "
              "model folder), " + IN_A_BUDGET_FILE.format(key="tokenizer"), LCCP_CHAPTERS, RETRAINED),
    ]
    if b.reference["kind"] == "hf":
        path = Path(b.reference["path"])
        out.append(Input("LongPPL reference model", b.reference["path"],
                         (path if path.is_absolute() else REPO_ROOT / path) / "config.json",
                         "the causal LM that marks LongPPL's key tokens (the paper: Llama-3.1-8B, §3.1)",
                         "put a Hugging Face model folder there (config.json + safetensors weights + tokenizer); "
                         "`huggingface-cli download meta-llama/Llama-3.1-8B --local-dir ...` on a machine with access, "
                         + IN_A_BUDGET_FILE.format(key="reference.path"),
                         LCCP_CHAPTERS))
    if b.pair is not None:
        out += [
            Input("pair corpus", b.pair.corpus, _spec_path(b.pair.corpus),
                  "the pre-training text of Models A and B (the blog: FineWeb-Edu, 9.8B tokens)",
                  "write FineWeb-Edu (or your corpus) as .jsonl with a `text` field there, "
                  + IN_A_BUDGET_FILE.format(key="pair.corpus"), PAIR_CHAPTERS),
            Input("pair tokenizer", b.pair.tokenizer,
                  None if "pair.tokenizer" in retrained else _spec_path(b.pair.tokenizer),
                  "the GPT-2 tokenizer of Models A and B (50,257 entries)",
                  "save GPT-2's `tokenizer.json` there (from any GPT-2 model folder), "
                  + IN_A_BUDGET_FILE.format(key="pair.tokenizer"), PAIR_CHAPTERS, RETRAINED),
        ]
    return out


def missing_inputs(b: Budget, chapters=None) -> list[Input]:
    """The inputs of `chapters` (default: all) that are not where the budget expects them."""
    chapters = set(chapters or LCCP_CHAPTERS + PAIR_CHAPTERS)
    return [i for i in inputs(b) if chapters & set(i.chapters) and not i.found]


def format_missing(missing: list[Input], b: Budget, source: BudgetFile | None = None) -> str:
    """The list of missing inputs, each with where it is expected and how to provide it."""
    of = f"budget file {source.path} (base {b.name!r})" if source and source.path else f"budget {b.name!r}"
    lines = [f"{len(missing)} input(s) of {of} are missing:"]
    for i in missing:
        lines.append(f"  - {i.name}: {i.what}\n      expected at {i.path} (spec {i.spec!r})\n      to provide it: {i.how}")
    again = f"BUDGET_FILE={source.path}" if source and source.path else f"BUDGET={b.name}"
    lines.append(f"Run `make plan {again}` to see every input and the compute once they are in place.")
    return "\n".join(lines)


def require_inputs(b: Budget, chapter: str, source: BudgetFile | None = None) -> None:
    """Raise MissingInputsError listing every input `chapter` needs that is missing (chapters call it first)."""
    missing = missing_inputs(b, [chapter])
    if missing:
        raise MissingInputsError(format_missing(missing, b, source))


# ---------------------------------------------------------------------------------------
# compute: the runs each chapter adds, counted the way nblib.lccp.grid builds them
# ---------------------------------------------------------------------------------------
def _model_cost(family: str, model: dict, seq_len: int) -> tuple[float, int]:
    """(training FLOPs per token at seq_len, parameters incl. embeddings) from the model itself."""
    with torch.device("meta"):
        m = build_model(family, dict(model))
    return m.flops_per_token(seq_len, training=True), m.n_params(non_embedding=False)


def optimizer_states(config) -> int:
    """Checkpoints of a run that keep its optimizer state once it has finished: every one of a
    trunk that later runs branch from (`keep_optimizer="all"`: the short stage's stable run,
    Models A and B and the all-global control, whose shorter budgets start at their kept
    steps), else the newest `KEEP_RESUMABLE` (the trainer drops the older ones' state)."""
    n = len(_ckpt_steps(config))
    return n if config.keep_optimizer == "all" else min(KEEP_RESUMABLE, n)


def checkpoint_bytes(n_params: int, checkpoints: int, optimizer_states: int) -> int:
    """Disk of a run's checkpoints: fp32 weights in each, and an optimizer state in those that
    keep one (`optimizer_states`)."""
    return WEIGHT_BYTES * n_params * checkpoints + OPTIMIZER_BYTES * n_params * optimizer_states


def _parent(config) -> Run:
    """A run of `config` to build a child config from (its config and hash; nothing is read)."""
    return Run(Path("."), config)


def pair_stages(b: Budget, seed: int = 0) -> list[tuple[str, str, tuple]]:
    """Part 2's training runs as (chapter, what, configs), from the configs the chapters train:
    chapter 6's Models A and B, their training-length ladders, and the all-global Model B with
    its own shorter budgets (`pair.part2_configs`: chapter 6 trains them all, chapter 9 reads
    the control); chapter 9's YaRN fine-tune of Model B, its control (Model B continued with
    plain RoPE for the same steps) and the fine-tune of the all-global model."""
    p = b.pair
    base = pair.pair_configs(b, seed)
    ladder = pair.ladder_configs(b, seed)
    control = pair.all_global_config(b, seed)
    control_ladder = pair.ladder_configs(b, seed, models=("B-global",))
    out = [("06_models_ab", "Model A", (base["A"],)), ("06_models_ab", "Model B", (base["B"],))]
    for key, name in (("A", "Model A"), ("B", "Model B")):
        runs = tuple(c for (k, _), c in ladder.items() if k == key)
        out.append(("06_models_ab", f"{name} training-length ladder ({len(runs)} shorter budgets)", runs))
    out.append(("06_models_ab", f"Model B all-global control ({p.control_fraction:.0%} of the pair's tokens)",
                (control,)))
    if control_ladder:
        out.append(("06_models_ab", f"Model B all-global control ladder ({len(control_ladder)} shorter budgets)",
                    tuple(control_ladder.values())))
    b_run, control_run = _parent(base["B"]), _parent(control)
    out += [("09_yarn", f"Model B YaRN x{p.yarn_factor} fine-tune", (extension.finetune_config(b, b_run),)),
            ("09_yarn", "Model B continued with plain RoPE (the fine-tune's control)",
             (extension.continued_config(b, b_run),)),
            ("09_yarn", f"all-global Model B YaRN x{p.yarn_factor} fine-tune",
             (extension.finetune_config(b, control_run),))]
    return out


def run_list(b: Budget) -> list[dict]:
    """The training runs of every chapter: {chapter, what, family, model, seq_len, tokens,
    checkpoints, optimizer_states}, counted over the run configs the chapters train: chapters
    2-4's stages of `nblib.lccp.grid.grid_runs`, chapters 6 and 9's `pair_stages`. Tokens are
    those a run trains itself (`grid.trained_tokens`: a WSD branch continues its trunk),
    checkpoints those the trainer keeps, optimizer states those it keeps beside them."""
    out = []
    with grid.placeholder_corpus():  # counts do not depend on the corpus, which may not be here yet
        stages = [(st.chapter, st.what, st.configs) for st in grid.grid_runs(b)]
        stages += pair_stages(b) if b.pair is not None else []
    for chapter, what, configs in stages:
        first = configs[0]
        out.append(dict(chapter=chapter, what=what, family=first.model["family"],
                        model={k: v for k, v in first.model.items() if k != "family"}, seq_len=first.seq_len,
                        tokens=int(sum(grid.trained_tokens(c) for c in configs)),
                        checkpoints=int(sum(len(_ckpt_steps(c)) for c in configs)),
                        optimizer_states=int(sum(optimizer_states(c) for c in configs))))
    return out


def compute_table(b: Budget, chapters=None, peak_tflops: float = DEFAULT_PEAK_TFLOPS,
                  mfu: float = DEFAULT_MFU) -> pd.DataFrame:
    """Per chapter: runs, tokens, training FLOPs, GPU-hours at `mfu` of `peak_tflops`, and
    checkpoint disk (`checkpoint_bytes`: fp32 weights per kept checkpoint, and each optimizer
    state kept beside them)."""
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu={mfu!r} is not allowed; allowed: a fraction in (0, 1]")
    if not peak_tflops > 0:
        raise ValueError(f"peak_tflops={peak_tflops!r} is not allowed; allowed: a positive number")
    rows = []
    for r in run_list(b):
        if chapters and r["chapter"] not in chapters:
            continue
        fpt, params = _model_cost(r["family"], r["model"], r["seq_len"])
        flops = r["tokens"] * fpt
        rows.append({"chapter": r["chapter"], "run": r["what"], "context": r["seq_len"], "tokens": r["tokens"],
                     "FLOPs": flops, "GPU-hours": flops / (peak_tflops * 1e12 * mfu) / 3600,
                     "checkpoint GB": checkpoint_bytes(params, r["checkpoints"], r["optimizer_states"]) / 1e9})
    return pd.DataFrame(rows, columns=["chapter", "run", "context", "tokens", "FLOPs", "GPU-hours", "checkpoint GB"])


BENCH_TRAIN = REPO_ROOT / "benchmarks" / "results" / "bench_train.json"
CHAPTER_TIMES = REPO_ROOT / "figures" / "chapter_times_toy.json"


def achieved_flops(bench: dict, n_params: int, seq_len: int, short_seq_len: int) -> tuple[float, str]:
    """(training FLOP/s one worker reaches, the benchmarked shape it is read from) for a run of
    `n_params` non-embedding parameters at `seq_len`: the `bench_train` row of the same stage
    (short at the short context, else long) whose N is nearest in log scale. The row's rate
    counts attention's FLOPs as the plan does (`flops_per_token`)."""
    stage = "short" if seq_len <= short_seq_len else "long"
    rows = [r for r in bench["rows"] if r["stage"] == stage] or bench["rows"]
    r = min(rows, key=lambda r: abs(math.log(max(r["n_params_non_emb"], 1) / max(n_params, 1))))
    return r["gflops_muon"] * 1e9, f"{r['scale']} {r['stage']}"


def cpu_table(b: Budget, bench: dict, cores: int, chapters=None) -> pd.DataFrame:
    """Per chapter: training core-hours at the rates `bench_train` measured at this budget's
    shapes (`achieved_flops`; one worker a core, as the run pool trains), and the wall time
    they take spread over `cores` workers. Training only: evaluation, fits and the notebooks'
    own work come on top (the plan shows the last measured chapter times beside it)."""
    if cores < 1:
        raise ValueError(f"cores={cores!r} is not allowed; allowed: an integer >= 1")
    rows = []
    for r in run_list(b):
        if chapters and r["chapter"] not in chapters:
            continue
        fpt, _ = _model_cost(r["family"], r["model"], r["seq_len"])
        with torch.device("meta"):
            n = build_model(r["family"], dict(r["model"])).n_params(non_embedding=True)
        rate, shape = achieved_flops(bench, n, r["seq_len"], b.short_seq_len)
        core_s = r["tokens"] * fpt / rate
        rows.append({"chapter": r["chapter"], "run": r["what"], "rate from": shape, "core-hours": core_s / 3600,
                     "training wall min": core_s / cores / 60})
    return pd.DataFrame(rows, columns=["chapter", "run", "rate from", "core-hours", "training wall min"])


def measured_minutes(path: Path = CHAPTER_TIMES) -> dict:
    """{chapter: wall minutes} of the last measured toy book (figures/chapter_times_toy.json)."""
    if not Path(path).is_file():
        return {}
    return {c["chapter"]: c["wall_s"] / 60 for c in json.loads(Path(path).read_text())["chapters"]
            if c.get("status") == "ok"}


def cpu_plan_lines(b: Budget, chapters=None, cores: int | None = None, bench_path: Path = BENCH_TRAIN,
                   times_path: Path = CHAPTER_TIMES) -> list[str]:
    """The plan's CPU section: training time per chapter on `cores` cores (default: this
    machine's) from the benchmarked rates, Part 1 (chapters 1-5) and the whole book summed, and
    the last measured toy book's chapter times beside them."""
    import os

    cores = cores or os.cpu_count() or 1
    if not Path(bench_path).is_file():
        return [f"\nCPU time: no benchmark results at {bench_path}; run `python -m benchmarks.bench_train` first."]
    bench = json.loads(Path(bench_path).read_text())
    if bench.get("budget") != b.name:
        return [f"\nCPU time: {bench_path.name} measured budget {bench.get('budget')!r}, not {b.name!r}; run "
                f"`python -m benchmarks.bench_train --budget {b.name}`."]
    table = cpu_table(b, bench, cores, chapters)
    per = table.groupby("chapter", sort=True)[["core-hours", "training wall min"]].sum()
    measured = measured_minutes(times_path) if b.name == "toy" else {}
    every = sorted(set(per.index) | {c for c in measured if not chapters or c in chapters})
    per = per.reindex(every, fill_value=0.0)  # a chapter that trains nothing still takes its measured time
    per["last measured min"] = [measured.get(c, float("nan")) for c in per.index]
    part1 = per.index.str[:2].astype(int) <= 5
    per.loc["Part 1 (chapters 1-5)"] = per[part1].sum(min_count=1)
    per.loc["whole book"] = per[~per.index.str.startswith(("Part", "whole"))].sum(min_count=1)
    m = bench.get("machine", {})
    return [f"\nCPU time on {cores} core(s), training only, at the rates benchmarks/results/{Path(bench_path).name} "
            f"measured at these shapes ({bench.get('date')}, {m.get('cpu_count')} CPUs, {m.get('machine')}, "
            f"{bench.get('threads')} thread a worker; a slower or busier CPU takes longer). Evaluation, fits and "
            "the notebooks' own work come on top: the last measured toy book's wall times stand beside them.",
            per.to_string(formatters={"core-hours": "{:,.2f}".format, "training wall min": "{:,.1f}".format,
                                      "last measured min": "{:,.1f}".format})]


def visible_gpus() -> list[str]:
    """The GPUs torch sees here (name and memory)."""
    if not torch.cuda.is_available():
        return []
    return [f"{torch.cuda.get_device_name(i)} ({torch.cuda.get_device_properties(i).total_memory / 2**30:.0f} GiB)"
            for i in range(torch.cuda.device_count())]


def overrides_text(source: BudgetFile) -> list[str]:
    """Lines of the plan naming the budget file and, per field it overrides, the base
    budget's value beside the file's."""
    what = (f"budget file {source.path} (sha256 {source.sha256[:12]})" if source.path else "--set")
    sets = f", --set {' '.join(source.sets)}" if source.sets and source.path else ""
    lines = [f"Budget: {what}, base {source.base!r}{sets}"]
    rows = source.rows()
    if not rows:
        return lines + ["  no overrides: the base budget as it is"]
    cells = [(k, _short(old), _short(new)) for k, old, new in rows]
    w0 = max(len(k) for k, _, _ in cells)
    w1 = max(len(f"base {source.base}"), *(len(old) for _, old, _ in cells))
    lines.append(f"  {'field':<{w0}}  {'base ' + source.base:<{w1}}  this file")
    return lines + [f"  {k:<{w0}}  {old:<{w1}}  {new}" for k, old, new in cells]


def _short(v, n: int = 60) -> str:
    """A value in the overrides table: strings (paths) whole, lists and tables cut at `n`."""
    if isinstance(v, str):
        return v
    text = json.dumps(v, default=str)  # tuples as the file's lists
    return text if len(text) <= n else text[:n - 3] + "..."


def plan_text(b: Budget, chapters=None, peak_tflops: float = DEFAULT_PEAK_TFLOPS, mfu: float = DEFAULT_MFU,
              source: BudgetFile | None = None) -> str:
    """The whole plan as text: the budget file's overrides (when `source` is one), inputs
    (found or missing), compute per chapter and in total, GPUs."""
    chosen = set(chapters or LCCP_CHAPTERS + PAIR_CHAPTERS)
    lines = [f"Plan for budget {b.name!r}" + (f", chapters {', '.join(sorted(chosen))}" if chapters else "")]
    if source is not None:
        lines += [""] + overrides_text(source)
    lines.append("\nInputs:")
    for i in inputs(b):
        if chosen & set(i.chapters):
            where = i.where if i.path is None else str(i.path)
            lines.append(f"  [{'found' if i.found else 'MISSING'}] {i.name}: {where}")
    table = compute_table(b, chapters, peak_tflops, mfu)
    gpus = visible_gpus()
    if b.name != "full" and not gpus:  # a CPU user: minutes on these cores, not GPU-hours
        lines += cpu_plan_lines(b, chapters)
    elif len(table):
        per = table.groupby("chapter", sort=True)[["tokens", "FLOPs", "GPU-hours", "checkpoint GB"]].sum()
        per.loc["total"] = per.sum()
        lines.append(f"\nTraining compute (GPU-hours at {mfu:.0%} MFU of {peak_tflops:g} TFLOP/s per GPU; "
                     f"divide by the GPUs you use):")
        lines.append(per.to_string(formatters={"tokens": "{:,.0f}".format, "FLOPs": "{:.3g}".format,
                                               "GPU-hours": "{:,.3g}".format, "checkpoint GB": "{:,.1f}".format}))
    lines.append("\nGPUs torch sees: " + (", ".join(gpus) if gpus else "none (CPU only)"))
    missing = missing_inputs(b, chosen)
    lines.append("\n" + (format_missing(missing, b, source) if missing else "Nothing is missing."))
    return "\n".join(lines)


def main(argv=None) -> int:
    """CLI: print the plan; exit 2 when an input is missing."""
    ap = argparse.ArgumentParser(prog="python -m nblib.book.plan", description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default=None, help="smoke, toy or full (default toy, or the budget file's base)")
    ap.add_argument("--budget-file", default="", help="a TOML budget file (README, \"Your own data\")")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override one budget field, e.g. --set scales.S1.lr=5e-4 (repeatable)")
    ap.add_argument("--chapters", default="", help="comma-separated chapter names (default: all)")
    ap.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_TFLOPS, help="per-GPU peak (dense bf16)")
    ap.add_argument("--mfu", type=float, default=DEFAULT_MFU)
    args = ap.parse_args(argv)
    source = budget_source(args.budget, args.budget_file, args.set)
    b = own_data(source.budget) if source else get_budget(args.budget or "toy")  # vocabularies; trains nothing
    names = [c.strip() for c in args.chapters.split(",") if c.strip()] or None
    allowed = LCCP_CHAPTERS + PAIR_CHAPTERS + ("01_introduction",)
    for n in names or ():
        if n not in allowed:
            raise BudgetError(f"chapter {n!r} is not allowed; allowed: {', '.join(allowed)}")
    print(plan_text(b, names, args.peak_tflops, args.mfu, source))
    return 2 if missing_inputs(b, names) else 0


def budget_source(budget: str | None, budget_file: str = "", sets=()) -> BudgetFile | None:
    """The budget file of a command line (`--budget-file`, `--set`s over it or over
    `--budget`), or None for a plain `--budget`. A `--budget` beside a file must be its base."""
    if budget_file:
        source = read_budget_file(budget_file, sets)
        if budget is not None and budget != source.base:
            raise BudgetError(f"budget={budget!r} is not allowed with budget file {source.path}, whose base is "
                              f"{source.base!r}; allowed: {source.base!r} or no --budget")
        return source
    if sets:
        return read_budget_file(None, sets, base=budget or "toy")
    get_budget(budget or "toy")  # raises BudgetError listing smoke, toy, full
    return None


if __name__ == "__main__":
    sys.exit(run_cli(main))
