"""`nn.op`: functional ops for forward code; each emits relax ops and returns an `nn.Tensor`.

Thin wrappers over `relax.op.*` with TVM `nn.op`'s names and arguments. Every op takes a
`name` that becomes the var name in the printed IR (made unique with a counter). Binary ops
also take python scalars, which become constants of the other operand's dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from relaxmlir.frontend.nn.core import Tensor, _expr, wrap_nested
from relaxmlir.relax import op as rop
from relaxmlir.relax.expr import const
from relaxmlir.relax.op.common import normalize_axes


def _binary(fn: Callable, default: str) -> Callable[..., Tensor]:
    def op(a: Any, b: Any, name: str = default) -> Tensor:
        return wrap_nested(fn(_expr(a, "a"), _expr(b, "b")), name)

    op.__name__ = op.__qualname__ = default
    op.__doc__ = f"`relax.{default}(a, b)` with numpy broadcasting; a or b may be a scalar."
    return op


def _unary(fn: Callable, default: str) -> Callable[..., Tensor]:
    def op(x: Tensor, name: str = default) -> Tensor:
        return wrap_nested(fn(_expr(x)), name)

    op.__name__ = op.__qualname__ = default
    op.__doc__ = f"elementwise `{default}`, as `relax.op` computes it."
    return op


add = _binary(rop.add, "add")
subtract = _binary(rop.subtract, "subtract")
multiply = _binary(rop.multiply, "multiply")
divide = _binary(rop.divide, "divide")
maximum = _binary(rop.maximum, "maximum")
minimum = _binary(rop.minimum, "minimum")

relu = _unary(rop.nn.relu, "relu")
silu = _unary(rop.nn.silu, "silu")
sigmoid = _unary(rop.sigmoid, "sigmoid")
tanh = _unary(rop.tanh, "tanh")
exp = _unary(rop.exp, "exp")
sqrt = _unary(rop.sqrt, "sqrt")
rsqrt = _unary(rop.rsqrt, "rsqrt")
square = _unary(rop.square, "square")
negative = _unary(rop.negative, "negative")


def matmul(a: Tensor, b: Tensor, out_dtype: str | None = None, name: str = "matmul") -> Tensor:
    """`a @ b` with numpy's batching rules (`relax.matmul`)."""
    return wrap_nested(rop.matmul(_expr(a, "a"), _expr(b, "b"), out_dtype), name)


def gelu(x: Tensor, approximate: str | None = None, name: str = "gelu") -> Tensor:
    """GELU with erf, or its tanh approximation when `approximate="tanh"` (torch's flag)."""
    if approximate not in (None, "none", "tanh"):
        raise ValueError(f"nn.op.gelu: approximate must be None or 'tanh', got ({approximate!r})")
    fn = rop.nn.gelu_tanh if approximate == "tanh" else rop.nn.gelu
    return wrap_nested(fn(_expr(x)), name)


def softmax(x: Tensor, axis: int = -1, name: str = "softmax") -> Tensor:
    """Softmax along `axis`."""
    return wrap_nested(rop.nn.softmax(_expr(x), axis), name)


def permute_dims(
    x: Tensor, axes: Sequence[int] | None = None, name: str = "permute_dims"
) -> Tensor:
    """Transpose by `axes` (all axes reversed when None, as in numpy)."""
    return wrap_nested(rop.permute_dims(_expr(x), axes), name)


def reshape(x: Tensor, shape: Sequence[int | str], name: str = "reshape") -> Tensor:
    """Reshape to `shape` (one dim may be -1)."""
    return wrap_nested(rop.reshape(_expr(x), list(shape)), name)


def squeeze(x: Tensor, axis: int | Sequence[int] | None = None, name: str = "squeeze") -> Tensor:
    """Drop size-1 axes (all of them when `axis` is None)."""
    return wrap_nested(rop.squeeze(_expr(x), axis), name)


def unsqueeze(x: Tensor, dim: int, name: str = "unsqueeze") -> Tensor:
    """Insert a size-1 axis at `dim` (`relax.expand_dims`)."""
    return wrap_nested(rop.expand_dims(_expr(x), dim), name)


def concat(x: Sequence[Tensor], dim: int, name: str = "concat") -> Tensor:
    """Join tensors along `dim`."""
    return wrap_nested(rop.concat([_expr(t, f"x[{i}]") for i, t in enumerate(x)], dim), name)


def take(x: Tensor, indices: Tensor, axis: int | None = None, name: str = "take") -> Tensor:
    """Gather `x` at integer `indices` along `axis` (the flattened x when None)."""
    return wrap_nested(rop.take(_expr(x), _expr(indices, "indices"), axis), name)


def astype(x: Tensor, dtype: str, name: str = "astype") -> Tensor:
    """Convert to `dtype`."""
    return wrap_nested(rop.astype(_expr(x), dtype), name)


def sum(x: Tensor, axis=None, keepdims: bool = False, name: str = "sum") -> Tensor:
    """Sum over `axis` (all axes when None)."""
    return wrap_nested(rop.sum(_expr(x), axis, keepdims), name)


def mean(x: Tensor, axis=None, keepdims: bool = False, name: str = "mean") -> Tensor:
    """Mean over `axis` (all axes when None)."""
    return wrap_nested(rop.mean(_expr(x), axis, keepdims), name)


def layer_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    name: str = "layer_norm",
) -> Tensor:
    """Layer normalization over the trailing `normalized_shape` dims (torch's layout);
    a missing weight or bias is 1 or 0."""
    dims = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    axes = list(range(-len(dims), 0))
    gamma = _expr(weight, "weight") if weight is not None else const(np.ones(dims, x.dtype))
    beta = _expr(bias, "bias") if bias is not None else const(np.zeros(dims, x.dtype))
    return wrap_nested(rop.nn.layer_norm(_expr(x), gamma, beta, axes, eps), name)


def rms_norm(
    x: Tensor,
    weight: Tensor,
    axes: int | Sequence[int] = -1,
    epsilon: float = 1e-5,
    name: str = "rms_norm",
) -> Tensor:
    """`x / sqrt(mean(x**2, axes) + epsilon) * weight`, weight shaped like x's `axes`.

    NOTE: there is no `relax.nn.rms_norm` op yet, so this emits square, mean, add, rsqrt and
    two multiplies; weight is reshaped when `axes` are not the trailing dims.
    """
    ax = normalize_axes(axes, x.ndim, "nn.op.rms_norm")
    ms = mean(square(x), ax, keepdims=True)
    scale = rsqrt(add(ms, float(epsilon)))
    w = weight
    if ax != list(range(x.ndim - len(ax), x.ndim)):
        w = reshape(weight, [x.shape[i] if i in ax else 1 for i in range(ax[0], x.ndim)])
    return multiply(multiply(x, scale), w, name=name)


def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
    name: str = "conv2d",
) -> Tensor:
    """2-D convolution, NCHW data and OIHW weight; bias `(O,)` is added per channel."""
    out = wrap_nested(
        rop.nn.conv2d(_expr(x), _expr(weight, "weight"), stride, padding, dilation, groups), name
    )
    if bias is None:
        return out
    return add(out, reshape(bias, [1, bias.shape[0], 1, 1]))


def zeros(shape: Sequence[int | str], dtype: str = "float32", name: str = "zeros") -> Tensor:
    """A tensor of zeros."""
    return wrap_nested(rop.zeros(list(shape), dtype), name)


def ones(shape: Sequence[int | str], dtype: str = "float32", name: str = "ones") -> Tensor:
    """A tensor of ones."""
    return wrap_nested(rop.ones(list(shape), dtype), name)
