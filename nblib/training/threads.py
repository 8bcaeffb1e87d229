"""CPU threads as part of what a run is.

A float sum depends on its order, and on many CPUs a matmul splits its sums over threads: the same
run trained at one thread and at two gives different weights after a few hundred steps, and
the difference grows (training is chaotic). So a run trains at the thread count its config
names (`RunConfig.threads`; 1 when unset, which is how the grid's worker pool trains), whoever
starts it: the book's pool, a chapter's kernel, or a probe run from the command line.

Across machines, one thread is the reproducible choice: the toy grid's one-thread runs came out
bit-identical on two hosts with different CPUs, while the two-thread LongPPL reference did not
(how a matmul splits its sums over threads depends on the CPU), which moved chapter 3's held-out
R² by about 0.01. The reference keeps two threads because it trains alone and one thread would
make chapter 2 take about 1.7x as long.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

DEFAULT_THREADS = 1  # a run without `threads` in its config: the worker pool's one thread
KERNEL_THREADS = 2  # a run that trains alone in a chapter's kernel, on both cores of the 2-core machine


@contextmanager
def fixed_threads(n: int):
    """Run the block with torch's intra-op CPU threads set to `n`, then restore the caller's."""
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)
