"""Padding and resizing rules: F.pad (constant, reflect, replicate, circular) and
F.interpolate / upsample (nearest, nearest-exact, linear, bilinear, trilinear, area).

Resizing is decomposed as TVM's importer does for static shapes: one `take` per spatial axis
at indices computed here with torch's own float32 index arithmetic, and for the linear modes a
lerp between two such takes with constant weights, axis by axis from the last (the order of
torch's CPU kernel).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Importer, register
from relaxmlir.frontend.rules.common import F, aten, call, emit_binary, first, ndim, shape_of
from relaxmlir.frontend.rules.slicing import strided_slice
from relaxmlir.relax.expr import const


# -- padding --------------------------------------------------------------------------------
def pad(ctx: Importer, x, widths, mode: str = "constant", value=None, where: str = ""):
    """torch's `pad`: pairs (before, after) from the LAST axis backwards; negative widths crop."""
    widths = [int(w) for w in widths]
    if len(widths) % 2 or len(widths) // 2 > ndim(x):
        raise ValueError(f"pad: {len(widths)} widths for a rank-{ndim(x)} input{where}")
    pairs = [(0, 0)] * ndim(x)
    for i in range(len(widths) // 2):
        pairs[ndim(x) - 1 - i] = (widths[2 * i], widths[2 * i + 1])
    if any(lo < 0 or hi < 0 for lo, hi in pairs):  # crop first, then pad the rest
        axes = [a for a, (lo, hi) in enumerate(pairs) if lo < 0 or hi < 0]
        x = strided_slice(
            ctx,
            x,
            axes,
            [max(0, -pairs[a][0]) for a in axes],
            [shape_of(x)[a] - max(0, -pairs[a][1]) for a in axes],
        )
        pairs = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    if not any(lo or hi for lo, hi in pairs):
        return x
    if mode == "circular":
        for a, (lo, hi) in enumerate(pairs):
            if lo or hi:
                size = shape_of(x)[a]
                parts = [strided_slice(ctx, x, [a], [size - lo], [size])] if lo else []
                parts += [x] + ([strided_slice(ctx, x, [a], [0], [hi])] if hi else [])
                x = call(ctx, "concat", parts, a)
        return x
    relax_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}.get(mode)
    if relax_mode is None:
        raise NotImplementedError(f"pad mode '{mode}'{where}")
    flat = [w for pair in pairs for w in pair]
    return call(ctx, "nn.pad", x, flat, relax_mode, 0.0 if value is None else float(value))


def _pad(ctx: Importer, node: fx.Node):
    """`F.pad(input, pad, mode, value)`; also `aten.pad` and `aten.constant_pad_nd`."""
    nd = node.target in (torch.constant_pad_nd, aten.constant_pad_nd.default)
    mode = "constant" if nd else ctx.arg(node, 2, "mode", "constant")
    value = ctx.arg(node, 2 if nd else 3, "value")
    x, widths = first(ctx, node), ctx.arg(node, 1, ("pad", "padding"))
    return pad(ctx, x, widths, mode, value, f" at node '{node.name}'")


def _mode_pad(mode: str):
    def rule(ctx: Importer, node: fx.Node):
        return pad(ctx, first(ctx, node), ctx.arg(node, 1, "padding"), mode)

    return rule


register(_pad, F.pad, torch.constant_pad_nd, aten.pad, aten.constant_pad_nd)
register(_mode_pad("reflect"), aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d)
register(
    _mode_pad("replicate"),
    aten.replication_pad1d,
    aten.replication_pad2d,
    aten.replication_pad3d,
)


# -- interpolate ----------------------------------------------------------------------------
def _nearest_index(in_size: int, out_size: int, scale, exact: bool) -> np.ndarray:
    """torch's `nearest_idx` / `nearest_neighbor_exact_compute_source_index` in float32."""
    ratio = np.float32(1.0 / scale if scale else in_size / out_size)
    dst = np.arange(out_size, dtype=np.float32) + np.float32(0.5 if exact else 0.0)
    return np.minimum(np.floor(dst * ratio).astype(np.int64), in_size - 1)


def _linear_weights(in_size: int, out_size: int, scale, align_corners: bool):
    """(index0, index1, lambda0, lambda1) of torch's `compute_source_index_and_lambda`."""
    if in_size == out_size:
        idx = np.arange(out_size)
        return idx, idx, np.ones(out_size, np.float32), np.zeros(out_size, np.float32)
    if align_corners:
        ratio = np.float32((in_size - 1) / (out_size - 1) if out_size > 1 else 0.0)
        real = ratio * np.arange(out_size, dtype=np.float32)
    else:
        ratio = np.float32(1.0 / scale if scale else in_size / out_size)
        real = ratio * (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) - np.float32(0.5)
        real = np.maximum(real, np.float32(0.0))
    i0 = np.minimum(real.astype(np.int64), in_size - 1)
    lam1 = np.clip(real - i0.astype(np.float32), 0, 1).astype(np.float32)
    i1 = i0 + (i0 < in_size - 1)
    return i0, i1, (np.float32(1) - lam1).astype(np.float32), lam1


