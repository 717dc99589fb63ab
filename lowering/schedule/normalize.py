"""Put PrimFuncs in the form the schedule rules recognize, before they are classified.

TE's code is correct but irregular: guarded pad reads, reshapes as computed-index gathers,
strided pooling windows, size-1 axes broadcast by constant-0 indices. `normalize_function` rewrites
each into regular linalg on views (all semantics-preserving, each a no-op where it does not apply):

1. `pad.raise_pads`: guarded reads -> fill + linalg.copy into the interior;
   `branches.split_branches`: a branch on a loop index (concat) -> one generic per branch;
2. `gather.raise_gathers`: affine gathers -> collapse/expand/slice views + permutation maps;
   `gather.raise_window_reads`: a reduction's affine gather (a window) -> an operand and its map;
   `gather.split_group_loops`: a loop read as `f floordiv k` (channel groups) -> two loops;
3. `phases.split_strided_convs`: strided convolutions -> unit-stride convs, one per phase;
   `gather.raise_strided_inputs`: other non-overlapping windows -> [.., Y, KY, X, KX] views;
4. `drop_unit_dims`: unit loops and constant-0 indices removed (e.g. [1, 128, 256] x [256, 1024]
   becomes a 2-D matmul), then in-place epilogues restored (`fuse_tir.make_inplace`);
5. `merge_loops`: two reduction loops, or two N loops of a contraction, that every operand
   reads as one contiguous run of axes become one loop over collapsed views (a mean over H and
   W of [N, C/16, H, W, 16]; an NCHW 1x1 convolution's H and W);
6. `conv_epilogues_out_of_place`: an epilogue updating a convolution's result in place reads it
   as an input instead, the form the conv rule computes tile by tile.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg, tensor

from lowering.schedule.branches import split_branches
from lowering.schedule.common import (
    Script,
    apply_script,
    classify,
    dim_of,
    is_mul_add,
    is_permuting_copy,
    linalg_ops,
    matching_generics,
    reassociation,
    rebuild_generic,
    slice_sizes,
)
from lowering.schedule.gather import (
    raise_gathers,
    raise_strided_inputs,
    raise_window_reads,
    split_group_loops,
)
from lowering.schedule.pad import raise_pads
from lowering.schedule.phases import split_strided_convs


def normalize_function(func_op: ir.Operation, row_tile: int = 1) -> None:
    """Steps 1-5 of the module docstring on `func_op` (which must sit in a module); `row_tile`:
    the rows of the target's matmul register tile (`merge_loops`)."""
    _index_unit_axes_by_loops(func_op)
    raise_pads(func_op)
    split_branches(func_op)
    raise_gathers(func_op)
    fold_transposes(func_op)
    raise_window_reads(func_op)
    split_group_loops(func_op)
    split_strided_convs(func_op)
    raise_strided_inputs(func_op, keep=_unit_window_conv)  # a 1x1 conv's window stays
    drop_unit_dims(func_op)
    merge_loops(func_op, row_tile)
    conv_epilogues_out_of_place(func_op)


def fold_transposes(func_op: ir.Operation) -> int:
    """A transpose (a generic that only permutes its input's axes) read once, as an input of a
    contraction, is folded into that operand's indexing map: the contraction reads the
    transpose's input in place (`relax-fuse-ops` puts a decode step's K^T with its few-row
    q @ K^T, TRANSPOSE_INTO_ROWS). Returns how many."""
    found = matching_generics(func_op, _foldable_transpose)
    for op, (consumer, operand) in found:
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        cmaps = list(ir.ArrayAttr(consumer.attributes["indexing_maps"]))
        read = ir.AffineMapAttr(cmaps[operand]).value
        # the transpose writes T[x] = S[P(x)]: the consumer's T[e(l)] is S[P(e(l))]
        exprs = [read.results[ir.AffineDimExpr(e).position] for e in maps[0].results]
        cmaps[operand] = ir.AffineMapAttr.get(ir.AffineMap.get(read.n_dims, 0, exprs))
        consumer.attributes["indexing_maps"] = ir.ArrayAttr.get(cmaps)
        consumer.operands[operand] = op.operands[0]
        init = op.operands[1]
        op.erase()
        if not isinstance(init.owner, ir.Block) and not list(init.uses):
            init.owner.operation.erase()
    return len(found)


