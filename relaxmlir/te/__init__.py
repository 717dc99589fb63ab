"""Tensor expressions (TVM's `tvm.te`): describe computations, lower them to linalg PrimFuncs."""

from relaxmlir.te.expr import (
    Expr, IterVar, Var, abs, acos, acosh, all, any, asin, asinh, atan, atan2, atanh, cast, ceil,
    const, copysign, cos, cosh, erf, exp, exp2, floor, floordiv, floormod, if_then_else,
    indexdiv, indexmod, isfinite, isinf, isnan, log, log1p, log2, log10, pow, power, round, rsqrt,
    sigmoid, sin, sinh, size_var, sqrt, tan, tanh, trunc, truncdiv, truncmod, var,
)
from relaxmlir.te.prim_func import PrimFunc, create_prim_func
from relaxmlir.te.tensor import Tensor, compute, max, min, placeholder, reduce_axis, sum

__all__ = [
    "Expr", "IterVar", "PrimFunc", "Tensor", "Var", "abs", "acos", "acosh", "all", "any", "asin",
    "asinh", "atan", "atan2", "atanh", "cast", "ceil", "compute", "const", "copysign", "cos",
    "cosh", "create_prim_func", "erf", "exp", "exp2", "floor", "floordiv", "floormod",
    "if_then_else", "indexdiv", "indexmod", "isfinite", "isinf", "isnan", "log", "log1p", "log2",
    "log10", "max", "min", "placeholder", "pow", "power", "reduce_axis", "round", "rsqrt",
    "sigmoid", "sin", "sinh", "size_var", "sqrt", "sum", "tan", "tanh", "trunc", "truncdiv",
    "truncmod", "var",
]
