"""Shape manipulation: `reshape`, `permute_dims`, `flatten`, `squeeze`, `expand_dims`, `concat`,
`split`, `broadcast_to`, `tile`."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from relaxmlir.relax.expr import Call, Expr, Tuple
from relaxmlir.relax.op.common import (
    Dim,
    add,
    broadcast_shapes,
    floordiv,
    make_call,
    mul,
    normalize_axes,
    normalize_axis,
    prod,
    same_dim,
    sub,
    tensor_sinfo,
)
from relaxmlir.relax.struct_info import TensorStructInfo, TupleStructInfo, normalize_dim
from relaxmlir.topi.layout import transform_shape


def _shape_arg(shape, op: str) -> list:
    if isinstance(shape, Expr) and isinstance(
        getattr(shape, "struct_info", None), TensorStructInfo
    ):
        raise TypeError(f"{op}: expected a shape (tuple of ints and symbols), got a tensor")
    if isinstance(shape, (int, str, np.integer)):
        shape = [shape]
    return [d if isinstance(d, (int, np.integer)) and d == -1 else normalize_dim(d) for d in shape]


def infer_reshape(x: Expr, shape, op: str) -> TensorStructInfo:
    """Resolve one -1 from the element count; symbolic counts must match by expression."""
    sinfo = tensor_sinfo(x, op)
    dims = _shape_arg(shape, op)
    total = prod(sinfo.shape)
    holes = [i for i, d in enumerate(dims) if isinstance(d, int) and d == -1]
    if len(holes) > 1:
        raise ValueError(f"{op}: at most one -1 in the new shape, got ({tuple(dims)})")
    if holes:
        dims[holes[0]] = floordiv(total, prod([d for i, d in enumerate(dims) if i != holes[0]]))
    if not same_dim(prod(dims), total):
        raise ValueError(
            f"{op}: cannot reshape {sinfo.shape} ({total} elements) to "
            f"{tuple(dims)} ({prod(dims)} elements)"
        )
    return TensorStructInfo(
        [int(d) if isinstance(d, (int, np.integer)) else d for d in dims], sinfo.dtype
    )


def reshape(x: Expr, shape: Sequence[Dim]) -> Call:
    """`relax.reshape`: the same elements (row-major) in a new shape.

    Parameters
    ----------
    x : Expr
    shape : tuple of int or str
        At most one -1 (inferred); symbolic dims such as "n" are allowed.

    Returns
    -------
    Call

    Examples
    --------
    >>> relax.op.reshape(x, ("n", -1))  # x: R.Tensor(("n", 1, 28, 28))  ->  ("n", 784)
    """
    sinfo = infer_reshape(x, shape, "relax.reshape")
    return make_call("relax.reshape", [x], {"shape": list(sinfo.shape)}, sinfo)


def permute_dims(x: Expr, axes: Sequence[int] | None = None) -> Call:
    """`relax.permute_dims`: `out.shape[i] = x.shape[axes[i]]`; None reverses the axes.

    Parameters
    ----------
    x : Expr
    axes : list of int, optional

    Returns
    -------
    Call
    """
    op = "relax.permute_dims"
    sinfo = tensor_sinfo(x, op)
    perm = (
        list(range(sinfo.ndim))[::-1]
        if axes is None
        else [normalize_axis(a, sinfo.ndim, op) for a in axes]
    )
    if sorted(perm) != list(range(sinfo.ndim)):
        raise ValueError(f"{op}: axes ({list(axes)}) are not a permutation of rank ({sinfo.ndim})")
    out = TensorStructInfo([sinfo.shape[a] for a in perm], sinfo.dtype)
    return make_call(op, [x], {"axes": perm}, out)


def layout_transform(x: Expr, src_layout: str, dst_layout: str) -> Call:
    """`relax.layout_transform`: `x` re-laid out between "NCHW" and channel-blocked "NCHW<b>c"
    (TVM relay's `layout_transform(data, src_layout, dst_layout)`).

    Examples
    --------
    >>> relax.op.layout_transform(x, "NCHW", "NCHW16c")  # (1, 64, 56, 56) -> (1, 4, 56, 56, 16)
    """
    op = "relax.layout_transform"
    sinfo = tensor_sinfo(x, op)
    try:
        shape = transform_shape(sinfo.shape, src_layout, dst_layout)
    except ValueError as exc:
        raise ValueError(f"{op}: {exc}") from None
    out = TensorStructInfo(shape, sinfo.dtype)
    return make_call(op, [x], {"src_layout": src_layout, "dst_layout": dst_layout}, out)


def flatten(x: Expr) -> Call:
    """`relax.flatten`: reshape to 1-D (TVM semantics; `torch.flatten(x, 1)` is a reshape)."""
    sinfo = tensor_sinfo(x, "relax.flatten")
    out = TensorStructInfo([prod(sinfo.shape)], sinfo.dtype)
    return make_call("relax.flatten", [x], {}, out)


def squeeze(x: Expr, axis: int | Sequence[int] | None = None) -> Call:
    """`relax.squeeze`: drop size-1 `axis` (all static size-1 axes when None)."""
    op = "relax.squeeze"
    sinfo = tensor_sinfo(x, op)
    if axis is None:
        axes = [i for i, d in enumerate(sinfo.shape) if d == 1]
    else:
        axes = normalize_axes(axis, sinfo.ndim, op)
        bad = [a for a in axes if sinfo.shape[a] != 1 and isinstance(sinfo.shape[a], int)]
        if bad:
            raise ValueError(f"{op}: axis {bad[0]} has size ({sinfo.shape[bad[0]]}), expected (1)")
    out = TensorStructInfo([d for i, d in enumerate(sinfo.shape) if i not in axes], sinfo.dtype)
    return make_call(op, [x], {"axis": axes}, out)


def expand_dims(x: Expr, axis: int | Sequence[int]) -> Call:
    """`relax.expand_dims`: insert size-1 axes at positions `axis` of the result."""
    op = "relax.expand_dims"
    sinfo = tensor_sinfo(x, op)
    n = sinfo.ndim + (1 if isinstance(axis, (int, np.integer)) else len(axis))
    axes = normalize_axes(axis, n, op)
    rest = iter(sinfo.shape)
    out = TensorStructInfo([1 if i in axes else next(rest) for i in range(n)], sinfo.dtype)
    return make_call(op, [x], {"axis": axes}, out)


def broadcast_to(x: Expr, shape: Sequence[Dim]) -> Call:
    """`relax.broadcast_to`: numpy broadcasting of `x` to `shape`."""
    op = "relax.broadcast_to"
    sinfo = tensor_sinfo(x, op)
    target = [normalize_dim(d) for d in shape]
    if len(target) < sinfo.ndim or not all(
        same_dim(a, b) for a, b in zip(broadcast_shapes([sinfo.shape, target], op), target)
    ):
        raise ValueError(f"{op}: cannot broadcast {sinfo.shape} to {tuple(target)}")
    return make_call(op, [x], {"shape": target}, TensorStructInfo(target, sinfo.dtype))


def tile(x: Expr, repeats: int | Sequence[int]) -> Call:
    """`relax.tile`: numpy tile (repeats shorter than the rank apply to the last axes)."""
    op = "relax.tile"
    sinfo = tensor_sinfo(x, op)
    reps = [int(repeats)] if isinstance(repeats, (int, np.integer)) else [int(r) for r in repeats]
    n = max(len(reps), sinfo.ndim)
    reps = [1] * (n - len(reps)) + reps
    shape = [1] * (n - sinfo.ndim) + list(sinfo.shape)
    out = TensorStructInfo([mul(d, r) for d, r in zip(shape, reps)], sinfo.dtype)
    return make_call(op, [x], {"repeats": reps}, out)


def _tensors(tensors) -> list:
    if isinstance(tensors, Tuple):
        return list(tensors.fields)
    if isinstance(tensors, Expr) and isinstance(
        getattr(tensors, "struct_info", None), TupleStructInfo
    ):
        return [tensors[i] for i in range(len(tensors.struct_info.fields))]
    return list(tensors)


def concat(tensors, axis: int = 0) -> Call:
    """`relax.concat`: join `tensors` (a list, a relax.Tuple or a tuple var) along `axis`.

    Parameters
    ----------
    tensors : list of Expr
    axis : int

    Returns
    -------
    Call
    """
    op = "relax.concat"
    items = _tensors(tensors)
    if not items:
        raise ValueError(f"{op}: expected at least one tensor")
    sinfos = [tensor_sinfo(t, op, f"tensors[{i}]") for i, t in enumerate(items)]
    first = sinfos[0]
    ax = normalize_axis(axis, first.ndim, op)
    size: Dim = 0
    for i, s in enumerate(sinfos):
        if s.ndim != first.ndim or s.dtype != first.dtype:
            raise ValueError(
                f"{op}: tensors[{i}] is {s}, expected rank ({first.ndim}) and dtype ({first.dtype})"
            )
        for j, (a, b) in enumerate(zip(s.shape, first.shape)):
            if j != ax and not same_dim(a, b):
                raise ValueError(
                    f"{op}: tensors[{i}] has shape {s.shape}, expected dim {j} to be ({b})"
                )
        size = add(size, s.shape[ax])
    shape = list(first.shape)
    shape[ax] = size
    return make_call(op, items, {"axis": ax}, TensorStructInfo(shape, first.dtype))


def split(x: Expr, indices_or_sections: int | Sequence[int], axis: int = 0) -> Call:
    """`relax.split`: a tuple of pieces of `x` along `axis`.

    Parameters
    ----------
    x : Expr
    indices_or_sections : int or list of int
        A number of equal sections (the axis size must divide, or be symbolic), or the
        ascending indices to split before.
    axis : int

    Returns
    -------
    Call
        Its struct info is a tuple; `bb.emit` returns a var that indexes as `var[i]`.
    """
    op = "relax.split"
    sinfo = tensor_sinfo(x, op)
    ax = normalize_axis(axis, sinfo.ndim, op)
    size = sinfo.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        n = int(indices_or_sections)
        if n <= 0 or (isinstance(size, int) and size % n):
            raise ValueError(
                f"{op}: axis of size ({size}) does not split into ({n}) equal sections"
            )
        part = floordiv(size, n)
        indices = [mul(part, i) for i in range(1, n)]
    else:
        indices = [int(i) for i in indices_or_sections]
    bounds = [0] + list(indices) + [size]
    outs = []
    for lo, hi in itertools.pairwise(bounds):
        shape = list(sinfo.shape)
        shape[ax] = sub(hi, lo)
        if isinstance(shape[ax], int) and shape[ax] < 0:
            raise ValueError(
                f"{op}: indices ({list(indices)}) must ascend within the axis size ({size})"
            )
        outs.append(TensorStructInfo(shape, sinfo.dtype))
    return make_call(op, [x], {"indices": list(indices), "axis": ax}, TupleStructInfo(outs))
