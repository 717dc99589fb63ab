"""Reduction rules: sum/mean/prod/max/min (with indices), argmax/argmin, any/all, var/std (and
with the mean), count_nonzero."""

from __future__ import annotations

import collections

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Deferred, Importer, Rule, dtype_str, is_tensor, register
from relaxmlir.frontend.rules.common import (
    astype,
    aten,
    axis,
    call,
    emit_binary,
    first,
    ndim,
    shape_of,
)
from relaxmlir.relax.expr import const


def _axes(x, dim) -> list | None:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    axes = [axis(d, ndim(x)) for d in dims]  # validates; a 0-d tensor takes dim 0 and -1
    return axes if ndim(x) else None


def reduce(ctx: Importer, op_name: str, x, dim=None, keepdim: bool = False):
    axes = _axes(x, dim)
    if ndim(x) == 0 and op_name in ("sum", "mean", "max", "min", "prod"):
        return x  # a 0-d tensor is its own reduction over its one (implicit) dim
    return call(ctx, op_name, x, axes, keepdim)


_PROMOTED_TO_INT64 = ("bool", "uint8", "int8", "int16", "int32")


def reduction(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x = first(ctx, node)
        dtype = ctx.arg(node, None, "dtype")
        if dtype is not None:
            x = astype(ctx, x, dtype_str(dtype))
        elif op_name in ("sum", "prod") and x.struct_info.dtype in _PROMOTED_TO_INT64:
            x = astype(ctx, x, "int64")  # torch sums (multiplies) bools and integers in int64
        dim, keepdim = (
            ctx.arg(node, 1, ("dim", "axis")),
            ctx.arg(node, 2, ("keepdim", "keepdims"), False),
        )
        return reduce(ctx, op_name, x, dim, keepdim)

    return rule


MinMax = collections.namedtuple("MinMax", ["values", "indices"])


def _max_min(op_name: str, arg_op: str, pairwise: str) -> Rule:
    """`torch.max(x)`, `torch.max(x, dim)` -> (values, indices), `torch.max(x, other)`."""

    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, ("dim", "other"))
        if is_tensor(dim):
            return emit_binary(ctx, pairwise, x, dim)
        if dim is None:
            return reduce(ctx, op_name, x)
        keepdim = ctx.arg(node, 2, "keepdim", False)
        values = reduce(ctx, op_name, x, dim, keepdim)
        if ndim(x) == 0:  # its own max/min, at index 0
            return MinMax(values, const(np.array(0, dtype=np.int64)))
        return MinMax(values, Deferred(lambda: call(ctx, arg_op, x, axis(dim, ndim(x)), keepdim)))

    return rule


