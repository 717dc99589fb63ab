"""The transpose kernel of the GPU Fallback rule: an elementwise op whose input's contiguous axis
is not its output's (a weight's `permute_dims`, a layout change) goes through a shared-memory
tile, so that both the reads and the writes are coalesced.

One thread per element (the Fallback kernel) reads the input down a column: each warp touches
32 different rows, 32 memory sectors for 128 useful bytes. Here a block stages a 32 x 32 tile:
its threads read 32 consecutive elements along the input's contiguous axis (loop `a`), a
barrier, then write 32 consecutive elements along the output's (loop `b`) from the transposed
tile; the row of 33 keeps the column reads free of bank conflicts. The payload (a copy, a
cast) is applied on the way out. Other loops are spread over the grid's z.

As the other templates: `plan` tags at the tensor level, `relax-gpu-transpose` writes the kernel
after bufferization.
"""

from __future__ import annotations

import math as pymath

from mlir import ir
from mlir.dialects import gpu, memref, scf

from lowering.gpu import emit
from lowering.registry import register_pass

TRANSPOSE_ATTR = "relax.gpu_transpose"  # on the op: [a, b] (input's / output's contiguous loop)
TILE, ROWS = 32, 8  # a 32 x 32 tile, 32 x 8 threads (each moves 4 elements each way)


def plan(ops: list[ir.Operation]) -> tuple[int, int] | None:
    """(a, b) when the PrimFunc is one elementwise op over one shaped input whose contiguous
    axis runs along another loop than the output's, both long enough to fill a tile row."""
    if len(ops) != 1:
        return None
    op = ops[0]
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    if any(t != "parallel" for t in emit.iterators(op)):
        return None
    maps, ranges = emit.indexing_maps(op), emit.loop_ranges(op)
    if any(r is None for r in ranges):
        return None
    shaped = [i for i, v in enumerate(op.operands[:-1]) if isinstance(v.type, ir.ShapedType)]
    out_map = maps[-1]
    if len(shaped) != 1 or not _permutation(out_map) or not _permutation(maps[shaped[0]]):
        return None
    if list(op.regions[0].blocks[0].arguments[-1].uses):
        return None  # the payload reads the output's old value
    a = maps[shaped[0]].results[-1].position
    b = out_map.results[-1].position
    if a == b or ranges[a] < TILE // 2 or ranges[b] < TILE // 2:
        return None
    return a, b


def _permutation(amap: ir.AffineMap) -> bool:
    res = list(amap.results)
    return (
        len(res) == amap.n_dims
        and all(isinstance(e, ir.AffineDimExpr) for e in res)
        and sorted(e.position for e in res) == list(range(amap.n_dims))
    )


def tag(op: ir.Operation, ab: tuple[int, int]) -> None:
    op.attributes[TRANSPOSE_ATTR] = ir.DenseI64ArrayAttr.get(list(ab), op.context)


def _build(op: ir.Operation) -> None:
    a, b = list(ir.DenseI64ArrayAttr(op.attributes[TRANSPOSE_ATTR]))
    maps, ranges = emit.indexing_maps(op), emit.loop_ranges(op)
    src = next(i for i, v in enumerate(op.operands[:-1]) if isinstance(v.type, ir.ShapedType))
    value, out = op.operands[src], op.operands[-1]
    elem = ir.MemRefType(value.type).element_type
    rest = [d for d in range(len(ranges)) if d not in (a, b)]
    rest_total = pymath.prod(ranges[d] for d in rest)
    with op.location, ir.InsertionPoint(op):
        grid = [
            emit.const(-(-ranges[b] // TILE)),
            emit.const(-(-ranges[a] // TILE)),
            emit.const(rest_total),
        ]
        tile_type = emit.shared([TILE, TILE + 1], elem)
        _, body = emit.launch(grid, TILE * ROWS, [tile_type])
        tile = body.arguments[12]
        with ir.InsertionPoint(body):
            bx, by, bz, tid = (body.arguments[i] for i in range(4))
            tx, ty = emit.rem(tid, TILE), emit.div(tid, TILE)
            a0, b0 = emit.mul(by, TILE), emit.mul(bx, TILE)
            others = emit.delinearize(bz, [ranges[d] for d in rest]) if rest else []

            def dims(a_idx, b_idx) -> list[ir.Value]:
                out_dims: list[ir.Value] = [emit.const(0)] * len(ranges)
                for d, v in zip(rest, others):
                    out_dims[d] = v
                out_dims[a], out_dims[b] = a_idx, b_idx
                return out_dims

            def guarded(a_idx, b_idx, write) -> None:
                inb = emit.both(
                    emit.bound(a_idx, ranges[a], TILE), emit.bound(b_idx, ranges[b], TILE)
                )
                if inb is None:
                    write()
                    return
                branch = scf.IfOp(inb)
                with ir.InsertionPoint(branch.then_block):
                    write()
                    scf.YieldOp([])

            for j in range(TILE // ROWS):  # read along a (the input's contiguous loop)
                row = emit.add(ty, j * ROWS)
                a_idx, b_idx = emit.add(a0, tx), emit.add(b0, row)
                guarded(
                    a_idx,
                    b_idx,
                    lambda a_idx=a_idx, b_idx=b_idx, row=row: memref.StoreOp(
                        emit.load(value, emit.apply_map(maps[src], dims(a_idx, b_idx))),
                        tile,
                        [row, tx],
                    ),
                )
            gpu.BarrierOp()
            for j in range(TILE // ROWS):  # write along b (the output's contiguous loop)
                row = emit.add(ty, j * ROWS)
                a_idx, b_idx = emit.add(a0, row), emit.add(b0, tx)

                def write(a_idx=a_idx, b_idx=b_idx, row=row) -> None:
                    loops = dims(a_idx, b_idx)
                    # the staged input from the tile, scalars as they are (`plan` admits no
                    # other shaped input), a dummy for the output's old value (not read)
                    args = [
                        emit.load(tile, [tx, row]) if i == src else operand
                        for i, operand in enumerate(op.operands[:-1])
                    ]
                    args.append(emit.zero(op.regions[0].blocks[0].arguments[-1].type))
                    result = emit.clone_body(op, args, loops)
                    memref.StoreOp(result, out, emit.apply_map(maps[-1], loops))

                guarded(a_idx, b_idx, write)
            gpu.TerminatorOp()


@register_pass(
    "relax-gpu-transpose",
    "transposing elementwise ops tagged by relax-schedule-gpu's Fallback rule -> a shared-memory "
    "tiled kernel (coalesced reads and writes)",
)
def transpose_kernels():
    def run(module_op: ir.Operation) -> None:
        for _, ops in emit.tagged_ops(module_op, TRANSPOSE_ATTR):
            for op in ops:
                _build(op)
                op.erase()

    return run
