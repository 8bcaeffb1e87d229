"""The claims of both works: the scorecard (a claim and its rule in claim, the LCCP paper's claims
in lccp_claims, the Gemma blog's in blog_claims, the verdicts and the page in scorecard, the
paired-bootstrap noise in noise), the paper map (every equation, figure and table with the
function and chapter that produce it) and the sources' published values (paper_values)."""
