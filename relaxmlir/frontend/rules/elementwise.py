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
# float-only ops; torch computes them on integer tensors in float32
_FLOAT_ONLY = {
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "erf",
    "log1p",
    "expm1",
    "log2",
    "log10",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "exp2",
    "nn.silu",
}


def unary(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x = first(ctx, node)
        if op_name in _FLOAT_ONLY and not x.struct_info.dtype.startswith(("float", "bfloat")):
            x = astype(ctx, x, "float32")
        return call(ctx, op_name, x)

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
    "floor": (torch.floor, "floor", aten.floor),
    "ceil": (torch.ceil, "ceil", aten.ceil),
    "trunc": (torch.trunc, torch.fix, "trunc", "fix", aten.trunc, aten.fix),
    "sign": (torch.sign, torch.sgn, "sign", "sgn", aten.sign, aten.sgn),
    "square": (torch.square, "square", aten.square),
    "log1p": (torch.log1p, torch.special.log1p, "log1p", aten.log1p),
    "expm1": (torch.expm1, torch.special.expm1, "expm1", aten.expm1),
    "log2": (torch.log2, "log2", aten.log2),
    "log10": (torch.log10, "log10", aten.log10),
    "tan": (torch.tan, "tan", aten.tan),
    "asin": (torch.asin, torch.arcsin, "asin", "arcsin", aten.asin, aten.arcsin),
    "acos": (torch.acos, torch.arccos, "acos", "arccos", aten.acos, aten.arccos),
    "atan": (torch.atan, torch.arctan, "atan", "arctan", aten.atan, aten.arctan),
    "sinh": (torch.sinh, "sinh", aten.sinh),
    "cosh": (torch.cosh, "cosh", aten.cosh),
    "asinh": (torch.asinh, torch.arcsinh, "asinh", "arcsinh", aten.asinh, aten.arcsinh),
    "acosh": (torch.acosh, torch.arccosh, "acosh", "arccosh", aten.acosh, aten.arccosh),
    "atanh": (torch.atanh, torch.arctanh, "atanh", "arctanh", aten.atanh, aten.arctanh),
    "exp2": (torch.exp2, torch.special.exp2, "exp2", aten.exp2, aten.special_exp2),
    # float classification: bool results for any dtype (integers are never NaN or infinite)
    "isnan": (torch.isnan, "isnan", aten.isnan),
    "isinf": (torch.isinf, "isinf", aten.isinf),
    "isfinite": (torch.isfinite, "isfinite", aten.isfinite),
}.items():
    register(unary(_op_name), *_targets)


def _is_signed_inf(sign: float) -> Rule:
    """`isposinf` / `isneginf`: `x == sign * inf` (all false on integers, as `isinf`)."""

    def rule(ctx: Importer, node: fx.Node):
        x = first(ctx, node)
        if not x.struct_info.dtype.startswith(("float", "bfloat")):
            return call(ctx, "isinf", x)
        return emit_binary(ctx, "equal", x, sign * float("inf"))

    return rule


register(_is_signed_inf(1.0), torch.isposinf, "isposinf", aten.isposinf)
register(_is_signed_inf(-1.0), torch.isneginf, "isneginf", aten.isneginf)


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


def _round(ctx: Importer, node: fx.Node):
    """`torch.round(x, decimals=d)`: half to even of `x * 10**d`, scaled back."""
    x, decimals = first(ctx, node), ctx.arg(node, None, "decimals", 0)
    if not decimals:
        return call(ctx, "round", x)
    scaled = call(ctx, "round", emit_binary(ctx, "multiply", x, 10.0**decimals))
    return emit_binary(ctx, "divide", scaled, 10.0**decimals)


def _float(ctx: Importer, x):
    return x if x.struct_info.dtype.startswith(("float", "bfloat")) else astype(ctx, x, "float32")


def _reciprocal(ctx: Importer, node: fx.Node):
    x = _float(ctx, first(ctx, node))
    return emit_binary(ctx, "divide", as_tensor(1.0, x), x)


