"""Neural-network rules: matmul/linear, softmax, norms, conv, pooling, embedding, attention."""

from __future__ import annotations

import itertools
import operator

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Deferred, Importer, Rule, dtype_str, is_tensor, register
from relaxmlir.frontend.rules.common import (
    F,
    as_tensor,
    astype,
    aten,
    axis,
    call,
    emit_binary,
    first,
    make_pair,
    ndim,
    shape_of,
)
from relaxmlir.frontend.rules.shape import reshape, squeeze, transpose
from relaxmlir.relax.expr import Constant, const
from relaxmlir.runtime.dtype import np_dtype


# -- matrix products ------------------------------------------------------------------------
def _matmul(ctx: Importer, node: fx.Node):
    return call(ctx, "matmul", first(ctx, node), ctx.arg(node, 1, ("other", "mat2")))


def _half(x) -> str | None:
    """x's dtype when it is float16/bfloat16: torch then adds the bias of linear/addmm to the
    float32 accumulator and rounds once, which the import reproduces."""
    dtype = x.struct_info.dtype
    return dtype if dtype in ("float16", "bfloat16") else None


def _linear(ctx: Importer, node: fx.Node):
    x, w, b = first(ctx, node), ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    half = _half(x) if b is not None else None
    if half:
        out = call(ctx, "linear", x, w, astype(ctx, b, "float32"), "float32")
        return astype(ctx, out, half)
    return call(ctx, "linear", x, w, b)


def _addmm(ctx: Importer, node: fx.Node):
    """`beta * input + alpha * (mat1 @ mat2)` (also `baddbmm`)."""
    bias, a = first(ctx, node), ctx.arg(node, 1, ("mat1", "batch1"))
    b = ctx.arg(node, 2, ("mat2", "batch2"))
    beta, alpha = ctx.arg(node, None, "beta", 1), ctx.arg(node, None, "alpha", 1)
    half = _half(a)
    out = call(ctx, "matmul", a, b, "float32") if half else call(ctx, "matmul", a, b)
    if half:
        bias = astype(ctx, bias, "float32")
    if alpha != 1:
        out = emit_binary(ctx, "multiply", out, alpha)
    if beta != 1:
        bias = emit_binary(ctx, "multiply", bias, beta)
    out = emit_binary(ctx, "add", out, bias) if beta != 0 else out
    return astype(ctx, out, half) if half else out


register(
    _matmul,
    torch.matmul,
    operator.matmul,
    "matmul",
    torch.mm,
    torch.bmm,
    "mm",
    "bmm",
    aten.matmul,
    aten.mm,
    aten.bmm,
)
register(_linear, F.linear, aten.linear)
register(_addmm, torch.addmm, torch.baddbmm, aten.addmm, aten.baddbmm)


# -- softmax and normalisations ------------------------------------------------------------
def softmax(ctx: Importer, op_name: str, x, dim):
    """`nn.softmax` / `nn.log_softmax` over `dim` (the last axis when None)."""
    return call(ctx, op_name, x, axis(-1 if dim is None else dim, ndim(x)))


