"""Writing kernel code inside a `gpu.launch`: index arithmetic from affine maps, loads through
indexing maps, and linalg payloads cloned onto scalars.

The kernel templates (`contract.py`, `rows.py`) do not tile linalg ops; they write the loops of
a kernel themselves and evaluate each linalg op's payload per element, so a producer or an
epilogue costs no buffer: its body is cloned where its value is needed.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, gpu, memref

WORKGROUP = "#gpu.address_space<workgroup>"


def index_type() -> ir.Type:
    return ir.IndexType.get()


def const(value: int) -> ir.Value:
    return arith.ConstantOp(index_type(), value).result


def zero(elem: ir.Type) -> ir.Value:
    if isinstance(elem, ir.IntegerType):
        return arith.ConstantOp(elem, 0).result
    return arith.ConstantOp(elem, 0.0).result


def add(a: ir.Value, b: int | ir.Value) -> ir.Value:
    if isinstance(b, int):
        if b == 0:
            return a
        b = const(b)
    return arith.AddIOp(a, b).result


def mul(a: ir.Value, b: int) -> ir.Value:
    return a if b == 1 else arith.MulIOp(a, const(b)).result


def div(a: ir.Value, b: int) -> ir.Value:
    return a if b == 1 else arith.DivUIOp(a, const(b)).result


def rem(a: ir.Value, b: int) -> ir.Value:
    return arith.RemUIOp(a, const(b)).result


def less(a: ir.Value, b: int) -> ir.Value:
    return arith.CmpIOp(arith.CmpIPredicate.ult, a, const(b)).result


def both(a: ir.Value | None, b: ir.Value | None) -> ir.Value | None:
    if a is None or b is None:
        return a if b is None else b
    return arith.AndIOp(a, b).result


def bound(lin: ir.Value, total: int, block: int) -> ir.Value | None:
    """lin < total, or None when `block` divides `total` (every tile is whole)."""
    return None if total % block == 0 else less(lin, total)


def binary(name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    """`a <name> b` for a binary arith op given by name (a payload's combiner)."""
    return ir.Operation.create(name, results=[a.type], operands=[a, b]).results[0]


def select(cond: ir.Value | None, a: ir.Value, b: ir.Value) -> ir.Value:
    return a if cond is None else arith.SelectOp(cond, a, b).result


MIN_BLOCKS_ATTR = "relax.gpu_min_blocks"  # on a gpu.launch: blocks per SM its registers allow


def launch(
    grid: list[ir.Value],
    threads: int,
    workgroup: list[ir.Type],
    dynamic_bytes: int = 0,
    min_blocks: int = 0,
) -> tuple[gpu.LaunchOp, ir.Block]:
    """A gpu.launch of `threads` threads in x over `grid` blocks, with static shared buffers
    and `dynamic_bytes` of dynamic shared memory (`dynamic_shared` views it); `min_blocks`:
    blocks per SM the kernel's registers must leave room for (relax-gpu-min-blocks)."""
    one = const(1)
    size = None
    if dynamic_bytes:
        size = arith.ConstantOp(ir.IntegerType.get_signless(32), dynamic_bytes).result
    op = gpu.LaunchOp(tuple(grid), (const(threads), one, one), dynamic_shared_memory_size=size)
    if min_blocks:
        i32 = ir.IntegerType.get_signless(32)
        op.operation.attributes[MIN_BLOCKS_ATTR] = ir.IntegerAttr.get(i32, min_blocks)
    if workgroup:
        op.operation.attributes["workgroup_attributions"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), len(workgroup)
        )
    body = op.regions[0].blocks[0]
    for t in workgroup:
        body.add_argument(t, op.location)
    return op, body


def shared(shape: list[int], elem: ir.Type) -> ir.MemRefType:
    return ir.MemRefType.get(shape, elem, memory_space=ir.Attribute.parse(WORKGROUP))


SHARED_ALIGN = 128  # each buffer in dynamic shared memory starts on this many bytes


