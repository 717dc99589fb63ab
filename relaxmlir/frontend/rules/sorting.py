"""Sorting, scan and element-wise indexing rules: sort/argsort/topk, cumsum, cumprod, cummax,
cummin, logcumsumexp, gather/scatter, index_select and take_along_dim.

sort and topk are `argsort` followed by `gather_elements` (values and indices agree by
construction); topk keeps the first k of the order.
"""

from __future__ import annotations

import collections

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Deferred, Importer, Rule, dtype_str, is_tensor, register
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
from relaxmlir.frontend.rules.shape import broadcast_to
from relaxmlir.frontend.rules.slicing import strided_slice
from relaxmlir.relax.expr import const
from relaxmlir.runtime.dtype import np_dtype

Sorted = collections.namedtuple("Sorted", ["values", "indices"])


def sort(ctx: Importer, x, dim: int, descending: bool):
    if ndim(x) == 0:
        return Sorted(x, as_tensor(0, dtype="int64"))
    dim = axis(dim, ndim(x))
    order = call(ctx, "argsort", x, dim, bool(descending))
    return Sorted(call(ctx, "gather_elements", x, order, dim), order)


def _sort(ctx: Importer, node: fx.Node):
    """`torch.sort(x, dim=-1, descending=False, stable=False)`; `aten.sort.stable` has
    keyword-only `stable`, `dim`, `descending`. The sort is always stable."""
    x = first(ctx, node)
    if getattr(node.target, "_overloadname", "") == "stable":
        dim, descending = ctx.arg(node, None, "dim", -1), ctx.arg(node, None, "descending", False)
    else:
        dim, descending = ctx.arg(node, 1, "dim", -1), ctx.arg(node, 2, "descending", False)
    return sort(ctx, x, dim, descending)


def _argsort(ctx: Importer, node: fx.Node):
    x = first(ctx, node)
    stable_first = isinstance(ctx.arg(node, 1), bool)  # aten.argsort.stable(x, stable, dim, desc)
    dim = ctx.arg(node, 2 if stable_first else 1, "dim", -1)
    descending = ctx.arg(node, 3 if stable_first else 2, "descending", False)
    return sort(ctx, x, dim, descending).indices


def _topk(ctx: Importer, node: fx.Node):
    """`torch.topk(x, k, dim=-1, largest=True, sorted=True)`; results are always sorted."""
    x, k = first(ctx, node), ctx.arg(node, 1, "k")
    dim, largest = ctx.arg(node, 2, "dim", -1), ctx.arg(node, 3, "largest", True)
    values, order = sort(ctx, x, dim, largest)
    if ndim(x) == 0:
        return Sorted(values, order)
    dim = axis(dim, ndim(x))
    if not isinstance(k, int) or not 0 <= k <= shape_of(x)[dim]:
        raise ValueError(
            f"topk: k ({k}) out of range for dim of size {shape_of(x)[dim]} at node '{node.name}'"
        )
    return Sorted(
        strided_slice(ctx, values, [dim], [0], [k]), strided_slice(ctx, order, [dim], [0], [k])
    )


def _cumsum(ctx: Importer, node: fx.Node):
    """`torch.cumsum(x, dim, dtype=None)`: integer and bool inputs sum in int64, as in torch."""
    x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
    dtype = ctx.arg(node, 2, "dtype")
    if dtype is not None:
        x = astype(ctx, x, dtype_str(dtype))
    elif not x.struct_info.dtype.startswith(("float", "bfloat")):
        x = astype(ctx, x, "int64")
    if ndim(x) == 0:
        return x
    return call(ctx, "cumsum", x, axis(dim, ndim(x)))


def _prefix_matrix(ctx: Importer, x, dim: int, fill):
    """x's values along `dim` as a [.., n (i), n (j)] matrix, `fill` where j > i: every prefix
    at once, the scan axis last (with the permutation and the j <= i mask). Quadratic in n, as
    the cumsum kernel is (`topi.scan`)."""
    n = shape_of(x)[dim]
    if not isinstance(n, int):
        raise NotImplementedError("a cumulative max / min / product over a symbolic axis")
    order = [a for a in range(ndim(x)) if a != dim] + [dim]
    moved = call(ctx, "permute_dims", x, order) if order != list(range(ndim(x))) else x
    rows = call(ctx, "expand_dims", moved, ndim(x) - 1)  # [.., 1, n]: row i sees every j
    prefix = const(np.tril(np.ones((n, n), dtype=bool)))
    return call(ctx, "where", prefix, rows, as_tensor(fill, rows)), order, prefix


