"""Benchmark: prefill and decode speed of Models A and B with and without the KV cache, next
to Hugging Face `transformers` at the same shapes, in the same run (the Gemma blog,
"Generating text with a KV cache").

    python -m benchmarks.bench_decode [--new-tokens 16] [--threads 2]

Model A is GPT-2 124M, Model B the Gemma 3-style 113M; both have random weights (speed does
not depend on them) and run in fp32 on this machine's CPU. For batch {1, 8} x prompt
{128, 512} it measures:
- prefill: one forward pass over the prompt that fills the cache (tokens/s);
- decode with the cache: each step one token per sequence (tokens/s, ms per step, and the
  bytes a step reads: every weight once plus the batch's KV cache);
- decode without the cache: each step recomputes the whole sequence;
- `transformers`: GPT2LMHeadModel and Gemma3ForCausalLM of the same configuration, the
  same prefill-then-step loop over its own cache, and `generate()` end to end against
  ours.
Every timing is the best of `--repeats` runs. Greedy tokens of ours and of `transformers`
must agree (the weights are copied over), so both sides generate the same text.

Writes benchmarks/results/bench_decode.json and .md (chapter 7 shows them), and
bench_decode.manifest.json: the command, commit, time and machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

from nblib.models import build_model, config_to_dict
from nblib.models.gemma3 import Gemma3Config
from nblib.models.gpt2 import GPT2Config
from nblib.models.hf_twin import transformers_twin
from nblib.probes.results import command_line, write_manifest
from nblib.store.atomic import atomic_write_json, atomic_write_text

OUT = Path(__file__).resolve().parent / "results"
SETTINGS = [(1, 128), (1, 512), (8, 128), (8, 512)]


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


@torch.inference_mode()
def ours_phases(model, idx, new: int):
    """(prefill seconds, decode seconds for `new` steps, tokens) with our KV cache."""
    cache = model.init_kv_cache(idx.size(0), idx.size(1) + new)
    t0 = time.perf_counter()
    logits = model.prefill(idx, cache, last_only=True)[:, -1]
    t1 = time.perf_counter()
    toks = []
    for _ in range(new):
        nxt = logits.argmax(-1, keepdim=True)
        toks.append(nxt)
        logits = model.decode_step(nxt, cache)[:, -1]
    return t1 - t0, time.perf_counter() - t1, torch.cat(toks, 1)


@torch.inference_mode()
def hf_phases(hf, idx, new: int):
    """The same loop over transformers' own cache."""
    t0 = time.perf_counter()
    out = hf(idx, use_cache=True, logits_to_keep=1)  # as its generate() does
    t1 = time.perf_counter()
    past, logits, toks = out.cache, out.logits[:, -1], []
    for _ in range(new):
        nxt = logits.argmax(-1, keepdim=True)
        toks.append(nxt)
        out = hf(nxt, cache=past, use_cache=True)
        past, logits = out.cache, out.logits[:, -1]
    return t1 - t0, time.perf_counter() - t1, torch.cat(toks, 1)


