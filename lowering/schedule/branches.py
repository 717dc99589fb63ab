"""Split generics whose body branches on a loop index into one generic per branch (concats).

TE writes `concat` (and the rotate-half of rotary embeddings: `cat(-x2, x1)`) as a generic
whose body tests the output index along the concat axis and reads one input or the other with
`tensor.extract` (`if d < 32 then x2[d] else x1[d - 32]`). No schedule takes a body with a branch
and scalar gathers: it ran as naive loops, on one thread, fused after a matmul. When the test
splits the iteration space in two boxes along one loop (true on a prefix or a suffix of it),
each box is its own generic with the taken branch inlined, written into its slice of the output:
the reads are then affine in the box's loops, and `gather.raise_gathers` turns them into views,
so each part is an ordinary elementwise op.

The condition is evaluated with numpy over the whole (static) iteration space, as the gathers'
index expressions are, so any index arithmetic qualifies, not a fixed pattern.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, tensor

from lowering.schedule.common import (
    dims_of,
    erase_dead_index_code,
    matching_generics,
    strided_slice,
)
from lowering.schedule.gather import _evaluate, _NoMatch, index_grid, parallel_space

# arith.cmpi predicates (arith::CmpIPredicate) on evaluated index values
_COMPARE = {
    0: np.equal,
    1: np.not_equal,
    2: np.less,
    3: np.less_equal,
    4: np.greater,
    5: np.greater_equal,
    6: np.less,
    7: np.less_equal,
    8: np.greater,
    9: np.greater_equal,
}


def _condition(value: ir.Value, grid: list[np.ndarray], body: ir.Block) -> np.ndarray:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.cmpi":
        raise _NoMatch
    op = owner.operation
    predicate = ir.IntegerAttr(op.attributes["predicate"]).value
    memo: dict = {}
    a = _evaluate(op.operands[0], grid, body, memo)
    b = _evaluate(op.operands[1], grid, body, memo)
    if predicate >= 6 and (np.any(np.asarray(a) < 0) or np.any(np.asarray(b) < 0)):
        raise _NoMatch  # unsigned comparison of a negative index
    return _COMPARE[predicate](a, b)


def _boxes(cond: np.ndarray, ranges: list[int]) -> tuple[int, list[tuple[int, int, int]]] | None:
    """(loop, [(lo, hi, branch)]) when `cond` depends on one loop only and is constant on a
    prefix and the rest of it (branch 0: then, 1: else), else None."""
    cond = np.broadcast_to(cond, ranges)
    for k, n in enumerate(ranges):
        line = cond[tuple(slice(None) if i == k else 0 for i in range(len(ranges)))]
        shape = [n if i == k else 1 for i in range(len(ranges))]
        if not np.array_equal(cond, np.broadcast_to(line.reshape(shape), ranges)):
            continue
        flips = int(np.count_nonzero(line[1:] != line[:-1]))
        if flips > 1:
            return None
        cut = n if flips == 0 else int(np.argmax(line[1:] != line[:-1])) + 1
        parts = [(0, cut, 0 if line[0] else 1)]
        if cut < n:
            parts.append((cut, n, 0 if line[cut] else 1))
        return k, parts
    return None


def _plan(op: ir.Operation):
    """(scf.if op, loop, parts, ranges, maps) for a splittable generic, else None."""
    space = parallel_space(op)
    if space is None or 0 in space[1]:
        return None
    maps, ranges = space
    body = op.regions[0].blocks[0]
    branches = [o.operation for o in body.operations if o.operation.name == "scf.if"]
    if len(branches) != 1 or len(branches[0].regions[1].blocks) == 0:
        return None
    grid = index_grid(ranges)
    try:
        cond = _condition(branches[0].operands[0], grid, body)
    except _NoMatch:
        return None
    found = _boxes(cond, ranges)
    if found is None:
        return None
    k, parts = found
    for m in maps[:-1]:  # inputs walk the loop as a plain axis, or not at all
        for e in m.results:
            if not isinstance(e, ir.AffineDimExpr) and k in dims_of(e):
                return None
    return branches[0], k, parts, ranges, maps


def _axis_of(m: ir.AffineMap, k: int) -> int | None:
    for axis, e in enumerate(m.results):
        if isinstance(e, ir.AffineDimExpr) and e.position == k:
            return axis
    return None


def _specialize(piece: ir.Operation, k: int, lo: int, branch: int) -> None:
    """In `piece`'s body: loop k's index shifted by `lo`, the branch inlined, dead index code
    dropped (else `linalg.index` would keep the part off the elementwise rule)."""
    body = piece.regions[0].blocks[0]
    index = ir.IndexType.get()
    for op in [o.operation for o in body.operations]:
        if op.name == "linalg.index" and ir.IntegerAttr(op.attributes["dim"]).value == k and lo:
            uses = [(u.owner, u.operand_number) for u in op.results[0].uses]
            with ir.InsertionPoint(body.operations[0]), op.location:
                shift = arith.constant(index, lo)
            with ir.InsertionPoint.after(op), op.location:
                shifted = arith.addi(op.results[0], shift)
            for owner, n in uses:
                owner.operands[n] = shifted
    branch_op = next(o.operation for o in body.operations if o.operation.name == "scf.if")
    taken = branch_op.regions[branch].blocks[0]
    inner = [o.operation for o in taken.operations]
    yielded = list(inner[-1].operands)
    for op in inner[:-1]:
        op.detach_from_parent()
        ir.InsertionPoint(branch_op).insert(op)
    for result, value in zip(branch_op.results, yielded):
        result.replace_all_uses_with(value)
    branch_op.erase()
    erase_dead_index_code(body)  # the condition's arithmetic and unused indices


def split_branches(func_op: ir.Operation) -> int:
    """Split every qualifying generic of `func_op` (module docstring); returns how many.

    A concat of n inputs nests n - 1 branches: each part whose body still branches is split
    again at once, and every final part writes its box of the original output directly (one
    level of slices, whatever n). Parts of parts nested in slices of slices made the kernel's
    bufferization quadratic in n (DenseNet's 25-input concats: 0.2 s each)."""
    found = matching_generics(func_op, _plan)
    for op, plan in found:
        acc = op.operands[len(op.operands) - 1]
        rank = ir.RankedTensorType(acc.type).rank
        with ir.InsertionPoint(op), op.location:
            acc = _split(op, plan, acc, [0] * rank)
        op.results[0].replace_all_uses_with(acc)
        op.erase()
    return len(found)


def _split(op: ir.Operation, plan, acc: ir.Value, origin: list[int]) -> ir.Value:
    """Insert the parts of `op` (whose output box in `acc` starts at `origin`) into `acc`; the
    new `acc`. A work list, not recursion: the depth is the number of concat inputs."""
    work, split = [(op, plan, origin)], []
    at = ir.InsertionPoint.current  # every part goes before the original op, after its slices
    while work:
        op, (_, k, parts, _, maps), origin = work.pop()
        n_in = len(op.operands) - 1
        out_axis = _axis_of(maps[-1], k)
        shape = list(ir.RankedTensorType(op.results[0].type).shape)
        for lo, hi, branch in parts:
            ins = {}
            for i in range(n_in):
                axis = _axis_of(maps[i], k)
                if axis is not None:
                    ins[i] = strided_slice(op.operands[i], {axis: (lo, hi - lo, 1)})
            offsets, sizes = list(origin), list(shape)
            offsets[out_axis] += lo
            sizes[out_axis] = hi - lo
            init = strided_slice(acc, {a: (offsets[a], sizes[a], 1) for a in range(len(sizes))})
            piece = op.clone(at)
            for i, v in ins.items():
                piece.operands[i] = v
            piece.operands[n_in] = init
            piece.results[0].set_type(init.type)
            _specialize(piece, k, lo, branch)
            inner = _plan(piece)
            if inner is not None:  # the next input's branch: split it in turn
                work.append((piece, inner, offsets))
                split.append(piece)
                continue
            rank = len(sizes)
            acc = tensor.InsertSliceOp(
                piece.results[0], acc, [], [], [], offsets, sizes, [1] * rank
            ).result
    for piece in reversed(split):  # placeholders of the parts that were split again
        init = piece.operands[len(piece.operands) - 1].owner
        piece.erase()
        if not list(init.results[0].uses):
            init.erase()
    return acc
