"""Corpora: documents with an id and a text, a deterministic train/eval split, and loaders.

The default corpus is real text that every install already has: the Python
standard-library sources of the running interpreter, pinned by a committed manifest
(`data/corpus_manifests/python-stdlib-<version>.json`). Other corpora load from a folder
of `.txt` files or from `.jsonl` / `.jsonl.xz` files with a `text` field.

Corpus spec strings (`load_corpus`):
    "python-stdlib"            the running interpreter's standard library (*.py)
    "jsonl:/path/file.jsonl"   one JSON object per line with "text" (and optional "id");
                               .jsonl.xz and .jsonl.gz are decompressed on the fly
    "txt:/path/folder"         every *.txt file below the folder (recursive)
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import lzma
import sys
import sysconfig
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from nblib.store.atomic import atomic_write_text
from nblib.store.provenance import REPO_ROOT

log = logging.getLogger(__name__)

MANIFEST_DIR = REPO_ROOT / "data" / "corpus_manifests"
STDLIB_SPEC = "python-stdlib"
SPEC_FORMS = (
    '"python-stdlib"',
    '"jsonl:/path/file.jsonl" (also .jsonl.xz, .jsonl.gz)',
    '"txt:/path/folder"',
)
SPLITS = ("train", "eval", "all")


@dataclass(frozen=True)
class Document:
    """One document: a unique id (what the train/eval split hashes) and its text."""

    id: str
    text: str


@dataclass
class Corpus:
    """A named list of documents plus a content hash (`identity`) that goes into run configs."""

    name: str  # the spec it was loaded from, e.g. "python-stdlib"
    docs: list[Document]
    identity: str  # sha256 hex of the content; the pinned manifest hash for python-stdlib
    info: dict = field(default_factory=dict)  # loader details (version, verified, limit, ...)

    def __len__(self) -> int:
        return len(self.docs)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.docs)

    @property
    def n_chars(self) -> int:
        """Characters over all documents."""
        return sum(len(d.text) for d in self.docs)

    def split(self, split: str, eval_fraction: float = 0.1) -> list[Document]:
        """Documents of one split ("train", "eval" or "all"), by document-id hash (see `in_eval_split`)."""
        return split_documents(self.docs, split, eval_fraction)


# --------------------------------------------------------------------------- split


def split_fraction(doc_id: str) -> float:
    """Map a document id to a fraction in [0, 1): the first 8 bytes of sha256(id) / 2**64.

    A document's split depends on its own id only, so the split is deterministic and does
    not change when other documents are added or removed.
    """
    digest = hashlib.sha256(doc_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _check_eval_fraction(eval_fraction: float) -> None:
    if not isinstance(eval_fraction, (int, float)) or not 0.0 <= eval_fraction <= 1.0:
        raise ValueError(f"eval_fraction must be a number in [0, 1], got {eval_fraction!r}")


def in_eval_split(doc_id: str, eval_fraction: float = 0.1) -> bool:
    """True when the document belongs to the eval split: split_fraction(id) < eval_fraction."""
    _check_eval_fraction(eval_fraction)
    return split_fraction(doc_id) < eval_fraction


def split_documents(docs: Sequence[Document], split: str, eval_fraction: float = 0.1) -> list[Document]:
    """Select the documents of `split` ("train", "eval" or "all"), keeping corpus order."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    _check_eval_fraction(eval_fraction)
    if split == "all":
        return list(docs)
    want_eval = split == "eval"
    return [d for d in docs if (split_fraction(d.id) < eval_fraction) == want_eval]


# --------------------------------------------------------------------------- checks and hashes


def content_hash(docs: Sequence[Document]) -> str:
    """sha256 over (id, text) of every document, length-prefixed so the encoding is unambiguous."""
    h = hashlib.sha256()
    for d in docs:
        for s in (d.id, d.text):
            b = s.encode("utf-8", "surrogatepass")
            h.update(f"{len(b)}:".encode())
            h.update(b)
    return h.hexdigest()


