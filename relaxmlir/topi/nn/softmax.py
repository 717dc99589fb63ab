"""Softmax and log-softmax written with `te` (max-shifted, three passes)."""

from __future__ import annotations

from relaxmlir import te
from relaxmlir.topi.reduction import broadcast_keep, comm_reduce


def _shifted_sum(x: te.Tensor, axis: int):
    mx = comm_reduce(x, axis, True, te.max, "T_softmax_maxelem")
    e = te.compute(
        x.shape, lambda *i: te.exp(x(*i) - mx[broadcast_keep(i, [axis])]), name="T_softmax_exp"
    )
    total = comm_reduce(e, axis, True, te.sum, "T_softmax_expsum")
    return mx, e, total


def softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """`exp(x - max) * (1 / sum(exp(x - max)))` along `axis` (a 0-d x is its own axis: 1, or
    NaN). One reciprocal per row, as ATen's softmax: the splat of `1 / sum` is a scalar division
    that LLVM hoists out of the row's loop, where `e / sum` divided every element (vdivps, the
    slowest vector op: a third of the softmax at GPT-2's [12, 128, 128]). The sum is at least 1
    (the maximum's own term), so the reciprocal cannot overflow."""
    if x.ndim == 0:
        return te.compute((), lambda: te.exp(x() - x()) / te.exp(x() - x()), name="T_softmax")
    axis %= x.ndim
    _, e, total = _shifted_sum(x, axis)
    return te.compute(
        x.shape, lambda *i: e(*i) * (1.0 / total[broadcast_keep(i, [axis])]), name="T_softmax"
    )


def log_softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """`x - max - log(sum(exp(x - max)))` along `axis` (a 0-d x: `x - x`)."""
    if x.ndim == 0:
        return te.compute((), lambda: x() - x(), name="T_log_softmax")
    axis %= x.ndim
    mx, _, total = _shifted_sum(x, axis)

    def body(*i):
        j = broadcast_keep(i, [axis])
        return x(*i) - mx[j] - te.log(total[j])

    return te.compute(x.shape, body, name="T_log_softmax")
