"""Cached results of pure analysis functions (the scaling-law fits and their bootstraps).

A run store never retrains a run it holds; this does the same for the fits that chapters 3
and 4 compute from the runs' tables (Table 11's bootstrap, Tables 3 and 4's variant
ablations, Fig. 3's R² intervals). Those take minutes at toy and are recomputed whenever a
chapter is executed again over a finished store: a rebuild after an edit to a chapter's
words.

    value = cached_call(root, scaling.parameter_table, table, splits, n_boot=100, seed=0)

The key is a sha256 over
- the function's module and name;
- its arguments, encoded canonically (`_encode`: a DataFrame by its columns, dtypes, index
  and values; dicts by sorted key; tuples and lists item by item; numbers by repr); an
  argument of any other type raises TypeError rather than being keyed by its id;
- the source of every file in the function's package folder (for
  `nblib.lccp.scaling.studies.parameter_table`, all of `nblib/lccp/scaling/`), and the
  numpy, scipy and pandas versions: a change to the fitting code or its libraries is a miss.

Values are pickled (they are DataFrames and dataclasses; this is a local cache the same user
writes and reads) to `<root>/results/<module>.<name>/<key>.pkl`, atomically. A file that does not
unpickle is recomputed and replaced, never trusted.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import sys
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from nblib.store.atomic import atomic_write_bytes

RESULTS_DIR = "results"


def _encode(obj, h) -> None:
    """Feed a canonical encoding of `obj` to the hash `h` (TypeError on an unsupported type)."""
    if isinstance(obj, pd.DataFrame):
        h.update(b"DF")
        _encode([str(c) for c in obj.columns], h)
        _encode([str(t) for t in obj.dtypes], h)
        h.update(pd.util.hash_pandas_object(obj, index=True).to_numpy().tobytes())
    elif isinstance(obj, pd.Series):
        h.update(b"SR")
        _encode(str(obj.name), h)
        h.update(pd.util.hash_pandas_object(obj, index=True).to_numpy().tobytes())
    elif isinstance(obj, np.ndarray):
        h.update(b"ND" + str(obj.dtype).encode() + repr(obj.shape).encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, dict):
        h.update(b"{%d" % len(obj))
        for k in sorted(obj, key=repr):
            _encode(k, h)
            _encode(obj[k], h)
    elif isinstance(obj, (list, tuple)):
        h.update((b"[" if isinstance(obj, list) else b"(") + b"%d" % len(obj))
        for v in obj:
            _encode(v, h)
    elif obj is None or isinstance(obj, (bool, int, float, str, np.integer, np.floating)):
        h.update(type(obj).__name__.encode() + b":" + repr(obj).encode() + b";")
    else:
        raise TypeError(f"cached_call cannot key an argument of type {type(obj).__name__}: allowed are "
                        "DataFrame, Series, ndarray, dict, list, tuple, str, numbers, bool and None")


@functools.lru_cache(maxsize=None)
def code_digest(module: str) -> str:
    """sha256 over the .py files of `module`'s package folder and the numeric libraries' versions."""
    path = Path(sys.modules[module].__file__).parent
    versions = " ".join(f"{lib} {metadata.version(lib)}" for lib in ("numpy", "scipy", "pandas"))
    h = hashlib.sha256(versions.encode())
    for f in sorted(path.rglob("*.py")):
        h.update(str(f.relative_to(path)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def call_key(fn, args: tuple, kwargs: dict) -> str:
    """The cache key of fn(*args, **kwargs) (see the module docstring)."""
    h = hashlib.sha256(f"{fn.__module__}.{fn.__qualname__}\0{code_digest(fn.__module__)}\0".encode())
    _encode(list(args), h)
    _encode(kwargs, h)
    return h.hexdigest()


def cache_path(root: str | Path, fn, args: tuple, kwargs: dict) -> Path:
    """Where `cached_call` keeps fn(*args, **kwargs)."""
    return Path(root) / RESULTS_DIR / f"{fn.__module__}.{fn.__qualname__}" / f"{call_key(fn, args, kwargs)[:32]}.pkl"


def cached_call(root: str | Path, fn, *args, **kwargs):
    """fn(*args, **kwargs), read from `root`'s results cache when this call (same function,
    arguments and code) was computed before; computed and stored otherwise."""
    path = cache_path(root, fn, args, kwargs)
    if path.exists():
        try:
            return pickle.loads(path.read_bytes())
        except Exception as e:  # a truncated or foreign file: recompute, never trust it
            warnings.warn(f"recomputing {fn.__qualname__}: its cached result {path} does not load ({e})")
    value = fn(*args, **kwargs)
    atomic_write_bytes(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return value