def _foldable_transpose(op: ir.Operation):
    """(consumer, operand index) for a transpose generic whose one use is a contraction's
    input, else None."""
    if not is_permuting_copy(op):
        return None
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        return None
    consumer, operand = uses[0].owner.operation, uses[0].operand_number
    if consumer.name != "linalg.generic":
        return None
    n_in = len(consumer.operands) - len(consumer.results)
    iterators = [str(a) for a in ir.ArrayAttr(consumer.attributes["iterator_types"])]
    if operand >= n_in or n_in < 2 or not any("reduction" in t for t in iterators):
        return None
    return consumer, operand


# TE broadcasts size-1 axes as constant-0 indices (`(0, d1, d3)`) and keeps unit loops: dropping
# them first turns e.g. a [1, 128, 256] x [256, 1024] linear into a 2-D matmul the rules know.
# Rank-reducing slices (not reshapes) keep the out-argument chain visible to empty-tensor
# elimination. The patterns, not the `linalg-fold-unit-extent-dims` pass: the pass also moves a
# read init into the inputs, undoing the in-place epilogues of `fuse_tir.make_inplace`.
def drop_unit_dims(func_op: ir.Operation) -> None:
    """Remove unit-extent loops and operand axes from the linalg ops of `func_op` (parented).

    Not in functions with a one-row contraction (GEMV): without its unit M loop it would be a
    vector-matrix product that no matmul route (nor `pack_greedily`) takes."""
    if any(_one_row_contraction(op) or _unit_window_conv(op) for op in linalg_ops(func_op)):
        _drop_broadcast_axes(func_op)  # what the other ops still need: their inputs' unit axes
        return
    s = Script()
    s.patterns(
        "linalg.fold_unit_extent_dims_via_slices",
        "linalg.erase_unnecessary_inputs",  # e.g. the window-shape operands of TE pooling
        "tensor.fold_tensor_empty",
        "canonicalization",
    )
    apply_script(func_op, s, quiet=True)
    if _swap_slices_of_fills(func_op):
        _drop_overwritten_fills(func_op)
        s = Script()
        s.patterns("canonicalization")
        apply_script(func_op, s, quiet=True)
    # Epilogues that only now read their producer with the output's map update it in place.
    from lowering.fuse_tir import make_inplace

    make_inplace(func_op)


def _index_unit_axes_by_loops(func_op: ir.Operation) -> None:
    """A constant-0 index into a unit axis that the output indexes by a unit loop is that loop:
    TE's epilogue of a [1, C/16, H, W, 16] convolution reads the conv's result as `(0, d1, d2,
    d3, d4)`, the broadcast of a size-1 axis. Read with the output's own map, the result is a
    plain producer of the epilogue (no rank-reducing view between them), which the conv rule
    then computes tile by tile inside the epilogue's loops."""
    for op in linalg_ops(func_op):
        if op.name != "linalg.generic" or len(op.results) != 1:
            continue
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        out = maps[-1].results
        ranges = classify(op).ranges
        changed = False
        for i in range(len(op.operands) - 1):
            t = op.operands[i].type
            if not isinstance(t, ir.RankedTensorType) or ir.RankedTensorType(t).rank != len(out):
                continue
            shape = ir.RankedTensorType(t).shape
            results = list(maps[i].results)
            for axis, e in enumerate(results):
                loop = out[axis]
                if (
                    isinstance(e, ir.AffineConstantExpr)
                    and e.value == 0
                    and shape[axis] == 1
                    and isinstance(loop, ir.AffineDimExpr)
                    and ranges[loop.position] == 1
                ):
                    results[axis] = loop
                    changed = True
            maps[i] = ir.AffineMap.get(maps[i].n_dims, 0, results)
        if changed:
            op.attributes["indexing_maps"] = ir.ArrayAttr.get(
                [ir.AffineMapAttr.get(m) for m in maps]
            )


