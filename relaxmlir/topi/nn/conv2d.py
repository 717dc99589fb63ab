"""Padding and 2-D convolution (NCHW data, OIHW kernel, groups) written with `te`."""

from __future__ import annotations

from collections.abc import Sequence

from relaxmlir import te


def pad(
    data: te.Tensor,
    pad_before: Sequence[int],
    pad_after: Sequence[int] | None = None,
    pad_value: float = 0.0,
    name: str = "T_pad",
) -> te.Tensor:
    """`data` surrounded by `pad_value`; the reads are guarded, so no out-of-bounds access."""
    pad_after = pad_before if pad_after is None else pad_after
    if not any(pad_before) and not any(pad_after):
        return data
    shape = [d + lo + hi for d, lo, hi in zip(data.shape, pad_before, pad_after)]

    def body(*i):
        conds, idx = [], []
        for v, d, lo, hi in zip(i, data.shape, pad_before, pad_after):
            idx.append(v - lo if lo else v)
            if lo:
                conds.append(v >= lo)
            if hi:
                conds.append(v < d + lo)
        if not conds:
            return data[tuple(idx)]
        return te.if_then_else(te.all(*conds), data[tuple(idx)], te.const(pad_value, data.dtype))

    return te.compute(shape, body, name=name)


def conv2d(
    data: te.Tensor,
    kernel: te.Tensor,
    strides: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    groups: int = 1,
    out_dtype: str | None = None,
) -> te.Tensor:
    """Cross-correlation of NCHW `data` with OIHW `kernel`; padding is (top, left, bottom, right).

    With groups, output channel `o` reads input channels `(o // (O / groups)) * I + rc`.
    """
    out_dtype = out_dtype or data.dtype
    n, _c, h, w = data.shape
    o, cin, kh, kw = kernel.shape
    (sh, sw), (dh, dw) = strides, dilation
    top, left, bottom, right = padding
    padded = pad(data, (0, 0, top, left), (0, 0, bottom, right))
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    rc = te.reduce_axis((0, cin), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    per_group = o // groups if groups > 1 else o

    def body(b, f, y, x):
        ch = rc if groups == 1 else te.floordiv(f, per_group) * cin + rc
        v = padded[b, ch, y * sh + ry * dh, x * sw + rx * dw]
        return te.sum(
            te.cast(v, out_dtype) * te.cast(kernel[f, rc, ry, rx], out_dtype), axis=[rc, ry, rx]
        )

    return te.compute((n, o, oh, ow), body, name="T_conv2d_nchw")
