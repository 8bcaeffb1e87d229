"""`python -m nblib.lccp.merge`: merge safetensors checkpoints from the command line.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from nblib.store.atomic import clean_stale_temporaries
from nblib.lccp.merge.checks import _check_paths
from nblib.lccp.merge.files import resolve_iterations
from nblib.lccp.merge.methods import METHODS, merge, save_merged


_METHOD_OPTIONS = {  # CLI options each method accepts, with defaults
    "lastM": {"m": 4, "spacing": None},
    "one_sqrt": {},
    "ema": {"beta": 0.9, "delta": None},
    "dare": {"rho": 0.5, "seed": 42},
    "ties": {"rho": 0.5},
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m nblib.lccp.merge",
        description="Merge safetensors checkpoints (oldest to newest) with an App. B method of "
                    "'Don't Stop Long-Context Continual Pre-Training Too Early'.",
    )
    p.add_argument("--method", required=True, choices=METHODS)
    p.add_argument("--m", type=int, help="lastM: number of newest checkpoints (default 4)")
    p.add_argument("--spacing", type=int, help="lastM: iteration gap s, averages {T-(m-1)s, ..., T} (App. B.1)")
    p.add_argument("--beta", type=float, help="ema: decay per nominal interval, in (0, 1) (default 0.9)")
    p.add_argument("--delta", type=float, help="ema: nominal checkpoint interval in iterations (default: median gap)")
    p.add_argument("--rho", type=float, help="dare/ties: keep fraction in (0, 1] (default 0.5)")
    p.add_argument("--seed", type=int, help="dare: random seed (default 42)")
    p.add_argument("--iterations", nargs="+", metavar="T",
                   help="training iteration of each checkpoint (default: read from metadata 'step' or step_<N> names)")
    p.add_argument("--chunk-numel", type=int, help="elements per streamed row block (default: model/64, capped)")
    p.add_argument("-o", "--output", required=True, help="output .safetensors file")
    p.add_argument("checkpoints", nargs="*", metavar="CKPT")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: python -m nblib.lccp.merge --method M [options] CKPT... -o OUT.safetensors. Exit 2 on bad usage."""
    parser = _parser()
    args = parser.parse_args(argv)
    ckpts = list(args.checkpoints)
    iterations = None
    if args.iterations is not None:
        # `--iterations 100 200 a.st b.st` also swallows the checkpoints: split at the first non-integer
        n_int = next((i for i, s in enumerate(args.iterations) if not re.fullmatch(r"\d+", s)), len(args.iterations))
        iterations = [int(s) for s in args.iterations[:n_int]]
        ckpts = args.iterations[n_int:] + ckpts
        if not iterations:
            parser.error("--iterations needs one non-negative integer per checkpoint")
    if not ckpts:
        parser.error("no checkpoints given")
    allowed = _METHOD_OPTIONS[args.method]
    kw = {}
    for opt in ("m", "spacing", "beta", "delta", "rho", "seed"):
        value = getattr(args, opt)
        if value is not None and opt not in allowed:
            parser.error(f"--{opt} does not apply to --method {args.method} (it takes: "
                         f"{', '.join('--' + o for o in allowed) or 'no options'})")
        if opt in allowed:
            kw[opt] = allowed[opt] if value is None else value
    out = Path(args.output)
    if out.is_dir():
        raise IsADirectoryError(f"-o {out} is a folder; allowed: a file path such as {out / 'merged.safetensors'}")
    for c in ckpts:
        src = Path(c) / "model.safetensors" if Path(c).is_dir() else Path(c)
        if out.exists() and src.exists() and out.resolve() == src.resolve():
            raise ValueError(f"-o {out} is also an input; allowed: a new file (the merge never overwrites its inputs)")
    ckpts = [str(p) for p in _check_paths(ckpts)]  # folders -> their weights; corrupt or truncated inputs named
    t = resolve_iterations(ckpts, iterations, required=args.method in ("one_sqrt", "ema") or bool(kw.get("spacing")))
    merged = merge(args.method, ckpts, iterations=None if t is None else t.astype(np.int64).tolist(),
                   chunk_numel=args.chunk_numel, **kw)
    metadata = {"merge_method": args.method, "merge_params": kw, "merge_sources": [str(p) for p in ckpts]}
    if t is not None:
        metadata["merge_iterations"] = t.astype(np.int64).tolist()
        metadata["step"] = str(int(t[-1]))
    clean_stale_temporaries(out.parent if str(out.parent) else Path("."), out.name)  # left by a killed merge
    save_merged(merged, out, metadata)
    print(f"merged {len(ckpts)} checkpoints with {args.method} {kw} -> {out}")
    return 0
