"""Selection, search and scan operators: `where`, `argmax`/`argmin`, `argsort`, `cumsum`."""

from __future__ import annotations

from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.op.common import (
    INT_DTYPES,
    as_tensor,
    broadcast_shapes,
    make_call,
    normalize_axis,
    tensor_sinfo,
    unify_dtypes,
)
from relaxmlir.relax.struct_info import TensorStructInfo


def where(condition: Expr, x1, x2) -> Call:
    """`relax.where`: `x1` where `condition` holds, else `x2`; all three broadcast.

    Parameters
    ----------
    condition : Expr
        A bool tensor.
    x1, x2 : Expr or scalar
        Tensors of one dtype (a scalar takes the other's dtype).

    Returns
    -------
    Call
    """
    op = "relax.where"
    cond = tensor_sinfo(condition, op, "condition")
    if cond.dtype != "bool":
        raise TypeError(f"{op}: expected a bool condition, got ({cond.dtype})")
    if not isinstance(x1, Expr) and isinstance(x2, Expr):
        x1 = as_tensor(x1, tensor_sinfo(x2, op, "x2").dtype, op, "x1")
    x1 = as_tensor(x1, "float32", op, "x1")
    x2 = as_tensor(x2, tensor_sinfo(x1, op, "x1").dtype, op, "x2")
    a, b = tensor_sinfo(x1, op, "x1"), tensor_sinfo(x2, op, "x2")
    dtype = unify_dtypes(op, a, b)
    shape = broadcast_shapes([cond.shape, a.shape, b.shape], op)
    return make_call(op, [condition, x1, x2], {}, TensorStructInfo(shape, dtype))


def infer_arg_reduce(x: Expr, axis: int | None, keepdims: bool, op: str) -> tuple:
    """(attrs, struct info): int64 indices; axis None flattens x (result rank 0 or all ones)."""
    sinfo = tensor_sinfo(x, op)
    if axis is None:
        shape = (1,) * sinfo.ndim if keepdims else ()
        return {"axis": [], "keepdims": bool(keepdims)}, TensorStructInfo(shape, "int64")
    ax = normalize_axis(axis, sinfo.ndim, op)
    shape = list(sinfo.shape)
    if keepdims:
        shape[ax] = 1
    else:
        del shape[ax]
    return {"axis": [ax], "keepdims": bool(keepdims)}, TensorStructInfo(shape, "int64")


def argmax(x: Expr, axis: int | None = None, keepdims: bool = False) -> Call:
    """`relax.argmax`: int64 index of the first maximum along `axis` (of flattened x if None)."""
    attrs, sinfo = infer_arg_reduce(x, axis, keepdims, "relax.argmax")
    return make_call("relax.argmax", [x], attrs, sinfo)


def argmin(x: Expr, axis: int | None = None, keepdims: bool = False) -> Call:
    """`relax.argmin`: int64 index of the first minimum along `axis` (of flattened x if None)."""
    attrs, sinfo = infer_arg_reduce(x, axis, keepdims, "relax.argmin")
    return make_call("relax.argmin", [x], attrs, sinfo)


def argsort(x: Expr, axis: int = -1, descending: bool = False, dtype: str = "int64") -> Call:
    """`relax.argsort`: the indices that sort `x` along `axis` (stable: ties keep their order).

    NaN sorts above every number (last ascending, first descending), as in torch and numpy.

    Parameters
    ----------
    x : Expr
    axis : int, default -1
    descending : bool
    dtype : str, default "int64"

    Returns
    -------
    Call
    """
    op = "relax.argsort"
    sinfo = tensor_sinfo(x, op)
    if dtype not in INT_DTYPES:
        raise TypeError(f"{op}: expected an integer index dtype, got ({dtype})")
    attrs = {
        "axis": normalize_axis(axis, sinfo.ndim, op),
        "descending": bool(descending),
        "dtype": dtype,
    }
    return make_call(op, [x], attrs, TensorStructInfo(sinfo.shape, dtype))


def cumsum(
    x: Expr, axis: int | None = None, dtype: str | None = None, exclusive: bool = False
) -> Call:
    """`relax.cumsum`: running sums along `axis` (of the flattened x when None).

    Parameters
    ----------
    x : Expr
    axis : int, optional
    dtype : str, optional
        Accumulation and result dtype; x's own by default.
    exclusive : bool
        Each element is the sum of the elements before it (0 first).

    Returns
    -------
    Call
    """
    op = "relax.cumsum"
    if axis is None:
        from relaxmlir.relax.op.manipulate import flatten

        return cumsum(flatten(x), 0, dtype, exclusive)
    sinfo = tensor_sinfo(x, op)
    dtype = str(dtype or sinfo.dtype)
    attrs = {
        "axis": normalize_axis(axis, sinfo.ndim, op),
        "dtype": dtype,
        "exclusive": bool(exclusive),
    }
    return make_call(op, [x], attrs, TensorStructInfo(sinfo.shape, dtype))
