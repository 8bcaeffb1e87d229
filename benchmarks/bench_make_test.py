"""Benchmark: `make test` on fresh clones of two commits, run back to back, alternating.

The gate is `make test` green within 10 minutes on a fresh 2-core clone (chromium's install not
counted). One run says little on a shared host: the same commit's `make test` took 8 to 13
minutes within an hour on one 2-core Xeon. So a change is timed against its baseline in pairs
(baseline, candidate, baseline, candidate, ...), each on a fresh clone with `../shared` beside
it, nothing else running, and the verdict is the paired difference, not one wall time.

Each run: `git clone` of this repository, `git checkout <commit>`, then `make test` in the clone
(it creates its own `.venv`; pip's cache is the host's), timed from the first command to the end.
From its log: the unit tests' time (pytest's summary line) and the smoke chapters with nbval
(`[book] nbval-lax: ... s from the first chapter's start`).

    python -m benchmarks.bench_make_test --commits a2a56a8 HEAD            # one pair
    python -m benchmarks.bench_make_test --commits a2a56a8 HEAD --rounds 2 # two pairs

Writes benchmarks/results/bench_make_test.{json,md} and bench_make_test.manifest.json, and keeps
each run's log under --work (default: a temporary folder, printed).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import RESULTS as OUT, cpu_name
from nblib.probes.results import command_line, write_manifest
from nblib.store.atomic import atomic_write_json, atomic_write_text

REPO = Path(__file__).resolve().parent.parent
GATE_S = 600  # `make test` within 10 minutes
_UNIT = re.compile(r"\d+ passed.* in ([\d.]+)s")
_SMOKE = re.compile(r"\[book\] nbval-lax: \w+, .* in \d+ notebooks, ([\d.]+) s from the first chapter's start")


def resolve(commit: str) -> str:
    """The full hash of `commit` in this repository; a clear error when git does not know it."""
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], cwd=REPO,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"commit {commit!r} is not in {REPO}; allowed: any commit `git rev-parse` knows (a hash, HEAD, a branch)")
    return out.stdout.strip()


def parse_log(text: str) -> dict:
    """The unit tests' and the smoke book's seconds from a `make test` log (None when absent)."""
    unit, smoke = _UNIT.findall(text), _SMOKE.findall(text)
    return {"unit_s": float(unit[-1]) if unit else None, "smoke_s": float(smoke[-1]) if smoke else None}


def time_make_test(sha: str, work: Path, shared: Path | None) -> dict:
    """Clone this repository into `work`, check out `sha`, run `make test` there; its wall time,
    exit code, the parsed times and the log's path."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    clone = work / "main"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "checkout", "--quiet", sha], cwd=clone, check=True)
    if shared is not None:
        (work / "shared").symlink_to(shared)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    log = work / "make_test.log"
    t = time.time()
    with open(log, "w") as f:
        rc = subprocess.run(["make", "test"], cwd=clone, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    wall = time.time() - t
    return {"wall_s": round(wall, 1), "rc": rc, **parse_log(log.read_text(errors="replace")), "log": str(log)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", nargs=2, metavar=("BASELINE", "CANDIDATE"), default=["HEAD~1", "HEAD"])
    ap.add_argument("--rounds", type=int, default=1, help="pairs to run, alternating baseline and candidate")
    ap.add_argument("--work", type=Path, default=None, help="folder for the clones and logs (default: a temporary one)")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        raise SystemExit(f"--rounds {a.rounds} is not allowed; allowed: integers >= 1")
    shas = [resolve(c) for c in a.commits]
    work = a.work or Path(tempfile.mkdtemp(prefix="bench_make_test_"))
    shared = REPO.parent / "shared"
    shared = shared.resolve() if shared.is_dir() else None
    print(f"clones and logs in {work}; ../shared: {shared or 'absent'}", flush=True)
    runs = []
    for r in range(a.rounds):
        for role, commit, sha in zip(("baseline", "candidate"), a.commits, shas):
            print(f"round {r + 1}, {role} {commit} ({sha[:7]}): make test ...", flush=True)
            res = time_make_test(sha, work / f"{r + 1}-{role}", shared)
            runs.append({"round": r + 1, "role": role, "commit": commit, "sha": sha,
                         "started": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - res["wall_s"])), **res})
            print(f"  wall {res['wall_s']:.0f} s, rc {res['rc']}, unit tests {res['unit_s']} s, "
                  f"smoke chapters + nbval {res['smoke_s']} s", flush=True)
    meta = {"benchmark": "make_test", "gate_s": GATE_S, "machine": machine(), "runs": runs}
    OUT.mkdir(parents=True, exist_ok=True)
    atomic_write_json(OUT / "bench_make_test.json", meta)
    atomic_write_text(OUT / "bench_make_test.md", to_markdown(meta))
    write_manifest([OUT / "bench_make_test.json", OUT / "bench_make_test.md"], OUT / "bench_make_test.manifest.json",
                   module="benchmarks.bench_make_test", command=command_line("python -m benchmarks.bench_make_test", argv or sys.argv[1:]))
    print(to_markdown(meta))
    return 0 if all(r["rc"] == 0 for r in runs) else 1


def machine() -> str:
    """CPU architecture, core count and model, as the results name the host."""
    return f"{platform.machine()}, {os.cpu_count()} CPU cores, {cpu_name()}"


def to_markdown(meta: dict) -> str:
    """Each run, then each round's candidate-minus-baseline difference (the paired verdict)."""
    lines = ["# `make test` on fresh clones, back to back", "",
             f"{meta['machine']}. Gate: {meta['gate_s']} s. Each run: a fresh clone, its own `.venv`, `make test`.", "",
             "| round | role | commit | started (UTC) | wall s | unit tests s | smoke + nbval s | exit |",
             "|---:|---|---|---|---:|---:|---:|---:|"]
    for r in meta["runs"]:
        lines.append(f"| {r['round']} | {r['role']} | {r['commit']} ({r['sha'][:7]}) | {r['started']} | {r['wall_s']:.0f} | "
                     f"{r['unit_s'] if r['unit_s'] is not None else '-'} | {r['smoke_s'] if r['smoke_s'] is not None else '-'} | {r['rc']} |")
    lines += ["", "| round | candidate - baseline, wall s | unit tests s | smoke + nbval s |", "|---:|---:|---:|---:|"]
    for rnd in sorted({r["round"] for r in meta["runs"]}):
        pair = {r["role"]: r for r in meta["runs"] if r["round"] == rnd}
        if len(pair) == 2:
            b, c = pair["baseline"], pair["candidate"]
            diff = [f"{c[k] - b[k]:+.0f}" if c[k] is not None and b[k] is not None else "-"  # "-": a run lacks it
                    for k in ("wall_s", "unit_s", "smoke_s")]
            lines.append(f"| {rnd} | {' | '.join(diff)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