def _scan_back(ctx: Importer, out, order: list):
    """The scan axis (last) back in its place."""
    if order == list(range(len(order))):
        return out
    return call(ctx, "permute_dims", out, [order.index(a) for a in range(len(order))])


def _cumulative(op_name: str) -> Rule:
    """`cummax` / `cummin` (values and indices) and `cumprod`: the reduction of each prefix
    (`_prefix_matrix`)."""

    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
        if ndim(x) == 0:
            return x if op_name == "prod" else Sorted(x, const(np.array(0, dtype=np.int64)))
        dim = axis(dim, ndim(x))
        if op_name == "prod":
            dtype = ctx.arg(node, 2, "dtype")
            if dtype is not None:
                x = astype(ctx, x, dtype_str(dtype))
            elif not x.struct_info.dtype.startswith(("float", "bfloat")):
                x = astype(ctx, x, "int64")
        floating = x.struct_info.dtype.startswith(("float", "bfloat"))
        if op_name == "prod":
            fill = 1.0 if floating else 1
        elif floating:
            fill = float("-inf") if op_name == "max" else float("inf")
        elif x.struct_info.dtype == "bool":
            fill = op_name == "min"
        else:
            info = np.iinfo(np_dtype(x.struct_info.dtype))
            fill = int(info.min if op_name == "max" else info.max)
        matrix, order, prefix = _prefix_matrix(ctx, x, dim, fill)
        last = ndim(x)  # the prefix axis (j) of the matrix
        reduced = call(ctx, op_name, matrix, [last], False)
        values = _scan_back(ctx, reduced, order)
        if op_name == "prod":
            return values

        def indices():
            """torch's index: the last j <= i holding the prefix's extreme, or its last NaN
            (a NaN, once seen, is the extreme)."""
            extreme = call(ctx, "expand_dims", reduced, last)
            hit = emit_binary(ctx, "equal", matrix, extreme)
            if floating:
                nan = call(ctx, "isnan", matrix)
                nan = call(ctx, "logical_and", nan, call(ctx, "isnan", extreme))
                hit = call(ctx, "logical_or", hit, nan)
            hit = call(ctx, "logical_and", hit, prefix)
            positions = const(np.arange(shape_of(x)[dim], dtype=np.int64))
            at = call(ctx, "where", hit, positions, as_tensor(-1, dtype="int64"))
            return _scan_back(ctx, call(ctx, "max", at, [last], False), order)

        return Sorted(values, Deferred(indices))

    return rule


def _logcumsumexp(ctx: Importer, node: fx.Node):
    """`log(sum_{j <= i} exp(x_j))` shifted by each prefix's own maximum, so an early element
    far below a later maximum keeps its value (one global shift underflowed it to -inf)."""
    x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
    if ndim(x) == 0:
        return x
    dim = axis(dim, ndim(x))
    matrix, order, _ = _prefix_matrix(ctx, x, dim, float("-inf"))
    top = call(ctx, "max", matrix, [ndim(x)], True)  # each prefix's maximum
    # an all -inf prefix would give -inf - -inf = nan: shift it by 0 instead
    finite = call(ctx, "where", call(ctx, "isinf", top), as_tensor(0.0, top), top)
    shifted = call(ctx, "exp", emit_binary(ctx, "subtract", matrix, finite))
    total = call(ctx, "log", call(ctx, "sum", shifted, [ndim(x)], True))
    out = call(ctx, "squeeze", emit_binary(ctx, "add", total, finite), [ndim(x)])
    return _scan_back(ctx, out, order)


