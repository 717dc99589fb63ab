"""`from_exported_program`: a `torch.export.ExportedProgram` -> relax `IRModule`.

When the program has ops without a direct rule, it is first decomposed to core ATen, except for
the ops `CONVERTERS` translates directly (linear, layer_norm, scaled_dot_product_attention,
...: one relax op beats the dozen core ops they decompose into). The ATen-only rules below
register into the same table.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from relaxmlir.frontend.importer import (
    _NONDETERMINISTIC,
    CONVERTERS,
    Deferred,
    Importer,
    dtype_str,
    functional_rule,
    register,
    to_numpy,
)
from relaxmlir.frontend.rules.common import first
from relaxmlir.frontend.rules.nn import (
    batch_norm,
    conv2d,
    conv_transpose,
)
from relaxmlir.ir import IRModule
from relaxmlir.relax.expr import Var, const
from relaxmlir.relax.struct_info import TensorStructInfo

aten = torch.ops.aten


def _unused(what: str, node: fx.Node) -> Deferred:
    def fail():
        raise NotImplementedError(f"{what} of node '{node.name}' is not supported")

    return Deferred(fail)


def _aten_batch_norm_args(ctx: Importer, node: fx.Node, eps_index: int):
    """Batch norm of `(input, weight, bias, running_mean, running_var, ...)`, eps at `eps_index`."""
    x, weight, bias = first(ctx, node), ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    mean, var = ctx.arg(node, 3, "running_mean"), ctx.arg(node, 4, "running_var")
    return batch_norm(ctx, x, weight, bias, mean, var, ctx.arg(node, eps_index, "eps", 1e-5))


def _native_batch_norm(ctx: Importer, node: fx.Node):
    """`_native_batch_norm_legit_no_training(input, weight, bias, mean, var, momentum, eps)`."""
    out = _aten_batch_norm_args(ctx, node, 6)
    return out, _unused("the saved mean", node), _unused("the saved inverse std", node)


def _aten_batch_norm(ctx: Importer, node: fx.Node):
    """`aten.batch_norm(input, weight, bias, mean, var, training, momentum, eps, cudnn)`."""
    if ctx.arg(node, 5, "training", False):
        raise NotImplementedError(f"batch_norm in training mode at node '{node.name}'")
    return _aten_batch_norm_args(ctx, node, 7)


def _convolution(ctx: Importer, node: fx.Node):
    """`convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)`."""
    x, w, b = first(ctx, node), ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    if ctx.arg(node, 6, "transposed", False):
        return conv_transpose(
            ctx, x, w, b, ctx.arg(node, 3, "stride"), ctx.arg(node, 4, "padding"),
            ctx.arg(node, 7, "output_padding"), ctx.arg(node, 8, "groups"),
            ctx.arg(node, 5, "dilation"),
        )  # fmt: skip
    return conv2d(
        ctx,
        x,
        w,
        b,
        ctx.arg(node, 3, "stride"),
        ctx.arg(node, 4, "padding"),
        ctx.arg(node, 5, "dilation"),
        ctx.arg(node, 8, "groups"),
    )


register(_native_batch_norm, aten._native_batch_norm_legit_no_training)
register(_aten_batch_norm, aten.batch_norm)
register(_convolution, aten.convolution)
register(
    lambda ctx, node: None,
    aten._assert_tensor_metadata,
    aten._assert_scalar,
    aten.sym_constrain_range_for_size,
    aten._assert_async,
)


def decomposition_table() -> dict:
    """Core-ATen decompositions minus those of the ops translated directly."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if op in CONVERTERS or getattr(op, "overloadpacket", None) in CONVERTERS:
            table.pop(op)
    return table


def _folded(node: fx.Node, static: set) -> bool:
    """Whether the importer evaluates `node` with torch (`Importer._fold`): all its inputs are
    known values and it neither mutates nor draws random numbers."""
    target = node.target
    if any(word in str(getattr(target, "__name__", "")) for word in _NONDETERMINISTIC):
        return False
    schema = getattr(target, "_schema", None)
    if schema is not None and schema.is_mutable:
        return False
    return all(arg in static for arg in node.all_input_nodes)


def _untranslated(ep: ExportedProgram, keep_params_as_input: bool = False) -> bool:
    """Whether some op of the graph has no direct rule and is not folded by the importer (then
    the graph is decomposed first: `run_decompositions` took 0.7 s of BERT-base's import, for
    four `arange`s of constant sizes)."""
    static = set()  # nodes whose value is known at import: weights, constants, what they fold to
    weight_kinds = (InputKind.CONSTANT_TENSOR,)
    if not keep_params_as_input:
        weight_kinds += (InputKind.PARAMETER, InputKind.BUFFER)
    weights = {
        spec.arg.name
        for spec in ep.graph_signature.input_specs
        if spec.kind in weight_kinds and hasattr(spec.arg, "name")
    }
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in weights:
            static.add(node)
        if node.op != "call_function":
            continue
        target = node.target
        if _folded(node, static):
            static.add(node)
        elif target not in CONVERTERS and getattr(target, "overloadpacket", None) not in CONVERTERS:
            if functional_rule(node) is None:
                return True
    return False


