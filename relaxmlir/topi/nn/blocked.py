"""Convolution and pooling in channel-blocked layouts ("NCHW16c" data, "OIHW16i16o" kernels).

The layouts are described in `topi.layout`. The output block is the innermost loop of every
compute here, so the CPU schedules vectorize along it: one FMA per (input channel, tap) updates
a whole vector of output channels, with the input element broadcast.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from relaxmlir import te
from relaxmlir.topi.nn.conv2d import pad
from relaxmlir.topi.transform import reshape


def _padded_window(data: te.Tensor, kernel, strides, padding, dilation):
    """(`data` [N, C/b, H, W, b] zero-padded by (top, left, bottom, right), output rows,
    output columns) of a window of `kernel` taps."""
    _, _, h, w, _ = data.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilation
    top, left, bottom, right = padding
    padded = pad(data, (0, 0, top, left, 0), (0, 0, bottom, right, 0))
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    return padded, oh, ow


def conv2d_nchwc(
    data: te.Tensor,
    kernel: te.Tensor,
    strides: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    out_dtype: str | None = None,
) -> te.Tensor:
    """Cross-correlation of `data` [N, C/bi, H, W, bi] with `kernel` [O/bo, C/bi, KH, KW, bi, bo]
    into [N, O/bo, OH, OW, bo]; padding is (top, left, bottom, right). No groups."""
    out_dtype = out_dtype or data.dtype
    n, cb, _, _, bi = data.shape
    ob, cb2, kh, kw, bi2, bo = kernel.shape
    if (cb, bi) != (cb2, bi2):
        raise ValueError(
            f"conv2d_nchwc: data has {cb} x {bi} channel blocks, kernel expects {cb2} x {bi2}"
        )
    (sh, sw), (dh, dw) = strides, dilation
    padded, oh, ow = _padded_window(data, (kh, kw), strides, padding, dilation)
    # Reduction order: channel blocks, taps, then the block's channels innermost, so successive
    # steps read consecutive weight vectors and consecutive input elements.
    rc = te.reduce_axis((0, cb), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    ri = te.reduce_axis((0, bi), name="ri")

    def body(b, f, y, x, fi):
        v = padded[b, rc, y * sh + ry * dh, x * sw + rx * dw, ri]
        return te.sum(
            te.cast(v, out_dtype) * te.cast(kernel[f, rc, ry, rx, ri, fi], out_dtype),
            axis=[rc, ry, rx, ri],
        )

    return te.compute((n, ob, oh, ow, bo), body, name="T_conv2d_nchwc")


def depthwise_conv2d_nchwc(
    data: te.Tensor,
    kernel: te.Tensor,
    strides: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    out_dtype: str | None = None,
) -> te.Tensor:
    """Depthwise cross-correlation (one filter per channel, groups = channels) of `data`
    [N, C/b, H, W, b] with `kernel` [C/b, KH, KW, b] (an OIHW1i<b>o kernel without its unit
    axes: `relax.op.strategy.emit_depthwise_conv2d_nchwc` reshapes it) into [N, C/b, OH, OW, b];
    padding is (top, left, bottom, right).

    Written as a reduction over the window only: channel c of the output reads channel c of
    the input, so a vector along the block does one FMA per tap with no broadcast, and the
    convolution rule's register tile (a row of pixels x the block) keeps its sums in registers
    across the window. As a 9-term sum without reduction axes it was scheduled as an
    elementwise op one vector at a time (MobileNetV2's 144 x 56 x 56 layer: 112 vs 99 us). The
    kernel's unit axes read at index 0 would hide the window from the strided-window split
    (`lowering/schedule/phases.py`): a stride-2 layer fell back to scalar loops."""
    out_dtype = out_dtype or data.dtype
    n, cb, _, _, b = data.shape
    kb, kh, kw, bo = kernel.shape
    if (kb, bo) != (cb, b):
        raise ValueError(
            f"depthwise_conv2d_nchwc: data {list(data.shape)} needs a kernel of shape "
            f"[{cb}, KH, KW, {b}], got {list(kernel.shape)}"
        )
    (sh, sw), (dh, dw) = strides, dilation
    padded, oh, ow = _padded_window(data, (kh, kw), strides, padding, dilation)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")

    def body(i, c, y, x, ci):
        v = padded[i, c, y * sh + ry * dh, x * sw + rx * dw, ci]
        return te.sum(
            te.cast(v, out_dtype) * te.cast(kernel[c, ry, rx, ci], out_dtype), axis=[ry, rx]
        )

    return te.compute((n, cb, oh, ow, b), body, name="T_depthwise_conv2d_nchwc")


def grouped_conv2d_nchwc(
    data: te.Tensor,
    kernel: te.Tensor,
    strides: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    out_dtype: str | None = None,
) -> te.Tensor:
    """Grouped cross-correlation whose groups are one channel block each (RegNet's groups of 8
    channels in NCHW8c) of `data` [N, G, H, W, b] with `kernel` [G, KH, KW, b, b] (an
    OIHW<b>i<b>o kernel without its unit axis: `relax.op.strategy.emit_grouped_conv2d_nchwc`
    reshapes it) into [N, G, OH, OW, b]; padding is (top, left, bottom, right).

    Block g of the output reads block g of the input: the convolution rule's register tile
    takes it as a dense one whose filter and channel blocks coincide, and one kernel serves all
    groups, where one blocked convolution per group made RegNetY-400MF's graph 1459 ops (55
    kernel calls for a 440-channel layer)."""
    out_dtype = out_dtype or data.dtype
    n, g, _, _, b = data.shape
    kg, kh, kw, bi, bo = kernel.shape
    if (kg, bi, bo) != (g, b, b):
        raise ValueError(
            f"grouped_conv2d_nchwc: data {list(data.shape)} needs a kernel of shape "
            f"[{g}, KH, KW, {b}, {b}], got {list(kernel.shape)}"
        )
    (sh, sw), (dh, dw) = strides, dilation
    padded, oh, ow = _padded_window(data, (kh, kw), strides, padding, dilation)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    ri = te.reduce_axis((0, b), name="ri")

    def body(i, f, y, x, fi):
        v = padded[i, f, y * sh + ry * dh, x * sw + rx * dw, ri]
        return te.sum(
            te.cast(v, out_dtype) * te.cast(kernel[f, ry, rx, ri, fi], out_dtype),
            axis=[ry, rx, ri],
        )

    return te.compute((n, g, oh, ow, b), body, name="T_grouped_conv2d_nchwc")


def grouped_conv2d_nchwc_blocks(
    data: te.Tensor,
    kernel: te.Tensor,
    strides: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    out_dtype: str | None = None,
) -> te.Tensor:
    """Grouped cross-correlation whose groups span several channel blocks (ResNeXt-50's last
    stage: 32 groups of 32 channels in NCHW16c) of `data` [N, G*KI, H, W, bi] with `kernel`
    [G, KO, KI, KH, KW, bi, bo] into [N, G, KO, OH, OW, bo] (the caller reshapes it to
    [N, G*KO, OH, OW, bo], the same bytes); padding is (top, left, bottom, right).

    Block `o` of group `g` sums the group's KI input blocks: the group is a loop of its own
    that the image and the kernel share, so the convolution rule's register tile runs over the
    group's output blocks, which read the same input pixels. Split into one blocked
    convolution per group it was 32 kernel calls, 32 slices and a concatenation per layer."""
    out_dtype = out_dtype or data.dtype
    n, cb, _, _, bi = data.shape
    g, ko, ki, kh, kw, bi2, bo = kernel.shape
    if bi2 != bi or g * ki != cb:
        raise ValueError(
            f"grouped_conv2d_nchwc_blocks: data {list(data.shape)} needs a kernel of shape "
            f"[G, KO, {cb} / G, KH, KW, {bi}, BO], got {list(kernel.shape)}"
        )
    (sh, sw), (dh, dw) = strides, dilation
    padded, oh, ow = _padded_window(data, (kh, kw), strides, padding, dilation)
    rc = te.reduce_axis((0, ki), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    ri = te.reduce_axis((0, bi), name="ri")

    def body(i, grp, f, y, x, fi):
        v = padded[i, grp * ki + rc, y * sh + ry * dh, x * sw + rx * dw, ri]
        return te.sum(
            te.cast(v, out_dtype) * te.cast(kernel[grp, f, rc, ry, rx, ri, fi], out_dtype),
            axis=[rc, ry, rx, ri],
        )

    return te.compute((n, g, ko, oh, ow, bo), body, name="T_grouped_conv2d_nchwc_blocks")


def pool2d_nchwc(
    data: te.Tensor,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    padding: Sequence[int],
    pool_type: str,
    count_include_pad: bool = True,
) -> te.Tensor:
    """Max or average pooling over the H, W axes of [N, C/b, H, W, b]; no ceil_mode. Padding
    never wins the max; average divisors follow torch (`topi.nn.pool2d`): the window, or with
    `count_include_pad` off the part of it inside the input."""
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool2d_nchwc: unknown pool_type '{pool_type}'")
    n, cb, h, w, b = data.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    top, left, bottom, right = padding
    if pool_type == "avg" and (dh, dw) != (1, 1):
        raise ValueError("pool2d_nchwc: average pooling with dilation")
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    # The window's taps unrolled (a 3x3 window: 9 strided reads, each a view once normalized),
    # so the kernel is elementwise over the output and vectorizes along the channel block; as a
    # reduction over an overlapping strided window it ran as scalar loops (0.7 ms on ResNet-18).
    taps = [(ty, tx) for ty in range(kh) for tx in range(kw)]
    if pool_type == "max" and (dh, dw) == (1, 1) and max(top, bottom) < kh and max(left, right) < kw:
        # A tap past an edge reads the edge instead: with contiguous taps the edge is in the
        # window too, so the maximum is the same, and no padded copy of the input is made.
        def row(y, ty):
            return te.min(te.max(y * sh + ty - top, 0), h - 1)

        def col(x, tx):
            return te.min(te.max(x * sw + tx - left, 0), w - 1)

        def read(i, c, y, x, ci, ty, tx):
            return data[i, c, row(y, ty), col(x, tx), ci]
    else:
        fill = te.const(-math.inf if pool_type == "max" else 0.0, data.dtype)
        padded = pad(data, (0, 0, top, left, 0), (0, 0, bottom, right, 0), fill.arg)

        def read(i, c, y, x, ci, ty, tx):
            return padded[i, c, y * sh + ty * dh, x * sw + tx * dw, ci]

    def inside(i, stride_, k, lo, size):
        """Taps of the window at output index `i` that lie inside the input (along one axis)."""
        start = i * stride_ - lo
        return te.min(start + k, size) - te.max(start, 0)

    # No ceil_mode: every window lies inside the padded input, so where the padding counts (or
    # there is none) every divisor is the window's, a constant.
    uniform = count_include_pad or not (top or left or bottom or right)

    def body(i, c, y, x, ci):
        reads = [read(i, c, y, x, ci, ty, tx) for ty, tx in taps]
        out = reads[0]
        for r in reads[1:]:
            out = te.max(out, r) if pool_type == "max" else out + r
        if pool_type == "max":
            return out
        if uniform:
            return out / te.const(float(kh * kw), data.dtype)
        count = inside(y, sh, kh, top, h) * inside(x, sw, kw, left, w)
        return out / te.cast(count, data.dtype)

    return te.compute((n, cb, oh, ow, b), body, name=f"T_pool_{pool_type}_nchwc")


def global_avg_pool_nchwc(data: te.Tensor) -> te.Tensor:
    """Mean over H and W of [N, C/b, H, W, b] into [N, C/b, 1, 1, b]."""
    n, cb, h, w, b = data.shape
    ry = te.reduce_axis((0, h), name="ry")
    rx = te.reduce_axis((0, w), name="rx")
    total = te.compute(
        (n, cb, 1, 1, b),
        lambda i, c, y, x, ci: te.sum(data[i, c, ry, rx, ci], axis=[ry, rx]),
        name="T_pool_sum_nchwc",
    )
    return te.compute(
        (n, cb, 1, 1, b),
        lambda *i: total[i] / te.const(float(h * w), data.dtype),
        name="T_pool_avg_nchwc",
    )


def phase_kernel(kernel: te.Tensor, stride: int) -> te.Tensor:
    """The taps of a stride-s blocked kernel [O/bo, C/bi, K, K, bi, bo] sorted by input phase
    (`conv2d_nchwc_phased`): [O/bo, C/bi * P * P, KQ, KQ, bi, bo] where channel block
    (c, py, px) at tap (qy, qx) is the kernel's tap (s*qy + py, s*qx + px), zero past the kernel;
    P = min(s, K) phases, KQ = ceil(K / s) taps per phase."""
    ob, cb, kh, kw, bi, bo = kernel.shape
    if kh != kw:
        raise ValueError(f"phase_kernel: square kernels only, got {kh}x{kw}")
    s, p, kq = stride, min(stride, kh), -(-kh // stride)
    zero = te.const(0, kernel.dtype)

    def tap(f, k, qy, qx, ci, fi):
        c, py, px = te.floordiv(k, p * p), te.floordiv(te.floormod(k, p * p), p), te.floormod(k, p)
        y, x = s * qy + py, s * qx + px
        return te.if_then_else(te.all(y < kh, x < kw), kernel[f, c, y, x, ci, fi], zero)

    return te.compute((ob, cb * p * p, kq, kq, bi, bo), tap, name="T_phase_kernel")


def phase_taps(kernel: te.Tensor, stride: int, py: int, px: int) -> te.Tensor:
    """The taps of a stride-s blocked kernel [O/bo, C/bi, KH, KW, bi, bo] that read input phase
    (py, px): [O/bo, C/bi, KQy, KQx, bi, bo] with tap (qy, qx) the kernel's (s*qy + py,
    s*qx + px), KQy = ceil((KH - py) / s): only real taps, no zeros."""
    ob, cb, kh, kw, bi, bo = kernel.shape
    s = stride
    kqy, kqx = -(-(kh - py) // s), -(-(kw - px) // s)
    return te.compute(
        (ob, cb, kqy, kqx, bi, bo),
        lambda f, c, qy, qx, ci, fi: kernel[f, c, s * qy + py, s * qx + px, ci, fi],
        name="T_phase_taps",
    )


def phase_part(phases: te.Tensor, p: int, py: int, px: int, rows: int, cols: int) -> te.Tensor:
    """Input phase (py, px) of `phase_split`'s output, its first `rows` x `cols`:
    [N, C/bi, rows, cols, bi] (the operand of that phase's unit-stride convolution)."""
    n, cpp, _, _, bi = phases.shape
    cb, k = cpp // (p * p), py * p + px
    return te.compute(
        (n, cb, rows, cols, bi),
        lambda b, c, y, x, ci: phases[b, c * p * p + k, y, x, ci],
        name="T_phase_part",
    )


def phase_split(
    data: te.Tensor, kernel_size: int, stride: int, padding: Sequence[int]
) -> te.Tensor:
    """The input of a stride-s blocked convolution with a `kernel_size` kernel, padded and split
    by phase: [N, C/bi * P * P, OH + KQ - 1, OW + KQ - 1, bi], where channel block (c, py, px) row
    y is padded row s*y + py. Input row s*y + (s*q + p) is row y + q of phase p, so a unit-stride
    convolution with the `phase_kernel` computes the strided one (what the register-tiled schedule
    reads), at the cost of the zero taps (16 for 9 on 3x3 / 2, 64 for 49 on 7x7 / 2, none on
    1x1); or each phase (`phase_part`) convolved with its own taps (`phase_taps`), summed.
    It is its own kernel: fused into the convolution, its strided reads would become the window's."""
    n, cb, h, w, bi = data.shape
    s, k = stride, kernel_size
    p, kq = min(s, k), -(-k // s)
    top, left, bottom, right = padding
    oh = (h + top + bottom - k) // s + 1
    ow = (w + left + right - k) // s + 1
    hq, wq = oh + kq - 1, ow + kq - 1
    # rows past the original padding are read only by zero taps: zeros are enough there
    padded = pad(
        data,
        (0, 0, top, left, 0),
        (0, 0, max(bottom, s * hq - h - top), max(right, s * wq - w - left), 0),
    )
    split = te.compute(
        (n, cb, p, p, hq, wq, bi),
        lambda b, c, py, px, y, x, ci: padded[b, c, s * y + py, s * x + px, ci],
        name="T_phase_split",
    )
    return reshape(split, (n, cb * p * p, hq, wq, bi))