def step_bytes(model, batch: int, tokens: int) -> int:
    """Bytes one decode step reads: every weight once (shared by the batch; a learned
    position table contributes one row) plus the KV cache of every sequence."""
    weights = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if n != "wpe.weight")
    return weights + model.kv_cache_bytes(tokens, batch_size=batch)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_decode", description=__doc__.splitlines()[0])
    ap.add_argument("--new-tokens", type=int, default=16, help="tokens generated per setting (with the cache)")
    ap.add_argument("--no-cache-tokens", type=int, default=4, help="tokens generated without the cache")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    import transformers

    rows = []
    models = {"A (GPT-2 124M)": ("gpt2", GPT2Config.gpt2_124m()), "B (Gemma 3-style 113M)": ("gemma3",
                                                                                           Gemma3Config.gemma3_113m())}
    for name, (family, cfg) in models.items():
        torch.manual_seed(0)
        model = build_model(family, config_to_dict(cfg)).eval()
        hf = transformers_twin(model)
        for batch, prompt in SETTINGS:
            idx = torch.randint(0, cfg.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(1))
            _, (pre, dec, toks) = best_of(lambda: ours_phases(model, idx, a.new_tokens), a.repeats)
            pre = min(best_of(lambda: ours_phases(model, idx, a.new_tokens)[0], 1)[1], pre)
            _, (hpre, hdec, htoks) = best_of(lambda: hf_phases(hf, idx, a.new_tokens), a.repeats)
            t_nc, _ = best_of(lambda: model.generate(idx, a.no_cache_tokens, temperature=0, use_cache=False), 1)
            t_gen, gen = best_of(lambda: model.generate(idx, a.new_tokens, temperature=0), a.repeats)
            with torch.inference_mode():
                t_hgen, hgen = best_of(lambda: hf.generate(idx, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens,
                                                           do_sample=False, pad_token_id=0), a.repeats)
            rows.append({
                "model": name, "batch": batch, "prompt": prompt, "new_tokens": a.new_tokens,
                "same_tokens_as_transformers": bool(torch.equal(toks, htoks)) and bool(torch.equal(gen, hgen)),
                "prefill_tok_s": batch * prompt / pre, "decode_tok_s": batch * a.new_tokens / dec,
                "decode_ms_per_step": 1000 * dec / a.new_tokens,
                "no_cache_tok_s": batch * a.no_cache_tokens / t_nc,
                "hf_prefill_tok_s": batch * prompt / hpre, "hf_decode_tok_s": batch * a.new_tokens / hdec,
                "generate_s": t_gen, "hf_generate_s": t_hgen,
                "mb_read_per_step": step_bytes(model, batch, prompt + a.new_tokens // 2) / 1e6,
            })
            r = rows[-1]
            print(f"{name:<24} b={batch} p={prompt:<4} prefill {r['prefill_tok_s']:7.0f} tok/s  decode "
                  f"{r['decode_tok_s']:6.1f} tok/s ({r['decode_ms_per_step']:.0f} ms/step, {r['mb_read_per_step']:.0f} MB)"
                  f"  no cache {r['no_cache_tok_s']:6.1f}  HF decode {r['hf_decode_tok_s']:6.1f}  generate "
                  f"ours/HF {r['hf_generate_s'] / r['generate_s']:.2f}x  same tokens {r['same_tokens_as_transformers']}",
                  flush=True)
    meta = {"benchmark": "decode", "date": time.strftime("%Y-%m-%d %H:%M"), "threads": a.threads,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, {platform.processor() or 'cpu'}",
            "torch": torch.__version__, "transformers": transformers.__version__, "dtype": "float32",
            "repeats": a.repeats, "rows": rows}
    atomic_write_json(OUT / "bench_decode.json", meta)
    atomic_write_text(OUT / "bench_decode.md", to_markdown(meta))
    write_manifest([OUT / "bench_decode.json", OUT / "bench_decode.md"], OUT / "bench_decode.manifest.json",
                   module="benchmarks.bench_decode", command=command_line("python -m benchmarks.bench_decode", argv))
    print(f"wrote {OUT / 'bench_decode.json'} and bench_decode.md")
    return 0


def to_markdown(meta: dict) -> str:
    """The results as the Markdown report chapter 7 and the introduction show."""
    rows = meta["rows"]
    by = {(r["model"][0], r["batch"], r["prompt"]): r for r in rows}
    lines = [
        "# Decode benchmark", "",
        f"Models A (GPT-2 124M) and B (Gemma 3-style 113M), random weights, fp32, {meta['threads']} thread(s) on "
        f"{meta['machine']}; torch {meta['torch']}, transformers {meta['transformers']}; {rows[0]['new_tokens']} new "
        f"tokens per setting, best of {meta['repeats']}. *speed ours/HF*: `transformers`' generate() time over "
        f"ours (> 1: ours is faster); *B/A*: Model B's decode speed over Model A's.", "",
        "| model | batch | prompt | prefill tok/s | decode tok/s | ms/step | MB read/step | no cache tok/s | "
        "cache speed-up | HF decode tok/s | speed ours/HF (generate) | B/A decode | same tokens as HF |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        a = by.get(("A", r["batch"], r["prompt"]))
        ba = r["decode_tok_s"] / a["decode_tok_s"] if a else float("nan")
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['prompt']} | {r['prefill_tok_s']:,.0f} | {r['decode_tok_s']:.1f} | "
            f"{r['decode_ms_per_step']:.0f} | {r['mb_read_per_step']:.0f} | {r['no_cache_tok_s']:.1f} | "
            f"{r['decode_tok_s'] / r['no_cache_tok_s']:.1f}x | {r['hf_decode_tok_s']:.1f} | "
            f"{r['hf_generate_s'] / r['generate_s']:.2f}x | {ba:.2f}x | {'yes' if r['same_tokens_as_transformers'] else 'NO'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
