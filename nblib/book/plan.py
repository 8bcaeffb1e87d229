"""The plan before any work: which inputs the chosen chapters need and whether they are here,
and how much compute and disk those chapters will take.

    python -m nblib.book.plan --budget full                 # `make plan BUDGET=full`; exit 2 if inputs are missing
    python -m nblib.book.plan --budget full --chapters 03_scaling_law,06_models_ab
    require_inputs(get_budget("full"), "03_scaling_law")    # what every chapter calls first

Every missing input is listed at once, each with what it is, where it is expected and how to
provide it. The compute table counts the training runs each chapter adds (a run is counted
in the first chapter that trains it): tokens, FLOPs from the models' analytic count
(`flops_per_token`, App. A.3's 6N plus attention), GPU-hours at a stated MFU on a stated GPU,
and the checkpoint disk the run store will hold.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from nblib.book.chapters import input_chapters
from nblib.budgets import Budget, BudgetError, get_budget
from nblib.cli import run_cli
from nblib.data.bpe import TOKENIZER_DIR
from nblib.data.corpus import STDLIB_SPEC, find_manifest, stdlib_root
from nblib.lccp import grid
from nblib.models import build_model
from nblib.store.provenance import REPO_ROOT
from nblib.training.train import _ckpt_steps

LCCP_CHAPTERS = input_chapters("lccp")  # the chapters that read the LCCP inputs (nblib.book.chapters)
PAIR_CHAPTERS = input_chapters("gemma")  # those that read Models A and B's corpus and tokenizer
# The default GPU of the compute table: H100 SXM, dense bf16 (the paper trained on H800s,
# the same compute die). MFU 0.4 is a good single-node figure for these model sizes.
DEFAULT_PEAK_TFLOPS = 989.0
DEFAULT_MFU = 0.4


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


def inputs(b: Budget) -> list[Input]:
    """Every input of budget `b`, with the chapters that read it (LCCP paper App. A.3-A.4;
    the Gemma blog's FineWeb-Edu and GPT-2 tokenizer for chapters 6-10)."""
    out = [
        Input("LCCP corpus", b.corpus, _spec_path(b.corpus),
              "the pre-training and LCCP documents (the paper: a 4K/32K/128K mixture, Table 9-10)",
              "write one JSON object per line with a string `text` field (.jsonl, .jsonl.gz or .jsonl.xz) "
              "and name it in `corpus` of nblib/budgets.py",
              LCCP_CHAPTERS),
        Input("tokenizer", b.tokenizer, _spec_path(b.tokenizer),
              "the tokenizer of the LCCP runs (the paper: a Llama-3-style 128K vocabulary)",
              "save a Hugging Face `tokenizer.json` there (tokenizers' Tokenizer.save, or the file from a "
              "model folder)", LCCP_CHAPTERS),
    ]
    if b.reference["kind"] == "hf":
        path = Path(b.reference["path"])
        out.append(Input("LongPPL reference model", b.reference["path"],
                         (path if path.is_absolute() else REPO_ROOT / path) / "config.json",
                         "the causal LM that marks LongPPL's key tokens (the paper: Llama-3.1-8B, §3.1)",
                         "put a Hugging Face model folder there (config.json + safetensors weights + tokenizer); "
                         "`huggingface-cli download meta-llama/Llama-3.1-8B --local-dir ...` on a machine with access",
                         LCCP_CHAPTERS))
    if b.pair is not None:
        out += [
            Input("pair corpus", b.pair.corpus, _spec_path(b.pair.corpus),
                  "the pre-training text of Models A and B (the blog: FineWeb-Edu, 9.8B tokens)",
                  "write FineWeb-Edu (or your corpus) as .jsonl with a `text` field", PAIR_CHAPTERS),
            Input("pair tokenizer", b.pair.tokenizer, _spec_path(b.pair.tokenizer),
                  "the GPT-2 tokenizer of Models A and B (50,257 entries)",
                  "save GPT-2's `tokenizer.json` there (from any GPT-2 model folder)", PAIR_CHAPTERS),
        ]
    return out


def missing_inputs(b: Budget, chapters=None) -> list[Input]:
    """The inputs of `chapters` (default: all) that are not where the budget expects them."""
    chapters = set(chapters or LCCP_CHAPTERS + PAIR_CHAPTERS)
    return [i for i in inputs(b) if chapters & set(i.chapters) and not i.found]


def format_missing(missing: list[Input], b: Budget) -> str:
    lines = [f"{len(missing)} input(s) of budget {b.name!r} are missing:"]
    for i in missing:
        lines.append(f"  - {i.name}: {i.what}\n      expected at {i.path} (spec {i.spec!r})\n      to provide it: {i.how}")
    lines.append("Run `make plan BUDGET=%s` to see every input and the compute once they are in place." % b.name)
    return "\n".join(lines)


def require_inputs(b: Budget, chapter: str) -> None:
    """Raise MissingInputsError listing every input `chapter` needs that is missing (chapters call it first)."""
    missing = missing_inputs(b, [chapter])
    if missing:
        raise MissingInputsError(format_missing(missing, b))


# ---------------------------------------------------------------------------------------
# compute: the runs each chapter adds, counted the way nblib.lccp.grid builds them
# ---------------------------------------------------------------------------------------
def _model_cost(family: str, model: dict, seq_len: int) -> tuple[float, int]:
    """(training FLOPs per token at seq_len, parameters incl. embeddings) from the model itself."""
    with torch.device("meta"):
        m = build_model(family, dict(model))
    return m.flops_per_token(seq_len, training=True), m.n_params(non_embedding=False)


def _steps(tokens: int, tokens_per_step: int) -> int:
    return max(1, int(round(tokens / tokens_per_step)))


def run_list(b: Budget) -> list[dict]:
    """The training runs of every chapter: {chapter, what, family, model, seq_len, tokens,
    checkpoints}. Chapters 2-4 are the stages of `nblib.lccp.grid.grid_runs`, counted over
    their run configs: tokens are those a run trains itself (`grid.trained_tokens`: a WSD
    branch continues its trunk), checkpoints those the trainer keeps."""
    out = []

    def add(chapter, what, family, model, seq_len, tokens, checkpoints):
        out.append(dict(chapter=chapter, what=what, family=family, model=model, seq_len=seq_len,
                        tokens=int(tokens), checkpoints=int(checkpoints)))

    with grid.placeholder_corpus():  # counts do not depend on the corpus, which may not be here yet
        stages = grid.grid_runs(b)
    for st in stages:
        first = st.configs[0]
        model = {k: v for k, v in first.model.items() if k != "family"}
        add(st.chapter, st.what, first.model["family"], model, first.seq_len, st.trained_tokens,
            sum(len(_ckpt_steps(c)) for c in st.configs))
    if b.pair is not None:
        p = b.pair
        tps = p.batch_size * p.seq_len
        for tag, family, model in (("A", "gpt2", p.model_a), ("B", "gemma3", p.model_b)):
            add("06_models_ab", f"Model {tag}", family, model, p.seq_len, _steps(p.n_tokens, tps) * tps,
                p.n_checkpoints)
        add("09_yarn", f"Model B YaRN x{p.yarn_factor} fine-tune", "gemma3", p.model_b, p.seq_len * p.yarn_factor,
            p.finetune_steps * tps, math.ceil(p.finetune_steps / p.finetune_snapshot_every))
    return out


def compute_table(b: Budget, chapters=None, peak_tflops: float = DEFAULT_PEAK_TFLOPS,
                  mfu: float = DEFAULT_MFU) -> pd.DataFrame:
    """Per chapter: runs, tokens, training FLOPs, GPU-hours at `mfu` of `peak_tflops`, and
    checkpoint disk (fp32 weights per kept checkpoint plus the newest optimizer state)."""
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
                     "checkpoint GB": (4 * params * r["checkpoints"] + 12 * params) / 1e9})
    return pd.DataFrame(rows, columns=["chapter", "run", "context", "tokens", "FLOPs", "GPU-hours", "checkpoint GB"])


