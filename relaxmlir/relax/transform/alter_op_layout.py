"""Convolution networks in channel-blocked layouts: batch-norm folding and `AlterOpLayout`.

`relax-fold-batch-norm` folds an inference batch norm that follows a convolution with constant
weights into those weights and a per-channel bias:
`bn(conv(x, W)) = conv(x, W * s) + (beta - mean * s)` with `s = gamma / sqrt(var + eps)`.
Any other batch norm with constant statistics (DenseNet's and pre-activation ResNets' come
after a concat or an add) becomes `x * s + (beta - mean * s)` with both factors computed here
(TVM's SimplifyInference): two per-channel constants, which the layout pass re-lays out like a
bias, where the legalized op would compute a square root per element and keep its input in
NCHW between two layout transforms.

`relax-alter-op-layout` (TVM's AlterOpLayout for the CPU) moves convolutions into the target's
channel-blocked layout, NCHW16c on AVX-512 (`topi.layout`): each conv2d whose weights are constants
becomes `layout_transform` -> blocked conv2d (weights re-laid out here, once) -> `layout_transform`
back. The transforms back are then pushed down through elementwise ops (bias, residual add,
relu: per-channel constants are re-laid out too), max pooling (ceil_mode as extra padding),
average pooling (with one divisor: floor-mode windows, padding counted) and global pooling, and
a transform that meets its inverse cancels, so a ResNet keeps NCHW16c
from its first convolution to its global pool. Depthwise convolutions (groups = channels, MobileNet's) take the same data layout with
an OIHW1i16o kernel. What stays in NCHW: ops the blocked layout does not cover (the graph's
boundaries, reshapes, other grouped convolutions, channel counts that do not divide into
blocks, symbolic shapes).

Weights that are parameters (`keep_params_as_input`: the function's arguments after its
`num_input` inputs) get the same treatment as relax ops instead of constants: the fold's
`W * s` and bias, the re-layout's reshape + transpose, the per-channel operands' layout
transforms. `LiftTransformParams` computes them once, in `f_transform_params`.

Both run before legalization (`relax.get_pipeline("zero")`); the layout pass only with a CPU
target in scope (as in `relax.build`) or given as its option, and not with
RELAXMLIR_ALTER_LAYOUT=0.
"""

from __future__ import annotations

import os

import numpy as np
from mlir import ir

from dialects import relax as rx
from lowering import dense
from lowering.dataflow import graph_functions
from lowering.registry import register_pass
from relaxmlir.relax.op.strategy import is_patch_window
from relaxmlir.relax.transform.fold_constant import dense_to_numpy
from relaxmlir.target import Target
from relaxmlir.transform import Pass

# Ops that act element by element, so any layout of their operands gives the same result.
_UNARY = {
    c.name
    for c in (
        rx.Abs, rx.Negative, rx.Exp, rx.Log, rx.Sqrt, rx.Rsqrt, rx.Sigmoid, rx.Tanh, rx.Erf,
        rx.Floor, rx.Ceil, rx.Round, rx.Sign, rx.Square, rx.Trunc, rx.Relu, rx.Gelu, rx.GeluTanh,
        rx.Silu, rx.LeakyRelu, rx.Clip, rx.Dropout,
    )
}  # fmt: skip
_BINARY = {
    c.name for c in (rx.Add, rx.Subtract, rx.Multiply, rx.Divide, rx.Maximum, rx.Minimum, rx.Power)
}


def _ops(func_op: ir.Operation) -> list[ir.Operation]:
    ops: list[ir.Operation] = []

    def visit(op):
        ops.append(op.operation if hasattr(op, "operation") else op)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    return ops


def _constant(value: ir.Value) -> np.ndarray | None:
    """The value of a relax.constant, also seen through reshapes (importers reshape a conv
    bias to [1, C, 1, 1]; FoldConstant would fold that only after legalization)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    if owner.name in (rx.Reshape.name, rx.ExpandDims.name, rx.Squeeze.name):
        inner, shape = _constant(owner.operands[0]), _static(value)
        return None if inner is None or shape is None else inner.reshape(shape)
    if owner.name != rx.Constant.name:
        return None
    return dense_to_numpy(owner.attributes["value"], value.type)


def _weight_param(value: ir.Value, depth: int = 8) -> bool:
    """A weight the function takes as a parameter (after its `num_input` inputs: a model
    imported with `keep_params_as_input`), or a value computed from such weights and constants
    alone (a batch norm folded into it). What is computed from it here is relax ops, which
    `LiftTransformParams` moves into `f_transform_params`."""
    if _static(value) is None:
        return False
    owner = value.owner
    if isinstance(owner, ir.Block):
        return rx.weight_index(value) is not None
    if depth == 0 or not owner.name.startswith("relax.") or owner.name == rx.CallDPSPacked.name:
        return False
    operands = list(owner.operands)
    weights = [_weight_param(v, depth - 1) for v in operands]  # each operand once
    return any(weights) and all(w or _constant(v) is not None for w, v in zip(weights, operands))


def _weight(value: ir.Value) -> np.ndarray | ir.Value | None:
    """A conv's weight: its constant array, or the value of a weight parameter; else None."""
    array = _constant(value)
    if array is not None:
        return array
    return value if _weight_param(value) else None


def _shape_of(weight: np.ndarray | ir.Value) -> list[int]:
    return list(weight.shape) if isinstance(weight, np.ndarray) else _static(weight)


