"""Training throughput and MFU of the toy scales, against this machine's fp32 matmul peak
and against a plain nanoGPT-style loop at the same shapes.

    python -m benchmarks.bench_train [--budget toy | --budget-file F.toml]
        [--threads 1] [--steps 30] [--bf16] [--no-plain]

Writes benchmarks/results/bench_train.json and .md (the book's run report shows them) and
bench_train.manifest.json (the command, commit, time and machine).
MFU uses the model's analytic training FLOPs per token (nblib.models flops_per_token: 6 x
matmul parameters incl. the LM head, plus causal attention scores and values), so attention's
FLOPs count. `--bf16` also times each step under CPU bf16 autocast (a candidate lever on CPUs
with AVX512-BF16; its speed-up is the `bf16_speedup` column). The LongPPL reference's step is
timed too, at its own shape and with one KV head shared by its query heads: chapter 2 prints the
reference's steps/s as the host's speed index, and the ratio of the two converts an index read
on one reference shape to the other.
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
import torch.nn as nn
import torch.nn.functional as F

from benchmarks import cpu_name
from nblib.budgets import SCALES
from nblib.budgets.budget_file import add_budget_args, budget_from_args
from nblib.lccp import grid
from nblib.lccp.speed_index import training_step
from nblib.probes.results import command_line, write_manifest
from nblib.store.atomic import atomic_write_json, atomic_write_text
from nblib.training.train import build_model_from_config, make_optimizers

OUT = Path(__file__).resolve().parent / "results"


def matmul_peak(n: int = 2048, reps: int = 5) -> float:
    """fp32 GFLOP/s of an n x n x n matmul (best of reps)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def rope_tables(T, hd, base=1e4):
    inv = base ** (-torch.arange(0, hd, 2).float() / hd)
    ang = torch.outer(torch.arange(T).float(), inv)
    ang = torch.cat((ang, ang), -1)
    return ang.cos(), ang.sin()


def rotate(x, cos, sin):
    x1, x2 = x.chunk(2, -1)
    return x * cos + torch.cat((-x2, x1), -1) * sin


class PlainBlock(nn.Module):
    """A nanoGPT-style pre-norm block with the same shapes as nblib's Llama block (fused QKV
    and gate/up projections, RoPE from precomputed tables, SDPA)."""

    def __init__(self, d, h, kv, ff, hd=None):
        super().__init__()
        self.h, self.kv, self.hd = h, kv, hd or d // h
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv = nn.Linear(d, (h + 2 * kv) * self.hd, bias=False)
        self.o = nn.Linear(h * self.hd, d, bias=False)
        self.gate_up = nn.Linear(d, 2 * ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.qkv(self.n1(x)).split([self.h * self.hd, self.kv * self.hd, self.kv * self.hd], -1)
        q = rotate(q.view(B, T, self.h, self.hd).transpose(1, 2), cos, sin)
        k = rotate(k.view(B, T, self.kv, self.hd).transpose(1, 2), cos, sin)
        v = v.view(B, T, self.kv, self.hd).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, self.h * self.hd))
        g, u = self.gate_up(self.n2(x)).chunk(2, -1)
        return x + self.down(F.silu(g) * u)


class PlainGPT(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.emb = nn.Embedding(m["vocab_size"], m["d_model"])
        self.hd = m.get("head_size") or m["d_model"] // m["n_heads"]
        self.blocks = nn.ModuleList([PlainBlock(m["d_model"], m["n_heads"], m["n_kv_heads"], m["d_ff"], self.hd)
                                     for _ in range(m["n_layers"])])
        self.norm = nn.RMSNorm(m["d_model"])
        self.head = nn.Linear(m["d_model"], m["vocab_size"], bias=False)

    def forward(self, x, y):
        cos, sin = rope_tables(x.shape[1], self.hd)
        h = self.emb(x)
        for blk in self.blocks:
            h = blk(h, cos, sin)
        return F.cross_entropy(self.head(self.norm(h)).flatten(0, 1), y.flatten())


def time_steps(step, steps: int, warmup: int = 5, repeats: int = 3) -> float:
    """Seconds per step: the best of `repeats` timings of `steps` steps (after warmup)."""
    for _ in range(warmup):
        step()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - t) / steps)
    return best


