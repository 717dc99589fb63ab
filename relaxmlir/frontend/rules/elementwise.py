"""Elementwise rules: unary math, activations, binary arithmetic and comparisons, where/clamp."""

from __future__ import annotations

import operator

import torch
from torch import fx

from relaxmlir.frontend.importer import Importer, Rule, is_tensor, register, target_name
from relaxmlir.frontend.rules.common import (
    F,
    as_tensor,
    astype,
    aten,
    binary_operands,
    call,
    emit_binary,
    first,
)


# -- unary and activations ------------------------------------------------------------------
def unary(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        return call(ctx, op_name, first(ctx, node))

    return rule


for _op_name, _targets in {
    "nn.relu": (torch.relu, F.relu, "relu", aten.relu),
    "nn.silu": (F.silu, aten.silu),
    "sigmoid": (torch.sigmoid, F.sigmoid, "sigmoid", aten.sigmoid),
    "tanh": (torch.tanh, F.tanh, "tanh", aten.tanh),
    "exp": (torch.exp, "exp", aten.exp),
    "log": (torch.log, "log", aten.log),
    "sqrt": (torch.sqrt, "sqrt", aten.sqrt),
    "rsqrt": (torch.rsqrt, "rsqrt", aten.rsqrt),
    "abs": (torch.abs, "abs", aten.abs),
    "negative": (torch.neg, torch.negative, operator.neg, "neg", aten.neg),
    "sin": (torch.sin, "sin", aten.sin),
    "cos": (torch.cos, "cos", aten.cos),
    "erf": (torch.erf, torch.special.erf, "erf", aten.erf),
    "logical_not": (torch.logical_not, "logical_not", aten.logical_not),
}.items():
    register(unary(_op_name), *_targets)


def gelu(ctx: Importer, x, approximate: str):
    return call(ctx, "nn.gelu_tanh" if approximate == "tanh" else "nn.gelu", x)


def _gelu(ctx: Importer, node: fx.Node):
    return gelu(ctx, first(ctx, node), ctx.arg(node, 1, "approximate", "none"))


def _leaky_relu(ctx: Importer, node: fx.Node):
    slope = ctx.arg(node, 1, "negative_slope", 0.01)
    return call(ctx, "nn.leaky_relu", first(ctx, node), slope)


def _hardtanh(ctx: Importer, node: fx.Node):
    lo, hi = ctx.arg(node, 1, "min_val", -1.0), ctx.arg(node, 2, "max_val", 1.0)
    return call(ctx, "clip", first(ctx, node), lo, hi)


def bitwise(op_name: str) -> Rule:
    """`~`, `&`, `|` on bool tensors (masks) are the logical ops."""

    def rule(ctx: Importer, node: fx.Node):
        args = [first(ctx, node)] + (
            [ctx.arg(node, 1, "other")] if op_name != "logical_not" else []
        )
        dtype = next(a.struct_info.dtype for a in args if is_tensor(a))
        if dtype != "bool":
            raise NotImplementedError(
                f"unsupported torch op '{target_name(node.target)}' on {dtype} at node '{node.name}'"
            )
        return emit_binary(ctx, op_name, *args) if len(args) == 2 else call(ctx, op_name, args[0])

    return rule


register(_gelu, F.gelu, aten.gelu)
register(_leaky_relu, F.leaky_relu, aten.leaky_relu)
register(_hardtanh, F.hardtanh, aten.hardtanh)
register(lambda ctx, node: call(ctx, "clip", first(ctx, node), 0.0, 6.0), F.relu6)
register(
    bitwise("logical_not"), operator.invert, torch.bitwise_not, "bitwise_not", aten.bitwise_not
)
register(bitwise("logical_and"), operator.and_, torch.bitwise_and, "bitwise_and", aten.bitwise_and)
register(bitwise("logical_or"), operator.or_, torch.bitwise_or, "bitwise_or", aten.bitwise_or)


# -- binary arithmetic and comparisons -----------------------------------------------------
def binary(op_name: str, swap: bool = False) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        lhs, rhs = first(ctx, node), ctx.arg(node, 1, ("other", "exponent"))
        if swap:
            lhs, rhs = rhs, lhs
        alpha = ctx.arg(node, 2, "alpha", 1) if op_name in ("add", "subtract") else 1
        if alpha != 1:
            rhs = emit_binary(ctx, "multiply", rhs, alpha) if is_tensor(rhs) else rhs * alpha
        return emit_binary(ctx, op_name, lhs, rhs)

    return rule


def _divide(ctx: Importer, node: fx.Node):
    lhs, rhs = first(ctx, node), ctx.arg(node, 1, "other")
    mode = ctx.arg(node, 2, "rounding_mode")
    if mode == "floor":
        return emit_binary(ctx, "floor_divide", lhs, rhs)
    lhs, rhs = binary_operands(ctx, lhs, rhs)
    if not lhs.struct_info.dtype.startswith(("float", "bfloat")):
        lhs, rhs = astype(ctx, lhs, "float32"), astype(ctx, rhs, "float32")
    out = call(ctx, "divide", lhs, rhs)
    if mode == "trunc":  # sign(q) * floor(|q|)
        out = call(
            ctx, "multiply", call(ctx, "sign", out), call(ctx, "floor", call(ctx, "abs", out))
        )
    return out


for _op_name, _targets in {
    "add": (torch.add, operator.add, operator.iadd, "add", "add_", aten.add),
    "subtract": (torch.sub, torch.subtract, operator.sub, operator.isub, "sub", aten.sub),
    "multiply": (torch.mul, torch.multiply, operator.mul, operator.imul, "mul", "mul_", aten.mul),
    "floor_divide": (torch.floor_divide, operator.floordiv, "floor_divide", aten.floor_divide),
    "power": (torch.pow, operator.pow, "pow", aten.pow),
    "maximum": (torch.maximum, aten.maximum),
    "minimum": (torch.minimum, aten.minimum),
    "equal": (torch.eq, operator.eq, "eq", aten.eq),
    "not_equal": (torch.ne, operator.ne, "ne", aten.ne),
    "less": (torch.lt, operator.lt, "lt", aten.lt),
    "less_equal": (torch.le, operator.le, "le", aten.le),
    "greater": (torch.gt, operator.gt, "gt", aten.gt),
    "greater_equal": (torch.ge, operator.ge, "ge", aten.ge),
    "logical_and": (torch.logical_and, "logical_and", aten.logical_and),
    "logical_or": (torch.logical_or, "logical_or", aten.logical_or),
}.items():
    register(binary(_op_name), *_targets)
register(binary("subtract", swap=True), aten.rsub)
register(
    _divide,
    torch.div,
    torch.divide,
    torch.true_divide,
    operator.truediv,
    operator.itruediv,
    "div",
    aten.div,
)


# -- where, masked_fill, clamp --------------------------------------------------------------
def where(ctx: Importer, cond, x, y):
    like = x if is_tensor(x) else y
    x, y = binary_operands(ctx, as_tensor(x, like), as_tensor(y, like))
    return call(ctx, "where", cond, x, y)


def _where(ctx: Importer, node: fx.Node):
    cond, x, y = (
        ctx.arg(node, 0, "condition"),
        ctx.arg(node, 1, ("input", "self")),
        ctx.arg(node, 2, "other"),
    )
    if x is None:
        raise NotImplementedError(f"torch.where(condition) (nonzero) at node '{node.name}'")
    return where(ctx, cond, x, y)


def _masked_fill(ctx: Importer, node: fx.Node):
    x, mask, value = first(ctx, node), ctx.arg(node, 1, "mask"), ctx.arg(node, 2, "value")
    return where(
        ctx,
        mask,
        as_tensor(value, x) if not is_tensor(value) else astype(ctx, value, x.struct_info.dtype),
        x,
    )


def _masked_fill_(ctx: Importer, node: fx.Node):
    """In-place: later uses of the tensor see the filled value."""
    out = _masked_fill(ctx, node)
    ctx.env[node.args[0]] = out
    return out


def _clamp(ctx: Importer, node: fx.Node):
    x, lo, hi = first(ctx, node), ctx.arg(node, 1, "min"), ctx.arg(node, 2, "max")
    if is_tensor(lo) or is_tensor(hi):
        x = emit_binary(ctx, "maximum", x, lo) if lo is not None else x
        return emit_binary(ctx, "minimum", x, hi) if hi is not None else x
    lo = float("-inf") if lo is None else lo
    hi = float("inf") if hi is None else hi
    return call(ctx, "clip", x, lo, hi)


register(_where, torch.where, aten.where)
register(_masked_fill, torch.masked_fill, "masked_fill", aten.masked_fill)
register(_masked_fill_, "masked_fill_")
register(_clamp, torch.clamp, torch.clip, "clamp", "clip", aten.clamp, aten.clip)
