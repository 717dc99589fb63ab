"""Slicing rules: strided slices, `x[idx]`, select/narrow, split/chunk/unbind, cat/stack."""

from __future__ import annotations

import itertools
import operator

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Importer, is_tensor, register
from relaxmlir.frontend.rules.common import aten, axis, call, first, ndim, shape_of
from relaxmlir.frontend.rules.shape import squeeze


def strided_slice(ctx: Importer, x, axes, begin, end, strides=None):
    """Slice along `axes`, clamping bounds to static sizes; untouched axes are dropped."""
    strides = strides or [1] * len(axes)
    keep = [[], [], [], []]
    for a, b, e, s in zip(axes, begin, end, strides):
        size = shape_of(x)[a]
        if isinstance(size, int):
            b = max(0, min(size, b + size if b < 0 else b))
            e = max(0, min(size, e + size if e < 0 else e))
            if (b, e, s) == (0, size, 1):
                continue
        elif (b, s) == (0, 1) and e >= 2**62:
            continue  # a whole symbolic dim; relax.strided_slice resolves other symbolic bounds
        for lst, v in zip(keep, (a, b, e, s)):
            lst.append(v)
    if not keep[0]:
        return x
    return call(ctx, "strided_slice", x, *keep)


def _slice_bounds(sl: slice):
    """(begin, end, stride) of a python slice; an open end is "to the end" for strided_slice."""
    start = 0 if sl.start is None else sl.start
    stop = 2**63 - 1 if sl.stop is None else sl.stop
    step = 1 if sl.step is None else sl.step
    if step <= 0:
        raise NotImplementedError(f"slice step must be positive (got {step})")
    return start, stop, step


def select(ctx: Importer, x, dim: int, index: int):
    dim = axis(dim, ndim(x))
    index = index + shape_of(x)[dim] if index < 0 else index
    return squeeze(ctx, strided_slice(ctx, x, [dim], [index], [index + 1]), [dim])


def getitem(ctx: Importer, node: fx.Node):
    """`x[idx]`: tuple items, sizes, or tensor indexing with ints, slices, None, ... and one tensor."""
    obj, idx = ctx.arg(node, 0), ctx.arg(node, 1)
    if not is_tensor(obj):
        return obj[idx]
    items = list(idx) if isinstance(idx, tuple) else [idx]
    rank = ndim(obj)
    used = sum(1 for it in items if it is not None and it is not Ellipsis)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (rank - used)
    items += [slice(None)] * (rank - sum(1 for it in items if it is not None))
    axes, begin, end, strides, drop, new_axes, take = [], [], [], [], [], [], None
    in_axis = out_axis = 0
    for it in items:
        if it is None:
            new_axes.append(out_axis)
            out_axis += 1
            continue
        size = shape_of(obj)[in_axis]
        if isinstance(it, int) and not isinstance(it, bool):
            k = it + size if it < 0 else it
            axes.append(in_axis), begin.append(k), end.append(k + 1), strides.append(1)
            drop.append(in_axis)
        elif isinstance(it, slice):
            b, e, s = _slice_bounds(it)
            axes.append(in_axis), begin.append(b), end.append(e), strides.append(s)
            out_axis += 1
        elif is_tensor(it) and take is None:
            take = (in_axis, it)
            out_axis += ndim(it)
        else:
            raise NotImplementedError(f"unsupported index {it!r} at node '{node.name}'")
        in_axis += 1
    out = strided_slice(ctx, obj, axes, begin, end, strides)
    if take is not None:
        if drop:
            raise NotImplementedError(
                f"tensor index mixed with integer indices at node '{node.name}'"
            )
        out = call(ctx, "take", out, take[1], take[0])
    out = squeeze(ctx, out, drop) if drop else out
    return call(ctx, "expand_dims", out, new_axes) if new_axes else out


def _cat(ctx: Importer, node: fx.Node):
    tensors = list(ctx.arg(node, 0, "tensors"))
    # torch skips 1-D tensors of size 0 (legacy rule; transformers' caches start as one)
    kept = [t for t in tensors if shape_of(t) != (0,)] or tensors[:1]
    if len(kept) == 1:
        return kept[0]
    return call(ctx, "concat", kept, ctx.arg(node, 1, "dim", 0))


def _stack(ctx: Importer, node: fx.Node):
    tensors, dim = ctx.arg(node, 0, "tensors"), ctx.arg(node, 1, "dim", 0)
    dim = axis(dim, ndim(tensors[0]) + 1)
    return call(ctx, "concat", [call(ctx, "expand_dims", t, dim) for t in tensors], dim)


def split(ctx: Importer, x, sizes: list, dim: int) -> tuple:
    """One `strided_slice` per part: each part is its own var (a graph output, too)."""
    dim, bounds = axis(dim, ndim(x)), [0] + [int(i) for i in np.cumsum(sizes)]
    return tuple(strided_slice(ctx, x, [dim], [b], [e]) for b, e in itertools.pairwise(bounds))


def _split(ctx: Importer, node: fx.Node):
    x, size = (
        first(ctx, node),
        ctx.arg(node, 1, ("split_size_or_sections", "split_size", "split_sizes")),
    )
    dim = axis(ctx.arg(node, 2, "dim", 0), ndim(x))
    if isinstance(size, int):
        length = shape_of(x)[dim]
        size = [size] * (length // size) + ([length % size] if length % size else [])
    return split(ctx, x, list(size), dim)


def _chunk(ctx: Importer, node: fx.Node):
    x, chunks = first(ctx, node), ctx.arg(node, 1, "chunks")
    dim = axis(ctx.arg(node, 2, "dim", 0), ndim(x))
    length = shape_of(x)[dim]
    step = -(-length // chunks)
    return split(ctx, x, [min(step, length - i) for i in range(0, length, step)], dim)


def _unbind(ctx: Importer, node: fx.Node):
    x, dim = first(ctx, node), axis(ctx.arg(node, 1, "dim", 0), ndim(first(ctx, node)))
    parts = split(ctx, x, [1] * shape_of(x)[dim], dim)
    return tuple(squeeze(ctx, p, [dim]) for p in parts)


def _select(ctx: Importer, node: fx.Node):
    return select(ctx, first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "index"))


def _slice(ctx: Importer, node: fx.Node):
    x, dim = first(ctx, node), ctx.arg(node, 1, "dim", 0)
    start, end = ctx.arg(node, 2, "start"), ctx.arg(node, 3, "end")
    b, e, s = _slice_bounds(slice(start, end, ctx.arg(node, 4, "step", 1)))
    return strided_slice(ctx, x, [axis(dim, ndim(x))], [b], [e], [s])


def _narrow(ctx: Importer, node: fx.Node):
    x, dim, start = first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "start")
    return strided_slice(
        ctx, x, [axis(dim, ndim(x))], [start], [start + ctx.arg(node, 3, "length")]
    )


register(getitem, operator.getitem)
register(_cat, torch.cat, torch.concat, aten.cat, aten.concat)
register(_stack, torch.stack, aten.stack)
register(_split, torch.split, "split", aten.split, aten.split_with_sizes)
register(_chunk, torch.chunk, "chunk", aten.chunk)
register(_unbind, torch.unbind, "unbind", aten.unbind)
register(_select, torch.select, "select", aten.select)
register(_slice, aten.slice)
register(_narrow, torch.narrow, "narrow", aten.narrow)
