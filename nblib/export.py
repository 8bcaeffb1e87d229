"""Export a run's checkpoint, or a merge of its checkpoints, as a Hugging Face model folder.

    python -m nblib.export RUN_DIR OUT_DIR [--step N | --merged FILE] [--force]

RUN_DIR is a run folder of the run store (`runs/<hash>/`). By default the run's final weights
are exported; `--step N` exports checkpoint N, `--merged FILE` a `.safetensors` file written by
`python -m nblib.lccp.merge` from the run's checkpoints (same parameter names), with the run's
configuration. Every checkpoint is verified against its recorded sha256 before it is read.

OUT_DIR receives
  config.json, model.safetensors, generation_config.json   LlamaForCausalLM, GPT2LMHeadModel or
      Gemma3ForCausalLM (Gemma3TextConfig), the mapping of `nblib.models.hf_twin`: the RoPE
      base the run ends with (an LCCP stage's `init.rope_base`) and YaRN as rope_parameters
  tokenizer.json, tokenizer_config.json, special_tokens_map.json   the run's `data.tokenizer`:
      a Hugging Face tokenizer.json as is ("bpe:<name>", "hf:<path>"), without a post-processor
      (nblib never adds BOS or other special tokens when encoding); "byte" as an equivalent
      byte-level tokenizer (ids 0-255 = UTF-8 bytes, <|endoftext|> = 256). Special-token strings
      inside a text are encoded as plain text (split_special_tokens), as nblib does; the EOS
      token is nblib's (one is added at the reserved id when the tokenizer.json has none).
  nblib_export.json   where it came from: run hash, step or merge file, sha256 of the weights.

The folder is assembled beside OUT_DIR and renamed into place; an existing non-empty OUT_DIR
is refused unless --force. Errors are one line (`error: ...`, exit 2).
May import nblib.store, nblib.models, nblib.data and nblib.cli; none of those imports it.

Next: `AutoModelForCausalLM.from_pretrained(OUT_DIR)` and `AutoTokenizer.from_pretrained(OUT_DIR)`
load it, and tools that read Hugging Face folders take it as is, e.g.
`lm_eval --model hf --model_args pretrained=OUT_DIR` or `vllm serve OUT_DIR`.
`load_exported(OUT_DIR)` reads an exported Gemma 3 folder back as an nblib model: the layer
layout from `layer_types` (Model B's "blog" pattern, global layers 0, 4, 8, or Hugging Face's
"hf" one, 3, 7, 11: `nblib.models.gemma3.layer_pattern_of`), the RoPE bases and any
stretch from `rope_parameters`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from nblib import __version__
from nblib.cli import run_cli
from nblib.data import get_tokenizer
from nblib.data.tokenizers import ByteTokenizer
from nblib.models import build_model
from nblib.models.gemma3 import layer_pattern_of
from nblib.models.hf_twin import GEMMA3_NAMES, HF_ARCHITECTURES, check_hf_mappable, transformers_twin
from nblib.store.atomic import atomic_write_json, file_mode
from nblib.store.checkpoint import (CKPT_DIR, CheckpointInfo, checkpoint_of, file_sha256, load_weights,
                                    step_dirname, verify_checkpoint, weights_sha256)
from nblib.store.runstore import ConfigError, Run, RunConfig

EXPORT_RECORD = "nblib_export.json"
BYTE_EOS = "<|endoftext|>"  # the byte tokenizer's EOS (id 256) in the exported tokenizer.json



# ---------------------------------------------------------------------------------------- inputs

def open_run(run_dir: str | os.PathLike) -> Run:
    """The run of a run folder (config.json + ckpt/); ValueError when `run_dir` is not one or its
    model has no Hugging Face counterpart (its family, or a config field: `check_hf_mappable`)."""
    run_dir = Path(run_dir)
    allowed = "allowed: a run folder of the run store (runs/<hash>/, holding config.json and ckpt/)"
    if not run_dir.is_dir():
        raise ValueError(f"RUN_DIR {str(run_dir)!r} is not a folder; {allowed}")
    if not (run_dir / "config.json").is_file():
        raise ValueError(f"RUN_DIR {str(run_dir)!r} has no config.json: it is not a run folder; {allowed}")
    try:
        config = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
    except (ConfigError, json.JSONDecodeError, UnicodeDecodeError, TypeError) as e:
        raise ValueError(f"RUN_DIR {str(run_dir)!r} is not a run folder: its config.json is not a run "
                         f"configuration ({' '.join(str(e).split())}); {allowed}") from None
    run = Run(run_dir.parent, config)
    run.path = run_dir  # a copied or renamed run folder is read where it is
    family = config.model["family"]
    if family not in HF_ARCHITECTURES:
        raise ValueError(f"model.family={family!r} of run {run.hash} has no Hugging Face export; "
                         f"allowed: {', '.join(HF_ARCHITECTURES)}")
    try:
        check_hf_mappable(family, config.model)
    except ValueError as e:
        raise ValueError(f"run {run.hash} cannot be exported: {e}") from None
    return run


def pick_checkpoint(run: Run, step: int | None) -> CheckpointInfo:
    """Checkpoint `step` of `run` (None: the final step), its weights verified by sha256.
    CorruptCheckpointError when that checkpoint is damaged; ValueError listing the steps
    there are when it does not exist."""
    ckpts = {c.step: c for c in run.checkpoints(report=lambda msg: None)}  # damaged ones are judged below
    target = run.config.total_steps if step is None else int(step)
    what = f"the final step {target}" if step is None else f"--step {target}"
    folder = run.path / CKPT_DIR / step_dirname(target) if target >= 0 else None
    if target not in ckpts and folder is not None and folder.exists():
        verify_checkpoint(folder, deep=True)  # raises CorruptCheckpointError: what is wrong with it
    if target not in ckpts:
        hint = " (the run has not reached it: pass --step N)" if step is None else ""
        raise ValueError(f"run {run.hash} has no checkpoint at {what}{hint}; allowed steps: "
                         f"{', '.join(map(str, sorted(ckpts))) or 'none (the run has no valid checkpoint)'}")
    verify_checkpoint(ckpts[target].path, deep=True)
    return ckpts[target]


def load_merged(run: Run, path: str | os.PathLike) -> dict:
    """The tensors of a merged .safetensors file (`python -m nblib.lccp.merge`), checked against
    the run's parameters: ValueError naming missing, unexpected, misshapen or non-float tensors."""
    path = Path(path)
    allowed = "allowed: a merge of this run's checkpoints written by python -m nblib.lccp.merge"
    if not path.is_file():
        raise FileNotFoundError(f"--merged {str(path)!r} is not a file; {allowed}")
    ckpt = checkpoint_of(path)
    if ckpt is not None:  # a checkpoint's own weights file: verified as a checkpoint
        verify_checkpoint(ckpt, deep=True)
    sd = load_weights(path)  # CorruptCheckpointError when the file is not readable safetensors
    cfg = dict(run.config.model)
    family = cfg.pop("family")
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in build_model(family, cfg).state_dict().items()}
    common = sorted(set(sd) & set(expected))
    problems = [(label, names) for label, names in (
        ("missing", sorted(set(expected) - set(sd))),
        ("unexpected", sorted(set(sd) - set(expected))),
        ("wrong shape", [f"{k} {tuple(sd[k].shape)} (run: {expected[k]})" for k in common
                         if tuple(sd[k].shape) != expected[k]]),
        ("not floating point", [f"{k} ({sd[k].dtype})" for k in common if not sd[k].is_floating_point()]),
    ) if names]
    if problems:
        text = "; ".join(f"{label} {_few(names)}" for label, names in problems)
        raise ValueError(f"--merged {str(path)!r} does not match run {run.hash}'s parameters: {text}; {allowed}")
    return sd