def _drop_broadcast_axes(func_op: ir.Operation) -> None:
    """Inputs of elementwise generics that index a unit axis by the constant 0 (TE's broadcast of
    a [1, C, 1, 1, c] bias) read a rank-reduced slice instead, so their maps are projected
    permutations the elementwise rule takes. The loops stay as they are."""
    for op in linalg_ops(func_op):
        if op.name != "linalg.generic":
            continue
        iterators = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
        if any("reduction" in t for t in iterators):
            continue
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        changed = False
        for i in range(len(op.operands) - len(op.results)):
            t = op.operands[i].type
            if (
                not isinstance(t, ir.RankedTensorType)
                or not ir.RankedTensorType(t).has_static_shape
            ):
                continue
            shape = ir.RankedTensorType(t).shape
            keep = [
                axis
                for axis, e in enumerate(maps[i].results)
                if not (isinstance(e, ir.AffineConstantExpr) and e.value == 0 and shape[axis] == 1)
            ]
            if len(keep) == len(shape):
                continue
            elem = ir.RankedTensorType(t).element_type
            with ir.InsertionPoint(op), op.location:
                reduced = ir.RankedTensorType.get([shape[a] for a in keep], elem)
                view = tensor.ExtractSliceOp(
                    reduced,
                    op.operands[i],
                    [],
                    [],
                    [],
                    [0] * len(shape),
                    list(shape),
                    [1] * len(shape),
                ).result
            op.operands[i] = view
            maps[i] = ir.AffineMap.get(maps[i].n_dims, 0, [maps[i].results[a] for a in keep])
            changed = True
        if changed:
            op.attributes["indexing_maps"] = ir.ArrayAttr.get(
                [ir.AffineMapAttr.get(m) for m in maps]
            )


def conv_epilogues_out_of_place(func_op: ir.Operation) -> None:
    """`outs(%conv)` -> `ins(%conv) outs(tensor.empty)` for an elementwise op that updates the
    only use of a convolution's result in place (`fuse_tir.make_inplace` does this where the
    epilogue reads the result with the output's own map: a static batch > 1). The conv rule fuses
    an epilogue that reads the conv as an input, computing each register tile through it, so the
    conv's result never exists whole; updated in place, the two ran as separate passes over the
    output (ResNet-18 batch 8: every block's conv, then its bias and ReLU, 6% slower)."""
    for op in linalg_ops(func_op):
        if op.name != "linalg.generic" or len(op.results) != 1:
            continue
        iterators = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
        n_in = len(op.operands) - 1
        init = op.operands[n_in]
        out_type = op.results[0].type
        if any("reduction" in t for t in iterators) or isinstance(init.owner, ir.Block):
            continue
        producer = init.owner.operation
        if len(list(init.uses)) != 1 or not ir.RankedTensorType(out_type).has_static_shape:
            continue
        if producer.name != "linalg.generic" or classify(producer).pattern != "conv":
            continue
        maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
        types = [a.type for a in op.regions[0].blocks[0].arguments]
        with ir.InsertionPoint(op), op.location:
            shape = ir.RankedTensorType(out_type)
            empty = tensor.EmptyOp(list(shape.shape), shape.element_type).result
        new = rebuild_generic(
            op, out_type, list(op.operands)[:n_in] + [init], [empty], maps + [maps[-1]],
            types + [types[-1]], list(range(n_in + 1)),
        )  # fmt: skip
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()