def _gather(ctx: Importer, node: fx.Node):
    """`torch.gather(x, dim, index)`."""
    x, dim, index = first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "index")
    if ndim(x) == 0:
        return x if ndim(index) == 0 else broadcast_to(ctx, x, shape_of(index))
    if ndim(index) == 0:
        index = call(ctx, "reshape", index, [1] * ndim(x))
        return call(ctx, "reshape", call(ctx, "gather_elements", x, index, axis(dim, ndim(x))), [])
    return call(ctx, "gather_elements", x, index, axis(dim, ndim(x)))


def _take_along_dim(ctx: Importer, node: fx.Node):
    x, index, dim = first(ctx, node), ctx.arg(node, 1, "indices"), ctx.arg(node, 2, "dim")
    if dim is None:
        return call(
            ctx, "take", x, call(ctx, "reshape", index, [-1]) if ndim(index) != 1 else index
        )
    dim = axis(dim, ndim(x))
    shape = [max(a, b) if a == 1 or b == 1 else a for a, b in zip(shape_of(x), shape_of(index))]
    x = broadcast_to(ctx, x, [shape_of(x)[dim] if i == dim else d for i, d in enumerate(shape)])
    index = broadcast_to(
        ctx, index, [shape_of(index)[dim] if i == dim else d for i, d in enumerate(shape)]
    )
    return call(ctx, "gather_elements", x, index, dim)


def _scatter(reduction: str | None):
    """`torch.scatter(x, dim, index, src|value, reduce=None)` and `scatter_add`."""

    def rule(ctx: Importer, node: fx.Node):
        x, dim, index = first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "index")
        src = ctx.arg(node, 3, ("src", "value"))
        mode = reduction or ctx.arg(node, 4, "reduce")
        mode = {None: "update", "add": "add", "sum": "add"}.get(mode)
        if mode is None:
            raise NotImplementedError(
                f"scatter with reduce='{ctx.arg(node, 4, 'reduce')}' at node '{node.name}'"
            )
        if ndim(x) == 0:
            raise NotImplementedError(f"scatter into a 0-d tensor at node '{node.name}'")
        if not is_tensor(src):
            src = broadcast_to(ctx, as_tensor(src, x), shape_of(index))
        elif shape_of(src) != shape_of(index):  # torch reads only the index's extent of src
            src = strided_slice(
                ctx, src, list(range(ndim(src))), [0] * ndim(src), list(shape_of(index))
            )
        src = astype(ctx, src, x.struct_info.dtype)
        return call(ctx, "scatter_elements", x, index, src, axis(dim, ndim(x)), mode)

    return rule


def _index_select(ctx: Importer, node: fx.Node):
    x, dim, index = first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "index")
    axis(dim, ndim(x))  # validates dim
    if ndim(x) == 0:
        return x
    if ndim(index) == 0:
        index = call(ctx, "reshape", index, [1])
    return call(ctx, "take", x, index, axis(dim, ndim(x)))


def _flat_take(ctx: Importer, node: fx.Node):
    """`torch.take(x, index)`: x flattened; the result has the index's shape."""
    return call(ctx, "take", first(ctx, node), ctx.arg(node, 1, "index"))


register(_sort, torch.sort, "sort", aten.sort)
register(_argsort, torch.argsort, "argsort", aten.argsort)
register(_topk, torch.topk, "topk", aten.topk)
register(_cumsum, torch.cumsum, "cumsum", aten.cumsum)
register(_cumulative("prod"), torch.cumprod, "cumprod", aten.cumprod)
register(_cumulative("max"), torch.cummax, "cummax", aten.cummax)
register(_cumulative("min"), torch.cummin, "cummin", aten.cummin)
register(_logcumsumexp, torch.logcumsumexp, "logcumsumexp", aten.logcumsumexp)
register(_gather, torch.gather, "gather", aten.gather)
register(_take_along_dim, torch.take_along_dim, "take_along_dim")
register(_scatter(None), torch.scatter, "scatter", aten.scatter)
register(_scatter("add"), torch.scatter_add, "scatter_add", aten.scatter_add)
# in place too: Importer.translate rebinds what they write
register(_scatter(None), "scatter_")
register(_scatter("add"), "scatter_add_")
register(_index_select, torch.index_select, "index_select", aten.index_select)
register(_flat_take, torch.take, "take", aten.take)
