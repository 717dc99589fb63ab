"""`relax-fuse-ops`: group chains of `call_tir`s that can become one primitive function.

The TVM FuseOps role. Each callee gets an op pattern kind from its linalg body (TVM's
OpPatternKind); along single-use edges inside a dataflow block, a producer joins its consumer's
group when the pair is fusable (table `_FUSABLE`). A group is recorded as the attribute
`relax.fuse_group` on its ops; `relax-fuse-tir` then merges each group into one PrimFunc.
"""

from __future__ import annotations

from enum import IntEnum
from math import prod

from mlir import ir

from dialects import relax as rx
from dialects import shape as sh
from lowering.dataflow import dataflow_blocks, graph_functions
from lowering.registry import register_pass
from lowering.schedule.common import is_permuting_copy

GROUP_ATTR = "relax.fuse_group"


class Pattern(IntEnum):
    """TVM's OpPatternKind, ordered from most to least fusable."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    OUT_EWISE_FUSABLE = 4  # matmul, conv: an elementwise epilogue can follow
    OPAQUE = 8


# (producer, consumer) kinds that fuse: elementwise-like consumers take anything up to a
# contraction; a reduction consumer takes elementwise producers (its prologue).
_FUSABLE = {
    (p, c)
    for c in (Pattern.ELEMWISE, Pattern.BROADCAST, Pattern.INJECTIVE)
    for p in (Pattern.ELEMWISE, Pattern.BROADCAST, Pattern.INJECTIVE, Pattern.OUT_EWISE_FUSABLE)
} | {(p, Pattern.REDUCTION) for p in (Pattern.ELEMWISE, Pattern.BROADCAST)}

_ANCHORS = (Pattern.REDUCTION, Pattern.OUT_EWISE_FUSABLE)

# A transpose that only feeds the B of a contraction with this many rows or fewer joins it (a
# decode step's q @ K^T over its KV cache: one query row): the schedule then reads B through
# the transpose's map (`normalize.fold_transposes`, the matmul's `dot` route over K's rows)
# instead of a kernel writing K^T (3 MB per layer at 1024 cached rows, at every step). With more
# rows the product packs B anyway, and a transpose stays where it fuses best: the epilogue of
# the projection that computes K.
TRANSPOSE_INTO_ROWS = 4


def _generic_kind(op: ir.Operation) -> Pattern:
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    has_extract = False
    gathered = set()  # tensors the body reads at computed indices (TE's grouped conv: the image)

    def visit(inner):
        nonlocal has_extract
        name = inner.operation.name
        if name in ("tensor.extract", "scf.if", "linalg.index"):
            has_extract = True
        if name == "tensor.extract":
            gathered.add(inner.operation.operands[0])
        return ir.WalkResult.ADVANCE

    op.regions[0].blocks[0].operations and op.walk(visit)
    n_red = sum("reduction" in t for t in iterators)
    out_map = maps[-1]
    if not n_red and len(op.results) == 1 and out_map == ir.AffineMap.get_identity(out_map.n_dims):
        maps = _unit_axes_as_loops(maps, ir.ShapedType(op.results[0].type).shape)
    if n_red:
        # A reduction whose inputs each miss a different loop (matmul/conv shape) is a contraction;
        # a tensor read at computed indices counts as an input (the image of TE's depthwise and
        # grouped NCHW convolutions, whose bias and ReLU then join it as an epilogue instead of
        # running as a pass of their own or as the next kernel's prologue).
        operands = set(op.operands)
        n_inputs = len(maps) - 1 + len([t for t in gathered if t not in operands])
        return Pattern.OUT_EWISE_FUSABLE if n_inputs >= 2 else Pattern.REDUCTION
    if has_extract or not out_map.is_permutation:
        return Pattern.INJECTIVE
    if all(m == out_map for m in maps):
        return Pattern.ELEMWISE
    if all(m.is_projected_permutation for m in maps[:-1]) and out_map == ir.AffineMap.get_identity(out_map.n_dims):
        return Pattern.BROADCAST
    return Pattern.INJECTIVE


def _unit_axes_as_loops(maps: list, out_shape: list[int]) -> list:
    """TE reads a broadcast operand's size-1 axis at index 0; where the loop over that axis has
    extent 1 too (a batch of one), 0 is that loop's index: written so, `x ** 2` over
    [1, 128, 768] reads as elementwise, as over [128, 768] (then it fuses into the mean after
    it: Llama's RMSNorm)."""
    rank = len(out_shape)
    fixed = []
    for m in maps:
        exprs = list(m.results)
        offset = rank - len(exprs)  # broadcasting aligns the trailing axes
        for j, e in enumerate(exprs):
            d = j + offset
            if isinstance(e, ir.AffineConstantExpr) and e.value == 0 and 0 <= d < rank and out_shape[d] == 1:
                exprs[j] = ir.AffineDimExpr.get(d)
        fixed.append(ir.AffineMap.get(m.n_dims, m.n_symbols, exprs))
    return fixed


def callee_kind(func_op: ir.Operation) -> Pattern:
    """The least fusable kind over the linalg ops of a PrimFunc body (fills are free)."""
    kinds = []
    sliced: dict = {}  # source -> its strided slices (TE's unrolled windows read shifted views)
    for op in func_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "tensor.extract_slice" and any(
            s != 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"])
        ):  # strided views only: splits and chunks (unit strides) still fuse as before
            sliced[op.operands[0]] = sliced.get(op.operands[0], 0) + 1
        if op.name == "linalg.generic":
            kinds.append(_generic_kind(op))
        elif op.name in ("linalg.fill", "tensor.empty", "func.return", "bufferization.materialize_in_destination") or op.name.startswith("arith."):
            continue
        elif op.name.startswith("tensor.") and op.name in ("tensor.extract_slice", "tensor.dim"):
            kinds.append(Pattern.INJECTIVE)
        else:
            kinds.append(Pattern.OPAQUE)
    if not kinds:
        return Pattern.OPAQUE
    # Several views of one tensor combined (blocked max pooling's window taps) make a window
    # op: after a producer it would recompute that producer once per tap, so it anchors a group
    # of its own, as TVM's pooling does (OUT_EWISE_FUSABLE).
    if any(n > 1 for n in sliced.values()) and Pattern.OPAQUE not in kinds:
        kinds = [k for k in kinds if k not in _ANCHORS] + [Pattern.OUT_EWISE_FUSABLE]
    anchors = [k for k in kinds if k in _ANCHORS]
    if len(anchors) > 1 or Pattern.OPAQUE in kinds:
        return Pattern.OPAQUE
    return anchors[0] if anchors else max(kinds)


def is_transpose(func_op: ir.Operation) -> bool:
    """A PrimFunc that only permutes the axes of its one input (TE's permute_dims)."""
    ops = [o.operation for o in func_op.regions[0].blocks[0].operations]
    if len(ops) != 2 or not is_permuting_copy(ops[0]):
        return False
    read = ir.AffineMapAttr(ir.ArrayAttr(ops[0].attributes["indexing_maps"])[0]).value
    return read != ir.AffineMap.get_identity(read.n_dims)  # a plain copy permutes nothing


def _transpose_into_few_rows(producer, consumer, value, kinds) -> bool:
    """Does the transpose `producer` feed only the B of `consumer`, a contraction of at most
    TRANSPOSE_INTO_ROWS static rows (see TRANSPOSE_INTO_ROWS)?"""
    if kinds[consumer] != Pattern.OUT_EWISE_FUSABLE or consumer.name != rx.CallTIR.name:
        return False
    if len(consumer.operands) < 2 or consumer.operands[1] != value:
        return False
    if any(consumer.operands[i] == value for i in range(len(consumer.operands)) if i != 1):
        return False
    shape = ir.RankedTensorType(consumer.results[0].type).shape
    rows = shape[-2] if len(shape) >= 2 else None
    if rows is None or ir.ShapedType.is_dynamic_size(rows) or rows > TRANSPOSE_INTO_ROWS:
        return False
    return is_transpose(_callee(producer))


def _gathered_args(func_op: ir.Operation) -> set[int]:
    """The arguments of a PrimFunc that its body reads at computed indices (`tensor.extract`)."""
    found: set[int] = set()

    def visit(inner):
        if inner.operation.name == "tensor.extract":
            source = inner.operation.operands[0]
            if isinstance(source.owner, ir.Block) and source.owner == func_op.regions[0].blocks[0]:
                found.add(ir.BlockArgument(source).arg_number)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    return found


def _elements(t: ir.Type) -> int | None:
    t = ir.RankedTensorType(t)
    return prod(t.shape) if t.has_static_shape else None


# A kernel whose output has this many times the elements of a value it reads at computed
# indices would recompute that value's producer, fused in, about as many times (a pad, 1.1x its
# input, reads each element once: its producer still writes the padded image)
RECOMPUTE_RATIO = 8


def _read_many_times(consumer: ir.Operation, value: ir.Value, gathered: dict) -> bool:
    """Does `consumer` (no contraction: their prologues stay) read `value` at computed indices
    over an output RECOMPUTE_RATIO times larger? Fused in, the producer would run once per
    output element instead of once per own element: the pull-style scatter of a KV cache update
    reads the new row's values (a rope chain) at each of the cache's elements, 256 x the row (a
    12-layer decode step's cache writes took 3.2 ms instead of 2.1)."""
    small, big = _elements(value.type), _elements(consumer.results[0].type)
    if small is None or big is None or big < RECOMPUTE_RATIO * small:
        return False
    callee = _callee(consumer)
    if callee not in gathered:
        gathered[callee] = _gathered_args(callee)
    return any(
        consumer.operands[k] == value for k in gathered[callee] if k < len(consumer.operands)
    )


def _callee(op: ir.Operation) -> ir.Operation | None:
    if op.name != rx.CallTIR.name:
        return None
    return rx.lookup_symbol(op, ir.FlatSymbolRefAttr(op.attributes["callee"]).value)


def _is_static(t: ir.Type) -> bool:
    return ir.RankedTensorType(t).has_static_shape


def result_symbols(op: ir.Operation) -> tuple | None:
    """The shape of `op`'s first result as its `relax.shape` names it (sizes and symbol names)."""
    if rx.SHAPE_ATTR not in op.attributes:
        return None
    shapes = ir.ArrayAttr(op.attributes[rx.SHAPE_ATTR])
    return sh.from_attr(shapes[0]) if len(shapes) else None


def symbols_within(t: ir.Type, symbols: tuple | None, outer: tuple | None) -> bool:
    """Does every dynamic axis of `t` (named by `symbols`) have its symbol among the sizes of
    `outer`: can a fused kernel take the sizes of this intermediate from its output's?"""
    dims = ir.RankedTensorType(t).shape
    if symbols is None or outer is None or len(symbols) != len(dims):
        return False
    return all(
        isinstance(symbols[i], str) and symbols[i] in outer
        for i, d in enumerate(dims)
        if ir.ShapedType.is_dynamic_size(d)
    )


def fuse_ops(module_op: ir.Operation) -> None:
    with rx.cached_symbols(module_op):  # one scan of the module for every call's callee
        _group_calls(module_op)


def _group_calls(module_op: ir.Operation) -> None:
    n_groups = 0
    for func_op in graph_functions(module_op):
        for block_op in dataflow_blocks(func_op):
            ops = [op.operation for op in block_op.regions[0].blocks[0].operations]
            # program order of each op: `ops.index` in the sort below made grouping quadratic
            # (a bidirectional GRU over 64 steps, ~5000 calls: 8.3 s)
            position = {op: i for i, op in enumerate(ops)}
            kinds: dict = {}
            group_of: dict = {}
            gathered: dict = {}  # callee -> its arguments read at computed indices
            members: dict[int, list] = {}
            for op in ops:
                callee = _callee(op)
                if callee is None or len(op.results) != 1:
                    continue
                kinds[op] = callee_kind(callee)
                group_of[op] = len(members)
                members[len(members)] = [op]
            # Consumers last to first: a value read by several ops of one chain (GPT-2's GELU
            # reads x three times) joins once all its readers have joined the group.
            for consumer in reversed(ops):
                if consumer not in kinds:
                    continue
                for value in consumer.operands:
                    producer = value.owner.operation if not isinstance(value.owner, ir.Block) else None
                    if producer not in kinds or group_of[producer] == group_of[consumer]:
                        continue
                    readers = {use.owner.operation for use in value.uses}
                    if any(group_of.get(r) != group_of[consumer] for r in readers):
                        continue  # a reader outside the group would need the intermediate too
                    if (kinds[producer], kinds[consumer]) not in _FUSABLE and not (
                        _transpose_into_few_rows(producer, consumer, value, kinds)
                    ):
                        continue
                    if kinds[consumer] != Pattern.OUT_EWISE_FUSABLE and _read_many_times(
                        consumer, value, gathered
                    ):
                        continue
                    if (
                        not _is_static(value.type)
                        and value.type != consumer.results[0].type
                        and not symbols_within(
                            value.type, result_symbols(producer), result_symbols(consumer)
                        )
                    ):
                        # A dynamic intermediate takes its sizes from the group's output: of
                        # the same type, or naming the same symbols (a chain passes them on).
                        # A head split over a symbolic sequence ([1, n, 768] -> [1, 12, n, 64])
                        # then stays in its matmul's epilogue.
                        continue
                    g_prod, g_cons = group_of[producer], group_of[consumer]
                    merged = members[g_prod] + members[g_cons]
                    if sum(kinds[m] in _ANCHORS for m in merged) > 1:
                        continue
                    # Only chains: the producer group must end at the producer.
                    if members[g_prod][-1] != producer:
                        continue
                    for m in members.pop(g_prod):
                        group_of[m] = g_cons
                    members[g_cons] = sorted(merged, key=position.__getitem__)
            for group in members.values():
                if len(group) < 2:
                    continue
                name = ir.StringAttr.get(f"fused_{n_groups}")
                n_groups += 1
                for op in group:
                    op.attributes[GROUP_ATTR] = name


@register_pass("relax-fuse-ops", "group call_tir chains (matmul->add->relu, elementwise runs) for fusion")
def relax_fuse_ops():
    return fuse_ops
