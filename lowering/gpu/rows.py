"""The row kernel of the GPU GeneralReduction and Reduction rules: softmax, layer norm, RMS norm,
sums and means over the trailing axes. One block per row; its threads cooperate on every
reduction of the row.

A PrimFunc takes it when every op is a fill, an elementwise op over the full shape F = R + C
or over the row shape R (keepdims unit axes allowed), or a reduction of a full-shaped value over
C. Each reduction runs as: every thread folds the row's elements tid, tid + T, ... with the
op's own payload (starting from the combiner's identity), a warp folds its 32 partials with
shuffles, the warps' results meet in shared memory, and every thread folds those in the same
order (so all threads hold the same value), then the op's initial value. Elementwise ops are
never stored: their payloads are cloned where a consumer reads them (softmax's exp is computed
once for the sum and once for the output), so the row crosses global memory once in and once
out, the re-reads hitting the cache.

As for contractions (`contract.py`): `plan` tags the ops at the tensor level, and
`relax-gpu-rows` writes the kernel after bufferization, in place of the tagged ops.
"""

from __future__ import annotations

import math as pymath
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf

from lowering.gpu import emit
from lowering.registry import PassError, register_pass

ROWS_ATTR = "relax.gpu_rows"  # on each op: [position, kind]
SHAPE_ATTR = "relax.gpu_rows_shape"  # on the root: [row axes, *full shape]
FILL, FULL, ROW, REDUCE = 0, 1, 2, 3
MIN_ROW = 32  # shorter rows: one thread per output (the Reduction rule's loops) does better
WARP = 32

# Combiner -> identity (partials start there; the op's own initial value joins at the end).
IDENTITY = {
    "arith.addf": 0.0,
    "arith.mulf": 1.0,
    "arith.maximumf": -pymath.inf,
    "arith.minimumf": pymath.inf,
    "arith.maxnumf": -pymath.inf,
    "arith.minnumf": pymath.inf,
    "arith.addi": 0,
    "arith.muli": 1,
    "arith.maxsi": -(2**31),
    "arith.minsi": 2**31 - 1,
    "arith.ori": 0,
    "arith.xori": 0,
}


def _combiner(op: ir.Operation) -> str | None:
    """The payload's `out = combine(out, g(...))` op name, when `out` feeds nothing else."""
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    out = block.arguments[len(block.arguments) - 1]
    last = body[-2] if len(body) >= 2 else None
    if last is None or last.name not in IDENTITY or last.results[0] != body[-1].operands[0]:
        return None
    if sum(1 for v in last.operands if v == out) != 1 or len(list(out.uses)) != 1:
        return None
    return last.name


def _shape(value: ir.Value) -> list[int]:
    return list(ir.ShapedType(value.type).shape)


def _squeeze(shape: list) -> list:
    return [d for d in shape if d != 1]


def _reads(
    amap: ir.AffineMap, shape: list[int], want: list[int], ranges: list, broadcast: bool = False
) -> bool:
    """`amap` indexes the non-unit axes of a value of `shape` by exactly the loops `want`, in
    order (`broadcast`: by some of them, in order: an input read by every row, as a GEMV's
    vector), and its unit axes by 0 (a constant or a loop of trip count 1)."""
    res = list(amap.results)
    if len(res) != len(shape):
        return False
    plain = [e for e, n in zip(res, shape) if n != 1]
    units = [e for e, n in zip(res, shape) if n == 1]
    if not all(isinstance(e, ir.AffineDimExpr) for e in plain):
        return False
    dims = [e.position for e in plain]
    if dims != want and not (broadcast and dims == [d for d in want if d in dims]):
        return False
    return all(
        (isinstance(e, ir.AffineConstantExpr) and e.value == 0)
        or (isinstance(e, ir.AffineDimExpr) and ranges[e.position] == 1)
        for e in units
    )


def _loops(op: ir.Operation) -> tuple[list[int], list[int]]:
    """(non-unit parallel loops, reduction loops) of a generic, in order."""
    its, ranges = emit.iterators(op), emit.loop_ranges(op)
    keep = [d for d, t in enumerate(its) if t == "parallel" and ranges[d] != 1]
    return keep, [d for d, t in enumerate(its) if t == "reduction"]


def _owner(use) -> ir.Operation:
    owner = use.owner
    return owner.operation if hasattr(owner, "operation") else owner


