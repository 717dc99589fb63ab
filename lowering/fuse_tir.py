"""`relax-fuse-tir`: merge each `relax.fuse_group` of call_tirs into one primitive function.

The TVM FuseTIR role. The callees' bodies are inlined one after another into a new PrimFunc
whose arguments are the group's external inputs and its output. Then intermediates disappear:
elementwise producers fuse into their consumers (upstream `linalg-fuse-elementwise-ops`), and an
elementwise epilogue that reads a single-use result of the same type (matmul -> +bias -> relu)
updates that result in place, so bufferization computes the whole chain in the out-argument.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import func as func_d
from mlir.dialects import linalg
from mlir.dialects import tensor
from mlir.passmanager import PassManager

from dialects import relax as rx
from lowering.dataflow import dataflow_blocks, graph_functions
from lowering.dedupe import body_key
from lowering.fuse_ops import GROUP_ATTR, result_symbols, symbols_within
from lowering.registry import register_pass
from lowering.schedule.common import rebuild_generic
from lowering.schedule.gather import raise_gathers
from lowering.schedule.pad import raise_pads


def _callee(op: ir.Operation) -> ir.Operation:
    return rx.lookup_symbol(op, ir.FlatSymbolRefAttr(op.attributes["callee"]).value)


def _inline_body(callee: ir.Operation, args: list[ir.Value], terminator: ir.Operation) -> list[ir.Value]:
    """Clone `callee`'s body before `terminator` with its arguments replaced by `args`."""
    tmp = callee.clone(ir.InsertionPoint(terminator.parent))  # beside the function being built
    block = tmp.regions[0].blocks[0]
    for arg, value in zip(list(block.arguments), args):
        arg.replace_all_uses_with(value)
    ops = [op.operation for op in block.operations]
    results = list(ops[-1].operands)
    for op in ops[:-1]:
        op.move_before(terminator)
    tmp.erase()
    return results


def make_inplace(func_op: ir.Operation) -> None:
    """outs(%empty) -> outs(%x) for an elementwise generic reading a single-use %x of the out type."""
    for op in [o.operation for o in func_op.regions[0].blocks[0].operations]:
        if op.name != "linalg.generic" or len(op.results) != 1:
            continue
        iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
        if any("reduction" in t for t in iterators):
            continue
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        out_type = op.results[0].type
        if not ir.RankedTensorType(out_type).has_static_shape:
            # The dynamic-shape schedules read the operand and write the init in separate
            # loops, which bufferization cannot prove safe in place.
            continue
        n_in = len(op.operands) - 1
        body = op.regions[0].blocks[0]
        if len(op.operands) != len(maps):
            continue
        out_arg = body.arguments[n_in]
        if len(list(out_arg.uses)):
            continue  # the body reads its output: not a pure elementwise map
        init = op.operands[n_in]
        fresh = not isinstance(init.owner, ir.Block) and init.owner.operation.name == "tensor.empty"
        out_param = isinstance(init.owner, ir.Block) and len(list(init.uses)) == 1
        if not (fresh or out_param):
            continue  # an init with other readers must keep its own buffer
        for i in range(n_in):
            x = op.operands[i]
            if x.type != out_type or maps[i] != maps[-1] or len(list(x.uses)) != 1:
                continue
            if _root(x) is None:
                continue  # a function argument (or a view of one): never write into the caller's input
            # Read element i from the out block argument and write the result over %x.
            body.arguments[i].replace_all_uses_with(out_arg)
            _drop_input(op, i, new_init=x)
            break


_VIEW_OPS = ("tensor.extract_slice", "tensor.collapse_shape", "tensor.expand_shape", "tensor.cast")


def _root(x: ir.Value) -> ir.Value | None:
    """The value `x` is a view of (through slices and reshapes), or None for a block argument."""
    while not isinstance(x.owner, ir.Block):
        owner = x.owner.operation
        if owner.name not in _VIEW_OPS:
            return x
        x = owner.operands[0]
    return None