def _unit_window_conv(op: ir.Operation) -> bool:
    """A convolution with a 1x1 window (a pointwise conv in a channel-blocked layout): without
    its unit window loops it would be a contraction over two reduction axes (channel blocks and
    the channels in a block) that no matmul route takes, while the conv rule handles it."""
    if op.name != "linalg.generic":
        return False
    info = classify(op)
    if info.pattern != "conv":
        return False
    image = next(i for i, dims in enumerate(info.operand_dims[:2]) if dims is None)
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    window = [
        e.rhs.position if info.iterators[e.rhs.position] == "reduction" else e.lhs.position
        for e in maps[image].results
        if isinstance(e, ir.AffineAddExpr)
    ]
    return bool(window) and all(info.ranges[d] == 1 for d in window)


def _one_row_contraction(op: ir.Operation) -> bool:
    """A mul-add contraction whose rows (loops of A and C, not of B) all have extent 1."""
    if op.name != "linalg.generic" or len(op.operands) != 3 or not is_mul_add(op):
        return False
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    dims = [{e.position for e in m.results if isinstance(e, ir.AffineDimExpr)} for m in maps]
    out = maps[2].results
    out_shape = ir.RankedTensorType(op.operands[2].type).shape
    rows = [
        axis
        for axis, e in enumerate(out)
        if isinstance(e, ir.AffineDimExpr) and e.position in dims[0] and e.position not in dims[1]
    ]
    return bool(rows) and all(out_shape[axis] == 1 for axis in rows)


def _swap_slices_of_fills(func_op: ir.Operation) -> bool:
    """`extract_slice(fill(x, v))` -> `fill(empty, v)` where only reductions accumulate into the
    slice: the zero accumulator of a rank-reduced matmul stays a fill the packing folds (else a
    full-size fill, then a packing transpose). Slices written in place (a pad's interior) stay."""
    slices = []

    def accumulates(use: ir.OpOperand) -> bool:  # the init of a reduction reads the fill
        owner = use.owner.operation
        if owner.name != "linalg.generic" or use.operand_number < len(owner.operands) - 1:
            return False
        return any("reduction" in str(t) for t in ir.ArrayAttr(owner.attributes["iterator_types"]))

    def visit(op):
        op = op.operation
        if op.name == "tensor.extract_slice":
            src = op.operands[0].owner
            uses = list(op.results[0].uses)
            if (
                not isinstance(src, ir.Block)
                and src.operation.name == "linalg.fill"
                and uses
                and all(accumulates(u) for u in uses)
            ):
                slices.append((op, src.operation))
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    for op, fill in slices:
        t = ir.RankedTensorType(op.results[0].type)
        sizes = _slice_sizes(op, t)
        if sizes is None:
            continue
        with ir.InsertionPoint(op), op.location:
            empty = tensor.EmptyOp(sizes, t.element_type).result
            new = linalg.fill(fill.operands[0], outs=[empty])
        op.results[0].replace_all_uses_with(new)
        op.erase()
    return bool(slices)


def _slice_sizes(op: ir.Operation, t: ir.RankedTensorType) -> list | None:
    """The sizes of an extract_slice's result `t` as `tensor.empty` takes them: static ints, and
    for each dynamic axis the slice's size operand (in order: a rank-reducing slice drops only
    static unit axes). A symbolic sequence's matmul gets its own zero accumulator this way, which
    the packing folds; a slice of the full fill left a serial fill of the whole output and a copy
    of the packed C at every call (a 256 x 768 x 3072 linear on 2 threads: 1.2x its static build).
    None when the operands do not match the dynamic axes."""
    if t.has_static_shape:
        return list(t.shape)
    dynamic = slice_sizes(op)
    axes = [i for i, d in enumerate(t.shape) if ir.ShapedType.is_dynamic_size(d)]
    if len(axes) != len(dynamic):
        return None
    values = iter(dynamic)
    return [next(values) if ir.ShapedType.is_dynamic_size(d) else d for d in t.shape]


