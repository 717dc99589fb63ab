"""Linear algebra: `relax.op.matmul` and `relax.op.linear` (composed, as in TVM)."""

from __future__ import annotations

from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.op.binary import add
from relaxmlir.relax.op.common import (
    broadcast_shapes,
    make_call,
    same_dim,
    tensor_sinfo,
    unify_dtypes,
)
from relaxmlir.relax.op.manipulate import permute_dims
from relaxmlir.relax.struct_info import TensorStructInfo


def infer_matmul(x1: Expr, x2: Expr, out_dtype: str | None, op: str) -> TensorStructInfo:
    """numpy matmul: `(..., n, k) @ (..., k, m) -> (broadcast(...), n, m)`; 1-D operands get a
    unit axis prepended (x1) or appended (x2) that the result drops."""
    a, b = tensor_sinfo(x1, op, "x1"), tensor_sinfo(x2, op, "x2")
    dtype = unify_dtypes(op, a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"{op}: operands must have rank >= 1, got ({a.ndim}) and ({b.ndim})")
    sa = (1,) + a.shape if a.ndim == 1 else a.shape
    sb = b.shape + (1,) if b.ndim == 1 else b.shape
    if not same_dim(sa[-1], sb[-2]):
        raise ValueError(
            f"{op}: reduction dims differ: x1 {a.shape} vs x2 {b.shape} ({sa[-1]} vs {sb[-2]})"
        )
    batch = broadcast_shapes([sa[:-2], sb[:-2]], op)
    shape = list(batch) + ([sa[-2]] if a.ndim > 1 else []) + ([sb[-1]] if b.ndim > 1 else [])
    return TensorStructInfo(shape, out_dtype or dtype)


def matmul(x1: Expr, x2: Expr, out_dtype: str | None = None) -> Call:
    """`relax.matmul`: numpy matrix product with batch broadcasting.

    Parameters
    ----------
    x1, x2 : Expr
        Tensors of one dtype, rank >= 1.
    out_dtype : str, optional
        Accumulate and return in this dtype (default: the operands' dtype).

    Returns
    -------
    Call

    Examples
    --------
    >>> relax.op.matmul(x, w)  # ("n", 784) x (784, 128) -> ("n", 128)
    """
    sinfo = infer_matmul(x1, x2, out_dtype, "relax.matmul")
    return make_call("relax.matmul", [x1, x2], {"out_dtype": sinfo.dtype}, sinfo)


def linear(
    data: Expr, weight: Expr, bias: Expr | None = None, out_dtype: str | None = None
) -> Expr:
    """`relax.op.linear`: `data @ weight.T + bias` (torch.nn.Linear's layout).

    Parameters
    ----------
    data : Expr
        `(..., in_features)`.
    weight : Expr
        `(out_features, in_features)`.
    bias : Expr, optional
        `(out_features,)`.

    Returns
    -------
    Expr
        A nested call (permute_dims, matmul, add), as TVM builds it.
    """
    out = matmul(data, permute_dims(weight), out_dtype)
    return add(out, bias) if bias is not None else out
