"""Matrix products written with `te`: `topi.nn.dense` (x @ w.T) and `topi.matmul` (numpy)."""

from __future__ import annotations

from relaxmlir import te
from relaxmlir.topi.broadcast import broadcast_shape


def dense(
    data: te.Tensor, weight: te.Tensor, bias: te.Tensor | None = None, out_dtype: str | None = None
) -> te.Tensor:
    """`data @ weight.T (+ bias)` for 2-D `data (M, K)` and `weight (N, K)`."""
    out_dtype = out_dtype or data.dtype
    k = te.reduce_axis((0, data.shape[1]), name="k")

    def body(i, j):
        return te.sum(te.cast(data[i, k], out_dtype) * te.cast(weight[j, k], out_dtype), axis=k)

    out = te.compute((data.shape[0], weight.shape[0]), body, name="T_dense")
    if bias is None:
        return out
    return te.compute(out.shape, lambda i, j: out[i, j] + te.cast(bias[j], out_dtype), name="T_add")


def matmul(
    a: te.Tensor,
    b: te.Tensor,
    transpose_a: bool = False,
    transpose_b: bool = False,
    out_dtype: str | None = None,
) -> te.Tensor:
    """numpy matmul: batch dims broadcast; a 1-D `a` is a row, a 1-D `b` a column, and the
    result drops those unit axes. `transpose_*` swap the last two axes of a >= 2-D operand."""
    out_dtype = out_dtype or a.dtype
    a_rows = a.shape[-1] if transpose_a and a.ndim > 1 else (a.shape[-2] if a.ndim > 1 else 1)
    red = a.shape[-2] if transpose_a and a.ndim > 1 else a.shape[-1]
    b_cols = b.shape[-2] if transpose_b and b.ndim > 1 else (b.shape[-1] if b.ndim > 1 else 1)
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    k = te.reduce_axis((0, red), name="k")
    nb = len(batch)

    def operand(t, lead, row_col, transpose):
        idx = list(lead[len(lead) - (t.ndim - 2) :]) if t.ndim > 2 else []
        idx = [0 if isinstance(d, int) and d == 1 else v for d, v in zip(t.shape[:-2], idx)]
        if t.ndim == 1:
            return t[k]
        pair = row_col[::-1] if transpose else row_col
        return t[tuple(idx) + tuple(pair)]

    def body(*i):
        lead = i[:nb]
        row = i[nb] if a.ndim > 1 else 0
        col = i[-1] if b.ndim > 1 else 0
        x = operand(a, lead, (row, k), transpose_a)
        y = operand(b, lead, (k, col), transpose_b)
        return te.sum(te.cast(x, out_dtype) * te.cast(y, out_dtype), axis=k)

    shape = list(batch) + ([a_rows] if a.ndim > 1 else []) + ([b_cols] if b.ndim > 1 else [])
    return te.compute(shape, body, name="T_matmul")