def _static(value: ir.Value) -> list[int] | None:
    """The shape of a tensor whose sizes are static but for the batch (axis 0 of a rank-4 or
    rank-5 tensor: a model built for any batch), which stays MLIR's dynamic size; else None."""
    t = value.type
    if not isinstance(t, ir.RankedTensorType):
        t = ir.RankedTensorType(t) if ir.RankedTensorType.isinstance(t) else None
    if t is None:
        return None
    shape = list(t.shape)
    if any(ir.ShapedType.is_dynamic_size(d) for d in shape[1:]) or (
        shape and ir.ShapedType.is_dynamic_size(shape[0]) and len(shape) not in (4, 5)
    ):
        return None
    return shape


def _declared_shape(value: ir.Value) -> list[ir.Attribute] | None:
    """The `relax.shape` entries declared for `value` (a symbol for each symbolic size), from
    the op that makes it or the function argument it is; None when none is declared."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        func = owner.owner
        if func is None or "arg_attrs" not in func.attributes:
            return None
        attrs = ir.DictAttr(ir.ArrayAttr(func.attributes["arg_attrs"])[value.arg_number])
        return list(ir.ArrayAttr(attrs[rx.SHAPE_ATTR])) if rx.SHAPE_ATTR in attrs else None
    if rx.SHAPE_ATTR not in owner.attributes:
        return None
    return list(ir.ArrayAttr(ir.ArrayAttr(owner.attributes[rx.SHAPE_ATTR])[value.result_number]))


def _dynamic_batch(t: ir.Type) -> bool:
    """A tensor whose only symbolic size is the batch (axis 0): what `_static` lets through."""
    return (
        isinstance(t, ir.RankedTensorType)
        and t.rank > 0
        and ir.ShapedType.is_dynamic_size(t.shape[0])
        and not any(ir.ShapedType.is_dynamic_size(d) for d in t.shape[1:])
    )


def _size_of(entry: ir.Attribute) -> int | None:
    """A `relax.shape` entry's static size (None for a symbol)."""
    return entry.value if isinstance(entry, ir.IntegerAttr) else None


def _declare_batch_symbols(func_op: ir.Operation) -> None:
    """The ops these passes made with a symbolic batch declare it: their `relax.shape` is the
    batch symbol of their first operand with a symbolic batch, then their static sizes (a
    blocked op copied its NCHW original's 4-D entry; a new one had none, and legalization gave
    it a fresh symbol that the ops after it, declared with the old one, refused)."""
    i64 = ir.IntegerType.get_signless(64)
    for op in _ops(func_op):
        if not op.name.startswith("relax.") or not any(_dynamic_batch(r.type) for r in op.results):
            continue
        declared = [_declared_shape(r) for r in op.results]
        if all(
            d is not None
            and len(d) == ir.RankedTensorType(r.type).rank
            and all(
                ir.ShapedType.is_dynamic_size(size) or _size_of(e) == size
                for e, size in zip(d, ir.RankedTensorType(r.type).shape)
            )
            for d, r in zip(declared, op.results)
        ):
            continue
        batch = next(
            (
                d[0]
                for v in op.operands
                if _dynamic_batch(v.type)
                for d in [_declared_shape(v)]
                if d
            ),
            None,
        )
        if batch is None:
            continue
        entries = []
        for r in op.results:
            shape = ir.RankedTensorType(r.type).shape
            entries.append(ir.ArrayAttr.get([
                batch if ir.ShapedType.is_dynamic_size(size) else ir.IntegerAttr.get(i64, size)
                for size in shape
            ]))  # fmt: skip
        op.attributes[rx.SHAPE_ATTR] = ir.ArrayAttr.get(entries)


def _new_constant(array: np.ndarray, like: ir.Type, owned: bool = False) -> ir.Value:
    element = ir.RankedTensorType(like).element_type
    t = ir.RankedTensorType.get(list(array.shape), element)
    attr = dense.elements(array, type=t, owned=owned)
    return rx.Constant.create([], [t], {"value": attr}).result


def _string(op: ir.Operation, key: str) -> str:
    return ir.StringAttr(op.attributes[key]).value


def _ints(op: ir.Operation, key: str) -> list[int]:
    return [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes[key])]


def _attrs(op: ir.Operation) -> dict[str, ir.Attribute]:
    return {name: op.attributes[name] for name in op.attributes}


def _int_array(values: list[int]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.IntegerAttr.get(i64, v) for v in values])


def _ceil_mode_as_padding(pool: ir.Operation) -> list[int] | None:
    """The padding that gives a static ceil_mode max pool its output extents under the floor
    rule: the bottom and right padding grow to cover the last windows (GoogLeNet's pools), and
    a maximum never picks padding, so the result is the same. None for symbolic shapes."""
    x, out = _static(pool.operands[0]), _static(pool.results[0])
    if x is None or out is None:
        return None
    pad, k = _ints(pool, "padding"), _ints(pool, "pool_size")
    strides, dilation = _ints(pool, "strides"), _ints(pool, "dilation")
    new = list(pad)
    for axis in range(2):
        size, extent = x[2 + axis], out[2 + axis]
        span = dilation[axis] * (k[axis] - 1) + 1
        need = (extent - 1) * strides[axis] + span - size - pad[axis]
        new[2 + axis] = max(pad[2 + axis], need)
        if (size + pad[axis] + new[2 + axis] - span) // strides[axis] + 1 != extent:
            return None
    return new