def _drop_input(op: ir.Operation, index: int, new_init: ir.Value) -> None:
    """Rebuild the generic without input `index` (now unread) and with `new_init` as its init."""
    n_in = len(op.operands) - 1
    inputs = [v for i, v in enumerate(list(op.operands)[:n_in]) if i != index]
    maps = [m for i, m in enumerate(ir.ArrayAttr(op.attributes["indexing_maps"])) if i != index]
    types = [a.type for a in op.regions[0].blocks[0].arguments]
    moved = [None if i == index else i - (i > index) for i in range(len(types))]
    # the other attributes (a schedule's tags: GPU kernel templates) carry over
    new = rebuild_generic(
        op, op.results[0].type, inputs, [new_init], maps, types[:index] + types[index + 1 :], moved
    )
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()


def _empty_like(
    t: ir.Type,
    sources: list[ir.Value],
    before: ir.Operation,
    symbols: tuple | None = None,
    out: tuple | None = None,
) -> ir.Value:
    """`tensor.empty` of type `t`; dynamic sizes from an argument of the same type, else, by
    symbol name (`symbols`), from the axes of the output argument `out` = (value, symbols)."""
    t = ir.RankedTensorType(t)
    index = ir.IndexType.get()
    with ir.InsertionPoint(before), ir.Location.unknown():
        if t.has_static_shape:
            return tensor.EmptyOp(list(t.shape), t.element_type).result
        source = next((v for v in reversed(sources) if v.type == t), None)
        if source is not None:
            axes = [(source, i) for i in range(t.rank)]
        elif out is not None and symbols_within(t, symbols, out[1]):
            value, named = out
            axes = [(value, named.index(n) if isinstance(n, str) else None) for n in symbols]
        else:
            raise ValueError(f"no argument gives the sizes of intermediate ({t})")
        sizes = [
            tensor.DimOp(v, arith.ConstantOp(index, i).result).result
            if ir.ShapedType.is_dynamic_size(d)
            else d
            for (v, i), d in zip(axes, t.shape)
        ]
        return tensor.EmptyOp(sizes, t.element_type).result


def fuse_group(
    module_op: ir.Operation,
    func_op: ir.Operation,
    group: list[ir.Operation],
    name: str,
    done: dict | None = None,
) -> None:
    """`done`: fused functions by the body they were made from (dedupe.body_key), in a scratch
    module at key None. A group equal to an earlier one (a transformer's 12 layers) takes a copy
    of that result: elementwise fusion and gather raising took ~0.4 s per GPT-2 layer."""
    inputs: list[ir.Value] = []
    for op in group:
        for v in op.operands:
            owner = v.owner
            if (isinstance(owner, ir.Block) or owner.operation not in group) and v not in inputs:
                inputs.append(v)
    last = group[-1]
    out_type = last.results[0].type
    known = {str(v.type) for v in inputs} | {str(out_type)}
    out_symbols = result_symbols(last)
    for op in group[:-1]:
        t = ir.RankedTensorType(op.results[0].type)
        if (
            not t.has_static_shape
            and str(t) not in known
            and not symbols_within(t, result_symbols(op), out_symbols)
        ):
            for member in group:  # no argument gives this intermediate's sizes: leave unfused
                del member.attributes[GROUP_ATTR]
            return
    with ir.InsertionPoint(func_op), ir.Location.unknown():
        fused = func_d.FuncOp(name, ir.FunctionType.get([v.type for v in inputs] + [out_type], [out_type]), visibility="private")
    fused.attributes[rx.PRIM_FUNC_ATTR] = ir.UnitAttr.get()
    entry = fused.add_entry_block()
    with ir.InsertionPoint(entry), ir.Location.unknown():
        terminator = func_d.ReturnOp([])
    mapping = {v: a for v, a in zip(inputs, entry.arguments)}
    out_arg = entry.arguments[len(inputs)]
    for op in group:
        callee = _callee(op)
        ins = [mapping[v] for v in op.operands]
        if op == last:
            dest = out_arg
        else:
            dest = _empty_like(
                op.results[0].type,
                [*entry.arguments],
                terminator,
                result_symbols(op),
                (out_arg, out_symbols),
            )
        results = _inline_body(callee, ins + [dest], terminator)
        mapping[op.results[0]] = results[0]
    with ir.InsertionPoint(terminator), ir.Location.unknown():
        func_d.ReturnOp([mapping[last.results[0]]])
    terminator.erase()
    attrs = {"callee": ir.FlatSymbolRefAttr.get(name)}
    if rx.SHAPE_ATTR in last.attributes:
        attrs[rx.SHAPE_ATTR] = last.attributes[rx.SHAPE_ATTR]
    with ir.InsertionPoint(last), last.location:
        call = rx.create(rx.CallTIR.name, inputs, [out_type], attrs, loc=last.location)
    last.results[0].replace_all_uses_with(call.results[0])
    for op in reversed(group):
        op.erase()
    key = body_key(fused.operation) if done is not None else None
    if key is not None and key in done:
        copy = done[key].clone(ir.InsertionPoint(fused.operation))
        copy.attributes["sym_name"] = ir.StringAttr.get(name)
        fused.operation.erase()
        return
    scratch, moved = _fuse_elementwise(fused.operation, views=True)
    if _contraction_loops(moved) != _contraction_loops(fused.operation):
        # A reshape view after a contraction was propagated into it (fusion by expansion: a
        # matmul whose N is split by the reshape became a 4-loop contraction no matmul rule
        # takes; 512x4608x64 with a reshape epilogue ran 15x slower): keep that reshape a copy.
        scratch, moved = _fuse_elementwise(fused.operation, views=False)
    make_inplace(moved)
    moved.move_before(fused.operation)  # out of `scratch`, which may go now
    del scratch
    fused.operation.erase()
    if key is not None:
        if None not in done:
            done[None] = ir.Module.create()
        done[key] = moved.clone(ir.InsertionPoint(done[None].body))


