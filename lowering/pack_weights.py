"""`relax-pack-constant-weights`: pack constant matmul weights once, at compile time (data tiling).

When a PrimFunc's matmul reads its B operand straight from an argument and the caller passes a
`relax.constant` there, the constant is replaced by its packed panels (`pack_weight`) and the
PrimFunc by a copy that takes them (`use_prepacked_weight`): the schedule then reads pre-packed
panels in the hot loop instead of packing B at every call. The panel width is the target's
(`micro_tile`), so this is a CPU-layout pass of the llvm pipeline row.
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
from lowering.schedule.matmul import micro_tile, pack_weight, use_prepacked_weight
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


def pack_constant_weights(module_op: ir.Operation, nr: int) -> None:
    packed_funcs: dict[tuple[str, int], str] = {}
    packable: dict[str, tuple[int, bool] | None] = {}

    def visit(op):
        op = op.operation
        if op.name != rx.CallTIR.name:
            return ir.WalkResult.ADVANCE
        if not any(map(_matrix_constant, op.operands)):
            return ir.WalkResult.ADVANCE  # no weight to pack: no kernel to analyse (convolutions)
        callee_name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        callee = rx.lookup_symbol(op, callee_name)
        if callee is not None and callee_name not in packable:  # one analysis per kernel
            packable[callee_name] = _packable_weight(callee)
        found = packable.get(callee_name) if callee is not None else None
        if found is None or found[0] >= len(op.operands):
            return ir.WalkResult.ADVANCE
        index, transposed = found
        weight = _constant_value(op.operands[index])
        if weight is None or weight.dtype != np.float32:
            return ir.WalkResult.ADVANCE
        packed, layout = pack_weight(weight, transposed=transposed, nr=nr)
        key = (callee_name, index)
        if key not in packed_funcs:
            clone = callee.clone(ir.InsertionPoint(callee))
            name = f"{callee_name}_prepacked"
            clone.attributes["sym_name"] = ir.StringAttr.get(name)
            use_prepacked_weight(clone, index, layout)
            packed_funcs[key] = name
        old = op.operands[index].owner.operation
        # a packing that is a view of the weight (one panel) is copied; the others are given up
        value = dense.elements(packed, owned=not np.may_share_memory(packed, weight))
        with ir.InsertionPoint(op), old.location:
            const = rx.Constant.create(
                results=[ir.RankedTensorType.get(list(packed.shape), ir.F32Type.get())],
                attributes={"value": value},
            )
        op.operands[index] = const.result
        rx.CallTIR.refresh_segments(op)  # the packed weight's type may split a run of equal types
        op.attributes["callee"] = ir.FlatSymbolRefAttr.get(packed_funcs[key])
        if not list(old.results[0].uses):
            old.erase()
        return ir.WalkResult.ADVANCE

    with rx.cached_symbols(module_op):  # kernels are cloned here, never erased
        for func_op in graph_functions(module_op):
            func_op.walk(visit)


@register_pass(
    "relax-pack-constant-weights",
    "pack constant matmul weights at compile time into the panels the schedule reads",
    {"target": "target string (default: the target in scope, else the host CPU)"},
)
def relax_pack_constant_weights(target: str = ""):
    nr = micro_tile(target_option(target, "relax-pack-constant-weights")).nr
    return lambda module_op: pack_constant_weights(module_op, nr)
