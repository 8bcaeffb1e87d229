"""Regenerate and execute the two tiny sample notebooks used by tests/test_book_site.py.

Run from the repo root with the venv: `.venv/bin/python book/sample/make_notebooks.py`.
The executed notebooks are committed, so the tests never execute anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # repo root, for nblib.store.atomic
from nblib.store.atomic import atomic_write_text  # noqa: E402

md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell

STREAMS = [
    md("# Streams and errors\n\n"
       "A markdown cell with inline math $E = mc^2$ and a cross-reference to the\n"
       "[plots page](02_plots.ipynb) and to its [sine figure](#fig-sine)."),
    code("print('hello from the sample notebook')\nprint('second line <b>not bold</b>')"),
    md("(long-output)=\n## A long output\n\nThe next cell prints more than 25,000 characters."),
    code("print('\\n'.join(f'line {i:05d} ' + 'x' * 40 for i in range(600)))"),
    md("## Rich outputs"),
    code("from IPython.display import HTML, display\n"
         "display(HTML('<table class=\"rich\"><tr><td>rich html cell</td></tr></table>'))\n"
         "1 + 1"),
    code("raise ValueError('sample error for the renderer')", metadata={"tags": ["raises-exception"]}),
]

PLOTS = [
    md("# Plots\n\nThis page draws one figure; see the [intro](../intro.md) for the\n"
       "equation $\\int_0^1 x\\,dx = 1/2$ and the [long output](#long-output)."),
    code("%matplotlib inline\nimport matplotlib.pyplot as plt\nimport numpy as np"),
    md("(fig-sine)=\n## A sine wave"),
    code("x = np.linspace(0, 2 * np.pi, 50)\n"
         "fig, ax = plt.subplots(figsize=(3, 2), dpi=60)\n"
         "ax.plot(x, np.sin(x))\nax.set_title('sine')\nplt.show()"),
]


def build(cells: list, path: Path) -> None:
    """Execute `cells` in a fresh python3 kernel and write the notebook to `path`."""
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    atomic_write_text(path, nbformat.writes(nb) + "\n")


if __name__ == "__main__":
    build(STREAMS, HERE / "notebooks" / "01_streams.ipynb")
    build(PLOTS, HERE / "notebooks" / "02_plots.ipynb")