def _is_dim(size: ir.Value, axis: int, of: tuple) -> bool:
    """Is `size` `tensor.dim` of one of the tensors `of` along `axis` (a constant index)?"""
    found = dim_of(size)
    return found is not None and found[1] == axis and any(found[0] == t for t in of)


def _drop_overwritten_fills(func_op: ir.Operation) -> None:
    """`insert_slice(r, fill(x, v))` -> `insert_slice(r, x)` where the slice covers all of x:
    once `_swap_slices_of_fills` has given a rank-reduced matmul its own zero accumulator, the
    full-size fill of the out-argument is only the destination its result is inserted into, and
    would zero the whole output again (a serial memset before a parallel kernel)."""
    fills = []

    def covers(use: ir.OpOperand, fill: ir.Operation) -> bool:
        owner = use.owner.operation
        if owner.name != "tensor.insert_slice" or use.operand_number != 1:
            return False
        dest = ir.RankedTensorType(owner.operands[1].type)
        offsets = list(ir.DenseI64ArrayAttr(owner.attributes["static_offsets"]))
        strides = list(ir.DenseI64ArrayAttr(owner.attributes["static_strides"]))
        sizes = list(ir.DenseI64ArrayAttr(owner.attributes["static_sizes"]))
        dynamic = iter(slice_sizes(owner))
        whole = [
            _is_dim(next(dynamic), axis, (fill.results[0], fill.operands[1]))
            if ir.ShapedType.is_dynamic_size(size)
            else size == extent
            for axis, (size, extent) in enumerate(zip(sizes, dest.shape))
        ]
        return all(o == 0 for o in offsets) and all(t == 1 for t in strides) and all(whole)

    def visit(op):
        op = op.operation
        if op.name == "linalg.fill":
            uses = list(op.results[0].uses)
            if uses and all(covers(u, op) for u in uses):
                fills.append(op)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    for fill in fills:
        fill.results[0].replace_all_uses_with(fill.operands[1])
        fill.erase()


def merge_loops(func_op: ir.Operation, row_tile: int = 1) -> int:
    """Step 5 of the module docstring; returns how many loops were merged away.

    The reduction rule takes one reduction loop (or a short window): the spatial mean of a
    channel-blocked tensor (an SE block's squeeze, a classifier's pool) reduces over H and W
    with the block's channels innermost, and fell back to scalar loops (1 x 6 x 56 x 56 x 16:
    156 us); over [N, C/16, H * W, 16] it is one reduction along rows of vectors. Likewise the
    matmul rule takes one N loop: an NCHW 1x1 convolution's output columns are H and W, and one
    with 85 filters (a detection head) failed to vectorize and ran as scalar loops (64 -> 85
    channels over 40 x 40: 2.6 ms); with H * W as one loop it is a plain matmul. Two M loops
    merge where the inner one's rows do not fill whole register tiles of `row_tile` rows."""
    merged = 0
    for op in linalg_ops(func_op):
        while op.name == "linalg.generic":
            pair = _mergeable_pair(op, row_tile)
            if pair is None:
                break
            op = _merge_loops(op, pair)
            merged += 1
    return merged