def _few(names: list, n: int = 4) -> str:
    return "[" + ", ".join(names[:n]) + (f", ... {len(names) - n} more" if len(names) > n else "") + "]"


# ---------------------------------------------------------------------------------------- tokenizer

TOKENIZER_PROBE = "def f(x):\n    return {'é': x}  # naïve café ✓ 日本語 🙂\r\n\tx = [1, 2]  \n\n"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table, the one the `tokenizers` ByteLevel
    pre-tokenizer applies (printable latin-1 bytes map to themselves, the rest to 256+)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(extra)}}


def hf_tokenizer(tok) -> tuple[Tokenizer, str]:
    """A `tokenizers` Tokenizer encoding text to the same ids as nblib's `tok`, and its EOS
    token. "byte": a byte-level BPE without merges (id b = byte b) plus <|endoftext|> = 256.
    A tokenizer.json: itself, minus its post-processor (nblib adds no special tokens), with an
    EOS token added at the reserved id when it has none of nblib's EOS names."""
    if isinstance(tok, ByteTokenizer):
        b2u = bytes_to_unicode()
        t = Tokenizer(models.BPE(vocab={b2u[b]: b for b in range(256)}, merges=[]))
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        t.decoder = decoders.ByteLevel()
        t.add_special_tokens([AddedToken(BYTE_EOS, special=True, normalized=False)])
        eos = BYTE_EOS
    else:
        t = Tokenizer.from_str(Path(tok.path).read_text(encoding="utf-8"))
        t.post_processor = None
        eos = tok.eos_token
        if eos is None:  # nblib reserved the id one past the vocabulary for EOS
            t.add_special_tokens([AddedToken(BYTE_EOS, special=True, normalized=False)])
            eos = BYTE_EOS
    if t.token_to_id(eos) != tok.eos_id:
        raise RuntimeError(f"exported EOS {eos!r} has id {t.token_to_id(eos)}, nblib's tokenizer {tok.eos_id}")
    t.encode_special_tokens = True
    got, want = t.encode(TOKENIZER_PROBE, add_special_tokens=False).ids, tok.encode(TOKENIZER_PROBE).tolist()
    if got != want:  # a bug, not a user error: the exported tokenizer would not be the run's
        raise RuntimeError(f"exported tokenizer encodes the probe text differently from {tok!r}")
    return t, eos


