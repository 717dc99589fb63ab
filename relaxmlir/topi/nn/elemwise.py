"""Activations written with `te`: relu, leaky_relu, gelu, gelu_tanh, silu."""

from __future__ import annotations

import math

from relaxmlir import te
from relaxmlir.topi.math import unary

relu = unary("relu", lambda v: te.max(v, te.const(0, v.dtype)))
silu = unary("silu", lambda v: v * te.sigmoid(v))
gelu = unary("gelu", lambda v: v * (te.erf(v * (1 / math.sqrt(2))) + 1.0) * 0.5)


def _gelu_tanh(v):
    inner = (v + v * v * v * 0.044715) * math.sqrt(2 / math.pi)
    return v * (te.tanh(inner) + 1.0) * 0.5


gelu_tanh = unary("gelu_tanh", _gelu_tanh)


def leaky_relu(x: te.Tensor, alpha: float) -> te.Tensor:
    """`x if x > 0 else alpha * x`."""

    def fn(v):
        return te.if_then_else(v > te.const(0, v.dtype), v, v * te.const(alpha, v.dtype))

    return te.compute(x.shape, lambda *i: fn(x(*i)), name="T_leaky_relu")