@dataclass
class Plan:
    kinds: list[int]
    rows: int  # number of (non-unit) row axes
    full: list[int]  # the non-unit axes of a full value: rows, then the reduced columns


def plan(ops: list[ir.Operation]) -> Plan | None:
    """Each op's kind when the PrimFunc is a row function, else None. Unit axes (BERT's batch
    of 1, keepdims) are ignored: a value's coordinates are those of its other axes."""
    if not ops or any(op.name != "linalg.generic" or len(op.results) != 1 for op in ops):
        return None
    full, rows = None, None
    for op in ops:
        its, maps, ranges = emit.iterators(op), emit.indexing_maps(op), emit.loop_ranges(op)
        if "reduction" not in its:
            continue
        if any(r is None for r in ranges) or _combiner(op) is None:
            return None
        keep, red = _loops(op)
        par = [d for d, t in enumerate(its) if t == "parallel"]
        if par + red != list(range(len(its))):
            return None  # reduced loops innermost
        if not _reads(maps[-1], _shape(op.operands[-1]), keep, ranges):
            return None
        for value, amap in zip(op.operands[:-1], maps[:-1]):
            if isinstance(value.type, ir.ShapedType) and not _reads(
                amap, _shape(value), keep + red, ranges, broadcast=True
            ):
                return None
        shape = [ranges[d] for d in keep + red]
        if (full, rows) not in ((None, None), (shape, len(keep))):
            return None  # reductions of different shapes
        full, rows = shape, len(keep)
        elem = ir.ShapedType(op.results[0].type).element_type
        if not (
            isinstance(elem, ir.F32Type) or (isinstance(elem, ir.IntegerType) and elem.width == 32)
        ):
            return None  # warp shuffles move 32-bit values
    if full is None or pymath.prod(full[rows:]) < MIN_ROW:
        return None
    kinds: list[int] = []
    for i, op in enumerate(ops):
        out, ranges = _shape(op.results[0]), emit.loop_ranges(op)
        keep, red = _loops(op)
        if emit.is_fill(op):
            kind = FILL
        elif red:
            kind = REDUCE
        elif _squeeze(out) == full and [ranges[d] for d in keep] == full:
            kind = FULL
        elif _squeeze(out) == full[:rows] and [ranges[d] for d in keep] == full[:rows]:
            kind = ROW
        else:
            return None
        if kind in (FULL, ROW) and not _reads(emit.indexing_maps(op)[-1], out, keep, ranges):
            return None
        block_args = op.regions[0].blocks[0].arguments
        for j, (value, amap) in enumerate(zip(op.operands, emit.indexing_maps(op))):
            src = next((k for k in range(i) if ops[k].results[0] == value), -1)
            read = bool(list(block_args[j].uses))
            if src >= 0 and kinds[src] != FILL:
                want = keep + red if kinds[src] == FULL else keep[:rows]
                if not _reads(amap, _shape(value), want, ranges):
                    return None
                if kind == ROW and kinds[src] == FULL:
                    return None
            elif (
                src < 0
                and read
                and isinstance(value.type, ir.ShapedType)
                and not isinstance(value.owner, ir.Block)
            ):
                return None  # a value made by a non-linalg op (a reshape): not in the kernel
        kinds.append(kind)
    for op in ops[:-1]:  # only the root's value leaves the function
        if any(not any(_owner(use) == o for o in ops) for use in op.results[0].uses):
            return None
    return Plan(kinds, rows, full)


def tag(ops: list[ir.Operation], p: Plan) -> None:
    """[position, kind] on each op. Producers are found again on buffers (the latest earlier op
    writing the buffer an operand reads): later rewrites may move an input into the init."""
    ctx = ops[0].context
    for i, op in enumerate(ops):
        op.attributes[ROWS_ATTR] = ir.DenseI64ArrayAttr.get([i, p.kinds[i]], ctx)
    ops[-1].attributes[SHAPE_ATTR] = ir.DenseI64ArrayAttr.get([p.rows, *p.full], ctx)


