"""Normalization written with `te`: layer_norm and batch_norm (inference)."""

from __future__ import annotations

from collections.abc import Sequence

from relaxmlir import te
from relaxmlir.topi.reduction import broadcast_keep, mean, variance


def layer_norm(
    data: te.Tensor,
    gamma: te.Tensor,
    beta: te.Tensor,
    axis: Sequence[int],
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
) -> te.Tensor:
    """`(x - mean) / sqrt(var + epsilon) * gamma + beta` over `axis` (biased variance)."""
    axis = sorted(a % data.ndim for a in axis)
    mu = mean(data, axis, keepdims=True)
    var = variance(data, axis, keepdims=True)
    eps = te.const(epsilon, data.dtype)

    def body(*i):
        k = broadcast_keep(i, axis)
        v = (data(*i) - mu[k]) * te.rsqrt(var[k] + eps)
        norm_index = tuple(i[a] for a in axis)
        if scale:
            v = v * gamma[norm_index]
        if center:
            v = v + beta[norm_index]
        return v

    return te.compute(data.shape, body, name="T_layer_norm")


def batch_norm(
    data: te.Tensor,
    gamma: te.Tensor,
    beta: te.Tensor,
    moving_mean: te.Tensor,
    moving_var: te.Tensor,
    axis: int = 1,
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
) -> te.Tensor:
    """Inference batch norm along `axis` with the moving statistics."""
    axis %= data.ndim
    eps = te.const(epsilon, data.dtype)

    def body(*i):
        c = i[axis]
        v = (data(*i) - moving_mean[c]) * te.rsqrt(moving_var[c] + eps)
        if scale:
            v = v * gamma[c]
        if center:
            v = v + beta[c]
        return v

    return te.compute(data.shape, body, name="T_batch_norm")
