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

# d_model 64: on the CPU this test was written on, large enough that a matmul splits its sums over
# two threads (at d_model 16 it does not); an AMD EPYC host does not split them even at d_model 256
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
    # the manifest reads torch's thread count while the run trains: 1 although the kernel had 2
    assert by_kernel.manifest["threads"] == by_worker.manifest["threads"] == 1
    assert differing(final_weights(by_kernel), final_weights(by_worker)) == []


def test_on_this_cpu_the_thread_count_shows_in_the_weights(tmp_path):
    """The control for the test above: whether two threads change the weights depends on how the
    CPU's matmul kernels split their sums (one CI host kept d_model 64 bit-identical at 1 and 2
    threads). Where they do not split, the manifest check above carries the test, and this says so."""
    with fixed_threads(1):
        one = get_or_run(RunStore(tmp_path / "one"), wide(), progress=False)
        two = get_or_run(RunStore(tmp_path / "two"), wide(threads=2), progress=False)
    assert one.manifest["threads"] == 1 and two.manifest["threads"] == 2  # the config's count, not the caller's
    if not differing(final_weights(one), final_weights(two)):
        pytest.skip("this CPU's kernels give the same weights at 1 and 2 threads at d_model 64")


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
