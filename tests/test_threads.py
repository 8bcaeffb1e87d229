"""A run's weights are fixed by its config, whoever trains it: the thread count is part of the
run (nblib.training.threads), not of the process that happens to start it."""

import dataclasses

import pytest
import torch

from nblib.budgets import get_budget
from nblib.lccp import grid
from nblib.store.runstore import ConfigError, RunConfig, RunStore
from nblib.training.runner import get_or_run
from nblib.training.threads import fixed_threads
from test_train import MODEL, cfg, final_weights

# d_model 64: large enough that a matmul splits its sums over two threads (at d_model 16 it
# does not, and the thread count would not show in the weights)
WIDE = {**MODEL, "d_model": 64, "d_ff": 128, "n_heads": 2, "n_kv_heads": 2}


def wide(threads=None) -> RunConfig:
    return dataclasses.replace(cfg(20), model=WIDE, threads=threads)


def differing(a: dict, b: dict) -> list:
    return [k for k in a if not torch.equal(a[k], b[k])]


def test_the_callers_threads_do_not_change_a_runs_weights(tmp_path):
    with fixed_threads(2):  # a probe or a kernel on two cores
        by_kernel = get_or_run(RunStore(tmp_path / "kernel"), wide(), progress=False)
        assert torch.get_num_threads() == 2  # the trainer gives the caller its threads back
    with fixed_threads(1):  # a worker of the book's pool
        by_worker = get_or_run(RunStore(tmp_path / "worker"), wide(), progress=False)
    with fixed_threads(1):
        two = get_or_run(RunStore(tmp_path / "two"), wide(threads=2), progress=False)
    assert by_kernel.manifest["threads"] == by_worker.manifest["threads"] == 1
    assert two.manifest["threads"] == 2
    assert differing(final_weights(by_kernel), final_weights(by_worker)) == []
    # the same run at two threads is another run: the weights differ, so the check above can fail
    assert differing(final_weights(by_worker), final_weights(two))


def test_threads_is_identity_and_unset_keeps_the_hash_runs_had_before_it():
    legacy = wide().to_dict()
    del legacy["threads"]  # a config.json written before the field existed
    assert RunConfig.from_dict(legacy).hash == wide().hash
    assert wide(threads=2).hash != wide().hash
    assert wide(threads=1).hash != wide().hash  # explicit 1 is a different config file, same weights
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match=rf"threads={bad!r} is not allowed; allowed: null or an int >= 1"):
            wide(threads=bad)


def test_runs_trained_alone_in_a_kernel_name_their_threads():
    ref = grid.reference_config(get_budget("smoke"))
    assert ref.threads == grid.REFERENCE_THREADS == 2
    short = grid.short_stage(get_budget("smoke"), "S1").all()[0]
    assert short.threads is None  # grid runs train in the pool's one-thread workers