def _fuse_elementwise(func_op: ir.Operation, views: bool) -> tuple[ir.Module, ir.Operation]:
    """A copy of `func_op` after upstream elementwise fusion, and the scratch module holding it
    (keep it alive while the copy is in it); `views` raises reshape gathers to views first, so
    that fusion sees through them."""
    pm = PassManager.parse("builtin.module(func.func(linalg-fuse-elementwise-ops,canonicalize,cse))")
    tmp = ir.Module.create()
    moved = func_op.clone(ir.InsertionPoint(tmp.body))
    raise_pads(moved)  # else elementwise fusion inlines guarded pad reads into the conv/pool
    if views:
        raise_gathers(moved)
    guarded = _guard_costly_broadcasts(moved)
    pm.run(tmp.operation)
    if guarded:
        _drop_barriers(moved)
    return tmp, moved


# Body ops that cost tens of instructions per element (a polynomial and a reconstruction). Not
# divisions or square roots: recomputed along a broadcast they still fused better (MobileNetV3's
# hard sigmoid, x / 6, kept apart ran 6% slower at 2 threads).
_COSTLY = {
    "math.exp", "math.exp2", "math.expm1", "math.log", "math.log1p", "math.log2", "math.tanh",
    "math.erf", "math.powf", "math.sin", "math.cos", "math.atan", "math.atan2", "math.tan",
    "math.asin", "math.acos", "math.sinh", "math.cosh", "math.asinh", "math.acosh", "math.atanh",
}  # fmt: skip
# A consumer this many times larger than a costly producer's result keeps that result apart.
BROADCAST_GUARD = 4
_BARRIER_ATTR = "relax.fusion_barrier"


def _elements(value: ir.Value) -> int | None:
    t = ir.RankedTensorType(value.type)
    return math.prod(t.shape) if t.has_static_shape else None


