"""Reductions written with `te`: `topi.sum/max/min/prod/mean/variance/argmax/argmin`."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from relaxmlir import te

Axis = int | Sequence[int] | None


def _axes(x: te.Tensor, axis: Axis) -> list[int]:
    if axis is None:
        return list(range(x.ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    return sorted(a % x.ndim for a in axes)


def _out_shape(x: te.Tensor, axes: list[int], keepdims: bool) -> list:
    return [1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes]


def _source_index(x: te.Tensor, axes: list[int], keepdims: bool, out_index, reduce_vars) -> tuple:
    """Index of x read at output `out_index` with the reduce vars on the reduced axes."""
    out, rv, idx = iter(out_index), iter(reduce_vars), []
    for i in range(x.ndim):
        if i in axes:
            if keepdims:
                next(out)
            idx.append(next(rv))
        else:
            idx.append(next(out))
    return tuple(idx)


def comm_reduce(
    x: te.Tensor,
    axis: Axis,
    keepdims: bool,
    reducer: Callable,
    name: str,
    fmap: Callable = lambda v: v,
) -> te.Tensor:
    """Reduce `fmap(x)` over `axis` with `te.sum`/`te.max`/`te.min`."""
    axes = _axes(x, axis)
    if not axes:
        return te.compute(x.shape, lambda *i: fmap(x(*i)), name=name)
    rvs = [te.reduce_axis((0, x.shape[a]), name=f"k{a}") for a in axes]

    def body(*i):
        return reducer(fmap(x[_source_index(x, axes, keepdims, i, rvs)]), axis=rvs)

    return te.compute(_out_shape(x, axes, keepdims), body, name=name)


def sum(x: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """Sum over `axis` (all axes when None)."""
    return comm_reduce(x, axis, keepdims, te.sum, "T_sum")


def max(x: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """Maximum over `axis`."""
    return comm_reduce(x, axis, keepdims, te.max, "T_max")


def min(x: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """Minimum over `axis`."""
    return comm_reduce(x, axis, keepdims, te.min, "T_min")


def num_elements(x: te.Tensor, axes: Sequence[int]):
    """Product of the sizes of `axes` (an int, or a te expression with symbolic dims)."""
    n = 1
    for a in axes:
        n = n * x.shape[a]
    return n


def mean(x: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """Arithmetic mean over `axis`: the sum divided by the element count."""
    axes = _axes(x, axis)
    total = sum(x, axes, keepdims)
    n = te.cast(num_elements(x, axes), x.dtype)
    return te.compute(total.shape, lambda *i: total(*i) / n, name="T_mean")


def variance(x: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """Population variance over `axis`, in two passes (mean, then mean squared deviation)."""
    axes = _axes(x, axis)
    mu = mean(x, axes, keepdims=True)
    dev = te.compute(x.shape, lambda *i: x(*i) - mu[broadcast_keep(i, axes)], name="T_dev")
    sq = comm_reduce(dev, axes, keepdims, te.sum, "T_sqsum", fmap=lambda v: v * v)
    n = te.cast(num_elements(x, axes), x.dtype)
    return te.compute(sq.shape, lambda *i: sq(*i) / n, name="T_variance")


def broadcast_keep(index, axes: Sequence[int]) -> tuple:
    """Index into a keepdims reduction result: reduced axes read at 0."""
    return tuple(0 if k in axes else v for k, v in enumerate(index))


def prod(x: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """Product over `axis`. NOTE: te has no product reducer; static axes are unrolled."""
    axes = _axes(x, axis)
    sizes = [x.shape[a] for a in axes]
    if not all(isinstance(s, int) for s in sizes) or num_elements(x, axes) > 4096:
        raise NotImplementedError(
            f"topi.prod: needs static reduced axes of at most 4096 elements, got {tuple(sizes)}"
        )

    def body(*i):
        acc = None
        for combo in itertools.product(*[range(s) for s in sizes]):
            v = x[_source_index(x, axes, keepdims, i, combo)]
            acc = v if acc is None else acc * v
        return acc if acc is not None else te.const(1, x.dtype)

    return te.compute(_out_shape(x, axes, keepdims), body, name="T_prod")


def _arg_reduce(x: te.Tensor, axis: int | None, keepdims: bool, find: Callable, name: str):
    """Index of the first extreme: the extreme value, then the least index that holds it."""
    if axis is None:
        from relaxmlir.topi.transform import reshape

        flat = reshape(x, (num_elements(x, range(x.ndim)),))
        out = _arg_reduce(flat, 0, False, find, name)
        return reshape(out, (1,) * x.ndim) if keepdims else out
    axis %= x.ndim
    best = comm_reduce(x, axis, True, find, f"{name}_value")
    size = x.shape[axis]
    k = te.reduce_axis((0, size), name="k")

    def body(*i):
        full = list(i) if keepdims else list(i[:axis]) + [0] + list(i[axis:])
        src = tuple(full[:axis]) + (k,) + tuple(full[axis + 1 :])
        hit = x[src] == best[tuple(full[:axis]) + (0,) + tuple(full[axis + 1 :])]
        return te.min(te.if_then_else(hit, te.cast(k, "int64"), te.cast(size, "int64")), axis=k)

    return te.compute(_out_shape(x, [axis], keepdims), body, name=name)


def argmax(x: te.Tensor, axis: int | None = None, keepdims: bool = False) -> te.Tensor:
    """int64 index of the first maximum along `axis` (of the flattened x when None)."""
    return _arg_reduce(x, axis, keepdims, te.max, "T_argmax")


def argmin(x: te.Tensor, axis: int | None = None, keepdims: bool = False) -> te.Tensor:
    """int64 index of the first minimum along `axis` (of the flattened x when None)."""
    return _arg_reduce(x, axis, keepdims, te.min, "T_argmin")
