"""Elementwise binary operators with numpy broadcasting (`relax.op.add`, `relax.op.less`, ...).

Both operands must have one dtype, as in TVM; a python scalar operand becomes a 0-d constant of
the other operand's dtype (`relax.op.multiply(x, 0.5)`).
"""

from __future__ import annotations

from collections.abc import Callable

from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.op.common import (
    as_tensor,
    broadcast_shapes,
    check_float,
    is_float,
    make_call,
    tensor_sinfo,
    unify_dtypes,
)
from relaxmlir.relax.struct_info import TensorStructInfo


def infer_binary(lhs: Expr, rhs: Expr, op: str, kind: str) -> TensorStructInfo:
    """Broadcast shape; dtype of the operands, or bool for comparisons and logical ops.

    `kind` is "arith", "float" (float-only arithmetic), "compare", "logical" or "bitwise"
    (integer or bool operands).
    """
    a, b = tensor_sinfo(lhs, op, "lhs"), tensor_sinfo(rhs, op, "rhs")
    dtype = unify_dtypes(op, a, b)
    if kind == "float":
        check_float(a, op, "lhs")
    if kind == "bitwise" and is_float(dtype):
        raise TypeError(f"{op}: expected integer or bool tensors, got ({dtype})")
    if kind == "logical" and dtype != "bool":
        raise TypeError(f"{op}: expected bool tensors, got ({dtype})")
    shape = broadcast_shapes([a.shape, b.shape], op)
    return TensorStructInfo(shape, "bool" if kind in ("compare", "logical") else dtype)


def _operands(lhs, rhs, op: str) -> tuple[Expr, Expr]:
    if not isinstance(lhs, Expr) and isinstance(rhs, Expr):
        lhs = as_tensor(lhs, tensor_sinfo(rhs, op, "rhs").dtype, op, "lhs")
    if not isinstance(rhs, Expr) and isinstance(lhs, Expr):
        rhs = as_tensor(rhs, tensor_sinfo(lhs, op, "lhs").dtype, op, "rhs")
    return as_tensor(lhs, "float32", op, "lhs"), as_tensor(rhs, "float32", op, "rhs")


def binary_op(tvm_name: str, kind: str = "arith", doc: str = "") -> Callable[[Expr, Expr], Call]:
    """The `relax.op.<name>(lhs, rhs)` function of a broadcasting binary op."""

    def op(lhs, rhs) -> Call:
        lhs, rhs = _operands(lhs, rhs, tvm_name)
        return make_call(tvm_name, [lhs, rhs], {}, infer_binary(lhs, rhs, tvm_name, kind))

    op.__name__ = tvm_name.rsplit(".", 1)[-1]
    op.__qualname__ = op.__name__
    op.__doc__ = (
        f"`{tvm_name}`: {doc} (numpy broadcasting).\n\nParameters\n----------\n"
        "lhs, rhs : Expr or scalar\n\nReturns\n-------\nCall"
    )
    return op


add = binary_op("relax.add", doc="`lhs + rhs`")
subtract = binary_op("relax.subtract", doc="`lhs - rhs`")
multiply = binary_op("relax.multiply", doc="`lhs * rhs`")
divide = binary_op("relax.divide", doc="`lhs / rhs` (truncating on integers)")
floor_divide = binary_op("relax.floor_divide", doc="`floor(lhs / rhs)`")
floor_mod = binary_op("relax.floor_mod", doc="`lhs - floor(lhs / rhs) * rhs`")
power = binary_op("relax.power", doc="`lhs ** rhs` (integers: wrapping, as torch)")
mod = binary_op("relax.mod", doc="`lhs - trunc(lhs / rhs) * rhs` (C's fmod: sign of `lhs`)")
atan2 = binary_op("relax.atan2", "float", "arctangent of `lhs / rhs` in the quadrant of (rhs, lhs)")
hypot = binary_op("relax.hypot", "float", "`sqrt(lhs**2 + rhs**2)` without overflow")
copysign = binary_op("relax.copysign", "float", "`|lhs|` with the sign bit of `rhs`")
maximum = binary_op("relax.maximum", doc="elementwise maximum")
minimum = binary_op("relax.minimum", doc="elementwise minimum")
equal = binary_op("relax.equal", "compare", "`lhs == rhs`")
not_equal = binary_op("relax.not_equal", "compare", "`lhs != rhs`")
less = binary_op("relax.less", "compare", "`lhs < rhs`")
less_equal = binary_op("relax.less_equal", "compare", "`lhs <= rhs`")
greater = binary_op("relax.greater", "compare", "`lhs > rhs`")
greater_equal = binary_op("relax.greater_equal", "compare", "`lhs >= rhs`")
logical_and = binary_op("relax.logical_and", "logical", "logical and")
logical_or = binary_op("relax.logical_or", "logical", "logical or")
logical_xor = binary_op("relax.logical_xor", "logical", "logical exclusive or")
bitwise_and = binary_op("relax.bitwise_and", "bitwise", "bitwise and")
bitwise_or = binary_op("relax.bitwise_or", "bitwise", "bitwise or")
bitwise_xor = binary_op("relax.bitwise_xor", "bitwise", "bitwise exclusive or")
