"""The probes' records: one folder (`RESULTS`, data/probes/), read as DataFrames, written
atomically with a provenance manifest beside each file.

A record file is JSON lines (one record a line, keys sorted) or a CSV. Its manifest,
`<file>.manifest.json`, names the module that writes it and lists every write, oldest first:
the lines it added, the command line, the git commit (`nblib.store.provenance.code_version`),
the time and the machine. Records committed before manifests existed have entries that name
the commit and the script that wrote them instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import fcntl
import io
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import pandas as pd

from nblib.store.atomic import atomic_write_json, atomic_write_text
from nblib.store.provenance import REPO_ROOT, code_version

RESULTS = REPO_ROOT / "data" / "probes"


def record_path(name: str | os.PathLike) -> Path:
    """Where record file `name` lives: a bare name (`toy_lccp_lr_probe`, with or without its
    suffix) is a file of `RESULTS`; a path with a folder is taken as given."""
    p = Path(name)
    if p.parent != Path("."):
        return p
    if p.suffix in (".jsonl", ".csv"):
        return RESULTS / p.name
    found = [RESULTS / f"{p.name}{s}" for s in (".jsonl", ".csv") if (RESULTS / f"{p.name}{s}").exists()]
    return found[0] if found else RESULTS / f"{p.name}.jsonl"


def records(name: str | os.PathLike) -> pd.DataFrame:
    """The records of file `name` (see `record_path`) as a DataFrame: JSON lines through
    `pd.read_json(lines=True)`, a CSV through `pd.read_csv`. FileNotFoundError naming the
    files of `RESULTS` when there is no such file."""
    path = record_path(name)
    if not path.is_file():
        have = ", ".join(sorted(p.name for p in record_files())) or "none"
        raise FileNotFoundError(f"no probe records at {path}; the records in {RESULTS}: {have}")
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_json(path, lines=True)


def record_files(folder: Path = RESULTS) -> list[Path]:
    """The record files of `folder` (manifests and hidden files left out)."""
    return sorted(p for p in Path(folder).iterdir()
                  if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".manifest.json"))


def manifest_path(path: str | os.PathLike) -> Path:
    """The manifest beside a record file: `<file>.manifest.json`."""
    path = Path(path)
    return path.parent / f"{path.name}.manifest.json"


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of record file `path` ({} when it has none)."""
    m = manifest_path(path)
    return json.loads(m.read_text()) if m.is_file() else {}


