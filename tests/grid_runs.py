"""Helpers for the tests that compare whole toy grids (test_budget_file.py, test_grid_designs.py):
every run hash of a budget's grid, and which grid stages are LCCP's."""

from nblib.lccp import grid

LCCP_STAGES = ("linear-decay", "constant", "trajectory")  # grid.grid_runs stages trained at the long context


def grid_hashes(b) -> list[str]:
    """Every run hash of chapters 2-4 at budget `b`, in grid order (corpus identity left out)."""
    with grid.placeholder_corpus():
        return [c.hash for st in grid.grid_runs(b) for c in st.configs]
