"""GPU check: does the full budget's code run on this GPU, how fast, and are its numbers sane?

Minutes on one GPU that answer this before hundreds of GPU-hours are spent on the full budget.

    python -m benchmarks.gpu_check                        # full shapes, one GPU, ~2-5 minutes
    python -m benchmarks.gpu_check --context short        # train at 4K instead of the 32K LCCP context
    python -m benchmarks.gpu_check --scales S1,S3 --steps 10 --peak-tflops 989
    python -m benchmarks.gpu_check --max-memory-frac 0.55 # e.g. behave like an 80 GB card on an H200
    python -m benchmarks.gpu_check --reference data/models/Llama-3.1-8B   # the real LongPPL reference
    python -m benchmarks.gpu_check --dry-run              # shapes, N, FLOPs/token; allocates nothing
    python -m benchmarks.gpu_check --tiny                 # the same code at smoke shapes, any device

Three sections (`--only` picks some):

1. train: every full scale S1-S5 (nblib.budgets `full`) at its real shape and context,
   random tokens, micro-batch 1 sequence, bf16 autocast on CUDA and the real optimizer
   (nblib.training.train.make_optimizers: Muon + AdamW, clipping at 1.0): `--warmup` steps,
   then `--steps` timed ones. Reports tokens/s (one sequence per optimizer step) and tokens/s
   at the scale's real global batch reached by gradient accumulation on this one GPU (the
   optimizer step amortised over the batch), MFU = tokens/s x flops_per_token / peak, peak
   memory, and the GPU-hours the book's grid needs at that context on one such GPU. A scale
   that runs out of memory is reported as "does not fit at micro-batch 1", not a failure.
2. longppl: a LongPPL reference (a small random-init LlamaForCausalLM with the project's
   pinned BPE, or `--reference PATH` to a local Hugging Face folder) annotates `--docs`
   documents of the long context built from the Python stdlib sources, and the smallest
   selected scale (random init, byte tokens) is evaluated on them: nblib.metrics.annotate
   and evaluate, the functions the book calls. A random reference selects no key tokens at
   the paper's thresholds, so they are loosened as at the smoke budget (loss < 10, delta > 0).
3. decode: the Gemma blog's Models A and B at their full shapes (random init, fp32) generate
   `--new-tokens` greedily with the KV cache and without it; the tokens must be identical. The
   prompt ends before Model B's window and generation crosses it, so the ring buffer is used.

Writes benchmarks/results/gpu_check.json (`--tiny`: gpu_check_tiny.json; `--out` elsewhere)
with a manifest beside it (gpu_check.manifest.json: the command, commit, time and machine),
and prints a summary. Exit status 1 when a correctness check fails (non-finite training loss,
non-finite LongPPL, decode mismatch, a section that raised), 2 on a usage error, else 0.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import sys
import time
import traceback
from contextlib import nullcontext
from dataclasses import asdict, replace
from pathlib import Path

import torch

from nblib.budgets import SCALES, get_budget
from nblib.models import build_model
from nblib.probes.results import command_line, write_manifest
from nblib.store.atomic import atomic_write_json
from nblib.training.train import build_model_from_config, make_optimizers

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
DEFAULT_OUT, DEFAULT_TINY_OUT = OUT / "gpu_check.json", OUT / "gpu_check_tiny.json"
SECTIONS = ("train", "longppl", "decode")
PLANTS = ("decode-mismatch", "nonfinite-loss")  # deliberate faults, for the tests of the exit status

# Dense (no sparsity) bf16 tensor-core peaks from the vendors' datasheets, FLOP/s. Matched as
# substrings of torch.cuda.get_device_name(), first match wins (so "H200" before "H20",
# "H100 PCIe" before "H100", "L40S" before "L40" before "L4").
PEAK_BF16 = (
    ("GH200", 989e12), ("H200", 989e12), ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H100", 989e12),
    ("H800 PCIe", 756e12), ("H800", 989e12), ("H20", 148e12), ("B200", 2250e12), ("B100", 1750e12),
    ("A100", 312e12), ("A800", 312e12), ("L40S", 362e12), ("L40", 181e12), ("L4", 121e12),
    ("RTX 4090", 165e12), ("MI300X", 1307e12),
)
# The LongPPL reference when no --reference is given: random init, no download.
REF_SHAPE = {"tiny": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2),
             "full": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
                          num_key_value_heads=2)}


# ---------------------------------------------------------------------------------------
# peak, shapes, budget shares
# ---------------------------------------------------------------------------------------
def peak_for(device_name: str | None) -> tuple[float | None, str | None]:
    """(dense bf16 peak FLOP/s, the table entry matched) for a device name, (None, None) if unknown."""
    for key, flops in PEAK_BF16:
        if device_name and key.lower() in device_name.lower():
            return flops, key
    return None, None


def train_shape(b, scale: str, context: str) -> dict:
    """The run config `model` of a scale as the book trains it at a context (RoPE base 5e5 at
    the LCCP context, App. A.3's ABF)."""
    m = {"family": "llama", **b.scale(scale).model}
    if context == "long":
        m["rope_base"] = b.rope_bases[1]
    return m


def seq_len_of(b, context: str) -> int:
    return b.long_seq_len if context == "long" else b.short_seq_len


def grid_tokens(b, scale: str, context: str) -> int:
    """Tokens the book's grid trains at `scale` at that context (chapters 3-4), summed over the
    run configs of nblib.lccp.grid.grid_runs: short, the stable trunk and its WSD decays; long,
    the Linear-Decay runs and the Constant trajectories. A WSD decay's trunk steps count once."""
    from nblib.lccp import grid

    seq_len = seq_len_of(b, context)
    with grid.placeholder_corpus():  # counting needs no corpus (the full one may not be here)
        stages = grid.grid_runs(b)
    return sum(grid.trained_tokens(c) for st in stages if st.scale == scale for c in st.configs
               if c.seq_len == seq_len)


def static_bytes(model) -> int:
    """fp32 weights + gradients + optimizer state (Muon: one momentum per hidden matrix,
    AdamW: two moments for the rest); activations not included."""
    from nblib.training.train import split_params

    muon, decay, no_decay = split_params(model)
    n_muon = sum(p.numel() for p in muon)
    n_adam = sum(p.numel() for p in decay + no_decay)
    return 4 * (2 * (n_muon + n_adam) + n_muon + 2 * n_adam)


def describe_scale(b, scale: str, context: str, peak: float | None) -> dict:
    """What the dry run prints: shapes and counts from the meta device (nothing allocated)."""
    T = seq_len_of(b, context)
    with torch.device("meta"):
        shape = train_shape(b, scale, context)
        model = build_model(shape.pop("family"), shape)
    spec = b.scale(scale)
    f = model.flops_per_token(T, training=True)
    tokens = grid_tokens(b, scale, context)
    return {"scale": scale, "n_params_non_emb": model.n_params(non_embedding=True),
            "n_params": model.n_params(non_embedding=False), "seq_len": T,
            "global_batch": spec.batch_long if context == "long" else spec.batch_short,
            "train_flops_per_token": f, "grid_tokens": tokens, "grid_flops": tokens * f,
            "gpu_hours_at_40pct_mfu": tokens * f / (0.4 * peak) / 3600 if peak else None,
            "static_gb": static_bytes(model) / 1e9, "shape": {k: v for k, v in spec.model.items()}}


# ---------------------------------------------------------------------------------------
# 1. training throughput
# ---------------------------------------------------------------------------------------
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def train_scale(b, scale: str, context: str, device: torch.device, warmup: int, steps: int, peak: float | None,
                plants=()) -> dict:
    """Train `warmup + steps` steps of one scale at micro-batch 1 and time the last `steps`."""
    row = describe_scale(b, scale, context, peak)
    del row["gpu_hours_at_40pct_mfu"]
    T, micro = row["seq_len"], 1
    row.update(micro_batch=micro, fits=True)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    losses, t_fb, t_opt, oom = [], [], [], None
    try:
        torch.manual_seed(0)
        with torch.device(device):  # initialised in place: no CPU copy of a 1.3B-parameter model
            model = build_model_from_config(train_shape(b, scale, context))
        opts = make_optimizers(model, {"name": "muon+adamw"}, b.scale(scale).lr / 10)  # the LCCP LR (App. A.3)
        x = torch.randint(0, row["shape"]["vocab_size"], (micro, T + 1), device=device,
                          generator=torch.Generator(device=device).manual_seed(0))
        inp, tgt = x[:, :-1], x[:, 1:]
        for i in range(warmup + steps):
            _sync(device)
            t0 = time.perf_counter()
            with amp:
                _, loss = model(inp, targets=tgt)
            if "nonfinite-loss" in plants:
                loss = loss * float("nan")
            loss.backward()
            losses.append(loss.detach().float().item())  # synchronises, as the trainer's logging does
            t1 = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            for o in opts.values():
                o.step()
            for o in opts.values():
                o.zero_grad(set_to_none=True)
            _sync(device)
            if i >= warmup:
                t_fb.append(t1 - t0)
                t_opt.append(time.perf_counter() - t1)
            if not math.isfinite(losses[-1]):
                break
    except torch.OutOfMemoryError as e:
        oom = str(e).splitlines()[0]
    model = opts = x = inp = tgt = loss = None  # noqa: F841 (release before measuring and freeing)
    if device.type == "cuda":
        row["peak_memory_gb"] = torch.cuda.max_memory_allocated(device) / 1e9
    _free(device)
    if oom is not None:
        row.update(fits=False, loss_finite=None, tok_s=None, mfu=None, note=f"does not fit at micro-batch {micro} "
                   f"({T} tokens): {oom}")
        return row
    finite = bool(losses) and all(math.isfinite(v) for v in losses)
    row.update(loss_first=losses[0] if losses else None, loss_last=losses[-1] if losses else None, loss_finite=finite,
               steps_timed=len(t_fb), warmup_steps=warmup)
    if not t_fb:  # stopped in warmup by a non-finite loss
        row.update(tok_s=None, mfu=None)
        return row
    fb, op = sum(t_fb) / len(t_fb), sum(t_opt) / len(t_opt)
    B = row["global_batch"]
    tok_s = micro * T / (fb + op)
    tok_s_batch = B * T / (B / micro * fb + op)  # gradient accumulation: one optimizer step per global batch
    f = row["train_flops_per_token"]
    row.update(fwd_bwd_s=fb, optimizer_s=op, tok_s=tok_s, tok_s_global_batch=tok_s_batch,
               mfu=tok_s * f / peak if peak else None, mfu_global_batch=tok_s_batch * f / peak if peak else None,
               grid_gpu_hours=row["grid_tokens"] / tok_s_batch / 3600)
    return row


# ---------------------------------------------------------------------------------------
# 2. LongPPL
# ---------------------------------------------------------------------------------------
def stdlib_documents(encode, n_docs: int, doc_len: int) -> list[str]:
    """n_docs texts of about doc_len tokens (by `encode`: text -> (ids, offsets)), each a run of
    consecutive Python stdlib source files cut at a token boundary."""
    files = sorted(Path(os.__file__).parent.glob("*.py"))
    docs, text, k = [], "", 0
    while len(docs) < n_docs:
        if k == len(files):
            raise RuntimeError(f"the stdlib sources hold fewer than {n_docs} documents of {doc_len} tokens")
        text += files[k].read_text(encoding="utf-8", errors="replace") + "\n\n"
        k += 1
        ids, off = encode(text)
        if len(ids) >= doc_len:
            docs.append(text[:int(off[doc_len - 1][1])])
            text = ""
    return docs


def longppl_check(b, device: torch.device, n_docs: int, reference: str | None, eval_scale: str, tiny: bool) -> dict:
    """Annotate stdlib documents with a reference model and evaluate a scale on them."""
    from nblib.data.tokenizers import ByteTokenizer
    from nblib.metrics import HFScorer, annotate, evaluate

    t0 = time.perf_counter()
    if reference:
        dtype = torch.bfloat16 if device.type == "cuda" else None
        scorer = HFScorer.from_pretrained(reference, dtype=dtype, device=device)
        spec, ref_desc = replace(b.longppl, n_docs=n_docs), f"{reference} ({'bf16' if dtype else 'fp32'})"
    else:
        import transformers
        from tokenizers import Tokenizer
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

        from nblib.data.bpe import bpe_path

        transformers.logging.set_verbosity_error()
        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(str(bpe_path("stdlib-1024"))),
                                      eos_token="<|endoftext|>")
        shape = REF_SHAPE["tiny" if tiny else "full"]
        cfg = LlamaConfig(vocab_size=len(tok), max_position_embeddings=2 * b.longppl.min_doc_len,
                          bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, **shape)
        torch.manual_seed(0)
        with torch.device(device):
            ref = LlamaForCausalLM(cfg)
        scorer = HFScorer(ref.eval(), tok)
        # a random reference has loss ~ ln(V) everywhere: the smoke budget's loosened thresholds
        spec = replace(b.longppl, n_docs=n_docs, full_loss_max=10.0, long_delta_min=0.0)
        ref_desc = (f"random-init LlamaForCausalLM (d={shape['hidden_size']}, {shape['num_hidden_layers']} layers, "
                    f"vocab {len(tok)}, fp32) with the pinned BPE stdlib-1024")
    texts = stdlib_documents(scorer.encode_with_offsets, n_docs, b.longppl.min_doc_len)
    n_ref = sum(len(scorer.encode_with_offsets(t)[0]) for t in texts)
    t1 = time.perf_counter()
    _sync(device)
    ann = annotate(scorer, None, texts, spec)
    _sync(device)
    t2 = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(device):
        model = build_model_from_config(train_shape(b, eval_scale, "long"))
    res = evaluate(model, ByteTokenizer(), texts, ann, max_len=b.long_seq_len)
    _sync(device)
    t3 = time.perf_counter()
    out = {"reference": ref_desc, "spec": asdict(spec), "n_docs": len(texts), "ref_tokens": n_ref,
           "evaluated": f"{eval_scale} (random init, byte tokens, max_len {b.long_seq_len})",
           "setup_s": t1 - t0, "annotate_s": t2 - t1, "annotate_tok_s": n_ref / (t2 - t1), "evaluate_s": t3 - t2,
           "evaluate_tok_s": res["n_tokens"] / (t3 - t2), "n_long_ref": int(sum(ann.n_long_ref)),
           "n_short_ref": int(sum(ann.n_short_ref)), **{k: res[k] for k in ("long_ppl", "short_ppl", "n_long",
                                                                             "n_short", "n_tokens")}}
    out["finite"] = bool(math.isfinite(res["long_ppl"]) and math.isfinite(res["short_ppl"]))
    del scorer, model
    _free(device)
    return out


