"""Checkpoint merging for Constant-Last4 (LCCP paper, Sec. 4.1 and App. B).

All methods read checkpoints ordered oldest (theta_1) to newest (theta_K):
- weighted averages (Eq. 3) with weights from LastM (Eq. 4), 1-Sqrt (Eqs. 5-6) or EMA (Eq. 7);
- task-vector merges DARE-linear and TIES, with task vectors delta_i = theta_i - theta_1.

Streaming: nothing here ever loads a whole checkpoint. Tensors are visited name by name
(sorted), and each tensor in blocks of rows (dim 0) of at most `chunk_numel` elements, read
from every checkpoint with `safe_open(...).get_slice`. Live memory is the merged output (one
model, in the checkpoints' dtype) plus a few fp32 block buffers, whatever the number of
checkpoints. TIES also holds one fp32 copy of one whole task-vector tensor (its trimming is
per tensor). Each function's docstring states its bound; an optional `tracker` sees every
tensor this module materialises, so tests can check the bound. With the default block
size (`default_chunk_numel`: 1/64 of the model) the peak stays below two models' worth as
long as no single row holds more than 1/64 of the model and, for TIES,
4 * n_max + (8 + b) * c <= model bytes (n_max: largest tensor's elements, b: stored bytes
per element, c: block elements).

CLI: python -m nblib.lccp.merge --method {lastM,one_sqrt,ema,dare,ties} CKPT... -o OUT.safetensors

Modules: checks (argument checks, memory tracker), weights (Eqs. 4-7), files (iterations,
headers, the streaming reader), methods (Eq. 3, DARE, TIES, `merge`, `save_merged`), cli.
May import nblib.store and nblib.cli; nothing here trains or evaluates.
"""

from nblib.lccp.merge.cli import main
from nblib.lccp.merge.files import CHUNK_NUMEL, check_compatible, default_chunk_numel, read_iteration, resolve_iterations
from nblib.lccp.merge.methods import (METHODS, dare_merge, dare_source_seeds, ema_merge, last_m_merge, merge,
                                      one_sqrt_merge, save_merged, ties_keep_count, ties_merge, weighted_average)
from nblib.lccp.merge.weights import default_ema_delta, ema_weights, last_m_weights, one_sqrt_weights, spaced_indices
