"""Benchmark: LongPPL annotation and evaluation (nblib.metrics) against the naive way.

Naive = the reference implementation's way (PKU-ML/LongPPL, `longppl` on PyPI):
one sequence per forward pass, full-vocabulary logits for every position, then
cross-entropy on the scored ones. Ours: several windows / documents per forward pass, the
LM head only on scored positions, in 64 MB chunks.

Model: a toy Llama with a 32K vocabulary (logit memory matters), d_model 256, 4 layers;
documents of 2048 byte tokens (Python stdlib source, ASCII); chunking at the paper's
ratios (trunc_len = T/8, sliding_window = T/32, as 4096 and 1024 are of 32K). Evaluation
uses key tokens drawn at Table 2's rates (1.42% long, 25.20% short).

Measured three ways:
- peak memory: each method in a fresh subprocess, the growth of ru_maxrss over its level
  after setup (model, data, a tiny warm-up); torch allocations count there (tracemalloc
  would not see them);
- FLOPs: torch's FlopCounterMode (matmuls and attention), immune to machine load;
- time: one more subprocess runs the four methods in turn for --repeats rounds, so a
  change in background load hits all of them alike; we report the best round (wall and
  process CPU time) and record the load average around it.

    python -m benchmarks.bench_longppl  # writes benchmarks/results/bench_longppl.{json,md} and its manifest
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from nblib.budgets import LongPPLSpec
from nblib.data.tokenizers import ByteTokenizer
from nblib.metrics import Annotation, annotate, chunk_windows, evaluate, hash_texts, merge_intervals
from nblib.models import build_model
from nblib.probes.results import command_line, write_manifest
from nblib.store.atomic import atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[1]

METHODS = ("annotate-naive", "annotate-ours", "evaluate-naive", "evaluate-ours")
LONG_RATE, SHORT_RATE = 0.0142, 0.2520  # the LCCP paper Table 2


def setup(a):
    """Model, texts, spec and (for evaluation) an annotation at Table 2's key-token rates."""
    torch.manual_seed(0)
    model = build_model("llama", dict(vocab_size=a.vocab, d_model=256, n_layers=4, n_heads=4, n_kv_heads=4,
                                      d_ff=688, max_seq_len=a.seq_len)).eval()
    src = "".join(p.read_text(errors="ignore") for p in sorted(Path(os.__file__).parent.glob("*.py"))[:40])
    src = "".join(c for c in src if c.isascii())
    texts = [src[i * a.seq_len:(i + 1) * a.seq_len] for i in range(a.docs)]
    spec = LongPPLSpec(trunc_len=a.seq_len // 8, sliding_window=a.seq_len // 32, n_docs=a.docs,
                       min_doc_len=a.seq_len, max_doc_len=None)
    rng = np.random.default_rng(0)
    long_iv, short_iv, nl, ns = [], [], [], []
    for t in texts:  # ASCII: byte token t has character span (t, t + 1)
        cand = rng.permutation(np.arange(spec.trunc_len, len(t)))
        k_long, k_short = round(LONG_RATE * len(t)), round(SHORT_RATE * len(t))
        lo, sh = np.sort(cand[:k_long]), np.sort(cand[k_long:k_long + k_short])
        long_iv.append(merge_intervals(np.stack([lo, lo + 1], 1)))
        short_iv.append(merge_intervals(np.stack([sh, sh + 1], 1)))
        nl.append(k_long)
        ns.append(k_short)
    ann = Annotation(spec=spec, texts_hash=hash_texts(texts), reference_id="bench",
                     n_ref_tokens=[len(t) for t in texts],
                     long_intervals=long_iv, short_intervals=short_iv, n_long_ref=nl, n_short_ref=ns)
    return model, texts, spec, ann


@torch.inference_mode()
def annotate_naive(model, texts, spec):
    """Reference-style: full logits of the whole document, then of each window, one at a time."""
    T, W, tok = spec.trunc_len, spec.sliding_window, ByteTokenizer()
    full, chunk = [], []
    for text in texts:
        ids = torch.as_tensor(tok.encode(text))[None]
        logits = model(ids)[0]  # (1, n, V)
        n = ids.size(1)
        full.append(F.cross_entropy(logits[0, T - 1:n - 1].float(), ids[0, T:], reduction="none").numpy())
        parts = []
        for s, e in chunk_windows(n, T, W):
            lw = model(ids[:, s:e])[0]  # (1, e - s, V)
            parts.append(F.cross_entropy(lw[0, T - 1:e - s - 1].float(), ids[0, s + T:e], reduction="none").numpy())
        chunk.append(np.concatenate(parts))
    return {"loss_full": full, "loss_chunk": chunk}


def annotate_ours(model, texts, spec):
    ann = annotate(model, ByteTokenizer(), texts, spec, batch_size=8)
    return {"loss_full": ann.loss_full, "loss_chunk": [f + d for f, d in zip(ann.loss_full, ann.delta)]}


