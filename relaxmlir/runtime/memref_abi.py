"""The C ABI of MLIR memrefs: ctypes descriptors built once per argument and patched per call.

`get_ranked_memref_descriptor` builds a new ctypes class per call (tens of µs); here one class per
rank is cached and each argument slot keeps its descriptor and the pointer to it alive, so a call
only writes data pointers, sizes and strides (see MLIR_NOTES: a descriptor freed before the call
gives silently wrong results).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np


@functools.cache
def descriptor_class(rank: int) -> type:
    fields = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
    ]
    if rank > 0:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRefDescriptor{rank}", (ctypes.Structure,), {"_fields_": fields})


def _make_data_pointer():
    """A fast `array.ctypes.data` (which costs ~2 µs): read `PyArrayObject.data` directly.

    The field follows PyObject_HEAD in numpy's stable object layout; checked once here, and the
    slow spelling is used if the check fails.
    """
    probe = np.arange(6, dtype=np.float32)[2:]
    offset = 2 * ctypes.sizeof(ctypes.c_void_p)
    read = ctypes.c_void_p.from_address
    if read(id(probe) + offset).value == probe.ctypes.data:
        return lambda array: read(id(array) + offset).value
    return lambda array: array.ctypes.data


data_pointer = _make_data_pointer()


class ArgSlot:
    """One argument of a C-interface function: a descriptor and the pointer the callee reads.

    Sizes and strides are rewritten only when the shape changes; a call with the same shapes as
    the last one only patches the data pointers.
    """

    __slots__ = ("address", "desc", "ptr", "rank", "shape")

    def __init__(self, rank: int):
        self.rank = rank
        self.desc = descriptor_class(rank)()
        self.ptr = ctypes.c_void_p(ctypes.addressof(self.desc))
        self.address = ctypes.addressof(self.ptr)  # what goes into the packed argument array
        self.shape = None

    def set(self, array: np.ndarray) -> None:
        """`array` must be C-contiguous (the VM guarantees it)."""
        d = self.desc
        data = data_pointer(array)
        d.allocated = data
        d.aligned = data
        shape = array.shape
        if shape != self.shape:
            self.shape = shape
            d.offset = 0
            stride = 1
            for i in range(self.rank - 1, -1, -1):
                d.sizes[i] = shape[i]
                d.strides[i] = stride
                stride *= shape[i]


def packed_args(slots: list[ArgSlot]):
    """The `void**` array that the packed `_mlir__mlir_ciface_<fn>` wrapper takes."""
    return (ctypes.c_void_p * max(len(slots), 1))(*[s.address for s in slots])


def view(address: int, rank: int, dtype: np.dtype) -> np.ndarray:
    """A numpy view of the memref whose descriptor is at `address` (no copy)."""
    d = descriptor_class(rank).from_address(address)
    shape = tuple(d.sizes) if rank else ()
    itemsize = dtype.itemsize
    count = int(np.prod(shape)) if shape else 1
    base = d.aligned + d.offset * itemsize
    if count == 0:
        return np.empty(shape, dtype)
    strides = tuple(s * itemsize for s in d.strides) if rank else ()
    span = sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize if rank else itemsize
    buffer = (ctypes.c_char * span).from_address(base)
    flat = np.frombuffer(buffer, dtype=np.uint8)
    return _strided(flat, dtype, shape, strides)


class UnrankedDescriptor(ctypes.Structure):
    """What a packed function receives per argument: `{int64_t rank; void *descriptor}`."""

    _fields_ = [("rank", ctypes.c_int64), ("descriptor", ctypes.c_void_p)]


def view_unranked(address: int, dtype: np.dtype) -> np.ndarray:
    """A numpy view of the memref whose unranked descriptor is at `address` (no copy)."""
    u = UnrankedDescriptor.from_address(address)
    return view(u.descriptor, u.rank, dtype)


def _contiguous_strides(shape: tuple, itemsize: int) -> tuple:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _strided(flat: np.ndarray, dtype: np.dtype, shape: tuple, strides: tuple) -> np.ndarray:
    # Computed, not read off a scratch array: this runs at every packed-function call.
    if strides == _contiguous_strides(shape, dtype.itemsize):
        return flat.view(dtype).reshape(shape)
    return np.lib.stride_tricks.as_strided(flat.view(dtype), shape, strides)