def softmax_rule(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
        dtype = ctx.arg(node, 2, "dtype") if not str(node.target).startswith("aten._") else None
        if isinstance(dtype, torch.dtype):
            x = astype(ctx, x, dtype_str(dtype))
        return softmax(ctx, op_name, x, dim)

    return rule


register(
    softmax_rule("nn.softmax"), torch.softmax, F.softmax, "softmax", aten.softmax, aten._softmax
)
register(
    softmax_rule("nn.log_softmax"),
    torch.log_softmax,
    F.log_softmax,
    "log_softmax",
    aten.log_softmax,
    aten._log_softmax,
)


def default_param(ctx: Importer, param, channels: int, dtype: str, fill: float):
    """An absent affine parameter (gamma/beta) as a constant filled with `fill`."""
    return param if param is not None else const(np.full((channels,), fill, dtype=dtype))


def batch_norm(ctx: Importer, x, weight, bias, mean, var, eps: float):
    """Inference batch normalisation over axis 1."""
    channels, dtype = shape_of(mean)[0], x.struct_info.dtype
    weight = default_param(ctx, weight, channels, dtype, 1.0)
    bias = default_param(ctx, bias, channels, dtype, 0.0)
    out = call(ctx, "nn.batch_norm", x, weight, bias, mean, var, axis=1, epsilon=eps)
    return out[0] if isinstance(out, tuple) else out


def layer_norm(ctx: Importer, x, normalized_shape, weight, bias, eps: float):
    shape = [
        int(d)
        for d in (
            normalized_shape if isinstance(normalized_shape, (list, tuple)) else [normalized_shape]
        )
    ]
    dtype = x.struct_info.dtype
    weight = weight if weight is not None else const(np.ones(shape, dtype=dtype))
    bias = bias if bias is not None else const(np.zeros(shape, dtype=dtype))
    axes = list(range(ndim(x) - len(shape), ndim(x)))
    return call(ctx, "nn.layer_norm", x, weight, bias, axes, epsilon=eps)


def _batch_norm(ctx: Importer, node: fx.Node):
    """`F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)`."""
    x, mean, var = (
        first(ctx, node),
        ctx.arg(node, 1, "running_mean"),
        ctx.arg(node, 2, "running_var"),
    )
    weight, bias = ctx.arg(node, 3, "weight"), ctx.arg(node, 4, "bias")
    if ctx.arg(node, 5, "training", False):
        raise NotImplementedError(f"batch_norm in training mode at node '{node.name}'")
    return batch_norm(ctx, x, weight, bias, mean, var, ctx.arg(node, 7, "eps", 1e-5))


def layer_norm_rule(ctx: Importer, node: fx.Node):
    """`F.layer_norm(input, normalized_shape, weight, bias, eps)`; also `native_layer_norm`."""
    x, shape = first(ctx, node), ctx.arg(node, 1, "normalized_shape")
    weight, bias = ctx.arg(node, 2, "weight"), ctx.arg(node, 3, "bias")
    return layer_norm(ctx, x, shape, weight, bias, ctx.arg(node, 4, "eps", 1e-5))


register(_batch_norm, F.batch_norm)
register(layer_norm_rule, F.layer_norm, aten.layer_norm)


# -- convolution, pooling, embedding, attention ---------------------------------------------
def conv2d(ctx: Importer, x, weight, bias, stride, padding, dilation, groups: int):
    """NCHW / OIHW convolution; `padding` may be ints or "same"/"valid"; a rank-3 weight is
    conv1d; an input without the batch axis (rank of the weight minus one) is unbatched."""
    if ndim(x) == ndim(weight) - 1:
        out = conv2d(
            ctx, call(ctx, "expand_dims", x, 0), weight, bias, stride, padding, dilation, groups
        )
        return squeeze(ctx, out, [0])
    if ndim(weight) == 5:
        return conv3d(ctx, x, weight, bias, stride, padding, dilation, groups)
    if ndim(weight) == 3:  # conv1d as conv2d over a height of 1
        x4 = call(ctx, "expand_dims", x, 2)
        w4 = call(ctx, "expand_dims", weight, 2)
        pad = padding if isinstance(padding, str) else [0] + make_pair(padding, 1)
        out = conv2d(
            ctx, x4, w4, bias, [1] + make_pair(stride, 1), pad, [1] + make_pair(dilation, 1), groups
        )
        return squeeze(ctx, out, [2])
    stride, dilation = make_pair(stride), make_pair(dilation)
    if padding == "valid":
        padding = [0, 0]
    elif padding == "same":
        kernel = shape_of(weight)[2:]
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        padding = [t // 2 for t in total] + [t - t // 2 for t in total]
    padding = make_pair(padding) if len(make_pair(padding)) == 2 else list(padding)
    out = call(
        ctx,
        "nn.conv2d",
        x,
        weight,
        strides=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
    )
    if bias is None:
        return out
    return emit_binary(ctx, "add", out, reshape(ctx, bias, [1, shape_of(bias)[0], 1, 1]))


def conv3d(ctx: Importer, x, weight, bias, stride, padding, dilation, groups: int):
    """NCDHW / OIDHW convolution as one 2-D convolution per depth tap of the filter: the depth
    slices a tap reads (strided) fold into the batch, N x OD images, and the taps' results add
    up. A video model's 3x3x3 conv runs as three conv2d on the conv rule's blocked kernels
    instead of a loop nest of its own; the depth padding is a pad of the input, the height and
    width padding the conv2d's."""
    from relaxmlir.frontend.rules.slicing import strided_slice

    stride, dilation = make_pair(stride, 3), make_pair(dilation, 3)
    kernel = shape_of(weight)[2:]
    if padding == "valid":
        padding = [0, 0, 0]
    if padding == "same":
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        low, high = [t // 2 for t in total], [t - t // 2 for t in total]
    else:
        low = high = make_pair(padding, 3)
    channels, depth = shape_of(x)[1], shape_of(x)[2]
    if not isinstance(depth, int):
        raise NotImplementedError("conv3d over a symbolic depth (from the PyTorch frontend)")
    if low[0] or high[0]:
        x = call(ctx, "nn.pad", x, [0, 0, 0, 0, low[0], high[0], 0, 0, 0, 0], "constant", 0.0)
    out_depth = (depth + low[0] + high[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    if out_depth < 1:
        raise ValueError(
            f"conv3d: the input's depth {depth} (padded {depth + low[0] + high[0]}) is smaller "
            f"than the filter's dilated depth {dilation[0] * (kernel[0] - 1) + 1}"
        )
    total = None
    for tap in range(kernel[0]):
        start = tap * dilation[0]
        end = start + (out_depth - 1) * stride[0] + 1
        xs = strided_slice(ctx, x, [2], [start], [end], [stride[0]])
        xs = call(ctx, "permute_dims", xs, [0, 2, 1, 3, 4])
        xs = reshape(ctx, xs, [-1, channels, *shape_of(x)[3:]])
        ws = squeeze(ctx, strided_slice(ctx, weight, [2], [tap], [tap + 1]), [2])
        pads = [low[1], low[2], high[1], high[2]]
        y = conv2d(ctx, xs, ws, None, stride[1:], pads, dilation[1:], groups)
        total = y if total is None else emit_binary(ctx, "add", total, y)
    out = reshape(ctx, total, [-1, out_depth, *shape_of(total)[1:]])
    out = call(ctx, "permute_dims", out, [0, 2, 1, 3, 4])
    if bias is None:
        return out
    return emit_binary(ctx, "add", out, reshape(ctx, bias, [1, shape_of(bias)[0], 1, 1, 1]))


def _pool_window(kernel, stride, n: int = 2) -> tuple[list, list]:
    """(kernel, stride) with one entry per spatial axis; torch's stride defaults to the kernel
    size."""
    kernel = make_pair(kernel, n)
    return kernel, make_pair(stride, n) if stride not in (None, [], ()) else kernel


def _lowest(dtype: str):
    """The value below every element of `dtype`: what max pooling pads with."""
    np_type = np_dtype(dtype)
    if np.issubdtype(np_type, np.floating) or np_type.kind == "V":  # V: bfloat16
        return float("-inf")
    return int(np.iinfo(np_type).min)


def unbatched(pool):
    """A pooling helper that also takes an input without the batch axis (rank 3)."""

    def wrapper(ctx: Importer, x, *args, **kwargs):
        if ndim(x) != 3:
            return pool(ctx, x, *args, **kwargs)
        return squeeze(ctx, pool(ctx, call(ctx, "expand_dims", x, 0), *args, **kwargs), [0])

    return wrapper


@unbatched
def max_pool2d(ctx: Importer, x, kernel, stride, padding, dilation, ceil_mode: bool):
    kernel, stride = _pool_window(kernel, stride)
    return call(
        ctx,
        "nn.max_pool2d",
        x,
        pool_size=kernel,
        strides=stride,
        padding=make_pair(padding),
        dilation=make_pair(dilation),
        ceil_mode=ceil_mode,
    )


@unbatched
def avg_pool2d(
    ctx: Importer,
    x,
    kernel,
    stride,
    padding,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override=None,
):
    kernel, stride = _pool_window(kernel, stride)
    padding = make_pair(padding)
    kwargs = {"count_include_pad": count_include_pad} if any(padding) else {}
    if divisor_override:
        kwargs = {"count_include_pad": True}
    out = call(
        ctx,
        "nn.avg_pool2d",
        x,
        pool_size=kernel,
        strides=stride,
        padding=padding,
        ceil_mode=ceil_mode,
        **kwargs,
    )
    if not divisor_override:
        return out
    # sum / divisor_override: the average times its window size (torch's count_include_pad
    # window, clipped to the padded input where ceil_mode runs past it) over the divisor
    counts = [
        _window_counts(size, k, st, p, out_size)
        for size, k, st, p, out_size in zip(
            shape_of(x)[2:], kernel, stride, padding, shape_of(out)[2:]
        )
    ]
    factor = np.outer(counts[0], counts[1]) / float(divisor_override)
    return emit_binary(ctx, "multiply", out, const(factor.astype(x.struct_info.dtype)))


def _window_counts(size: int, k: int, stride: int, pad: int, out_size: int) -> np.ndarray:
    start = np.arange(out_size) * stride - pad
    return np.minimum(start + k, size + pad) - start


def _lead(value, fill) -> list:
    """A 1-D window parameter as the 2-D one over a height of 1: `3` -> `[fill, 3]`."""
    return [fill] + make_pair(value, 1)


def pool1d(pool):
    """The 1-D form of a 2-D pooling helper: a height of 1, the window on the width."""

    def wrapper(ctx: Importer, x, kernel, stride, padding, *args, **kwargs):
        stride = None if stride in (None, [], ()) else _lead(stride, 1)
        out = pool(
            ctx, call(ctx, "expand_dims", x, ndim(x) - 1), _lead(kernel, 1), stride,
            _lead(padding, 0), *args, **kwargs,
        )  # fmt: skip
        return squeeze(ctx, out, [ndim(out) - 2])

    return wrapper


def adaptive_avg_pool2d(ctx: Importer, x, output_size):
    if ndim(x) == 3:
        out = adaptive_avg_pool2d(ctx, call(ctx, "expand_dims", x, 0), output_size)
        return squeeze(ctx, out, [0])
    size = make_pair(output_size)
    size = [shape_of(x)[2 + i] if s is None else s for i, s in enumerate(size)]
    return call(ctx, "nn.adaptive_avg_pool2d", x, size)


def adaptive_max_pool(ctx: Importer, x, output_size, spatial: int):
    """Adaptive max pooling over the last `spatial` axes: output i of an axis of n takes the
    maximum of [floor(i * n / m), ceil((i + 1) * n / m)) (torch's windows). The windows are
    rectangles, so the maximum is separable: one axis at a time, one slice + max per output
    index (an axis the output divides is a plain strided max pool)."""
    from relaxmlir.frontend.rules.slicing import strided_slice

    sizes = make_pair(output_size, spatial)
    for k, m in enumerate(sizes):
        a = ndim(x) - spatial + k
        n = shape_of(x)[a]
        m = n if m is None else m
        if not isinstance(n, int):
            raise NotImplementedError(
                f"adaptive_max_pool{spatial}d over a symbolic size (from the PyTorch frontend)"
            )
        if m == n:
            continue
        parts = []
        for i in range(m):
            lo, hi = (i * n) // m, -(-((i + 1) * n) // m)
            window = strided_slice(ctx, x, [a], [lo], [hi])
            parts.append(call(ctx, "max", window, [a], True))
        x = parts[0] if m == 1 else call(ctx, "concat", parts, a)
    return x


def _adaptive_max_pool(spatial: int) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        out = adaptive_max_pool(ctx, first(ctx, node), ctx.arg(node, 1, "output_size"), spatial)
        if ctx.arg(node, 2, "return_indices", False) or str(node.target).startswith("aten."):

            def indices():
                raise NotImplementedError(
                    f"the indices of adaptive_max_pool{spatial}d at node '{node.name}'"
                )

            return out, Deferred(indices)
        return out

    return rule


def attention_scores(ctx: Importer, q, k, scale=None):
    """`q @ k^T * scale` over the last two axes; the scale defaults to 1/sqrt(head size)."""
    scale = 1.0 / float(np.sqrt(shape_of(q)[-1])) if scale is None else float(scale)
    scores = call(ctx, "matmul", q, transpose(ctx, k, -2, -1))
    # scale 1 (a query scaled before, as transformers' Whisper and BART do): no pass of its own
    # over the scores (Whisper's encoder: 54 MB per layer, read and written again)
    return scores if scale == 1.0 else emit_binary(ctx, "multiply", scores, scale)


def attention(ctx: Importer, q, k, v, mask=None, is_causal: bool = False, scale=None):
    """softmax(q @ k^T * scale + mask) @ v over the last two axes (scaled dot-product attention)."""
    scores = attention_scores(ctx, q, k, scale)
    if is_causal:
        mask = _causal_mask(ctx, shape_of(q)[-2], shape_of(k)[-2])
    if mask is not None and mask.struct_info.dtype == "bool":
        scores = call(ctx, "where", mask, scores, as_tensor(float("-inf"), scores))
    elif mask is not None:
        scores = emit_binary(ctx, "add", scores, mask)
    return call(ctx, "matmul", call(ctx, "nn.softmax", scores, ndim(scores) - 1), v)


def _conv(ctx: Importer, node: fx.Node):
    """`F.conv2d(input, weight, bias, stride, padding, dilation, groups)` (also conv1d, conv3d)."""
    x, w, b = first(ctx, node), ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    return conv2d(
        ctx,
        x,
        w,
        b,
        ctx.arg(node, 3, "stride", 1),
        ctx.arg(node, 4, "padding", 0),
        ctx.arg(node, 5, "dilation", 1),
        ctx.arg(node, 6, "groups", 1),
    )


def _max_pool(ctx: Importer, node: fx.Node):
    x, kernel = first(ctx, node), ctx.arg(node, 1, "kernel_size")
    out = max_pool2d(
        ctx,
        x,
        kernel,
        ctx.arg(node, 2, "stride"),
        ctx.arg(node, 3, "padding", 0),
        ctx.arg(node, 4, "dilation", 1),
        ctx.arg(node, 5, "ceil_mode", False),
    )
    if ctx.arg(node, 6, "return_indices", False) or "with_indices" in str(node.target):
        indices = Deferred(
            lambda: max_pool2d_indices(
                ctx,
                x,
                kernel,
                ctx.arg(node, 2, "stride"),
                ctx.arg(node, 3, "padding", 0),
                ctx.arg(node, 4, "dilation", 1),
                list(shape_of(out)[-2:]),
            )
        )
        return out, indices
    return out


@unbatched
def max_pool2d_indices(ctx: Importer, x, kernel, stride, padding, dilation, out_hw: list):
    kernel, stride = _pool_window(kernel, stride)
    padding, dilation = make_pair(padding), make_pair(dilation)
    return max_pool_indices(ctx, x, kernel, stride, padding, dilation, list(out_hw))


def max_pool_indices(ctx: Importer, x, kernel, stride, padding, dilation, out_sizes: list):
    """The flat index over x's last n axes (`h * W + w`; `d * H * W + h * W + w` in 3-D) of
    each window's maximum, as torch's CPU kernel picks it: the first maximum in window order,
    or the last NaN. The window taps of `x` padded with its lowest value are compared one by
    one (prod(kernel) strided slices, fused into one kernel)."""
    n = len(out_sizes)
    sizes = list(shape_of(x)[-n:])
    if not all(isinstance(d, int) for d in (*sizes, *out_sizes)):
        raise NotImplementedError(f"the indices of max_pool{n}d over symbolic spatial sizes")
    lowest = _lowest(x.struct_info.dtype)
    pads = [0, 0] * (ndim(x) - n)
    for size, o, s, p, d, k in zip(sizes, out_sizes, stride, padding, dilation, kernel):
        pads += [p, max((o - 1) * s + d * (k - 1) + 1 - size - p, 0)]
    padded = call(ctx, "nn.pad", x, pads, "constant", float(lowest))
    # each output's window start along each axis (before the padding: may be negative),
    # shaped to broadcast over the others
    starts = [
        (np.arange(o) * s - p).reshape([o if b == a else 1 for b in range(n)])
        for a, (o, s, p) in enumerate(zip(out_sizes, stride, padding))
    ]
    flat = [int(np.prod(sizes[a + 1 :])) for a in range(n)]
    # a window's first tap inside the input: the default index of an all-padding maximum
    firsts = [
        np.where(st < 0, st + ((-st + d - 1) // d) * d, st) for st, d in zip(starts, dilation)
    ]
    index = np.broadcast_to(sum(f * m for f, m in zip(firsts, flat)), out_sizes)
    index = const(index.astype(np.int64))
    best = as_tensor(lowest, padded)
    axes = list(range(ndim(x) - n, ndim(x)))
    for taps in itertools.product(*(range(k) for k in kernel)):
        begin = [t * d for t, d in zip(taps, dilation)]
        end = [b + (o - 1) * s + 1 for b, o, s in zip(begin, out_sizes, stride)]
        tap = call(ctx, "strided_slice", padded, axes, begin, end, list(stride))
        at = sum((st + b) * m for st, b, m in zip(starts, begin, flat))
        at = const(np.broadcast_to(at, out_sizes).astype(np.int64))
        better = call(
            ctx,
            "logical_or",
            emit_binary(ctx, "greater", tap, best),
            emit_binary(ctx, "not_equal", tap, tap),
        )
        best = call(ctx, "where", better, tap, best)
        index = call(ctx, "where", better, at, index)
    return index


def pool3d(
    ctx: Importer, x, kind: str, kernel, stride, padding, dilation=1, ceil_mode=False,
    count_include_pad=True, divisor_override=None, where: str = "", name: str = "avg_pool3d",
):  # fmt: skip
    """3-D max / average pooling (NCDHW, or CDHW unbatched) as the 2-D pool of every depth slice
    (the depth folded into the batch), then the depth window's taps (strided slices) reduced by
    maximum or mean. An average counts the padding (torch's default count_include_pad); its
    other options name themselves as unsupported."""
    from relaxmlir.frontend.rules.slicing import strided_slice

    if kind == "avg":
        options = {
            "ceil_mode": ceil_mode,
            "count_include_pad=False": not count_include_pad,
            "divisor_override": divisor_override is not None,
        }
        unsupported = [name for name, on in options.items() if on]
        if unsupported:
            raise NotImplementedError(f"{name} with {', '.join(unsupported)}{where}")
    if ndim(x) == 4:
        batched = call(ctx, "expand_dims", x, 0)
        out = pool3d(ctx, batched, kind, kernel, stride, padding, dilation, ceil_mode)
        return squeeze(ctx, out, [0])
    kernel, stride = _pool_window(kernel, stride, 3)
    padding, dilation = make_pair(padding, 3), make_pair(dilation, 3)
    channels, depth, height, width = shape_of(x)[1:]
    if not isinstance(depth, int):
        raise NotImplementedError(
            f"{kind}_pool3d over a symbolic depth (from the PyTorch frontend)"
        )
    depth_first = call(ctx, "permute_dims", x, [0, 2, 1, 3, 4])
    folded = reshape(ctx, depth_first, [-1, channels, height, width])
    if kind == "max":
        flat = max_pool2d(ctx, folded, kernel[1:], stride[1:], padding[1:], dilation[1:], ceil_mode)
        fill = _lowest(x.struct_info.dtype)
    else:
        flat = avg_pool2d(ctx, folded, kernel[1:], stride[1:], padding[1:], ceil_mode, True)
        fill = 0.0
    y = reshape(ctx, flat, [-1, depth, channels, *shape_of(flat)[2:]])
    k, st, pad, dil = kernel[0], stride[0], padding[0], dilation[0]
    span = dil * (k - 1) + 1
    out_depth = (depth + 2 * pad - span + (st - 1 if ceil_mode else 0)) // st + 1
    if ceil_mode and (out_depth - 1) * st >= depth + pad:  # a window must start in the input
        out_depth -= 1
    high = max(pad, (out_depth - 1) * st + span - depth - pad)
    if pad or high:
        y = call(ctx, "nn.pad", y, [0, 0, pad, high, 0, 0, 0, 0, 0, 0], "constant", fill)
    out = None
    for tap in range(k):
        begin = tap * dil
        part = strided_slice(ctx, y, [1], [begin], [begin + (out_depth - 1) * st + 1], [st])
        reduce_taps = "maximum" if kind == "max" else "add"
        out = part if out is None else emit_binary(ctx, reduce_taps, out, part)
    if kind == "avg" and k > 1:
        out = emit_binary(ctx, "multiply", out, 1.0 / k)
    return call(ctx, "permute_dims", out, [0, 2, 1, 3, 4])


def _max_pool3d(ctx: Importer, node: fx.Node):
    out = pool3d(
        ctx, first(ctx, node), "max", ctx.arg(node, 1, "kernel_size"), ctx.arg(node, 2, "stride"),
        ctx.arg(node, 3, "padding", 0), ctx.arg(node, 4, "dilation", 1),
        ctx.arg(node, 5, "ceil_mode", False),
    )  # fmt: skip
    if ctx.arg(node, 6, "return_indices", False) or "with_indices" in str(node.target):

        def indices():
            window = ctx.arg(node, 1, "kernel_size"), ctx.arg(node, 2, "stride")
            kernel, stride = _pool_window(*window, 3)
            padding = make_pair(ctx.arg(node, 3, "padding", 0), 3)
            dilation = make_pair(ctx.arg(node, 4, "dilation", 1), 3)
            x = first(ctx, node)
            return max_pool_indices(ctx, x, kernel, stride, padding, dilation, shape_of(out)[-3:])

        return out, Deferred(indices)
    return out


def _avg_pool3d(ctx: Importer, node: fx.Node):
    return pool3d(
        ctx, first(ctx, node), "avg", ctx.arg(node, 1, "kernel_size"), ctx.arg(node, 2, "stride"),
        ctx.arg(node, 3, "padding", 0), ceil_mode=ctx.arg(node, 4, "ceil_mode", False),
        count_include_pad=ctx.arg(node, 5, "count_include_pad", True),
        divisor_override=ctx.arg(node, 6, "divisor_override"), where=f" at node '{node.name}'",
    )  # fmt: skip


def _avg_pool(ctx: Importer, node: fx.Node):
    x, kernel = first(ctx, node), ctx.arg(node, 1, "kernel_size")
    return avg_pool2d(
        ctx,
        x,
        kernel,
        ctx.arg(node, 2, "stride"),
        ctx.arg(node, 3, "padding", 0),
        ctx.arg(node, 4, "ceil_mode", False),
        ctx.arg(node, 5, "count_include_pad", True),
        ctx.arg(node, 6, "divisor_override"),
    )


def _adaptive_avg_pool(ctx: Importer, node: fx.Node):
    return adaptive_avg_pool2d(ctx, first(ctx, node), ctx.arg(node, 1, "output_size"))


def _embedding(ctx: Importer, node: fx.Node):
    """`F.embedding(input, weight)`; note `aten.embedding(weight, indices)` swaps them."""
    indices, weight = first(ctx, node), ctx.arg(node, 1, "weight")
    if isinstance(node.target, torch._ops.OpOverload):
        indices, weight = weight, indices
    return call(ctx, "take", weight, indices, 0)


def embedding_bag(ctx: Importer, weight, indices, offsets, mode, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None, where=""):  # fmt: skip
    """`F.embedding_bag`: the rows of `weight` at `indices`, reduced per bag (sum, mean or max;
    the bags start at `offsets`, an empty bag gives zeros, `padding_idx` rows are left out). A
    bag-membership matrix [bags, indices] (each index's bag is the number of offsets at or
    before it, minus one) turns sum and mean into one matmul and max into a masked max."""
    mode = {0: "sum", 1: "mean", 2: "max"}.get(mode, mode)
    if mode not in ("sum", "mean", "max"):
        raise NotImplementedError(f"embedding_bag mode {mode!r}{where}")
    if ndim(indices) == 2:  # fixed-length bags, one per row
        n_bags, length = shape_of(indices)
        offsets = const(np.arange(0, n_bags * length, length, dtype=np.int64))
        indices = reshape(ctx, indices, [-1])
        if per_sample_weights is not None:
            per_sample_weights = reshape(ctx, per_sample_weights, [-1])
        include_last_offset = False
    n = shape_of(indices)[0]
    if include_last_offset:
        offsets = call(ctx, "strided_slice", offsets, [0], [0], [shape_of(offsets)[0] - 1])
    indices, offsets = astype(ctx, indices, "int64"), astype(ctx, offsets, "int64")
    positions = const(np.arange(n, dtype=np.int64))
    started = emit_binary(  # [bags, n]: offset b <= position i
        ctx, "less_equal", call(ctx, "expand_dims", offsets, 1), positions
    )
    started_count = call(ctx, "sum", astype(ctx, started, "int64"), [0], False)
    bag_of = emit_binary(ctx, "subtract", started_count, 1)
    n_bags = shape_of(offsets)[0]
    if not isinstance(n_bags, int):
        raise NotImplementedError(f"embedding_bag with a symbolic number of bags{where}")
    bags = const(np.arange(n_bags, dtype=np.int64))
    member = emit_binary(ctx, "equal", call(ctx, "expand_dims", bags, 1), bag_of)  # [bags, n]
    if padding_idx is not None:
        kept = emit_binary(ctx, "not_equal", indices, padding_idx)
        member = call(ctx, "logical_and", member, kept)
    rows = call(ctx, "take", weight, indices, 0)  # [n, dim]
    if per_sample_weights is not None:
        rows = emit_binary(ctx, "multiply", rows, call(ctx, "expand_dims", per_sample_weights, 1))
    dtype = weight.struct_info.dtype
    counts = call(ctx, "sum", astype(ctx, member, dtype), [1], True)  # [bags, 1]
    if mode == "max":
        masked = call(
            ctx, "where", call(ctx, "expand_dims", member, 2), call(ctx, "expand_dims", rows, 0),
            as_tensor(float("-inf"), rows),
        )  # fmt: skip
        top = call(ctx, "max", masked, [1], False)
        filled = emit_binary(ctx, "greater", counts, 0.0)
        return call(ctx, "where", filled, top, as_tensor(0.0, top))
    total = call(ctx, "matmul", astype(ctx, member, dtype), rows)
    if mode == "sum":
        return total
    return emit_binary(ctx, "divide", total, call(ctx, "maximum", counts, as_tensor(1.0, counts)))


def _embedding_bag(ctx: Importer, node: fx.Node):
    """`F.embedding_bag(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode,
    sparse, per_sample_weights, include_last_offset, padding_idx)` and
    `aten._embedding_bag(weight, indices, offsets, scale_grad, mode, sparse, per_sample_weights,
    include_last_offset, padding_idx)` (its other three results are bookkeeping for backward)."""
    where = f" at node '{node.name}'"
    if isinstance(node.target, torch._ops.OpOverload):
        weight, indices = first(ctx, node), ctx.arg(node, 1, "indices")
        offsets, mode = ctx.arg(node, 2, "offsets"), ctx.arg(node, 4, "mode", 0)
        psw = ctx.arg(node, 6, "per_sample_weights")
        last = ctx.arg(node, 7, "include_last_offset", False)
        padding_idx = ctx.arg(node, 8, "padding_idx", -1)
        padding_idx = None if padding_idx is None or padding_idx < 0 else padding_idx
        out = embedding_bag(ctx, weight, indices, offsets, mode, psw, last, padding_idx, where)
        return (out, None, None, None)
    indices, weight = first(ctx, node), ctx.arg(node, 1, "weight")
    if ctx.arg(node, 3, "max_norm") is not None:
        raise NotImplementedError(f"embedding_bag(max_norm=) renormalizes its weight{where}")
    return embedding_bag(
        ctx, weight, indices, ctx.arg(node, 2, "offsets"), ctx.arg(node, 6, "mode", "mean"),
        ctx.arg(node, 8, "per_sample_weights"), ctx.arg(node, 9, "include_last_offset", False),
        ctx.arg(node, 10, "padding_idx"), where,
    )  # fmt: skip


def _sdpa(ctx: Importer, node: fx.Node):
    q, k, v = first(ctx, node), ctx.arg(node, 1, "key"), ctx.arg(node, 2, "value")
    dropout = ctx.arg(node, 4, "dropout_p", 0.0)
    if not (isinstance(dropout, (int, float)) and dropout == 0):
        # NOTE: functional dropout applies whatever the module's mode: random, never imported
        raise NotImplementedError(
            f"scaled_dot_product_attention with dropout_p ({dropout}) at node '{node.name}': "
            "random dropout is not supported (dropout_p=0.0 for inference)"
        )
    mask, is_causal = ctx.arg(node, 3, "attn_mask"), ctx.arg(node, 5, "is_causal", False)
    scale = ctx.arg(node, None, "scale")
    if ctx.arg(node, None, "enable_gqa", False):
        grouped = _grouped_query_attention(ctx, q, k, v, mask, is_causal, scale)
        if grouped is not None:
            return grouped
        k, v = (_repeat_heads(ctx, t, shape_of(q)[-3], node) for t in (k, v))
    elif len(node.args) >= 3:
        # K and V repeated by the model itself (transformers' repeat_kv): the same grouping,
        # over the unrepeated tensors (the repeats are left unused, for dead-code elimination)
        sources = [_repeat_kv_source(ctx, node.args[i]) for i in (1, 2)]
        if all(x is not None for x in sources):
            grouped = _grouped_query_attention(ctx, q, *sources, mask, is_causal, scale)
            if grouped is not None:
                return grouped
    return attention(ctx, q, k, v, mask, is_causal, scale)


_RESHAPES = (aten.reshape.default, aten.view.default, aten._unsafe_view.default, "reshape", "view")


def _repeat_kv_source(ctx: Importer, arg):
    """The value that `x[:, :, None].expand(b, kv, g, n, d).reshape(b, kv * g, n, d)` repeats
    (transformers' repeat_kv before sdpa: Llama, Mistral, Qwen2), else None. Decomposed (a
    program with a StaticCache is), the reshape of the expanded view is a `clone` then a view."""

    def producer(value, targets):
        ok = isinstance(value, fx.Node) and value.target in targets
        return value if ok and value.args else None

    reshaped = producer(arg, _RESHAPES)
    copied = reshaped and producer(reshaped.args[0], (aten.clone.default,))
    read = copied if copied is not None and len(copied.users) == 1 else reshaped
    expanded = read and producer(read.args[0], (aten.expand.default, "expand"))
    unsqueezed = expanded and producer(expanded.args[0], (aten.unsqueeze.default, "unsqueeze"))
    if unsqueezed is None or len(unsqueezed.args) < 2:
        return None
    source = ctx.retrieve(unsqueezed.args[0])
    if not is_tensor(source) or ndim(source) != 4 or unsqueezed.args[1] not in (2, -3):
        return None
    b, kv, n, d = shape_of(source)
    g = shape_of(ctx.retrieve(expanded))[2]
    if not isinstance(kv, int) or not isinstance(g, int):
        return None
    if shape_of(ctx.retrieve(reshaped)) != (b, kv * g, n, d):
        return None
    return source


def _causal_mask(ctx: Importer, length, source):
    """torch's `is_causal` mask: query i sees keys 0..i (aligned at the top left)."""
    if isinstance(length, int) and isinstance(source, int):
        return const(np.tril(np.ones((length, source), dtype=bool)))
    # a symbolic sequence length (torch.compile with dynamic sizes)
    ones = call(ctx, "broadcast_to", const(np.array(True)), [length, source])
    return call(ctx, "tril", ones, 0)


def _grouped_query_attention(ctx: Importer, q, k, v, mask, is_causal: bool, scale):
    """Grouped-query attention without repeating K and V: the query heads that share a
    key/value head become rows of one product (q [.., kv, group * s, d] against K [.., kv, n,
    d]), so K and V are read where they are. Repeated, both were copied group-fold at every call
    (a decode step over its KV caches: two 3 MB copies per layer at 1024 cached rows), and the
    one-row products of a decode step now have `group` rows. A mask (or is_causal) is tiled over
    the group's rows; None where the heads differ in it or the sizes are not static enough to
    regroup (the caller repeats K and V)."""
    *lead, heads, length, size = shape_of(q)
    kv_heads = shape_of(k)[-3]
    if not all(isinstance(d, int) for d in (*lead, heads, kv_heads, length)):
        return None
    if heads == kv_heads or heads % kv_heads:
        return None  # nothing to group, or the caller names the mismatch
    group = heads // kv_heads
    if is_causal:
        mask = _causal_mask(ctx, length, shape_of(k)[-2])
    if mask is not None:
        dims = shape_of(mask)
        if len(dims) >= 3 and dims[-3] != 1:
            return None  # a mask per head
        if dims[-2] != 1:  # the same rows for each query head of a group
            tiled = call(ctx, "expand_dims", mask, len(dims) - 2)
            tiled = call(ctx, "broadcast_to", tiled, [*dims[:-2], group, *dims[-2:]])
            mask = reshape(ctx, tiled, [*dims[:-2], group * length, dims[-1]])
    rows = reshape(ctx, q, [*lead, kv_heads, group * length, size])
    out = attention(ctx, rows, k, v, mask, False, scale)
    return reshape(ctx, out, [*lead, heads, length, shape_of(v)[-1]])


def _repeat_heads(ctx: Importer, x, heads: int, node: fx.Node):
    """Grouped-query attention: each of x's key/value heads serves `heads // kv_heads`
    consecutive query heads (torch's repeat_interleave over the head axis)."""
    *lead, kv_heads, length, size = shape_of(x)
    if not isinstance(heads, int) or not isinstance(kv_heads, int) or heads % kv_heads:
        raise ValueError(
            f"scaled_dot_product_attention(enable_gqa=True) at node '{node.name}': query heads "
            f"({heads}) must be a multiple of key/value heads ({kv_heads})"
        )
    if heads == kv_heads:
        return x
    group = heads // kv_heads
    x = call(ctx, "expand_dims", x, len(lead) + 1)
    x = call(ctx, "broadcast_to", x, [*lead, kv_heads, group, length, size])
    return reshape(ctx, x, [*lead, heads, length, size])


def _max_pool1d(ctx: Importer, node: fx.Node):
    x, kernel, stride = (
        first(ctx, node),
        ctx.arg(node, 1, "kernel_size"),
        ctx.arg(node, 2, "stride"),
    )
    padding, dilation = (
        ctx.arg(node, 3, "padding", 0),
        [1] + make_pair(ctx.arg(node, 4, "dilation", 1), 1),
    )
    out = pool1d(max_pool2d)(
        ctx, x, kernel, stride, padding, dilation, ctx.arg(node, 5, "ceil_mode", False)
    )
    if ctx.arg(node, 6, "return_indices", False) or "with_indices" in str(node.target):
        out_hw = [1, shape_of(out)[-1]]
        indices = pool1d(max_pool2d_indices)
        return out, Deferred(lambda: indices(ctx, x, kernel, stride, padding, dilation, out_hw))
    return out


def _avg_pool1d(ctx: Importer, node: fx.Node):
    return pool1d(avg_pool2d)(
        ctx,
        first(ctx, node),
        ctx.arg(node, 1, "kernel_size"),
        ctx.arg(node, 2, "stride"),
        ctx.arg(node, 3, "padding", 0),
        ctx.arg(node, 4, "ceil_mode", False),
        ctx.arg(node, 5, "count_include_pad", True),
    )


def _adaptive_avg_pool1d(ctx: Importer, node: fx.Node):
    x, size = first(ctx, node), make_pair(ctx.arg(node, 1, "output_size"), 1)
    out = adaptive_avg_pool2d(ctx, call(ctx, "expand_dims", x, ndim(x) - 1), [1] + size)
    return squeeze(ctx, out, [ndim(out) - 2])


def conv_transpose(
    ctx: Importer, x, weight, bias, stride, padding, output_padding, groups: int, dilation
):
    """Transposed convolution (1-D or 2-D, batched or not) as a convolution: the input with
    `stride - 1` zeros between its elements, padded by `dilation * (k - 1) - padding` (plus
    output_padding after), convolved with the kernel flipped and its channel axes swapped."""
    spatial = ndim(weight) - 2
    if spatial > 2:
        raise NotImplementedError(
            f"conv_transpose{spatial}d (from the PyTorch frontend): transposed convolutions are "
            "supported in 1-D and 2-D"
        )
    if ndim(x) == spatial + 1:
        out = conv_transpose(
            ctx, call(ctx, "expand_dims", x, 0), weight, bias, stride, padding,
            output_padding, groups, dilation,
        )  # fmt: skip
        return squeeze(ctx, out, [0])
    if spatial == 1:
        x4, w4 = call(ctx, "expand_dims", x, 2), call(ctx, "expand_dims", weight, 2)
        out = conv_transpose(
            ctx, x4, w4, bias, _lead(stride, 1), _lead(padding, 0), _lead(output_padding, 0),
            groups, _lead(dilation, 1),
        )  # fmt: skip
        return squeeze(ctx, out, [2])
    from relaxmlir.frontend.rules.resize import pad

    stride, padding = make_pair(stride), make_pair(padding)
    output_padding, dilation = make_pair(output_padding), make_pair(dilation)
    n, c, h, w = shape_of(x)
    kernel = shape_of(weight)[2:]
    if (
        groups == 1
        and list(kernel) == stride
        and padding == [0, 0]
        and output_padding == [0, 0]
        and dilation == [1, 1]
    ):
        return _depth_to_space_transpose(ctx, x, weight, bias, stride)
    if stride != [1, 1]:  # zeros between the elements: (n, c, h, 1, w, 1) padded to (.., s, .., s)
        x = reshape(ctx, x, [n, c, h, 1, w, 1])
        x = call(ctx, "nn.pad", x, [0, 0] * 3 + [0, stride[0] - 1, 0, 0, 0, stride[1] - 1])
        x = reshape(ctx, x, [n, c, h * stride[0], w * stride[1]])
    kernel = shape_of(weight)[2:]
    widths = []
    for i in (1, 0):  # torch's pad order: the last axis first
        before = dilation[i] * (kernel[i] - 1) - padding[i]
        widths += [before, before + output_padding[i] - (stride[i] - 1)]
    x = pad(ctx, x, widths)
    cin, cout_g = shape_of(weight)[:2]
    if isinstance(weight, Constant):
        data = weight.data.reshape(groups, cin // groups, cout_g, *kernel)
        data = data.transpose(0, 2, 1, 3, 4).reshape(groups * cout_g, cin // groups, *kernel)
        weight = const(np.ascontiguousarray(data[:, :, ::-1, ::-1]))
    else:
        weight = reshape(ctx, weight, [groups, cin // groups, cout_g, *kernel])
        weight = call(ctx, "permute_dims", weight, [0, 2, 1, 3, 4])
        weight = reshape(ctx, weight, [groups * cout_g, cin // groups, *kernel])
        for axis_, k in ((2, kernel[0]), (3, kernel[1])):
            weight = call(ctx, "take", weight, const(np.arange(k - 1, -1, -1)), axis_)
    return conv2d(ctx, x, weight, bias, 1, 0, dilation, groups)


def _depth_to_space_transpose(ctx: Importer, x, weight, bias, stride):
    """A transposed convolution whose kernel equals its stride (a UNet's 2x2 / 2 up-convolution)
    writes each output pixel from one input pixel: a 1x1 convolution to O x KH x KW channels,
    then depth-to-space. As zero insertion + a convolution it did KH x KW times the FLOPs over a
    zero-stuffed copy of the input (a UNet at 256x256: 6 of its 50 ms)."""
    n, _, h, w = shape_of(x)
    cin, cout, kh, kw = shape_of(weight)
    if isinstance(weight, Constant):
        w1 = const(np.ascontiguousarray(weight.data.transpose(1, 2, 3, 0).reshape(-1, cin, 1, 1)))
    else:
        w1 = call(ctx, "permute_dims", weight, [1, 2, 3, 0])
        w1 = reshape(ctx, w1, [cout * kh * kw, cin, 1, 1])
    y = conv2d(ctx, x, w1, None, 1, 0, 1, 1)  # [n, (o, i, j), h, w]
    y = reshape(ctx, y, [n, cout, kh, kw, h, w])
    y = call(ctx, "permute_dims", y, [0, 1, 4, 2, 5, 3])  # [n, o, h, i, w, j]
    y = reshape(ctx, y, [n, cout, h * kh, w * kw])
    if bias is not None:
        y = emit_binary(ctx, "add", y, reshape(ctx, bias, [cout, 1, 1]))
    return y


def _conv_transpose(ctx: Importer, node: fx.Node):
    """`F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)`."""
    return conv_transpose(
        ctx,
        first(ctx, node),
        ctx.arg(node, 1, "weight"),
        ctx.arg(node, 2, "bias"),
        ctx.arg(node, 3, "stride", 1),
        ctx.arg(node, 4, "padding", 0),
        ctx.arg(node, 5, "output_padding", 0),
        ctx.arg(node, 6, "groups", 1),
        ctx.arg(node, 7, "dilation", 1),
    )


# -- normalisation by the input's own statistics --------------------------------------------
def normalize(ctx: Importer, x, axes: list, eps: float):
    """`(x - mean) / sqrt(var + eps)` over `axes` (biased variance): a layer_norm without affine."""
    from relaxmlir.frontend.rules.create import full

    shape, dtype = [shape_of(x)[a] for a in axes], x.struct_info.dtype
    ones, zeros = full(ctx, shape, 1.0, dtype), full(ctx, shape, 0.0, dtype)
    return call(ctx, "nn.layer_norm", x, ones, zeros, axes, eps, center=False, scale=False)


def channel_affine(ctx: Importer, x, weight, bias):
    """`x * weight + bias` with 1-D weight/bias along axis 1."""
    shape = [shape_of(x)[1]] + [1] * (ndim(x) - 2)
    if weight is not None:
        x = emit_binary(ctx, "multiply", x, reshape(ctx, weight, shape))
    if bias is not None:
        x = emit_binary(ctx, "add", x, reshape(ctx, bias, shape))
    return x


def group_norm(ctx: Importer, x, groups: int, weight, bias, eps: float):
    grouped = reshape(ctx, x, [shape_of(x)[0], groups, -1])
    out = reshape(ctx, normalize(ctx, grouped, [2], eps), list(shape_of(x)))
    return channel_affine(ctx, out, weight, bias)


def batch_stats_norm(ctx: Importer, x, weight, bias, eps: float):
    """Batch norm by the batch's own statistics (training mode; instance norm)."""
    axes = [a for a in range(ndim(x)) if a != 1]
    return channel_affine(ctx, normalize(ctx, x, axes, eps), weight, bias)


def _group_norm(ctx: Importer, node: fx.Node):
    """`F.group_norm(input, num_groups, weight, bias, eps)` (also `aten.group_norm`)."""
    return group_norm(
        ctx,
        first(ctx, node),
        ctx.arg(node, 1, "num_groups"),
        ctx.arg(node, 2, "weight"),
        ctx.arg(node, 3, "bias"),
        ctx.arg(node, 4, "eps", 1e-5),
    )


def _instance_norm(ctx: Importer, node: fx.Node):
    """`F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, ...)`."""
    x, weight, bias = first(ctx, node), ctx.arg(node, 3, "weight"), ctx.arg(node, 4, "bias")
    eps = ctx.arg(node, 7, "eps", 1e-5)
    if not ctx.arg(node, 5, "use_input_stats", True):
        mean, var = ctx.arg(node, 1, "running_mean"), ctx.arg(node, 2, "running_var")
        return batch_norm(ctx, x, weight, bias, mean, var, eps)
    out = normalize(ctx, x, list(range(2, ndim(x))), eps)
    return channel_affine(ctx, out, weight, bias)


register(_conv, F.conv3d, F.conv2d, F.conv1d, aten.conv3d, aten.conv2d, aten.conv1d)
register(
    _conv_transpose,
    F.conv_transpose2d,
    F.conv_transpose1d,
    aten.conv_transpose2d,
    aten.conv_transpose1d,
)
register(
    _max_pool1d,
    F.max_pool1d,
    F.max_pool1d_with_indices,
    torch.max_pool1d,
    torch.max_pool1d_with_indices,
    aten.max_pool1d,
    aten.max_pool1d_with_indices,
)
register(_avg_pool1d, F.avg_pool1d, torch.avg_pool1d, aten.avg_pool1d)
register(
    _adaptive_avg_pool1d, F.adaptive_avg_pool1d, torch.adaptive_avg_pool1d, aten.adaptive_avg_pool1d
)
register(_group_norm, F.group_norm, torch.group_norm, aten.group_norm)
register(_instance_norm, F.instance_norm, torch.instance_norm)
register(
    _max_pool,
    F.max_pool2d,
    F.max_pool2d_with_indices,
    aten.max_pool2d,
    aten.max_pool2d_with_indices,
)
register(_avg_pool, F.avg_pool2d, aten.avg_pool2d)
register(
    _max_pool3d, F.max_pool3d, F.max_pool3d_with_indices, aten.max_pool3d,
    aten.max_pool3d_with_indices,
)  # fmt: skip
register(_avg_pool3d, F.avg_pool3d, aten.avg_pool3d)
register(
    _adaptive_max_pool(2), F.adaptive_max_pool2d, F.adaptive_max_pool2d_with_indices,
    aten.adaptive_max_pool2d,
)  # fmt: skip
register(
    _adaptive_max_pool(1), F.adaptive_max_pool1d, F.adaptive_max_pool1d_with_indices,
    aten.adaptive_max_pool1d,
)  # fmt: skip
register(
    _adaptive_avg_pool, F.adaptive_avg_pool2d, aten.adaptive_avg_pool2d, aten._adaptive_avg_pool2d
)
register(_embedding, F.embedding, aten.embedding)
register(
    _embedding_bag, F.embedding_bag, aten._embedding_bag, aten._embedding_bag_forward_only,
    aten.embedding_bag,
)  # fmt: skip
register(_sdpa, F.scaled_dot_product_attention, aten.scaled_dot_product_attention)


# -- ATen's native normalizations: the output and the statistics it was normalized by ----------
def _inverse_std(ctx: Importer, var, eps: float):
    return call(ctx, "rsqrt", emit_binary(ctx, "add", var, float(eps)))


def _native_layer_norm(ctx: Importer, node: fx.Node):
    """`native_layer_norm(input, normalized_shape, weight, bias, eps)` -> (out, mean, rstd),
    the statistics with the normalized axes kept as size 1."""
    x, shape = first(ctx, node), ctx.arg(node, 1, "normalized_shape")
    axes = list(range(ndim(x) - len(shape), ndim(x)))
    mean = Deferred(lambda: call(ctx, "mean", x, axes, True))
    var = Deferred(lambda: call(ctx, "variance", x, axes, True))
    rstd = Deferred(lambda: _inverse_std(ctx, var.get(), ctx.arg(node, 4, "eps")))
    return layer_norm_rule(ctx, node), mean, rstd


def _native_group_norm(ctx: Importer, node: fx.Node):
    """`native_group_norm(input, weight, bias, N, C, HxW, group, eps)` -> (out, mean, rstd),
    the statistics of shape (N, group)."""
    x, weight, bias = first(ctx, node), ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    groups, eps = ctx.arg(node, 6, "group"), ctx.arg(node, 7, "eps")
    out = group_norm(ctx, x, groups, weight, bias, eps)

    def grouped():
        return reshape(ctx, x, [shape_of(x)[0], groups, -1])

    mean = Deferred(lambda: call(ctx, "mean", grouped(), [2]))
    rstd = Deferred(lambda: _inverse_std(ctx, call(ctx, "variance", grouped(), [2]), eps))
    return out, mean, rstd


def _native_batch_norm_legit(ctx: Importer, node: fx.Node):
    """`_native_batch_norm_legit(input, weight, bias, [running_mean, running_var,] training,
    momentum, eps)` -> (out, save_mean, save_rstd) (`.no_stats` has no running statistics;
    `_functional` also returns the updated running statistics). Training mode normalizes by the
    batch's statistics (instance_norm exports as this), which it saves; inference mode saves
    none (empty tensors). The running statistics of the in-place form are not updated."""
    x, weight, bias = first(ctx, node), ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    overload = getattr(node.target, "_overloadname", None)  # None: torch's function
    stats = overload != "no_stats" if overload else len(node.args) + len(node.kwargs) > 6
    training, momentum = ctx.arg(node, 5 if stats else 3), ctx.arg(node, 6 if stats else 4)
    eps = ctx.arg(node, 7 if stats else 5)
    running = (ctx.arg(node, 3), ctx.arg(node, 4)) if stats else (None, None)
    functional = "functional" in str(node.target)
    if not training:
        empty = const(np.zeros((0,), dtype=np_dtype(x.struct_info.dtype)))
        out = batch_norm(ctx, x, weight, bias, running[0], running[1], eps)
        return (out, empty, empty) + ((running[0], running[1]) if functional else ())
    axes = [a for a in range(ndim(x)) if a != 1]
    mean, var = call(ctx, "mean", x, axes), call(ctx, "variance", x, axes)
    out = batch_stats_norm(ctx, x, weight, bias, eps)
    results = (out, mean, _inverse_std(ctx, var, eps))
    if not functional:
        return results
    count = int(np.prod([shape_of(x)[a] for a in axes]))
    unbiased = emit_binary(ctx, "multiply", var, count / max(count - 1, 1))
    updated = tuple(
        emit_binary(
            ctx,
            "add",
            emit_binary(ctx, "multiply", old, 1.0 - momentum),
            emit_binary(ctx, "multiply", new, float(momentum)),
        )
        for old, new in zip(running, (mean, unbiased))
    )
    return results + updated


register(_native_layer_norm, torch.native_layer_norm, aten.native_layer_norm)
register(_native_group_norm, torch.native_group_norm, aten.native_group_norm)
register(
    _native_batch_norm_legit,
    torch._native_batch_norm_legit,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional,
)
