"""`relax-masked-partial-vectors`: rows narrower than a register read (and written) with masks.

A register tile whose row is not a power of two lanes wide (a 14- or 28-wide image row on
AVX-512: 14 lanes; 6 or 7 on AVX2) is a `vector<14xf32>` after the n-D transfers are unrolled.
LLVM computes on it in one register (its lanes widen to 16), but a load or store of a type
that is not legal is split into legal pieces: 8 + 4 + 2 lanes, three loads and two inserts
(`vinsertf128`, `vinsertf64x4`) per row. The NCHW depthwise and grouped convolutions of
ShuffleNetV2 and ResNeXt load a row per tap, so they ran at a third of their load throughput.

Here each such 1-D in-bounds read of a memref whose rows are contiguous becomes a
`vector.maskedload` of the next power of two lanes (at most one register) with the first N
lanes on, then the N-lane slice of it: one masked load (AVX-512 `vmovups {k}`, AVX2
`vmaskmovps`). Masked lanes are never read, so nothing past the row is touched. Writes become a
`vector.maskedstore` of the row widened the same way, on AVX-512 only: AVX2's `vmaskmovps`
store is slow on AMD cores (about a dozen cycles), slower than the split store.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, vector

from lowering.registry import register_pass, target_option


def _widened(vtype: ir.VectorType, vector_bits: int) -> int | None:
    """The power-of-two lane count a 1-D partial row is loaded as, or None to leave it."""
    if vtype.rank != 1 or vtype.scalable:
        return None
    elem = vtype.element_type
    if not isinstance(elem, (ir.FloatType, ir.IntegerType)) or elem.width < 8:
        return None
    lanes = vector_bits // elem.width
    n = vtype.shape[0]
    p = 1 << (n - 1).bit_length()
    if n < 3 or p == n or p > lanes:
        return None
    return p


def _contiguous_rows(t: ir.Type) -> bool:
    if not isinstance(t, ir.MemRefType):
        return False
    strides, _ = ir.MemRefType(t).get_strides_and_offset()
    return bool(strides) and strides[-1] == 1


def _plain(op: ir.Operation, source: ir.Value) -> bool:
    """1-D, minor identity, in bounds, no mask: besides the indices, only the source and the
    read's padding or the written vector."""
    rank = ir.MemRefType(source.type).rank
    if len(op.operands) != 2 + rank:  # a mask operand
        return False
    if not all(ir.BoolAttr(b).value for b in ir.ArrayAttr(op.attributes["in_bounds"])):
        return False
    perm = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    return (
        len(perm.results) == 1
        and isinstance(perm.results[0], ir.AffineDimExpr)
        and perm.results[0].position == rank - 1
    )


def mask_partial_vectors(module_op: ir.Operation, vector_bits: int, stores: bool) -> int:
    """Rewrite the partial rows of `module_op` (module docstring); returns how many ops."""
    found = []

    def visit(op):
        op = op.operation
        if op.name == "vector.transfer_read":
            source, vtype = op.operands[0], ir.VectorType(op.results[0].type)
        elif op.name == "vector.transfer_write" and stores:
            source, vtype = op.operands[1], ir.VectorType(op.operands[0].type)
        else:
            return ir.WalkResult.ADVANCE
        width = _widened(vtype, vector_bits)
        if width and _contiguous_rows(source.type) and _plain(op, source):
            found.append((op, source, vtype, width))
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for op, source, vtype, width in found:
        rank = ir.MemRefType(source.type).rank
        start = 1 if op.name == "vector.transfer_read" else 2
        indices = list(op.operands)[start : start + rank]
        n, elem = vtype.shape[0], vtype.element_type
        with ir.InsertionPoint(op), op.location:
            wide = ir.VectorType.get([width], elem)
            mask_type = ir.VectorType.get([width], ir.IntegerType.get_signless(1))
            mask = vector.constant_mask(mask_type, [n])
            if op.name == "vector.transfer_read":
                padding = vector.broadcast(wide, op.operands[1 + rank])
                loaded = vector.maskedload(wide, source, indices, mask, padding)
                row = vector.extract_strided_slice(vtype, loaded, [0], [n], [1])
                op.results[0].replace_all_uses_with(row)
            else:
                poison = vector.broadcast(wide, _zero(elem))
                row = vector.insert_strided_slice(op.operands[0], poison, [0], [1])
                vector.maskedstore(source, indices, mask, row)
        op.erase()
    return len(found)


def _zero(elem: ir.Type) -> ir.Value:
    return arith.constant(elem, 0.0 if isinstance(elem, ir.FloatType) else 0)


@register_pass(
    "relax-masked-partial-vectors",
    "1-D vector rows that are not a power of two lanes wide -> masked loads/stores of the next one",
    {"target": "target string (default: the target in scope, else the host CPU)"},
)
def masked_partial_vectors(target: str = ""):
    tgt = target_option(target, "relax-masked-partial-vectors", kind="llvm")
    bits, stores = tgt.vector_bits, tgt.has("avx512f")
    return lambda module_op: mask_partial_vectors(module_op, bits, stores)
