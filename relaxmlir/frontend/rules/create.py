"""Tensor-creation rules: full/zeros/ones (and their `_like` forms), tril/triu, arange up to a
symbolic size; `torch.Size` built from symbolic sizes."""

from __future__ import annotations

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Importer, Rule, SymDim, dim_value, dtype_str, register
from relaxmlir.frontend.rules.common import aten, call, first, shape_of
from relaxmlir.relax.expr import const


def _triangle(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        return call(ctx, op_name, first(ctx, node), ctx.arg(node, 1, "diagonal", 0))

    return rule


def full(ctx: Importer, shape, value, dtype: str):
    """A filled tensor of a (possibly symbolic) shape: a scalar constant broadcast to it."""
    return call(
        ctx, "broadcast_to", const(np.array(value, dtype=dtype), dtype), [dim_value(d) for d in shape]
    )


def _full_like(fill) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x = first(ctx, node)
        value = ctx.arg(node, 1, "fill_value") if fill is None else fill
        dtype = ctx.arg(node, None, "dtype")
        return full(ctx, shape_of(x), value, dtype_str(dtype) if dtype else x.struct_info.dtype)

    return rule


def _full(fill) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        if fill is None:
            shape, value = ctx.arg(node, 0, "size"), ctx.arg(node, 1, "fill_value")
        else:
            shape, value = ctx.rest(node, 0, "size"), fill
        dtype = ctx.arg(node, None, "dtype")
        if dtype is None:
            dtype = torch.float32 if isinstance(value, float) or fill is not None else torch.int64
        return full(ctx, shape, value, dtype_str(dtype))

    return rule


def _empty_strided(ctx: Importer, node: fx.Node):
    """`empty_strided(size, stride)`: zeros of that size (the strides only lay out memory)."""
    dtype = ctx.arg(node, None, "dtype") or torch.float32
    return full(ctx, ctx.arg(node, 0, "size"), 0, dtype_str(dtype))


def _arange(ctx: Importer, node: fx.Node):
    """`torch.arange` with a symbolic bound (constant bounds were evaluated by torch already):
    an int start and step up to a symbolic end, e.g. the position ids of a sequence whose
    length torch.compile made dynamic."""
    bounds = [a for a in node.args if a is not None]
    bounds = [ctx.retrieve(a) for a in bounds]
    for key in ("start", "end", "step"):
        if key in node.kwargs:
            bounds.append(ctx.retrieve(node.kwargs[key]))
    start, end, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
    if not isinstance(end, SymDim) or isinstance(start, SymDim) or isinstance(step, SymDim):
        raise NotImplementedError(
            f"torch.arange({start}, {end}, {step}) at node '{node.name}': only the end may be "
            "symbolic"
        )
    if any(isinstance(v, float) for v in (start, step)):
        raise NotImplementedError(f"torch.arange with a float start/step at node '{node.name}'")
    dtype = ctx.arg(node, None, "dtype")
    return call(ctx, "arange", start, dim_value(end), step, dtype_str(dtype) if dtype else "int64")


def _size(ctx: Importer, node: fx.Node):
    """`torch.Size([s0, 4])` (dynamo spells view shapes so): the tuple of its sizes."""
    return tuple(ctx.arg(node, 0, "sizes", ()))


register(_arange, torch.arange, aten.arange)
register(_size, torch.Size)
register(_triangle("tril"), torch.tril, "tril", aten.tril)
register(_triangle("triu"), torch.triu, "triu", aten.triu)
register(_full_like(None), torch.full_like, aten.full_like)
register(_full_like(0), torch.zeros_like, aten.zeros_like)
register(_full_like(1), torch.ones_like, aten.ones_like)
register(_full(None), torch.full, aten.full)
register(_full(0), torch.zeros, aten.zeros)
# uninitialized memory in torch; zeros here (torch.export's nn.MultiheadAttention and LSTM
# start buffers with aten.empty before writing them)
register(_full(0), torch.empty, aten.empty)
register(_full_like(0), torch.empty_like, aten.empty_like)
register(_empty_strided, aten.empty_strided)
register(_full(1), torch.ones, aten.ones)
