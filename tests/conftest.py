"""Fixtures shared by the test files."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """Run a test with one torch thread: tiny models train fastest that way, solo and batched
    runs then use the same kernels (so the same bits), and parallel test workers do not fight
    over cores. Files opt in with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
