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

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from lowering.schedule.common import (
    dims_of,
    erase_dead_index_code,
    insert_slice,
    matching_generics,
    mixed_shape,
    strided_slice,
)
from lowering.schedule.gather import (
    _evaluate,
    _NoMatch,
    _output_space,
    index_grid,
    parallel_space,
)

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


class _Plan(NamedTuple):
    """A splittable generic: its `scf.if`, the loop the test is on, the maps, and `parts`:
    (generic, forms) -> [(offset, size, branch, shift)] along that loop, materialized before the
    generic (ints, or index Values at a symbolic split); `shift` is the loop index's offset in the
    part's body (its offset, or the unclamped split where the part may be empty)."""

    branch: ir.Operation
    loop: int
    maps: list
    parts: Callable


def _plan(op: ir.Operation, forms: dict | None = None) -> _Plan | None:
    """The plan of a splittable generic (static iteration space, else symbolic), else None."""
    space = parallel_space(op)
    if space is None:
        return _plan_symbolic(op, {} if forms is None else forms)
    if 0 in space[1]:
        return None
    maps, ranges = space
    body = op.regions[0].blocks[0]
    branch = _single_branch(body)
    if branch is None:
        return None
    grid = index_grid(ranges)
    try:
        cond = _condition(branch.operands[0], grid, body)
    except _NoMatch:
        return None
    found = _boxes(cond, ranges)
    if found is None or not _walks_plainly(maps, found[0]):
        return None
    k, boxes = found
    parts = [(lo, hi - lo, b, lo) for lo, hi, b in boxes]
    return _Plan(branch, k, maps, lambda _op, _forms: parts)


def _single_branch(body: ir.Block) -> ir.Operation | None:
    branches = [o.operation for o in body.operations if o.operation.name == "scf.if"]
    if len(branches) != 1 or len(branches[0].regions[1].blocks) == 0:
        return None
    return branches[0]


def _walks_plainly(maps: list, k: int) -> bool:
    """Inputs walk loop k as a plain axis, or not at all (so a part reads a slice of them)."""
    for m in maps[:-1]:
        for e in m.results:
            if not isinstance(e, ir.AffineDimExpr) and k in dims_of(e):
                return False
    return True


# Symbolic splits. A concat along a symbolic axis (a KV cache and the new step's keys:
# `if i < n then cache[i] else new[i - n]`) tests the loop index against an SSA size, so the
# boxes cannot be evaluated with numpy. The test and the reads are instead read as linear forms
# over the loop indices and the sizes defined outside the body ({("i", loop) | Value | 1:
# coefficient}); the split point is the form the index is compared with, materialized before the
# generic, and a part's reads simplify to plain indices once its shift cancels (`n + i - n`).
# Only split points that are provably non-negative (sums of tensor.dim and constants) qualify;
# the first part is clamped to the loop's extent, so a split past it leaves the second empty.

_CASTS = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui")

# arith.cmpi predicate of `i ? split` -> (the then-branch takes the low part, split + 1 or not):
# slt/ult i < s, sle/ule i <= s, sgt/ugt i > s, sge/uge i >= s
_SPLITS = dict.fromkeys((2, 6), (True, 0)) | dict.fromkeys((3, 7), (True, 1))
_SPLITS |= dict.fromkeys((4, 8), (False, 1)) | dict.fromkeys((5, 9), (False, 0))
_FLIPPED = {2: 4, 3: 5, 4: 2, 5: 3, 6: 8, 7: 9, 8: 6, 9: 7}


def _inside(operation: ir.Operation, op: ir.Operation) -> bool:
    parent = operation.parent
    while parent is not None:
        if parent == op:
            return True
        parent = parent.operation.parent
    return False


def _combine(a: dict, b: dict, scale: int = 1) -> dict:
    out = dict(a)
    for key, c in b.items():
        out[key] = out.get(key, 0) + scale * c
    return {key: c for key, c in out.items() if c}


