"""Part 1, the LCCP paper (chapters 2-5): each chapter's words (law_findings for chapter 3,
protocol_findings for chapter 4, downstream_findings for chapter 5) and figures (metric_figures
for chapter 2, law_figures, protocol_figures, downstream_figures)."""
