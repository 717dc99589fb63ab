"""`relax-inplace-state`: state written by `index_copy` is updated in its own buffer.

A static KV cache is state (`relax.state`): each decode step writes a row at `cache_position`
(`index_copy`) and main returns the whole new cache. As a value, the new cache is a copy: every
step read and wrote each cache whole (two passes over 3 MB per cache and layer at 1024 rows,
~17% of a 12-layer decode step at 2 threads) to change one row. Where the state parameter's
only reader is that `index_copy` and its result is the state's new value, the old value is
dead once it is written, so the write can happen in the parameter's buffer (TVM's
`call_tir_inplace`): a kernel that writes only the indexed slices. Main then names the state
`inplace` in its `relax.state`: its entry point has no out-parameter for it
(relax-graph-to-memref) and the VM keeps the same array from call to call.

CPU targets only: the kernel is a serial loop over the written slices, which the GPU schedules
do not map onto threads (a cuda build keeps the copy).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, scf, tensor

from dialects import relax as rx
from lowering.bind_params import arg_names
from lowering.dataflow import graph_functions
from lowering.graph_to_memref import state_results
from lowering.registry import register_pass
from relaxmlir.target import Target
from relaxmlir.transform import Pass


def _strings(attr: ir.Attribute) -> list[str]:
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attr)]


def _yielded(value: ir.Value) -> ir.Value:
    """What a function result carries: a dataflow block's result is its yield's operand."""
    owner = value.owner
    if isinstance(owner, ir.Block) or not rx.is_dataflow(owner.operation):
        return value
    body = owner.operation.regions[0].blocks[0]
    terminator = list(body.operations)[-1]
    return terminator.operands[ir.OpResult(value).result_number]


def _static(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType) and ir.RankedTensorType(t).has_static_shape


def _signed_index(t: ir.Type) -> bool:
    """i32 / i64 index tensors (uint8 is an i8 in memory: its values are not signed)."""
    element = ir.RankedTensorType(t).element_type
    return isinstance(element, ir.IntegerType) and ir.IntegerType(element).width in (32, 64)


def _writer(param: ir.Value) -> ir.Operation | None:
    """The `index_copy` that is the parameter's only reader, into its data operand."""
    uses = list(param.uses)
    if len(uses) != 1:
        return None
    op = uses[0].owner.operation
    if op.name != rx.IndexCopy.name or uses[0].operand_number != 0:
        return None
    data, index, source = op.operands
    if not all(_static(v.type) for v in (data, index, source)) or not _signed_index(index.type):
        return None
    return op


def _slab(shape: list[int], axis: int) -> list[int]:
    return [1 if d == axis else n for d, n in enumerate(shape)]


def _offsets(rank: int, axis: int) -> list[int]:
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    return [dynamic if d == axis else 0 for d in range(rank)]


