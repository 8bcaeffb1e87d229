"""The book itself: the chapter runner, a chapter's helpers, figures, findings and the paper map.

Modules: chapters (the registry: each chapter's order, title, part and needs), build
(`python -m nblib.book run|test|sync|toc`: papermill, timings, the HTML build and its checks),
plan (`make plan`: the inputs a budget needs and its compute), budget_file and own_data (a TOML
budget file over a named budget; a user's corpus and tokenizer), chapter (what every chapter
opens with), figures (saving figures and tables with
manifests), findings and blog_findings (the sentences a chapter states from its numbers), paper_map and
paper_values (the paper's equations, figures and numbers). May import every other nblib package;
nothing imports it.
"""
