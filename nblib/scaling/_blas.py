"""Pin scipy's bundled OpenBLAS to one thread while many tiny fits run.

L-BFGS-B's compiled core makes BLAS calls on ~10x10 matrices; a multi-threaded OpenBLAS on
a busy 2-core machine made each call ~100x slower (measured: 0.4 s vs 0.015 s per fit).
This is what threadpoolctl does, for the one library involved; a no-op where scipy uses
another BLAS (conda MKL, system OpenBLAS).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os

import scipy
import scipy.optimize  # noqa: F401  (loads the bundled OpenBLAS first, so CDLL below finds the same copy)


@functools.lru_cache(maxsize=1)
def _scipy_openblas():
    libs = glob.glob(os.path.join(os.path.dirname(scipy.__file__), os.pardir, "scipy.libs", "libscipy_openblas*.so*"))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            lib.scipy_openblas_get_num_threads.restype = ctypes.c_int
            lib.scipy_openblas_set_num_threads.argtypes = [ctypes.c_int]
            return lib
        except (OSError, AttributeError):
            continue
    return None


@contextlib.contextmanager
def one_blas_thread():
    """Context: scipy's OpenBLAS runs single-threaded inside, restored on exit."""
    lib = _scipy_openblas()
    if lib is None:
        yield
        return
    old = lib.scipy_openblas_get_num_threads()
    lib.scipy_openblas_set_num_threads(1)
    try:
        yield
    finally:
        lib.scipy_openblas_set_num_threads(old)