def machine() -> dict:
    """The machine a write ran on: host, CPU architecture and count, Python, torch (when
    loaded) and the CPU-kernel settings that change numerics (ATEN_CPU_CAPABILITY,
    MKL_ENABLE_INSTRUCTIONS; chapter 2's kernel spread)."""
    out = {"host": platform.node(), "machine": platform.machine(), "cpus": os.cpu_count(),
           "python": platform.python_version()}
    if "torch" in sys.modules:
        out["torch"] = sys.modules["torch"].__version__
    kernels = {k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS") if k in os.environ}
    return {**out, **({"kernels": kernels} if kernels else {})}


def write_entry(module: str, command: str) -> dict:
    """One write's provenance: the writing module, its command line, the code version, the time
    (UTC, ISO 8601) and the machine."""
    return {"module": module, "command": command, "code": code_version(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()}


def command_line(prefix: str, argv) -> str:
    """The command as a user types it: `prefix` (e.g. "python -m nblib.probes lccp_lr") and its
    arguments, quoted for a POSIX shell."""
    return " ".join([prefix, *(shlex.quote(str(a)) for a in argv)]).strip()


_PREFIX: contextvars.ContextVar = contextvars.ContextVar("probe_command_prefix", default=None)


@contextlib.contextmanager
def started_by(prefix: str):
    """Record the probes run inside as started by `prefix` instead of `python -m nblib.probes`
    (`design_probe` with its budget file), so each write's command reruns it."""
    token = _PREFIX.set(prefix)
    try:
        yield
    finally:
        _PREFIX.reset(token)


def probe_command(module: str, argv) -> str:
    """`command_line` of probe module `module` (nblib.probes.<name>) run through the entry point
    (or through the prefix of an enclosing `started_by`)."""
    return command_line(f"{_PREFIX.get() or 'python -m nblib.probes'} {module.rsplit('.', 1)[-1]}", argv)


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """An exclusive flock on the folder itself, so two probes appending to one file (or its
    manifest) at once do not lose a record; it leaves no lock file behind."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _line_count(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def append_records(path: str | os.PathLike, rows: list[dict], *, module: str, argv) -> Path:
    """Append `rows` as JSON lines (keys sorted) to record file `path` (see `record_path`),
    rewriting the file atomically, and add the write to its manifest: probe `module` run with
    `argv`, and the lines it added. Returns the file's path."""
    path = record_path(path)
    command = probe_command(module, argv)
    with _folder_lock(path.parent):
        old = path.read_text() if path.exists() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        new = old + "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
        atomic_write_text(path, new)
        first, last = _line_count(old) + 1, _line_count(new)
        _add_write(path, module, {**write_entry(module, command), "lines": [first, last]})
    return path


def append_record(path: str | os.PathLike, row: dict, *, module: str, argv) -> Path:
    """`append_records` of one record."""
    return append_records(path, [row], module=module, argv=argv)


def append_csv_row(path: str | os.PathLike, row: dict, *, module: str, argv) -> Path:
    """Append one row to the CSV record file `path` (its header gives the column order; a
    column the row lacks is left empty, a key the header lacks is an error), rewriting the file
    atomically, and add the write to its manifest (probe `module` run with `argv`) with the row
    number (header not counted)."""
    path = record_path(path)
    command = probe_command(module, argv)
    with _folder_lock(path.parent):
        old = path.read_text()
        header = next(csv.reader(io.StringIO(old)))
        extra = sorted(set(row) - set(header))
        if extra:
            raise ValueError(f"{path.name} has no columns {extra}; its columns: {', '.join(header)}")
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(["" if row.get(c) is None else row[c] for c in header])
        new = (old if old.endswith("\n") else old + "\n") + buf.getvalue()
        atomic_write_text(path, new)
        n = len(list(csv.reader(io.StringIO(new)))) - 1
        _add_write(path, module, {**write_entry(module, command), "rows": [n, n]})
    return path


def _add_write(path: Path, module: str, entry: dict) -> None:
    m = read_manifest(path)
    writes = merge_writes([*m.get("writes", []), entry])
    atomic_write_json(manifest_path(path), {"file": path.name, "writer": module, "writes": writes})


_SAME_RUN = ("module", "command", "code", "machine")


def merge_writes(writes: list[dict]) -> list[dict]:
    """Manifest entries with each run of contiguous appends by one command (same command line,
    code and machine: a probe appending record by record) merged into one entry that spans
    their lines or rows, from its first write's `time` to its last's (`until`)."""
    out: list[dict] = []
    for w in writes:
        prev = out[-1] if out else None
        key = next((k for k in ("lines", "rows") if k in w), None)
        if (prev is not None and key is not None and len(prev.get(key) or ()) == 2 and len(w[key]) == 2
                and prev[key][1] + 1 == w[key][0]
                and all(prev.get(k) == w.get(k) for k in _SAME_RUN)):
            out[-1] = {**prev, key: [prev[key][0], w[key][1]], "until": w.get("until", w.get("time"))}
        else:
            out.append(w)
    return out


def write_manifest(paths, manifest: str | os.PathLike, *, module: str, command: str) -> Path:
    """The manifest of output files that one command writes whole (a benchmark's .json and .md):
    `manifest` names them, their writer, and this write alone (it replaces the last one)."""
    manifest = Path(manifest)
    atomic_write_json(manifest, {"files": [Path(p).name for p in paths], "writer": module,
                                 "writes": [write_entry(module, command)]})
    return manifest


# ---------------------------------------------------------------------------------------
# the command line every probe shares
# ---------------------------------------------------------------------------------------
def add_probe_args(p, records, run_root: str = "runs", threads: int = 1, run_root_help: str | None = None) -> None:
    """Add the arguments a probe that trains or scores takes: `--run-root` (its run store),
    `--threads` (torch's CPU threads) and `--out` (the record file, by default the first of
    the probe's `records`)."""
    p.add_argument("--run-root", default=run_root, help=run_root_help or f"the run store (default: {run_root})")
    p.add_argument("--threads", type=int, default=threads)
    p.add_argument("--out", default=records[0],
                   help=f"record file the records are appended to (a name in data/probes: {', '.join(records)}; "
                        "or a path)")


def parse_probe_args(parser, argv=None) -> tuple[list, object]:
    """(the arguments as a list, as given or from sys.argv, and their parsed namespace), with
    torch's CPU threads set to `--threads` for the rest of the probe."""
    import torch

    argv = list(sys.argv[1:] if argv is None else argv)
    a = parser.parse_args(argv)
    torch.set_num_threads(a.threads)
    return argv, a