def _state_updates(ep: ExportedProgram) -> set[str]:
    """The buffers that the program updates in place (`self.total.add_(x)`, a static KV cache's
    `index_copy_`): they become state that the VM keeps between calls, as torch keeps the
    module's buffers. A parameter updated in place (a training step) is refused."""
    state = set()
    for spec in ep.graph_signature.output_specs:
        if spec.kind == OutputKind.PARAMETER_MUTATION:
            raise NotImplementedError(
                f"the program updates parameter '{spec.target}' in place (node "
                f"'{spec.arg.name}'): only buffers may be updated (from_exported_program)"
            )
        if spec.kind == OutputKind.BUFFER_MUTATION:
            state.add(spec.target)
    return state


def _input_sinfo(node: fx.Node) -> TensorStructInfo:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise NotImplementedError(f"non-tensor input '{node.name}' ({type(val).__name__})")
    dims = [d if isinstance(d, int) else str(d) for d in val.shape]
    return TensorStructInfo(dims, dtype_str(val.dtype))


def from_exported_program(
    exported_program: ExportedProgram,
    keep_params_as_input: bool = False,
    run_decompositions: bool = True,
) -> IRModule | tuple[IRModule, dict[str, np.ndarray]]:
    """Import `torch.export.export(model, args)` into a relax `IRModule` with function "main".

    Parameters
    ----------
    exported_program : torch.export.ExportedProgram
        Dynamic dimensions (`torch.export.Dim`) become symbolic dimensions of the inputs.
    keep_params_as_input : bool
        Parameters and buffers become parameters of "main" after the user inputs, named by
        their state-dict keys, instead of constants.
    run_decompositions : bool
        When some op has no direct translation, decompose to core ATen first (keeping the
        ops that have one).

    Returns
    -------
    mod : IRModule, or `(mod, params)` with `keep_params_as_input` (params: name -> numpy array)

    Buffers that the program updates in place (counters, a static KV cache) become state: "main"
    takes them after the inputs and returns their new values after the outputs, and the VM
    keeps them between calls from their values at export (`vm.state()`, `vm.reset_state()`),
    so `vm["main"](x)` is called with the inputs only, as the module is. An input that the
    program writes in place (`x.add_(y)`) is written back into the caller's array, as torch
    writes the caller's tensor.

    Examples
    --------
    >>> ep = torch.export.export(model.eval(), (torch.randn(1, 784),))
    >>> mod = from_exported_program(ep)
    """
    ep = exported_program
    if run_decompositions and _untranslated(ep, keep_params_as_input):
        ep = ep.run_decompositions(decomposition_table())
    state = _state_updates(ep)
    specs = {
        spec.arg.name: spec for spec in ep.graph_signature.input_specs if hasattr(spec.arg, "name")
    }
    output_specs = ep.graph_signature.output_specs
    ctx = Importer("from_exported_program", keep_params_as_input=keep_params_as_input)
    inplace: dict = {}  # in-place ops whose every call nobody can observe: the functional rule
    for node in ep.graph.nodes:
        target = node.target
        if node.op != "call_function" or target in CONVERTERS:
            continue
        if getattr(target, "overloadpacket", None) not in CONVERTERS:
            rule = functional_rule(node)
            inplace[target] = rule if inplace.get(target, rule) is rule else None
    ctx.overrides.update({t: rule for t, rule in inplace.items() if rule is not None})

    def placeholder(node: fx.Node) -> Any:
        spec = specs.get(node.name)
        kind = spec.kind if spec is not None else InputKind.USER_INPUT
        if kind == InputKind.USER_INPUT:
            if not isinstance(node.meta.get("val"), torch.Tensor):
                return node.meta.get("val")
            var = Var(node.name, _input_sinfo(node))
            ctx.inputs.append(var)
            return var
        if kind == InputKind.BUFFER and spec.target in state:
            values = ep.state_dict if spec.target in ep.state_dict else ep.constants
            return ctx.state_var(spec.target, values[spec.target])
        if kind in (InputKind.PARAMETER, InputKind.BUFFER) and not node.users:
            return None  # e.g. num_batches_tracked: not an input of the relax function
        if kind in (InputKind.PARAMETER, InputKind.BUFFER):
            if spec.target in ep.state_dict:
                return ctx.weight(spec.target, ep.state_dict[spec.target])
            return ctx.weight(spec.target, ep.constants[spec.target], as_param=False)
        if kind == InputKind.CONSTANT_TENSOR:
            value = ep.constants[spec.target]
            return const(to_numpy(value)) if isinstance(value, torch.Tensor) else value
        raise NotImplementedError(f"exported program input '{node.name}' of kind {kind.name}")

    def body():
        for node in ep.graph.nodes:
            if node.op == "placeholder":
                ctx.env[node] = placeholder(node)
            elif node.op == "call_function":
                ctx.env[node] = ctx.translate(node)
            elif node.op == "output":
                outs = []
                for v, spec in zip(ctx.retrieve(node.args[0]), output_specs):
                    if spec.kind == OutputKind.USER_OUTPUT:
                        outs.append(v)
                    elif spec.kind == OutputKind.BUFFER_MUTATION:
                        ctx.state_updates[spec.target] = v
                    elif spec.kind == OutputKind.USER_INPUT_MUTATION:
                        ctx.input_updates[spec.target] = v
                return outs[0] if len(outs) == 1 else tuple(outs)
            else:
                raise NotImplementedError(
                    f"unsupported graph node '{node.name}' ({node.op}) (from_exported_program)"
                )
        raise ValueError("from_exported_program: the graph has no output node")

    return ctx.build(body)
