"""Shape rules: reshape and views, permutes, squeeze/unsqueeze, broadcasts, size queries, casts."""

from __future__ import annotations

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import (
    Importer,
    Rule,
    SymDim,
    dim_value,
    dtype_str,
    is_tensor,
    register,
)
from relaxmlir.frontend.rules.common import F, astype, aten, axis, call, first, ndim, shape_of


def sym_dims(x) -> tuple:
    return tuple(SymDim.make(d) for d in shape_of(x))


def _product(dims):
    out = 1
    for d in dims:
        out = SymDim.make(d) * out if isinstance(out, int) else out * SymDim.make(d)
    return out


def _infer_minus_one(in_shape: tuple, shape: list) -> list:
    """Resolve a `-1` in a target shape when the sizes (symbolic ones too) determine it."""
    shape = [dim_value(d) for d in shape]
    if -1 not in shape:
        return shape
    in_left, out_left = list(in_shape), []
    for d in shape:
        if d == -1:
            continue
        if d in in_left:
            in_left.remove(d)
        else:
            out_left.append(d)
    if all(isinstance(d, int) for d in in_left + out_left):
        size = int(np.prod(in_left, dtype=np.int64)) // max(
            int(np.prod(out_left, dtype=np.int64)), 1
        )
    elif not out_left:
        size = dim_value(_product(in_left))
    else:
        return shape
    return [size if d == -1 else d for d in shape]


def reshape(ctx: Importer, x, shape):
    shape = _infer_minus_one(shape_of(x), list(shape))
    if tuple(shape) == shape_of(x):
        return x
    return call(ctx, "reshape", x, shape)


def permute(ctx: Importer, x, axes):
    if ndim(x) == 0:
        return x
    axes = [axis(a, ndim(x)) for a in axes]
    if axes == list(range(ndim(x))):
        return x
    return call(ctx, "permute_dims", x, axes)


def transpose(ctx: Importer, x, d0: int, d1: int):
    d0, d1 = axis(d0, ndim(x)), axis(d1, ndim(x))
    if ndim(x) == 0:
        return x
    axes = list(range(ndim(x)))
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return permute(ctx, x, axes)


def flatten(ctx: Importer, x, start: int = 0, end: int = -1):
    rank = ndim(x)
    if rank == 0:
        return reshape(ctx, x, [1])
    start, end = axis(start, rank), axis(end, rank)
    dims = sym_dims(x)
    return reshape(ctx, x, dims[:start] + (_product(dims[start : end + 1]),) + dims[end + 1 :])


def squeeze(ctx: Importer, x, axes=None):
    rank = ndim(x)
    if axes is None:
        axes = list(range(rank))
    axes = [axis(a, rank) for a in (axes if isinstance(axes, (list, tuple)) else [axes])]
    if rank == 0:
        return x
    axes = [a for a in axes if shape_of(x)[a] == 1]  # torch ignores axes of size != 1
    return call(ctx, "squeeze", x, axes) if axes else x


def _size(ctx: Importer, node: fx.Node):
    dims = sym_dims(first(ctx, node))
    dim = ctx.arg(node, 1, "dim")
    return dims if dim is None else dims[dim]


def _getattr(ctx: Importer, node: fx.Node):
    obj, name = ctx.arg(node, 0), ctx.arg(node, 1)
    if not is_tensor(obj):
        return getattr(obj, name)
    if name == "shape":
        return sym_dims(obj)
    if name == "ndim":
        return ndim(obj)
    if name == "dtype":
        return getattr(torch, obj.struct_info.dtype)
    if name in ("T", "mT"):
        return (
            transpose(ctx, obj, -2, -1)
            if name == "mT"
            else permute(ctx, obj, range(ndim(obj))[::-1])
        )
    raise NotImplementedError(f"unsupported tensor attribute '{name}' at node '{node.name}'")


def _view(ctx: Importer, node: fx.Node):
    x = first(ctx, node)
    return reshape(ctx, x, ctx.rest(node, 1, ("shape", "size")))


def _flatten(ctx: Importer, node: fx.Node):
    return flatten(
        ctx, first(ctx, node), ctx.arg(node, 1, "start_dim", 0), ctx.arg(node, 2, "end_dim", -1)
    )


def unflatten(ctx: Importer, x, dim: int, sizes):
    """Axis `dim` of `x` split into `sizes`."""
    dim, dims = axis(dim, ndim(x)), sym_dims(x)
    return reshape(ctx, x, dims[:dim] + tuple(sizes) + dims[dim + 1 :])


