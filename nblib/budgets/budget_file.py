"""A budget file: a TOML file that starts from a named budget and overrides its fields.

    base = "full"                                     # smoke | toy | full, or a file: "F.toml"
    corpus = "jsonl:corpus/train.jsonl"               # relative paths: from the file's folder
    tokenizer = "hf:tokenizer/tokenizer.json"
    reference = { kind = "hf", path = "models/Llama-3.1-8B" }
    ds_multiples = [90, 180, 270]                     # a 3 x 3 grid ...
    dl_multiples = [10, 20, 30]
    [scales.S1]                                       # ... and one scale's optimisation
    lr = 5e-4
    [scales.S1.model]
    d_model = 640

    b = load_budget_file("my.toml", sets=["scales.S1.lr=5e-4"])   # -> a Budget
    b = apply_overrides(get_budget("toy"), {"corpus": "jsonl:/x.jsonl"})
    add_budget_args(parser); b, name = budget_from_args(parser, parser.parse_args())  # a CLI's

Every key is a field of `nblib.budgets.Budget` (tables: `longppl`, `pair`, `scales.<S>`,
`scales.<S>.model`, `reference`); a value has the field's type and range. `--set key=value`
on a command line overrides one field after the file (dotted names: `scales.S1.lr=5e-4`; the
value is read as TOML, else as a string). A malformed file raises BudgetError, one line
naming the key and what is allowed, which the command lines print and exit 2 with before
any work. Overrides change the Budget, and so every run config built from it: a changed
field that enters a RunConfig changes that run's hash; a file with no overrides gives the
named budget itself, so the same hashes. Model tables are merged into the base's model
dict; `reference` is merged too unless it names another `kind`, when it replaces the base's.

Every command line that takes `--budget NAME` takes `--budget-file FILE.toml` instead
(`add_budget_args`, `budget_from_args`): the monitor, the probes, the benchmarks and the
scorecard; the book runner and the plan add `--set` (`nblib.book.plan.budget_source`).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import os
import re
import tomllib
import types
import typing
from dataclasses import dataclass, replace
from pathlib import Path

from nblib.budgets import (BUDGETS, FIG4A_POOL, PAPER_POST_TRAINING_POINTS, PRECISIONS, PROBE_GRIDS, SCALES, Budget,
                           BudgetError, get_budget, get_grid)
from nblib.data.corpus import SPEC_FORMS
from nblib.data.tokenizers import TOKENIZER_FORMS
from nblib.models import FAMILIES
from nblib.store.atomic import atomic_write_text

# Spec strings that name a file or folder: a relative one in a budget file is read from the
# file's folder (on a command line, from the working directory).
PATH_KEYS = ("corpus", "tokenizer", "pair.corpus", "pair.tokenizer", "reference.path")
PATH_PREFIXES = ("jsonl:", "txt:", "hf:")
FIXED = ("name",)  # the base names the budget: RunConfig.budget, so run hashes, keep it
MODEL_FAMILY = {"model": "llama", "model_a": "gpt2", "model_b": "gemma3"}
REFERENCE_KEYS = {"hf": ("kind", "path"),
                  "nblib": ("kind", "model", "batch", "lr", "warmup_steps", "n_tokens", "copy")}
COPY_KEYS = ("min_match", "max_match", "calibration_sequences")


# ---------------------------------------------------------------------------------------
# ranges: (check, what is allowed) per key; `*` stands for a scale name
# ---------------------------------------------------------------------------------------
def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _increasing(v) -> bool:
    return all(_num(x) and x > 0 for x in v) and len(v) > 0 and all(a < b for a, b in zip(v, v[1:]))


POS_INT = (lambda v: v >= 1, "an integer >= 1")
NONNEG_INT = (lambda v: v >= 0, "an integer >= 0")
POSITIVE = (lambda v: v > 0, "a number > 0")
FRACTION = (lambda v: 0 < v <= 1, "a number in (0, 1]")
OPEN_FRACTION = (lambda v: 0 < v < 1, "a number in (0, 1)")
MULTIPLES = (_increasing, "a non-empty list of increasing numbers > 0 (multiples of the token unit N)")
CORPUS = (lambda v: v == "python-stdlib" or (v.startswith(("jsonl:", "txt:")) and len(v.split(":", 1)[1]) > 0),
          "a corpus spec: " + ", ".join(SPEC_FORMS))
TOKENIZER = (lambda v: v == "byte" or (v.startswith(("hf:", "bpe:")) and len(v.split(":", 1)[1]) > 0),
             "a tokenizer spec: " + ", ".join(TOKENIZER_FORMS))
RULES = {
    **{k: POS_INT for k in ("short_seq_len", "long_seq_len", "ext_seq_len", "n_constant_seeds", "ruler_samples",
                            "ruler_len", "ruler_max_new", "post_training_points", "post_training_samples", "workers")},
    **{k: POSITIVE for k in ("multiple_scale", "s5_trajectory", "s5_ckpt_every", "s5_eval_every",
                             "s4_pool_ckpt_every", "constant_ckpt_every", "last4_spacing")},
    # App. A.3: the RoPE base of the 4K, 32K and 128K stages (ABF raises it at each)
    "rope_bases": (lambda v: len(v) == 3 and all(_num(x) and x > 1 for x in v),
                   "a list of 3 numbers > 1 (the RoPE base of the short, LCCP and extension stages)"),
    "ds_multiples": MULTIPLES, "dl_multiples": MULTIPLES,
    # §3.1: S5's (Ds, Dl) configurations on and off the diagonal
    "s5_configs": (lambda v: len(v) > 0 and all(isinstance(c, tuple) and len(c) == 2
                                                and all(_num(x) and x > 0 for x in c) for c in v),
                   "a non-empty list of [Ds, Dl] pairs of numbers > 0"),
    "corpus": CORPUS, "tokenizer": TOKENIZER,
    "lccp_mixture": (lambda v: v in ("lccp_32k", "natural"), "lccp_32k, natural"),
    "ext_mixture": (lambda v: v in ("extension_128k", "natural_128k"), "extension_128k, natural_128k"),
    "lccp_aligned": (lambda v: isinstance(v, bool), "true or false"),
    "long_precision": (lambda v: v in PRECISIONS, ", ".join(PRECISIONS)),
    "bf16_short_scales": (lambda v: all(x in SCALES for x in v) and len(set(v)) == len(v),
                          "a list of distinct scale names: " + ", ".join(SCALES)),
    "needle_value_form": (lambda v: v in ("ruler", "short"), "ruler, short"),
    "needle_samples_last": POS_INT,
    "variant_fit_starts": POS_INT,
    "n_boot": (lambda v: v >= 2, "an integer >= 2"),
    "lccp_lr_frac": FRACTION,
    "token_unit": (lambda v: v in SCALES, ", ".join(SCALES)),
    "token_unit_tokens": POS_INT,
    **{f"longppl.{k}": POS_INT for k in ("trunc_len", "sliding_window", "n_docs", "min_doc_len", "max_doc_len")},
    "scales.*.batch_short": POS_INT, "scales.*.batch_long": POS_INT, "scales.*.lr": POSITIVE,
    "scales.*.warmup_steps": NONNEG_INT, "scales.*.paper_n_params": POSITIVE,
    **{f"pair.{k}": POS_INT for k in ("seq_len", "n_tokens", "batch_size", "n_checkpoints", "n_eval_windows",
                                       "yarn_factor", "finetune_steps", "finetune_snapshot_every", "n_long_docs")},
    "pair.lr": POSITIVE, "pair.warmup_steps": NONNEG_INT, "pair.decay_frac": OPEN_FRACTION,
    "pair.control_fraction": FRACTION, "pair.corpus": CORPUS, "pair.tokenizer": TOKENIZER,
    "pair.length_fractions": (lambda v: len(v) > 0 and all(_num(x) and 0 < x < 1 for x in v)
                              and all(a < b for a, b in zip(v, v[1:])),
                              "a non-empty list of increasing numbers in (0, 1)"),
    "reference.path": (lambda v: len(v) > 0, "a non-empty path"),
    "reference.batch": POS_INT, "reference.lr": POSITIVE, "reference.warmup_steps": NONNEG_INT,
    "reference.n_tokens": POS_INT, **{f"reference.copy.{k}": POS_INT for k in COPY_KEYS},
}


class _Bad(BudgetError):
    """A value outside what a key allows; `where` (the file) is added when it is raised."""


def _show(v) -> str:
    """A value as a budget file writes it (lists for tuples, TOML's true/false)."""
    try:
        return json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(v)


def _type_name(hint) -> str:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args:
        return " or ".join(_type_name(a) for a in args)
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false", tuple: "a list",
            dict: "a table"}.get(hint, f"a table of {getattr(hint, '__name__', hint)} fields")


