"""`from_fx`: a `torch.fx.GraphModule` (or an `nn.Module`, traced) -> relax `IRModule`.

Functions, tensor methods and operators go through `importer.CONVERTERS`; `nn.Module` calls go
through `MODULE_CONVERTERS` below (module class -> rule `(ctx, node, module) -> value`).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import fx, nn

from relaxmlir.frontend.importer import (
    CONVERTERS,
    Deferred,
    Importer,
    Rule,
    dtype_str,
    functional_rule,
    target_name,
    to_numpy,
    written_values,
)
from relaxmlir.frontend.rules.common import call, emit_binary, first, ndim, shape_of
from relaxmlir.frontend.rules.elementwise import gelu, where
from relaxmlir.frontend.rules.nn import (
    adaptive_avg_pool2d,
    attention_scores,
    avg_pool2d,
    batch_norm,
    channel_affine,
    conv2d,
    conv_transpose,
    layer_norm,
    max_pool2d,
    normalize,
    pool3d,
    softmax,
)
from relaxmlir.frontend.rules.reduction import reduce
from relaxmlir.frontend.rules.resize import pad
from relaxmlir.frontend.rules.shape import flatten, reshape, squeeze, transpose, unflatten
from relaxmlir.frontend.rules.slicing import strided_slice
from relaxmlir.ir import IRModule
from relaxmlir.relax.expr import Constant, Expr, Var, const
from relaxmlir.relax.struct_info import TensorStructInfo

ModuleRule = Callable[[Importer, fx.Node, nn.Module], Any]
MODULE_CONVERTERS: dict[type, ModuleRule] = {}


def register_module(rule: ModuleRule, *classes: type) -> ModuleRule:
    for cls in classes:
        MODULE_CONVERTERS[cls] = rule
    return rule


def _weight(ctx: Importer, node: fx.Node, name: str, module: nn.Module):
    tensor = getattr(module, name)
    return None if tensor is None else ctx.weight(f"{node.target}.{name}", tensor)


def _unary_module(op_name: str, **attrs: str) -> ModuleRule:
    """An activation module: `op_name(x, **{arg: module.<attr>})`."""

    def rule(ctx: Importer, node: fx.Node, module: nn.Module):
        kwargs = {arg: getattr(module, attr) for arg, attr in attrs.items()}
        return call(ctx, op_name, first(ctx, node), **kwargs)

    return rule


def _linear(ctx, node, module: nn.Linear):
    w, b = _weight(ctx, node, "weight", module), _weight(ctx, node, "bias", module)
    return call(ctx, "linear", first(ctx, node), w, b)


def _conv(ctx, node, module: nn.Conv2d):
    w, b = _weight(ctx, node, "weight", module), _weight(ctx, node, "bias", module)
    x, padding = first(ctx, node), module.padding
    if module.padding_mode != "zeros":  # torch pads by the mode first, then convolves unpadded
        x = pad(ctx, x, module._reversed_padding_repeated_twice, module.padding_mode)
        padding = 0
    return conv2d(ctx, x, w, b, module.stride, padding, module.dilation, module.groups)


def _batch_norm(ctx, node, module: nn.BatchNorm2d):
    if module.training or module.running_mean is None:
        raise NotImplementedError(
            f"{type(module).__name__} in training mode at node '{node.name}'; call model.eval()"
        )
    w, b = _weight(ctx, node, "weight", module), _weight(ctx, node, "bias", module)
    mean, var = (
        _weight(ctx, node, "running_mean", module),
        _weight(ctx, node, "running_var", module),
    )
    return batch_norm(ctx, first(ctx, node), w, b, mean, var, module.eps)


def _layer_norm(ctx, node, module: nn.LayerNorm):
    w, b = _weight(ctx, node, "weight", module), _weight(ctx, node, "bias", module)
    return layer_norm(ctx, first(ctx, node), module.normalized_shape, w, b, module.eps)


def _gelu(ctx, node, module: nn.GELU):
    return gelu(ctx, first(ctx, node), module.approximate)


def _softmax(op_name: str) -> ModuleRule:
    def rule(ctx, node, module):
        return softmax(ctx, op_name, first(ctx, node), module.dim)

    return rule


def _max_pool(ctx, node, module: nn.MaxPool2d):
    if module.return_indices:
        raise NotImplementedError(f"MaxPool2d(return_indices=True) at node '{node.name}'")
    return max_pool2d(
        ctx,
        first(ctx, node),
        module.kernel_size,
        module.stride,
        module.padding,
        module.dilation,
        module.ceil_mode,
    )


def _avg_pool(ctx, node, module: nn.AvgPool2d):
    return avg_pool2d(
        ctx,
        first(ctx, node),
        module.kernel_size,
        module.stride,
        module.padding,
        module.ceil_mode,
        module.count_include_pad,
        module.divisor_override,
    )


def _pool3d(ctx, node, module: nn.MaxPool3d | nn.AvgPool3d):
    if isinstance(module, nn.MaxPool3d):
        if module.return_indices:
            raise NotImplementedError(f"MaxPool3d(return_indices=True) at node '{node.name}'")
        return pool3d(
            ctx, first(ctx, node), "max", module.kernel_size, module.stride, module.padding,
            module.dilation, module.ceil_mode,
        )  # fmt: skip
    return pool3d(
        ctx, first(ctx, node), "avg", module.kernel_size, module.stride, module.padding,
        ceil_mode=module.ceil_mode, count_include_pad=module.count_include_pad,
        divisor_override=module.divisor_override, where=f" at node '{node.name}'",
        name="AvgPool3d",
    )  # fmt: skip


def _adaptive_avg_pool(ctx, node, module: nn.AdaptiveAvgPool2d):
    return adaptive_avg_pool2d(ctx, first(ctx, node), module.output_size)


def _conv_transpose(ctx, node, module: nn.ConvTranspose2d):
    """`nn.ConvTranspose{1,2}d` (their forward computes output_padding in python)."""
    if ctx.arg(node, 1, "output_size") is not None:
        raise NotImplementedError(f"{type(module).__name__}(output_size=...) at node '{node.name}'")
    w, b = _weight(ctx, node, "weight", module), _weight(ctx, node, "bias", module)
    return conv_transpose(
        ctx, first(ctx, node), w, b, module.stride, module.padding, module.output_padding,
        module.groups, module.dilation,
    )  # fmt: skip


def _instance_norm(ctx, node, module: nn.InstanceNorm2d):
    """`nn.InstanceNorm{1,2,3}d` (their forward branches on the input's rank)."""
    x = first(ctx, node)
    w, b = _weight(ctx, node, "weight", module), _weight(ctx, node, "bias", module)
    if module.training or not module.track_running_stats:
        return channel_affine(ctx, normalize(ctx, x, list(range(2, ndim(x))), module.eps), w, b)
    mean, var = (
        _weight(ctx, node, "running_mean", module),
        _weight(ctx, node, "running_var", module),
    )
    return batch_norm(ctx, x, w, b, mean, var, module.eps)


def _circular_pad(ctx, node, module: nn.CircularPad2d):
    return pad(ctx, first(ctx, node), module.padding, "circular")


def _flatten(ctx, node, module: nn.Flatten):
    return flatten(ctx, first(ctx, node), module.start_dim, module.end_dim)


def _unflatten(ctx, node, module: nn.Unflatten):
    return unflatten(ctx, first(ctx, node), module.dim, module.unflattened_size)


def _embedding(ctx, node, module: nn.Embedding):
    return call(ctx, "take", _weight(ctx, node, "weight", module), first(ctx, node), 0)


def _rows(ctx, w, start: int, stop: int):
    """Rows `start:stop` of a packed projection weight (sliced now when it is a constant)."""
    if isinstance(w, Constant):
        return const(w.data[start:stop])
    return strided_slice(ctx, w, [0], [start], [stop])


def _multihead_attention(ctx, node, module: nn.MultiheadAttention):
    """`nn.MultiheadAttention` decomposed: projections, per-head scaled dot products, softmax,
    output projection. Returns `(output, weights)`; the weights are built only if used."""
    if module.bias_k is not None or module.add_zero_attn or module.dropout and module.training:
        raise NotImplementedError(
            f"MultiheadAttention with bias_k/add_zero_attn/training at node '{node.name}'"
        )
    q, k, v = first(ctx, node), ctx.arg(node, 1, "key"), ctx.arg(node, 2, "value")
    key_padding_mask, attn_mask = (
        ctx.arg(node, 3, "key_padding_mask"),
        ctx.arg(node, 5, "attn_mask"),
    )
    need_weights = ctx.arg(node, 4, "need_weights", True)
    average = ctx.arg(node, 6, "average_attn_weights", True)
    is_causal = ctx.arg(node, 7, "is_causal", False)
    batched = ndim(q) == 3
    if not batched:
        q, k, v = (call(ctx, "expand_dims", t, 0 if module.batch_first else 1) for t in (q, k, v))
    if not module.batch_first:
        q, k, v = (transpose(ctx, t, 0, 1) for t in (q, k, v))
    embed, heads = module.embed_dim, module.num_heads
    head_dim = embed // heads
    in_bias = _weight(ctx, node, "in_proj_bias", module)
    if module._qkv_same_embed_dim:
        packed = _weight(ctx, node, "in_proj_weight", module)
        weights = [_rows(ctx, packed, i * embed, (i + 1) * embed) for i in range(3)]
    else:
        weights = [_weight(ctx, node, f"{n}_proj_weight", module) for n in "qkv"]
    biases = (
        [None] * 3
        if in_bias is None
        else [_rows(ctx, in_bias, i * embed, (i + 1) * embed) for i in range(3)]
    )

    def heads_first(t, w, b):
        t = call(ctx, "linear", t, w, b)
        batch, length = shape_of(t)[:2]
        return transpose(ctx, reshape(ctx, t, [batch, length, heads, head_dim]), 1, 2)

    q, k, v = (heads_first(t, w, b) for t, w, b in zip((q, k, v), weights, biases))
    batch, length, source = shape_of(q)[0], shape_of(q)[2], shape_of(k)[2]
    scores = attention_scores(ctx, q, k)
    if attn_mask is None and is_causal:
        attn_mask = const(np.triu(np.ones((length, source), dtype=bool), 1))
    for mask in (attn_mask, key_padding_mask):
        if mask is None:
            continue
        if mask is key_padding_mask:
            mask = reshape(ctx, mask, [batch, 1, 1, source])
        elif ndim(mask) == 3:
            mask = reshape(ctx, mask, [batch, heads, length, source])
        if mask.struct_info.dtype == "bool":  # True means "do not attend" (the opposite of SDPA)
            scores = where(ctx, mask, float("-inf"), scores)
        else:
            scores = emit_binary(ctx, "add", scores, mask)
    probs = call(ctx, "nn.softmax", scores, 3)
    out = transpose(ctx, call(ctx, "matmul", probs, v), 1, 2)
    out = reshape(ctx, out, [batch, length, embed])
    out_proj = module.out_proj
    w = ctx.weight(f"{node.target}.out_proj.weight", out_proj.weight)
    b = None if out_proj.bias is None else ctx.weight(f"{node.target}.out_proj.bias", out_proj.bias)
    out = call(ctx, "linear", out, w, b)
    if not module.batch_first:
        out = transpose(ctx, out, 0, 1)
    if not batched:
        out = squeeze(ctx, out, [0 if module.batch_first else 1])

    def attn_weights():
        w = reduce(ctx, "mean", probs, [1]) if average else probs
        return w if batched else squeeze(ctx, w, [0])

    return out, (Deferred(attn_weights) if need_weights else None)


register_module(_linear, nn.Linear)
register_module(_conv, nn.Conv1d, nn.Conv2d, nn.Conv3d)
register_module(_batch_norm, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
register_module(_layer_norm, nn.LayerNorm)
register_module(_unary_module("nn.relu"), nn.ReLU)
register_module(_unary_module("nn.silu"), nn.SiLU)
register_module(_unary_module("sigmoid"), nn.Sigmoid)
register_module(_unary_module("tanh"), nn.Tanh)
register_module(_unary_module("nn.leaky_relu", alpha="negative_slope"), nn.LeakyReLU)
register_module(_unary_module("clip", min="min_val", max="max_val"), nn.Hardtanh, nn.ReLU6)
register_module(_gelu, nn.GELU)
register_module(_softmax("nn.softmax"), nn.Softmax)
register_module(_softmax("nn.log_softmax"), nn.LogSoftmax)
register_module(_max_pool, nn.MaxPool2d)
register_module(_avg_pool, nn.AvgPool2d)
register_module(_pool3d, nn.MaxPool3d, nn.AvgPool3d)
register_module(_adaptive_avg_pool, nn.AdaptiveAvgPool2d)
register_module(_conv_transpose, nn.ConvTranspose1d, nn.ConvTranspose2d)
register_module(_instance_norm, nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
register_module(_circular_pad, nn.CircularPad1d, nn.CircularPad2d, nn.CircularPad3d)
register_module(_flatten, nn.Flatten)
register_module(_unflatten, nn.Unflatten)
register_module(_embedding, nn.Embedding)
register_module(_multihead_attention, nn.MultiheadAttention)
register_module(
    lambda ctx, node, module: first(ctx, node),
    nn.Identity,
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.AlphaDropout,
)


# -- tracing and the importer ---------------------------------------------------------------
def trace(model: nn.Module | fx.GraphModule, num_inputs: int) -> fx.GraphModule:
    """`symbolic_trace` with the forward arguments after the first `num_inputs` fixed to their
    defaults and the fused MultiheadAttention fast path off (it branches on tensor values)."""
    if isinstance(model, fx.GraphModule):
        return model
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"from_fx expects a torch.fx.GraphModule or nn.Module, got {type(model).__name__}"
        )
    if any(cls in MODULE_CONVERTERS for cls in type(model).__mro__):
        model = nn.Sequential(model)  # e.g. a bare nn.BatchNorm2d: call it as a module
    params = list(inspect.signature(model.forward).parameters.values())[num_inputs:]
    concrete = {
        p.name: p.default
        for p in params
        if p.default is not inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
    }
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        return fx.symbolic_trace(model, concrete_args=concrete or None)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def _module_rule(module: nn.Module, user: dict[type, ModuleRule], node: fx.Node) -> ModuleRule:
    for cls in type(module).__mro__:
        for table in (user, MODULE_CONVERTERS):
            if cls in table:
                return table[cls]
    return _inline_module


class _InlineTracer(fx.Tracer):
    """Traces a leaf `torch.nn` module's own forward (its children stay leaves)."""

    def __init__(self, root: nn.Module):
        super().__init__()
        self.root_module = root

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return m is not self.root_module and super().is_leaf_module(m, qualname)


def _inline_module(ctx: Importer, node: fx.Node, module: nn.Module):
    """A `torch.nn` module with no rule of its own (nn.ELU, nn.GroupNorm, nn.Upsample, ...):
    its forward traced into functional calls, translated in place by the same rules."""
    try:
        graph = _InlineTracer(module).trace(module)
    except Exception as exc:  # noqa: BLE001  (any trace failure means: not importable)
        raise NotImplementedError(
            f"unsupported torch op '{target_name(type(module))}' at node '{node.name}' "
            f"(from_fx; its forward does not trace: {exc})"
        ) from None
    gm = fx.GraphModule(module, graph)
    sub_modules = dict(gm.named_modules())
    inputs = list(ctx.retrieve(node.args)) + list(ctx.retrieve(node.kwargs).values())
    placeholders = 0
    try:
        for sub in graph.nodes:
            if sub.op == "placeholder":
                if placeholders < len(inputs):
                    ctx.env[sub] = inputs[placeholders]
                else:
                    ctx.env[sub] = sub.args[0] if sub.args else None
                placeholders += 1
            elif sub.op == "get_attr":
                value = gm
                for part in sub.target.split("."):
                    value = getattr(value, part)
                ctx.env[sub] = (
                    ctx.weight(f"{node.target}.{sub.target}", value)
                    if isinstance(value, torch.Tensor)
                    else value
                )
            elif sub.op in ("call_function", "call_method"):
                ctx.env[sub] = _translate(ctx, sub)
            elif sub.op == "call_module":
                child = sub_modules[sub.target]
                ctx.env[sub] = _module_rule(child, {}, sub)(ctx, sub, child)
            elif sub.op == "output":
                return ctx.retrieve(sub.args[0])
    except NotImplementedError as exc:
        raise NotImplementedError(
            f"unsupported torch op '{target_name(type(module))}' at node '{node.name}' "
            f"(from_fx): its forward has {exc}"
        ) from None
    raise ValueError(f"from_fx: the traced forward of node '{node.name}' has no output")


def _get_attr(ctx: Importer, gm: fx.GraphModule, node: fx.Node, written: set):
    """A module attribute: a weight, or for a buffer the graph writes in place (`written`),
    state that the VM keeps between calls (as from_exported_program makes it)."""
    value = gm
    for part in node.target.split("."):
        value = getattr(value, part)
    if not isinstance(value, torch.Tensor):
        return value
    buffers = dict(gm.named_buffers())
    if node in written:
        if node.target not in buffers:
            raise NotImplementedError(
                f"the graph updates parameter '{node.target}' in place (node '{node.name}'): "
                "only buffers may be updated (from_fx)"
            )
        return ctx.state_var(node.target, value)
    state = dict(gm.named_parameters())
    state.update(buffers)
    return ctx.weight(node.target, value, as_param=node.target in state)


def _written_attributes(gm: fx.GraphModule) -> tuple[fx.Graph, set]:
    """The graph to import and its `get_attr` nodes that in-place ops write. torch.fx makes a
    `get_attr` node per read of a buffer: where one is written, the graph is copied with one
    node per attribute, so that every read after the write sees the value the importer rebinds."""

    def written_in(graph: fx.Graph) -> set:
        return {n for n in written_values(graph) if n.op == "get_attr"}

    if not written_in(gm.graph):
        return gm.graph, set()
    graph = copy.deepcopy(gm.graph)
    first: dict[str, fx.Node] = {}
    for node in list(graph.nodes):
        if node.op == "get_attr":
            if node.target in first:
                node.replace_all_uses_with(first[node.target])
                graph.erase_node(node)
            else:
                first[node.target] = node
    return graph, written_in(graph)


def from_fx(
    model: nn.Module | fx.GraphModule,
    input_shapes: Sequence[Sequence[int | str]],
    call_function_map: dict | None = None,
    call_module_map: dict | None = None,
    keep_params_as_input: bool = False,
    input_dtypes: Sequence | None = None,
) -> IRModule | tuple[IRModule, dict[str, np.ndarray]]:
    """Import a PyTorch model through torch.fx into a relax `IRModule` with function "main".

    Parameters
    ----------
    model : torch.fx.GraphModule or torch.nn.Module
        An `nn.Module` is traced with `torch.fx.symbolic_trace`; put it in eval mode first.
    input_shapes : list of shapes
        One shape per input; a dimension is an int or a symbol name (`[("n", 784)]`).
    call_function_map : dict, optional
        `{torch_target: fn(bb, node_map, node)}` for `call_function`/`call_method` nodes;
        entries extend or override the built-in rules. `node_map[n]` is the relax value of node n.
    call_module_map : dict, optional
        `{nn.Module subclass: fn(bb, node_map, node, module)}` for `call_module` nodes.
    keep_params_as_input : bool
        Weights become parameters of "main" (after the inputs) instead of constants.
    input_dtypes : list of str or torch.dtype, optional
        Default "float32" for each input.

    Returns
    -------
    mod : IRModule, or `(mod, params)` with `keep_params_as_input` (params: name -> numpy array)

    Examples
    --------
    >>> mod = from_fx(MLP().eval(), [("n", 784)])
    >>> vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    """
    gm = trace(model, len(input_shapes))
    overrides = {t: _user_function_rule(fn) for t, fn in (call_function_map or {}).items()}
    user_modules = {cls: _user_module_rule(fn) for cls, fn in (call_module_map or {}).items()}
    ctx = Importer("from_fx", overrides, keep_params_as_input)
    dtypes = list(input_dtypes or ["float32"] * len(input_shapes))
    modules = dict(gm.named_modules())
    graph, written = _written_attributes(gm)

    def body():
        placeholders = 0
        for node in graph.nodes:
            if node.op == "placeholder":
                if placeholders < len(input_shapes):
                    dtype = dtype_str(dtypes[placeholders])
                    var = Var(node.name, TensorStructInfo(input_shapes[placeholders], dtype))
                    ctx.inputs.append(var)
                    ctx.env[node] = var
                elif node.args:  # an argument fixed to its default while tracing
                    ctx.env[node] = node.args[0]
                else:
                    raise ValueError(
                        f"from_fx: got {len(input_shapes)} input shape(s) but the graph "
                        f"has more inputs (first without a shape: '{node.name}')"
                    )
                placeholders += 1
            elif node.op == "get_attr":
                ctx.env[node] = _get_attr(ctx, gm, node, written)
            elif node.op in ("call_function", "call_method"):
                ctx.env[node] = _translate(ctx, node)
            elif node.op == "call_module":
                module = modules[node.target]
                ctx.env[node] = _module_rule(module, user_modules, node)(ctx, node, module)
            elif node.op == "output":
                for buffer in written:  # its value after the graph's writes: the next state
                    ctx.state_updates[buffer.target] = ctx.env[buffer]
                return ctx.retrieve(node.args[0])
        raise ValueError("from_fx: the graph has no output node")

    return ctx.build(body)


def _translate(ctx: Importer, node: fx.Node) -> Any:
    """A call by its rule, else, for a torch function or method with no rule of its own, by
    torch's decomposition of it into core ATen ops (`_decomposed`)."""
    try:
        return ctx.translate(node)
    except NotImplementedError as exc:
        try:
            ctx.rule_for(node)
        except NotImplementedError:
            return ctx.rebind_written(node, _decomposed(ctx, node, exc))
        raise  # the op's own rule refused these arguments


def _decomposed(ctx: Importer, node: fx.Node, unsupported: NotImplementedError) -> Any:
    """`node` traced by torch (make_fx over fake tensors of its arguments' shapes and dtypes,
    with the decompositions that from_exported_program applies), its ATen ops translated one by
    one by their rules: from_fx takes what torch.export's decompositions take (F.glu,
    F.pixel_unshuffle, F.rms_norm, ...) without a rule per function. Static shapes only."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from relaxmlir.frontend.exported_program import decomposition_table

    args, kwargs = ctx.retrieve(node.args), ctx.retrieve(node.kwargs)
    exprs: list = []
    fx.node.map_aggregate((args, kwargs), lambda v: exprs.append(v) if isinstance(v, Expr) else v)
    examples = []
    for e in exprs:
        sinfo = e.struct_info
        static = isinstance(sinfo, TensorStructInfo) and all(isinstance(d, int) for d in sinfo.shape)
        if not static:
            raise unsupported from None
        examples.append(torch.empty(sinfo.shape, dtype=getattr(torch, sinfo.dtype)))

    def call_target(*tensors):
        it = iter(tensors)
        a, k = fx.node.map_aggregate(
            (args, kwargs), lambda v: next(it) if isinstance(v, Expr) else v
        )
        if isinstance(node.target, str):  # a method
            return getattr(a[0], node.target)(*a[1:], **k)
        return node.target(*a, **k)

    try:
        gm = make_fx(call_target, decomposition_table=decomposition_table(), tracing_mode="fake")(
            *examples
        )
    except Exception:  # noqa: BLE001  (torch cannot trace it: the op stays unsupported)
        raise unsupported from None
    placeholders = iter(exprs)
    for sub in gm.graph.nodes:
        if sub.op == "placeholder":
            ctx.env[sub] = next(placeholders)
        elif sub.op == "get_attr":
            ctx.env[sub] = const(to_numpy(getattr(gm, sub.target)))
        elif sub.op == "call_function":
            # an in-place step of the decomposition on its own temporary (rms_norm's add_)
            twin = None if sub.target in CONVERTERS else functional_rule(sub)
            try:
                ctx.env[sub] = twin(ctx, sub) if twin is not None else ctx.translate(sub)
            except NotImplementedError as exc:
                message = f"{unsupported}; torch decomposes it into: {exc}"
                raise NotImplementedError(message) from None
        elif sub.op == "output":
            return ctx.retrieve(sub.args[0])
    raise ValueError(f"from_fx: the decomposition of node '{node.name}' has no output")


def _user_function_rule(fn: Callable) -> Rule:
    return lambda ctx, node: fn(ctx.bb, ctx.env, node)


def _user_module_rule(fn: Callable) -> ModuleRule:
    return lambda ctx, node, module: fn(ctx.bb, ctx.env, node, module)
