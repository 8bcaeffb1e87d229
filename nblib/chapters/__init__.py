"""The chapters' content: what each part of the book says and draws from its numbers, and the
claims it judges. One subpackage per part, in the order of the book's table of contents:

    part1/     the LCCP paper (chapters 2-5): the law's, the protocols' and the downstream words
               (law_findings, protocol_findings, downstream_findings) and figures (law_figures,
               protocol_figures, metric_figures, downstream_figures)
    part2/     the Gemma blog (chapters 6-10): blog_findings
    appendix/  designing the toy (chapters 11-12): toy_design, toy_erosion, toy_figures,
               grid_ladder_findings, probe_findings
    claims/    the scorecard of both works (claim, lccp_claims, blog_claims, scorecard, noise), the
               paper map, and the sources' published values (paper_values)

Every part shares figures (saving figures and tables with provenance manifests, and the plot
helpers), prose (the Markdown the words are written in) and budget_words (a budget in words,
beside the paper's). Nothing here trains or fits: each module turns the tables the experiments
return, or the records the probes keep, into sentences, figures and verdicts, so a chapter's
conclusions are always the ones its own run supports.

May import every nblib package of the rows above it in nblib's table (probes, lccp, gemma and
below); the book runner imports it (the scorecard page, the figures folder, the figure checks),
the chapters' notebooks call it.
"""
