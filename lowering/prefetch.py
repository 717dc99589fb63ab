"""`relax-prefetch-next-block`: a GEMM fetches B's next column block while it computes this one.

The rows route (schedule/matmul.py) runs B in column blocks that stay in L2 while every MR-row
tile of A passes over them. The first tile's pass reads its block from L3 or memory at the
speed of one core's stream: a model's weights are not in cache when their layer comes round
(BERT-base's are 340 MB), and on an Intel Xeon of the pool one core reads memory at 11.5 GB/s,
a third of what that pass needs. The loop over the blocks carries `relax.prefetch_next_block`;
this pass adds one `memref.prefetch` (into L2) to the K loop of its register tiles, at the read
of B, spread so that each line of the next block is asked for once over the whole block: with
F = min(R, NR / 2) of the R row tiles fetching, the step of row tile r < F, panel p and k
prefetches element (r * P + p) * K * NR / F + k * NR / F of the next block (P panels of K x NR
per block; NR / F is 2 floats on AVX-512 and AVX2, a line every 8 steps). A 128 x 768 x 2048 GEMM
(Llama's up projection) on that Xeon: 3.50 -> 2.58 ms with its weight in L3, 3.54 -> 2.96 ms with
it cold (timed in turns); one prefetch at the same place of the next block in every row tile
(the whole block again per tile) was as slow as none when cold.

Symbolic rows (a model built for any batch or sequence length) count their row tiles when the
loop runs. Loops whose shapes do not match (a row loop of dynamic start or step, a B defined
inside the block loop, no B read indexed by the K loop) keep no prefetch: the result is the
same, only slower.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref, scf

from lowering.registry import register_pass
from lowering.schedule.common import constant_index
from lowering.schedule.hoist import defined_inside
from lowering.schedule.matmul import PREFETCH_NEXT_ATTR

L2_LOCALITY = 2  # prefetcht1: into L2 (the block's home); L1 is the register tiles' A and B rows


def _trip(loop: ir.Operation) -> tuple[int, int, int] | None:
    """(lower bound, step, trip count) of an scf.for with constant bounds."""
    lb, ub, step = (constant_index(v) for v in list(loop.operands)[:3])
    if lb is None or ub is None or not step:
        return None
    return lb, step, max(0, -(-(ub - lb) // step))


def _child_loops(loop: ir.Operation) -> list[ir.Operation]:
    return [
        op.operation
        for op in loop.regions[0].blocks[0].operations
        if op.operation.name == "scf.for"
    ]


def _b_read(k_loop: ir.Operation) -> ir.Operation | None:
    """The read of a [P, K, NR] B panel row in the K loop: its second index is the loop's."""
    k_iv = k_loop.regions[0].blocks[0].arguments[0]
    for op in k_loop.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "vector.transfer_read":
            continue
        source = op.operands[0]
        if not isinstance(source.type, ir.MemRefType) or ir.MemRefType(source.type).rank != 3:
            continue
        if op.operands[2] == k_iv and ir.MemRefType(source.type).has_static_shape:
            return op
    return None


def _identity_layout(memref_type: ir.MemRefType) -> bool:
    """A row-major buffer (an argument, an allocation): one flat view covers it."""
    layout = memref_type.layout
    rank = memref_type.rank
    return isinstance(layout, ir.AffineMapAttr) and layout.value == ir.AffineMap.get_identity(rank)


def _nest(
    block_loop: ir.Operation,
) -> tuple[ir.Operation, ir.Operation | None, ir.Operation] | None:
    """(row tiles, panels, K) loops under the block loop: the first row-tile loop (the full
    tiles; a remainder after them fetches nothing), one panel loop in it (None where a block is
    one panel: canonicalization drops a loop of one iteration), one innermost K loop in that."""
    rows = _child_loops(block_loop)
    inner = _child_loops(rows[0]) if rows else []
    if len(inner) != 1:
        return None
    panel_loop = inner[0] if _child_loops(inner[0]) else None
    k_loops = _child_loops(panel_loop) if panel_loop is not None else inner
    if len(k_loops) != 1 or _child_loops(k_loops[0]):
        return None
    return rows[0], panel_loop, k_loops[0]


def _prefetch(buffer: ir.Value, at: ir.Value) -> None:
    memref.prefetch(buffer, [at], is_write=False, locality_hint=L2_LOCALITY, is_data_cache=True)


