"""Broadcasting elementwise operators (numpy rules) written with `te`: `topi.add`, `topi.less`, ..."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from relaxmlir import te
from relaxmlir.te.tensor import dim_key

Operand = te.Tensor | int | float


def broadcast_shape(*shapes: Sequence) -> tuple:
    """numpy broadcasting; a static 1 yields to the other dim, other dims must agree."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        dims = [s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0]
        result = 1
        for d in dims:
            if isinstance(d, int) and d == 1:
                continue
            if isinstance(result, int) and result == 1:
                result = d
            elif dim_key(result) != dim_key(d):
                raise ValueError(f"topi: shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(result)
    return tuple(out)


def broadcast_index(t: te.Tensor, index: Sequence) -> tuple:
    """Index of `t` read at output `index`: leading dims dropped, static size-1 dims at 0."""
    index = list(index)[len(index) - t.ndim :]
    return tuple(0 if isinstance(d, int) and d == 1 else i for d, i in zip(t.shape, index))


def read(x: Operand, index: Sequence) -> Any:
    """`x` at the broadcast `index`; python scalars are themselves."""
    return x[broadcast_index(x, index)] if isinstance(x, te.Tensor) else x


def elementwise(name: str, fn: Callable, *args: Operand) -> te.Tensor:
    """`fn` applied to the broadcast elements of `args` (tensors or scalars)."""
    shape = broadcast_shape(*[a.shape for a in args if isinstance(a, te.Tensor)])
    return te.compute(shape, lambda *i: fn(*[read(a, i) for a in args]), name=name)


def binary(name: str, fn: Callable) -> Callable[[Operand, Operand], te.Tensor]:
    def op(lhs: Operand, rhs: Operand) -> te.Tensor:
        return elementwise(f"T_{name}", fn, lhs, rhs)

    op.__name__ = name
    op.__doc__ = f"`topi.{name}(lhs, rhs)` with numpy broadcasting."
    return op


add = binary("add", lambda a, b: a + b)
subtract = binary("subtract", lambda a, b: a - b)
multiply = binary("multiply", lambda a, b: a * b)
divide = binary("divide", lambda a, b: a / b)
floor_divide = binary("floor_divide", te.floordiv)
floor_mod = binary("floor_mod", te.floormod)
power = binary("power", te.power)
mod = binary("mod", te.truncmod)  # C's fmod on floats: the sign of the dividend
atan2 = binary("atan2", te.atan2)
copysign = binary("copysign", te.copysign)
maximum = binary("maximum", te.max)
minimum = binary("minimum", te.min)
equal = binary("equal", lambda a, b: a == b)
not_equal = binary("not_equal", lambda a, b: a != b)
less = binary("less", lambda a, b: a < b)
less_equal = binary("less_equal", lambda a, b: a <= b)
greater = binary("greater", lambda a, b: a > b)
greater_equal = binary("greater_equal", lambda a, b: a >= b)
# NOTE: bool tensors are bytes at the graph level, so a bool input may arrive as int8 0/1
logical_and = binary("logical_and", lambda a, b: te.all(truth(a), truth(b)))
logical_or = binary("logical_or", lambda a, b: te.any(truth(a), truth(b)))
logical_xor = binary("logical_xor", lambda a, b: truth(a) != truth(b))
bitwise_and = binary("bitwise_and", lambda a, b: a & b)
bitwise_or = binary("bitwise_or", lambda a, b: a | b)
bitwise_xor = binary("bitwise_xor", lambda a, b: a ^ b)


def _hypot(a, b):
    """`sqrt(a*a + b*b)` in float64 for 32-bit (and narrower) floats, where the squares neither
    overflow nor lose digits (glibc's hypotf); float64 scales by the larger magnitude. Infinite
    wins over NaN, as in C."""
    dtype = a.dtype
    inf = te.const(float("inf"), dtype)
    if dtype != "float64":
        wa, wb = (te.cast(te.cast(v, "float32"), "float64") for v in (a, b))
        out = te.cast(te.cast(te.sqrt(wa * wa + wb * wb), "float32"), dtype)
    else:
        big, small = te.max(te.abs(a), te.abs(b)), te.min(te.abs(a), te.abs(b))
        ratio = small / big
        one = te.const(1.0, dtype)
        scaled = big * te.sqrt(one + ratio * ratio)
        out = te.if_then_else(big == te.const(0.0, dtype), big, scaled)
    return te.if_then_else(te.any(te.isinf(a), te.isinf(b)), inf, out)


hypot = binary("hypot", _hypot)


def truth(v):
    """`v != 0` as a bool expression (bool tensors may be read as their int8 storage)."""
    return v if v.dtype == "bool" else v != te.const(0, v.dtype)


def where(condition: te.Tensor, x1: Operand, x2: Operand) -> te.Tensor:
    """`x1` where `condition`, else `x2` (all broadcast)."""
    return elementwise("T_where", te.if_then_else, condition, x1, x2)
