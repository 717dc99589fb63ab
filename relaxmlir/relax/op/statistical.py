"""Reductions over axes: `relax.op.sum/mean/max/min/prod/variance/std`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.op.common import check_float, make_call, normalize_axes, tensor_sinfo
from relaxmlir.relax.op.unary import sqrt
from relaxmlir.relax.struct_info import TensorStructInfo

Axis = int | Sequence[int] | None


def infer_reduce(x: Expr, axis: Axis, keepdims: bool, op: str, float_only: bool) -> tuple:
    """(attrs, struct info): the reduced axes resolved (None = all), dropped or kept as 1."""
    sinfo = tensor_sinfo(x, op)
    if float_only:
        check_float(sinfo, op)
    axes = normalize_axes(axis, sinfo.ndim, op)
    shape = [1 if i in axes else d for i, d in enumerate(sinfo.shape) if keepdims or i not in axes]
    attrs = {"axis": axes, "keepdims": bool(keepdims)}
    return attrs, TensorStructInfo(shape, sinfo.dtype)


def reduce_op(tvm_name: str, float_only: bool = False, doc: str = "") -> Callable[..., Call]:
    """The `relax.op.<name>(x, axis=None, keepdims=False)` function of a reduction."""

    def op(x: Expr, axis: Axis = None, keepdims: bool = False) -> Call:
        attrs, sinfo = infer_reduce(x, axis, keepdims, tvm_name, float_only)
        return make_call(tvm_name, [x], attrs, sinfo)

    op.__name__ = tvm_name.rsplit(".", 1)[-1]
    op.__qualname__ = op.__name__
    op.__doc__ = (
        f"`{tvm_name}`: {doc} over `axis` (all axes when None).\n\nParameters\n"
        "----------\nx : Expr\naxis : int, list of int or None\nkeepdims : bool\n"
        "    Keep reduced axes as size 1.\n\nReturns\n-------\nCall"
    )
    return op


sum = reduce_op("relax.sum", doc="sum")
mean = reduce_op("relax.mean", True, "arithmetic mean")
max = reduce_op("relax.max", doc="maximum")
min = reduce_op("relax.min", doc="minimum")
prod = reduce_op("relax.prod", doc="product")
variance = reduce_op("relax.variance", True, "population variance (divisor n)")


def std(x: Expr, axis: Axis = None, keepdims: bool = False) -> Call:
    """`relax.std`: population standard deviation, `sqrt(variance(x, axis, keepdims))`."""
    return sqrt(variance(x, axis, keepdims))
