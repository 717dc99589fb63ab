"""im2col: a convolution's input windows laid out as the columns of a matrix (written with `te`).

`conv2d(data, kernel)` is then the matrix product `kernel.reshape(O, C*KH*KW) @ columns`: the
GEMM runs through the packed matmul kernel and its schedule (`conv2d_nchw.im2col` in
`relax.op.strategy`), at the price of KH*KW copies of the input.
"""

from __future__ import annotations

from collections.abc import Sequence

from relaxmlir import te
from relaxmlir.topi.nn.conv2d import pad


def im2col(
    data: te.Tensor,
    kernel_size: Sequence[int],
    strides: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    name: str = "T_im2col",
) -> te.Tensor:
    """The windows of NCHW `data` as `(N, C, KH, KW, OH, OW)`:
    `out[n, c, ky, kx, y, x] = data[n, c, y*sh + ky*dh - top, x*sw + kx*dw - left]`, zero where
    that falls in the padding (top, left, bottom, right). Row-major, it is the `(N, C*KH*KW,
    OH*OW)` column matrix (one column per output pixel, rows ordered as an OIHW kernel's)."""
    n, c, h, w = data.shape
    kh, kw = kernel_size
    (sh, sw), (dh, dw) = strides, dilation
    top, left, bottom, right = padding
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(
            f"im2col: a {kh}x{kw} window (dilation {dh}x{dw}) does not fit the padded "
            f"{h}x{w} input"
        )
    padded = pad(data, (0, 0, top, left), (0, 0, bottom, right))
    return te.compute(
        (n, c, kh, kw, oh, ow),
        lambda b, ch, ky, kx, y, x: padded[b, ch, y * sh + ky * dh, x * sw + kx * dw],
        name=name,
    )
