"""Slicing rules: strided slices, `x[idx]` and `x[idx] = v`, select/narrow, split/chunk/unbind,
cat/stack."""

from __future__ import annotations

import itertools
import operator

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Importer, SymDim, dim_value, is_tensor, register
from relaxmlir.frontend.rules.common import (
    as_tensor,
    astype,
    aten,
    axis,
    call,
    emit_binary,
    first,
    ndim,
    shape_of,
)
from relaxmlir.frontend.rules.shape import reshape, squeeze
from relaxmlir.relax.expr import Constant, const
from relaxmlir.relax.op.common import broadcast_shapes


def strided_slice(ctx: Importer, x, axes, begin, end, strides=None, end_in_bounds=False):
    """Slice along `axes`, clamping bounds to static sizes; untouched axes are dropped.

    A static dim sliced up to a symbolic end (`pos_ids[:, :seq_len]`) needs `end_in_bounds`:
    the caller knows end <= size (torch.compile guarded it), so the result has `end - begin`
    elements, taken at `arange(begin, end, step)`."""
    strides = strides or [1] * len(axes)
    keep = [[], [], [], []]
    for a, b, e, s in zip(axes, begin, end, strides):
        size = shape_of(x)[a]
        symbolic_end = isinstance(b, int) and isinstance(e, SymDim)
        if isinstance(size, int) and symbolic_end and end_in_bounds:
            b = max(0, min(size, b + size if b < 0 else b))
            x = call(ctx, "take", x, call(ctx, "arange", b, dim_value(e), s), a, "clip")
            continue
        if isinstance(size, int):
            if not (isinstance(b, int) and isinstance(e, int)):
                raise NotImplementedError(
                    f"slicing a dimension of static size {size} with a symbolic bound "
                    f"([{b}:{e}]) is not supported"
                )
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
    """`x.select(dim, index)`; a negative index on a symbolic dim counts from its end (the last
    token's logits `x[:, -1]` of a prompt of any length)."""
    dim = axis(dim, ndim(x))
    size = shape_of(x)[dim]
    if index < 0 and isinstance(size, int):
        index += size
    end = 2**63 - 1 if index == -1 else index + 1  # a slice ending at 0 would be empty
    return squeeze(ctx, strided_slice(ctx, x, [dim], [index], [end]), [dim])


def _index_tensor(ctx: Importer, item, where: str):
    """An index item as an int64 tensor: a tensor, a (nested) list of ints, or an int."""
    if is_tensor(item):
        dtype = item.struct_info.dtype
        if dtype == "bool":
            raise NotImplementedError(f"indexing with a boolean mask{where} (data-dependent shape)")
        return astype(ctx, item, "int64")
    value = np.asarray(item)
    if value.dtype == np.bool_ or value.dtype.kind not in "iu":
        raise NotImplementedError(f"unsupported index {item!r}{where}")
    return const(value.astype(np.int64))


def _flat_index(ctx: Importer, tensors: list, sizes: list, strides: list, op: str):
    """The flat position in the merged indexed axes: each index tensor with its negative
    entries counted from the end of its axis, times its axis' stride, summed and broadcast to
    the index tensors' common shape."""
    shape = broadcast_shapes([shape_of(t) for t in tensors], op)
    flat = None
    for t, size, stride in zip(tensors, sizes, strides):
        t = call(ctx, "where", emit_binary(ctx, "less", t, 0), emit_binary(ctx, "add", t, size), t)
        t = emit_binary(ctx, "multiply", t, stride) if stride != 1 else t
        flat = t if flat is None else emit_binary(ctx, "add", flat, t)
    if tuple(shape_of(flat)) != tuple(shape):
        flat = call(ctx, "broadcast_to", flat, list(shape))
    return flat


def advanced_index(ctx: Importer, x, indices: list, where: str = ""):
    """numpy/torch advanced indexing: `indices[a]` is an index tensor for axis a or None (the
    whole axis). The index tensors broadcast together; when their axes are adjacent the result
    has the broadcast shape in their place, otherwise in front (numpy's rule). Decomposed as a
    `take` from x with the indexed axes merged into one, at the flattened index."""
    indices = list(indices) + [None] * (ndim(x) - len(indices))
    axes = [a for a, t in enumerate(indices) if t is not None]
    if not axes:
        return x
    if axes != list(range(axes[0], axes[-1] + 1)):  # not adjacent: indexed axes to the front
        rest = [a for a in range(ndim(x)) if a not in axes]
        x = call(ctx, "permute_dims", x, axes + rest)
        indices = [indices[a] for a in axes] + [None] * len(rest)
        axes = list(range(len(axes)))
    # sizes may be symbolic (a padding mask indexed by batch and key positions over a cache of
    # n rows): strides and the merged size are then symbolic, used as tensor values
    sizes = [SymDim.make(shape_of(x)[a]) for a in axes]
    strides = [1] * len(sizes)
    for i in range(len(sizes) - 2, -1, -1):
        strides[i] = sizes[i + 1] * strides[i + 1]
    flat = _flat_index(ctx, [indices[a] for a in axes], sizes, strides, "index")
    lead, tail = list(shape_of(x)[: axes[0]]), list(shape_of(x)[axes[-1] + 1 :])
    merged = call(ctx, "reshape", x, lead + [dim_value(strides[0] * sizes[0])] + tail)
    return call(ctx, "take", merged, flat, axes[0])


def _in_dtype_of(ctx: Importer, value, x):
    """A value written into `x` (a tensor or a python scalar) in x's dtype, as torch casts it."""
    dtype = x.struct_info.dtype
    if not is_tensor(value):
        return as_tensor(value, dtype=dtype)
    return astype(ctx, value, dtype) if value.struct_info.dtype != dtype else value


def index_put(ctx: Importer, x, indices: list, values, accumulate: bool = False, where: str = ""):
    """`x[indices] = values` (`aten.index_put`: what torch.export makes of index_copy,
    index_add, index_fill and item assignment through index tensors), the mirror image of
    `advanced_index`: the indexed axes merge into one at the flattened index, x is laid out as
    [merged, rest] and `scatter_elements` writes (accumulating: adds) each value row at its
    index, then the axes go back in place. A boolean mask (`x[mask] = v`) with one value is a
    `where`."""
    rank = ndim(x)
    indices = list(indices) + [None] * (rank - len(indices))
    values = _in_dtype_of(ctx, values, x)
    masks = [a for a, t in enumerate(indices) if is_tensor(t) and t.struct_info.dtype == "bool"]
    if masks:
        return _masked_put(ctx, x, indices, masks, values, accumulate, where)
    tensors = {a: _index_tensor(ctx, t, where) for a, t in enumerate(indices) if t is not None}
    axes = list(tensors)
    if not axes:
        raise NotImplementedError(f"index_put without index tensors{where}")
    rest = [a for a in range(rank) if a not in axes]
    sizes = [shape_of(x)[a] for a in axes]
    if not all(isinstance(s, int) for s in sizes):
        raise NotImplementedError(f"index_put along a symbolic axis{where}")
    strides = [int(np.prod(sizes[i + 1 :])) for i in range(len(sizes))]
    flat = _flat_index(ctx, list(tensors.values()), sizes, strides, "index_put")
    shape = list(shape_of(flat))
    if len(axes) == 1 and len(shape) == 1:
        return _put_along(ctx, x, axes[0], flat, values, accumulate)
    # the shape x[indices] has: the index shape in place of adjacent indexed axes, else in front
    adjacent = axes == list(range(axes[0], axes[-1] + 1))
    lead = [shape_of(x)[a] for a in rest if adjacent and a < axes[0]]
    tail = [shape_of(x)[a] for a in rest if not adjacent or a > axes[-1]]
    target = lead + shape + tail
    if list(shape_of(values)) != target:
        values = call(ctx, "broadcast_to", values, target)
    if lead:  # the index axes first: [index..., rest...]
        n, b = len(lead), len(shape)
        order = list(range(n, n + b)) + list(range(n)) + list(range(n + b, len(target)))
        values = call(ctx, "permute_dims", values, order)
    rows = int(np.prod(shape)) if all(isinstance(s, int) for s in shape) else -1
    values = reshape(ctx, values, [rows, -1])
    rest_sizes = [shape_of(x)[a] for a in rest]
    order = axes + rest
    moved = x if order == list(range(rank)) else call(ctx, "permute_dims", x, order)
    merged = reshape(ctx, moved, [int(np.prod(sizes)), -1])
    at = call(ctx, "broadcast_to", reshape(ctx, flat, [rows, 1]), list(shape_of(values)))
    out = call(ctx, "scatter_elements", merged, at, values, 0, "add" if accumulate else "update")
    out = reshape(ctx, out, sizes + rest_sizes)
    if order == list(range(rank)):
        return out
    return call(ctx, "permute_dims", out, [order.index(a) for a in range(rank)])


def _put_along(ctx: Importer, x, axis: int, index, values, accumulate: bool):
    """`index_put` with one 1-D index tensor (`index_copy`, a static KV cache written at
    `cache_position`), along that axis and x in its own layout (the general route moves the
    axis to the front and back: two more copies of x). Writing: `relax.index_copy`, which finds
    per position of the axis the last row aimed at it (a 12-layer decode step's 24 writes into
    caches of 1024 rows took 20 ms as the general `scatter_elements`, whose search runs per
    element) and which the build turns into an in-place write of a state buffer. Adding: a
    `scatter_elements` along the axis."""
    target = list(shape_of(x))
    n = shape_of(index)[0]
    target[axis] = n
    if list(shape_of(values)) != target:
        values = call(ctx, "broadcast_to", values, target)
    if accumulate or not isinstance(n, int):
        at = reshape(ctx, index, [1] * axis + [n] + [1] * (len(target) - axis - 1))
        at = call(ctx, "broadcast_to", at, target)
        return call(ctx, "scatter_elements", x, at, values, axis, "add" if accumulate else "update")
    return call(ctx, "index_copy", x, index, values, axis)


def _masked_put(ctx: Importer, x, indices, masks, values, accumulate: bool, where: str):
    """`x[mask] = v` where v is the same for every selected element (it broadcasts over the
    axes the mask leaves): `where(mask, v, x)`, the mask over the leading axes it covers.
    Values that differ per selected element depend on the number selected: refused."""
    mask = indices[masks[0]]
    trailing = ndim(x) - ndim(mask)
    extra = ndim(values) - trailing
    per_element = extra > 0 and any(d != 1 for d in shape_of(values)[:extra])
    if masks != [0] or any(t is not None for t in indices[1:]) or per_element:
        raise NotImplementedError(
            f"index_put with a boolean mask and a value per selected element, or a mask mixed "
            f"with other indices{where} (a data-dependent number of elements)"
        )
    if extra > 0:
        values = reshape(ctx, values, list(shape_of(values)[extra:]))
    mask = reshape(ctx, mask, list(shape_of(mask)) + [1] * trailing)
    new = emit_binary(ctx, "add", x, values) if accumulate else values
    return call(ctx, "where", mask, new, x)


def _index_put(ctx: Importer, node: fx.Node):
    x, indices = first(ctx, node), ctx.arg(node, 1, "indices")
    values, accumulate = ctx.arg(node, 2, "values"), ctx.arg(node, 3, "accumulate", False)
    return index_put(ctx, x, indices, values, accumulate, f" at node '{node.name}'")