def _arg_reduce(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
        keepdim = ctx.arg(node, 2, "keepdim", False)
        if ndim(x) == 0:
            _axes(x, dim)  # validates dim
            return const(np.array(0, dtype=np.int64))
        return call(ctx, op_name, x, None if dim is None else axis(dim, ndim(x)), keepdim)

    return rule


def _any_all(op_name: str) -> Rule:
    """`any`/`all` over `dim` as the max/min of `x != 0` as numbers (decomposed)."""

    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
        mask = x if x.struct_info.dtype == "bool" else emit_binary(ctx, "not_equal", x, 0)
        numbers = astype(ctx, mask, "float32")
        out = reduce(ctx, op_name, numbers, dim, ctx.arg(node, 2, "keepdim", False))
        return emit_binary(ctx, "greater", out, 0.0)

    return rule


def variance(ctx: Importer, x, dim, correction, keepdim: bool):
    """`sum((x - mean)^2) / (N - correction)` over `dim` (decomposed). N is a constant when the
    reduced axes are static, else counted at run time (the sum of ones over them), so a
    symbolic batch or sequence axis works too."""
    axes = _axes(x, dim) or list(range(ndim(x)))
    centered = emit_binary(ctx, "subtract", x, reduce(ctx, "mean", x, axes, True))
    total = reduce(ctx, "sum", emit_binary(ctx, "multiply", centered, centered), axes, keepdim)
    sizes = [shape_of(x)[a] for a in axes]
    if all(isinstance(n, (int, np.integer)) for n in sizes):
        return emit_binary(ctx, "divide", total, float(max(int(np.prod(sizes)) - correction, 0)))
    count = reduce(ctx, "sum", call(ctx, "ones_like", x), axes, keepdim)
    denom = emit_binary(ctx, "maximum", emit_binary(ctx, "subtract", count, float(correction)), 0.0)
    return emit_binary(ctx, "divide", total, denom)


def _var_args(ctx: Importer, node: fx.Node) -> tuple:
    """(x, dim, correction, keepdim) of var/std/var_mean/std_mean in any of their spellings:
    `(x, unbiased)`, `(x, dim, unbiased, keepdim)`, `(x, dim, *, correction, keepdim)`."""
    x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
    unbiased = ctx.arg(node, None, "unbiased", True)
    keepdim = ctx.arg(node, None, "keepdim", False)
    if len(node.args) > 2 and isinstance(node.args[2], bool):  # var(x, dim, unbiased, keepdim)
        unbiased, keepdim = node.args[2], ctx.arg(node, 3, "keepdim", keepdim)
    if isinstance(dim, bool):  # var(x, unbiased)
        dim, unbiased = None, dim
    correction = ctx.arg(node, None, "correction", 1 if unbiased else 0)
    return x, dim, 1 if correction is None else correction, keepdim


def _var_std(is_std: bool) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x, dim, correction, keepdim = _var_args(ctx, node)
        out = variance(ctx, x, dim, correction, keepdim)
        return call(ctx, "sqrt", out) if is_std else out

    return rule


def _var_std_mean(is_std: bool) -> Rule:
    """`torch.var_mean` / `std_mean`: the (var or std, mean) pair over the same dims."""

    def rule(ctx: Importer, node: fx.Node):
        x, dim, correction, keepdim = _var_args(ctx, node)
        out = variance(ctx, x, dim, correction, keepdim)
        mean = reduce(ctx, "mean", x, dim, keepdim)
        return (call(ctx, "sqrt", out) if is_std else out), mean

    return rule


def _count_nonzero(ctx: Importer, node: fx.Node):
    """`torch.count_nonzero` over `dim` (an int, a list, or all): the int64 sum of `x != 0`."""
    x = first(ctx, node)
    mask = x if x.struct_info.dtype == "bool" else emit_binary(ctx, "not_equal", x, 0)
    return reduce(ctx, "sum", astype(ctx, mask, "int64"), ctx.arg(node, 1, "dim"))


for _op_name, _targets in {
    "sum": (torch.sum, "sum", aten.sum),
    "mean": (torch.mean, "mean", aten.mean),
    "max": (torch.amax, "amax", aten.amax),
    "min": (torch.amin, "amin", aten.amin),
    "prod": (torch.prod, "prod", aten.prod),
}.items():
    register(reduction(_op_name), *_targets)
register(_max_min("max", "argmax", "maximum"), torch.max, "max", aten.max)
register(_max_min("min", "argmin", "minimum"), torch.min, "min", aten.min)
register(_any_all("max"), torch.any, "any", aten.any)
register(_any_all("min"), torch.all, "all", aten.all)
register(_arg_reduce("argmax"), torch.argmax, "argmax", aten.argmax)
register(_arg_reduce("argmin"), torch.argmin, "argmin", aten.argmin)
register(_var_std(False), torch.var, "var", aten.var)
register(_var_std(True), torch.std, "std", aten.std)
register(_var_std_mean(False), torch.var_mean, aten.var_mean)
register(_var_std_mean(True), torch.std_mean, aten.std_mean)
register(_count_nonzero, torch.count_nonzero, "count_nonzero", aten.count_nonzero)