def require_nonempty(name: str, docs: Sequence[Document]) -> None:
    """Raise ValueError when a corpus has no documents or only empty ones."""
    if len(docs) == 0:
        raise ValueError(f"corpus {name!r} is empty: it has no documents; a corpus needs at least one non-empty document")
    if not any(d.text for d in docs):
        raise ValueError(
            f"corpus {name!r} is empty: all {len(docs)} documents have empty text; "
            "a corpus needs at least one non-empty document"
        )


def _make_corpus(name: str, docs: list[Document], info: dict, identity: str | None = None) -> Corpus:
    require_nonempty(name, docs)
    ids = [d.id for d in docs]
    if len(set(ids)) != len(ids):
        seen, dup = set(), None
        for i in ids:
            if i in seen:
                dup = i
                break
            seen.add(i)
        raise ValueError(f"corpus {name!r}: document ids must be unique (the split hashes them); {dup!r} repeats")
    return Corpus(name=name, docs=docs, identity=identity or content_hash(docs), info=info)


def _check_limit(limit: int | None) -> None:
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")


# --------------------------------------------------------------------------- user corpora


def _open_text(path: Path):
    if path.name.endswith(".xz"):
        return lzma.open(path, "rt", encoding="utf-8")
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def load_jsonl(path: str | Path, limit: int | None = None) -> Corpus:
    """Load `.jsonl` / `.jsonl.xz` / `.jsonl.gz`: one JSON object per line with a string `text`.

    The id is the `id` field (as str) when present, else the 1-based line number. Blank lines
    are skipped. `limit` stops after that many documents (fast tests on large files).
    """
    _check_limit(limit)
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"jsonl corpus file not found: {str(path)!r}")
    docs: list[Document] = []
    with _open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                raise ValueError(f'{path}:{lineno}: each line must be a JSON object with a string "text" field')
            doc_id = str(obj["id"]) if "id" in obj else str(lineno)
            docs.append(Document(doc_id, obj["text"]))
            if limit is not None and len(docs) >= limit:
                break
    return _make_corpus(f"jsonl:{path}", docs, {"path": str(path), "limit": limit})


def load_txt_folder(folder: str | Path, limit: int | None = None) -> Corpus:
    """Load every `*.txt` below `folder` (recursive, sorted); id = path relative to the folder.

    Bytes that are not valid UTF-8 become U+FFFD (counted in `info["n_decode_errors"]`).
    """
    _check_limit(limit)
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"txt corpus folder not found: {str(folder)!r}")
    files = sorted(p for p in folder.rglob("*.txt") if p.is_file())
    if limit is not None:
        files = files[:limit]
    docs, n_bad = [], 0
    for p in files:
        raw = p.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text, n_bad = raw.decode("utf-8", errors="replace"), n_bad + 1
        docs.append(Document(p.relative_to(folder).as_posix(), text))
    if n_bad:
        log.warning("txt corpus %s: %d files were not valid UTF-8; bad bytes became U+FFFD", folder, n_bad)
    return _make_corpus(f"txt:{folder}", docs, {"path": str(folder), "limit": limit, "n_decode_errors": n_bad})


# --------------------------------------------------------------------------- python stdlib


def python_version() -> str:
    """The running interpreter's version as major.minor.micro."""
    v = sys.version_info
    return f"{v.major}.{v.minor}.{v.micro}"


def stdlib_root() -> Path:
    """The running interpreter's standard-library folder (sysconfig's "stdlib" path)."""
    return Path(sysconfig.get_paths()["stdlib"])


def _is_stdlib_source(rel: Path) -> bool:
    parts = rel.parts
    if {"site-packages", "dist-packages", "__pycache__"} & set(parts):
        return False  # third-party packages and caches are not the stdlib
    # Build-generated files differ between builds of the same version: leave them out.
    if rel.name.startswith("_sysconfigdata") or parts[0].startswith("config-"):
        return False
    return True


