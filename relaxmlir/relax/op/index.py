"""Indexing: `take`, `strided_slice`, `gather_elements`, `scatter_elements`, `index_copy`."""

from __future__ import annotations

from collections.abc import Sequence

from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.op.common import (
    Dim,
    add,
    ceildiv,
    make_call,
    normalize_axis,
    sub,
    tensor_sinfo,
)
from relaxmlir.relax.op.manipulate import flatten
from relaxmlir.relax.struct_info import TensorStructInfo

TAKE_MODES = ("fast", "clip", "wrap")


def take(x: Expr, indices: Expr, axis: int | None = None, mode: str = "fast") -> Call:
    """`relax.take`: elements of `x` at integer `indices` along `axis`.

    The result shape is `x.shape[:axis] + indices.shape + x.shape[axis+1:]`; axis None takes
    from the flattened x. Negative indices count from the end in every mode; "clip" clamps
    out-of-range indices, "wrap" takes them modulo the axis size, "fast" assumes them in range.

    Parameters
    ----------
    x : Expr
    indices : Expr
        An integer tensor.
    axis : int, optional
    mode : str, default "fast"

    Returns
    -------
    Call

    Examples
    --------
    >>> relax.op.take(embedding_table, token_ids, axis=0)
    """
    op = "relax.take"
    if axis is None:
        return take(flatten(x), indices, 0, mode)
    sinfo = tensor_sinfo(x, op)
    idx = tensor_sinfo(indices, op, "indices")
    if not idx.dtype.startswith(("int", "uint")):
        raise TypeError(f"{op}: expected integer indices, got ({idx.dtype})")
    if mode not in TAKE_MODES:
        raise ValueError(f"{op}: unknown mode '{mode}'; modes: {', '.join(TAKE_MODES)}")
    ax = normalize_axis(axis, sinfo.ndim, op)
    shape = list(sinfo.shape[:ax]) + list(idx.shape) + list(sinfo.shape[ax + 1 :])
    return make_call(
        op, [x, indices], {"axis": ax, "mode": mode}, TensorStructInfo(shape, sinfo.dtype)
    )


def slice_bounds(dim: Dim, begin: int, end: int, stride: int) -> tuple[Dim, Dim, Dim]:
    """(begin, end, size) of one python slice over a dim; symbolic dims assume in-range bounds.

    `begin`/`end` past the dim clamp to it; negative ones count from the end.
    """
    if isinstance(dim, int):
        lo, hi, st = slice(begin, end, stride).indices(dim)
        return lo, hi, len(range(lo, hi, st))
    if stride <= 0:
        raise NotImplementedError(
            f"relax.strided_slice: stride ({stride}) on a symbolic dim ({dim})"
        )
    lo = add(dim, begin) if begin < 0 else begin
    hi = dim if end >= 2**31 - 1 else add(dim, end) if end < 0 else end
    return lo, hi, ceildiv(sub(hi, lo), stride)


def strided_slice(
    x: Expr,
    axes: Sequence[int],
    begin: Sequence[int],
    end: Sequence[int],
    strides: Sequence[int] | None = None,
    assume_inbound: bool = False,
) -> Call:
    """`relax.strided_slice`: `x[begin:end:strides]` on each of `axes`.

    Bounds follow python slicing (clamped, negative from the end); an `end` of 2**31-1 or more
    means "to the end" also on symbolic dims.

    Parameters
    ----------
    x : Expr
    axes, begin, end : list of int
    strides : list of int, optional
        Defaults to 1 on every axis.

    Returns
    -------
    Call
    """
    op = "relax.strided_slice"
    sinfo = tensor_sinfo(x, op)
    strides = [1] * len(axes) if strides is None else list(strides)
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise ValueError(
            f"{op}: axes, begin, end and strides must have one length, got "
            f"({len(axes)}, {len(begin)}, {len(end)}, {len(strides)})"
        )
    axes = [normalize_axis(a, sinfo.ndim, op) for a in axes]
    shape = list(sinfo.shape)
    for a, b, e, s in zip(axes, begin, end, strides):
        if s == 0:
            raise ValueError(f"{op}: stride must be non-zero")
        shape[a] = slice_bounds(sinfo.shape[a], int(b), int(e), int(s))[2]
    attrs = {
        "axes": axes,
        "begin": [int(b) for b in begin],
        "end": [int(e) for e in end],
        "strides": [int(s) for s in strides],
    }
    return make_call(op, [x], attrs, TensorStructInfo(shape, sinfo.dtype))