def _index_copy(ctx: Importer, node: fx.Node):
    """`x.index_copy(dim, index, source)`: the rows of `source` written at `index` along dim."""
    x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
    index, source = ctx.arg(node, 2, "index"), ctx.arg(node, 3, ("source", "tensor"))
    where = f" at node '{node.name}'"
    if ndim(x) == 0:  # torch copies into a 0-d tensor as into its one element
        one = [reshape(ctx, t, [1]) for t in (x, index, source)]
        return reshape(ctx, index_put(ctx, one[0], [one[1]], one[2], False, where), [])
    dim = dim + ndim(x) if dim < 0 else dim
    return index_put(ctx, x, [None] * dim + [index], source, False, where)


def getitem(ctx: Importer, node: fx.Node):
    """`x[idx]`: tuple items, sizes, or tensor indexing with ints, slices, None, ... and index
    tensors or lists (advanced indexing)."""
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
    advanced = [it for it in items if is_tensor(it) or isinstance(it, list)]
    ints = any(isinstance(it, int) and not isinstance(it, bool) for it in items)
    if len(advanced) > 1 or any(isinstance(it, list) for it in items) or (advanced and ints):
        return _advanced_getitem(ctx, obj, items, f" at node '{node.name}'")
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
            take = (in_axis, _index_tensor(ctx, it, f" at node '{node.name}'"))
            out_axis += ndim(it)
        else:
            raise NotImplementedError(f"unsupported index {it!r} at node '{node.name}'")
        in_axis += 1
    out = strided_slice(ctx, obj, axes, begin, end, strides, _sized_by_torch(node))
    if take is not None:
        if drop:
            raise NotImplementedError(
                f"tensor index mixed with integer indices at node '{node.name}'"
            )
        out = call(ctx, "take", out, take[1], take[0])
    out = squeeze(ctx, out, drop) if drop else out
    return call(ctx, "expand_dims", out, new_axes) if new_axes else out


def _sized_by_torch(node: fx.Node) -> bool:
    """Whether torch (dynamo's fake tensors) gave the node's result a plain symbolic size: it
    then proved or guarded that symbolic slice ends stay within static sizes."""
    example = node.meta.get("example_value", node.meta.get("val"))
    if not isinstance(example, torch.Tensor):
        return False
    return not any("Min" in str(d) or "Max" in str(d) for d in example.shape)


def _advanced_getitem(ctx: Importer, x, items: list, where: str):
    """Slices first (keeping every axis), then the ints, lists and tensors as index tensors."""
    if any(it is None for it in items):
        raise NotImplementedError(f"None (new axis) mixed with index tensors{where}")
    axes, begin, end, strides, indices = [], [], [], [], []
    for a, it in enumerate(items):
        if isinstance(it, slice):
            b, e, st = _slice_bounds(it)
            axes.append(a), begin.append(b), end.append(e), strides.append(st)
            indices.append(None)
        else:
            indices.append(_index_tensor(ctx, it, where))
    x = strided_slice(ctx, x, axes, begin, end, strides)
    return advanced_index(ctx, x, indices, where)


def _aten_index(ctx: Importer, node: fx.Node):
    """`aten.index.Tensor(x, [None, idx, ...])`: index tensors per leading axis (None = all)."""
    x, indices = first(ctx, node), ctx.arg(node, 1, "indices")
    where = f" at node '{node.name}'"
    tensors = [None if t is None else _index_tensor(ctx, t, where) for t in indices]
    return advanced_index(ctx, x, tensors, where)


def flip(ctx: Importer, x, dims):
    """Reversed along `dims`: a `take` at constant descending indices per axis."""
    for d in dims if isinstance(dims, (list, tuple)) else [dims]:
        d = axis(d, ndim(x))
        size = shape_of(x)[d]
        if not isinstance(size, int):
            raise NotImplementedError(f"flip over a symbolic dim ({size})")
        if size > 1:
            x = call(ctx, "take", x, const(np.arange(size - 1, -1, -1, dtype=np.int64)), d)
    return x