@torch.inference_mode()
def evaluate_naive(model, texts, ann):
    """Reference-style: full logits for the whole document, then gather the key positions."""
    from nblib.metrics import key_token_positions

    tok, out = ByteTokenizer(), {"nll_long_sum": 0.0, "nll_short_sum": 0.0, "n_long": 0, "n_short": 0}
    for d, text in enumerate(texts):
        ids, off = tok.encode_with_offsets(text)
        ids = torch.as_tensor(ids)[None]
        logits = model(ids)[0]
        loss = F.cross_entropy(logits[0, :-1].float(), ids[0, 1:], reduction="none").double().numpy()
        for which in ("long", "short"):
            pos = key_token_positions(off, ann.intervals(which)[d])
            pos = pos[pos >= 1]
            out[f"nll_{which}_sum"] += float(loss[pos - 1].sum())
            out[f"n_{which}"] += len(pos)
    return out


def evaluate_ours(model, texts, ann):
    return evaluate(model, ByteTokenizer(), texts, ann, batch_size=2)


def maxrss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def methods(model, texts, spec, ann):
    return {"annotate-naive": lambda: annotate_naive(model, texts, spec),
            "annotate-ours": lambda: annotate_ours(model, texts, spec),
            "evaluate-naive": lambda: evaluate_naive(model, texts, ann),
            "evaluate-ours": lambda: evaluate_ours(model, texts, ann)}


def worker(a):
    """--worker METHOD: peak memory and FLOPs of one method in this fresh process.
    --worker time: all methods in turn, --repeats rounds. JSON to a.out."""
    from torch.utils.flop_counter import FlopCounterMode

    model, texts, spec, ann = setup(a)
    with torch.inference_mode():
        model(torch.zeros((1, 16), dtype=torch.long))  # warm-up: kernels, thread pool
    fns = methods(model, texts, spec, ann)
    if a.worker == "time":
        wall, cpu = {m: [] for m in METHODS}, {m: [] for m in METHODS}
        load = [os.getloadavg()[0]]
        for _ in range(a.repeats):
            for m in METHODS:
                t0, c0 = time.perf_counter(), cpu_s()
                fns[m]()
                wall[m].append(time.perf_counter() - t0)
                cpu[m].append(cpu_s() - c0)
        load.append(os.getloadavg()[0])
        Path(a.out).write_text(json.dumps({"wall": wall, "cpu": cpu, "loadavg_1min": load,
                                           "threads": torch.get_num_threads()}))
        return
    base = maxrss_mb()
    result = fns[a.worker]()
    peak = maxrss_mb()
    counter = FlopCounterMode(display=False)
    with counter:
        fns[a.worker]()
    if a.worker.startswith("annotate"):
        np.savez(a.out + ".npz", **{f"{k}_{i}": v for k, vs in result.items() for i, v in enumerate(vs)})
        result = {}
    Path(a.out).write_text(json.dumps({"method": a.worker, "rss_base_mb": base, "rss_peak_mb": peak,
                                       "peak_mem_delta_mb": peak - base, "gflop": counter.get_total_flops() / 1e9,
                                       "result": result}))


def compare_annotations(p_naive, p_ours, n_docs, spec):
    """Max |diff| of loss_full, and of loss_chunk outside window 0 (where ours copies loss_full)."""
    with np.load(p_naive) as zn, np.load(p_ours) as zo:
        full = max(float(np.abs(zn[f"loss_full_{i}"] - zo[f"loss_full_{i}"]).max()) for i in range(n_docs))
        W = spec.sliding_window
        chunk = max(float(np.abs(zn[f"loss_chunk_{i}"][W:] - zo[f"loss_chunk_{i}"][W:]).max()) for i in range(n_docs))
        w0 = max(float(np.abs(zn[f"loss_chunk_{i}"][:W] - zn[f"loss_full_{i}"][:W]).max()) for i in range(n_docs))
    return {"max_abs_diff_loss_full": full, "max_abs_diff_loss_chunk": chunk,
            "naive_window0_delta_noise": w0}