# ---------------------------------------------------------------------------------------
# 3. decode with and without the KV cache
# ---------------------------------------------------------------------------------------
def compare_tokens(with_cache: torch.Tensor, without_cache: torch.Tensor, prompt_len: int) -> dict:
    """{"match", "first_mismatch" (index among the new tokens, or None)} of two (B, T) outputs."""
    a, c = with_cache[:, prompt_len:].cpu(), without_cache[:, prompt_len:].cpu()
    if a.shape != c.shape:
        return {"match": False, "first_mismatch": 0}
    diff = (a != c).any(0).nonzero()
    return {"match": diff.numel() == 0, "first_mismatch": int(diff[0]) if diff.numel() else None}


def _roll_logits(module, args, output):
    """Planted fault for the tests: the uncached path (model.forward) picks the next token id."""
    logits, loss = output
    return logits.roll(1, dims=-1), loss


def decode_check(b, device: torch.device, new_tokens: int, plants=()) -> list[dict]:
    """Models A and B: greedy generation with and without the KV cache, timed, compared."""
    pair, rows = b.pair, []
    torch.set_float32_matmul_precision("highest")  # no TF32: both paths in true fp32
    for name, family, cfg in (("A", "gpt2", pair.model_a), ("B", "gemma3", pair.model_b)):
        torch.manual_seed(0)
        with torch.device(device):
            model = build_model(family, dict(cfg)).eval()
        model.requires_grad_(False)
        window = cfg.get("window") or pair.seq_len // 2
        n_new = min(new_tokens, pair.seq_len - 1)
        prompt = max(1, min(pair.seq_len - n_new, window - n_new // 2))  # generation crosses B's window
        idx = torch.randint(0, cfg["vocab_size"], (1, prompt), generator=torch.Generator().manual_seed(1)).to(device)
        model.generate(idx, 2, temperature=0)  # warm-up (kernels, allocator)
        model.generate(idx, 2, temperature=0, use_cache=False)
        _sync(device)
        t0 = time.perf_counter()
        cached = model.generate(idx, n_new, temperature=0)
        _sync(device)
        t1 = time.perf_counter()
        hook = model.register_forward_hook(_roll_logits) if "decode-mismatch" in plants else None
        uncached = model.generate(idx, n_new, temperature=0, use_cache=False)
        _sync(device)
        t2 = time.perf_counter()
        if hook is not None:
            hook.remove()
        cmp = compare_tokens(cached, uncached, prompt)
        if not cmp["match"]:  # a near-tie of the top two logits would explain a flip; a bug would not
            with torch.no_grad():
                top2 = model(cached[:, :prompt + cmp["first_mismatch"]])[0][0, -1].float().topk(2).values
            cmp["top2_gap_at_mismatch"] = float(top2[0] - top2[1])
        rows.append({"model": name, "family": family, "n_params": model.n_params(non_embedding=False),
                     "prompt": prompt, "new_tokens": n_new, "window": cfg.get("window"), "dtype": "float32",
                     "tok_s_cache": n_new / (t1 - t0), "tok_s_no_cache": n_new / (t2 - t1), **cmp})
        del model
        _free(device)
    return rows


# ---------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------
def _fmt(v, spec=",.0f", none="-"):
    if v is None:
        return none
    return format(v, spec[:-1]) + "%" if spec.endswith("%") else format(v, spec)


def summary(res: dict) -> str:
    peak = (f"peak {res['peak_tflops']:.0f} TFLOP/s bf16 ({res['peak_source']})" if res["peak_tflops"]
            else "peak unknown: MFU null (give --peak-tflops)")
    lines = [f"GPU check ({res['mode']}) on {res['device']['name']}: torch {res['torch']}, CUDA {res['cuda']}; {peak}"]
    if res.get("train"):
        amp = res["device"]["type"] == "cuda"
        lines += ["", f"train at {res['seq_len']} tokens, micro-batch 1, bf16 autocast={amp}, Muon+AdamW:",
                  f"{'scale':<6}{'N':>13}{'tok/s':>11}{'MFU':>8}{'tok/s@GBS':>11}{'MFU@GBS':>9}{'mem GB':>8}"
                  f"{'loss':>8}{'grid GPU-h':>12}"]
        for r in res["train"]:
            if "error" in r:
                lines.append(f"{r['scale']:<6} ERROR {r['error']}")
                continue
            if not r["fits"]:
                lines.append(f"{r['scale']:<6}{r['n_params_non_emb']:>13,} {r['note'][:90]}")
                continue
            mfu = _fmt(r["mfu"] and 100 * r["mfu"], ".1f%")
            mfu_b = _fmt(r.get("mfu_global_batch") and 100 * r["mfu_global_batch"], ".1f%")
            lines.append(f"{r['scale']:<6}{r['n_params_non_emb']:>13,}{_fmt(r['tok_s']):>11}{mfu:>8}"
                         f"{_fmt(r.get('tok_s_global_batch')):>11}{mfu_b:>9}{_fmt(r.get('peak_memory_gb'), '.1f'):>8}"
                         f"{_fmt(r['loss_last'], '.3f'):>8}{_fmt(r.get('grid_gpu_hours'), ',.1f'):>12}")
    lp = res.get("longppl")
    if lp:
        lines += [""]
        if "error" in lp:
            lines.append(f"longppl: ERROR {lp['error']}")
        else:
            lines.append(f"longppl: {lp['n_docs']} docs, {lp['ref_tokens']:,} reference tokens; annotate "
                         f"{lp['annotate_s']:.1f} s ({lp['annotate_tok_s']:,.0f} tok/s), "
                         f"evaluate {lp['evaluate_s']:.1f} s; "
                         f"LongPPL {lp['long_ppl']:.4g} ({lp['n_long']} tokens), ShortPPL {lp['short_ppl']:.4g} "
                         f"({lp['n_short']}); finite {lp['finite']}")
    for r in res.get("decode") or []:
        if "error" in r:
            lines.append(f"decode: ERROR {r['error']}")
            continue
        lines.append(f"decode {r['model']} ({r['family']}, {r['n_params']:,} params): prompt {r['prompt']} + "
                     f"{r['new_tokens']} new, {r['tok_s_cache']:,.1f} tok/s with cache, {r['tok_s_no_cache']:,.1f} "
                     f"without; same tokens {r['match']}")
    bad = [k for k, v in res["checks"].items() if not v]
    lines += ["", f"checks: {'all passed' if not bad else 'FAILED: ' + ', '.join(bad)}; wall {res['wall_s']:.1f} s"]
    return "\n".join(lines)


def dry_run(b, scales, context: str, peak: float | None, peak_src: str | None) -> int:
    print(f"dry run, budget {b.name}, context {context} ({seq_len_of(b, context)} tokens); shapes on the meta device")
    print(f"{'scale':<6}{'N':>14}{'params':>15}{'FLOPs/token':>14}{'grid tokens':>18}{'grid FLOPs':>12}"
          f"{'static GB':>11}{'GPU-h @40%':>12}")
    for s in scales:
        r = describe_scale(b, s, context, peak)
        print(f"{s:<6}{r['n_params_non_emb']:>14,}{r['n_params']:>15,}{r['train_flops_per_token']:>14.4g}"
              f"{r['grid_tokens']:>18,}{r['grid_flops']:>12.3g}{r['static_gb']:>11.1f}"
              f"{_fmt(r['gpu_hours_at_40pct_mfu'], ',.0f'):>12}")
    with torch.device("meta"):
        for name, fam, cfg in (("A", "gpt2", b.pair.model_a), ("B", "gemma3", b.pair.model_b)):
            print(f"decode model {name} ({fam}): {build_model(fam, dict(cfg)).n_params(non_embedding=False):,} params")
    print(f"peak: {_fmt(peak and peak / 1e12, '.0f')} TFLOP/s ({peak_src or 'unknown: give --peak-tflops'}); "
          f"static GB = fp32 weights + grads + Muon/AdamW state, activations not included")
    return 0


def _strict(obj):
    """Non-finite floats as null, so the file is strict JSON (the `finite` flags keep the fact)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strict(v) for v in obj]
    return obj


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check", description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="the smoke budget's shapes: the same code in seconds, on "
                                                        "any device")
    ap.add_argument("--dry-run", action="store_true", help="print shapes, N and FLOPs/token; allocate nothing")
    ap.add_argument("--scales", default=",".join(SCALES), help="comma-separated subset of S1..S5")
    ap.add_argument("--context", choices=("long", "short"), default="long",
                    help="long: the LCCP context (32K at full); short: the 4K stage")
    ap.add_argument("--steps", type=int, default=None, help="timed training steps (default 5, --tiny 2)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 3, --tiny 1)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {', '.join(SECTIONS)}")
    ap.add_argument("--docs", type=int, default=None, help="LongPPL documents (default 4, --tiny 2)")
    ap.add_argument("--reference", default=None, help="local Hugging Face model folder as the LongPPL reference")
    ap.add_argument("--new-tokens", type=int, default=None, help="tokens generated per model (default 64, --tiny 16)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 peak of the device, TFLOP/s")
    ap.add_argument("--max-memory-frac", type=float, default=None,
                    help="cap this process at a fraction of the GPU's memory (emulate a smaller card)")
    ap.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's, --tiny 1)")
    ap.add_argument("--out", default=None, help=f"result JSON (default {DEFAULT_OUT.relative_to(ROOT)}, "
                                                f"--tiny {DEFAULT_TINY_OUT.relative_to(ROOT)})")
    ap.add_argument("--plant", choices=PLANTS, action="append", default=[], help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    def usage(msg):
        print(f"gpu_check: {msg}", file=sys.stderr)
        return 2

    scales = [s.strip() for s in a.scales.split(",") if s.strip()]
    sections = [s.strip() for s in a.only.split(",") if s.strip()]
    if not scales or any(s not in SCALES for s in scales):
        return usage(f"--scales={a.scales!r}; allowed: a comma-separated subset of {', '.join(SCALES)}")
    if not sections or any(s not in SECTIONS for s in sections):
        return usage(f"--only={a.only!r}; allowed: a comma-separated subset of {', '.join(SECTIONS)}")
    steps = a.steps if a.steps is not None else (2 if a.tiny else 5)
    warmup = a.warmup if a.warmup is not None else (1 if a.tiny else 3)
    docs = a.docs if a.docs is not None else (2 if a.tiny else 4)
    new_tokens = a.new_tokens if a.new_tokens is not None else (16 if a.tiny else 64)
    if steps < 1 or warmup < 0 or docs < 1 or new_tokens < 1:
        return usage("--steps, --docs and --new-tokens must be >= 1, --warmup >= 0")
    if a.max_memory_frac is not None and not 0 < a.max_memory_frac <= 1:
        return usage(f"--max-memory-frac={a.max_memory_frac}; allowed: a number in (0, 1]")
    if a.peak_tflops is not None and not a.peak_tflops > 0:
        return usage(f"--peak-tflops={a.peak_tflops}; allowed: a number > 0")
    out = Path(a.out) if a.out else (DEFAULT_TINY_OUT if a.tiny else DEFAULT_OUT)
    if a.tiny and out.resolve() == DEFAULT_OUT.resolve():
        return usage(f"--tiny would overwrite the real result {DEFAULT_OUT.relative_to(ROOT)}; give another --out")
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        return usage("--device cuda, but torch sees no CUDA device")
    b = get_budget("smoke" if a.tiny else "full")

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({platform.machine()})"
    if a.peak_tflops is not None:
        peak, peak_src = a.peak_tflops * 1e12, "--peak-tflops"
    else:
        peak, peak_src = peak_for(name) if device.type == "cuda" else (None, None)
        peak_src = f"table: {peak_src}" if peak_src else None
    if a.dry_run:
        return dry_run(b, scales, a.context, peak, peak_src)
    if not a.tiny and device.type != "cuda":
        return usage("the full shapes at 32K tokens need a GPU (hours on a CPU); use --tiny, or --dry-run")
    if peak is None:
        print(f"gpu_check: no known bf16 peak for {name!r}: MFU is reported as null (give --peak-tflops)",
              file=sys.stderr)
    if a.threads or a.tiny:
        torch.set_num_threads(a.threads or 1)
    if a.max_memory_frac is not None and device.type == "cuda":
        torch.cuda.set_per_process_memory_fraction(a.max_memory_frac, device)

    t_start = time.perf_counter()
    res = {"benchmark": "gpu_check", "mode": "tiny" if a.tiny else "full", "budget": b.name,
           "date": time.strftime("%Y-%m-%d %H:%M"),
           "device": {"type": device.type, "name": name,
                      "memory_gb": torch.cuda.get_device_properties(device).total_memory / 1e9
                      if device.type == "cuda" else None, "max_memory_frac": a.max_memory_frac},
           "torch": torch.__version__, "cuda": torch.version.cuda, "peak_tflops": peak and peak / 1e12,
           "peak_source": peak_src or "unknown (MFU null)", "context": a.context, "seq_len": seq_len_of(b, a.context),
           "threads": torch.get_num_threads(),
           "args": {k: v for k, v in vars(a).items() if k != "plant"}, "planted_faults": a.plant}
    checks: dict = {}

    def section(key, fn):
        try:
            return fn()
        except Exception as e:  # a section that raises is a failed check; the others still run
            traceback.print_exc()
            _free(device)
            checks[f"{key}_ran"] = False
            return {"error": f"{type(e).__name__}: {e}"}

    if "train" in sections:
        res["train"] = []
        for s in scales:
            r = section(f"train_{s}", lambda: train_scale(b, s, a.context, device, warmup, steps, peak, a.plant))
            r.setdefault("scale", s)
            res["train"].append(r)
            if r.get("fits") and "error" not in r:
                checks[f"train_{s}_loss_finite"] = r["loss_finite"]
            if r.get("tok_s"):
                msg = f"{r['tok_s']:,.0f} tok/s, loss {r['loss_last']:.3f}"
            else:
                msg = r.get("error") or r.get("note") or f"loss not finite ({r.get('loss_last')})"
            print(f"train {s}: {msg}", flush=True)
    if "longppl" in sections:
        res["longppl"] = section("longppl", lambda: longppl_check(b, device, docs, a.reference, scales[0], a.tiny))
        if "error" not in res["longppl"]:
            checks["longppl_finite"] = res["longppl"]["finite"]
        print("longppl: done", flush=True)
    if "decode" in sections:
        rows = section("decode", lambda: decode_check(b, device, new_tokens, a.plant))
        res["decode"] = rows if isinstance(rows, list) else [rows]
        for r in res["decode"]:
            if "error" not in r:
                checks[f"decode_{r['model']}_match"] = r["match"]
    res["checks"] = checks
    res["ok"] = all(checks.values())
    res["wall_s"] = time.perf_counter() - t_start
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, _strict(json.loads(json.dumps(res, default=str))))
    write_manifest([out], out.parent / f"{out.stem}.manifest.json", module="benchmarks.gpu_check",
                   command=command_line("python -m benchmarks.gpu_check", argv))
    print(summary(res))
    print(f"wrote {out}")
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
