"""The book runner: run, time, build, check, plan and report.

Modules: toc (the chapter registry: each chapter's order, title, part and needs; myst.yml's
table of contents), build (`python -m nblib.book run|test|sync|toc`: papermill, timings, the
HTML build and its checks), chapter (what every chapter opens and closes with), plan (`make
plan`: the inputs a budget needs, its compute and disk), html (Node.js and the HTML build),
nbval_runs (the test command's one execution of each chapter, under nbval-lax), run_report (the
"Run report" page), summary (the scorecard's summary, summary.json, and the landing page's
findings), executed (the toy build's executed chapters kept in book/toy/ with build.json) and
reader (`make html`: the book from them, executing nothing). What the chapters say and draw is
in nblib.chapters; budget files are in nblib.budgets. May import every other nblib package;
nothing imports it.
"""
