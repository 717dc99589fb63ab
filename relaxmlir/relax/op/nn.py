"""`relax.op.nn`: activations, softmax, normalization, convolution and pooling (NCHW)."""

from __future__ import annotations

from collections.abc import Sequence

from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.op.common import (
    Dim,
    add,
    as_ints,
    ceildiv,
    check_float,
    floordiv,
    make_call,
    normalize_axes,
    normalize_axis,
    same_dim,
    sub,
    tensor_sinfo,
    unify_dtypes,
)
from relaxmlir.relax.op.unary import infer_unary, unary_op
from relaxmlir.relax.struct_info import TensorStructInfo
from relaxmlir.topi.layout import channel_block, kernel_blocks

IntOrPair = int | Sequence[int]

relu = unary_op("relax.nn.relu", doc="elementwise `max(x, 0)`")
gelu = unary_op("relax.nn.gelu", True, "`x * (1 + erf(x / sqrt(2))) / 2`")
gelu_tanh = unary_op("relax.nn.gelu_tanh", True, "gelu's tanh approximation")
silu = unary_op("relax.nn.silu", True, "`x * sigmoid(x)`")


def leaky_relu(x: Expr, alpha: float = 0.01) -> Call:
    """`relax.nn.leaky_relu`: `x if x >= 0 else alpha * x`."""
    sinfo = infer_unary(x, "relax.nn.leaky_relu", True)
    return make_call("relax.nn.leaky_relu", [x], {"alpha": float(alpha)}, sinfo)


def softmax(x: Expr, axis: int = -1) -> Call:
    """`relax.nn.softmax`: `exp(x - max) / sum(exp(x - max))` along `axis` (float).

    Parameters
    ----------
    x : Expr
    axis : int, default -1

    Returns
    -------
    Call
    """
    sinfo = infer_unary(x, "relax.nn.softmax", True)
    axis = normalize_axis(axis, sinfo.ndim, "relax.nn.softmax")
    return make_call("relax.nn.softmax", [x], {"axis": axis}, sinfo)


def log_softmax(x: Expr, axis: int = -1) -> Call:
    """`relax.nn.log_softmax`: `x - max - log(sum(exp(x - max)))` along `axis` (float)."""
    sinfo = infer_unary(x, "relax.nn.log_softmax", True)
    axis = normalize_axis(axis, sinfo.ndim, "relax.nn.log_softmax")
    return make_call("relax.nn.log_softmax", [x], {"axis": axis}, sinfo)


def dropout(x: Expr, rate: float = 0.5) -> Call:
    """`relax.nn.dropout` for inference: the identity. Unlike TVM it returns only the tensor."""
    sinfo = infer_unary(x, "relax.nn.dropout")
    return make_call("relax.nn.dropout", [x], {"rate": float(rate)}, sinfo)


PAD_MODES = ("constant", "reflect", "edge")


def pad(
    data: Expr, pad_width: Sequence[int], pad_mode: str = "constant", pad_value: float = 0.0
) -> Call:
    """`relax.nn.pad`: `data` grown by `pad_width[2*i]` before and `pad_width[2*i+1]` after axis i.

    Parameters
    ----------
    data : Expr
    pad_width : list of int
        Two non-negative values per axis of data.
    pad_mode : str
        "constant" fills `pad_value`; "reflect" mirrors without repeating the edge (each pad
        smaller than its axis); "edge" repeats the edge element.
    pad_value : float

    Returns
    -------
    Call
    """
    op = "relax.nn.pad"
    x = tensor_sinfo(data, op, "data")
    width = [int(w) for w in pad_width]
    if len(width) != 2 * x.ndim or any(w < 0 for w in width):
        raise ValueError(
            f"{op}: expected {2 * x.ndim} non-negative pad widths for rank ({x.ndim}), got ({width})"
        )
    if pad_mode not in PAD_MODES:
        raise ValueError(f"{op}: unknown pad_mode '{pad_mode}'; modes: {', '.join(PAD_MODES)}")
    shape = []
    for i, d in enumerate(x.shape):
        lo, hi = width[2 * i], width[2 * i + 1]
        mirrored = isinstance(d, int) and pad_mode != "constant" and (lo or hi)
        if mirrored and (d == 0 or (pad_mode == "reflect" and max(lo, hi) >= d)):
            raise ValueError(
                f"{op}: {pad_mode} padding ({lo}, {hi}) of an axis of size ({d}) is too large"
            )
        shape.append(add(d, lo + hi))
    attrs = {"pad_width": width, "pad_mode": pad_mode, "pad_value": float(pad_value)}
    return make_call(op, [data], attrs, TensorStructInfo(shape, x.dtype))


