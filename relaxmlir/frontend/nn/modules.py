"""Layers of `nn` (TVM's `nn.modules`), with torch's parameter names and layouts.

Weights are laid out as torch lays them out (Linear `(out, in)`, Conv2D `(O, I/groups, KH, KW)`),
so `model.load_state_dict(torch_model.state_dict())` fills them when the attribute names match.
"""

from __future__ import annotations

from collections.abc import Sequence

from relaxmlir.frontend.nn import op
from relaxmlir.frontend.nn.core import Parameter, Tensor
from relaxmlir.frontend.nn.module import Module

IntOrPair = int | Sequence[int]


class Linear(Module):
    """`x @ weight.T + bias`, emitted as TVM emits it: permute_dims, matmul, add.

    Parameters
    ----------
    in_features, out_features : int
    bias : bool, default True
    dtype : str, default "float32"
    out_dtype : str, optional
        The matmul's result dtype (default: the input's).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        dtype: str = "float32",
        out_dtype: str | None = None,
    ):
        self.in_features, self.out_features, self.out_dtype = in_features, out_features, out_dtype
        self.weight = Parameter((out_features, in_features), dtype)
        self.bias = Parameter((out_features,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        w = op.permute_dims(self.weight)
        x = op.matmul(x, w, out_dtype=self.out_dtype)
        return op.add(x, self.bias) if self.bias is not None else x


class ReLU(Module):
    """`max(x, 0)`."""

    def forward(self, x: Tensor) -> Tensor:
        return op.relu(x)


class GELU(Module):
    """GELU with erf, or the tanh approximation (`approximate="tanh"`, torch's flag)."""

    def __init__(self, approximate: str | None = None):
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return op.gelu(x, self.approximate)


class SiLU(Module):
    """`x * sigmoid(x)`."""

    def forward(self, x: Tensor) -> Tensor:
        return op.silu(x)


class Dropout(Module):
    """Dropout at inference: the identity; nothing is emitted."""

    def __init__(self, p: float = 0.5):
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return x


class LayerNorm(Module):
    """Layer normalization over the trailing `normalized_shape` dims (torch's `LayerNorm`).

    Parameters
    ----------
    normalized_shape : int or sequence of int
    eps : float, default 1e-5
    elementwise_affine : bool, default True
        Whether it has `weight` and `bias`.
    dtype : str, default "float32"
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        dtype: str = "float32",
    ):
        shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.weight = Parameter(shape, dtype) if elementwise_affine else None
        self.bias = Parameter(shape, dtype) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        return op.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(Module):
    """`x / sqrt(mean(x**2, axes) + eps) * weight` (torch's `RMSNorm`; no bias).

    Parameters
    ----------
    hidden_size : int
        The size of the normalized axis (weight is `(hidden_size,)`).
    axes : int or sequence of int, default -1
    eps : float, default 1e-5
    dtype : str, default "float32"
    """

    def __init__(
        self,
        hidden_size: int,
        axes: int | Sequence[int] = -1,
        eps: float = 1e-5,
        dtype: str = "float32",
    ):
        self.axes, self.eps = axes, eps
        self.weight = Parameter((hidden_size,), dtype)

    def forward(self, x: Tensor) -> Tensor:
        return op.rms_norm(x, self.weight, self.axes, self.eps)


class Embedding(Module):
    """Rows of `weight` `(num, dim)` at integer indices of any shape.

    Parameters
    ----------
    num, dim : int
    dtype : str, default "float32"
    """

    def __init__(self, num: int, dim: int, dtype: str = "float32"):
        self.num, self.dim = num, dim
        self.weight = Parameter((num, dim), dtype)

    def forward(self, x: Tensor) -> Tensor:
        return op.take(self.weight, x, axis=0)


class Conv2D(Module):
    """2-D convolution of NCHW data (torch's `Conv2d` parameters and weight layout).

    Parameters
    ----------
    in_channels, out_channels : int
    kernel_size : int or (int, int)
    stride, dilation : int or (int, int), default 1
    padding : int, (int, int) or (top, left, bottom, right), default 0
    groups : int, default 1
    bias : bool, default True
    dtype : str, default "float32"
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: IntOrPair = 0,
        dilation: IntOrPair = 1,
        groups: int = 1,
        bias: bool = True,
        dtype: str = "float32",
    ):
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"nn.Conv2D: channels ({in_channels}, {out_channels}) must divide into groups ({groups})"
            )
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = Parameter((out_channels, in_channels // groups, kh, kw), dtype)
        self.bias = Parameter((out_channels,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return op.conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )
