"""Elementwise unary operators written with `te`: `topi.exp`, `topi.clip`, `topi.cast`, ..."""

from __future__ import annotations

from collections.abc import Callable

from relaxmlir import te
from relaxmlir.te import expr as E


def unary(name: str, fn: Callable) -> Callable[[te.Tensor], te.Tensor]:
    def op(x: te.Tensor) -> te.Tensor:
        return te.compute(x.shape, lambda *i: fn(x(*i)), name=f"T_{name}")

    op.__name__ = name
    op.__doc__ = f"`topi.{name}(x)`, elementwise."
    return op


def _sign(v: E.Expr) -> E.Expr:
    zero, one = te.const(0, v.dtype), te.const(1, v.dtype)
    return te.if_then_else(v > zero, one, te.if_then_else(v < zero, -one, zero))


def _expm1(v: E.Expr) -> E.Expr:
    """Kahan's `(u - 1) * x / log(u)` with `u = exp(x)`: the rounding error of `u` cancels, so
    small x keep their digits (te has no expm1 intrinsic)."""
    one = te.const(1, v.dtype)
    u = te.exp(v)
    um1 = u - one
    exact = um1 * v / te.log(u)
    inf = te.const(float("inf"), v.dtype)
    return te.if_then_else(
        u == one, v, te.if_then_else(um1 == -one, -one, te.if_then_else(u == inf, u, exact))
    )


def _log1p(v: E.Expr) -> E.Expr:
    """Goldberg's `log(u) * x / (u - 1)` with `u = 1 + x`: exact where `1 + x` rounds (the
    intrinsic lowers to `log(1 + x)`, which loses every digit below float epsilon)."""
    one = te.const(1, v.dtype)
    u = v + one
    inf = te.const(float("inf"), v.dtype)
    return te.if_then_else(
        u == one, v, te.if_then_else(u == inf, u, te.log(u) * v / (u - one))
    )


abs = unary("abs", te.abs)
negative = unary("negative", lambda v: -v)
exp = unary("exp", te.exp)
log = unary("log", te.log)
sqrt = unary("sqrt", te.sqrt)
rsqrt = unary("rsqrt", te.rsqrt)
sigmoid = unary("sigmoid", te.sigmoid)
tanh = unary("tanh", te.tanh)
erf = unary("erf", te.erf)
sin = unary("sin", te.sin)
cos = unary("cos", te.cos)
floor = unary("floor", te.floor)
ceil = unary("ceil", te.ceil)
round = unary("round", te.round)
sign = unary("sign", _sign)
square = unary("square", lambda v: v * v)
trunc = unary("trunc", te.trunc)
log1p = unary("log1p", _log1p)
expm1 = unary("expm1", _expm1)
log2 = unary("log2", te.log2)
log10 = unary("log10", te.log10)
tan = unary("tan", te.tan)
asin = unary("asin", te.asin)
acos = unary("acos", te.acos)
atan = unary("atan", te.atan)
sinh = unary("sinh", te.sinh)
cosh = unary("cosh", te.cosh)
asinh = unary("asinh", te.asinh)
acosh = unary("acosh", te.acosh)
atanh = unary("atanh", te.atanh)
exp2 = unary("exp2", te.exp2)
isnan = unary("isnan", te.isnan)
isinf = unary("isinf", te.isinf)
isfinite = unary("isfinite", te.isfinite)
bitwise_not = unary("bitwise_not", lambda v: ~v)
logical_not = unary("logical_not", lambda v: v == te.const(0, v.dtype))  # also on int8 0/1 bools


def clip(x: te.Tensor, a_min: float, a_max: float) -> te.Tensor:
    """`min(max(x, a_min), a_max)`, the bounds converted to x's dtype."""

    def fn(v: E.Expr) -> E.Expr:
        lo, hi = te.const(a_min, v.dtype), te.const(a_max, v.dtype)
        return te.min(te.max(v, lo), hi)

    return te.compute(x.shape, lambda *i: fn(x(*i)), name="T_clip")


def cast(x: te.Tensor, dtype: str) -> te.Tensor:
    """Elementwise conversion to `dtype`."""
    return te.compute(x.shape, lambda *i: te.cast(x(*i), dtype), name="T_cast")