def write_tokenizer(tok, folder: Path, model_max_length: int) -> None:
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json of nblib tokenizer
    `tok` in `folder`, for `AutoTokenizer.from_pretrained(folder)`."""
    t, eos = hf_tokenizer(tok)
    t.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "bos_token": None, "pad_token": None,
              "unk_token": None, "model_max_length": int(model_max_length), "clean_up_tokenization_spaces": False,
              "split_special_tokens": True, "add_bos_token": False, "add_eos_token": False}
    atomic_write_json(folder / "tokenizer_config.json", config)
    atomic_write_json(folder / "special_tokens_map.json", {"eos_token": eos})


# ---------------------------------------------------------------------------------------- output

def check_out_dir(out: Path, force: bool, inputs=()) -> None:
    """OUT_DIR must be new or an empty folder (any folder with --force) and hold none of the inputs."""
    if out.exists() or out.is_symlink():
        if not out.is_dir() or out.is_symlink():
            raise ValueError(f"OUT_DIR {str(out)!r} exists and is not a folder; allowed: a new or empty folder")
        if any(out.iterdir()) and not force:
            raise FileExistsError(f"OUT_DIR {str(out)!r} exists and is not empty; allowed: a new or empty folder, "
                                  f"or --force to replace it")
    o = out.resolve()
    for p in inputs:
        p = Path(p).resolve()
        if p == o or o in p.parents:
            raise ValueError(f"OUT_DIR {str(out)!r} holds {str(p)!r}, which is being exported; allowed: a folder "
                             f"outside the run folder and the merge file")


def _install(tmp: Path, out: Path) -> None:
    """Rename the finished folder `tmp` onto `out` (replacing what was there)."""
    for f in tmp.iterdir():
        os.chmod(f, file_mode())  # transformers writes the weights 0600: readable like every other file
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    if out.exists():
        old = out.with_name(f".{out.name}.export-old-{os.getpid()}-{time.time_ns()}")
        os.rename(out, old)
        try:
            os.rename(tmp, out)
        except OSError:
            os.rename(old, out)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, out)


# ---------------------------------------------------------------------------------------- export

def export(run_dir: str | os.PathLike, out_dir: str | os.PathLike, step: int | None = None,
           merged: str | os.PathLike | None = None, force: bool = False) -> Path:
    """Write the Hugging Face folder of run `run_dir`'s checkpoint `step` (None: final) or of
    the merge file `merged` to `out_dir`; returns `out_dir`. See the module docstring."""
    if step is not None and merged is not None:
        raise ValueError("--step and --merged exclude each other; allowed: one of them, or neither (final weights)")
    run = open_run(run_dir)
    out = Path(out_dir)
    check_out_dir(out, force, [run.path] + ([merged] if merged is not None else []))
    if merged is None:
        ckpt = pick_checkpoint(run, step)
        state = load_weights(ckpt)
        source = {"step": ckpt.step, "tokens": ckpt.tokens, "checkpoint": str(ckpt.path.resolve()),
                  "weights_sha256": weights_sha256(ckpt.path)}
    else:
        state = load_merged(run, merged)
        source = {"merged": str(Path(merged).resolve()), "weights_sha256": file_sha256(Path(merged))}
    model = run.load_model(state_dict=state)
    tok = get_tokenizer(run.config.data["tokenizer"])
    hf = transformers_twin(model, token_ids={"eos_token_id": int(tok.eos_id), "bos_token_id": None,
                                             "pad_token_id": None})
    dtypes = {v.dtype for v in state.values() if v.is_floating_point()}
    if len(dtypes) == 1 and dtypes != {torch.float32}:  # keep the checkpoint's precision (bf16 stays bf16)
        hf = hf.to(dtypes.pop())
    del state
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.export-tmp-{os.getpid()}-{time.time_ns()}")
    tmp.mkdir()
    try:
        hf.save_pretrained(tmp)
        write_tokenizer(tok, tmp, model.config.max_seq_len)
        atomic_write_json(tmp / EXPORT_RECORD, {
            "nblib_version": __version__, "run": run.hash, "run_dir": str(run.path.resolve()),
            "label": run.config.label, "family": run.config.model["family"],
            "architecture": hf.config.architectures[0], "tokenizer": run.config.data["tokenizer"],
            "rope_base": run.config.init.get("rope_base") if run.config.init else None, **source})
        check_out_dir(out, force)  # again: another process may have filled it meanwhile
        _install(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------------------- reading back

def _rope_scaling_of(rp: dict) -> dict | None:
    """nblib rope_scaling of one transformers `rope_parameters` entry (None: plain RoPE)."""
    kind = rp.get("rope_type", "default")
    if kind == "default":
        return None
    if kind == "linear":
        return {"type": "linear", "factor": float(rp["factor"])}
    if kind == "yarn":
        return {"type": "yarn", "factor": float(rp["factor"]),
                "original_max_seq_len": int(rp["original_max_position_embeddings"]),
                "beta_fast": float(rp.get("beta_fast", 32)), "beta_slow": float(rp.get("beta_slow", 1))}
    raise ValueError(f"rope_type {kind!r} has no nblib counterpart; allowed: default, linear, yarn")


def gemma3_config_of(hf: dict) -> dict:
    """nblib Gemma3Config fields of a Gemma3ForCausalLM config.json (as `export` writes it):
    the layer layout from `layer_types` (`layer_pattern_of`), the RoPE bases and stretch from
    `rope_parameters` (a stretch on both layer types is `rope_scaling_layers="all"`, on the
    full-attention layers only "global"). ValueError for a layout or RoPE nblib cannot build."""
    windows = [None if t == "full_attention" else int(hf["sliding_window"]) for t in hf["layer_types"]]
    every, pattern = layer_pattern_of(windows)
    rp = hf["rope_parameters"]
    local, glob = rp["sliding_attention"], rp["full_attention"]
    s_local, s_global = _rope_scaling_of(local), _rope_scaling_of(glob)
    if s_local is not None and s_local != s_global:
        raise ValueError(f"sliding layers stretched as {s_local} and full ones as {s_global}; nblib stretches every "
                         "layer alike or the global layers only")
    return {"vocab_size": int(hf["vocab_size"]), "d_model": int(hf["hidden_size"]),
            "n_layers": int(hf["num_hidden_layers"]), "n_heads": int(hf["num_attention_heads"]),
            "n_kv_heads": int(hf["num_key_value_heads"]), "head_dim": int(hf["head_dim"]),
            "d_ff": int(hf["intermediate_size"]), "max_seq_len": int(hf["max_position_embeddings"]),
            "window": int(hf["sliding_window"]), "global_every": every, "layer_pattern": pattern,
            "rope_local_base": float(local["rope_theta"]), "rope_global_base": float(glob["rope_theta"]),
            "norm_eps": float(hf["rms_norm_eps"]), "rope_scaling": s_global,
            "rope_scaling_layers": "all" if s_local is not None or s_global is None else "global"}


def load_exported(folder: str | os.PathLike):
    """The nblib model of an exported Gemma3ForCausalLM folder (`export`), eval mode: its
    config from config.json (`gemma3_config_of`) and its weights from model.safetensors under
    nblib's names (the tied lm_head dropped). Round trip: export then load_exported gives the
    run's model, whichever layer pattern it has."""
    from safetensors.torch import load_file  # noqa: PLC0415

    folder = Path(folder)
    hf = json.loads((folder / "config.json").read_text())
    arch = (hf.get("architectures") or [None])[0]
    if arch != HF_ARCHITECTURES["gemma3"]:
        raise ValueError(f"{str(folder)!r} holds {arch!r}; load_exported reads {HF_ARCHITECTURES['gemma3']} folders")
    model = build_model("gemma3", gemma3_config_of(hf))
    sd = load_file(str(folder / "model.safetensors"))
    back = [(b, a) for a, b in GEMMA3_NAMES]
    state = {}
    for k, v in sd.items():
        if k == "lm_head.weight":
            continue
        name = "norm.weight" if k == "model.norm.weight" else k
        for a, b in back:
            name = name.replace(a, b)
        state[name] = v.float() if v.is_floating_point() else v
    model.load_state_dict(state, strict=True)
    return model.eval()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nblib.export",
                                description="Export a run's checkpoint (or a merge of its checkpoints) as a Hugging "
                                            "Face model folder: config, safetensors weights, tokenizer.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="run folder of the run store (runs/<hash>/)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="folder to write (new or empty; --force replaces it)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, help="export checkpoint N (default: the run's final weights)")
    which.add_argument("--merged", metavar="FILE", help="export a .safetensors merge (python -m nblib.lccp.merge) "
                                                        "of this run's checkpoints")
    p.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists and is not empty")
    return p


def main(argv=None) -> int:
    """CLI: python -m nblib.export RUN_DIR OUT_DIR [--step N | --merged FILE] [--force]."""
    args = _parser().parse_args(argv)
    import transformers  # noqa: PLC0415 (optional dependency: only the export needs it)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    out = export(args.run_dir, args.out_dir, step=args.step, merged=args.merged, force=args.force)
    record = json.loads((out / EXPORT_RECORD).read_text())
    what = f"merge {args.merged}" if args.merged else f"step {record['step']}"
    print(f"exported run {record['run']} ({record['family']}, {what}) as {record['architecture']} -> {out}\n"
          f"load it with transformers.AutoModelForCausalLM.from_pretrained({str(out)!r}) and AutoTokenizer")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
