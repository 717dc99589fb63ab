"""Padding and 2-D convolution (NCHW data, OIHW kernel, groups) written with `te`."""

from __future__ import annotations

from collections.abc import Sequence

from relaxmlir import te
from relaxmlir.topi.transform import reshape


def _padded_shape(shape, pad_before: Sequence[int], pad_after: Sequence[int]) -> list:
    """`shape` grown by the padding; an axis without padding keeps its size as it is: a symbolic
    batch `n`, not `n + 0 + 0`, which the kernels after it (declared with `n`) would take for
    another size."""
    return [d + lo + hi if lo or hi else d for d, lo, hi in zip(shape, pad_before, pad_after)]


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
    shape = _padded_shape(data.shape, pad_before, pad_after)

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


def mirror_pad(
    data: te.Tensor, pad_before: Sequence[int], pad_after: Sequence[int], mode: str = "REFLECT"
) -> te.Tensor:
    """`data` padded by reading mirrored ("REFLECT": the edge not repeated) or clamped ("EDGE")
    indices; every read is in bounds."""
    shape = _padded_shape(data.shape, pad_before, pad_after)

    def source(v, d, lo, hi):
        if not lo and not hi:
            return v
        idx = v - lo if lo else v
        zero, last = te.const(0, idx.dtype), te.cast(d, idx.dtype) - 1
        if mode == "EDGE":
            return te.min(te.max(idx, zero), last)
        idx = te.if_then_else(idx < zero, zero - idx, idx)
        return te.if_then_else(idx > last, last + last - idx, idx)

    def body(*i):
        return data[tuple(source(*a) for a in zip(i, data.shape, pad_before, pad_after))]

    return te.compute(shape, body, name=f"T_{mode.lower()}_pad")


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
    if _space_to_depth_applies(data, kernel, strides, dilation, groups):
        return _conv2d_space_to_depth(data, kernel, sh, padding, out_dtype)
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


def _space_to_depth_applies(data, kernel, strides, dilation, groups) -> bool:
    from relaxmlir.target import Target

    target = Target.current()
    if target is not None and target.kind == "cuda":
        return False  # the GPU's contraction kernel reads a strided window through its maps
    static = all(isinstance(d, int) for d in (*data.shape, *kernel.shape))
    sh, sw = strides
    pointwise = tuple(kernel.shape[2:]) == (1, 1)  # a 1x1 strided conv is a subsampled matmul
    return static and not pointwise and groups == 1 and tuple(dilation) == (1, 1) and sh == sw > 1


def _conv2d_space_to_depth(data, kernel, s: int, padding, out_dtype: str) -> te.Tensor:
    """A stride-s convolution as a stride-1 one over the space-to-depth view of the input.

    Input row s*i + r becomes row i of channel (c, r); tap k = s*q + r of the kernel becomes tap q
    of that channel (taps past the kernel are zero). The reads turn into views and the stride-1
    schedule applies, at the cost of those zero taps (x1.8 MACs for 3x3 / 2, x1.3 for 7x7 / 2)
    instead of a strided window that no vector route reads.
    """
    n, c, h, w = data.shape
    o, _cin, kh, kw = kernel.shape
    top, left, bottom, right = padding
    oh = (h + top + bottom - kh) // s + 1
    ow = (w + left + right - kw) // s + 1
    kq, kq2 = -(-kh // s), -(-kw // s)
    hs, ws = oh + kq - 1, ow + kq2 - 1
    # rows past the original padding are read only by zero taps: zeros are enough there
    padded = pad(data, (0, 0, top, left), (0, 0, max(bottom, s * hs - h - top), max(right, s * ws - w - left)))
    blocks = te.compute(
        (n, c, s, s, hs, ws),
        lambda b, ch, r, r2, i, j: padded[b, ch, s * i + r, s * j + r2],
        name="T_space_to_depth",
    )
    zero = te.const(0, kernel.dtype)

    def tap(f, ch, r, r2, q, q2):
        inside = te.all(s * q + r < kh, s * q2 + r2 < kw)
        return te.if_then_else(inside, kernel[f, ch, s * q + r, s * q2 + r2], zero)

    taps = te.compute((o, c, s, s, kq, kq2), tap, name="T_space_to_depth_kernel")
    return conv2d(
        reshape(blocks, (n, c * s * s, hs, ws)),
        reshape(taps, (o, c * s * s, kq, kq2)),
        out_dtype=out_dtype,
    )
