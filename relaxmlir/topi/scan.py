"""Scans, sorting and element-wise gather/scatter written with `te`.

These are naive kernels (quadratic along the scanned or sorted axis: each output element
reduces over the whole axis), which is what `te.compute` expresses without sequential loops;
they serve the rare graphs that use them (cumulative sums, sort/topk, torch.gather/scatter).
"""

from __future__ import annotations

from relaxmlir import te
from relaxmlir.te import expr as E


def _with(i: tuple, axis: int, v) -> tuple:
    return tuple(i[:axis]) + (v,) + tuple(i[axis + 1 :])


def cumsum(x: te.Tensor, axis: int, dtype: str | None = None, exclusive: bool = False) -> te.Tensor:
    """Running sum along `axis`, accumulated in `dtype`."""
    dtype = dtype or x.dtype
    r = te.reduce_axis((0, x.shape[axis]), name="r")

    def body(*i):
        take = r < i[axis] if exclusive else r <= i[axis]
        value = te.cast(x[_with(i, axis, r)], dtype)
        return te.sum(te.if_then_else(take, value, te.const(0, dtype)), axis=r)

    return te.compute(x.shape, body, name="T_cumsum")


def _isnan(v: E.Expr) -> E.Expr:
    return E.compare("ne", v, v)


def _isnum(v: E.Expr) -> E.Expr:
    return E.compare("eq", v, v)


def _before(a: E.Expr, b: E.Expr, descending: bool) -> E.Expr:
    """Whether `a` sorts strictly before `b` (NaN is above every number)."""
    if not a.dtype.startswith(("float", "bfloat")):
        return a > b if descending else a < b
    if descending:
        return te.any(a > b, te.all(_isnan(a), _isnum(b)))
    return te.any(a < b, te.all(_isnan(b), _isnum(a)))


def _tied(a: E.Expr, b: E.Expr) -> E.Expr:
    if not a.dtype.startswith(("float", "bfloat")):
        return a == b
    return te.any(a == b, te.all(_isnan(a), _isnan(b)))


def argsort(
    x: te.Tensor, axis: int = -1, descending: bool = False, dtype: str = "int64"
) -> te.Tensor:
    """Stable sort order along `axis`: each element's rank is the number of elements that sort
    before it (ties broken by position); the result inverts the ranks."""
    axis %= x.ndim
    n = x.shape[axis]
    j = te.reduce_axis((0, n), name="j")

    def rank_body(*i):
        a, b = x[_with(i, axis, j)], x(*i)
        first = te.any(_before(a, b, descending), te.all(_tied(a, b), j < i[axis]))
        return te.sum(te.if_then_else(first, te.const(1, "int64"), te.const(0, "int64")), axis=j)

    rank = te.compute(x.shape, rank_body, name="T_rank")
    k = te.reduce_axis((0, n), name="k")

    def order_body(*i):
        hit = rank[_with(i, axis, k)] == te.cast(i[axis], "int64")
        return te.sum(te.if_then_else(hit, te.cast(k, dtype), te.const(0, dtype)), axis=k)

    return te.compute(x.shape, order_body, name="T_argsort")


def _wrapped(v: E.Expr, size) -> E.Expr:
    n = te.cast(size, v.dtype)
    return te.if_then_else(v < te.const(0, v.dtype), v + n, v)


def gather_elements(data: te.Tensor, indices: te.Tensor, axis: int = 0) -> te.Tensor:
    """`out[i] = data[i with i[axis] = indices[i]]` (negative indices count from the end)."""
    axis %= data.ndim

    def body(*i):
        return data[_with(i, axis, _wrapped(indices(*i), data.shape[axis]))]

    return te.compute(indices.shape, body, name="T_gather_elements")


def scatter_elements(
    data: te.Tensor,
    indices: te.Tensor,
    updates: te.Tensor,
    axis: int = 0,
    reduction: str = "update",
) -> te.Tensor:
    """`data` with `updates` written or added along `axis` at `indices`.

    Over the region that `indices` covers (its extent off `axis`), a reduction along the index
    axis finds, per output element, the last update aimed at it ("update") or their sum ("add").
    """
    axis %= data.ndim
    region = _with(tuple(indices.shape), axis, data.shape[axis])
    r = te.reduce_axis((0, indices.shape[axis]), name="r")

    def aimed(i):
        return _wrapped(indices[_with(i, axis, r)], data.shape[axis]) == te.cast(
            i[axis], indices.dtype
        )

    if reduction == "add":
        zero = te.const(0, data.dtype)
        found = te.compute(
            region,
            lambda *i: te.sum(te.if_then_else(aimed(i), updates[_with(i, axis, r)], zero), axis=r),
            name="T_scatter_sum",
        )
    else:
        last = te.compute(
            region,
            lambda *i: te.max(
                te.if_then_else(aimed(i), te.cast(r, "int64"), te.const(-1, "int64")), axis=r
            ),
            name="T_scatter_last",
        )

    def body(*i):
        inside = [i[d] < indices.shape[d] for d in range(data.ndim) if d != axis]
        if reduction == "add":
            hit = data(*i) + found(*i)
        else:
            m = last(*i)
            hit = te.if_then_else(m >= te.const(0, "int64"), updates[_with(i, axis, m)], data(*i))
        return te.if_then_else(te.all(*inside), hit, data(*i)) if inside else hit

    return te.compute(data.shape, body, name="T_scatter_elements")


def index_copy(data: te.Tensor, index: te.Tensor, source: te.Tensor, axis: int = 0) -> te.Tensor:
    """`data` with `source`'s slices along `axis` written at the positions of the 1-D `index`
    (a position outside the axis writes nothing).

    Each position of the axis finds the last slice aimed at it ([size x n] compares, a
    reduction over the n slices, not over every element as scatter_elements' search runs), and
    one pass takes that slice's element or data's own."""
    axis %= data.ndim
    size, n = data.shape[axis], index.shape[0]
    j = te.reduce_axis((0, n), name="j")

    def aimed(p):
        return index[j] == te.cast(p, index.dtype)

    none = te.const(-1, "int64")
    last = te.compute(
        (size,),
        lambda p: te.max(te.if_then_else(aimed(p), te.cast(j, "int64"), none), axis=j),
        name="T_index_copy_last",
    )

    def body(*i):
        m = last[i[axis]]
        return te.if_then_else(m >= te.const(0, "int64"), source[_with(i, axis, m)], data(*i))

    return te.compute(data.shape, body, name="T_index_copy")
