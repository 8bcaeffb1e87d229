"""The appendix, designing the toy (chapters 11-12): the design tables and their words (toy_design),
the erosion probe's tables (toy_erosion), their figures (toy_figures), the design ladder against
its targets (grid_ladder_findings) and the other probes' records in words (probe_findings)."""