def _uniform_avg_pool(pool: ir.Operation) -> bool:
    """An average pool (static, undilated) with one divisor, the window's: its windows are the
    floor rule's (no ceil_mode, or one that adds no window, whose divisor would be another) and
    the padding is counted or absent. The blocked kernel (`topi.nn.blocked.pool2d_nchwc`) then
    divides by a constant along its vectors; the others stay in NCHW (a divisor per position is
    index arithmetic, naive loops in either layout). Inception-v3's 3x3 / 1 branch pools and
    DenseNet's 2x2 / 2 transitions ran in NCHW between two layout transforms, as scalar loops:
    3.3 of Inception-v3's 64 ms."""
    x, out = _static(pool.operands[0]), _static(pool.results[0])
    if x is None or out is None or _ints(pool, "dilation") != [1, 1]:
        return False
    pad, k, strides = _ints(pool, "padding"), _ints(pool, "pool_size"), _ints(pool, "strides")
    if any(pad) and not ir.BoolAttr(pool.attributes["count_include_pad"]).value:
        return False
    return all(
        (x[2 + a] + pad[a] + pad[2 + a] - k[a]) // strides[a] + 1 == out[2 + a] for a in range(2)
    )


def _only_use(value: ir.Value) -> ir.Operation | None:
    uses = list(value.uses)
    return uses[0].owner if len(uses) == 1 else None


# -- batch norm folding --------------------------------------------------------------------------


def fold_batch_norm(module_op: ir.Operation) -> None:
    for func_op in graph_functions(module_op):
        for bn in _ops(func_op):
            if bn.name == rx.BatchNorm.name and not _fold_one(bn):
                _decompose_one(bn)
        _declare_batch_symbols(func_op)


def _scale_shift(bn: ir.Operation, params: list[np.ndarray], bias) -> tuple[np.ndarray, np.ndarray]:
    """The batch norm's per-channel `(s, shift)` in float64: `bn(x + bias) = x * s + shift`."""
    gamma, beta, mean, var = params
    eps = ir.FloatAttr(bn.attributes["epsilon"]).value
    scale = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    if ir.BoolAttr(bn.attributes["scale"]).value:
        scale = gamma.astype(np.float64) * scale
    shift = (bias - mean) * scale
    if ir.BoolAttr(bn.attributes["center"]).value:
        shift = shift + beta
    return scale, shift


_FLOAT_TYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def _decompose_one(bn: ir.Operation) -> None:
    """`bn(x) = x * s + shift` with both per-channel constants (shaped to broadcast along the
    axis) computed here; kept as it is where the statistics are not constants."""
    params = [_constant(v) for v in list(bn.operands)[1:]]
    data = bn.operands[0]
    try:
        t = ir.RankedTensorType(data.type)
    except ValueError:
        return
    dtype = _FLOAT_TYPES.get(str(t.element_type))
    if dtype is None:
        return
    axis = ir.IntegerAttr(bn.attributes["axis"]).value % t.rank
    if any(p is None for p in params):
        _decompose_weight_params(bn, t, axis)
        return
    channels = params[2].size
    if any(p.size != channels for p in params) or (
        not ir.ShapedType.is_dynamic_size(t.shape[axis]) and t.shape[axis] != channels
    ):
        return
    scale, shift = _scale_shift(bn, [p.reshape(-1) for p in params], 0.0)
    shape = [channels if d == axis else 1 for d in range(t.rank)]
    with ir.InsertionPoint(bn), bn.location:
        s = _new_constant(scale.astype(dtype).reshape(shape), data.type)
        b = _new_constant(shift.astype(dtype).reshape(shape), data.type)
    _multiply_add(bn, s, b)


def _multiply_add(bn: ir.Operation, s: ir.Value, shift: ir.Value) -> None:
    """`bn`'s uses read `x * s + shift` (per-channel operands shaped to broadcast along its
    axis); `bn` goes, with what only it read."""
    # A symbolic shape (a batch built for any size) goes on with the batch norm's symbols: the
    # ops after it are declared with them.
    attrs = (
        {rx.SHAPE_ATTR: bn.attributes[rx.SHAPE_ATTR]} if rx.SHAPE_ATTR in bn.attributes else None
    )
    with ir.InsertionPoint(bn), bn.location:
        mul = rx.Multiply.create([bn.operands[0], s], [bn.results[0].type], attrs)
        add = rx.Add.create([mul.result, shift], [bn.results[0].type], attrs)
    bn.results[0].replace_all_uses_with(add.result)
    _erase_dead(bn)


def _channel_op(kind, *operands: ir.Value, shape: list[int], element: ir.Type) -> ir.Value:
    """A relax op over per-channel vectors (at the insertion point in scope)."""
    t = ir.RankedTensorType.get(shape, element)
    attrs = {"shape": _int_array(shape)} if kind is rx.Reshape else None
    return kind.create(list(operands), [t], attrs).result


def _param_scale(
    bn: ir.Operation, gamma: ir.Value, var: ir.Value, channels: int, element
) -> ir.Value:
    """`s = gamma / sqrt(var + eps)` of a batch norm whose statistics are parameters."""
    eps = ir.FloatAttr(bn.attributes["epsilon"]).value
    vector = ir.RankedTensorType.get([channels], element)
    eps_c = _new_constant(np.array(eps, _FLOAT_TYPES[str(element)]), vector)
    shifted = _channel_op(rx.Add, var, eps_c, shape=[channels], element=element)
    s = _channel_op(rx.Rsqrt, shifted, shape=[channels], element=element)
    if ir.BoolAttr(bn.attributes["scale"]).value:
        s = _channel_op(rx.Multiply, gamma, s, shape=[channels], element=element)
    return s


def _param_shift(
    bn: ir.Operation, centered: ir.Value, s: ir.Value, beta: ir.Value, channels: int, element
) -> ir.Value:
    """`shift = centered * s + beta` (`centered`: `bias - mean`, or `-mean`)."""
    shift = _channel_op(rx.Multiply, centered, s, shape=[channels], element=element)
    if ir.BoolAttr(bn.attributes["center"]).value:
        shift = _channel_op(rx.Add, shift, beta, shape=[channels], element=element)
    return shift