def _parallel_generic(op) -> bool:
    if isinstance(op, ir.Block) or op.name != "linalg.generic" or len(op.results) != 1:
        return False
    return all("parallel" in str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"]))


def _costly(value: ir.Value) -> bool:
    """Is `value` computed by elementwise generics (over as many elements as it has) of which one
    has a costly body? Those fuse into one before they fuse into a broadcast."""
    size, work, seen = _elements(value), [value], set()
    while work:
        op = work.pop().owner
        if not _parallel_generic(op) or id(op) in seen:
            continue
        seen.add(id(op))
        if any(b.operation.name in _COSTLY for b in op.regions[0].blocks[0].operations):
            return True
        n_in = len(op.operands) - len(op.results)
        work += [v for v in list(op.operands)[:n_in] if _elements(v) == size]
    return False


def _guard_costly_broadcasts(func_op: ir.Operation) -> int:
    """Put a copy between a costly elementwise result and each elementwise consumer that
    broadcasts it over many more elements, so that upstream fusion (which inlines a producer
    into any consumer) does not recompute it for every element of the broadcast: a
    squeeze-excite block's sigmoid of [1, C, 1, 1] was evaluated for each of the H x W x C
    elements its multiply writes (RegNetY-1.6GF: 73 us per block). Returns how many copies it
    put; `_drop_barriers` removes them after fusion."""
    edges = []

    def visit(op):
        op = op.operation
        if _parallel_generic(op):
            out = _elements(op.results[0])
            n_in = len(op.operands) - len(op.results)
            for i, v in enumerate(list(op.operands)[:n_in]):
                size = _elements(v)
                if out and size and out >= BROADCAST_GUARD * size and _costly(v):
                    edges.append((op, i))
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    for consumer, i in edges:
        value = consumer.operands[i]
        kind = ir.RankedTensorType(value.type)
        with ir.InsertionPoint(consumer), consumer.location:
            empty = tensor.EmptyOp(list(kind.shape), kind.element_type).result
            copy = linalg.copy(value, outs=[empty])
        copy.owner.attributes[_BARRIER_ATTR] = ir.UnitAttr.get()
        consumer.operands[i] = copy
    return len(edges)


def _drop_barriers(func_op: ir.Operation) -> None:
    """The copies `_guard_costly_broadcasts` put, gone: consumers read the result itself."""
    found = []

    def visit(op):
        op = op.operation
        if _BARRIER_ATTR in op.attributes:
            found.append(op)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    for copy in found:
        empty = copy.operands[1].owner
        copy.results[0].replace_all_uses_with(copy.operands[0])
        copy.erase()
        if not isinstance(empty, ir.Block) and not list(empty.results[0].uses):
            empty.erase()


def _contraction_loops(func_op: ir.Operation) -> list[int]:
    """The loop counts of the generics with a reduction loop, in order."""
    found = []

    def visit(op):
        op = op.operation
        if op.name == "linalg.generic":
            iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
            if any("reduction" in t for t in iterators):
                found.append(len(iterators))
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    return found


def _referenced_callees(module_op: ir.Operation) -> set[str]:
    names = set()

    def visit(op):
        op = op.operation
        if "callee" in op.attributes:
            attr = op.attributes["callee"]
            if isinstance(attr.maybe_downcast() if hasattr(attr, "maybe_downcast") else attr, ir.FlatSymbolRefAttr):
                names.add(ir.FlatSymbolRefAttr(attr).value)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    return names


def fuse_tir(module_op: ir.Operation) -> None:
    """Merge every group; the PrimFuncs that only the groups called are removed (as TVM does)."""
    merged_callees: set[str] = set()
    # the module's symbols, scanned once: a lookup per candidate name scanned the module each
    # time (MobileNetV2 with lifted weights: 210 groups, 0.65 s)
    used_names = {
        ir.StringAttr(op.attributes["sym_name"]).value
        for op in module_op.regions[0].blocks[0].operations
        if "sym_name" in op.attributes
    }
    done: dict = {}  # fused results by body, see fuse_group
    with rx.cached_symbols(module_op):  # the groups' callees: one scan, not one per call
        for func_op in graph_functions(module_op):
            for block_op in dataflow_blocks(func_op):
                _fuse_block(module_op, func_op, block_op, used_names, merged_callees, done)
    still_used = _referenced_callees(module_op)
    for op in [o.operation for o in module_op.regions[0].blocks[0].operations]:
        name = ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None
        if name in merged_callees and name not in still_used and rx.PRIM_FUNC_ATTR in op.attributes:
            op.erase()


def _fuse_block(module_op, func_op, block_op, used_names, merged_callees, done) -> None:
    groups: dict[str, list] = {}
    for op in block_op.regions[0].blocks[0].operations:
        op = op.operation
        if GROUP_ATTR in op.attributes:
            groups.setdefault(ir.StringAttr(op.attributes[GROUP_ATTR]).value, []).append(op)
    for group in groups.values():
        callees = [ir.FlatSymbolRefAttr(op.attributes["callee"]).value for op in group]
        name = "fused_" + "_".join(callees)
        base, i = name, 1
        while name in used_names:
            name, i = f"{base}{i}", i + 1
        used_names.add(name)
        merged_callees.update(callees)
        fuse_group(module_op, func_op, group, name, done)


@register_pass("relax-fuse-tir", "merge each relax.fuse_group into one primitive function without intermediates")
def relax_fuse_tir():
    return fuse_tir