def bench_scale(b, scale: str, stage: str, steps: int, bf16: bool = False, plain_loop: bool = True) -> dict:
    spec = b.scale(scale)
    mc = grid.model_config(b, scale)
    bs, T = (spec.batch_short, b.short_seq_len) if stage == "short" else (spec.batch_long, b.long_seq_len)
    return bench_shape(mc, bs, T, steps, bf16, plain_loop) | {"scale": scale, "stage": stage}


def bench_shape(mc: dict, bs: int, T: int, steps: int, bf16: bool = False, plain_loop: bool = True) -> dict:
    """Tokens/s and FLOP rates of one model shape (`mc`, LlamaConfig fields) at batch x context."""
    x = torch.randint(0, 256, (bs, T))
    y = torch.randint(0, 256, (bs, T))
    ours = build_model_from_config(mc)
    opts = make_optimizers(ours, {"name": "muon+adamw"}, 1e-3)
    adamw_only = torch.optim.AdamW(ours.parameters(), lr=1e-3)

    def step_ours():
        training_step(ours, opts, x, y)

    def step_ours_bf16():
        training_step(ours, opts, x, y, forward=lambda: torch.autocast("cpu", dtype=torch.bfloat16))

    def step_ours_adamw():
        training_step(ours, {"adamw": adamw_only}, x, y)

    plain = PlainGPT(mc)
    popt = torch.optim.AdamW(plain.parameters(), lr=1e-3)

    def step_plain():
        loss = plain(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(plain.parameters(), 1.0)
        popt.step()
        popt.zero_grad(set_to_none=True)

    tokens = bs * T
    flops = ours.flops_per_token(T, training=True)
    t_ours, t_adamw, t_plain, t_bf16 = (float("inf"),) * 4
    for _ in range(2):  # interleave the loops so machine noise hits them alike
        t_ours = min(t_ours, time_steps(step_ours, steps))
        t_adamw = min(t_adamw, time_steps(step_ours_adamw, steps))
        if plain_loop:
            t_plain = min(t_plain, time_steps(step_plain, steps))
        if bf16:
            t_bf16 = min(t_bf16, time_steps(step_ours_bf16, steps))
    out = {"seq_len": T, "batch": bs, "n_params_non_emb": ours.n_params(), "n_kv_heads": mc["n_kv_heads"],
           "train_flops_per_token": flops, "step_s": t_ours, "tok_s_muon": tokens / t_ours,
           "tok_s_adamw": tokens / t_adamw, "gflops_muon": flops * tokens / t_ours / 1e9,
           "gflops_adamw": flops * tokens / t_adamw / 1e9}
    if plain_loop:
        out["tok_s_plain_adamw"] = tokens / t_plain
    if bf16:
        out |= {"tok_s_muon_bf16": tokens / t_bf16, "bf16_speedup": t_ours / t_bf16}
    return out


def reference_rows(b, steps: int, bf16: bool) -> list[dict]:
    """The LongPPL reference's training step (chapter 2's speed index) at its own shape and with
    one KV head shared by its query heads, at its batch and the long context."""
    if b.reference.get("kind") != "nblib":
        return []
    mc = {"family": "llama", **b.reference["model"]}
    rows = []
    for kv in sorted({mc["n_kv_heads"], 1}, reverse=True):
        r = bench_shape({**mc, "n_kv_heads": kv}, b.reference["batch"], b.long_seq_len, steps, bf16, plain_loop=False)
        rows.append(r | {"scale": f"reference, {kv} KV head(s)", "stage": "long", "steps_per_s": 1 / r["step_s"]})
    return rows


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_train", description=__doc__.splitlines()[0])
    add_budget_args(ap, default="toy", help="the budget whose shapes are timed")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the toy grid trains 1-thread workers)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--bf16", action="store_true", help="also time each step under CPU bf16 autocast")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain nanoGPT-style loop")
    return ap


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = parser()
    args = ap.parse_args(argv)
    b, name = budget_from_args(ap, args)
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    peak = matmul_peak()
    rows = []
    for scale in SCALES:
        for stage in ("short", "long"):
            r = bench_scale(b, scale, stage, args.steps, args.bf16, not args.no_plain)
            r["mfu_muon"], r["mfu_adamw"] = r["gflops_muon"] / peak, r["gflops_adamw"] / peak
            if "tok_s_plain_adamw" in r:
                r["ours_vs_plain"] = r["tok_s_adamw"] / r["tok_s_plain_adamw"]
            rows.append(r)
            print(f"{scale} {stage:<5} {r['tok_s_muon']:>9,.0f} tok/s (Muon) {r['tok_s_adamw']:>9,.0f} (AdamW) "
                  f"MFU {100 * r['mfu_muon']:.1f}% / {100 * r['mfu_adamw']:.1f}%"
                  + (f"  bf16 x{r['bf16_speedup']:.2f}" if "bf16_speedup" in r else ""), flush=True)
    ref = reference_rows(b, args.steps, args.bf16)
    for r in ref:
        r["mfu_muon"], r["mfu_adamw"] = r["gflops_muon"] / peak, r["gflops_adamw"] / peak
        print(f"{r['scale']}: {r['steps_per_s']:.2f} steps/s at {args.threads} thread(s)", flush=True)
    largest = [r for r in rows if r["scale"] == SCALES[-1]]
    summary = [f"fp32 matmul peak (2048^3, {args.threads} thread(s)): {peak:.1f} GFLOP/s"]
    summary += [f"{r['scale']} {r['stage']}: {r['tok_s_muon']:,.0f} tok/s, MFU {100 * r['mfu_muon']:.1f}% (Muon+AdamW, "
                f"attention's FLOPs counted), {100 * r['mfu_adamw']:.1f}% (AdamW)"
                + (f"; {r['ours_vs_plain']:.2f}x a plain nanoGPT-style loop" if "ours_vs_plain" in r else "")
                + (f"; bf16 autocast {r['bf16_speedup']:.2f}x" if "bf16_speedup" in r else "") for r in rows]
    if len(ref) == 2:
        summary.append(f"reference step: {ref[0]['steps_per_s']:.2f} steps/s at {ref[0]['n_kv_heads']} KV heads, "
                       f"{ref[1]['steps_per_s']:.2f} at 1 ({ref[1]['steps_per_s'] / ref[0]['steps_per_s']:.2f}x): "
                       f"the factor between speed indices read on the two reference shapes, at "
                       f"{args.threads} thread(s)")
    data = {"benchmark": "train_throughput", "budget": b.name,
            **({"budget_file": name} if args.budget_file else {}), "threads": args.threads, "peak_gflops": peak,
            "rows": rows, "reference": ref, "summary": summary, "date": time.strftime("%Y-%m-%d"),
            "machine": {"cpu_count": os.cpu_count(), "machine": platform.machine(), "torch": torch.__version__,
                        "cpu": cpu_name(), "bf16_kernels": torch.backends.mkldnn.is_available()},
            "goal": "MFU >= 30% at the largest toy scale; no slower than a plain loop",
            "largest_scale_mfu": max(r["mfu_muon"] for r in largest)}
    OUT.mkdir(parents=True, exist_ok=True)
    atomic_write_json(OUT / "bench_train.json", data)
    md = ["| scale | stage | batch x context | tokens/s (Muon) | MFU Muon | MFU AdamW | ours / plain loop | bf16 autocast |",
          "|---|---|---|---:|---:|---:|---:|---:|"]
    md += [f"| {r['scale']} | {r['stage']} | {r['batch']} x {r['seq_len']} | {r['tok_s_muon']:,.0f} | "
           f"{100 * r['mfu_muon']:.1f}% | {100 * r['mfu_adamw']:.1f}% | "
           f"{r['ours_vs_plain']:.2f} |" if "ours_vs_plain" in r else
           f"| {r['scale']} | {r['stage']} | {r['batch']} x {r['seq_len']} | {r['tok_s_muon']:,.0f} | "
           f"{100 * r['mfu_muon']:.1f}% | {100 * r['mfu_adamw']:.1f}% | – |" for r in rows + ref]
    md = [line + (f" {r['bf16_speedup']:.2f}x |" if "bf16_speedup" in r else " – |") if i >= 2 else line
          for i, (line, r) in enumerate(zip(md, [None, None, *rows, *ref]))]
    atomic_write_text(OUT / "bench_train.md", f"fp32 peak {peak:.1f} GFLOP/s ({args.threads} thread)\n\n"
                      + "\n".join(md + [""] + [f"- {x}" for x in summary[-1:] if x.startswith("reference")]) + "\n")
    write_manifest([OUT / "bench_train.json", OUT / "bench_train.md"], OUT / "bench_train.manifest.json",
                   module="benchmarks.bench_train", command=command_line("python -m benchmarks.bench_train", argv))
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
