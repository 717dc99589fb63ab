"""Data movement written with `te`: reshape, transpose, squeeze, expand_dims, broadcast_to, tile,
concatenate, split, strided_slice, take, full, arange, trilu."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from relaxmlir import te
from relaxmlir.te.tensor import dim_key, normalize_dim
from relaxmlir.topi.broadcast import broadcast_index


def ravel(index: Sequence, shape: Sequence):
    """Row-major flat offset of `index` in `shape`."""
    flat = 0
    for i, d in zip(index, shape):
        flat = flat * d + i
    return flat


def unravel(flat, shape: Sequence) -> tuple:
    """Row-major index of the flat offset `flat` in `shape`."""
    index = []
    for d in reversed(shape):
        index.append(te.floormod(flat, d) if not (isinstance(d, int) and d == 1) else 0)
        flat = te.floordiv(flat, d) if not (isinstance(d, int) and d == 1) else flat
    return tuple(reversed(index))


def reshape(x: te.Tensor, newshape: Sequence) -> te.Tensor:
    """The elements of `x` in row-major order, in `newshape` (ints, symbol names or te exprs)."""
    newshape = tuple(normalize_dim(d) for d in newshape)
    if len(newshape) == x.ndim and all(dim_key(a) == dim_key(b) for a, b in zip(x.shape, newshape)):
        return te.compute(x.shape, lambda *i: x(*i), name="T_reshape")
    if any(isinstance(d, int) and d == 0 for d in newshape):
        # nothing to read (the index arithmetic over an empty tensor is no gather to raise)
        return te.compute(newshape, lambda *i: te.const(0, x.dtype), name="T_reshape")
    groups = _reshape_groups(x.shape, newshape) if not _all_static(newshape, x.shape) else None
    if groups is not None:
        # Symbolic sizes: ravel/unravel per group of dims, with static strides only (the heads
        # split of attention, [1, s, 768] -> [1, s, 12, 64], reads x[b, s, h * 64 + d]): affine
        # indexing the schedules vectorize and FuseOps fuses, not a gather over `s`.
        def body(*i):
            index = []
            for old, new in groups:
                if len(old) == 1 and len(new) == 1:
                    index.append(i[new[0]])
                    continue
                flat = ravel([i[k] for k in new], [newshape[k] for k in new])
                index.extend(unravel(flat, [x.shape[k] for k in old]))
            return x[tuple(index)]

        return te.compute(newshape, body, name="T_reshape")
    return te.compute(
        newshape, lambda *i: x[unravel(ravel(i, newshape), x.shape)], name="T_reshape"
    )


def _all_static(*shapes: Sequence) -> bool:
    return all(isinstance(d, int) for shape in shapes for d in shape)


def _reshape_groups(old: Sequence, new: Sequence) -> list[tuple[list[int], list[int]]] | None:
    """Runs of `old` and `new` dims with equal sizes, in order: a symbolic dim only alone against
    the same dim, static dims in runs of equal products (size-1 dims join a neighbour). None when
    the reshape mixes a symbolic dim into a run (its strides would be symbolic)."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(old) or j < len(new):
        if i < len(old) and j < len(new) and not isinstance(old[i], int):
            if isinstance(new[j], int) or dim_key(old[i]) != dim_key(new[j]):
                return None
            groups.append(([i], [j]))
            i, j = i + 1, j + 1
            continue
        run_old, run_new, p_old, p_new = [], [], 1, 1
        while True:
            # grow the side whose product lags (each side takes at least one dim; a size-1 dim
            # joins the run open on its side)
            take_old = i < len(old) and isinstance(old[i], int) and p_old <= p_new
            if take_old and (p_old < p_new or not run_old or old[i] == 1):
                run_old.append(i)
                p_old *= old[i]
                i += 1
            elif (
                j < len(new)
                and isinstance(new[j], int)
                and (p_new < p_old or not run_new or new[j] == 1)
            ):
                run_new.append(j)
                p_new *= new[j]
                j += 1
            else:
                break
        if p_old != p_new or not (run_old or run_new):
            return None
        groups.append((run_old, run_new))
    return groups


def transpose(x: te.Tensor, axes: Sequence[int] | None = None) -> te.Tensor:
    """`out[i] = x[i permuted back]`, `out.shape[k] = x.shape[axes[k]]`."""
    axes = list(range(x.ndim))[::-1] if axes is None else [a % x.ndim for a in axes]

    def body(*i):
        idx = [None] * x.ndim
        for k, a in enumerate(axes):
            idx[a] = i[k]
        return x[tuple(idx)]

    return te.compute([x.shape[a] for a in axes], body, name="T_transpose")


def squeeze(x: te.Tensor, axis: Sequence[int]) -> te.Tensor:
    """Drop the size-1 axes `axis`."""
    axis = [a % x.ndim for a in axis]

    def body(*i):
        rest = iter(i)
        return x[tuple(0 if k in axis else next(rest) for k in range(x.ndim))]

    return te.compute([d for k, d in enumerate(x.shape) if k not in axis], body, name="T_squeeze")


def expand_dims(x: te.Tensor, axis: Sequence[int]) -> te.Tensor:
    """Insert size-1 axes at the result positions `axis`."""
    n = x.ndim + len(axis)
    axis = [a % n for a in axis]
    rest = iter(x.shape)
    shape = [1 if k in axis else next(rest) for k in range(n)]
    return te.compute(
        shape,
        lambda *i: x[tuple(v for k, v in enumerate(i) if k not in axis)],
        name="T_expand_dims",
    )


def broadcast_to(x: te.Tensor, shape: Sequence) -> te.Tensor:
    """numpy broadcast of `x` to `shape`."""
    return te.compute(
        tuple(normalize_dim(d) for d in shape),
        lambda *i: x[broadcast_index(x, i)],
        name="T_broadcast_to",
    )