def _kernel(module_op: ir.Operation, op: ir.Operation, name: str) -> None:
    """`name(index, source, data) -> data`: for each j, source's slab j written into data at
    index[j] along the axis (a position outside the axis is skipped), in order, so the last of
    repeated positions wins; nothing else of data is touched."""
    data, index, source = (v.type for v in op.operands)
    axis = ir.IntegerAttr(op.attributes["axis"]).value
    data_t, source_t = ir.RankedTensorType(data), ir.RankedTensorType(source)
    rank, size, count = data_t.rank, data_t.shape[axis], source_t.shape[axis]
    element = ir.RankedTensorType(index).element_type
    slab = ir.RankedTensorType.get(_slab(list(source_t.shape), axis), data_t.element_type)
    sizes, ones = _slab(list(source_t.shape), axis), [1] * rank
    body = module_op.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(body), op.location:
        ftype = ir.FunctionType.get([index, source, data], [data])
        kernel = func.FuncOp(name, ftype, visibility="private")
        kernel.attributes[rx.PRIM_FUNC_ATTR] = ir.UnitAttr.get()
        entry = kernel.add_entry_block()
    with ir.InsertionPoint(entry), op.location:
        idx, src, out = entry.arguments
        index_t = ir.IndexType.get()
        c0, c1 = (arith.ConstantOp(index_t, v).result for v in (0, 1))
        loop = scf.ForOp(c0, arith.ConstantOp(index_t, count).result, c1, [out])
        with ir.InsertionPoint(loop.body):
            j, acc = loop.induction_variable, loop.inner_iter_args[0]
            p = tensor.ExtractOp(idx, [j]).result
            zero, n = (arith.ConstantOp(element, v).result for v in (0, size))
            inside = arith.AndIOp(
                arith.CmpIOp(arith.CmpIPredicate.sge, p, zero).result,
                arith.CmpIOp(arith.CmpIPredicate.slt, p, n).result,
            ).result
            at = arith.IndexCastOp(index_t, p).result
            branch = scf.IfOp(inside, [data], has_else=True)
            with ir.InsertionPoint(branch.then_block):
                row = tensor.ExtractSliceOp(
                    slab, src, [j], [], [], _offsets(rank, axis), sizes, ones
                ).result
                offsets = _offsets(rank, axis)
                new = tensor.InsertSliceOp(row, acc, [at], [], [], offsets, sizes, ones).result
                scf.YieldOp([new])
            with ir.InsertionPoint(branch.else_block):
                scf.YieldOp([acc])
            scf.YieldOp([branch.results[0]])
        func.ReturnOp([loop.results[0]])


def inplace_state(module_op: ir.Operation, target: Target | None) -> None:
    if target is None or target.kind != "llvm":
        return
    count = 0
    taken = {
        ir.StringAttr(op.attributes["sym_name"]).value
        for op in module_op.regions[0].blocks[0].operations
        if "sym_name" in op.attributes
    }
    for func_op in graph_functions(module_op):
        if rx.STATE_ATTR not in func_op.attributes:
            continue
        state = ir.DictAttr(func_op.attributes[rx.STATE_ATTR])
        done = _strings(state[rx.STATE_INPLACE_KEY]) if rx.STATE_INPLACE_KEY in state else []
        block = func_op.regions[0].blocks[0]
        results = list(list(block.operations)[-1].operands)
        params = arg_names(func_op)
        for name, result in state_results(func_op):
            if name in done or name not in params:
                continue
            writer = _writer(block.arguments[params.index(name)])
            if writer is None or _yielded(results[result]) != writer.results[0]:
                continue
            while (symbol := f"__inplace_index_copy_{count}") in taken:
                count += 1
            taken.add(symbol)
            _kernel(module_op, writer, symbol)
            data, index, source = writer.operands
            with ir.InsertionPoint(writer), writer.location:
                call = rx.create(
                    rx.CallTIRInplace.name,
                    [index, source, data],
                    [data.type],
                    {"callee": ir.FlatSymbolRefAttr.get(symbol)},
                )
            writer.results[0].replace_all_uses_with(call.results[0])
            writer.erase()
            done.append(name)
        if done:
            entries = {named.name: named.attr for named in state}
            entries[rx.STATE_INPLACE_KEY] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in done])
            func_op.attributes[rx.STATE_ATTR] = ir.DictAttr.get(entries)


@register_pass(
    "relax-inplace-state",
    "state written by index_copy (a static KV cache) is updated in its own buffer",
    {"target": "target string (default: the target in scope; none: leave the module as is)"},
)
def relax_inplace_state(target: str = ""):
    def run(module_op: ir.Operation) -> None:
        inplace_state(module_op, Target(target) if target else Target.current())

    return run


def InplaceState(target: Target | str | None = None) -> Pass:
    """State buffers written by `index_copy` are written in place (a kernel that writes only
    the indexed slices) rather than copied whole; `target` defaults to the one in scope."""

    def run(mod):
        tgt = Target(target) if isinstance(target, str) else target
        inplace_state(mod.module.operation, tgt or Target.current())

    return Pass("InplaceState", run)