def roll(ctx: Importer, x, shifts, dims):
    """torch.roll: the last `shift` elements first, per axis (the flattened tensor when no dims)."""
    shifts = list(shifts) if isinstance(shifts, (list, tuple)) else [shifts]
    if dims is None or dims == [] or dims == ():
        flat = call(ctx, "reshape", x, [-1]) if ndim(x) != 1 else x
        out = roll(ctx, flat, shifts[:1], [0])
        return call(ctx, "reshape", out, list(shape_of(x))) if ndim(x) != 1 else out
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    for shift, d in zip(shifts, dims):
        d = axis(d, ndim(x))
        size = shape_of(x)[d]
        if not isinstance(size, int):
            raise NotImplementedError(f"roll over a symbolic dim ({size})")
        k = shift % size if size else 0
        if k:
            tail = strided_slice(ctx, x, [d], [size - k], [size])
            x = call(ctx, "concat", [tail, strided_slice(ctx, x, [d], [0], [size - k])], d)
    return x


def _repeat(ctx: Importer, node: fx.Node):
    """`x.repeat(*sizes)` / `torch.tile(x, dims)`: numpy tile."""
    x, reps = first(ctx, node), ctx.rest(node, 1, ("repeats", "sizes", "dims"))
    if all(r == 1 for r in reps) and len(reps) <= ndim(x):
        return x
    return call(ctx, "tile", x, [int(r) for r in reps])


def _cat(ctx: Importer, node: fx.Node):
    tensors = list(ctx.arg(node, 0, "tensors"))
    # torch skips 1-D tensors of size 0 (legacy rule; transformers' caches start as one)
    kept = [t for t in tensors if shape_of(t) != (0,)] or tensors[:1]
    if len(kept) == 1:
        return kept[0]
    return call(ctx, "concat", kept, ctx.arg(node, 1, "dim", 0))


def stack(ctx: Importer, tensors, dim: int):
    """`torch.stack`: the tensors joined along a new axis `dim`."""
    dim = axis(dim, ndim(tensors[0]) + 1)
    return call(ctx, "concat", [call(ctx, "expand_dims", t, dim) for t in tensors], dim)


def _stack(ctx: Importer, node: fx.Node):
    return stack(ctx, ctx.arg(node, 0, "tensors"), ctx.arg(node, 1, "dim", 0))


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
    return strided_slice(ctx, x, [axis(dim, ndim(x))], [b], [e], [s], _sized_by_torch(node))


def slice_scatter(ctx: Importer, x, src, dim: int, start, end, step: int = 1, where: str = ""):
    """`x` with `x[..., start:end:step, ...] = src` along `dim` (torch.export's form of a slice
    assignment, `b[:, 1:3] = v`): the parts before and after and `src` concatenated for a step
    of 1 (elementwise copies), else an index_put at the slice's positions."""
    size = shape_of(x)[dim]
    if not isinstance(size, int):
        raise NotImplementedError(f"slice_scatter along a symbolic axis{where}")
    b, e, st = slice(start, end, step).indices(size)
    src = _in_dtype_of(ctx, src, x)
    if st != 1:
        positions = const(np.arange(b, e, st, dtype=np.int64))
        return index_put(ctx, x, [None] * dim + [positions], src, where=where)
    e = max(b, e)
    parts = [strided_slice(ctx, x, [dim], [0], [b])] if b > 0 else []
    parts.append(src)
    if e < size:
        parts.append(strided_slice(ctx, x, [dim], [e], [size]))
    return parts[0] if len(parts) == 1 else call(ctx, "concat", parts, dim)


def _slice_scatter(ctx: Importer, node: fx.Node):
    x, src = first(ctx, node), ctx.arg(node, 1, "src")
    dim = axis(ctx.arg(node, 2, "dim", 0), ndim(x))
    start, end = ctx.arg(node, 3, "start"), ctx.arg(node, 4, "end")
    step = ctx.arg(node, 5, "step", 1)
    return slice_scatter(ctx, x, src, dim, start, end, step, f" at node '{node.name}'")


