"""Masked accumulators out of their reduction loops.

`transform.loop.hoist_loop_invariant_subsets` hoists a loop's `transfer_read` / `transfer_write`
pair on a loop-carried tensor only when the transfers are unmasked. A register tile wider than
what is left of its row (a 16-lane tile of an 8-wide row, the partial column strip of a symbolic
N) is vectorized with masks, and its sums then went through memory on every step of K: a masked
store, then a masked load of the same place, which store-to-load forwarding does not serve
(12 heads x 8 x 8 x 64 scores on Zen 4: 57 us, 18 with the sums in registers). Here such a pair
becomes a vector carried by the loop: read once before it, written once after it.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf


def transfer_parts(op: ir.Operation) -> tuple[list[ir.Value], ir.Value | None]:
    """(start indices, mask or None) of a vector.transfer_read (source, indices..., padding,
    [mask]) or transfer_write (vector, dest, indices..., [mask])."""
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    first = 1 if op.name.endswith("read") else 2
    indices = operands[first : first + segments[first]]
    return indices, (operands[-1] if segments[-1] else None)


def defined_inside(value: ir.Value, loop: ir.Operation) -> bool:
    """Whether `value` is defined in `loop`'s body (its block arguments included)."""
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    op = op.operation if op is not None else None
    while op is not None:
        if op == loop:
            return True
        op = op.parent.operation if op.parent is not None else None
    return False


def _poison(value: ir.Value) -> bool:
    owner = value.owner
    return not isinstance(owner, ir.Block) and owner.operation.name == "ub.poison"


def _same(a: ir.Operation, b: ir.Operation, name: str) -> bool:
    """Whether `a` and `b` carry equal attributes `name` (or neither has one)."""

    def text(op: ir.Operation) -> str | None:
        return str(op.attributes[name]) if name in op.attributes else None

    return text(a) == text(b)


def _candidate(loop: ir.Operation, position: int) -> tuple[ir.Operation, ir.Operation] | None:
    """The masked (read, write) pair that is all `loop` does with iter_arg `position`."""
    body = loop.regions[0].blocks[0]
    arg = body.arguments[1 + position]
    uses = [u.owner for u in arg.uses]
    if len(uses) != 2:
        return None
    reads = [u for u in uses if u.name == "vector.transfer_read"]
    writes = [u for u in uses if u.name == "vector.transfer_write"]
    if len(reads) != 1 or len(writes) != 1:
        return None
    read, write = reads[0].operation, writes[0].operation
    if read.operands[0] != arg or write.operands[1] != arg:
        return None
    if read.parent.operation != loop or write.parent.operation != loop:  # directly in the body
        return None
    result_uses = list(write.results[0].uses)
    terminator = body.operations[len(body.operations) - 1].operation
    if len(result_uses) != 1 or result_uses[0].owner != terminator:
        return None
    if result_uses[0].operand_number != position:
        return None
    r_idx, r_mask = transfer_parts(read)
    w_idx, w_mask = transfer_parts(write)
    if r_mask is None or r_mask != w_mask or len(r_idx) != len(w_idx):
        return None  # unmasked pairs are upstream's (hoist_loop_invariant_subsets)
    if any(a != b for a, b in zip(r_idx, w_idx)):
        return None
    if any(defined_inside(v, loop) for v in [*r_idx, r_mask]):
        return None
    if read.results[0].type != write.operands[0].type or not _poison(read.operands[1 + len(r_idx)]):
        return None  # a poison padding: the lanes off the mask may then hold anything
    if not all(_same(read, write, a) for a in ("permutation_map", "in_bounds")):
        return None
    return read, write


def _hoist(loop: ir.Operation, position: int, read: ir.Operation, write: ir.Operation):
    """Rebuild `loop` with a vector in place of its tensor iter_arg `position`."""
    old = loop.opview
    inits = list(old.initArgs)
    with ir.InsertionPoint(loop), loop.location:
        first = read.clone()
        first.operands[0] = inits[position]
        inits[position] = first.results[0]
        new = scf.ForOp(old.lowerBound, old.upperBound, old.step, inits)
    body, new_body = loop.regions[0].blocks[0], new.body
    for a, b in zip(body.arguments, new_body.arguments):
        if a != body.arguments[1 + position]:
            a.replace_all_uses_with(b)
    read.results[0].replace_all_uses_with(new_body.arguments[1 + position])
    write.results[0].replace_all_uses_with(write.operands[0])
    read.erase()
    append = ir.InsertionPoint(new_body)
    for op in list(body.operations):  # the old yield too, now yielding the vector
        if op.operation != write:
            op.operation.detach_from_parent()
            append.insert(op.operation)
    results = list(new.results)
    with ir.InsertionPoint.after(new.operation), loop.location:
        last = write.clone()
        last.operands[0] = results[position]
        last.operands[1] = list(old.initArgs)[position]
    write.erase()
    results[position] = last.results[0]
    for a, b in zip(loop.results, results):
        a.replace_all_uses_with(b)
    loop.erase()


def hoist_masked_accumulators(func_op: ir.Operation) -> int:
    """Carry each masked accumulator of an scf.for (its loop-carried tile read and written
    under one loop-invariant mask, at loop-invariant indices) in registers; returns how many."""
    loops = []

    def visit(op):
        if op.operation.name == "scf.for":
            loops.append(op.operation)
        return ir.WalkResult.ADVANCE

    done = 0
    while True:  # each hoist replaces its loop: look again
        loops.clear()
        func_op.walk(visit)
        found = next(
            (
                (loop, i, pair)
                for loop in loops
                for i in range(len(loop.results))
                if (pair := _candidate(loop, i)) is not None
            ),
            None,
        )
        if found is None:
            return done
        loop, position, (read, write) = found
        _hoist(loop, position, read, write)
        done += 1