def _padded_bytes(t: ir.MemRefType) -> int:
    """A buffer's bytes, rounded up so that the next one starts aligned."""
    size = math.prod(t.shape) * t.element_type.width // 8
    return -(-size // SHARED_ALIGN) * SHARED_ALIGN


def dynamic_bytes(types: list[ir.MemRefType]) -> int:
    """Dynamic shared memory for buffers of `types`, one after the other (aligned)."""
    return sum(_padded_bytes(t) for t in types)


def dynamic_shared(types: list[ir.MemRefType]) -> list[ir.Value]:
    """Buffers of `types` laid out in the launch's dynamic shared memory (inside its body):
    shared memory past the 48 KiB a kernel may declare statically."""
    i8 = ir.IntegerType.get_signless(8)
    raw_type = ir.MemRefType.get(
        [ir.ShapedType.get_dynamic_size()], i8, memory_space=ir.Attribute.parse(WORKGROUP)
    )
    raw = gpu.DynamicSharedMemoryOp(raw_type).result
    views, offset = [], 0
    for t in types:
        views.append(memref.ViewOp(t, raw, const(offset), []).result)
        offset += _padded_bytes(t)
    return views


def expr(e: ir.AffineExpr, dims: list[ir.Value]) -> ir.Value:
    """An affine expression over loop dims as index arithmetic (non-negative operands)."""
    if isinstance(e, ir.AffineDimExpr):
        return dims[e.position]
    if isinstance(e, ir.AffineConstantExpr):
        return const(e.value)
    if isinstance(e, ir.AffineAddExpr):
        return arith.AddIOp(expr(e.lhs, dims), expr(e.rhs, dims)).result
    if isinstance(e, ir.AffineMulExpr):
        return arith.MulIOp(expr(e.lhs, dims), expr(e.rhs, dims)).result
    if isinstance(e, ir.AffineFloorDivExpr):
        return arith.DivUIOp(expr(e.lhs, dims), expr(e.rhs, dims)).result
    if isinstance(e, ir.AffineModExpr):
        return arith.RemUIOp(expr(e.lhs, dims), expr(e.rhs, dims)).result
    raise ValueError(f"unsupported index expression {e}")


def apply_map(amap: ir.AffineMap, dims: list[ir.Value]) -> list[ir.Value]:
    return [expr(e, dims) for e in amap.results]


def expr_dims(e: ir.AffineExpr) -> list[int]:
    """Loop dims an expression reads, in order of appearance."""
    if isinstance(e, ir.AffineDimExpr):
        return [e.position]
    if isinstance(e, (ir.AffineAddExpr, ir.AffineMulExpr, ir.AffineFloorDivExpr, ir.AffineModExpr)):
        return expr_dims(e.lhs) + [d for d in expr_dims(e.rhs) if d not in expr_dims(e.lhs)]
    if isinstance(e, ir.AffineConstantExpr):
        return []
    raise ValueError(f"unsupported index expression {e}")


def map_dims(amap: ir.AffineMap) -> list[int]:
    out: list[int] = []
    for e in amap.results:
        out += [d for d in expr_dims(e) if d not in out]
    return out


def indexing_maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def iterators(op: ir.Operation) -> list[str]:
    return [
        str(a).split("<")[-1].rstrip(">") for a in ir.ArrayAttr(op.attributes["iterator_types"])
    ]


def loop_ranges(op: ir.Operation) -> list[int | None]:
    """Static trip count of each loop of a linalg.generic, read from operands an axis of which is
    the plain loop dim (tensors or memrefs)."""
    maps = indexing_maps(op)
    ranges: list[int | None] = [None] * maps[0].n_dims
    for value, amap in zip(op.operands, maps):
        if not isinstance(value.type, ir.ShapedType):
            continue
        shape = ir.ShapedType(value.type).shape
        for axis, e in enumerate(amap.results):
            known = shape[axis] != ir.ShapedType.get_dynamic_size()
            if isinstance(e, ir.AffineDimExpr) and ranges[e.position] is None and known:
                ranges[e.position] = shape[axis]
    return ranges


def is_fill(op: ir.Operation) -> bool:
    """A (generalized) fill: a linalg.generic with one scalar input whose payload yields it."""
    if op.name != "linalg.generic" or len(op.operands) != 2:
        return False
    if isinstance(op.operands[0].type, ir.ShapedType):
        return False
    body = [o.operation for o in op.regions[0].blocks[0].operations]
    return len(body) == 1 and body[0].operands[0] == op.regions[0].blocks[0].arguments[0]


def delinearize(lin: ir.Value, extents: list[int]) -> list[ir.Value]:
    """Row-major coordinates of a linear index (the last extent varies fastest)."""
    out: list[ir.Value] = []
    for i, extent in enumerate(reversed(extents)):
        last = i == len(extents) - 1
        out.append(lin if last else rem(lin, extent))
        if not last:
            lin = div(lin, extent)
    return list(reversed(out))


def load(buffer: ir.Value, indices: list[ir.Value]) -> ir.Value:
    return memref.LoadOp(buffer, indices).result


def clone_body(
    op: ir.Operation, args: list[ir.Value], dims: list[ir.Value] | None = None
) -> ir.Value:
    """The value a linalg.generic's payload yields for one element: its block arguments bound to
    `args` and `linalg.index d` to `dims[d]`; ops are cloned at the current insertion point."""
    block = op.regions[0].blocks[0]
    env = {block.arguments[i]: v for i, v in enumerate(args)}
    for inner in block.operations:
        inner = inner.operation
        if inner.name == "linalg.yield":
            return env.get(inner.operands[0], inner.operands[0])
        if inner.name == "linalg.index":
            if dims is None:
                raise ValueError("linalg.index in a payload without loop indices")
            env[inner.results[0]] = dims[ir.IntegerAttr(inner.attributes["dim"]).value]
            continue
        new = inner.clone()
        for i, operand in enumerate(inner.operands):
            if operand in env:
                new.operands[i] = env[operand]
        for old, fresh in zip(inner.results, new.results):
            env[old] = fresh
    raise ValueError("linalg payload without a yield")


def tagged_ops(module_op: ir.Operation, attr: str) -> list[tuple[ir.Operation, list[ir.Operation]]]:
    """(function, its top-level ops carrying `attr`) for each function that has some: what a
    kernel template's pass replaces."""
    out = []
    for func in module_op.regions[0].blocks[0].operations:
        func = func.operation
        if func.name != "func.func" or not len(func.regions[0].blocks):
            continue
        ops = [
            o.operation
            for o in func.regions[0].blocks[0].operations
            if attr in o.operation.attributes
        ]
        if ops:
            out.append((func, ops))
    return out


def defer_deallocs(first: ir.Operation, anchor: ir.Operation) -> None:
    """A kernel replaces the ops from `first` to `anchor` and runs at `anchor`: buffers freed
    in between (read by the replaced ops) stay alive until after it."""
    ops = [o.operation for o in first.block.operations]
    start, end = ops.index(first), ops.index(anchor)
    for o in ops[start + 1 : end]:
        if o.name == "memref.dealloc":
            o.move_after(anchor)
