"""Channel-blocked data layouts (oneDNN's nChw16c, TVM's NCHW16c) and the transforms between them.

"NCHW16c" splits the channels into blocks of 16 and makes the block the innermost axis:
`x5[n, c // 16, h, w, c % 16] = x[n, c, h, w]`. A convolution in that layout reads its weights
as one vector per (input channel, tap) and its output channels fill every lane, whatever the
image width (a 7x7 map fills 7 of 16 lanes in NCHW). Kernels are "OIHW{i}i{o}o":
`w6[o // bo, i // bi, kh, kw, i % bi, o % bo] = w[o, i, kh, kw]`.
"""

from __future__ import annotations

import re

from relaxmlir import te
from relaxmlir.topi.transform import reshape

_DATA = re.compile(r"NCHW(?:([1-9][0-9]*)c)?")
_KERNEL = re.compile(r"OIHW(?:([1-9][0-9]*)i([1-9][0-9]*)o)?")


def channel_block(layout: str) -> int:
    """The channel block of a data layout: 0 for "NCHW", 16 for "NCHW16c"."""
    m = _DATA.fullmatch(layout) if isinstance(layout, str) else None
    if m is None:
        raise ValueError(f"unsupported data layout ({layout!r}): expected NCHW or NCHW<b>c, e.g. NCHW16c")
    return int(m.group(1) or 0)


def kernel_blocks(layout: str) -> tuple[int, int]:
    """(input block, output block) of a kernel layout: (0, 0) for "OIHW"."""
    m = _KERNEL.fullmatch(layout) if isinstance(layout, str) else None
    if m is None:
        raise ValueError(
            f"unsupported kernel layout ({layout!r}): expected OIHW or OIHW<i>i<o>o, e.g. OIHW16i16o"
        )
    return int(m.group(1) or 0), int(m.group(2) or 0)


def data_layout(block: int) -> str:
    return f"NCHW{block}c" if block else "NCHW"


def blocked_shape(shape, block: int) -> list:
    """The NCHW `shape` in "NCHW{block}c" (the channels must divide into blocks)."""
    n, c, h, w = shape
    if not isinstance(c, int) or c % block:
        raise ValueError(f"layout NCHW{block}c: channels ({c}) do not divide into blocks of {block}")
    return [n, c // block, h, w, block]


def nchw_shape(shape) -> list:
    """The NCHW shape of a channel-blocked `shape` [n, c, h, w, b]."""
    n, c, h, w, b = shape
    return [n, c * b, h, w]


def transform_shape(shape, src: str, dst: str) -> list:
    """The shape of `layout_transform` from `src` to `dst` (validating both)."""
    s, d = channel_block(src), channel_block(dst)
    expected = 5 if s else 4
    if len(shape) != expected:
        raise ValueError(f"layout_transform: a {src} tensor has rank {expected}, got shape {list(shape)}")
    nchw = nchw_shape(shape) if s else list(shape)
    return blocked_shape(nchw, d) if d else nchw


def layout_transform(data: te.Tensor, src_layout: str, dst_layout: str) -> te.Tensor:
    """`data` re-laid out from `src_layout` to `dst_layout` (each NCHW or NCHW<b>c)."""
    s, d = channel_block(src_layout), channel_block(dst_layout)
    shape = transform_shape(data.shape, src_layout, dst_layout)
    if s and not d:
        # Back to NCHW: a transpose to [N, C/b, b, H, W], whose reads are a view of the input
        # in its loops, then a reshape (a view of the result). Written over the NCHW output,
        # channel c read at (c // b, c % b) is no affine view: it ran as scalar loops (NCHW16c
        # -> NCHW of 96 x 56 x 56: 158 us).
        n, cb, h, w, b = data.shape
        blocks = te.compute(
            (n, cb, b, h, w), lambda i, c, ci, y, x: data[i, c, y, x, ci], name="T_layout_trans"
        )
        return reshape(blocks, shape)
    if s and d and (s % d == 0 or d % s == 0):
        # Block to block (NCHW16c <-> NCHW8c beside RegNet's grouped convolutions): runs of
        # min(s, d) channels move whole. Each read is then a view of the input (a block split
        # or joined), then a reshape; through NCHW it was a transpose and a scalar gather.
        n, cb, h, w, _ = data.shape
        if s > d:
            k = s // d
            parts = te.compute(
                (n, cb, k, h, w, d),
                lambda i, c, j, y, x, ci: data[i, c, y, x, j * d + ci],
                name="T_layout_trans",
            )
        else:
            k = d // s
            parts = te.compute(
                (n, cb // k, h, w, k, s),
                lambda i, c, y, x, j, ci: data[i, c * k + j, y, x, ci],
                name="T_layout_trans",
            )
        return reshape(parts, shape)

    def channel(*i):  # the NCHW channel of output index i
        return i[1] * d + i[4] if d else i[1]

    def body(*i):
        c = channel(*i)
        if s:
            return data[i[0], te.floordiv(c, s), i[2], i[3], te.floormod(c, s)]
        return data[i[0], c, i[2], i[3]]

    return te.compute(shape, body, name="T_layout_trans")