# -- activations decomposed into elementwise ops (the formulas of torch's CPU kernels) -------
def elu(ctx: Importer, x, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0):
    """`scale * (x if x > 0 else alpha * expm1(x * input_scale))` (also selu and celu)."""
    neg = call(
        ctx, "expm1", emit_binary(ctx, "multiply", x, input_scale) if input_scale != 1 else x
    )
    neg = emit_binary(ctx, "multiply", neg, alpha * scale)
    pos = emit_binary(ctx, "multiply", x, scale) if scale != 1 else x
    return where(ctx, emit_binary(ctx, "greater", x, 0.0), pos, neg)


def softplus(ctx: Importer, x, beta: float = 1.0, threshold: float = 20.0):
    """`log1p(exp(beta * x)) / beta`, and `x` where `beta * x > threshold`."""
    bx = emit_binary(ctx, "multiply", x, beta) if beta != 1 else x
    soft = call(ctx, "log1p", call(ctx, "exp", bx))
    soft = emit_binary(ctx, "divide", soft, beta) if beta != 1 else soft
    return where(ctx, emit_binary(ctx, "greater", bx, threshold), x, soft)


def _relu6_of_shifted(ctx: Importer, x):
    """`min(max(x + 3, 0), 6)`, shared by hardswish and hardsigmoid."""
    return call(ctx, "clip", emit_binary(ctx, "add", x, 3.0), 0.0, 6.0)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _activation(fn) -> Rule:
    """A rule applying `fn(ctx, x, *args)` to the node's input (float32 for integer input)."""

    def rule(ctx: Importer, node: fx.Node):
        return fn(ctx, _float(ctx, first(ctx, node)), node)

    return rule


register(
    _activation(lambda ctx, x, n: elu(ctx, x, ctx.arg(n, 1, "alpha", 1.0))),
    F.elu,
    "elu",
)
register(
    _activation(
        lambda ctx, x, n: elu(
            ctx,
            x,
            ctx.arg(n, 1, "alpha", 1.0),
            ctx.arg(n, 2, "scale", 1.0),
            ctx.arg(n, 3, "input_scale", 1.0),
        )
    ),
    aten.elu,
)
register(
    _activation(lambda ctx, x, n: elu(ctx, x, _SELU_ALPHA, _SELU_SCALE)),
    F.selu,
    torch.selu,
    aten.selu,
)
register(
    _activation(lambda ctx, x, n: elu(ctx, x, a := ctx.arg(n, 1, "alpha", 1.0), 1.0, 1.0 / a)),
    F.celu,
    torch.celu,
    aten.celu,
)
register(
    _activation(
        lambda ctx, x, n: softplus(
            ctx, x, ctx.arg(n, 1, "beta", 1.0), ctx.arg(n, 2, "threshold", 20.0)
        )
    ),
    F.softplus,
    aten.softplus,
)
register(
    _activation(
        lambda ctx, x, n: emit_binary(ctx, "multiply", x, call(ctx, "tanh", softplus(ctx, x)))
    ),
    F.mish,
    aten.mish,
)
register(
    _activation(
        lambda ctx, x, n: emit_binary(
            ctx, "divide", emit_binary(ctx, "multiply", x, _relu6_of_shifted(ctx, x)), 6.0
        )
    ),
    F.hardswish,
    aten.hardswish,
)
register(
    _activation(lambda ctx, x, n: emit_binary(ctx, "divide", _relu6_of_shifted(ctx, x), 6.0)),
    F.hardsigmoid,
    aten.hardsigmoid,
)
register(
    _activation(
        lambda ctx, x, n: emit_binary(
            ctx, "divide", x, emit_binary(ctx, "add", call(ctx, "abs", x), 1.0)
        )
    ),
    F.softsign,
)
register(
    _activation(
        lambda ctx, x, n: emit_binary(
            ctx,
            "subtract",
            emit_binary(ctx, "minimum", x, 0.0),
            call(ctx, "log1p", call(ctx, "exp", call(ctx, "negative", call(ctx, "abs", x)))),
        )
    ),
    F.logsigmoid,
    aten.log_sigmoid,
)
register(_round, torch.round, "round", aten.round)
register(_reciprocal, torch.reciprocal, "reciprocal", aten.reciprocal)


