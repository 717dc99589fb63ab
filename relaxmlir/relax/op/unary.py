"""Elementwise unary operators (`relax.op.exp`, `relax.op.clip`, `relax.op.astype`, ...)."""

from __future__ import annotations

from collections.abc import Callable

from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.op.common import check_float, is_float, make_call, scalar_value, tensor_sinfo
from relaxmlir.relax.struct_info import TensorStructInfo


def infer_unary(x: Expr, op: str, float_only: bool = False, dtype: str = "") -> TensorStructInfo:
    """Same shape as `x`; dtype `dtype` or x's own. Float-only ops reject integer tensors."""
    sinfo = tensor_sinfo(x, op)
    if float_only:
        check_float(sinfo, op)
    return TensorStructInfo(sinfo.shape, dtype or sinfo.dtype)


def unary_op(tvm_name: str, float_only: bool = False, doc: str = "") -> Callable[[Expr], Call]:
    """The `relax.op.<name>(x)` function of an attribute-less elementwise op."""

    def op(x: Expr) -> Call:
        return make_call(tvm_name, [x], {}, infer_unary(x, tvm_name, float_only))

    op.__name__ = tvm_name.rsplit(".", 1)[-1]
    op.__qualname__ = op.__name__
    op.__doc__ = (
        f"`{tvm_name}`: {doc}\n\nParameters\n----------\nx : Expr\n\nReturns\n-------\nCall"
    )
    return op


abs = unary_op("relax.abs", doc="elementwise absolute value")
negative = unary_op("relax.negative", doc="elementwise `-x`")
exp = unary_op("relax.exp", True, "elementwise `e**x`")
log = unary_op("relax.log", True, "elementwise natural logarithm")
sqrt = unary_op("relax.sqrt", True, "elementwise square root")
rsqrt = unary_op("relax.rsqrt", True, "elementwise `1 / sqrt(x)`")
sigmoid = unary_op("relax.sigmoid", True, "elementwise `1 / (1 + exp(-x))`")
tanh = unary_op("relax.tanh", True, "elementwise hyperbolic tangent")
erf = unary_op("relax.erf", True, "elementwise error function")
sin = unary_op("relax.sin", True, "elementwise sine")
cos = unary_op("relax.cos", True, "elementwise cosine")
floor = unary_op("relax.floor", doc="elementwise round toward -inf")
ceil = unary_op("relax.ceil", doc="elementwise round toward +inf")
round = unary_op("relax.round", doc="elementwise round half to even")
sign = unary_op("relax.sign", doc="elementwise sign (-1, 0, 1)")
square = unary_op("relax.square", doc="elementwise `x * x`")
trunc = unary_op("relax.trunc", doc="elementwise round toward zero")
log1p = unary_op("relax.log1p", True, "elementwise `log(1 + x)`, accurate near 0")
expm1 = unary_op("relax.expm1", True, "elementwise `exp(x) - 1`, accurate near 0")
log2 = unary_op("relax.log2", True, "elementwise base-2 logarithm")
log10 = unary_op("relax.log10", True, "elementwise base-10 logarithm")
tan = unary_op("relax.tan", True, "elementwise tangent")
asin = unary_op("relax.asin", True, "elementwise arcsine (NaN outside [-1, 1])")
acos = unary_op("relax.acos", True, "elementwise arccosine (NaN outside [-1, 1])")
atan = unary_op("relax.atan", True, "elementwise arctangent")
sinh = unary_op("relax.sinh", True, "elementwise hyperbolic sine")
cosh = unary_op("relax.cosh", True, "elementwise hyperbolic cosine")
asinh = unary_op("relax.asinh", True, "elementwise inverse hyperbolic sine")
acosh = unary_op("relax.acosh", True, "elementwise inverse hyperbolic cosine (NaN below 1)")
atanh = unary_op("relax.atanh", True, "elementwise inverse hyperbolic tangent")
exp2 = unary_op("relax.exp2", True, "elementwise `2**x`")


def predicate_op(tvm_name: str, doc: str) -> Callable[[Expr], Call]:
    """The `relax.op.<name>(x)` function of a float classification: a bool tensor of x's shape,
    for any dtype (an integer is never NaN or infinite, as in torch and TVM)."""

    def op(x: Expr) -> Call:
        return make_call(tvm_name, [x], {}, infer_unary(x, tvm_name, dtype="bool"))

    op.__name__ = tvm_name.rsplit(".", 1)[-1]
    op.__qualname__ = op.__name__
    op.__doc__ = (
        f"`{tvm_name}`: {doc}\n\nParameters\n----------\nx : Expr\n\nReturns\n-------\nCall"
    )
    return op


isnan = predicate_op("relax.isnan", "elementwise `x` is NaN")
isinf = predicate_op("relax.isinf", "elementwise `x` is +inf or -inf")
isfinite = predicate_op("relax.isfinite", "elementwise `x` is neither NaN nor infinite")


def logical_not(x: Expr) -> Call:
    """`relax.logical_not`: elementwise not of a bool tensor."""
    sinfo = tensor_sinfo(x, "relax.logical_not")
    if sinfo.dtype != "bool":
        raise TypeError(f"relax.logical_not: expected a bool tensor, got ({sinfo.dtype})")
    return make_call("relax.logical_not", [x], {}, sinfo)


def bitwise_not(x: Expr) -> Call:
    """`relax.bitwise_not`: elementwise `~x` of an integer or bool tensor."""
    sinfo = tensor_sinfo(x, "relax.bitwise_not")
    if is_float(sinfo.dtype):
        raise TypeError(
            f"relax.bitwise_not: expected an integer or bool tensor, got ({sinfo.dtype})"
        )
    return make_call("relax.bitwise_not", [x], {}, sinfo)


def clip(x: Expr, min, max) -> Call:
    """`relax.clip`: elementwise `min(max(x, min), max)`.

    Parameters
    ----------
    x : Expr
    min, max : float or int (or a 0-d relax constant)
        The bounds, converted to x's dtype.

    Returns
    -------
    Call
    """
    lo, hi = float(scalar_value(min)), float(scalar_value(max))
    return make_call("relax.clip", [x], {"min": lo, "max": hi}, infer_unary(x, "relax.clip"))


def astype(x: Expr, dtype: str) -> Call:
    """`relax.astype`: cast every element to `dtype`.

    Parameters
    ----------
    x : Expr
    dtype : str
        e.g. "float32", "int64", "bool".

    Returns
    -------
    Call
    """
    sinfo = infer_unary(x, "relax.astype", dtype=str(dtype))
    return make_call("relax.astype", [x], {"dtype": sinfo.dtype}, sinfo)
