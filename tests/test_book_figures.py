"""Figure labels: every figure a chapter shows has a `#| label:`, a `:::{figure}` block with
a `:label:` and a caption, checked from the chapters' sources before any chapter runs."""

from __future__ import annotations

from pathlib import Path

import pytest

PLANTED_HEAD = '''# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 99. A planted chapter

# %% tags=["parameters"]
budget = "toy"
'''


def _plant(folder: Path, body: str, name: str = "99_planted") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(PLANTED_HEAD + body)
    return name


LABELLED = '''
# %% tags=["remove-output"]
#| label: cell-loss
fig, ax = plt.subplots()
ch.save_figure(fig, "loss")

# %% [markdown]
# :::{figure} #cell-loss
# :label: fig-loss
# Loss against tokens.
# :::
'''


@pytest.mark.parametrize("body,needle", [
    ('\n# %%\nfig, ax = plt.subplots()\nch.save_figure(fig, "loss")\n', "has no `#| label: cell-...` line"),
    ('\n# %%\ndisplay(Image("plot.png"))\n', "has no `#| label: cell-...` line"),
    (LABELLED.replace('# %% tags=["remove-output"]', "# %%"), "is not tagged remove-output"),
    (LABELLED.split("# %% [markdown]")[0], "no `:::{figure} #cell-loss` block shows it"),
    (LABELLED.replace("# :label: fig-loss\n", ""), "the block has no `:label:` option"),
    (LABELLED.replace("# Loss against tokens.\n", ""), "the block has an empty caption"),
    (LABELLED.replace("# :::\n", ""), "its block is never closed"),
    (LABELLED + "\n# %% [markdown]\n# :::{figure} #cell-gone\n# :label: fig-gone\n# Gone.\n# :::\n",
     "names a label no code cell has"),
])
def test_figure_check_fails_on_a_planted_figure_without_label_or_caption(tmp_path, body, needle):
    from nblib.book import build

    name = _plant(tmp_path / "notebooks", body)
    problems = build.check_figures([name], tmp_path / "notebooks")
    assert len(problems) == 1 and needle in problems[0] and problems[0].startswith(f"{name}: "), problems


def test_figure_check_passes_a_labelled_figure_and_a_saved_but_hidden_one(tmp_path):
    from nblib.book import build

    hidden = '\n# %%\nch.save_figure(fig, "raw", show=False)\n'
    name = _plant(tmp_path / "notebooks", LABELLED + hidden)
    assert build.check_figures([name], tmp_path / "notebooks") == []