# bool tensors (masks): `~`, `&`, `|`, `^` are the logical ops
_ON_BOOL = {
    "bitwise_not": "logical_not",
    "bitwise_and": "logical_and",
    "bitwise_or": "logical_or",
    "bitwise_xor": "not_equal",
}


def bitwise(op_name: str) -> Rule:
    """`~`, `&`, `|`, `^`: bitwise on integers, logical on bool tensors."""

    def rule(ctx: Importer, node: fx.Node):
        args = [first(ctx, node)]
        if op_name != "bitwise_not":
            args = list(binary_operands(ctx, args[0], ctx.arg(node, 1, "other")))
        dtype = args[0].struct_info.dtype
        if dtype.startswith(("float", "bfloat")):
            name = target_name(node.target)
            raise NotImplementedError(
                f"unsupported torch op '{name}' on {dtype} at node '{node.name}'"
            )
        return call(ctx, _ON_BOOL[op_name] if dtype == "bool" else op_name, *args)

    return rule


register(_gelu, F.gelu, aten.gelu)
register(_leaky_relu, F.leaky_relu, aten.leaky_relu)


def _rrelu(ctx: Importer, node: fx.Node):
    """rrelu outside training: a leaky relu of the mean slope, (lower + upper) / 2. In training
    its slopes are random: refused. (`aten.rrelu_with_noise_functional` also returns the
    noise it would have drawn.)"""
    x = first(ctx, node)
    functional = "noise" in str(node.target)
    base = 2 if functional else 1
    lower = ctx.arg(node, base, "lower", 1.0 / 8)
    upper = ctx.arg(node, base + 1, "upper", 1.0 / 3)
    if ctx.arg(node, base + 2, "training", False):
        raise NotImplementedError(f"rrelu in training mode (random slopes) at node '{node.name}'")
    out = call(ctx, "nn.leaky_relu", x, (lower + upper) / 2)
    return (out, ctx.arg(node, 1, "noise")) if functional else out


register(_rrelu, F.rrelu, torch.rrelu, aten.rrelu, aten.rrelu_with_noise_functional)
register(_hardtanh, F.hardtanh, aten.hardtanh)
register(lambda ctx, node: call(ctx, "clip", first(ctx, node), 0.0, 6.0), F.relu6)
register(
    bitwise("bitwise_not"), operator.invert, torch.bitwise_not, "bitwise_not", aten.bitwise_not
)
register(bitwise("bitwise_and"), operator.and_, torch.bitwise_and, "bitwise_and", aten.bitwise_and)
register(bitwise("bitwise_or"), operator.or_, torch.bitwise_or, "bitwise_or", aten.bitwise_or)
register(bitwise("bitwise_xor"), operator.xor, torch.bitwise_xor, "bitwise_xor", aten.bitwise_xor)


def truth(ctx: Importer, x):
    """`x != 0` as a bool tensor (torch's logical ops take any dtype)."""
    if not is_tensor(x):
        return as_tensor(bool(x), dtype="bool")
    return x if x.struct_info.dtype == "bool" else emit_binary(ctx, "not_equal", x, 0)


def logical(op_name: str) -> Rule:
    """`logical_and/or/not` of the operands' truth values."""

    def rule(ctx: Importer, node: fx.Node):
        x = truth(ctx, first(ctx, node))
        if op_name == "logical_not":
            return call(ctx, op_name, x)
        return call(ctx, op_name, *binary_operands(ctx, x, truth(ctx, ctx.arg(node, 1, "other"))))

    return rule


