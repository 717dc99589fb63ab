"""2-D pooling (NCHW) written with `te`: max/avg windows and adaptive average pooling."""

from __future__ import annotations

import math
from collections.abc import Sequence

from relaxmlir import te
from relaxmlir.topi.nn.conv2d import pad


def _out_size(size, lo: int, hi: int, k: int, stride: int, dilation: int, ceil_mode: bool):
    span = dilation * (k - 1) + 1
    if not isinstance(size, int):
        return (size + lo + hi - span) // stride + 1
    total = size + lo + hi - span
    out = (-(-total // stride) if ceil_mode else total // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + lo:
        out -= 1
    return out


def _crop_single_window(data: te.Tensor, axis: int, out: int, size, lo: int, hi: int, k: int,
                        dilation: int) -> tuple:
    """(data, high padding): when `out` is 1 and the window's span ends before the padded
    end, data keeps only the rows the window reads and the high padding shrinks to match."""
    span = dilation * (k - 1) + 1
    rows = min(size, span - lo) if isinstance(size, int) else 0
    if out != 1 or rows <= 0 or span >= lo + size + hi:
        return data, hi
    if rows < size:
        shape = list(data.shape)
        shape[axis] = rows
        full = data
        data = te.compute(shape, lambda *i: full[i], name="T_window_rows")
    return data, span - lo - rows


def pool2d(
    data: te.Tensor,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    padding: Sequence[int],
    pool_type: str,
    ceil_mode: bool = False,
    layout: str = "NCHW",
    count_include_pad: bool = True,
) -> te.Tensor:
    """Max or average over NCHW windows; padding is (top, left, bottom, right).

    Average divisors follow torch: with `count_include_pad` the window clipped to the padded
    input, otherwise the window clipped to the input itself.
    """
    if layout != "NCHW":
        raise NotImplementedError(f"topi.nn.pool2d: layout '{layout}' (only NCHW)")
    n, c, h, w = data.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    top, left, bottom, right = padding
    oh = _out_size(h, top, bottom, kh, sh, dh, ceil_mode)
    ow = _out_size(w, left, right, kw, sw, dw, ceil_mode)
    # ceil_mode windows may run past the bottom/right padding: pad those with the identity too
    extra_h = (
        max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - (h + top + bottom)) if isinstance(h, int) else 0
    )
    extra_w = (
        max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - (w + left + right)) if isinstance(w, int) else 0
    )
    # One window on an axis reads a span shorter than the padded input: crop the input to it
    # (normalize's unit-loop folding turns that axis's window index into a plain loop index,
    # whose extent must then be the operand's size).
    source, high_h = _crop_single_window(data, 2, oh, h, top, bottom + extra_h, kh, dh)
    source, high_w = _crop_single_window(source, 3, ow, w, left, right + extra_w, kw, dw)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    if pool_type == "max":
        lowest = te.const(
            -math.inf if data.dtype.startswith(("float", "bfloat")) else -(2**31), data.dtype
        )
        padded = pad(source, (0, 0, top, left), (0, 0, high_h, high_w), lowest.arg)
        return te.compute(
            (n, c, oh, ow),
            lambda b, f, y, x: te.max(
                padded[b, f, y * sh + ry * dh, x * sw + rx * dw], axis=[ry, rx]
            ),
            name="T_pool_max",
        )
    if pool_type != "avg":
        raise ValueError(f"topi.nn.pool2d: unknown pool_type '{pool_type}'")
    if (dh, dw) != (1, 1):
        raise NotImplementedError("topi.nn.pool2d: average pooling with dilation")
    padded = pad(source, (0, 0, top, left), (0, 0, high_h, high_w))
    total = te.compute(
        (n, c, oh, ow),
        lambda b, f, y, x: te.sum(padded[b, f, y * sh + ry, x * sw + rx], axis=[ry, rx]),
        name="T_pool_sum",
    )

    def extent(i, stride_, k, lo, hi, size):
        start = i * stride_ - lo
        if count_include_pad:
            end = te.min(start + k, size + hi)
        else:
            end = te.min(start + k, size)
            start = te.max(start, 0)
        return end - start

    def body(b, f, y, x):
        count = extent(y, sh, kh, top, bottom, h) * extent(x, sw, kw, left, right, w)
        return total[b, f, y, x] / te.cast(count, data.dtype)

    return te.compute((n, c, oh, ow), body, name="T_pool_avg")


def adaptive_pool(
    data: te.Tensor, output_size: Sequence[int], pool_type: str = "avg", layout: str = "NCHW"
) -> te.Tensor:
    """Average over windows `[floor(i*H/OH), ceil((i+1)*H/OH))` (NCHW, average only)."""
    if layout != "NCHW" or pool_type != "avg":
        raise NotImplementedError(f"topi.nn.adaptive_pool: {pool_type} pooling in {layout}")
    n, c, h, w = data.shape
    oh, ow = output_size
    axes = []
    for size, out, name in ((h, oh, "ry"), (w, ow, "rx")):
        if not isinstance(size, int) and out != 1:
            raise NotImplementedError(
                f"topi.nn.adaptive_pool: symbolic input size ({size}) needs output size 1, got ({out})"
            )
        uniform = out == 1 or (isinstance(size, int) and size % out == 0)
        k = (
            (size if out == 1 else size // out)
            if uniform
            else max(-(-(i + 1) * size // out) - (i * size) // out for i in range(out))
        )
        axes.append((size, out, uniform, k, te.reduce_axis((0, k), name=name)))

    def window(i, spec):
        size, out, uniform, k, r = spec
        if uniform:
            return i * k + r, None, k
        start = te.floordiv(i * size, out)
        end = te.floordiv((i + 1) * size + out - 1, out)
        return start + r, start + r < end, end - start

    def source(b, f, y, x):
        (iy, cy, _), (ix, cx, _) = window(y, axes[0]), window(x, axes[1])
        v = data[b, f, iy, ix]
        conds = [cnd for cnd in (cy, cx) if cnd is not None]
        return te.if_then_else(te.all(*conds), v, te.const(0, data.dtype)) if conds else v

    total = te.compute(
        (n, c, oh, ow),
        lambda b, f, y, x: te.sum(source(b, f, y, x), axis=[axes[0][4], axes[1][4]]),
        name="T_adaptive_sum",
    )

    def body(b, f, y, x):
        count = window(y, axes[0])[2] * window(x, axes[1])[2]
        return total[b, f, y, x] / te.cast(count, data.dtype)

    return te.compute((n, c, oh, ow), body, name="T_adaptive_pool_avg")
