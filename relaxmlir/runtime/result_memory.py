"""Memory for the results of compiled calls: large ones from the native runtime's block cache.

A call's results were `np.empty` arrays. glibc serves a large one with fresh mmap pages and
gives them back to the system when the caller drops it, so a model returning many megabytes
page-faulted on all of them at every call: a 12-layer decode step returns its 24 updated KV
caches (3 MB each at 1024 rows), and their page faults were 1.7 ms of each cache update's
2 ms. A result of `RESULT_CACHED` bytes or more now takes a block of the workspace cache that
kernels use for their buffers (runtime.c), and gives it back when the last array viewing it is
gone, so the next call writes into pages the process already has.

The cache rounds sizes up to classes (1/16 to 1/32 of their power of two), so a result that
grows by a row per call, a KV cache, fits the block that the call before last gave back. A
result asks for headroom on top (`HEADROOM`: up to 1/8 of its power of two), so such a result
crosses into a new class, where every block is fresh, half as often: 64 decode steps fed back
from 1024 cached rows ran 27.3 -> 21.6 ms per step.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from relaxmlir.runtime.libraries import load

RESULT_CACHED = 1 << 20  # smaller results are plain numpy arrays (malloc reuses their memory)
HEADROOM = 4  # a result's size rounds up to a multiple of 2^(bits - HEADROOM)
ALIGNMENT = 64

_native: tuple | None = None
_lock = threading.Lock()


def _functions() -> tuple:
    """(allocate, free) from the native runtime, typed once."""
    global _native
    with _lock:
        if _native is None:
            lib = load("relaxmlir")
            alloc = lib.relaxmlir_workspace_alloc_at
            alloc.restype = ctypes.c_void_p
            alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
            free = lib._mlir_memref_to_llvm_free
            free.restype = None
            free.argtypes = [ctypes.c_void_p]
            _native = (alloc, free)
        return _native


class _Block:
    """One cached block seen as an array (`__array_interface__`); the array keeps it as its
    base, and its end hands the block back to the cache."""

    def __init__(self, address: int, shape: tuple, dtype: np.dtype, free):
        self._address = address
        self._free = free
        self.__array_interface__ = {
            "data": (address, False),
            "shape": shape,
            "typestr": dtype.str,
            "version": 3,
        }

    def __del__(self):
        self._free(self._address)


def result_array(shape: tuple, dtype: np.dtype, site: int = 0) -> np.ndarray:
    """An uninitialized C-contiguous array for a call's result. `site` tells the cache which
    result of which function asks, so each result gets back the block it had before."""
    dtype = np.dtype(dtype)
    count = 1
    for n in shape:
        count *= n
    nbytes = count * dtype.itemsize
    if nbytes < RESULT_CACHED:
        return np.empty(shape, dtype)
    alloc, free = _native or _functions()
    step = 1 << (nbytes.bit_length() - HEADROOM)
    address = alloc(-(-nbytes // step) * step, ALIGNMENT, site & 0xFFFFFFFFFFFFFFFF)
    if not address:
        return np.empty(shape, dtype)  # numpy raises MemoryError if the system has none either
    return np.asarray(_Block(address, tuple(shape), dtype, free))