register(logical("logical_not"), torch.logical_not, "logical_not", aten.logical_not)
register(logical("logical_and"), torch.logical_and, "logical_and", aten.logical_and)
register(logical("logical_or"), torch.logical_or, "logical_or", aten.logical_or)
register(logical("logical_xor"), torch.logical_xor, "logical_xor", aten.logical_xor)


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
    integral = not lhs.struct_info.dtype.startswith(("float", "bfloat"))
    if mode == "trunc" and integral and lhs.struct_info.dtype != "bool":
        return call(ctx, "divide", lhs, rhs)  # integer division truncates (C, torch)
    if integral:
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
    "floor_mod": (torch.remainder, operator.mod, "remainder", aten.remainder),
    "mod": (torch.fmod, "fmod", aten.fmod),  # C's fmod: the sign of the dividend
    "power": (torch.pow, operator.pow, "pow", aten.pow),
    "maximum": (torch.maximum, aten.maximum),
    "minimum": (torch.minimum, aten.minimum),
    "equal": (torch.eq, operator.eq, "eq", aten.eq),
    "not_equal": (torch.ne, operator.ne, "ne", aten.ne),
    "less": (torch.lt, operator.lt, "lt", aten.lt),
    "less_equal": (torch.le, operator.le, "le", aten.le),
    "greater": (torch.gt, operator.gt, "gt", aten.gt),
    "greater_equal": (torch.ge, operator.ge, "ge", aten.ge),
}.items():
    register(binary(_op_name), *_targets)
register(binary("subtract", swap=True), torch.rsub, aten.rsub)


def float_binary(op_name: str) -> Rule:
    """A float-only binary op; torch computes it on integer (and bool) operands in float32."""

    def rule(ctx: Importer, node: fx.Node):
        lhs, rhs = binary_operands(ctx, first(ctx, node), ctx.arg(node, 1, "other"))
        return call(ctx, op_name, _float(ctx, lhs), _float(ctx, rhs))

    return rule


for _op_name, _targets in {
    "atan2": (torch.atan2, torch.arctan2, "atan2", "arctan2", aten.atan2, aten.arctan2),
    "hypot": (torch.hypot, "hypot", aten.hypot),
    "copysign": (torch.copysign, "copysign", aten.copysign),  # .Tensor and .Scalar
}.items():
    register(float_binary(_op_name), *_targets)
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
    if not is_tensor(x) and not is_tensor(y):  # torch's dtype of two python scalars
        kinds = {type(v) for v in (x, y)}
        dtype = "float32" if float in kinds else "bool" if kinds == {bool} else "int64"
        x = as_tensor(x, dtype=dtype)
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
        as_tensor(value, dtype=x.struct_info.dtype)
        if not is_tensor(value)
        else astype(ctx, value, x.struct_info.dtype),
        x,
    )


def _clamp(ctx: Importer, node: fx.Node):
    x, lo, hi = first(ctx, node), ctx.arg(node, 1, "min"), ctx.arg(node, 2, "max")
    if is_tensor(lo) or is_tensor(hi):
        x = emit_binary(ctx, "maximum", x, lo) if lo is not None else x
        return emit_binary(ctx, "minimum", x, hi) if hi is not None else x
    if not x.struct_info.dtype.startswith(("float", "bfloat")) and (lo is None or hi is None):
        # one bound on integers: no infinity stands in for the other (torch promotes to float
        # for a float bound, as the binary ops do)
        x = emit_binary(ctx, "maximum", x, lo) if lo is not None else x
        return emit_binary(ctx, "minimum", x, hi) if hi is not None else x
    lo = float("-inf") if lo is None else lo
    hi = float("inf") if hi is None else hi
    return call(ctx, "clip", x, lo, hi)


register(_where, torch.where, aten.where)
register(_masked_fill, torch.masked_fill, "masked_fill", aten.masked_fill)
register(_masked_fill, "masked_fill_")  # in place: Importer.translate rebinds x
register(_clamp, torch.clamp, torch.clip, "clamp", "clip", aten.clamp, aten.clip)