def _mergeable_pair(op: ir.Operation, row_tile: int = 1) -> int | None:
    """Loop d such that d and d + 1 are reductions, or N loops of a contraction (one reduction
    loop, a multiply-add; parallel loops its A does not read), or M loops of one (read by A,
    not by B) whose inner extent is no multiple of `row_tile`, that every operand reads as the
    consecutive axes (d, d + 1) of a static shape, or not at all; None when no such pair
    exists."""
    iterators = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if any(o.name == "linalg.index" for o in op.regions[0].blocks[0].operations):
        return None
    if len(op.results) != 1 or any(
        not isinstance(e, ir.AffineDimExpr) for m in maps for e in m.results
    ):
        return None  # windows (convolutions), constant indices: left as they are
    contraction = (
        sum("reduction" in t for t in iterators) == 1 and len(op.operands) == 3 and is_mul_add(op)
    )
    a_dims = [e.position for e in maps[0].results]
    b_dims = {e.position for e in maps[1].results} if contraction else set()
    for d in range(len(iterators) - 1):
        kinds = {iterators[d], iterators[d + 1]}
        if len(kinds) != 1:
            continue
        # Parallel loops: a contraction's N loops (not read by A), which the matmul rule takes
        # one of, and its M loops where the rule's row tiles do not fit the inner one: a
        # ConvNeXt linear over 14 x 14 tokens ran 8 + 6 rows per 14, the 6 one row at a time
        # (98 GFLOP/s against 248 over 196 rows). Where they fit, merged M loops ([8, 64] rows
        # of DistilBERT at batch 8 as 512) changed the tiling for the worse (3% slower).
        pair = {d, d + 1}
        if "parallel" in iterators[d] and (not contraction or pair & set(a_dims)):
            t = op.operands[0].type
            if (
                not contraction
                or not pair <= set(a_dims)
                or pair & b_dims
                or "reduction" not in iterators[a_dims[-1]]  # rows of A along K, not columns
                or not ir.RankedTensorType(t).has_static_shape
                or ir.RankedTensorType(t).shape[a_dims.index(d + 1)] % row_tile == 0
            ):
                continue
        ok = True
        for value, m in zip(op.operands, maps):
            dims = [e.position for e in m.results]
            uses = [i for i, p in enumerate(dims) if p in (d, d + 1)]
            if not uses:
                continue
            t = value.type
            if (
                len(uses) != 2
                or dims[uses[0]] != d
                or dims[uses[1]] != d + 1
                or uses[1] != uses[0] + 1
                or not isinstance(t, ir.RankedTensorType)
                or not ir.RankedTensorType(t).has_static_shape
            ):
                ok = False
                break
        if ok:
            return d
    return None


def _merge_loops(op: ir.Operation, d: int) -> ir.Operation:
    """`op` with loops d and d + 1 as one (operands reading them collapsed into one axis)."""
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    nloops = len(iterators)
    n_in = len(op.operands) - len(op.results)

    def renumber(e):  # loop d + 1 folds into d, later loops move down one
        p = e.position
        return ir.AffineDimExpr.get(p if p <= d else p - 1)

    operands, new_maps = [], []
    for value, m in zip(op.operands, maps):
        results = list(m.results)
        at = next((i for i, e in enumerate(results) if e.position == d), None)
        if at is not None:
            t = ir.RankedTensorType(value.type)
            shape = list(t.shape)
            groups = [[i] for i in range(at)] + [[at, at + 1]]
            groups += [[i] for i in range(at + 2, len(shape))]
            collapsed = shape[:at] + [shape[at] * shape[at + 1]] + shape[at + 2 :]
            with ir.InsertionPoint(op), op.location:
                value = tensor.CollapseShapeOp(
                    ir.RankedTensorType.get(collapsed, t.element_type), value, reassociation(groups)
                ).result
            results = results[: at + 1] + results[at + 2 :]
        operands.append(value)
        new_maps.append(ir.AffineMap.get(nloops - 1, 0, [renumber(e) for e in results]))
    types = [a.type for a in op.regions[0].blocks[0].arguments]
    new = rebuild_generic(
        op,
        operands[n_in].type,
        operands[:n_in],
        operands[n_in:],
        [ir.AffineMapAttr.get(m) for m in new_maps],
        types,
    )
    new.attributes["iterator_types"] = ir.ArrayAttr.get(iterators[: d + 1] + iterators[d + 2 :])
    result = new.results[0]
    if result.type != op.results[0].type:  # merged parallel loops: the output's shape back
        source = operands[n_in].owner  # the collapse of the output operand
        with ir.InsertionPoint(op), op.location:
            result = tensor.ExpandShapeOp(
                op.results[0].type,
                result,
                source.attributes["reassociation"],
                [],
                list(ir.RankedTensorType(op.results[0].type).shape),
            ).result
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return new
