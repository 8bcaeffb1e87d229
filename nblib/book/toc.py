"""The book's chapters in one table: their order, titles, parts, and whose runs each reads.

Adding a chapter: write notebooks/NN_name.py (jupytext percent format, headed `# N. Title`),
add one `ChapterEntry` line to CHAPTERS below, then run

    python -m nblib.book sync    # notebooks/NN_name.ipynb from the .py
    python -m nblib.book toc     # myst.yml's table of contents from CHAPTERS

Everything else reads this table: the book runner's chapter list and the order chapters run
in when several run at once (nblib.book.build), the plan's input lists (nblib.book.plan) and
the site's table of contents (myst.yml, which Jupyter Book reads, so it is written from here).
`check_registry` lists every way the notebooks folder and the table disagree, naming the
chapter; `python -m nblib.book run|test` call it before any chapter runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from nblib.store.provenance import REPO_ROOT

# The book's parts, in order: the LCCP paper (chapters 1-5), the Gemma blog (6-10), and the
# appendix on how the toy was designed (11-12: probe records only, no training).
PARTS = {"lccp": "Part 1: Long-context continual pre-training",
         "gemma": "Part 2: GPT-2 (124M) to Gemma 3-style (113M)",
         "appendix": "Appendix: designing the toy"}

# The pages around the chapters in the table of contents: the landing page and the run
# report that `python -m nblib.book run` writes.
FRONT_PAGE = "book/index.md"
BACK_PAGE = "book/run_report.md"
# The scorecard of every claim (nblib.book.scorecard), written by the runner from the build's
# figures and placed right after the first chapter.
SCORECARD_PAGE = "book/scorecard.md"

NAME = re.compile(r"\d\d_[a-z0-9_]+")


@dataclass(frozen=True)
class ChapterEntry:
    """One chapter: notebooks/<name>.py, headed `# <number>. <title>`, in `part` (a key of PARTS).

    needs: the chapters whose runs it reads; when chapters run at once it starts after they
    have ended (nblib.book.build.execute_all). inputs: whether it reads its part's corpus and
    tokenizer (nblib.book.plan.inputs); the introduction reads none.
    """

    name: str
    title: str
    part: str
    needs: tuple[str, ...] = ()
    inputs: bool = True

    @property
    def number(self) -> int:
        """The chapter's number, its name's NN prefix."""
        return int(self.name[:2])


CHAPTERS = (
    ChapterEntry("01_introduction", "Introduction: the claims, the budgets, how to run", "lccp", inputs=False),
    ChapterEntry("02_setup", "Setup: data, models and the LongPPL metric", "lccp"),
    ChapterEntry("03_scaling_law", "An additive two-stage scaling law for LCCP", "lccp",
                 needs=("02_setup",)),  # the LongPPL reference
    ChapterEntry("04_constant_last4", "Constant-Last4: an extensible trajectory you can read early", "lccp",
                 needs=("03_scaling_law",)),  # the short stages and the Linear-Decay grid
    ChapterEntry("05_downstream", "Downstream validation: RULER along the trajectory, Table 14, retrieval heads",
                 "lccp", needs=("04_constant_last4",)),  # the S5 Constant trajectory
    ChapterEntry("06_models_ab", "Models A and B: GPT-2 (124M) and a Gemma 3-style model (113M)", "gemma"),
    ChapterEntry("07_kv_cache", "Generating text with a KV cache", "gemma",
                 needs=("06_models_ab",)),  # Models A and B
    ChapterEntry("08_position", "How each model represents position: RoPE clocks and a learned table", "gemma",
                 needs=("06_models_ab",)),  # Models A and B
    ChapterEntry("09_yarn", "Extending Model B's context 4x with YaRN", "gemma",
                 needs=("06_models_ab",)),  # Model B
    ChapterEntry("10_attention", "What the heads attend to: copying, sinks and disagreements", "gemma",
                 needs=("06_models_ab",)),  # Models A and B
    ChapterEntry("11_toy_design", "Designing the toy (1): the budget, the grid designs, and what erodes",
                 "appendix", inputs=False),
    ChapterEntry("12_toy_ladders", "Designing the toy (2): protocols and needles on the design ladder",
                 "appendix", needs=("05_downstream",), inputs=False),  # chapter 5's code-needle table
)


def chapter_names(registry=CHAPTERS) -> list[str]:
    """Chapter names in book order (`01_introduction`, ...)."""
    return [c.name for c in registry]


def chapter_needs(registry=CHAPTERS) -> dict[str, tuple[str, ...]]:
    """{chapter: the chapters whose runs it reads} for the chapters that read another's runs."""
    return {c.name: c.needs for c in registry if c.needs}


def input_chapters(part: str, registry=CHAPTERS) -> tuple[str, ...]:
    """The chapters of `part` that read its corpus and tokenizer, in book order."""
    if part not in PARTS:
        raise ValueError(f"part={part!r} is not allowed; allowed: {', '.join(PARTS)}")
    return tuple(c.name for c in registry if c.part == part and c.inputs)