def _decompose_weight_params(bn: ir.Operation, t: ir.RankedTensorType, axis: int) -> None:
    """`_decompose_one` where the statistics are parameters (`keep_params_as_input`): `s` and
    `shift` as relax ops on them, which `LiftTransformParams` computes once, not the batch norm
    kernel's square root per element at every call (a BatchNorm1d after a linear layer)."""
    channels, element = _static(bn.operands[3]), t.element_type  # the running mean
    if channels is None or len(channels) != 1:
        return
    channels = channels[0]
    stats = _parameter_statistics(bn, channels)
    if stats is None or any(ir.RankedTensorType(v.type).element_type != element for v in stats):
        return
    if not ir.ShapedType.is_dynamic_size(t.shape[axis]) and t.shape[axis] != channels:
        return
    gamma, beta, mean, var = stats
    shape = [channels if d == axis else 1 for d in range(t.rank)]
    with ir.InsertionPoint(bn), bn.location:
        s = _param_scale(bn, gamma, var, channels, element)
        negated = _channel_op(rx.Negative, mean, shape=[channels], element=element)
        shift = _param_shift(bn, negated, s, beta, channels, element)
        s = _channel_op(rx.Reshape, s, shape=shape, element=element)
        shift = _channel_op(rx.Reshape, shift, shape=shape, element=element)
    _multiply_add(bn, s, shift)


def _parameter_statistics(bn: ir.Operation, channels: int) -> list[ir.Value] | None:
    """`bn`'s (gamma, beta, mean, var) where they are weights, at least one a parameter (else
    the constants' fold applies), each of `channels` values; else None."""
    stats = list(bn.operands)[1:]
    if not all(_weight(v) is not None for v in stats) or not any(map(_weight_param, stats)):
        return None
    return stats if all(_static(v) == [channels] for v in stats) else None


def _conv_before(bn: ir.Operation) -> tuple[ir.Operation, ir.Value | None] | None:
    """(the NCHW conv2d whose result only `bn` reads, the bias added between them or None)."""
    source, bias = bn.operands[0].owner, None
    if not isinstance(source, ir.Block) and source.name == rx.Add.name:  # conv + bias, then bn
        bias = source.operands[1]
        if _only_use(source.results[0]) is None:
            return None
        source = source.operands[0].owner
    if isinstance(source, ir.Block) or source.name != rx.Conv2d.name:
        return None
    if _string(source, "data_layout") != "NCHW" or _only_use(source.results[0]) is None:
        return None
    return source, bias


def _fold_one(bn: ir.Operation) -> bool:
    """Fold `bn` into the conv before it; False where it is not such a batch norm."""
    if ir.IntegerAttr(bn.attributes["axis"]).value != 1:
        return False
    params = [_constant(v) for v in list(bn.operands)[1:]]
    if any(p is None for p in params):
        return _fold_weight_params(bn)
    found = _conv_before(bn)
    if found is None:
        return False
    source, bias = found
    if bias is not None:
        bias = _constant(bias)
        if bias is None:
            return False
    weight = _constant(source.operands[1])
    out_shape = _static(source.results[0])
    if weight is None or out_shape is None or weight.dtype != np.float32:
        return False
    channels = out_shape[1]
    if bias is not None:
        if (
            bias.size not in (1, channels)
            or bias.ndim > 4
            or (bias.ndim >= 3 and bias.size > 1 and bias.shape[-3] != channels)
        ):
            return False
        bias = np.broadcast_to(bias.reshape(-1), (channels,)).astype(np.float64)
    else:
        bias = np.zeros(channels)
    scale, shift = _scale_shift(bn, params, bias)
    # W * s rounded once from float64, in the buffer the constant keeps: numpy multiplies in
    # chunks, no float64 copy of the weights (fresh memory costs most: 0.3 s of ResNet-18's build)
    folded = dense.aligned_empty(weight.shape, np.float32)
    np.multiply(weight, scale.reshape(-1, 1, 1, 1), out=folded, casting="same_kind")
    with ir.InsertionPoint(source), source.location:
        w = _new_constant(folded, source.operands[1].type, owned=True)
        conv = _conv_over(source, w)
    with ir.InsertionPoint(bn), bn.location:
        b = _new_constant(
            shift.astype(np.float32).reshape(1, channels, 1, 1), source.operands[1].type
        )
    _replace_batch_norm(bn, conv, b)
    return True


def _conv_over(conv: ir.Operation, weight: ir.Value) -> ir.Value:
    """`conv` again with `weight` (at the insertion point in scope)."""
    return ir.Operation.create(
        conv.name,
        results=[conv.results[0].type],
        operands=[conv.operands[0], weight],
        attributes=_attrs(conv),
    ).result


def _replace_batch_norm(bn: ir.Operation, conv: ir.Value, shift: ir.Value) -> None:
    """`bn`'s uses read `conv + shift`; `bn` goes, with its statistics, the old bias add (if
    any), the old conv and weights where nothing else reads them."""
    with ir.InsertionPoint(bn), bn.location:
        add = rx.Add.create([conv, shift], [bn.results[0].type])
    bn.results[0].replace_all_uses_with(add.result)
    _erase_dead(bn)