def _weight_const(w: np.ndarray, axis: int, rank: int, dtype: str):
    shape = [1] * rank
    shape[axis] = len(w)
    return const(w.astype(dtype).reshape(shape))


def interpolate(ctx: Importer, x, size, scales, mode: str, align_corners: bool, where: str = ""):
    """Resize the spatial axes (2..) of `x` to `size` (or by `scales`)."""
    spatial = ndim(x) - 2
    in_sizes = list(shape_of(x)[2:])
    if not all(isinstance(d, int) for d in in_sizes):
        raise NotImplementedError(f"interpolate over symbolic spatial sizes{where}")
    scales = list(scales) if isinstance(scales, (list, tuple)) else [scales] * spatial
    if size is not None:
        out_sizes = list(size) if isinstance(size, (list, tuple)) else [size] * spatial
        scales = [None] * spatial if scales == [None] * spatial else scales
    else:
        out_sizes = [math.floor(d * s) for d, s in zip(in_sizes, scales)]
    if mode == "area":  # adaptive average pooling; 1-D as 2-D over a height of 1
        if spatial not in (1, 2):
            raise NotImplementedError(f"interpolate mode 'area' on {spatial} spatial axes{where}")
        sizes = [int(s) for s in out_sizes]
        if spatial == 1:
            out = call(ctx, "nn.adaptive_avg_pool2d", call(ctx, "expand_dims", x, 2), [1] + sizes)
            return call(ctx, "squeeze", out, [2])
        return call(ctx, "nn.adaptive_avg_pool2d", x, sizes)
    if mode not in ("nearest", "nearest-exact", "linear", "bilinear", "trilinear"):
        raise NotImplementedError(f"interpolate mode '{mode}'{where}")
    dtype = x.struct_info.dtype
    for i in reversed(range(spatial)):
        axis, n_in, n_out, scale = 2 + i, in_sizes[i], int(out_sizes[i]), scales[i]
        if mode.startswith("nearest"):
            if n_in != n_out:
                index = _nearest_index(n_in, n_out, scale, mode == "nearest-exact")
                x = call(ctx, "take", x, const(index), axis)
            continue
        i0, i1, lam0, lam1 = _linear_weights(n_in, n_out, scale, bool(align_corners))
        if n_in == n_out:
            continue
        lo = call(ctx, "take", x, const(i0), axis)
        hi = call(ctx, "take", x, const(i1), axis)
        x = emit_binary(
            ctx,
            "add",
            emit_binary(ctx, "multiply", lo, _weight_const(lam0, axis, ndim(x), dtype)),
            emit_binary(ctx, "multiply", hi, _weight_const(lam1, axis, ndim(x), dtype)),
        )
    return x


def _interpolate(ctx: Importer, node: fx.Node):
    """`F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
    antialias)`."""
    x, where = first(ctx, node), f" at node '{node.name}'"
    if ctx.arg(node, 6, "antialias", False):
        raise NotImplementedError(f"interpolate with antialias{where}")
    size, scale = ctx.arg(node, 1, "size"), ctx.arg(node, 2, "scale_factor")
    mode = ctx.arg(node, 3, "mode", "nearest")
    if ctx.arg(node, 5, "recompute_scale_factor") and size is None:
        spatial = shape_of(x)[2:]
        scales = scale if isinstance(scale, (list, tuple)) else [scale] * len(spatial)
        size, scale = [math.floor(d * s) for d, s in zip(spatial, scales)], None
    return interpolate(ctx, x, size, scale, mode, ctx.arg(node, 4, "align_corners"), where)


def _upsample(mode: str):
    """`aten.upsample_<mode>{1,2,3}d`: `.vec(input, output_size, [align_corners,] scale_factors)`
    or `.default(input, output_size, [align_corners,] scales...)`."""
    linear = mode not in ("nearest", "nearest-exact")

    def rule(ctx: Importer, node: fx.Node):
        x = first(ctx, node)
        size = ctx.arg(node, 1, "output_size")
        align = ctx.arg(node, 2, "align_corners", False) if linear else False
        rest = [ctx.retrieve(a) for a in node.args[3 if linear else 2 :]]
        if node.target._overloadname == "vec":
            scales = rest[0] if rest else ctx.arg(node, None, "scale_factors")
        else:
            scales = rest or [None] * (ndim(x) - 2)
        return interpolate(ctx, x, size, scales, mode, align, f" at node '{node.name}'")

    return rule


register(_interpolate, F.interpolate, F.upsample)
register(
    _upsample("nearest"), aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d
)
register(
    _upsample("nearest-exact"),
    aten._upsample_nearest_exact1d,
    aten._upsample_nearest_exact2d,
    aten._upsample_nearest_exact3d,
)
register(_upsample("linear"), aten.upsample_linear1d)
register(_upsample("bilinear"), aten.upsample_bilinear2d)
register(_upsample("trilinear"), aten.upsample_trilinear3d)
