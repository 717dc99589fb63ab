"""`relax-pack-constant-weights`: pack constant matmul weights once, at compile time (data tiling).

When a PrimFunc's matmul reads its B operand straight from an argument and the caller passes a
`relax.constant` there, the constant is replaced by its packed panels (`pack_weight`) and the
PrimFunc by a copy that takes them (`use_prepacked_weight`): the schedule then reads pre-packed
panels in the hot loop instead of packing B at every call. The panel width is the target's
(`micro_tile`), so this is a CPU-layout pass of the llvm pipeline row.

A weight that `LiftTransformParams` made an argument computed by `f_transform_params` is packed
there instead, by a packing kernel appended to that function (`_pack_function`): `f` takes the
panels, so models that load their weights at run time read panels too (BERT-base with its
weights as inputs, 2 threads: 129 ms with the transposes lifted, 111 ms with the packing too;
bound: 112).
"""

from __future__ import annotations

import numpy as np
from mlir import ir

from dialects import relax as rx
from dialects import shape as sh
from lowering import dense
from lowering.dataflow import graph_functions
from lowering.registry import register_pass, target_option
from lowering.schedule.common import classify, linalg_ops
from lowering.schedule.matmul import PackedLayout, micro_tile, pack_weight, use_prepacked_weight
from lowering.schedule.normalize import normalize_function


def _packable_weight(callee: ir.Operation) -> tuple[int, bool] | None:
    """(argument index of B, B is [N, K]) for a PrimFunc with one matmul reading a 2-D B from an
    arg. Batch dims of A and C are fine (B is shared by the batch: x[b, s, :] @ W of a
    transformer's linear layers)."""
    # Classified as the schedule will see it: TE's constant-0 broadcast indices hide a
    # [1, s, k] x [k, n] linear until unit dims are dropped (normalize_function, on a copy).
    scratch = ir.Module.create(loc=callee.location)
    copy = callee.clone(ip=ir.InsertionPoint(scratch.body))
    normalize_function(copy)
    matmuls = [info for info in map(classify, linalg_ops(copy)) if info.pattern == "matmul"]
    if len(matmuls) != 1:
        return None
    info = matmuls[0]
    b = info.op.operands[1]
    # Symbolic rows are fine (the matmul schedule's `rows` route reads the panels); N, K not.
    if not isinstance(b.owner, ir.Block) or None in (info.ranges[info.n], info.ranges[info.k]):
        return None
    if len(list(b.uses)) != 1 or ir.RankedTensorType(b.type).rank != 2:
        return None
    b_dims = info.operand_dims[1]
    if b_dims == [info.k, info.n]:
        return b.arg_number, False
    if b_dims == [info.n, info.k]:
        return b.arg_number, True
    return None


def _is_constant(value: ir.Value) -> bool:
    owner = value.owner
    return not isinstance(owner, ir.Block) and owner.operation.name == rx.Constant.name


def _matrix_constant(value: ir.Value) -> bool:
    """A non-empty 2-D f32 `relax.constant`: what a packable B can be. Checked before a kernel is
    analysed (a copy normalized: ~10 ms each, a third of DenseNet's scheduling time where no
    kernel has a matrix weight)."""
    if not _is_constant(value) or not sh.isa(value.type, ir.RankedTensorType):
        return False
    kind = ir.RankedTensorType(value.type)
    # An empty weight has nothing to pack, and its kernel is left unscheduled (no tiling of
    # zero-trip loops), which would leave the prepacked unpack for bufferization to refuse.
    return kind.rank == 2 and sh.isa(kind.element_type, ir.F32Type) and 0 not in kind.shape


def _constant_value(value: ir.Value) -> np.ndarray | None:
    if not _is_constant(value):
        return None
    return dense.to_numpy(value.owner.operation.attributes["value"])


def _lifted_weight(value: ir.Value) -> tuple[ir.Operation, int] | None:
    """(graph function, index of its weight) for a 2-D f32 weight argument of a function whose
    weights `LiftTransformParams` computes (`f_transform_params`' result of that index)."""
    index = rx.weight_index(value)
    if index is None or not sh.isa(value.type, ir.RankedTensorType):
        return None
    func_op = value.owner.owner.operation
    if rx.TRANSFORM_PARAMS_ATTR not in func_op.attributes:
        return None
    kind = ir.RankedTensorType(value.type)
    if kind.rank != 2 or not sh.isa(kind.element_type, ir.F32Type) or not kind.has_static_shape:
        return None
    return None if 0 in kind.shape else (func_op, index)