def _fold_weight_params(bn: ir.Operation) -> bool:
    """`_fold_one` where the weights are parameters (`keep_params_as_input`): the same algebra
    as relax ops, `W * s` and `(bias - mean) * s + beta` with `s = gamma / sqrt(var + eps)`,
    which `LiftTransformParams` computes once; in float32 (the constants' fold: float64)."""
    found = _conv_before(bn)
    if found is None or (found[1] is not None and _weight(found[1]) is None):
        return False
    source, bias = found
    weight, out_shape = source.operands[1], _static(source.results[0])
    if _weight(weight) is None or out_shape is None:
        return False
    channels, f32 = out_shape[1], ir.F32Type.get()
    if ir.RankedTensorType(weight.type).element_type != f32:
        return False
    stats = _parameter_statistics(bn, channels)
    if stats is None:
        return False
    if bias is not None and (_static(bias) is None or int(np.prod(_static(bias))) != channels):
        return False
    gamma, beta, mean, var = stats
    with ir.InsertionPoint(source), source.location:
        s = _param_scale(bn, gamma, var, channels, f32)
        per_filter = _channel_op(rx.Reshape, s, shape=[channels, 1, 1, 1], element=f32)
        scaled = rx.Multiply.create([weight, per_filter], [weight.type]).result
        conv = _conv_over(source, scaled)
    with ir.InsertionPoint(bn), bn.location:
        if bias is None:
            centered = _channel_op(rx.Negative, mean, shape=[channels], element=f32)
        else:
            flat = _channel_op(rx.Reshape, bias, shape=[channels], element=f32)
            centered = _channel_op(rx.Subtract, flat, mean, shape=[channels], element=f32)
        shift = _param_shift(bn, centered, s, beta, channels, f32)
        shift = _channel_op(rx.Reshape, shift, shape=[1, channels, 1, 1], element=f32)
    _replace_batch_norm(bn, conv, shift)
    return True


def _erase_dead(op: ir.Operation) -> None:
    """Erase `op` and then its producers that nothing else uses (pure relax ops only)."""
    work = [op]
    while work:
        op = work.pop()
        if any(len(list(r.uses)) for r in op.results):
            continue
        producers = [v.owner for v in op.operands if not isinstance(v.owner, ir.Block)]
        op.erase()
        # Layout transforms stay (`_Layouts` may hand them out again) until the final sweep.
        keep = (rx.CallTIR.name, rx.LayoutTransform.name)
        work.extend(p for p in producers if p.name.startswith("relax.") and p.name not in keep)


@register_pass(
    "relax-fold-batch-norm",
    "fold inference batch norms after constant-weight conv2d into the weights, others with "
    "constant statistics into a per-channel multiply-add",
)
def relax_fold_batch_norm():
    return fold_batch_norm


def FoldBatchnormToConv2D() -> Pass:
    """Fold `nn.batch_norm` (constant statistics) after a constant-weight `nn.conv2d` into the
    weights and a per-channel bias add; the other batch norms with constant statistics become
    a per-channel multiply and add."""
    return Pass("FoldBatchnormToConv2D", lambda mod: fold_batch_norm(mod.module.operation))


# -- layout alteration ---------------------------------------------------------------------------


class _Layouts:
    """The rewrite of one graph function; `transforms` reuses one transform per (value, layout)."""

    def __init__(self, block: int):
        self.block = block
        self.transforms: dict[tuple[ir.Value, str], ir.Value] = {}

    def transform(self, value: ir.Value, src: str, dst: str) -> ir.Value:
        key = (value, dst)
        if key not in self.transforms:
            owner = value.owner
            if not isinstance(owner, ir.Block) and owner.name == rx.LayoutTransform.name:
                if _string(owner, "src_layout") == dst and _string(owner, "dst_layout") == src:
                    return owner.operands[0]  # the inverse of what made it
            shape = _static(value)
            elem = ir.RankedTensorType(value.type).element_type
            new_shape = _transform_shape(shape, src, dst)
            op = rx.LayoutTransform.create(
                [value],
                [ir.RankedTensorType.get(new_shape, elem)],
                {"src_layout": ir.StringAttr.get(src), "dst_layout": ir.StringAttr.get(dst)},
            )
            self.transforms[key] = op.result
        return self.transforms[key]


def _block_of(layout: str) -> int:
    from relaxmlir.topi.layout import channel_block

    return channel_block(layout)


def _transform_shape(shape, src, dst):
    from relaxmlir.topi.layout import transform_shape

    return transform_shape(shape, src, dst)


def _back(value: ir.Value) -> tuple[ir.Value, str] | None:
    """(blocked value, its layout) when `value` is a transform from a blocked layout to NCHW."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != rx.LayoutTransform.name:
        return None
    if _string(owner, "dst_layout") != "NCHW":
        return None
    return owner.operands[0], _string(owner, "src_layout")


def _blocked_type(nchw: ir.Type, block: int) -> ir.Type:
    t = ir.RankedTensorType(nchw)
    n, c, h, w = t.shape
    return ir.RankedTensorType.get([n, c // block, h, w, block], t.element_type)


def _blockable_conv(op: ir.Operation) -> tuple[int, int] | None:
    """(input channels, output channels) of an NCHW / OIHW float32 conv2d with static shapes,
    no dilation and a constant weight that is not a patch embedding (im2col + matmul in NCHW);
    None for any other. The group rules are the caller's."""
    if _string(op, "data_layout") != "NCHW" or _string(op, "kernel_layout") != "OIHW":
        return None
    # Any strides: the direct kernel's schedule splits a strided window by phase along each
    # axis (lowering/schedule/phases.py), so a conv1d with stride 2 (a [1, s] stride once it is
    # a conv2d over H = 1: wav2vec2's feature extractor) is blocked too; the phase-split
    # candidates (conv2d_nchwc.phased / .phases) take equal strides only.
    if _ints(op, "dilation") != [1, 1]:
        return None
    x, w, out = _static(op.operands[0]), _static(op.operands[1]), _static(op.results[0])
    if x is None or w is None or out is None or len(x) != 4:
        return None
    if is_patch_window(w[2:], _ints(op, "strides"), (1, 1)):
        return None
    if ir.RankedTensorType(op.results[0].type).element_type != ir.F32Type.get():
        return None
    if _weight(op.operands[1]) is None:
        return None
    return x[1], w[0]