def threads(full: list[int], rows: int) -> int:
    return min(256, -(-pymath.prod(full[rows:]) // WARP) * WARP)


# -- the kernel (buffers) ------------------------------------------------------------------------


class _Kernel:
    def __init__(self, ops: list[ir.Operation], rows: int, full: list[int]):
        self.ops = ops
        self.kinds = [list(ir.DenseI64ArrayAttr(op.attributes[ROWS_ATTR]))[1] for op in ops]
        self.producers = [
            [_writer(ops, i, operand) for operand in op.operands] for i, op in enumerate(ops)
        ]
        self.rows, self.full = rows, full
        self.cols = full[rows:]
        self.reduced: dict[int, ir.Value] = {}
        # read once: every evaluation point needs them
        self.loops = [(emit.loop_ranges(op), emit.iterators(op)) for op in ops]
        self.maps = [emit.indexing_maps(op) for op in ops]

    def loops_for(
        self, i: int, coords: list[ir.Value], col: list[ir.Value] | None
    ) -> list[ir.Value]:
        """Loop indices of op i: its non-unit parallel loops take `coords` (full coordinates for
        FULL ops, row coordinates otherwise), reduced loops `col`, unit loops 0."""
        ranges, its = self.loops[i]
        out, r, c = [], iter(coords), iter(col or [])
        zero = emit.const(0)
        for d, t in enumerate(its):
            if t == "reduction":
                out.append(next(c))
            elif ranges[d] == 1:
                out.append(zero)
            else:
                out.append(next(r))
        return out

    def _args(self, i: int, loops: list[ir.Value], memo: dict) -> list[ir.Value | None]:
        """Op i's payload arguments at loop indices `loops` (None for a reduction's `out`)."""
        op, kind = self.ops[i], self.kinds[i]
        block_args = op.regions[0].blocks[0].arguments
        args: list[ir.Value | None] = []
        for j, (operand, amap) in enumerate(zip(op.operands, self.maps[i])):
            src = self.producers[i][j]
            if kind == REDUCE and j == len(op.operands) - 1:
                args.append(None)
            elif not isinstance(operand.type, ir.ShapedType):
                args.append(operand)  # a scalar input
            elif not list(block_args[j].uses):
                args.append(emit.zero(block_args[j].type))  # not read (an output's old value)
            elif src < 0:
                args.append(emit.load(operand, emit.apply_map(amap, loops)))
            else:  # the producer's coordinates: the index on its non-unit axes
                idx = emit.apply_map(amap, loops)
                shape = ir.ShapedType(operand.type).shape
                coords = [v for v, n in zip(idx, shape) if n != 1]
                args.append(self.value(src, coords, memo))
        return args

    def value(self, i: int, coords: list[ir.Value], memo: dict) -> ir.Value:
        """Op i's value at full coordinates (FULL) or row coordinates (the others). Within one
        point every FULL op is read at the same coordinates, so `memo` (one per point) keys by op."""
        if i in memo:
            return memo[i]
        op, kind = self.ops[i], self.kinds[i]
        if kind == FILL:
            return op.operands[0]
        if kind == REDUCE:
            return self.reduced[i]
        loops = self.loops_for(i, coords, None)
        memo[i] = emit.clone_body(op, self._args(i, loops, memo), loops)
        return memo[i]

    def fold_step(
        self, i: int, row: list[ir.Value], col: list[ir.Value], acc: ir.Value
    ) -> ir.Value:
        """One element of reduction i folded into `acc` (its payload, as written)."""
        loops = self.loops_for(i, row, col)
        args = self._args(i, loops, {})
        args[-1] = acc
        return emit.clone_body(self.ops[i], args, loops)


def _writer(ops: list[ir.Operation], i: int, buffer: ir.Value) -> int:
    """The latest op before op i whose init (written buffer) is `buffer`, or -1."""
    for j in reversed(range(i)):
        if ops[j].operands[len(ops[j].operands) - 1] == buffer:
            return j
    return -1


def _identity(name: str, t: ir.Type) -> ir.Value:
    return arith.ConstantOp(t, IDENTITY[name]).result


def _build(k: _Kernel, root: ir.Operation) -> None:
    rows, cols = k.rows, k.cols
    n_rows, n_cols = pymath.prod(k.full[:rows]), pymath.prod(cols)
    t = threads(k.full, rows)
    warps = t // WARP
    reduce_ops = [i for i, kind in enumerate(k.kinds) if kind == REDUCE]
    elem = ir.ShapedType(k.ops[reduce_ops[0]].operands[-1].type).element_type
    i32 = ir.IntegerType.get_signless(32)
    with root.location, ir.InsertionPoint(root):
        smem = emit.shared([len(reduce_ops), warps], elem)
        _, body = emit.launch([emit.const(n_rows), emit.const(1), emit.const(1)], t, [smem])
        scratch = body.arguments[12]
        with ir.InsertionPoint(body):
            bx, tid = body.arguments[0], body.arguments[3]
            row = emit.delinearize(bx, k.full[:rows]) if rows else []
            lane, warp = emit.rem(tid, WARP), emit.div(tid, WARP)
            for slot, i in enumerate(reduce_ops):
                op = k.ops[i]
                name = _combiner(op)
                out_type = ir.ShapedType(op.operands[-1].type).element_type
                loop = scf.ForOp(
                    tid, emit.const(n_cols), emit.const(t), [_identity(name, out_type)]
                )
                with ir.InsertionPoint(loop.body):
                    col = emit.delinearize(loop.induction_variable, cols)
                    scf.YieldOp([k.fold_step(i, row, col, loop.inner_iter_args[0])])
                part = loop.results[0]
                for offset in (16, 8, 4, 2, 1):
                    other = gpu.ShuffleOp(
                        part,
                        arith.ConstantOp(i32, offset).result,
                        arith.ConstantOp(i32, WARP).result,
                        gpu.ShuffleMode.XOR,
                    ).results[0]
                    part = emit.binary(name, part, other)
                first = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, lane, emit.const(0)).result)
                with ir.InsertionPoint(first.then_block):
                    memref.StoreOp(part, scratch, [emit.const(slot), warp])
                    scf.YieldOp([])
                gpu.BarrierOp()
                total = emit.load(scratch, [emit.const(slot), emit.const(0)])
                for w in range(1, warps):
                    total = emit.binary(
                        name, total, emit.load(scratch, [emit.const(slot), emit.const(w)])
                    )
                init_src = k.producers[i][-1]
                if init_src >= 0:
                    init = k.value(init_src, row, {})
                else:
                    init = emit.load(
                        op.operands[-1],
                        emit.apply_map(
                            emit.indexing_maps(op)[-1],
                            k.loops_for(i, row, [emit.const(0)] * len(cols)),
                        ),
                    )
                k.reduced[i] = emit.binary(name, init, total)
            last = len(k.ops) - 1
            out_buf, out_map = root.operands[-1], emit.indexing_maps(root)[-1]
            if k.kinds[last] == FULL:
                loop = scf.ForOp(tid, emit.const(n_cols), emit.const(t), [])
                with ir.InsertionPoint(loop.body):
                    coords = row + emit.delinearize(loop.induction_variable, cols)
                    value = k.value(last, coords, {})
                    memref.StoreOp(
                        value, out_buf, emit.apply_map(out_map, k.loops_for(last, coords, None))
                    )
                    scf.YieldOp([])
            else:
                leader = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, tid, emit.const(0)).result)
                with ir.InsertionPoint(leader.then_block):
                    value = k.value(last, row, {})
                    zeros = [emit.const(0)] * len(cols)
                    memref.StoreOp(
                        value,
                        out_buf,
                        emit.apply_map(
                            out_map,
                            k.loops_for(last, row, zeros if k.kinds[last] == REDUCE else None),
                        ),
                    )
                    scf.YieldOp([])
            gpu.TerminatorOp()


@register_pass(
    "relax-gpu-rows",
    "row functions tagged by relax-schedule-gpu (softmax, norms, trailing-axis reductions) -> "
    "one block per row, cooperative reductions",
)
def row_kernels():
    def run(module_op: ir.Operation) -> None:
        for func_op, ops in emit.tagged_ops(module_op, ROWS_ATTR):
            ops.sort(key=lambda o: ir.DenseI64ArrayAttr(o.attributes[ROWS_ATTR])[0])
            root = ops[-1]
            if SHAPE_ATTR not in root.attributes:
                raise PassError("relax-gpu-rows: the row function lost its root", func_op)
            meta = list(ir.DenseI64ArrayAttr(root.attributes[SHAPE_ATTR]))
            emit.defer_deallocs(ops[0], root)
            _build(_Kernel(ops, meta[0], meta[1:]), root)
            for op in reversed(ops):
                op.erase()

    return run