def pack_constant_weights(module_op: ir.Operation, nr: int) -> None:
    packed_funcs: dict[tuple[str, int], str] = {}
    packable: dict[str, tuple[int, bool] | None] = {}
    lifted: dict[ir.Value, list[tuple[ir.Operation, str, int, bool]]] = {}  # weight -> its calls
    # One packed copy per weight and layout: a recurrent cell unrolled over 64 steps reads one
    # weight 64 times, and 64 copies of it would stream from memory at every step.
    packed_constants: dict[tuple[ir.Value, bool], tuple[ir.Value, PackedLayout]] = {}
    replaced: list[ir.Operation] = []  # erased after the walk, once nothing reads them

    def prepacked(callee: ir.Operation, callee_name: str, index: int, layout) -> str:
        key = (callee_name, index)
        if key not in packed_funcs:
            clone = callee.clone(ir.InsertionPoint(callee))
            name = f"{callee_name}_prepacked"
            clone.attributes["sym_name"] = ir.StringAttr.get(name)
            use_prepacked_weight(clone, index, layout)
            packed_funcs[key] = name
        return packed_funcs[key]

    def visit(op):
        op = op.operation
        if op.name != rx.CallTIR.name:
            return ir.WalkResult.ADVANCE
        if not any(_matrix_constant(v) or _lifted_weight(v) for v in op.operands):
            return ir.WalkResult.ADVANCE  # no weight to pack: no kernel to analyse (convolutions)
        callee_name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        callee = rx.lookup_symbol(op, callee_name)
        if callee is not None and callee_name not in packable:  # one analysis per kernel
            packable[callee_name] = _packable_weight(callee)
        found = packable.get(callee_name) if callee is not None else None
        if found is None or found[0] >= len(op.operands):
            return ir.WalkResult.ADVANCE
        index, transposed = found
        if _lifted_weight(op.operands[index]) is not None:
            lifted.setdefault(op.operands[index], []).append((op, callee_name, index, transposed))
            return ir.WalkResult.ADVANCE
        key = (op.operands[index], transposed)
        if key not in packed_constants:
            weight = _constant_value(op.operands[index])
            if weight is None or weight.dtype != np.float32:
                return ir.WalkResult.ADVANCE
            old = op.operands[index].owner.operation
            packed, layout = pack_weight(weight, transposed=transposed, nr=nr)
            value = dense.elements(packed, owned=True)  # (memory of its own, aligned)
            with ir.InsertionPoint(old), old.location:
                const = rx.Constant.create(
                    results=[ir.RankedTensorType.get(list(packed.shape), ir.F32Type.get())],
                    attributes={"value": value},
                )
            packed_constants[key] = (const.result, layout)
            replaced.append(old)
        packed_value, layout = packed_constants[key]
        name = prepacked(callee, callee_name, index, layout)
        op.operands[index] = packed_value
        rx.CallTIR.refresh_segments(op)  # the packed weight's type may split a run of equal types
        op.attributes["callee"] = ir.FlatSymbolRefAttr.get(name)
        return ir.WalkResult.ADVANCE

    with rx.cached_symbols(module_op):  # kernels are cloned here, never erased
        for func_op in graph_functions(module_op):
            func_op.walk(visit)
        for old in replaced:
            if not list(old.results[0].uses):
                old.erase()
        for weight, calls in lifted.items():
            if len({t for *_, t in calls}) != 1 or len(list(weight.uses)) != len(calls):
                continue  # read otherwise too, or in two layouts: left as it is
            func_op, result = _lifted_weight(weight)
            layout = PackedLayout(tuple(ir.RankedTensorType(weight.type).shape), calls[0][3], nr)
            _pack_in_transform(module_op, func_op, result, layout)
            _retype_argument(func_op, weight, layout)
            for op, callee_name, index, _ in calls:
                callee = rx.lookup_symbol(op, callee_name)
                op.attributes["callee"] = ir.FlatSymbolRefAttr.get(
                    prepacked(callee, callee_name, index, layout)
                )
                rx.CallTIR.refresh_segments(op)