def _form(value: ir.Value, op: ir.Operation, forms: dict) -> dict:
    """The linear form of an integer `value` in (or around) generic `op`, else _NoMatch: index
    arithmetic is read through wherever it is, anything else defined outside is an atom."""
    if value in forms:
        return forms[value]
    owner = value.owner
    if isinstance(owner, ir.Block):
        if owner == op.regions[0].blocks[0]:
            raise _NoMatch  # an element of an operand
        return {value: 1}
    o = owner.operation
    if o.name == "linalg.index":
        return {("i", ir.IntegerAttr(o.attributes["dim"]).value): 1}
    if o.name == "arith.constant" and isinstance(o.attributes["value"], ir.IntegerAttr):
        c = ir.IntegerAttr(o.attributes["value"]).value
        return {1: c} if c else {}
    if o.name in _CASTS:
        return _form(o.operands[0], op, forms)
    if o.name in ("arith.addi", "arith.subi"):
        a, b = (_form(v, op, forms) for v in o.operands)
        return _combine(a, b, 1 if o.name == "arith.addi" else -1)
    if o.name == "arith.muli":
        a, b = (_form(v, op, forms) for v in o.operands)
        for x, y in ((a, b), (b, a)):
            if set(y) <= {1}:
                return {key: c * y.get(1, 0) for key, c in x.items() if c * y.get(1, 0)}
    if _inside(o, op):
        raise _NoMatch
    return {value: 1}


def _non_negative(form: dict) -> bool:
    """Provably >= 0: a non-negative constant plus sizes (`tensor.dim`) with positive
    coefficients."""
    for key, c in form.items():
        if key == 1:
            ok = c >= 0
        else:
            ok = not isinstance(key, tuple) and c > 0 and not isinstance(key.owner, ir.Block)
            ok = ok and key.owner.operation.name == "tensor.dim"
        if not ok:
            return False
    return True


def _plan_symbolic(op: ir.Operation, forms: dict) -> _Plan | None:
    """The plan of a generic over a symbolic iteration space whose one branch tests a loop
    index (plus sizes) against sizes and constants (the section comment), else None."""
    space = _output_space(op)
    if space is None:
        return None
    maps, ranges, out_axis = space
    body = op.regions[0].blocks[0]
    branch = _single_branch(body)
    if branch is None:
        return None
    test = branch.operands[0].owner
    if isinstance(test, ir.Block) or test.operation.name != "arith.cmpi":
        return None
    test = test.operation
    predicate = ir.IntegerAttr(test.attributes["predicate"]).value
    try:
        diff = _combine(*(_form(v, op, forms) for v in test.operands), -1)
    except _NoMatch:
        return None
    loops = [key for key in diff if isinstance(key, tuple)]
    if len(loops) != 1 or predicate not in _SPLITS or diff[loops[0]] not in (1, -1):
        return None
    k = loops[0][1]
    if diff[loops[0]] == -1:  # -i + rest < 0  <=>  i > rest
        predicate, diff = _FLIPPED[predicate], {key: -c for key, c in diff.items()}
    then_first, plus = _SPLITS[predicate]
    cut = _combine({key: -c for key, c in diff.items() if key != loops[0]}, {1: plus})
    if not _non_negative(cut) or not _walks_plainly(maps, k):
        return None
    first = 0 if then_first else 1

    def parts(generic: ir.Operation, forms: dict) -> list:
        split = _materialize(cut, forms)
        if ranges[k] is not None:
            extent = ranges[k]
        else:
            init = generic.operands[len(generic.operands) - 1]
            extent = tensor.DimOp(init, _index(out_axis[k])).result
        head = _mixed(split, extent, arith.minsi, min)
        return [
            (0, head, first, 0),
            (head, _mixed(extent, head, arith.subi, int.__sub__), 1 - first, split),
        ]

    return _Plan(branch, k, maps, parts)


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _mixed(a, b, op, fold):
    """`fold(a, b)` for two ints, else `op` on index Values (ints become constants)."""
    if isinstance(a, int) and isinstance(b, int):
        return fold(a, b)
    return op(*(v if isinstance(v, ir.Value) else _index(v) for v in (a, b)))


def _materialize(form: dict, forms: dict):
    """A form without loop indices as an int (constants only) or an index Value (recorded in
    `forms`, so reads that subtract it again cancel)."""
    index = ir.IndexType.get()
    total = None
    for key, c in form.items():
        if key == 1:
            continue
        v = key if key.type == index else arith.index_cast(index, key)
        if c != 1:
            v = arith.muli(v, _index(c))
        total = v if total is None else arith.addi(total, v)
    if total is None:
        return form.get(1, 0)
    if form.get(1, 0):
        total = arith.addi(total, _index(form[1]))
    forms[total] = form
    return total