def markdown(res):
    a, e = res["config"], res["env"]
    lines = [
        "# LongPPL benchmark",
        "",
        f"Toy Llama (vocab {a['vocab']:,}, d_model 256, 4 layers), {a['docs']} documents x {a['seq_len']} "
        "byte tokens, "
        f"trunc_len {a['trunc_len']}, sliding_window {a['sliding_window']}; CPU ({e['cpus']} cores, "
        f"{e['threads']} torch threads), torch {e['torch']}. Naive = one sequence per forward pass with "
        "full-vocabulary logits (the reference implementation's way); ours = nblib.metrics (batched windows, "
        "LM head on scored positions only, 64 MB chunks). Peak memory = growth of max RSS in a fresh process. "
        f"Time = best of {a['repeats']} interleaved rounds (1-min load average "
        f"{res['loadavg_1min'][0]:.1f} -> {res['loadavg_1min'][1]:.1f}: the machine was shared).",
        "",
        "| Task | Method | GFLOP | Wall (s) | CPU (s) | Doc tokens/s | Peak memory growth (MB) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for m in METHODS:
        r = res["runs"][m]
        task, how = m.split("-")
        lines.append(f"| {task} | {how} | {r['gflop']:.1f} | {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | "
                     f"{r['tokens_per_s']:,.0f} | {r['peak_mem_delta_mb']:,.0f} |")
    c = res["checks"]
    ratio = res["ratios"]
    lines += [
        "",
        "Naive / ours: " + "; ".join(
            f"{t}: FLOPs {ratio[t]['flops']:.2f}x, wall time {ratio[t]['wall']:.2f}x, "
            f"peak memory {ratio[t]['memory']:.1f}x" for t in ("annotate", "evaluate")) + ".",
        "",
        f"Same numbers: max |Δ loss_full| {c['max_abs_diff_loss_full']:.2e}, max |Δ loss_chunk| (windows after the "
        f"first) {c['max_abs_diff_loss_chunk']:.2e}; LongPPL {c['long_ppl_naive']:.6f} (naive) vs "
        f"{c['long_ppl_ours']:.6f} (ours), ShortPPL {c['short_ppl_naive']:.6f} vs {c['short_ppl_ours']:.6f}. "
        f"The naive first window recomputes the full context, so its Δ is float noise (max "
        f"{c['naive_window0_delta_noise']:.1e} here); ours sets it to exactly 0.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_longppl", description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--repeats", type=int, default=5, help="interleaved timing rounds (best one reported)")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--worker", choices=METHODS + ("time",), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker(a)
    if a.seq_len % 32 or a.seq_len < 64:
        ap.error(f"--seq-len must be a multiple of 32 and >= 64, got {a.seq_len}")

    runs = {}
    common = ["--docs", str(a.docs), "--seq-len", str(a.seq_len), "--vocab", str(a.vocab),
              "--repeats", str(a.repeats)]
    with tempfile.TemporaryDirectory() as tmp:
        for m in METHODS + ("time",):
            out = str(Path(tmp) / f"{m}.json")
            subprocess.run([sys.executable, "-m", "benchmarks.bench_longppl", "--worker", m, "--out", out] + common,
                           check=True, cwd=ROOT)
            if m != "time":
                runs[m] = json.loads(Path(out).read_text())
                print(f"{m:16s} {runs[m]['gflop']:8.1f} GFLOP  +{runs[m]['peak_mem_delta_mb']:7.0f} MB", flush=True)
        timing = json.loads(Path(Path(tmp) / "time.json").read_text())
        _, texts, spec, _ = setup(a)
        checks = compare_annotations(str(Path(tmp) / "annotate-naive.json.npz"),
                                     str(Path(tmp) / "annotate-ours.json.npz"), a.docs, spec)
    n_tokens = sum(len(t) for t in texts)  # ASCII: one byte token per character
    for m in METHODS:
        runs[m].update(seconds=min(timing["wall"][m]), cpu_seconds=min(timing["cpu"][m]),
                       seconds_all=timing["wall"][m], doc_tokens=n_tokens,
                       tokens_per_s=n_tokens / min(timing["wall"][m]))
    rn, ro = runs["evaluate-naive"]["result"], runs["evaluate-ours"]["result"]
    for which in ("long", "short"):
        assert rn[f"n_{which}"] == ro[f"n_{which}"], (which, rn, ro)
        checks[f"{which}_ppl_naive"] = float(np.exp(rn[f"nll_{which}_sum"] / rn[f"n_{which}"]))
        checks[f"{which}_ppl_ours"] = ro[f"{which}_ppl"]
    res = {
        "config": {"docs": a.docs, "seq_len": a.seq_len, "vocab": a.vocab, "trunc_len": spec.trunc_len,
                   "sliding_window": spec.sliding_window, "repeats": a.repeats,
                   "model": "llama d_model=256 n_layers=4 n_heads=4 d_ff=688"},
        "env": {"torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
                "threads": timing["threads"], "machine": platform.machine()},
        "loadavg_1min": timing["loadavg_1min"],
        "runs": runs,
        "ratios": {t: {"flops": runs[f"{t}-naive"]["gflop"] / runs[f"{t}-ours"]["gflop"],
                       "wall": runs[f"{t}-naive"]["seconds"] / runs[f"{t}-ours"]["seconds"],
                       "memory": runs[f"{t}-naive"]["peak_mem_delta_mb"]
                       / max(runs[f"{t}-ours"]["peak_mem_delta_mb"], 1.0)}
                   for t in ("annotate", "evaluate")},
        "checks": checks,
    }
    Path(a.results).mkdir(parents=True, exist_ok=True)
    out = Path(a.results)
    atomic_write_json(out / "bench_longppl.json", res)
    atomic_write_text(out / "bench_longppl.md", markdown(res))
    write_manifest([out / "bench_longppl.json", out / "bench_longppl.md"], out / "bench_longppl.manifest.json",
                   module="benchmarks.bench_longppl", command=command_line("python -m benchmarks.bench_longppl", argv))
    print(markdown(res))


if __name__ == "__main__":
    main()