def _pack_in_transform(module_op, func_op, result: int, layout: PackedLayout) -> None:
    """`f_transform_params` returns its result `result` packed in `layout`."""
    name = ir.FlatSymbolRefAttr(func_op.attributes[rx.TRANSFORM_PARAMS_ATTR]).value
    transform = rx.lookup_symbol(module_op, name)
    ret = list(transform.regions[0].blocks[0].operations)[-1].operation
    packer = _pack_function(module_op, layout)
    packed_type = ir.RankedTensorType.get(list(layout.packed_shape), ir.F32Type.get())
    with ir.InsertionPoint(ret), ret.location:
        call = rx.create(
            rx.CallTIR.name, [ret.operands[result]], [packed_type],
            {"callee": ir.FlatSymbolRefAttr.get(packer)}, loc=ret.location,
        )  # fmt: skip
    ret.operands[result] = call.results[0]
    kind = ir.FunctionType(ir.TypeAttr(transform.attributes["function_type"]).value)
    outs = list(kind.results)
    outs[result] = packed_type
    transform.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(kind.inputs), outs)
    )


def _retype_argument(func_op: ir.Operation, weight: ir.Value, layout: PackedLayout) -> None:
    weight.set_type(ir.RankedTensorType.get(list(layout.packed_shape), ir.F32Type.get()))
    kind = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    args = [a.type for a in func_op.regions[0].blocks[0].arguments]
    func_op.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(args, list(kind.results))
    )


_PACK_KERNEL = """
func.func private @{name}(%w: {src}, %out: {out}) -> {out} attributes {{relax.prim_func}} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {padded}
  %z = linalg.fill ins(%zero : f32) outs(%e : {padded}) -> {padded}
  %p = tensor.insert_slice %w into %z[0, 0] [{rows}, {cols}] [1, 1] : {src} into {padded}
  %v = tensor.expand_shape %p {reassociation} output_shape [{view_shape}] : {padded} into {view}
  %t = linalg.transpose ins(%v : {view}) outs(%out : {out}) permutation = {perm}
  return %t : {out}
}}
"""


def _tensor(shape) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _pack_function(module_op: ir.Operation, layout: PackedLayout) -> str:
    """The name of a PrimFunc that packs a weight into `layout` (`pack_weight`'s panels), added
    to `module_op` once per layout: zeros up to whole panels, then a transpose of the
    [panels, nr, K] (or [K, panels, nr]) view into [panels, K, nr]."""
    n, k, nr = layout.n, layout.k, layout.nr
    panels = layout.packed_shape[-3]
    name = f"pack_weight_{'nk' if layout.transposed else 'kn'}_{n}x{k}_{nr}"
    if rx.lookup_symbol(module_op, name) is not None:
        return name
    if layout.transposed:  # [N, K]: whole panels of rows, [panels, nr, K] -> [panels, K, nr]
        padded, view, reassociation, perm = (
            (panels * nr, k),
            (panels, nr, k),
            "[[0, 1], [2]]",
            [0, 2, 1],
        )
    else:  # [K, N]: whole panels of columns, [K, panels, nr] -> [panels, K, nr]
        padded, view, reassociation, perm = (
            (k, panels * nr),
            (k, panels, nr),
            "[[0], [1, 2]]",
            [1, 0, 2],
        )
    text = _PACK_KERNEL.format(
        name=name, src=_tensor(layout.shape), out=_tensor(layout.packed_shape),
        padded=_tensor(padded), rows=layout.shape[0], cols=layout.shape[1],
        reassociation=reassociation, view_shape=", ".join(map(str, view)), view=_tensor(view),
        perm=perm,
    )  # fmt: skip
    parsed = ir.Module.parse(text)  # alive until its function has moved out
    func = next(iter(parsed.body.operations)).operation
    func.move_before(next(iter(module_op.regions[0].blocks[0].operations)).operation)
    return name


@register_pass(
    "relax-pack-constant-weights",
    "pack constant matmul weights at compile time into the panels the schedule reads",
    {"target": "target string (default: the target in scope, else the host CPU)"},
)
def relax_pack_constant_weights(target: str = ""):
    nr = micro_tile(target_option(target, "relax-pack-constant-weights")).nr
    return lambda module_op: pack_constant_weights(module_op, nr)