def _convertible_conv(op: ir.Operation, lanes: int) -> bool:
    """One group, or depthwise (groups = channels), with channels that divide into blocks."""
    channels = _blockable_conv(op)
    if channels is None:
        return False
    c, o = channels
    groups = ir.IntegerAttr(op.attributes["groups"]).value
    if groups != 1 and not groups == c == o:  # grouped, not depthwise: `_convert_grouped`
        return False
    if groups != 1 and not _block(c, lanes):
        return False
    return bool(_block(o, lanes)) and _input_block(c, lanes) > 0


def _block(channels: int, lanes: int) -> int:
    """The channel block of a tensor with `channels` channels: a whole vector, else half of one
    (MobileNetV2's 24-channel layers on AVX-512 in NCHW8c: their 1x1 convolutions ran at 25-50
    GFLOP/s in NCHW); 0 when neither divides the channels."""
    return next((b for b in (lanes, lanes // 2) if b >= 8 and channels % b == 0), 0)


def _input_block(channels: int, lanes: int) -> int:
    """The block a convolution reads its input in: `_block`, or all the channels in one block
    when they are fewer than a vector (an RGB stem: NCHW3c)."""
    return _block(channels, lanes) or (channels if channels < lanes else 0)


def _blocked_conv(
    op: ir.Operation,
    x: ir.Value,
    w: np.ndarray | ir.Value,
    ki: int,
    bo: int,
    groups: int | None = None,
) -> ir.Value:
    """`op`'s conv2d (its `groups`, unless given) of blocked `x` with the OIHW weight `w` laid
    out in blocks of `ki` input and `bo` output channels (at the insertion point in scope); a
    constant is laid out here, a weight parameter by a reshape and a transpose."""
    o, i, kh, kw = _shape_of(w)
    # w6[ob, cb, kh, kw, ci, oi] = w[ob * bo + oi, cb * ki + ci, kh, kw]
    split, order = (o // bo, bo, i // ki, ki, kh, kw), (0, 2, 4, 5, 3, 1)
    if isinstance(w, np.ndarray):
        weight = _new_constant(w.reshape(split).transpose(order), op.operands[1].type)
    else:
        elem = ir.RankedTensorType(w.type).element_type
        reshaped = rx.Reshape.create(
            [w], [ir.RankedTensorType.get(list(split), elem)], {"shape": _int_array(list(split))}
        ).result
        weight = rx.PermuteDims.create(
            [reshaped],
            [ir.RankedTensorType.get([split[a] for a in order], elem)],
            {"axes": _int_array(list(order))},
        ).result
    n, _, oh, ow = ir.RankedTensorType(op.results[0].type).shape
    elem = ir.RankedTensorType(op.results[0].type).element_type
    attrs = _attrs(op)
    attrs["data_layout"] = ir.StringAttr.get(f"NCHW{ir.RankedTensorType(x.type).shape[4]}c")
    attrs["kernel_layout"] = ir.StringAttr.get(f"OIHW{ki}i{bo}o")
    if groups is not None:
        attrs["groups"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), groups)
    return ir.Operation.create(
        op.name,
        results=[ir.RankedTensorType.get([n, o // bo, oh, ow, bo], elem)],
        operands=[x, weight],
        attributes=attrs,
    ).result


def _convert_conv(op: ir.Operation, lay: _Layouts) -> None:
    lanes = lay.block
    c = _static(op.operands[0])[1]
    w = _weight(op.operands[1])
    o, i = _shape_of(w)[:2]
    bi, bo = _input_block(c, lanes), _block(o, lanes)
    ki = bi if i == c else 1  # depthwise (groups = channels): one input channel per filter
    with ir.InsertionPoint(op), op.location:
        x = lay.transform(op.operands[0], "NCHW", f"NCHW{bi}c")
        back = lay.transform(_blocked_conv(op, x, w, ki, bo), f"NCHW{bo}c", "NCHW")
    op.results[0].replace_all_uses_with(back)
    _erase_dead(op)


def _blockable_grouped_conv(op: ir.Operation, lanes: int) -> bool:
    """A grouped convolution (1 < groups, not depthwise) with constant weights whose groups'
    input and output channels divide into blocks."""
    channels = _blockable_conv(op)
    if channels is None:
        return False
    c, o = channels
    groups = ir.IntegerAttr(op.attributes["groups"]).value
    if groups <= 1 or groups == c == o:
        return False
    return bool(_group_block(c, o, groups, lanes)) or (
        bool(_block(c // groups, lanes)) and bool(_block(o // groups, lanes))
    )


def _group_block(c: int, o: int, groups: int, lanes: int) -> int:
    """The channel block of a grouped convolution whose groups are one block each, in and out
    (RegNet's groups of 8 in NCHW8c); else 0."""
    width = c // groups
    return width if o // groups == width and _block(width, lanes) == width else 0


def _convert_grouped(op: ir.Operation, lay: _Layouts) -> None:
    """A grouped convolution as one blocked grouped convolution: each group's input and output
    channels whole blocks (one block each: `topi.nn.blocked.grouped_conv2d_nchwc`; several:
    `grouped_conv2d_nchwc_blocks`). wav2vec2's positional convolution (768 channels in 16
    groups, a 128-tap window) ran in NCHW as scalar loops: 112 ms; ResNeXt-50, whose last stage
    was one blocked convolution per group (32 calls, 32 slices and a concatenation per layer),
    built in 6.5 s, now 4.0."""
    lanes = lay.block
    groups = ir.IntegerAttr(op.attributes["groups"]).value
    w = _weight(op.operands[1])
    o, i = _shape_of(w)[:2]
    block = _group_block(i * groups, o, groups, lanes)
    bi, bo = (block, block) if block else (_block(i, lanes), _block(o // groups, lanes))
    with ir.InsertionPoint(op), op.location:
        x = lay.transform(op.operands[0], "NCHW", f"NCHW{bi}c")
        back = lay.transform(_blocked_conv(op, x, w, bi, bo), f"NCHW{bo}c", "NCHW")
    op.results[0].replace_all_uses_with(back)
    _erase_dead(op)


def _blocked_constant(array: np.ndarray, shape: list[int], block: int) -> np.ndarray | None:
    """A constant broadcast against an NCHW tensor of `shape`, laid out for its NCHW<block>c
    form (None when it does not broadcast per channel)."""
    if array.ndim > 4:
        return None
    a = array.reshape((1,) * (4 - array.ndim) + array.shape)
    n, c, h, w = a.shape
    if any(d not in (1, full) for d, full in zip(a.shape, shape)):
        return None
    if c == 1:
        return a.reshape(n, 1, h, w, 1)
    return a.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2)


def _per_channel(shape: list[int], out: list[int]) -> bool:
    """An NCHW operand of `shape` that broadcasts against `out` with all its channels (so its
    blocked form broadcasts against the blocked result)."""
    return (
        len(shape) == 4
        and shape[1] == out[1]
        and all(d in (1, full) for d, full in zip(shape, out))
    )


def _push(op: ir.Operation, lay: _Layouts) -> bool:
    """Move a transform back to NCHW from `op`'s operand to its result; True when rewritten."""
    name = op.name
    if name == rx.LayoutTransform.name:  # a transform meeting its inverse: both cancel
        inner = op.operands[0].owner
        if isinstance(inner, ir.Block) or inner.name != name:
            return False
        if _string(inner, "src_layout") != _string(op, "dst_layout") or _string(
            inner, "dst_layout"
        ) != _string(op, "src_layout"):
            # X -> NCHW -> Y between two block sizes: one transform X -> Y
            first, dst = _string(inner, "src_layout"), _string(op, "dst_layout")
            a, b = _block_of(first), _block_of(dst)
            if _string(op, "src_layout") != "NCHW" or not a or not b or (a % b and b % a):
                return False
            with ir.InsertionPoint(op), op.location:
                direct = rx.LayoutTransform.create(
                    [inner.operands[0]],
                    [op.results[0].type],
                    {"src_layout": ir.StringAttr.get(first), "dst_layout": ir.StringAttr.get(dst)},
                ).result
            for key in [k for k, v in lay.transforms.items() if v == op.results[0]]:
                lay.transforms[key] = direct
            op.results[0].replace_all_uses_with(direct)
            op.erase()
            return True
        op.results[0].replace_all_uses_with(inner.operands[0])
        op.erase()
        return True
    pools = (rx.MaxPool2d.name, rx.AvgPool2d.name, rx.AdaptiveAvgPool2d.name)
    if name in _UNARY or name in pools:
        back = _back(op.operands[0])
        if back is None:
            return False
        value, layout = back
        block = int(layout[4:-1])
        attrs = _attrs(op)
        if name == rx.MaxPool2d.name:
            if ir.BoolAttr(op.attributes["ceil_mode"]).value:
                padding = _ceil_mode_as_padding(op)
                if padding is None:
                    return False
                attrs["padding"] = _int_array(padding)
                attrs["ceil_mode"] = ir.BoolAttr.get(False)
            attrs["layout"] = ir.StringAttr.get(layout)
        elif name == rx.AvgPool2d.name:
            if not _uniform_avg_pool(op):
                return False
            attrs["ceil_mode"] = ir.BoolAttr.get(False)
            attrs["layout"] = ir.StringAttr.get(layout)
        elif name == rx.AdaptiveAvgPool2d.name:
            if _ints(op, "output_size") != [1, 1]:
                return False
            attrs["layout"] = ir.StringAttr.get(layout)
        operands = [value]
    elif name in _SPATIAL_REDUCTIONS:
        return _push_spatial_reduction(op, lay)
    elif name == rx.Concat.name:
        return _push_channel_concat(op, lay)
    elif name in _BINARY:
        out = _static(op.results[0])
        if out is None or len(out) != 4:
            return False
        sides = [_back(v) for v in op.operands]
        layout = next(
            (
                side[1]
                for v, side in zip(op.operands, sides)
                if side is not None and _static(v) == out
            ),
            None,
        )  # an operand of the result's shape comes from a blocked layout
        if layout is None:
            return False
        block = int(layout[4:-1])
        operands = []
        for v, side in zip(op.operands, sides):
            shape = _static(v)
            blocked = side is not None and side[1] == layout
            if blocked and shape is not None and _per_channel(shape, out):
                operands.append(side[0])  # blocked already (a squeeze-excite's [N, C, 1, 1] scale)
                continue
            array = _constant(v)
            if array is not None:
                laid = _blocked_constant(array, out, block)
                if laid is None:
                    return False
                with ir.InsertionPoint(op), op.location:
                    operands.append(_new_constant(laid, v.type))
                continue
            if shape is None or not _per_channel(shape, out):
                return False
            with ir.InsertionPoint(op), op.location:
                operands.append(lay.transform(v, "NCHW", layout))
        attrs = _attrs(op)
    else:
        return False
    return _rebuild_blocked(op, operands, attrs, layout, lay)


def _rebuild_blocked(op: ir.Operation, operands, attrs, layout: str, lay: _Layouts) -> bool:
    """`op` over blocked `operands` with a blocked result, transformed back for its users."""
    block = int(layout[4:-1])
    with ir.InsertionPoint(op), op.location:
        new = ir.Operation.create(
            op.name,
            results=[_blocked_type(op.results[0].type, block)],
            operands=operands,
            attributes=attrs,
        )
        back = lay.transform(new.result, layout, "NCHW")
    op.results[0].replace_all_uses_with(back)
    _erase_dead(op)
    return True


def _push_spatial_reduction(op: ir.Operation, lay: _Layouts) -> bool:
    """A mean / sum / max / min over H and W of a blocked tensor (an SE block's squeeze, a
    classifier's pooling written as `x.mean((2, 3))`) reduces the blocked tensor over the same
    axes, keeping them: [N, C/b, 1, 1, b], then back to NCHW ([N, C, 1, 1]) and, without
    keepdims, squeezed to [N, C]. In NCHW it left a transform back after every depthwise
    convolution of an EfficientNet-style network and one into the excitation's multiply."""
    back = _back(op.operands[0])
    if back is None or ir.RankedTensorType(op.operands[0].type).rank != 4:
        return False
    if sorted(a % 4 for a in _ints(op, "axis")) != [2, 3]:
        return False
    value, layout = back
    blocked = ir.RankedTensorType(value.type)
    n, cb, _, _, b = blocked.shape
    attrs = _attrs(op)
    attrs["axis"] = _int_array([2, 3])
    attrs["keepdims"] = ir.BoolAttr.get(True)
    with ir.InsertionPoint(op), op.location:
        new = ir.Operation.create(
            op.name,
            results=[ir.RankedTensorType.get([n, cb, 1, 1, b], blocked.element_type)],
            operands=[value],
            attributes=attrs,
        )
        result = lay.transform(new.result, layout, "NCHW")
        if not ir.BoolAttr(op.attributes["keepdims"]).value:
            squeeze = rx.Squeeze.create(
                [result], [op.results[0].type], {"axis": _int_array([2, 3])}
            )
            result = squeeze.result
    op.results[0].replace_all_uses_with(result)
    _erase_dead(op)
    return True


_SPATIAL_REDUCTIONS = {c.name for c in (rx.Mean, rx.Sum, rx.Max, rx.Min)}


def _push_channel_concat(op: ir.Operation, lay: _Layouts) -> bool:
    """A concat along the channels of NCHW tensors, one of them from a blocked layout, is a
    concat of the channel blocks when every input's channels divide into blocks (a UNet's skip
    connection, a detector's neck): the others are transformed in, and the result stays
    blocked instead of leaving the layout before the concat and entering it again after."""
    out = _static(op.results[0])
    if out is None or len(out) != 4 or ir.IntegerAttr(op.attributes["axis"]).value % 4 != 1:
        return False
    sides = [_back(v) for v in op.operands]
    layout = next((side[1] for side in sides if side is not None), None)
    if layout is None:
        return False
    block = int(layout[4:-1])
    operands = []
    for v, side in zip(op.operands, sides):
        shape = _static(v)
        if shape is None or shape[1] % block:
            return False
        if side is not None and side[1] == layout:
            operands.append(side[0])
            continue
        with ir.InsertionPoint(op), op.location:
            operands.append(lay.transform(v, "NCHW", layout))
    attrs = _attrs(op)
    attrs["axis"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)
    return _rebuild_blocked(op, operands, attrs, layout, lay)


# RELAXMLIR_ALTER_LAYOUT=0 keeps every convolution in NCHW (to compare layouts, or to see the
# NCHW strategies at work).
ALTER_LAYOUT_ENV = "RELAXMLIR_ALTER_LAYOUT"


def alter_op_layout(module_op: ir.Operation, target: Target | None) -> None:
    if target is None or target.kind != "llvm" or os.environ.get(ALTER_LAYOUT_ENV, "1") == "0":
        return
    lanes = target.lanes("float32")
    for func_op in graph_functions(module_op):
        lay = _Layouts(lanes)
        for op in _ops(func_op):
            if op.name == rx.Conv2d.name and _convertible_conv(op, lanes):
                _convert_conv(op, lay)
            elif op.name == rx.Conv2d.name and _blockable_grouped_conv(op, lanes):
                _convert_grouped(op, lay)
        # Each push moves one transform one op down: sweeps in program order until one changes
        # nothing. A push rewrites the op it is given and erases only ops before it (the op and
        # its producers that nothing else reads; its replacement and the transform after it are
        # new ops that no push takes), so a sweep goes on through the ops after it as listed.
        # Rescanning from the top after every push made DenseNet-121's pass 0.9 s.
        changed = True
        while changed:
            changed = False
            for op in _ops(func_op):
                if op.name.startswith("relax.") and _push(op, lay):
                    changed = True
        _declare_batch_symbols(func_op)
        while True:  # transforms that nothing reads any more
            dead = [
                op
                for op in _ops(func_op)
                if op.name == rx.LayoutTransform.name and not list(op.results[0].uses)
            ]
            if not dead:
                break
            for op in dead:  # none of them reads another (those have a reader)
                op.erase()


@register_pass(
    "relax-alter-op-layout",
    "conv2d and what follows it in the CPU target's channel-blocked layout (NCHW16c on AVX-512)",
    {"target": "target string (default: the target in scope; none: leave the module as is)"},
)
def relax_alter_op_layout(target: str = ""):
    def run(module_op: ir.Operation) -> None:
        alter_op_layout(module_op, Target(target) if target else Target.current())

    return run


def AlterOpLayout(target: Target | str | None = None) -> Pass:
    """Convolutions (and the elementwise ops and pooling after them) in the CPU target's
    channel-blocked layout; `target` defaults to the one in scope."""

    def run(mod):
        tgt = Target(target) if isinstance(target, str) else target
        alter_op_layout(mod.module.operation, tgt or Target.current())

    return Pass("AlterOpLayout", run)