def toc_lines(registry=CHAPTERS) -> list[str]:
    """The `toc:` entries of myst.yml: the landing page, each part with its chapters (the
    scorecard right after the first chapter), the run report."""
    lines = [f"    - file: {FRONT_PAGE}"]
    part = None
    for i, c in enumerate(registry):
        if c.part != part:
            part = c.part
            lines += [f"    - title: {json.dumps(PARTS[part], ensure_ascii=False)}", "      children:"]
        lines.append(f"        - file: notebooks/{c.name}.ipynb")
        if i == 0:
            lines.append(f"        - file: {SCORECARD_PAGE}")
    return lines + [f"    - file: {BACK_PAGE}"]


def with_toc(myst: str, registry=CHAPTERS) -> str:
    """myst.yml's text with the entries under its `  toc:` line replaced by `toc_lines`."""
    lines = myst.split("\n")
    if "  toc:" not in lines:
        raise ValueError("myst.yml has no `  toc:` line under `project:` to write the chapters under")
    start = lines.index("  toc:") + 1
    end = start
    while end < len(lines) and lines[end].startswith("    "):
        end += 1
    return "\n".join(lines[:start] + toc_lines(registry) + lines[end:])


def sync_toc(path: Path = REPO_ROOT / "myst.yml", check: bool = False, registry=CHAPTERS) -> bool:
    """Write the registry's table of contents into myst.yml at `path`; return whether it was
    stale. check=True only reports it."""
    text = path.read_text()
    new = with_toc(text, registry)
    if new != text and not check:
        path.write_text(new)
    return new != text


def _heading(path: Path) -> str | None:
    """The chapter's title line, `# # N. Title` in the jupytext percent source, without `# # `."""
    for line in path.read_text().splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return None


def _cycles(registry) -> list[list[str]]:
    """Each cycle of `needs` among the registry's chapters, as a path that ends where it starts."""
    graph = {c.name: [n for n in c.needs if n in {d.name for d in registry}] for c in registry}
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    found, seen = [], set()

    def visit(n, path):
        state[n] = 1
        for m in graph[n]:
            if state.get(m) == 1:
                cycle = path[path.index(m):] + [m]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    found.append(cycle)
            elif m not in state:
                visit(m, path + [m])
        state[n] = 2

    for n in graph:
        if n not in state:
            visit(n, [n])
    return found


def check_registry(notebook_dir: Path, registry=CHAPTERS) -> list[str]:
    """Every disagreement between the notebooks in `notebook_dir` and the registry, one line
    each, naming the chapter: a notebook missing from the registry, a chapter without a
    notebook or whose title differs from its heading, an unknown part, chapters out of
    number order or a part split in two, and `needs` that name no chapter, a later chapter,
    or form a cycle. Empty when all agree."""
    out = []
    index: dict[str, int] = {}
    for i, c in enumerate(registry):
        if c.name in index:
            out.append(f"chapter {c.name}: listed twice in the chapter registry")
            continue
        index[c.name] = i
        if not NAME.fullmatch(c.name):
            out.append(f"chapter {c.name}: the name is not NN_lowercase_words like 03_scaling_law")
            continue
        if c.part not in PARTS:
            out.append(f"chapter {c.name}: part {c.part!r} is not one of {', '.join(PARTS)}")
        src = notebook_dir / f"{c.name}.py"
        if not src.is_file():
            out.append(f"chapter {c.name}: in the chapter registry but there is no notebook {src}")
            continue
        heading, expected = _heading(src), f"{c.number}. {c.title}"
        if heading != expected:
            out.append(f"chapter {c.name}: the registry's heading {expected!r} differs from the notebook's "
                       f"{heading!r} ({src})")
    for src in sorted(notebook_dir.glob("[0-9][0-9]_*.py")):
        if src.stem not in index:
            out.append(f"chapter {src.stem}: notebook {src} is missing from the chapter registry "
                       f"(add a ChapterEntry to CHAPTERS in nblib/book/toc.py)")
    parts_seen = []
    for prev, c in zip(registry, registry[1:]):
        if c.name < prev.name:
            out.append(f"chapter {c.name}: listed after {prev.name}; the registry's order must follow the NN numbers")
        if c.part != prev.part and c.part in parts_seen:
            out.append(f"chapter {c.name}: part {c.part!r} resumes after part {prev.part!r}; a part's chapters "
                       f"must be consecutive")
        parts_seen.append(prev.part)
    for c in registry:
        for n in c.needs:
            if n not in index:
                out.append(f"chapter {c.name}: needs {n}, which is not a chapter in the registry")
            elif index[n] >= index[c.name]:
                out.append(f"chapter {c.name}: needs {n}, which does not come before it (a chapter can read "
                           f"runs of earlier chapters only)")
    for cycle in _cycles(registry):
        out.append(f"chapter {cycle[0]}: its needs form a cycle {' -> '.join(cycle)}")
    return out
