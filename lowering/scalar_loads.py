"""`relax-scalar-operand-loads`: the broadcast operands of register tiles read as scalar loads.

A packed GEMM step multiplies one B row (a vector) by each of MR elements of an A column: the
contraction lowering reads the column as one `vector<MRxf32>` transfer and extracts every
element into an AXPY (`vector.outerproduct` of a vector and a scalar). LLVM folds an extract of
a loaded vector into a broadcast from memory (`vbroadcastss mem`) only when the vector type is
legal: an MR = 6 column on AVX2 (the 6 x 16 tile) is split into a v4 and a v2 load, and the v2
half came out as a 64-bit load, a shuffle and two register broadcasts. That costs a register the
tile does not have (12 accumulators + 2 B vectors + 1 broadcast = 15 of 16): with a K block of
768 LLVM spilled an accumulator in the inner loop, and BERT's 128x768x3072 GEMM ran 1.5x slower
on AVX2. Reading each element with its own scalar load gives every row the broadcast-from-memory
form, on every target.

Only transfers whose every use is a static extract feeding an AXPY or a broadcast change: a
vector that is also used whole is better loaded once.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref

from lowering.registry import register_pass

_BROADCAST_USERS = ("vector.outerproduct", "vector.broadcast")


def _static_position(extract: ir.Operation) -> int | None:
    """The lane a 1-D `vector.extract` takes, when it is a constant."""
    if len(extract.operands) != 1:  # a dynamic position is an extra operand
        return None
    position = list(ir.DenseI64ArrayAttr(extract.attributes["static_position"]))
    return position[0] if len(position) == 1 and position[0] >= 0 else None


def _scalarizable(read: ir.Operation) -> list[tuple[ir.Operation, int]] | None:
    """[(extract, lane)] of a 1-D, unmasked, in-bounds, minor-identity transfer read of a memref
    whose elements all go to broadcasts; None if the read does not qualify."""
    if not isinstance(read.operands[0].type, ir.MemRefType):
        return None
    vtype = ir.VectorType(read.results[0].type)
    if vtype.rank != 1 or vtype.scalable:
        return None
    if len(read.operands) != 2 + ir.MemRefType(read.operands[0].type).rank:
        return None  # a mask operand
    if not all(ir.BoolAttr(b).value for b in ir.ArrayAttr(read.attributes["in_bounds"])):
        return None
    perm = ir.AffineMapAttr(read.attributes["permutation_map"]).value
    rank = ir.MemRefType(read.operands[0].type).rank
    last = perm.results[0] if len(perm.results) == 1 else None
    if not isinstance(last, ir.AffineDimExpr) or last.position != rank - 1:
        return None  # a broadcast or transposed read
    extracts = []
    for use in read.results[0].uses:
        user = use.owner
        if user.name != "vector.extract":
            return None
        lane = _static_position(user)
        if lane is None:
            return None
        if not all(u.owner.name in _BROADCAST_USERS for u in user.results[0].uses):
            return None
        extracts.append((user, lane))
    return extracts or None


def scalarize_broadcast_reads(module_op: ir.Operation) -> int:
    """Rewrite the qualifying reads of `module_op` (module docstring); returns how many."""
    reads = []

    def visit(op):
        op = op.operation
        if op.name == "vector.transfer_read":
            extracts = _scalarizable(op)
            if extracts:
                reads.append((op, extracts))
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for read, extracts in reads:
        source = read.operands[0]
        indices = list(read.operands)[1 : 1 + ir.MemRefType(source.type).rank]
        for extract, lane in extracts:
            with ir.InsertionPoint(extract), extract.location:
                inner = indices[-1]
                if lane:
                    step = arith.constant(ir.IndexType.get(), lane)
                    inner = arith.addi(inner, step, overflow_flags=arith.IntegerOverflowFlags.nsw)
                scalar = memref.load(source, indices[:-1] + [inner])
            extract.results[0].replace_all_uses_with(scalar)
            extract.erase()
        read.erase()
    return len(reads)


@register_pass(
    "relax-scalar-operand-loads",
    "1-D vector reads whose elements are only broadcast (register-tile A columns) -> scalar loads",
)
def scalar_operand_loads():
    return scalarize_broadcast_reads
