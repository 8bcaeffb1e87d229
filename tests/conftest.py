"""Fixtures shared by the test files."""

import os

# pytest-xdist already runs one test file per core (`make test`: -n auto), so a test's own pool of
# training or evaluation workers would only add process start-ups (each imports torch, 2-3 s) on
# cores that are busy. Trainers and evaluations in tests, and the chapters and commands tests
# start, run in their own process unless $NBLIB_WORKERS says otherwise; the tests of the pools
# themselves name their worker counts. For the same reason torch runs one thread per process
# (set before torch is imported; the processes tests start inherit it): on a 2-core AMD EPYC the
# suite spent 559 CPU-s and 297 s this way against 586 CPU-s and 306-347 s with torch's default
# of one thread per core in every worker. Tests of threading name their thread counts.
os.environ.setdefault("NBLIB_WORKERS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402


# The files that start processes or train, by the CPU seconds they took on a 2-core AMD EPYC
# (their tests and the processes those start: 55, 47, 42, 34, 28, 27, 24, 23, 20, 15, 14, 13, 12
# s; the other files take under 10 s each). `make test` hands whole files to its two workers in
# collection order (`--dist loadfile --no-loadscope-reorder`); xdist's own order, the files with
# the most tests first, leaves these few-test, many-second files for last, where one of them can
# keep one worker busy while the other has nothing left (not measured apart: `make test` took
# 610 s with this and passive OpenMP waits against 671 s without, back to back, README).
HEAVY_FIRST = ("test_train.py", "test_robustness.py", "test_ensemble.py", "test_scaling.py", "test_budget_file.py",
               "test_notebooks.py", "test_gpu_check.py", "test_environment_errors.py", "test_plan.py",
               "test_book_site.py", "test_monitor.py", "test_training_length.py", "test_protocol_horizon.py")


def pytest_collection_modifyitems(config, items):
    """Run the files of HEAVY_FIRST first, in its order; the rest keep their order (a stable sort)."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture
def one_thread():
    """Run a test with one torch thread: tiny models train fastest that way, solo and batched
    runs then use the same kernels (so the same bits), and parallel test workers do not fight
    over cores. Files opt in with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


class UniformLogits(torch.nn.Module):
    """A model whose logits are all zero: every next-token NLL is ln V, whatever the input
    (the closed form the probe tests check against)."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab

    def forward(self, x):
        return torch.zeros(*x.shape, self.vocab), None


@pytest.fixture
def uniform_model():
    """Factory: uniform_model(V) is a `UniformLogits` over V tokens."""
    return UniformLogits