def stdlib_files(root: str | Path | None = None) -> list[str]:
    """Sorted relative POSIX paths of the standard-library `*.py` sources under `root`."""
    root = Path(root) if root is not None else stdlib_root()
    rels = (p.relative_to(root) for p in root.rglob("*.py") if p.is_file())
    return sorted(r.as_posix() for r in rels if _is_stdlib_source(r))


def _overall_hash(entries: dict[str, tuple[str, int]]) -> str:
    """One sha256 over sorted (path, file sha256, size) lines."""
    h = hashlib.sha256()
    for rel in sorted(entries):
        sha, size = entries[rel]
        h.update(f"{rel}\t{sha}\t{size}\n".encode())
    return h.hexdigest()


def _decode_source(raw: bytes) -> str:
    """Decode Python source as the interpreter would (PEP 263 coding cookie), else UTF-8 with U+FFFD."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return raw.decode(encoding, errors="replace")
    except (SyntaxError, LookupError):  # a deliberately bad cookie in the stdlib's own tests
        return raw.decode("utf-8", errors="replace")


def _read_stdlib(root: Path) -> tuple[list[Document], dict[str, tuple[str, int]]]:
    docs, entries = [], {}
    for rel in stdlib_files(root):
        raw = (root / rel).read_bytes()
        entries[rel] = (hashlib.sha256(raw).hexdigest(), len(raw))
        docs.append(Document(rel, _decode_source(raw)))
    return docs, entries


def manifest_path(version: str | None = None, manifest_dir: str | Path | None = None) -> Path:
    """Path of the pinned manifest for a Python version (default: the running one)."""
    manifest_dir = Path(manifest_dir) if manifest_dir is not None else MANIFEST_DIR
    return manifest_dir / f"python-stdlib-{version or python_version()}.json"


def write_stdlib_manifest(
    root: str | Path | None = None, manifest_dir: str | Path | None = None, version: str | None = None
) -> Path:
    """(Re)generate the pinned manifest of the stdlib corpus: per-file sha256 and size, one overall sha256.

    Defaults: the running interpreter's stdlib and version, written to data/corpus_manifests/.
    """
    root = Path(root) if root is not None else stdlib_root()
    version = version or python_version()
    _, entries = _read_stdlib(root)
    if not entries:
        raise ValueError(f"no Python sources found under {str(root)!r}; cannot write a stdlib manifest")
    manifest = {
        "corpus": STDLIB_SPEC,
        "python_version": version,
        "implementation": sys.implementation.name,
        "n_files": len(entries),
        "total_bytes": sum(size for _, size in entries.values()),
        "sha256": _overall_hash(entries),
        "files": [{"path": rel, "sha256": sha, "bytes": size} for rel, (sha, size) in sorted(entries.items())],
    }
    out = manifest_path(version, manifest_dir)
    # One line per file keeps diffs between interpreter versions readable.
    head = json.dumps({k: v for k, v in manifest.items() if k != "files"}, indent=1, sort_keys=True)[:-2]
    rows = ",\n".join("  " + json.dumps(f, sort_keys=True) for f in manifest["files"])
    atomic_write_text(out, f'{head},\n "files": [\n{rows}\n ]\n}}\n')
    return out


def _version_key(v: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in v.split("."))
    except ValueError:
        return (-1,)


def find_manifest(version: str | None = None, manifest_dir: str | Path | None = None) -> Path | None:
    """The manifest for `version` if committed, else the closest one (same major.minor first, then newest)."""
    version = version or python_version()
    exact = manifest_path(version, manifest_dir)
    if exact.is_file():
        return exact
    folder = exact.parent
    found = [(p.name[len("python-stdlib-") : -len(".json")], p) for p in folder.glob("python-stdlib-*.json")]
    if not found:
        return None
    minor = version.rsplit(".", 1)[0]
    found.sort(key=lambda vp: (vp[0].rsplit(".", 1)[0] == minor, _version_key(vp[0])))
    return found[-1][1]


def python_stdlib_corpus(
    root: str | Path | None = None,
    manifest: str | Path | None = None,
    version: str | None = None,
    limit: int | None = None,
) -> Corpus:
    """The default corpus: the interpreter's standard-library sources, one document per `*.py` file.

    Verified against the pinned manifest (`manifest` file, or the one `find_manifest` picks in
    data/corpus_manifests/). On any difference (version, files added/removed/changed) this
    logs a warning naming expected vs found and uses the found content hash as identity.
    `limit` keeps the first `limit` files (sorted by path) after hashing all of them.
    """
    _check_limit(limit)
    root = Path(root) if root is not None else stdlib_root()
    version = version or python_version()
    if not root.is_dir():
        raise ValueError(f"stdlib folder not found: {str(root)!r}")
    docs, entries = _read_stdlib(root)
    found_sha = _overall_hash(entries)
    mpath = Path(manifest) if manifest is not None else find_manifest(version)
    info = {
        "python_version": version,
        "root": str(root),
        "n_files": len(entries),
        "total_bytes": sum(size for _, size in entries.values()),
        "manifest": str(mpath) if mpath else None,
        "verified": False,
        "limit": limit,
    }
    if mpath is None or not mpath.is_file():
        log.warning(
            "python-stdlib corpus: no pinned manifest for Python %s (looked for %s); "
            "using the found content hash %s as corpus identity. Pin one with write_stdlib_manifest().",
            version, mpath or manifest_path(version), found_sha[:16],
        )
    else:
        pinned = json.loads(mpath.read_text())
        expected = {f["path"]: (f["sha256"], f["bytes"]) for f in pinned["files"]}
        same_version = pinned["python_version"] == version
        if same_version and pinned["sha256"] == found_sha:
            info["verified"] = True
        else:
            added = sorted(set(entries) - set(expected))
            removed = sorted(set(expected) - set(entries))
            changed = sorted(r for r in set(entries) & set(expected) if entries[r] != expected[r])
            log.warning(
                "python-stdlib corpus differs from the pinned manifest %s: expected Python %s with %d files "
                "(sha256 %s), found Python %s with %d files (sha256 %s): %d added, %d removed, %d changed%s. "
                "Using the found content hash as corpus identity.",
                mpath.name, pinned["python_version"], pinned["n_files"], pinned["sha256"][:16],
                version, len(entries), found_sha[:16], len(added), len(removed), len(changed),
                f" (e.g. {(changed + added + removed)[0]})" if (changed or added or removed) else "",
            )
    if limit is not None:
        docs = docs[:limit]
        keep = {d.id for d in docs}
        found_sha = _overall_hash({r: e for r, e in entries.items() if r in keep})
    return _make_corpus(STDLIB_SPEC if limit is None else f"{STDLIB_SPEC}[:{limit}]", docs, info, identity=found_sha)


# --------------------------------------------------------------------------- specs


def load_corpus(spec: str, limit: int | None = None) -> Corpus:
    """Resolve a corpus spec string to a loaded Corpus (see the module docstring for the forms)."""
    if not isinstance(spec, str):
        raise TypeError(f"corpus spec must be a str, got {type(spec).__name__}; allowed forms: {', '.join(SPEC_FORMS)}")
    if spec == STDLIB_SPEC:
        return python_stdlib_corpus(limit=limit)
    kind, sep, rest = spec.partition(":")
    if sep and rest and kind == "jsonl":
        return load_jsonl(rest, limit=limit)
    if sep and rest and kind == "txt":
        return load_txt_folder(rest, limit=limit)
    raise ValueError(f"unknown corpus spec {spec!r}; allowed forms: {', '.join(SPEC_FORMS)}")