def _select_scatter(ctx: Importer, node: fx.Node):
    """`select_scatter(x, src, dim, index)`: `x[..., index, ...] = src` (src without that axis)."""
    x, src = first(ctx, node), ctx.arg(node, 1, "src")
    dim, index = axis(ctx.arg(node, 2, "dim"), ndim(x)), ctx.arg(node, 3, "index")
    size = shape_of(x)[dim]
    if isinstance(size, int) and index < 0:
        index += size
    src = call(ctx, "expand_dims", src, dim)
    return slice_scatter(ctx, x, src, dim, index, index + 1, 1, f" at node '{node.name}'")


def _copy(ctx: Importer, node: fx.Node):
    """`aten.copy(x, src)` (the functional form of `x.copy_(src)`): src broadcast to x's shape,
    in x's dtype."""
    x, src = first(ctx, node), ctx.arg(node, 1, "src")
    src = _in_dtype_of(ctx, src, x)
    if tuple(shape_of(src)) != tuple(shape_of(x)):
        src = call(ctx, "broadcast_to", src, list(shape_of(x)))
    return src


def _narrow(ctx: Importer, node: fx.Node):
    """`x.narrow(dim, start, length)`; `start` may be a 0-d tensor (a graph value: then the
    elements are taken at `start + arange(length)`)."""
    x, dim, start = first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "start")
    dim, length = axis(dim, ndim(x)), ctx.arg(node, 3, "length")
    if isinstance(start, Constant):
        start = int(start.data.item())
    if is_tensor(start):
        size = shape_of(x)[dim]
        start = astype(ctx, start, "int64")
        start = call(
            ctx,
            "where",
            emit_binary(ctx, "less", start, 0),
            emit_binary(ctx, "add", start, size),
            start,
        )
        index = emit_binary(ctx, "add", const(np.arange(length, dtype=np.int64)), start)
        return call(ctx, "take", x, index, dim)
    start = start + shape_of(x)[dim] if start < 0 else start
    return strided_slice(ctx, x, [dim], [start], [start + length])


register(getitem, operator.getitem)
register(_cat, torch.cat, torch.concat, aten.cat, aten.concat)
register(_stack, torch.stack, aten.stack)
register(
    _split, torch.split, torch.split_with_sizes, "split", "split_with_sizes", aten.split,
    aten.split_with_sizes,
)  # fmt: skip
register(_chunk, torch.chunk, "chunk", aten.chunk)
register(_unbind, torch.unbind, "unbind", aten.unbind)
register(_select, torch.select, "select", aten.select)
register(_slice, aten.slice)
register(_narrow, torch.narrow, "narrow", aten.narrow)
register(_aten_index, aten.index)
register(_index_put, torch.index_put, "index_put", aten.index_put)
# in-place methods of fx graphs (the importer rebinds what they write); the in-place ATen ops
# stay without rules, so that an exported program with them is functionalized first
register(_index_put, "index_put_")
register(_index_copy, torch.index_copy, "index_copy", "index_copy_")
register(_slice_scatter, torch.slice_scatter, "slice_scatter", aten.slice_scatter)
register(_select_scatter, torch.select_scatter, "select_scatter", aten.select_scatter)
register(_copy, aten.copy)
register(
    lambda ctx, node: flip(ctx, first(ctx, node), ctx.rest(node, 1, "dims")),
    torch.flip,
    "flip",
    aten.flip,
)
register(lambda ctx, node: flip(ctx, first(ctx, node), [1]), torch.fliplr, "fliplr")
register(lambda ctx, node: flip(ctx, first(ctx, node), [0]), torch.flipud, "flipud")
register(
    lambda ctx, node: roll(
        ctx, first(ctx, node), ctx.arg(node, 1, "shifts"), ctx.arg(node, 2, "dims")
    ),
    torch.roll,
    "roll",
    aten.roll,
)
register(_repeat, "repeat", torch.tile, "tile", aten.repeat, aten.tile)
