"""Tensor creation: `full`, `full_like`, `ones`, `zeros`, `ones_like`, `zeros_like`, `arange`,
`tril`, `triu`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.op.common import Dim, make_call, scalar_const, scalar_value, tensor_sinfo
from relaxmlir.relax.struct_info import TensorStructInfo, normalize_dim


def _fill(fill_value, dtype: str | None, op: str) -> tuple[Expr, str]:
    if isinstance(fill_value, Expr):
        sinfo = tensor_sinfo(fill_value, op, "fill_value")
        if sinfo.shape not in ((), (1,)):
            raise ValueError(f"{op}: fill_value must be a 0-d tensor, got shape {sinfo.shape}")
        return fill_value, dtype or sinfo.dtype
    value = np.asarray(scalar_value(fill_value))
    dtype = dtype or ("float32" if value.dtype.kind == "f" else str(value.dtype))
    return scalar_const(value, dtype), dtype


def full(shape: Sequence[Dim], fill_value, dtype: str | None = None) -> Call:
    """`relax.full`: a tensor of `shape` filled with `fill_value` (a scalar or 0-d tensor).

    Parameters
    ----------
    shape : tuple of int or str
    fill_value : Expr or number
    dtype : str, optional
        Defaults to fill_value's dtype.

    Returns
    -------
    Call
    """
    op = "relax.full"
    value, dtype = _fill(fill_value, dtype, op)
    dims = [normalize_dim(d) for d in shape]
    return make_call(op, [value], {"shape": dims, "dtype": dtype}, TensorStructInfo(dims, dtype))


def full_like(x: Expr, fill_value, dtype: str | None = None) -> Call:
    """`relax.full_like`: a tensor shaped like `x` filled with `fill_value`, in `dtype` or x's."""
    op = "relax.full_like"
    sinfo = tensor_sinfo(x, op)
    value, _ = _fill(fill_value, dtype or sinfo.dtype, op)
    out = TensorStructInfo(sinfo.shape, dtype or sinfo.dtype)
    return make_call(op, [x, value], {"dtype": out.dtype}, out)


def _constant_op(name: str, shape: Sequence[Dim], dtype: str) -> Call:
    dims = [normalize_dim(d) for d in shape]
    sinfo = TensorStructInfo(dims, dtype)
    return make_call(name, [], {"shape": dims, "dtype": sinfo.dtype}, sinfo)


def zeros(shape: Sequence[Dim], dtype: str = "float32") -> Call:
    """`relax.zeros`: a tensor of `shape` filled with 0."""
    return _constant_op("relax.zeros", shape, dtype)


def ones(shape: Sequence[Dim], dtype: str = "float32") -> Call:
    """`relax.ones`: a tensor of `shape` filled with 1."""
    return _constant_op("relax.ones", shape, dtype)


def zeros_like(x: Expr, dtype: str | None = None) -> Call:
    """`relax.zeros_like`: zeros shaped like `x` (a `full_like` here)."""
    return full_like(x, 0, dtype)


def ones_like(x: Expr, dtype: str | None = None) -> Call:
    """`relax.ones_like`: ones shaped like `x` (a `full_like` here)."""
    return full_like(x, 1, dtype)


def arange(
    start: float, end: float | None = None, step: float = 1, dtype: str | None = None
) -> Call:
    """`relax.arange`: `start, start + step, ...` below `end` (numpy arange).

    Parameters
    ----------
    start, end, step : int or float
        `arange(n)` counts from 0 to n - 1. `end` may be a symbolic dim (`"n"`, `"n+1"`) with
        an int `start` and a positive int `step`; it is assumed to be at least `start`.
    dtype : str, optional
        Defaults to int64 for integer bounds, float32 otherwise.

    Returns
    -------
    Call
    """
    if end is None:
        start, end = 0, start
    if isinstance(end, str):
        return _symbolic_arange(start, end, step, dtype)
    start, end, step = (scalar_value(v) for v in (start, end, step))
    if step == 0:
        raise ValueError("relax.arange: step must be non-zero")
    ints = all(isinstance(v, int) for v in (start, end, step))
    dtype = dtype or ("int64" if ints else "float32")
    n = max(0, math.ceil((end - start) / step))
    attrs = {"start": start, "end": end, "step": step, "dtype": dtype}
    return make_call("relax.arange", [], attrs, TensorStructInfo([n], dtype))


def _symbolic_arange(start, end: str, step, dtype: str | None) -> Call:
    """arange up to a symbolic `end`: length `end - start` rounded up to whole steps."""
    end = normalize_dim(end)
    if not (isinstance(start, int) and isinstance(step, int) and step > 0):
        raise NotImplementedError(
            f"relax.arange: a symbolic end ({end}) needs an int start and a positive int step, "
            f"got start={start!r}, step={step!r}"
        )
    if step == 1:
        n = end if start == 0 else f"({end})-{start}"
    else:
        n = f"(({end})-{start}+{step - 1})//{step}"
    dtype = dtype or "int64"
    attrs = {"start": start, "end": end, "step": step, "dtype": dtype}
    return make_call("relax.arange", [], attrs, TensorStructInfo([n], dtype))


def _trilu(name: str, x: Expr, k: int) -> Call:
    sinfo = tensor_sinfo(x, name)
    if sinfo.ndim < 2:
        raise ValueError(f"{name}: expected rank >= 2, got ({sinfo.ndim})")
    return make_call(name, [x], {"k": int(k)}, sinfo)


def tril(x: Expr, k: int = 0) -> Call:
    """`relax.tril`: keep elements on and below the `k`-th diagonal of the last two axes."""
    return _trilu("relax.tril", x, k)


def triu(x: Expr, k: int = 0) -> Call:
    """`relax.triu`: keep elements on and above the `k`-th diagonal of the last two axes."""
    return _trilu("relax.triu", x, k)