def _add_prefetch(block_loop: ir.Operation) -> bool:
    nest = _nest(block_loop)
    if nest is None:
        return False
    row_loop, panel_loop, k_loop = nest
    panel_trip = _trip(panel_loop) if panel_loop is not None else (0, 1, 1)
    row_lb, row_step = constant_index(row_loop.operands[0]), constant_index(row_loop.operands[2])
    read = _b_read(k_loop)
    if row_lb is None or not row_step or panel_trip is None or read is None:
        return False
    source = read.operands[0]
    b_type = ir.MemRefType(source.type)
    if defined_inside(source, block_loop) or not _identity_layout(b_type):
        return False
    n_panels, k, nr = b_type.shape
    panel_lb, panel_step, per_block = panel_trip
    if panel_step != 1 or per_block > n_panels:
        return False
    # Rows of static count, or symbolic ones (a batch or sequence `n`: their count is known
    # when the loop runs, and what depends on it only is hoisted out of the K loop by LLVM).
    row_trip = _trip(row_loop)
    n_rows = row_trip[2] if row_trip is not None else None
    if n_rows == 0:
        return False
    block_elems = per_block * k * nr
    with ir.InsertionPoint(block_loop), block_loop.location:
        i64 = ir.IntegerType.get_signless(64)
        dims = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in range(3)])
        flat_type = ir.MemRefType.get([n_panels * k * nr], b_type.element_type)
        flat = memref.collapse_shape(flat_type, source, ir.ArrayAttr.get([dims]))
    # after the read: its panel index (defined in the K loop) is in scope
    with ir.InsertionPoint(_next_op(read)), read.location:

        def const(v):
            return arith.constant(ir.IndexType.get(), v)

        def ordinal(loop, lb, step):  # the iteration's number: (iv - lb) / step
            iv = loop.regions[0].blocks[0].arguments[0]
            iv = arith.subi(iv, const(lb)) if lb else iv
            return arith.divui(iv, const(step)) if step != 1 else iv

        # The first NR / 2 row tiles fetch the block, 8 bytes a step (a line every 8 steps);
        # more tiles than that only run (512 rows of 768 x 768 had been 1.25x slower with all
        # 64 tiles fetching a line every 16 steps, each line 16 times).
        if n_rows is not None:
            fetching = max(1, min(n_rows, nr // 2))
            every_tile, step_elems = fetching == n_rows, max(1, nr // fetching)
            fetching_v, per_step, segment = fetching, const(step_elems), None
        else:
            # ceil((ub - lb) / step) tiles, counted before the row loop: left in the K loop,
            # the division by it stayed there inside OpenMP's outlined regions (BERT-base built
            # for a symbolic sequence, 2 threads, n = 256: 1.2x slower than without
            # prefetching). At least 1: fewer rows than a tile run no tile, and no division by 0.
            with ir.InsertionPoint(row_loop):
                span = row_loop.operands[1]
                span = arith.subi(span, const(row_lb)) if row_lb else span
                tiles = arith.divui(arith.addi(span, const(row_step - 1)), const(row_step))
                fetching_v = arith.minui(tiles, const(max(1, nr // 2)))
                fetching_v = arith.maxui(fetching_v, const(1))
                every_tile, per_step = False, arith.divui(const(nr), fetching_v)
                segment = arith.muli(const(k), per_step)
        # elements each (row tile, panel) fetches
        segment = segment if segment is not None else const(k * step_elems)
        r = ordinal(row_loop, row_lb, row_step)
        # The next block's first panel; the last block fetches itself again, and a panel index
        # of another form than (block's first panel + p) lands elsewhere in B, never outside.
        if panel_loop is None:
            p, first = None, read.operands[1]
        else:
            p = ordinal(panel_loop, panel_lb, 1)
            first = arith.subi(read.operands[1], p)
        start = arith.minui(arith.addi(first, const(per_block)), const(n_panels - per_block))
        k_iv = k_loop.regions[0].blocks[0].arguments[0]
        tile = arith.muli(r, const(per_block))
        tile = arith.addi(tile, p) if p is not None else tile  # (row tile, panel)'s number
        offset = arith.addi(arith.muli(tile, segment), arith.muli(k_iv, per_step))
        offset = arith.minui(offset, const(block_elems - 1))
        at = arith.addi(arith.muli(start, const(k * nr)), offset)
        if every_tile:
            _prefetch(flat, at)
        else:  # (r is invariant in the K loop: LLVM unswitches the test out of it)
            if isinstance(fetching_v, int):
                fetching_v = const(fetching_v)
            fetches = arith.cmpi(arith.CmpIPredicate.ult, r, fetching_v)
            branch = scf.IfOp(fetches)
            with ir.InsertionPoint(branch.then_block):
                _prefetch(flat, at)
                scf.YieldOp([])
    return True


def _next_op(op: ir.Operation) -> ir.Operation:
    """The op after `op` in its block (a read is never last: its block ends in a yield)."""
    ops = [other.operation for other in op.block.operations]
    return ops[ops.index(op) + 1]


def prefetch_next_blocks(module_op: ir.Operation) -> int:
    """Add the prefetches to every annotated block loop of `module_op`; returns how many."""
    loops = []

    def visit(op):
        if PREFETCH_NEXT_ATTR in op.operation.attributes:
            loops.append(op.operation)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    added = 0
    for loop in loops:
        added += _add_prefetch(loop)
        del loop.attributes[PREFETCH_NEXT_ATTR]
    return added


@register_pass(
    "relax-prefetch-next-block",
    "rows-route GEMMs: prefetch B's next column block into L2 while this one is computed",
)
def prefetch_next_block():
    return prefetch_next_blocks