def _unflatten(ctx: Importer, node: fx.Node):
    return unflatten(ctx, first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "sizes"))


def _permute(ctx: Importer, node: fx.Node):
    return permute(ctx, first(ctx, node), ctx.rest(node, 1, "dims"))


def _transpose(ctx: Importer, node: fx.Node):
    return transpose(ctx, first(ctx, node), ctx.arg(node, 1, "dim0"), ctx.arg(node, 2, "dim1"))


def _t(ctx: Importer, node: fx.Node):
    x = first(ctx, node)
    return transpose(ctx, x, 0, 1) if ndim(x) == 2 else x


def _unsqueeze(ctx: Importer, node: fx.Node):
    x = first(ctx, node)
    return call(ctx, "expand_dims", x, axis(ctx.arg(node, 1, "dim"), ndim(x) + 1))


def _squeeze(ctx: Importer, node: fx.Node):
    return squeeze(ctx, first(ctx, node), ctx.arg(node, 1, "dim"))


def broadcast_to(ctx: Importer, x, shape):
    shape = list(shape)
    lead = len(shape) - ndim(x)
    shape = [shape_of(x)[i - lead] if d == -1 else dim_value(d) for i, d in enumerate(shape)]
    return x if tuple(shape) == shape_of(x) else call(ctx, "broadcast_to", x, shape)


def _expand(ctx: Importer, node: fx.Node):
    return broadcast_to(ctx, first(ctx, node), ctx.rest(node, 1, "size"))


def _expand_as(ctx: Importer, node: fx.Node):
    return broadcast_to(ctx, first(ctx, node), shape_of(ctx.arg(node, 1, "other")))


def _view_as(ctx: Importer, node: fx.Node):
    return reshape(ctx, first(ctx, node), shape_of(ctx.arg(node, 1, "other")))


def _identity(ctx: Importer, node: fx.Node):
    return first(ctx, node)


def _astype_rule(dtype: str | None) -> Rule:
    """`x.to(...)`, `x.float()`, `x.type(dtype)`, `aten._to_copy(x, dtype=...)`: a dtype argument
    (positional or keyword, or another tensor's dtype) casts; devices and formats are ignored."""

    def rule(ctx: Importer, node: fx.Node):
        x = first(ctx, node)
        target = dtype
        if target is None:
            for a in list(ctx.retrieve(node.args[1:])) + [ctx.retrieve(node.kwargs.get("dtype"))]:
                if isinstance(a, torch.dtype):
                    target = dtype_str(a)
                elif is_tensor(a):
                    target = a.struct_info.dtype
        return astype(ctx, x, target) if target else x

    return rule


register(_size, "size", aten.sym_size)
register(_getattr, getattr)
register(lambda ctx, node: ndim(first(ctx, node)), "dim")
register(lambda ctx, node: _product(sym_dims(first(ctx, node))), "numel")
register(_view, "view", "reshape", torch.reshape, aten.view, aten.reshape, aten._unsafe_view)
register(_flatten, torch.flatten, "flatten", aten.flatten)
register(_unflatten, torch.unflatten, "unflatten", aten.unflatten)
register(_permute, torch.permute, "permute", aten.permute)
register(_transpose, torch.transpose, "transpose", torch.swapaxes, aten.transpose)
register(_t, torch.t, "t", aten.t)
register(_unsqueeze, torch.unsqueeze, "unsqueeze", aten.unsqueeze)
register(_squeeze, torch.squeeze, "squeeze", aten.squeeze)
register(_expand, "expand", aten.expand)
register(_expand_as, "expand_as", aten.expand_as)
register(_view_as, "view_as", "reshape_as", aten.view_as, aten.reshape_as)
register(
    _identity,
    "contiguous",
    "clone",
    "detach",
    torch.clone,
    torch.detach,
    F.dropout,
    torch.dropout,
    "cpu",
    aten.clone,
    aten.alias,
    aten.detach,
    aten.detach_,  # in place, but only on autograd metadata: the value is unchanged
    aten.contiguous,
    aten.dropout,
    aten.lift_fresh_copy,
)
register(_astype_rule(None), "to", "type", "type_as", aten.to, aten._to_copy)
for _name, _dtype in {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "int": "int32",
    "long": "int64",
    "bool": "bool",
}.items():
    register(_astype_rule(_dtype), _name)