def tile(x: te.Tensor, reps: Sequence[int]) -> te.Tensor:
    """numpy tile."""
    n = max(len(reps), x.ndim)
    reps = [1] * (n - len(reps)) + list(reps)
    dims = [1] * (n - x.ndim) + list(x.shape)

    def body(*i):
        idx = [te.floormod(v, d) if r != 1 else v for v, d, r in zip(i, dims, reps)]
        return x[tuple(idx[n - x.ndim :])]

    return te.compute([d * r for d, r in zip(dims, reps)], body, name="T_tile")


def concatenate(tensors: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """Join `tensors` along `axis` (a chain of selects on the axis index)."""
    axis %= tensors[0].ndim
    offsets, total = [], 0
    for t in tensors:
        offsets.append(total)
        total = total + t.shape[axis]
    shape = list(tensors[0].shape)
    shape[axis] = total

    def body(*i):
        def at(t, off):
            return t[tuple(v - off if k == axis else v for k, v in enumerate(i))]

        out = at(tensors[-1], offsets[-1])
        for t, off in zip(reversed(tensors[:-1]), reversed(offsets[:-1])):
            out = te.if_then_else(i[axis] < off + t.shape[axis], at(t, off), out)
        return out

    return te.compute(shape, body, name="T_concat")


def split(x: te.Tensor, indices: Sequence, axis: int = 0) -> list:
    """Pieces of `x` along `axis`, cut before each of the ascending `indices`."""
    axis %= x.ndim
    bounds = [0] + list(indices) + [x.shape[axis]]
    outs = []
    for k, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        shape = list(x.shape)
        shape[axis] = hi - lo

        def body(*i, lo=lo):
            return x[tuple(v + lo if j == axis else v for j, v in enumerate(i))]

        outs.append(te.compute(shape, body, name=f"T_split{k}"))
    return outs


def slice_bounds(dim, begin: int, end: int, stride: int) -> tuple:
    """(begin, size) of a python slice over a dim (te expressions on symbolic dims)."""
    if isinstance(dim, int):
        lo, hi, st = slice(begin, end, stride).indices(dim)
        return lo, len(range(lo, hi, st))
    lo = dim + begin if begin < 0 else begin
    hi = dim if end >= 2**31 - 1 else dim + end if end < 0 else end
    return lo, te.floordiv(hi - lo + (stride - 1), stride)


def strided_slice(
    x: te.Tensor,
    begin: Sequence[int],
    end: Sequence[int],
    strides: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
) -> te.Tensor:
    """`x[begin:end:strides]` on `axes` (all leading axes when None), python slice bounds."""
    axes = list(range(len(begin))) if axes is None else [a % x.ndim for a in axes]
    strides = [1] * len(axes) if strides is None else list(strides)
    start, step, shape = [0] * x.ndim, [1] * x.ndim, list(x.shape)
    for a, b, e, s in zip(axes, begin, end, strides):
        start[a], shape[a] = slice_bounds(x.shape[a], b, e, s)
        step[a] = s
    return te.compute(
        shape,
        lambda *i: x[tuple(lo + v * s for lo, v, s in zip(start, i, step))],
        name="T_strided_slice",
    )


def take(x: te.Tensor, indices: te.Tensor, axis: int = 0, mode: str = "fast") -> te.Tensor:
    """`x` gathered along `axis` at `indices`; negative indices count from the end.

    mode "clip" clamps out-of-range indices, "wrap" wraps them, "fast" assumes them in range.
    """
    axis %= x.ndim
    size = x.shape[axis]
    shape = list(x.shape[:axis]) + list(indices.shape) + list(x.shape[axis + 1 :])
    m = indices.ndim

    def body(*i):
        v = indices[tuple(i[axis : axis + m])]
        n = te.cast(size, v.dtype)
        if mode == "wrap":
            v = te.floormod(v, n)
        else:
            v = te.if_then_else(v < 0, v + n, v)
            if mode == "clip":
                v = te.min(te.max(v, te.const(0, v.dtype)), n - 1)
        return x[tuple(i[:axis]) + (v,) + tuple(i[axis + m :])]

    return te.compute(shape, body, name="T_take")


def full(shape: Sequence, dtype: str, fill_value) -> te.Tensor:
    """A tensor of `shape` filled with `fill_value` (a number or a 0-d/1-element tensor)."""
    if isinstance(fill_value, te.Tensor):
        return te.compute(
            tuple(shape),
            lambda *i: te.cast(fill_value[(0,) * fill_value.ndim], dtype),
            name="T_full",
        )
    return te.compute(tuple(shape), lambda *i: te.const(fill_value, dtype), name="T_full")


def arange(start, stop, step, dtype: str) -> te.Tensor:
    """numpy arange: `start + i * step` computed in 64 bits, then cast. `stop` is a number, or
    a te expression that is the length itself (a symbolic size; start and step are then
    already folded into it)."""
    if isinstance(stop, te.Expr):
        n = stop
    else:
        n = max(0, math.ceil((stop - start) / step))
    calc = "float64" if any(isinstance(v, float) for v in (start, step)) else "int64"

    def body(i):
        return te.cast(te.const(start, calc) + te.cast(i, calc) * te.const(step, calc), dtype)

    return te.compute((n,), body, name="T_arange")


def trilu(x: te.Tensor, k: int, upper: bool) -> te.Tensor:
    """Keep the elements on and above (upper) or below the `k`-th diagonal of the last 2 axes."""

    def body(*i):
        row, col = i[-2], i[-1]
        keep = col - row >= k if upper else col - row <= k
        return te.if_then_else(keep, x(*i), te.const(0, x.dtype))

    return te.compute(x.shape, body, name="T_trilu")