def _padding(padding: IntOrPair, op: str) -> list[int]:
    """TVM's padding forms -> (top, left, bottom, right)."""
    pad = [int(padding)] * 2 if isinstance(padding, int) else [int(p) for p in padding]
    if len(pad) == 2:
        pad = pad * 2
    if len(pad) != 4:
        raise ValueError(f"{op}: padding must have 1, 2 or 4 values, got ({padding})")
    return pad


def _window_out(
    size: Dim, pad: int, k: int, stride: int, dilation: int, ceil_mode: bool, op: str
) -> Dim:
    """Output extent of a sliding window (torch's rule: the last window starts in the input)."""
    span = dilation * (k - 1) + 1
    if not isinstance(size, int):
        if ceil_mode:
            raise NotImplementedError(f"{op}: ceil_mode on a symbolic spatial dim ({size})")
        return add(floordiv(sub(add(size, pad), span), stride), 1)
    total = size + pad - span
    if total < 0:
        raise ValueError(f"{op}: window ({span}) is larger than the padded input ({size + pad})")
    out = (ceildiv(total, stride) if ceil_mode else total // stride) + 1
    return out


def _check_nchw(layout: str, op: str, what: str = "data_layout", expected: str = "NCHW") -> None:
    if layout != expected:
        raise NotImplementedError(f"{op}: only {what}='{expected}' is supported, got ('{layout}')")


def _channel_block(layout: str, out_layout: str | None, op: str, what: str = "data_layout") -> int:
    """0 for NCHW, b for the channel-blocked NCHW<b>c (`topi.layout`); out_layout must match."""
    try:
        block = channel_block(layout)
    except ValueError:
        raise NotImplementedError(
            f"{op}: only {what}='NCHW' or a channel-blocked 'NCHW<b>c' is supported, got ('{layout}')"
        ) from None
    if out_layout not in (None, layout):
        raise NotImplementedError(f"{op}: out_layout ('{out_layout}') must equal {what} ('{layout}')")
    return block


def conv2d(
    data: Expr,
    weight: Expr,
    strides: IntOrPair = (1, 1),
    padding: IntOrPair = (0, 0),
    dilation: IntOrPair = (1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "OIHW",
    out_layout: str | None = None,
    out_dtype: str | None = None,
) -> Call:
    """`relax.nn.conv2d`: 2-D convolution (cross-correlation), NCHW data and OIHW weight.

    Parameters
    ----------
    data : Expr
        `(N, C, H, W)`.
    weight : Expr
        `(O, C // groups, KH, KW)`.
    strides, dilation : int or (int, int)
    padding : int, (int, int) or (top, left, bottom, right)
    groups : int
    out_dtype : str, optional

    Returns
    -------
    Call
        `(N, O, OH, OW)` with `OH = (H + top + bottom - dilation*(KH-1) - 1) // stride + 1`.
    """
    op = "relax.nn.conv2d"
    if data_layout != "NCHW" or kernel_layout != "OIHW":
        return _conv2d_blocked(
            data, weight, strides, padding, dilation, groups, data_layout, kernel_layout,
            out_layout, out_dtype,
        )  # fmt: skip
    _check_nchw(out_layout or data_layout, op, "out_layout")
    x, w = tensor_sinfo(data, op, "data"), tensor_sinfo(weight, op, "weight")
    dtype = unify_dtypes(op, x, w)
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"{op}: expected 4-D data and weight, got {x.shape} and {w.shape}")
    strides, dilation = as_ints(strides, 2, op, "strides"), as_ints(dilation, 2, op, "dilation")
    pad = _padding(padding, op)
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    if not isinstance(groups, int) or groups < 1 or (isinstance(o, int) and o % groups):
        raise ValueError(f"{op}: output channels ({o}) must divide into groups ({groups})")
    if not same_dim(c, i * groups if isinstance(i, int) else f"({i})*{groups}"):
        raise ValueError(f"{op}: data has ({c}) channels, weight expects ({i}) x groups ({groups})")
    oh = _window_out(h, pad[0] + pad[2], kh, strides[0], dilation[0], False, op)
    ow = _window_out(wd, pad[1] + pad[3], kw, strides[1], dilation[1], False, op)
    out = TensorStructInfo([n, o, oh, ow], out_dtype or dtype)
    attrs = {
        "strides": strides,
        "padding": pad,
        "dilation": dilation,
        "groups": groups,
        "data_layout": data_layout,
        "kernel_layout": kernel_layout,
        "out_dtype": out.dtype,
    }
    return make_call(op, [data, weight], attrs, out)


def _conv2d_blocked(
    data, weight, strides, padding, dilation, groups, data_layout, kernel_layout, out_layout, out_dtype
) -> Call:
    """conv2d of NCHW<bi>c data with an OIHW<bi>i<bo>o kernel into NCHW<bo>c (one group), a
    depthwise conv2d (groups = channels) of NCHW<b>c data with an OIHW1i<b>o kernel
    [C/b, 1, KH, KW, 1, b] into NCHW<b>c, or a grouped conv2d whose groups are whole channel
    blocks, in and out, with an OIHW<b>i<bo>o kernel [O/bo, C/b/groups, KH, KW, b, bo] into
    NCHW<bo>c (one block each: groups = C/b, a [C/b, 1, KH, KW, b, b] kernel)."""
    op = "relax.nn.conv2d"
    bi = _channel_block(data_layout, None, op)
    try:
        ki, ko = kernel_blocks(kernel_layout)
    except ValueError as exc:
        raise NotImplementedError(f"{op}: {exc}") from None
    blockwise = groups != 1 and bool(bi) and bi > 1 and ki == bi  # whole blocks per group
    depthwise = groups != 1 and not blockwise
    want = f"OIHW1i{bi}o or OIHW{bi}i<o>o" if groups != 1 else f"OIHW{bi or '<b>'}i<o>o"
    if not bi or not ki or (ki, ko) != ((1, bi) if depthwise else (bi, ko)):
        raise NotImplementedError(
            f"{op}: data_layout '{data_layout}' with groups={groups} needs kernel_layout "
            f"'{want}', got '{kernel_layout}'"
        )
    if out_layout not in (None, f"NCHW{ko}c"):
        raise NotImplementedError(f"{op}: kernel_layout '{kernel_layout}' gives out_layout 'NCHW{ko}c', got '{out_layout}'")
    x, w = tensor_sinfo(data, op, "data"), tensor_sinfo(weight, op, "weight")
    dtype = unify_dtypes(op, x, w)
    if x.ndim != 5 or w.ndim != 6:
        raise ValueError(f"{op}: expected 5-D {data_layout} data and 6-D {kernel_layout} weight, got {x.shape} and {w.shape}")
    n, cb, h, wd, xb = x.shape
    ob, icb, kh, kw, wi, wo = w.shape
    channels = cb * bi if isinstance(cb, int) else None
    if depthwise and (groups != channels or not same_dim(ob, cb) or icb != 1):
        raise NotImplementedError(
            f"{op}: in the channel-blocked layout '{data_layout}' groups must be 1, the "
            f"channel count ({channels}) with one filter per channel, or a divisor of the channel "
            f"blocks ({cb}) with whole blocks of filters each, got groups={groups} and weight "
            f"{w.shape}"
        )
    if blockwise and not (
        isinstance(cb, int) and isinstance(ob, int) and cb % groups == 0 and ob % groups == 0
    ):
        raise NotImplementedError(
            f"{op}: in the channel-blocked layout '{data_layout}' a grouped conv2d needs groups "
            f"of whole channel blocks: groups={groups} does not divide the {cb} input and {ob} "
            f"output channel blocks"
        )
    if blockwise and icb * groups != cb:
        raise ValueError(
            f"{op}: groups={groups} of the {cb} channel blocks of {data_layout} data need a "
            f"weight of {cb // groups} input blocks per filter block, got {w.shape}"
        )
    if (xb, wi, wo) != (bi, ki, ko) or not same_dim(cb, ob if depthwise else icb * groups):
        raise ValueError(f"{op}: shapes {x.shape} ({data_layout}) and {w.shape} ({kernel_layout}) do not match")
    strides, dilation = as_ints(strides, 2, op, "strides"), as_ints(dilation, 2, op, "dilation")
    pad = _padding(padding, op)
    oh = _window_out(h, pad[0] + pad[2], kh, strides[0], dilation[0], False, op)
    ow = _window_out(wd, pad[1] + pad[3], kw, strides[1], dilation[1], False, op)
    out = TensorStructInfo([n, ob, oh, ow, ko], out_dtype or dtype)
    attrs = {
        "strides": strides,
        "padding": pad,
        "dilation": dilation,
        "groups": groups,
        "data_layout": data_layout,
        "kernel_layout": kernel_layout,
        "out_dtype": out.dtype,
    }
    return make_call(op, [data, weight], attrs, out)


def _pool2d(
    name: str,
    data: Expr,
    pool_size,
    strides,
    padding,
    dilation,
    ceil_mode: bool,
    count_include_pad: bool,
    layout: str,
    out_layout: str | None,
) -> Call:
    op = f"relax.nn.{name}"
    block = _channel_block(layout, out_layout, op, "layout")
    if block and ceil_mode:
        raise NotImplementedError(f"{op}: layout '{layout}' (channel-blocked: without ceil_mode only)")
    x = tensor_sinfo(data, op, "data")
    if x.ndim != (5 if block else 4):
        raise ValueError(f"{op}: expected {5 if block else 4}-D {layout} data, got {x.shape}")
    k = as_ints(pool_size, 2, op, "pool_size")
    strides, dilation = as_ints(strides, 2, op, "strides"), as_ints(dilation, 2, op, "dilation")
    pad = _padding(padding, op)
    n, c, h, w = x.shape[:4]
    oh = _window_out(h, pad[0] + pad[2], k[0], strides[0], dilation[0], ceil_mode, op)
    ow = _window_out(w, pad[1] + pad[3], k[1], strides[1], dilation[1], ceil_mode, op)
    if ceil_mode:  # torch: the last window must start inside the input or the left padding
        oh -= (oh - 1) * strides[0] >= h + pad[0]
        ow -= (ow - 1) * strides[1] >= w + pad[1]
    attrs = {
        "pool_size": k,
        "strides": strides,
        "padding": pad,
        "dilation": dilation,
        "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad),
        "layout": layout,
    }
    return make_call(op, [data], attrs, TensorStructInfo([n, c, oh, ow] + list(x.shape[4:]), x.dtype))


def max_pool2d(
    data: Expr,
    pool_size: IntOrPair = (1, 1),
    strides: IntOrPair = (1, 1),
    padding: IntOrPair = (0, 0),
    dilation: IntOrPair = (1, 1),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    layout: str = "NCHW",
    out_layout: str | None = None,
) -> Call:
    """`relax.nn.max_pool2d`: maximum over NCHW windows (TVM's defaults: stride 1).

    Parameters
    ----------
    data : Expr
    pool_size, strides, dilation : int or (int, int)
    padding : int, (int, int) or (top, left, bottom, right)
    ceil_mode : bool

    Returns
    -------
    Call
    """
    return _pool2d(
        "max_pool2d",
        data,
        pool_size,
        strides,
        padding,
        dilation,
        ceil_mode,
        count_include_pad,
        layout,
        out_layout,
    )


def avg_pool2d(
    data: Expr,
    pool_size: IntOrPair = (1, 1),
    strides: IntOrPair = (1, 1),
    padding: IntOrPair = (0, 0),
    dilation: IntOrPair = (1, 1),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    layout: str = "NCHW",
    out_layout: str | None = None,
) -> Call:
    """`relax.nn.avg_pool2d`: mean over NCHW windows; `count_include_pad` counts the zero
    padding in the divisor (torch's rule; windows past the padding under ceil_mode never count)."""
    return _pool2d(
        "avg_pool2d",
        data,
        pool_size,
        strides,
        padding,
        dilation,
        ceil_mode,
        count_include_pad,
        layout,
        out_layout,
    )


def adaptive_avg_pool2d(
    data: Expr,
    output_size: IntOrPair | None = None,
    layout: str = "NCHW",
    out_layout: str | None = None,
) -> Call:
    """`relax.nn.adaptive_avg_pool2d`: mean over windows `[floor(i*H/OH), ceil((i+1)*H/OH))`.

    Parameters
    ----------
    data : Expr
    output_size : int or (int, int), optional
        None (or a None entry) keeps the input size.

    Returns
    -------
    Call
    """
    op = "relax.nn.adaptive_avg_pool2d"
    block = _channel_block(layout, out_layout, op, "layout")
    x = tensor_sinfo(data, op, "data")
    if x.ndim != (5 if block else 4):
        raise ValueError(f"{op}: expected {5 if block else 4}-D {layout} data, got {x.shape}")
    size = (
        [None, None]
        if output_size is None
        else ([output_size] * 2 if isinstance(output_size, int) else list(output_size))
    )
    size = [x.shape[2 + i] if s is None else int(s) for i, s in enumerate(size)]
    if block and size != [1, 1]:
        raise NotImplementedError(f"{op}: layout '{layout}' (channel-blocked: output size 1x1 only), got {size}")
    out = TensorStructInfo([x.shape[0], x.shape[1]] + size + list(x.shape[4:]), x.dtype)
    return make_call(op, [data], {"output_size": size, "layout": layout}, out)


def layer_norm(
    data: Expr,
    gamma: Expr,
    beta: Expr,
    axes: int | Sequence[int],
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
) -> Call:
    """`relax.nn.layer_norm`: `(x - mean) / sqrt(var + epsilon) * gamma + beta` over `axes`.

    Parameters
    ----------
    data : Expr
    gamma, beta : Expr
        Shaped like the normalized axes of data.
    axes : int or list of int
    epsilon : float
    center, scale : bool
        Whether beta / gamma are applied.

    Returns
    -------
    Call
    """
    op = "relax.nn.layer_norm"
    x = tensor_sinfo(data, op, "data")
    check_float(x, op, "data")
    ax = normalize_axes(axes, x.ndim, op)
    want = [x.shape[a] for a in ax]
    for what, arg in (("gamma", gamma), ("beta", beta)):
        s = tensor_sinfo(arg, op, what)
        if len(s.shape) != len(want) or not all(same_dim(a, b) for a, b in zip(s.shape, want)):
            raise ValueError(f"{op}: {what} has shape {s.shape}, expected {tuple(want)}")
    attrs = {"axes": ax, "epsilon": float(epsilon), "center": bool(center), "scale": bool(scale)}
    return make_call(op, [data, gamma, beta], attrs, TensorStructInfo(x.shape, x.dtype))


def batch_norm(
    data: Expr,
    gamma: Expr,
    beta: Expr,
    moving_mean: Expr,
    moving_var: Expr,
    axis: int = 1,
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
    momentum: float = 0.1,
) -> Call:
    """`relax.nn.batch_norm` in inference mode, with the moving statistics.

    NOTE: TVM returns the tuple `(out, moving_mean, moving_var)`; this returns `out` only, so
    `bb.emit(relax.op.nn.batch_norm(...))` is the normalized tensor (no `[0]`).

    Parameters
    ----------
    data : Expr
    gamma, beta, moving_mean, moving_var : Expr
        1-D, the size of data's `axis`.
    axis : int, default 1 (channels of NCHW)
    epsilon : float

    Returns
    -------
    Call
        `(x - mean) / sqrt(var + epsilon) * gamma + beta`.
    """
    op = "relax.nn.batch_norm"
    x = tensor_sinfo(data, op, "data")
    check_float(x, op, "data")
    ax = normalize_axis(axis, x.ndim, op)
    args = {"gamma": gamma, "beta": beta, "moving_mean": moving_mean, "moving_var": moving_var}
    for what, arg in args.items():
        s = tensor_sinfo(arg, op, what)
        if s.ndim != 1 or not same_dim(s.shape[0], x.shape[ax]):
            raise ValueError(f"{op}: {what} has shape {s.shape}, expected ({x.shape[ax]},)")
    attrs = {"axis": ax, "epsilon": float(epsilon), "center": bool(center), "scale": bool(scale)}
    return make_call(op, [data, *args.values()], attrs, TensorStructInfo(x.shape, x.dtype))