def _type_ok(value, hint) -> bool:
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return any(_type_ok(value, a) for a in typing.get_args(hint) if a is not type(None))
    if hint is float:
        return _num(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if _dataclass_of(hint) is not None:
        return isinstance(value, dict)
    return isinstance(value, hint)


def _as_tuples(v):
    """TOML arrays as the tuples the budgets hold (nested arrays too)."""
    return tuple(_as_tuples(x) for x in v) if isinstance(v, list) else v


def _rule_key(key: str) -> str:
    parts = key.split(".")
    return ".".join("*" if i == 1 and parts[0] == "scales" else p for i, p in enumerate(parts))


def _check_range(key: str, value) -> None:
    rule = RULES.get(_rule_key(key))
    if rule is not None and not rule[0](value):
        raise _Bad(f"{key} = {_show(value)} is not allowed; allowed: {rule[1]}")


def _unknown(key: str, allowed) -> _Bad:
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return _Bad(f"unknown key {key!r}{hint}; allowed: {', '.join(allowed)}")


# ---------------------------------------------------------------------------------------
# overrides
# ---------------------------------------------------------------------------------------
def _override_fields(obj, mapping: dict, prefix: str):
    """`obj` (a frozen dataclass) with the fields in `mapping` replaced, each checked against
    the field's type (typing hints) and range (RULES)."""
    hints = typing.get_type_hints(type(obj))
    allowed = [f.name for f in dataclasses.fields(obj) if f.name not in FIXED]
    changes = {}
    for name, value in mapping.items():
        key = prefix + name
        if name not in allowed:
            raise _unknown(key, allowed)
        changes[name] = _field_value(key, getattr(obj, name), value, hints[name])
    return replace(obj, **changes) if changes else obj


def _field_value(key: str, current, value, hint):
    name = key.rsplit(".", 1)[-1]
    if name in MODEL_FAMILY and isinstance(current, dict):
        return _model(key, current, value, MODEL_FAMILY[name])
    if key == "reference":
        return _reference(current, value)
    if key == "scales":
        if not isinstance(value, dict):
            raise _Bad(f"scales = {_show(value)} is not allowed; allowed: a table of scales ({', '.join(SCALES)})")
        unknown = sorted(set(value) - set(current))
        if unknown:
            raise _unknown(f"scales.{unknown[0]}", [f"scales.{s}" for s in current])
        return {s: _override_fields(spec, _table(f"scales.{s}", value[s]), f"scales.{s}.") if s in value else spec
                for s, spec in current.items()}
    value = _as_tuples(value)
    if not _type_ok(value, hint):
        raise _Bad(f"{key} = {_show(value)} is not allowed; allowed: {_type_name(hint)}")
    if _dataclass_of(hint) is not None:  # a nested spec (longppl, pair): its own fields
        if current is None:
            raise _Bad(f"{key} cannot be overridden: the base budget has none")
        return _override_fields(current, value, key + ".")
    if isinstance(value, dict):  # a plain dict field: merged
        return {**current, **value}
    _check_range(key, value)
    return value


def _table(key: str, value) -> dict:
    if not isinstance(value, dict):
        raise _Bad(f"{key} = {_show(value)} is not allowed; allowed: a table")
    return value


def _dataclass_of(hint):
    """The dataclass a type hint names (also as `X | None`), else None."""
    return next((h for h in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(h)), None)


def _model(key: str, current: dict, value, family: str) -> dict:
    """A model dict with `value`'s fields merged in, checked by building its config class
    (no tensors): unknown fields and bad shapes are named with the key."""
    _table(key, value)
    cfg_cls = FAMILIES[family][0]
    fields = [f.name for f in dataclasses.fields(cfg_cls)]
    hints = typing.get_type_hints(cfg_cls)
    for name, v in value.items():
        if name not in fields:
            raise _unknown(f"{key}.{name}", fields)
        if not _type_ok(v, hints[name]):
            raise _Bad(f"{key}.{name} = {_show(v)} is not allowed; allowed: {_type_name(hints[name])}")
    model = {**current, **{k: _as_tuples(v) if isinstance(v, list) else v for k, v in value.items()}}
    try:
        cfg_cls(**model)
    except (TypeError, ValueError) as e:
        changed = ", ".join(f"{k} = {_show(v)}" for k, v in value.items())
        raise _Bad(f"{key} with {changed} is not allowed: {e}") from None
    return model


def _reference(current: dict, value) -> dict:
    """The LongPPL reference: {kind = "hf", path} (a local Hugging Face model) or the trained
    {kind = "nblib", model, batch, lr, warmup_steps, n_tokens, copy}; merged into the base's
    unless `kind` changes."""
    _table("reference", value)
    kind = value.get("kind", current["kind"])
    if kind not in REFERENCE_KEYS:
        raise _Bad(f"reference.kind = {_show(kind)} is not allowed; allowed: {', '.join(REFERENCE_KEYS)}")
    out = dict(current) if kind == current["kind"] else {"kind": kind}
    for name, v in value.items():
        key = f"reference.{name}"
        if name not in REFERENCE_KEYS[kind]:
            raise _unknown(key, REFERENCE_KEYS[kind])
        if name == "model":
            out[name] = _model(key, out.get("model", {}), v, "llama")
        elif name == "copy":
            _table(key, v)
            unknown = sorted(set(v) - set(COPY_KEYS))
            if unknown:
                raise _unknown(f"{key}.{unknown[0]}", COPY_KEYS)
            for k, x in v.items():
                _scalar(f"{key}.{k}", x, int)
            out[name] = {**out.get("copy", {}), **v}
        elif name != "kind":
            _scalar(key, v, {"path": str, "lr": float}.get(name, int))
            out[name] = v
    missing = [k for k in REFERENCE_KEYS[kind] if k not in out and k != "copy"]
    if missing:
        raise _Bad(f"reference of kind {kind!r} needs {', '.join(missing)}; allowed keys: "
                   f"{', '.join(REFERENCE_KEYS[kind])}")
    return out


def _scalar(key: str, value, hint) -> None:
    if not _type_ok(value, hint):
        raise _Bad(f"{key} = {_show(value)} is not allowed; allowed: {_type_name(hint)}")
    _check_range(key, value)


def check_budget(b: Budget) -> None:
    """The constraints between fields that the grid relies on (nblib.lccp.grid): contexts
    grow stage by stage, every S5 configuration starts from a short-stage budget of
    `ds_multiples`, every Dl of the grid is a whole number of Constant checkpoints, and
    Fig. 4a's pool of checkpoints fits on S4's trajectory."""
    if not b.short_seq_len < b.long_seq_len < b.ext_seq_len:
        raise _Bad(f"short_seq_len = {b.short_seq_len}, long_seq_len = {b.long_seq_len}, ext_seq_len = "
                   f"{b.ext_seq_len} are not allowed; allowed: short_seq_len < long_seq_len < ext_seq_len")
    for ds, _ in b.s5_configs:
        if ds not in b.ds_multiples:
            raise _Bad(f"s5_configs = {_show(b.s5_configs)} is not allowed: Ds = {ds} is not one of ds_multiples "
                       f"{_show(b.ds_multiples)}; allowed: pairs [Ds, Dl] with Ds from ds_multiples")
    for dl in b.dl_multiples:
        j = dl / b.constant_ckpt_every
        if abs(j - round(j)) > 1e-6:
            raise _Bad(f"dl_multiples = {_show(b.dl_multiples)} is not allowed with constant_ckpt_every = "
                       f"{b.constant_ckpt_every}; allowed: whole multiples of constant_ckpt_every")
    # Fig. 4a's pool: FIG4A_POOL checkpoints of S4's Constant trajectory, s4_pool_ckpt_every apart,
    # ending at the largest Dl (chapter 4); each must be one the trajectory keeps, after Dl = 0
    j = b.s4_pool_ckpt_every / b.constant_ckpt_every
    reach = (FIG4A_POOL - 1) * b.s4_pool_ckpt_every
    if abs(j - round(j)) > 1e-6 or round(j) < 1 or reach >= b.dl_multiples[-1] - 1e-9:
        raise _Bad(f"s4_pool_ckpt_every = {b.s4_pool_ckpt_every} is not allowed with constant_ckpt_every = "
                   f"{b.constant_ckpt_every} and the largest Dl {b.dl_multiples[-1]}; allowed: a whole multiple of "
                   f"constant_ckpt_every with {FIG4A_POOL - 1} x s4_pool_ckpt_every < the largest Dl (Fig. 4a's pool "
                   f"of {FIG4A_POOL} checkpoints)")
    if b.last4_spacing is not None:
        _check_last4_spacing(b)


def _check_last4_spacing(b: Budget) -> None:
    """Last4(s) (App. B.1) averages checkpoints the trajectories keep, all after Dl = 0, at every
    grid Dl and every point chapter 5 extends (S5's Last4 points of chapter 4 start past 3s)."""
    s = b.last4_spacing
    for key in ("constant_ckpt_every", "s5_ckpt_every"):
        j = s / getattr(b, key)
        if abs(j - round(j)) > 1e-6 or round(j) < 1:
            raise _Bad(f"last4_spacing = {s} is not allowed with {key} = {getattr(b, key)}; allowed: a whole "
                       f"multiple of constant_ckpt_every ({b.constant_ckpt_every}) and of s5_ckpt_every "
                       f"({b.s5_ckpt_every}), the checkpoints the trajectories keep")
    first = min(b.dl_multiples[0], PAPER_POST_TRAINING_POINTS[0] * b.multiple_scale)
    if 3 * s >= first - 1e-9:
        raise _Bad(f"last4_spacing = {s} is not allowed with the smallest Dl {first:g} (dl_multiples, and "
                   f"chapter 5's first point); allowed: 3 x last4_spacing < {first:g}, so that Last4's first "
                   f"checkpoint lies after Dl = 0")


def apply_overrides(budget: Budget, mapping: dict) -> Budget:
    """`budget` with the fields of `mapping` (a budget file's tables, `base` left out)
    replaced; BudgetError names the first key that is unknown, of the wrong type or out of
    range. An empty mapping returns `budget` itself."""
    if not mapping:
        return budget
    out = _override_fields(budget, mapping, "")
    check_budget(out)
    return out


# ---------------------------------------------------------------------------------------
# the file, --set, and what a run records
# ---------------------------------------------------------------------------------------
def parse_set(text: str) -> dict:
    """`--set scales.S1.lr=5e-4` as the nested table {"scales": {"S1": {"lr": 0.0005}}}. The
    value is read as a TOML value (numbers, true/false, "strings", [lists]), else as a string."""
    key, sep, raw = str(text).partition("=")
    key = key.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*", key):
        raise BudgetError(f"--set {text!r} is not allowed; allowed: KEY=VALUE with a dotted key "
                          f"(e.g. --set scales.S1.lr=5e-4)")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    out: dict = value
    for part in reversed(key.split(".")):
        out = {part: out}
    return out


def merge(a: dict, b: dict) -> dict:
    """Table `a` with `b` merged in, tables key by key (b wins)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out


def _absolute(mapping: dict, folder: Path) -> dict:
    """`mapping` with the relative paths of PATH_KEYS read from `folder`."""
    out = copy.deepcopy(mapping)
    for key in PATH_KEYS:
        *parents, name = key.split(".")
        table = out
        for p in parents:
            table = table.get(p) if isinstance(table, dict) else None
        if not isinstance(table, dict) or not isinstance(table.get(name), str):
            continue
        spec = table[name]
        prefix = next((p for p in PATH_PREFIXES if spec.startswith(p)), "" if key == "reference.path" else None)
        rest = spec[len(prefix):] if prefix is not None else ""
        if prefix is not None and rest and not os.path.isabs(rest):
            table[name] = prefix + os.path.normpath(folder / rest)
    return out


@dataclass(frozen=True)
class BudgetFile:
    """A budget file read and checked: where it is, its sha256, its base, its overrides
    (the file's tables, then every --set), and the Budget they make."""

    path: Path | None  # None: a budget of `--set`s over a named budget, no file
    sha256: str | None
    base: str
    overrides: dict
    sets: tuple
    budget: Budget

    def record(self) -> dict:
        """What a run's manifest and the book's run report name: the file, its hash, the sets."""
        return {"path": str(self.path) if self.path else None, "sha256": self.sha256, "base": self.base,
                **({"sets": list(self.sets)} if self.sets else {})}

    def rows(self) -> list[tuple[str, object, object]]:
        """(dotted key, base value, this file's value) for every overridden leaf field."""
        base = get_budget(self.base)
        out = []

        def walk(prefix, table, old):
            for k, v in table.items():
                was = old.get(k) if isinstance(old, dict) else getattr(old, k, None)
                nested = isinstance(was, dict) or dataclasses.is_dataclass(was)
                if isinstance(v, dict) and k != "reference" and nested:
                    walk(f"{prefix}{k}.", v, was)
                else:
                    out.append((prefix + k, was, v))

        walk("", self.overrides, base)
        return out

    def to_toml(self, header: str = "") -> str:
        """The base and the overrides as one budget file (the --set values folded in)."""
        lines = [f"# {line}" for line in header.splitlines()] + [f"base = {_toml(self.base)}"]
        lines += [f"{_toml_key(k)} = {_toml(v)}" for k, v in self.overrides.items()]
        return "\n".join(lines) + "\n"

    def for_chapters(self, folder: Path) -> "BudgetFile":
        """The budget file the chapters read (their `budget_file` parameter): this one, or,
        when --set values (or no file) came with it, the base and every override written as
        one file, `folder/budget.toml`, that reads back to the same Budget."""
        if self.path and not self.sets:
            return self
        how = f"budget file {self.path} (sha256 {self.sha256})" if self.path else f"budget {self.base}"
        path = Path(folder) / "budget.toml"
        atomic_write_text(path, self.to_toml(f"Written by `python -m nblib.book run`: {how} with "
                                             + " ".join(f"--set {s}" for s in self.sets)))
        return read_budget_file(path)

    def report_lines(self, chapter_file: "BudgetFile | None" = None) -> list[str]:
        """The book's run report on this budget file: its path, sha256, base, the --set
        values, the file the chapters read (`for_chapters`) and every override."""
        lines = []
        if self.path:
            lines.append(f"Budget file: `{self.path}` (sha256 `{self.sha256}`), base **{self.base}**.")
        if self.sets:
            lines.append(f"Command-line overrides: {', '.join(f'`--set {s}`' for s in self.sets)}.")
        if chapter_file is not None and chapter_file.path != self.path:
            lines.append(f"The chapters read them as one file, `{chapter_file.path}` (sha256 "
                         f"`{chapter_file.sha256}`).")
        rows = "; ".join(f"`{k}` = `{_show(v)}` (base: `{_show(old)}`)" for k, old, v in self.rows())
        return lines + [f"Overrides of the base budget: {rows or 'none'}."]


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k, ensure_ascii=False)


def _toml(v) -> str:
    """A TOML value: inline tables and arrays, JSON-escaped strings, Python's float repr."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml(x)}" for k, x in v.items()) + "}"
    raise BudgetError(f"{v!r} cannot be written to a budget file; allowed: numbers, strings, lists, tables")


def _read_chain(path: Path, seen: tuple = ()) -> tuple[dict, list[bytes]]:
    """A budget file's table with its base's merged under it, and the raw bytes of each file
    of the chain, the file first. `base` names a budget, or another budget file (a path ending
    in .toml, read from this file's folder) whose fields this one overrides in turn: a design
    written as changes to another design (grid_designs/V.toml over F.toml)."""
    where = f"budget file {path}"
    if not path.is_file():
        raise FileNotFoundError(f"{where} not found; allowed: a TOML file (examples/ has one per budget)")
    if path in seen:
        raise BudgetError(f"{where}: its base chain comes back to itself ({' -> '.join(map(str, (*seen, path)))}); "
                          f"allowed: a chain that ends in one of {', '.join(BUDGETS)}")
    raw = path.read_bytes()
    try:
        mapping = _absolute(tomllib.loads(raw.decode("utf-8")), path.parent)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BudgetError(f"{where} is not valid TOML: {e}") from None
    if "base" not in mapping:
        raise BudgetError(f"{where}: the key 'base' is missing; allowed: base = one of {', '.join(BUDGETS)}, "
                          "or another budget file (a path ending in .toml)")
    base = mapping["base"]
    if not (isinstance(base, str) and base.endswith(".toml")):
        return mapping, [raw]
    below, raws = _read_chain((path.parent / base).absolute(), (*seen, path))
    own = {k: v for k, v in mapping.items() if k != "base"}
    return merge(below, own), [raw, *raws]


def read_budget_file(path: str | os.PathLike | None = None, sets=(), base: str | None = None) -> BudgetFile:
    """Read and check a budget file and `sets` (`--set` strings) over it. Without a file,
    `base` names the budget the sets start from. Raises BudgetError (one line: the file, the
    key, what is allowed) for a malformed file, FileNotFoundError for a missing one."""
    sets = tuple(sets or ())
    where = "--set"
    mapping: dict = {}
    sha = None
    if path not in (None, ""):
        path = Path(path).absolute()
        where = f"budget file {path}"
        mapping, raws = _read_chain(path)
        sha = hashlib.sha256(b"".join(raws)).hexdigest() if len(raws) > 1 else hashlib.sha256(raws[0]).hexdigest()
    else:
        path = None
        mapping = {"base": base or "toy"}
    for s in sets:
        mapping = merge(mapping, _absolute(parse_set(s), Path.cwd()))
    name = mapping.pop("base")
    if name not in BUDGETS:
        raise BudgetError(f"{where}: base = {_show(name)} is not allowed; allowed: {', '.join(BUDGETS)}")
    try:
        budget = apply_overrides(get_budget(name), mapping)
    except _Bad as e:
        raise BudgetError(f"{where}: {e}") from None
    return BudgetFile(path=path, sha256=sha, base=name, overrides=mapping, sets=sets, budget=budget)


def load_budget_file(path: str | os.PathLike, sets=()) -> Budget:
    """The Budget a budget file (and `--set` strings over it) describes (read_budget_file)."""
    return read_budget_file(path, sets).budget


# ---------------------------------------------------------------------------------------
# a command line's budget: --budget NAME or --budget-file FILE.toml
# ---------------------------------------------------------------------------------------
def add_budget_args(parser, default: str | None = "toy", grids: bool = False, help: str = "") -> None:
    """Add `--budget NAME` and `--budget-file FILE.toml` to an argparse `parser`, one or the other
    (`budget_from_args` reads them); with neither the budget is `default` (None: no budget).
    `grids`: --budget also names the probe grids (`PROBE_GRIDS`, "F": `get_grid`). `help`: what
    the budget is for, said before the allowed names."""
    names = ", ".join((*BUDGETS, *(PROBE_GRIDS if grids else ())))
    parser.add_argument("--budget", default=None, metavar="NAME",
                        help=(f"{help}: " if help else "") + f"one of {names}"
                        + (f" (default {default})" if default else ""))
    parser.add_argument("--budget-file", default=None, metavar="FILE.toml",
                        help="a TOML budget file instead of --budget: a named budget and the fields it overrides "
                             "(README, \"Your own data\"; examples/, data/probes/grid_designs/)")
    parser.set_defaults(budget_default=default, budget_grids=grids)


def budget_from_args(parser, args) -> tuple[Budget | None, str | None]:
    """(the Budget of a command line's --budget or --budget-file, the name its records give it:
    the budget's own name, or the budget file as given); (None, None) when neither is given and
    `add_budget_args` had no default. Both flags at once, an unknown name, or a missing or
    malformed file end the command as nblib.cli's one error path does, whether or not it runs
    under `run_cli`: one line, `error: ` and the value with what is allowed, exit status 2."""
    name, path = args.budget, args.budget_file
    if name is not None and path is not None:
        parser.exit(2, f"error: --budget {name} and --budget-file {path} are not allowed together; allowed: one "
                       "of them (a budget file names its base budget)\n")
    try:
        if path is not None:
            if not str(path).strip():
                raise BudgetError(f"--budget-file {path!r} is not allowed; allowed: the path of a TOML budget file")
            return read_budget_file(path).budget, str(path)
        name = args.budget_default if name is None else name
        if name is None:
            return None, None
        b = get_grid(name) if args.budget_grids else get_budget(name)
        return b, b.name
    except (BudgetError, FileNotFoundError) as e:
        parser.exit(2, f"error: {e}\n")