def test_book_check_fails_on_a_planted_unlabelled_figure_and_passes_on_the_book(tmp_path, monkeypatch, capsys):
    """The planted chapter (in the chapter registry) fails the book check (check_book) and
    `run_book` stops before running any chapter; every real chapter passes the figure check."""
    from nblib.book import build
    from nblib.book.toc import ChapterEntry

    assert build.check_figures(build.chapters()) == []
    name = _plant(tmp_path / "notebooks", '\n# %%\nfig, ax = plt.subplots()\nch.save_figure(fig, "loss")\n')
    monkeypatch.setattr(build, "NOTEBOOKS", tmp_path / "notebooks")
    monkeypatch.setattr(build, "CHAPTERS", (ChapterEntry(name, "A planted chapter", "lccp"),))
    problems = build.check_book(tmp_path / "no-site", [name], tmp_path / "figures")
    assert any(p.startswith(f"{name}: code cell") and "no `#| label" in p for p in problems), problems
    ran = []
    monkeypatch.setattr(build, "execute", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(build, "preflight_html", lambda: ran.append("preflight"))
    assert build.run_book("smoke", tmp_path / "out", [name]) == 1 and ran == []
    err = capsys.readouterr().err
    assert f"figure problem: {name}: code cell" in err and "chapter registry" not in err, err


# --------------------------------------------------------------------------- readable figures (issue 64)
# Each of these figures is built from small planted tables and read the way a reader reads the
# saved PNG: every log axis carries at least 3 labelled ticks, every axis with numbers has a
# label, titles are words (no column names, no underscores), no legend covers data, and no
# labels are written over the points.

def _agg():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _planted_figures() -> dict:
    """{name: a function that builds the figure from planted tables}."""
    from types import SimpleNamespace

    import numpy as np
    import pandas as pd

    from nblib.chapters.part1 import downstream_figures, protocol_figures

    rng = np.random.default_rng(0)
    dl_tok = 24576.0 * np.arange(5, 155, 5)  # a trajectory's Last4 points in tokens: 120K to 3.7M
    y = 1.4 + 1.2 * (dl_tok / dl_tok[0]) ** -0.8

    def rules():
        # Raw, EMA 0.1 and EMA 0.5 on almost one point: the overprinting of the old annotations
        names = ["Raw", "Last4", "Last8", "Last12", "Last25", "1-Sqrt", "EMA 0.1", "EMA 0.5", "EMA 0.9", "DARE 0.1",
                 "DARE 0.5", "TIES 0.1", "TIES 0.5"]
        sp = [2.178, 2.19, 2.22, 2.26, 2.48, 2.29, 2.18, 2.185, 2.30, 2.50, 2.45, 2.56, 2.40]
        lp = [5.684, 5.725, 5.70, 5.71, 6.06, 5.71, 5.686, 5.70, 5.74, 6.0, 5.92, 6.81, 6.02]
        return protocol_figures.observation_rules_figure(
            pd.DataFrame({"rule": names, "shortppl": sp, "longppl": lp}),
            pd.Series({"shortppl": 2.53, "longppl": 6.14}), "S4, Ds=450N(S1), Dl=30N(S1)")

    def protocols():
        rows = []
        for ds in (270, 360, 450):
            for dl in (10, 20, 30):
                ld_l, ld_s = 6 + 6 * 10 / dl * 270 / ds, 2.5 + 1.5 * 10 / dl
                for rule, k in (("raw", 0.7), ("last4", 0.75)):
                    rows.append({"ds_mult": ds, "dl_mult": dl, "rule": rule, "longppl": k * ld_l + 1.5,
                                 "shortppl": k * ld_s + 0.5, "longppl_ld": ld_l, "shortppl_ld": ld_s})
        s4 = pd.DataFrame(rows)
        ccc = pd.DataFrame([{"metric": m, "rule": r, "CCC": 0.6} for m in ("shortppl", "longppl")
                            for r in ("raw", "last4")])
        return protocol_figures.protocols_figure(s4, ccc)

    def cl4_fit():
        ds, dl = np.meshgrid([6.4e6, 8.54e6, 10.67e6], [245760, 491520, 737280])
        la = rng.normal(1.9, 0.15, ds.size)
        a = SimpleNamespace(r2=0.94, mape=1.9, predictions=pd.DataFrame(
            {"Ds": ds.ravel(), "Dl": dl.ravel(), "log_longppl": la, "pred_log_longppl": la + 0.03}))
        b = SimpleNamespace(r2=0.18, mape=7.4, predictions=pd.DataFrame(
            {"Dl": dl_tok, "log_longppl": y, "pred_log_longppl": y + 0.05}))
        return protocol_figures.cl4_fit_figure(a, b, (["S1", "S2", "S3"], ["S4"]), ["S1", "S2", "S3", "S4"], "S5",
                                               737280)

    def prefix_fits():
        fits = {pm: SimpleNamespace(predict=lambda Dl, k=k: 1.4 + k + 1.2 * (np.asarray(Dl) / dl_tok[0]) ** -0.8)
                for pm, k in ((20, 0.0), (40, 0.05), (60, 0.1))}
        return protocol_figures.prefix_fits_figure(dl_tok, y, fits, "S5", "N(S1)")

    def elasticity():
        d_ext = np.geomspace(dl_tok[-1], 2 * dl_tok[-1], 30)
        return protocol_figures.elasticity_ratio_figure(dl_tok, 1 + np.log(dl_tok) / 50, d_ext,
                                                        1 + np.log(d_ext) / 50)

    points = [10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 150.0]

    def ruler():
        tasks = ["niah_single_1", "niah_single_2", "cwe", "fwe", "qa_1"]
        return downstream_figures.ruler_trajectory_figure(pd.DataFrame(
            [{"dl": d, "protocol": p, "task": t, "score": float(rng.choice([0.0, 0.0, 2.5, 5.0]))}
             for d in points for p in ("Raw", "Last4") for t in tasks]), 1024, "N(S1)")

    def needles():
        def table(dls, k):
            return pd.DataFrame([{"dl": d, "protocol": p, "score": k * d / 6, "control_score": 0.0,
                                  "piece_hit": 0.25 + k * d / 400, "needle_gain": 1.5 + k * d / 90}
                                 for d in dls for p in ("Raw", "Last4")])
        return downstream_figures.needle_trajectory_figure(table(points, 1.0), table([10.0, 40.0, 100.0, 150.0], 0.4),
                                                           1024, "short", "N(S1)")

    return {"fig04a_observation_rules": rules, "fig04b_protocols_s4": protocols, "fig05_cl4_fit": cl4_fit,
            "fig06_prefix_fits": prefix_fits, "fig17_elasticity_ratio": elasticity,
            "fig07_ruler_trajectory": ruler, "fig07b_needle_trajectory": needles}


@pytest.mark.parametrize("name", list(_planted_figures()))
def test_issue64_figures_are_readable(name):
    """Log axes with >= 3 labelled ticks, axis labels, titles in words, legends off the data,
    no labels written over the points, for each figure as saved (after `tidy`)."""
    plt = _agg()
    from nblib.chapters.figures import readability_problems, tidy

    fig = _planted_figures()[name]()
    tidy(fig)
    assert readability_problems(fig) == [], name
    for ax in fig.axes:
        assert not ax.texts, f"{name}: text written on the axes: {[t.get_text() for t in ax.texts]}"
    plt.close(fig)


def test_issue64_figures_name_their_units_and_score_range():
    """Fig. 7 spans RULER's whole 0-100 on both panels; the needle figure's Dl axis names the
    unit N(S1); Fig. 4b's panels are ShortPPL and LongPPL in words; the log axes are labelled
    in tokens."""
    plt = _agg()
    figs = {name: build() for name, build in _planted_figures().items()}
    for ax in figs["fig07_ruler_trajectory"].axes[:2]:
        lo, hi = ax.get_ylim()
        assert lo <= 0 and hi >= 100 and "0-100" in ax.get_ylabel(), (ax.get_ylim(), ax.get_ylabel())
    for ax in figs["fig07b_needle_trajectory"].axes:
        assert "N(S1)" in ax.get_xlabel() and "/ N" not in ax.get_xlabel(), ax.get_xlabel()
    titles = [ax.get_title() for ax in figs["fig04b_protocols_s4"].axes]
    assert titles[0].startswith("ShortPPL") and titles[1].startswith("LongPPL"), titles
    for name in ("fig05_cl4_fit", "fig06_prefix_fits", "fig17_elasticity_ratio"):
        fig = figs[name]
        fig.canvas.draw()
        logs = [ax for ax in fig.axes if ax.get_xscale() == "log"]
        assert logs and all("tokens" in ax.get_xlabel() for ax in logs), name
    for fig in figs.values():
        plt.close(fig)


def test_readability_check_fails_on_a_planted_unreadable_figure():
    """The check finds each fault of the old figures: a log axis under a decade with one
    label, a column name for a title, numbers without an axis label, a legend on the data."""
    plt = _agg()
    import numpy as np

    from nblib.chapters.figures import readability_problems, tidy

    fig, ax = plt.subplots()
    x = np.geomspace(2.4e5, 3.4e6, 30)
    ax.plot(x, np.linspace(1, 2, 30), label="measured")
    ax.set(xscale="log", xlabel="$D_l$ (tokens)", title="shortppl")
    ax.legend(loc="center")
    tidy(fig)
    problems = readability_problems(fig)
    assert any("the log x axis has 1 labelled ticks" in p for p in problems), problems
    assert any("reads as a column name" in p and "shortppl" in p for p in problems), problems
    assert any("the y axis has tick labels but no label" in p for p in problems), problems
    assert any("the legend of axes 0 covers data" in p for p in problems), problems
    plt.close(fig)


@pytest.mark.parametrize("lo,hi,n", [(2.4e5, 3.4e6, 30), (1.0e6, 1.3e6, 20), (1e3, 1e9, 40), (6.4e6, 10.67e6, 3)])
def test_token_ticks_give_every_log_axis_three_labels(lo, hi, n):
    """A trajectory's many points, a range narrower than any 1-2-5 step, six decades, and the
    grid's three budgets: each log axis ends with at least 3 and at most 9 labelled ticks."""
    plt = _agg()
    import numpy as np

    from nblib.chapters.figures import token_ticks, tidy

    fig, ax = plt.subplots()
    x = np.geomspace(lo, hi, n)
    ax.plot(x, np.arange(n))
    ax.set_xscale("log")
    token_ticks(ax, "x", x)
    tidy(fig)
    fig.canvas.draw()
    a, b = ax.get_xlim()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text() and a <= t.get_position()[0] <= b]
    assert 3 <= len(labels) <= 9, labels
    plt.close(fig)