def visible_gpus() -> list[str]:
    """The GPUs torch sees here (name and memory)."""
    if not torch.cuda.is_available():
        return []
    return [f"{torch.cuda.get_device_name(i)} ({torch.cuda.get_device_properties(i).total_memory / 2**30:.0f} GiB)"
            for i in range(torch.cuda.device_count())]


def plan_text(b: Budget, chapters=None, peak_tflops: float = DEFAULT_PEAK_TFLOPS, mfu: float = DEFAULT_MFU) -> str:
    """The whole plan as text: inputs (found or missing), compute per chapter and in total, GPUs."""
    chosen = set(chapters or LCCP_CHAPTERS + PAIR_CHAPTERS)
    lines = [f"Plan for budget {b.name!r}" + (f", chapters {', '.join(sorted(chosen))}" if chapters else "")]
    lines.append("\nInputs:")
    for i in inputs(b):
        if chosen & set(i.chapters):
            where = "built in" if i.path is None else str(i.path)
            lines.append(f"  [{'found' if i.found else 'MISSING'}] {i.name}: {where}")
    table = compute_table(b, chapters, peak_tflops, mfu)
    if len(table):
        per = table.groupby("chapter", sort=True)[["tokens", "FLOPs", "GPU-hours", "checkpoint GB"]].sum()
        per.loc["total"] = per.sum()
        lines.append(f"\nTraining compute (GPU-hours at {mfu:.0%} MFU of {peak_tflops:g} TFLOP/s per GPU; "
                     f"divide by the GPUs you use):")
        lines.append(per.to_string(formatters={"tokens": "{:,.0f}".format, "FLOPs": "{:.3g}".format,
                                               "GPU-hours": "{:,.3g}".format, "checkpoint GB": "{:,.1f}".format}))
    gpus = visible_gpus()
    lines.append("\nGPUs torch sees: " + (", ".join(gpus) if gpus else "none (CPU only)"))
    missing = missing_inputs(b, chosen)
    lines.append("\n" + (format_missing(missing, b) if missing else "Nothing is missing."))
    return "\n".join(lines)


def main(argv=None) -> int:
    """CLI: print the plan; exit 2 when an input is missing."""
    ap = argparse.ArgumentParser(prog="python -m nblib.book.plan", description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="toy")
    ap.add_argument("--chapters", default="", help="comma-separated chapter names (default: all)")
    ap.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_TFLOPS, help="per-GPU peak (dense bf16)")
    ap.add_argument("--mfu", type=float, default=DEFAULT_MFU)
    args = ap.parse_args(argv)
    b = get_budget(args.budget)
    names = [c.strip() for c in args.chapters.split(",") if c.strip()] or None
    allowed = LCCP_CHAPTERS + PAIR_CHAPTERS + ("01_introduction",)
    for n in names or ():
        if n not in allowed:
            raise BudgetError(f"chapter {n!r} is not allowed; allowed: {', '.join(allowed)}")
    print(plan_text(b, names, args.peak_tflops, args.mfu))
    return 2 if missing_inputs(b, names) else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