def _check_elementwise_indices(op: str, data, indices, axis: int) -> tuple:
    """data/indices struct info and the normalized axis; indices are integers of data's rank."""
    sinfo = tensor_sinfo(data, op, "data")
    idx = tensor_sinfo(indices, op, "indices")
    if not idx.dtype.startswith(("int", "uint")):
        raise TypeError(f"{op}: expected integer indices, got ({idx.dtype})")
    if idx.ndim != sinfo.ndim:
        raise ValueError(f"{op}: indices have rank ({idx.ndim}), data has rank ({sinfo.ndim})")
    return sinfo, idx, normalize_axis(axis, sinfo.ndim, op)


def gather_elements(data: Expr, indices: Expr, axis: int = 0) -> Call:
    """`relax.gather_elements` (torch.gather): `out[i] = data[i with i[axis] = indices[i]]`.

    Negative indices count from the end. The result has the shape of `indices`.

    Parameters
    ----------
    data : Expr
    indices : Expr
        Integers, of data's rank.
    axis : int

    Returns
    -------
    Call
    """
    op = "relax.gather_elements"
    sinfo, idx, ax = _check_elementwise_indices(op, data, indices, axis)
    return make_call(op, [data, indices], {"axis": ax}, TensorStructInfo(idx.shape, sinfo.dtype))


SCATTER_REDUCTIONS = ("update", "add")


def scatter_elements(
    data: Expr, indices: Expr, updates: Expr, axis: int = 0, reduction: str = "update"
) -> Call:
    """`relax.scatter_elements` (torch.scatter): a copy of `data` where, for each i of
    `indices`, `updates[i]` replaces ("update") or is added to ("add") the element at
    `i with i[axis] = indices[i]`. With repeated indices "update" keeps the last one.

    Parameters
    ----------
    data : Expr
    indices : Expr
        Integers, of data's rank; the shape of `updates`.
    updates : Expr
        Of data's dtype.
    axis : int
    reduction : str, "update" or "add"

    Returns
    -------
    Call
    """
    op = "relax.scatter_elements"
    sinfo, idx, ax = _check_elementwise_indices(op, data, indices, axis)
    upd = tensor_sinfo(updates, op, "updates")
    if upd.dtype != sinfo.dtype:
        raise TypeError(f"{op}: updates are ({upd.dtype}), data is ({sinfo.dtype})")
    if tuple(upd.shape) != tuple(idx.shape):
        raise ValueError(f"{op}: updates have shape {upd.shape}, indices have {idx.shape}")
    if reduction not in SCATTER_REDUCTIONS:
        raise ValueError(
            f"{op}: unknown reduction '{reduction}'; reductions: {', '.join(SCATTER_REDUCTIONS)}"
        )
    attrs = {"axis": ax, "reduction": reduction}
    return make_call(
        op, [data, indices, updates], attrs, TensorStructInfo(sinfo.shape, sinfo.dtype)
    )


def index_copy(data: Expr, index: Expr, source: Expr, axis: int = 0) -> Call:
    """`relax.index_copy` (torch.index_copy, a static KV cache's write at `cache_position`): a
    copy of `data` whose slices along `axis` at the positions of the 1-D `index` are the slices
    of `source`, in order. Of repeated positions the last one wins; a position outside
    [0, size) writes nothing (torch's index_put counts negative ones from the end: the importer
    wraps them first). A state buffer written this way is updated in place by the build
    (`relax-inplace-state`), not copied.

    Parameters
    ----------
    data : Expr
    index : Expr
        1-D integers.
    source : Expr
        data's dtype and shape, except `len(index)` along `axis`.
    axis : int

    Returns
    -------
    Call
    """
    op = "relax.index_copy"
    sinfo = tensor_sinfo(data, op, "data")
    idx = tensor_sinfo(index, op, "index")
    src = tensor_sinfo(source, op, "source")
    if not idx.dtype.startswith(("int", "uint")) or idx.ndim != 1:
        raise TypeError(f"{op}: expected a 1-D integer index, got ({idx.dtype}) of rank {idx.ndim}")
    ax = normalize_axis(axis, sinfo.ndim, op)
    if src.dtype != sinfo.dtype:
        raise TypeError(f"{op}: source is ({src.dtype}), data is ({sinfo.dtype})")
    want = list(sinfo.shape)
    want[ax] = idx.shape[0]
    if list(src.shape) != want:
        raise ValueError(f"{op}: source has shape {list(src.shape)}, expected {want}")
    attrs = {"axis": ax}
    return make_call(op, [data, index, source], attrs, TensorStructInfo(sinfo.shape, sinfo.dtype))
