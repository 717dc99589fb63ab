"""Neural-network rules: matmul/linear, softmax, norms, conv, pooling, embedding, attention."""

from __future__ import annotations

import operator

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Deferred, Importer, Rule, dtype_str, register
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
from relaxmlir.relax.expr import const


# -- matrix products ------------------------------------------------------------------------
def _matmul(ctx: Importer, node: fx.Node):
    return call(ctx, "matmul", first(ctx, node), ctx.arg(node, 1, ("other", "mat2")))


def _linear(ctx: Importer, node: fx.Node):
    x, w, b = first(ctx, node), ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    return call(ctx, "linear", x, w, b)


def _addmm(ctx: Importer, node: fx.Node):
    """`beta * input + alpha * (mat1 @ mat2)` (also `baddbmm`)."""
    bias, a = first(ctx, node), ctx.arg(node, 1, ("mat1", "batch1"))
    b = ctx.arg(node, 2, ("mat2", "batch2"))
    beta, alpha = ctx.arg(node, None, "beta", 1), ctx.arg(node, None, "alpha", 1)
    out = call(ctx, "matmul", a, b)
    if alpha != 1:
        out = emit_binary(ctx, "multiply", out, alpha)
    if beta != 1:
        bias = emit_binary(ctx, "multiply", bias, beta)
    return emit_binary(ctx, "add", out, bias) if beta != 0 else out


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
    """NCHW / OIHW convolution; `padding` may be ints or "same"/"valid"; rank-3 input is conv1d."""
    if ndim(x) == 3:  # conv1d as conv2d over a height of 1
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


def _pool_window(kernel, stride) -> tuple[list, list]:
    """(kernel, stride) as pairs; torch's stride defaults to the kernel size."""
    kernel = make_pair(kernel)
    return kernel, make_pair(stride) if stride not in (None, [], ()) else kernel


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
    if divisor_override is not None:
        raise NotImplementedError("avg_pool2d with divisor_override")
    kernel, stride = _pool_window(kernel, stride)
    padding = make_pair(padding)
    kwargs = {"count_include_pad": count_include_pad} if any(padding) else {}
    return call(
        ctx,
        "nn.avg_pool2d",
        x,
        pool_size=kernel,
        strides=stride,
        padding=padding,
        ceil_mode=ceil_mode,
        **kwargs,
    )


def adaptive_avg_pool2d(ctx: Importer, x, output_size):
    size = make_pair(output_size)
    size = [shape_of(x)[2 + i] if s is None else s for i, s in enumerate(size)]
    return call(ctx, "nn.adaptive_avg_pool2d", x, size)


def attention_scores(ctx: Importer, q, k, scale=None):
    """`q @ k^T * scale` over the last two axes; the scale defaults to 1/sqrt(head size)."""
    scale = 1.0 / float(np.sqrt(shape_of(q)[-1])) if scale is None else float(scale)
    return emit_binary(ctx, "multiply", call(ctx, "matmul", q, transpose(ctx, k, -2, -1)), scale)


def attention(ctx: Importer, q, k, v, mask=None, is_causal: bool = False, scale=None):
    """softmax(q @ k^T * scale + mask) @ v over the last two axes (scaled dot-product attention)."""
    scores = attention_scores(ctx, q, k, scale)
    if is_causal:
        length, source = shape_of(q)[-2], shape_of(k)[-2]
        mask = const(np.tril(np.ones((length, source), dtype=bool)))
    if mask is not None and mask.struct_info.dtype == "bool":
        scores = call(ctx, "where", mask, scores, as_tensor(float("-inf"), scores))
    elif mask is not None:
        scores = emit_binary(ctx, "add", scores, mask)
    return call(ctx, "matmul", call(ctx, "nn.softmax", scores, ndim(scores) - 1), v)


def _conv(ctx: Importer, node: fx.Node):
    """`F.conv2d(input, weight, bias, stride, padding, dilation, groups)` (also conv1d)."""
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
        return out, Deferred(lambda: _no_indices(node))
    return out


def _no_indices(node: fx.Node):
    raise NotImplementedError(f"the indices of max_pool2d at node '{node.name}' are not supported")


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


def _sdpa(ctx: Importer, node: fx.Node):
    q, k, v = first(ctx, node), ctx.arg(node, 1, "key"), ctx.arg(node, 2, "value")
    if ctx.arg(node, None, "enable_gqa", False):
        raise NotImplementedError(
            f"scaled_dot_product_attention with enable_gqa at node '{node.name}'"
        )
    return attention(
        ctx,
        q,
        k,
        v,
        ctx.arg(node, 3, "attn_mask"),
        ctx.arg(node, 5, "is_causal", False),
        ctx.arg(node, None, "scale"),
    )


register(_conv, F.conv2d, F.conv1d, aten.conv2d, aten.conv1d)
register(
    _max_pool,
    F.max_pool2d,
    F.max_pool2d_with_indices,
    aten.max_pool2d,
    aten.max_pool2d_with_indices,
)
register(_avg_pool, F.avg_pool2d, aten.avg_pool2d)
register(
    _adaptive_avg_pool, F.adaptive_avg_pool2d, aten.adaptive_avg_pool2d, aten._adaptive_avg_pool2d
)
register(_embedding, F.embedding, aten.embedding)
register(_sdpa, F.scaled_dot_product_attention, aten.scaled_dot_product_attention)