def _axis_of(m: ir.AffineMap, k: int) -> int | None:
    for axis, e in enumerate(m.results):
        if isinstance(e, ir.AffineDimExpr) and e.position == k:
            return axis
    return None


def _specialize(piece: ir.Operation, k: int, shift, branch: int, forms: dict) -> None:
    """In `piece`'s body: loop k's index shifted by `shift`, the branch inlined, dead index code
    dropped (else `linalg.index` would keep the part off the elementwise rule). A symbolic shift
    is cancelled out of the reads (`_plain_reads`)."""
    body = piece.regions[0].blocks[0]
    index = ir.IndexType.get()
    for op in [o.operation for o in body.operations]:
        if (
            op.name == "linalg.index"
            and ir.IntegerAttr(op.attributes["dim"]).value == k
            and (isinstance(shift, ir.Value) or shift)
        ):
            uses = [(u.owner, u.operand_number) for u in op.results[0].uses]
            if isinstance(shift, int):
                with ir.InsertionPoint(body.operations[0]), op.location:
                    shift = arith.constant(index, shift)
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
    if forms:
        _plain_reads(piece, forms)
    erase_dead_index_code(body)  # the condition's arithmetic and unused indices


def _plain_reads(piece: ir.Operation, forms: dict) -> None:
    """Each `tensor.extract` index whose linear form is one loop's index reads that index."""
    body = piece.regions[0].blocks[0]
    indices = {}
    for o in body.operations:
        if o.operation.name == "linalg.index":
            indices.setdefault(ir.IntegerAttr(o.attributes["dim"]).value, o.operation.results[0])
    for o in [o.operation for o in body.operations if o.operation.name == "tensor.extract"]:
        for n in range(1, len(o.operands)):
            try:
                form = _form(o.operands[n], piece, forms)
            except _NoMatch:
                continue
            if len(form) != 1 or not isinstance(next(iter(form)), tuple) or 1 not in form.values():
                continue
            d = next(iter(form))[1]
            if d not in indices:
                with ir.InsertionPoint(body.operations[0]), o.location:
                    indices[d] = linalg.IndexOp(d).result
            o.operands[n] = indices[d]


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


def _split(op: ir.Operation, plan: _Plan, acc: ir.Value, origin: list) -> ir.Value:
    """Insert the parts of `op` (whose output box in `acc` starts at `origin`) into `acc`; the
    new `acc`. A work list, not recursion: the depth is the number of concat inputs."""
    work, split, forms = [(op, plan, origin)], [], {}
    at = ir.InsertionPoint.current  # every part goes before the original op, after its slices
    while work:
        op, plan, origin = work.pop()
        n_in = len(op.operands) - 1
        k = plan.loop
        out_axis = _axis_of(plan.maps[-1], k)
        init = op.operands[n_in]
        shape = mixed_shape(init)  # the box's sizes but along the split loop's axis
        element = ir.RankedTensorType(init.type).element_type
        reads_out = bool(list(op.regions[0].blocks[0].arguments[n_in].uses))
        rank = len(shape)
        for offset, size, branch, shift in plan.parts(op, forms):
            ins = {}
            for i in range(n_in):
                axis = _axis_of(plan.maps[i], k)
                if axis is not None:
                    ins[i] = strided_slice(op.operands[i], {axis: (offset, size, 1)})
            offsets = list(origin)
            offsets[out_axis] = _mixed(offsets[out_axis], offset, arith.addi, int.__add__)
            sizes = list(shape)
            sizes[out_axis] = size
            if reads_out:
                box = strided_slice(acc, {a: (offsets[a], sizes[a], 1) for a in range(rank)})
            else:  # a new tensor, so empty-tensor elimination writes the part in its place
                box = tensor.EmptyOp(sizes, element).result
            piece = op.clone(at)
            for i, v in ins.items():
                piece.operands[i] = v
            piece.operands[n_in] = box
            piece.results[0].set_type(box.type)
            _specialize(piece, k, shift, branch, forms)
            inner = _plan(piece, forms)
            if inner is not None:  # the next input's branch: split it in turn
                work.append((piece, inner, offsets))
                split.append(piece)
                continue
            acc = insert_slice(piece.results[0], acc, offsets)
    for piece in reversed(split):  # placeholders of the parts that were split again
        init = piece.operands[len(piece.operands) - 1].owner
        piece.erase()
        if not list(init.results[0].uses):
            init.erase()
    return acc
