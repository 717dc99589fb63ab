"""Linear-algebra rules composed of relax reductions and indexing: vector norms and what torch
builds of them (normalize, cosine_similarity, pairwise_distance, cdist), the vector and simple
matrix forms of linalg.norm, and diagonal/diag/trace."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Importer, dtype_str, register
from relaxmlir.frontend.rules.common import (
    F,
    as_tensor,
    astype,
    aten,
    axis,
    binary_operands,
    call,
    emit_binary,
    first,
    ndim,
    shape_of,
)
from relaxmlir.frontend.rules.reduction import reduce
from relaxmlir.frontend.rules.shape import broadcast_to, flatten, permute, squeeze
from relaxmlir.relax.expr import const
from relaxmlir.relax.op.common import broadcast_shapes

# a norm's input may be cast to one of these, in this order, without narrowing (torch's check)
_FLOAT_ORDER = {"float16": 0, "bfloat16": 0, "float32": 1, "float64": 2}


def _norm_dtype(x, dtype, op: str) -> str:
    """The dtype a norm computes and returns in; integer inputs are refused as torch does."""
    src = x.struct_info.dtype
    if src not in _FLOAT_ORDER:
        raise TypeError(f"{op}: expected a floating point tensor as input, got {src}")
    if dtype is None:
        return src
    dtype = dtype_str(dtype)
    if dtype not in _FLOAT_ORDER:
        raise TypeError(f"{op}: dtype= must be a floating point type, got {dtype}")
    if dtype != src and _FLOAT_ORDER[dtype] <= _FLOAT_ORDER[src]:
        raise TypeError(f"{op}: casting the input ({src}) to dtype={dtype} would narrow it")
    return dtype


def _ord_value(ord, op: str) -> float:
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: ord must be a number for a vector norm, got {ord!r}")
    return float(ord)


def vector_norm(ctx: Importer, x, ord=2.0, dim=None, keepdim=False, dtype=None, op="vector_norm"):
    """`torch.linalg.vector_norm`: max/min of |x| for +-inf, the count of nonzeros for 0, else
    `sum(|x|^p)^(1/p)` (p = 1 and 2 without the powers). Half precision is computed in float32,
    as torch accumulates it, and cast back."""
    out_dtype = _norm_dtype(x, dtype, op)
    p = _ord_value(ord, op)
    x = astype(ctx, x, "float32" if _FLOAT_ORDER[out_dtype] == 0 else out_dtype)
    if p == 0:
        nonzero = astype(ctx, emit_binary(ctx, "not_equal", x, 0.0), x.struct_info.dtype)
        out = reduce(ctx, "sum", nonzero, dim, keepdim)
    elif p == 2:
        out = call(
            ctx, "sqrt", reduce(ctx, "sum", emit_binary(ctx, "multiply", x, x), dim, keepdim)
        )
    else:
        magnitude = call(ctx, "abs", x)
        if math.isinf(p):
            out = reduce(ctx, "max" if p > 0 else "min", magnitude, dim, keepdim)
        elif p == 1:
            out = reduce(ctx, "sum", magnitude, dim, keepdim)
        else:
            total = reduce(ctx, "sum", emit_binary(ctx, "power", magnitude, p), dim, keepdim)
            out = emit_binary(ctx, "power", total, 1.0 / p)
    return astype(ctx, out, out_dtype)


def _matrix_norm(ctx: Importer, x, ord, dims, keepdim: bool, dtype, op: str):
    """`torch.linalg.matrix_norm` for the orders without singular values: "fro", +-1 (max/min
    column sum of |x|), +-inf (max/min row sum)."""
    rows, cols = (axis(d, ndim(x)) for d in dims)
    if ord == "fro":
        return vector_norm(ctx, x, 2.0, [rows, cols], keepdim, dtype, op)
    if isinstance(ord, str) or abs(float(ord)) not in (1.0, math.inf):
        raise ValueError(
            f"{op}: matrix norm ord={ord!r} needs singular values, which are not supported "
            "(supported: 'fro', 1, -1, inf, -inf)"
        )
    out_dtype = _norm_dtype(x, dtype, op)
    x = astype(ctx, x, "float32" if _FLOAT_ORDER[out_dtype] == 0 else out_dtype)
    summed, kept = (rows, cols) if abs(float(ord)) == 1 else (cols, rows)
    sums = reduce(ctx, "sum", call(ctx, "abs", x), summed, True)
    out = reduce(ctx, "max" if float(ord) > 0 else "min", sums, kept, True)
    if float(ord) > 0:  # torch's max over no rows or columns (an empty matrix) is 0, not -inf
        out = emit_binary(ctx, "maximum", out, 0.0)
    out = out if keepdim else squeeze(ctx, out, [rows, cols])
    return astype(ctx, out, out_dtype)


def _linalg_vector_norm(ctx: Importer, node: fx.Node):
    return vector_norm(
        ctx,
        first(ctx, node),
        ctx.arg(node, 1, "ord", 2.0),
        ctx.arg(node, 2, "dim"),
        ctx.arg(node, 3, "keepdim", False),
        ctx.arg(node, None, "dtype"),
        "linalg.vector_norm",
    )


def _norm(ctx: Importer, node: fx.Node):
    """`torch.norm` / `Tensor.norm` / `aten.norm`: p="fro" (the default) is the 2-norm over up
    to two dims, a number p the vector p-norm over `dim` (any number of dims)."""
    x, p = first(ctx, node), ctx.arg(node, 1, "p", "fro")
    dim, keepdim = ctx.arg(node, 2, "dim"), ctx.arg(node, 3, "keepdim", False)
    dtype = ctx.arg(node, None, "dtype")
    if isinstance(p, str):
        dims = dim if isinstance(dim, (list, tuple)) else [dim]
        if p != "fro" or len(dims) > 2:
            raise ValueError(
                f"norm: p={p!r} over dim={dim!r} is not supported (needs 'fro' "
                "over at most two dims, or a number)"
            )
        p = 2.0
    return vector_norm(ctx, x, 2.0 if p is None else p, dim, keepdim, dtype, "norm")


def _linalg_norm(ctx: Importer, node: fx.Node):
    """`torch.linalg.norm`: a vector norm over one dim (or of the flattened input when neither
    ord nor dim is given), a matrix norm over two dims (or of a 2-D input given an ord)."""
    x, ord = first(ctx, node), ctx.arg(node, 1, "ord")
    dim, keepdim = ctx.arg(node, 2, "dim"), ctx.arg(node, 3, "keepdim", False)
    dtype = ctx.arg(node, None, "dtype")
    if dim is None and ord is not None:
        if ndim(x) not in (1, 2):
            raise ValueError(
                f"linalg.norm: ord={ord!r} without dim needs a 1-D or 2-D input, got {ndim(x)}-D"
            )
        dim = None if ndim(x) == 1 else [0, 1]
    if isinstance(dim, (list, tuple)) and len(dim) == 2:
        return _matrix_norm(
            ctx, x, "fro" if ord is None else ord, dim, keepdim, dtype, "linalg.norm"
        )
    return vector_norm(ctx, x, 2.0 if ord is None else ord, dim, keepdim, dtype, "linalg.norm")


def _normalize(ctx: Importer, node: fx.Node):
    """`F.normalize`: x over its p-norm along `dim`, the norm clamped below at eps."""
    x, p = first(ctx, node), ctx.arg(node, 1, "p", 2.0)
    dim, eps = ctx.arg(node, 2, "dim", 1), ctx.arg(node, 3, "eps", 1e-12)
    norm = vector_norm(ctx, x, p, dim, True, None, "normalize")
    return emit_binary(ctx, "divide", x, emit_binary(ctx, "maximum", norm, float(eps)))


def _cosine_similarity(ctx: Importer, node: fx.Node):
    """torch's formula: each input (broadcast to their common shape) over its 2-norm clamped
    at eps, then the sum of their products along `dim`."""
    x1, x2 = binary_operands(ctx, first(ctx, node), ctx.arg(node, 1, "x2"))
    dim, eps = ctx.arg(node, 2, "dim", 1), ctx.arg(node, 3, "eps", 1e-8)
    if x1.struct_info.dtype not in _FLOAT_ORDER:  # as torch refuses them
        raise TypeError(
            f"cosine_similarity: expected floating point inputs, got common dtype "
            f"{x1.struct_info.dtype}"
        )
    shape = broadcast_shapes([shape_of(x1), shape_of(x2)], "cosine_similarity")
    units = []
    for v in (broadcast_to(ctx, x1, shape), broadcast_to(ctx, x2, shape)):
        norm = vector_norm(ctx, v, 2.0, dim, True, None, "cosine_similarity")
        units.append(emit_binary(ctx, "divide", v, emit_binary(ctx, "maximum", norm, float(eps))))
    return reduce(ctx, "sum", emit_binary(ctx, "multiply", *units), dim, False)


def _pairwise_distance(ctx: Importer, node: fx.Node):
    """`F.pairwise_distance`: the p-norm of `x1 - x2 + eps` along the last dim."""
    x1, x2 = first(ctx, node), ctx.arg(node, 1, "x2")
    p, eps = ctx.arg(node, 2, "p", 2.0), ctx.arg(node, 3, "eps", 1e-6)
    keepdim = ctx.arg(node, 4, "keepdim", False)
    diff = emit_binary(ctx, "add", emit_binary(ctx, "subtract", x1, x2), float(eps))
    return vector_norm(ctx, diff, p, -1, keepdim, None, "pairwise_distance")


def _cdist(ctx: Importer, node: fx.Node):
    """`torch.cdist` (B..., P, M) x (B..., R, M) -> (B..., P, R): the p-norm of the pairwise
    differences, broadcast to (B..., P, R, M). Exact for p = 2 too, where torch may take the
    matmul form |a|^2 - 2ab + |b|^2 (P or R above 25) and differ in the last digits."""
    x1, x2 = first(ctx, node), ctx.arg(node, 1, "x2")
    p = ctx.arg(node, 2, "p", 2.0)
    if ndim(x1) < 2 or ndim(x2) < 2:
        raise ValueError(f"cdist: inputs must be at least 2-D, got {ndim(x1)}-D and {ndim(x2)}-D")
    a, b = call(ctx, "expand_dims", x1, -2), call(ctx, "expand_dims", x2, -3)
    return vector_norm(ctx, emit_binary(ctx, "subtract", a, b), p, -1, False, None, "cdist")


# -- diagonal ---------------------------------------------------------------------------------
def diagonal(ctx: Importer, x, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """`torch.diagonal`: the two dims move last and merge (row-major, n1 * n2), and the
    diagonal is a `take` at i * (n2 + 1) + start; an offset past the edge gives an empty
    tensor, as in torch."""
    rank = ndim(x)
    d1, d2 = axis(dim1, rank), axis(dim2, rank)
    if rank < 2 or d1 == d2:
        raise ValueError(
            f"diagonal: dim1={dim1} and dim2={dim2} must be two distinct dims of a "
            f"tensor of rank >= 2 (got rank {rank})"
        )
    n1, n2 = shape_of(x)[d1], shape_of(x)[d2]
    if not all(isinstance(n, int) for n in (n1, n2)):  # length and positions are known here
        raise ValueError(
            f"diagonal: dim1={dim1}, dim2={dim2} must have static sizes, got ({n1}, {n2})"
        )
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    start = offset if offset >= 0 else -offset * n2
    x = permute(ctx, x, [a for a in range(rank) if a not in (d1, d2)] + [d1, d2])
    flat = flatten(ctx, x, -2, -1)
    index = const(np.arange(length, dtype=np.int64) * (n2 + 1) + start)
    return call(ctx, "take", flat, index, ndim(flat) - 1)


def _diagonal(ctx: Importer, node: fx.Node):
    return diagonal(
        ctx,
        first(ctx, node),
        ctx.arg(node, 1, "offset", 0),
        ctx.arg(node, 2, "dim1", 0),
        ctx.arg(node, 3, "dim2", 1),
    )


def _diag(ctx: Importer, node: fx.Node):
    """`torch.diag`: a 2-D input's diagonal; a 1-D input of n values becomes the square matrix
    of side n + |k| holding them on diagonal k (a `take` of the values where a constant mask
    marks the diagonal, zeros elsewhere)."""
    x, k = first(ctx, node), ctx.arg(node, 1, "diagonal", 0)
    if ndim(x) == 2:
        return diagonal(ctx, x, k)
    if ndim(x) != 1:
        raise ValueError(f"diag: expected a 1-D or 2-D input, got {ndim(x)}-D")
    n = shape_of(x)[0]
    if not isinstance(n, int):  # the side and the mask are computed here
        raise ValueError(f"diag: a 1-D input must have a static length, got {n}")  # noqa: TRY004
    side = n + abs(k)
    rows, cols = np.indices((side, side))
    source = np.clip(rows if k >= 0 else cols, 0, max(n - 1, 0)).astype(np.int64)
    values = call(ctx, "take", x, const(source), 0)
    zero = as_tensor(0, dtype=x.struct_info.dtype)
    return call(ctx, "where", const(cols - rows == k), values, zero)


def _trace(ctx: Importer, node: fx.Node):
    """`torch.trace`: the diagonal's sum (integers summed in int64, as torch does)."""
    x = first(ctx, node)
    if ndim(x) != 2:
        raise ValueError(f"trace: expected a 2-D input, got {ndim(x)}-D")
    d = diagonal(ctx, x)
    if "float" not in d.struct_info.dtype:
        d = astype(ctx, d, "int64")
    return reduce(ctx, "sum", d)


register(
    _linalg_vector_norm,
    torch.linalg.vector_norm,
    aten.linalg_vector_norm,
)
register(_norm, torch.norm, "norm", aten.norm)
register(_linalg_norm, torch.linalg.norm, aten.linalg_norm)
register(_normalize, F.normalize)
register(_cosine_similarity, torch.cosine_similarity)
register(_pairwise_distance, torch.pairwise_distance)
register(_cdist, torch.cdist, aten.cdist, aten._cdist_forward)
register(_diagonal, torch.diagonal, "diagonal", aten.diagonal)
register(_diag, torch.diag, "diag", aten.diag)
register(_trace, torch.trace, "trace", aten.trace)
