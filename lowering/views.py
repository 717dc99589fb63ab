"""Row-major views shared by the buffer passes: whole-tensor slices and flat reshapes.

`relax-prim-func-dps` (tensors, inside kernels) and `relax-graph-to-memref` (memrefs, between
kernels) both replace copies that only move elements in row-major order by views of the data.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import memref, tensor

from lowering.schedule.common import reassociation


def covers_whole(op: ir.Operation) -> bool:
    """Is `op` (tensor.extract_slice / insert_slice, static) the whole of its larger tensor
    (the source of an extract, the destination of an insert) with only unit axes added or
    dropped: zero offsets, unit strides, as many elements?"""
    extract = op.name == "tensor.extract_slice"
    if len(op.operands) != (1 if extract else 2):
        return False  # dynamic offsets, sizes or strides
    full = ir.ShapedType(op.operands[0 if extract else 1].type)
    if not full.has_static_shape:
        return False
    offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    return (
        not any(offsets)
        and all(x == 1 for x in strides)
        and math.prod(sizes) == math.prod(full.shape)
    )


def row_major_view(value: ir.Value, want: ir.Type, sizes: list[ir.Value] = ()) -> ir.Value:
    """`value` (a tensor, or a memref of identity layout) with the shape of `want` (as many
    elements): collapsed to one axis, then expanded. `sizes`: the values of `want`'s dynamic
    dims, in order (one at most: an expand_shape takes one dynamic size per group)."""
    is_memref = isinstance(value.type, ir.MemRefType)
    dialect, make = (memref, ir.MemRefType.get) if is_memref else (tensor, ir.RankedTensorType.get)
    have, shape = ir.ShapedType(value.type), ir.ShapedType(want)
    if list(have.shape) == list(shape.shape):
        return value
    flat = value
    count = math.prod(have.shape) if have.has_static_shape else ir.ShapedType.get_dynamic_size()
    flat_t = make([count], have.element_type)
    if have.rank == 0:  # a scalar: no axis to collapse, one unit axis to add
        flat = dialect.ExpandShapeOp(flat_t, value, reassociation([]), [], [1]).result
    elif have.rank != 1:
        flat = dialect.CollapseShapeOp(
            flat_t, value, reassociation([list(range(have.rank))])
        ).result
    if shape.rank == 0:
        return dialect.CollapseShapeOp(want, flat, reassociation([])).result
    if shape.rank == 1:
        return flat if flat.type == want else dialect.CastOp(want, flat).result
    whole = reassociation([list(range(shape.rank))])
    return dialect.ExpandShapeOp(want, flat, whole, list(sizes), list(shape.shape)).result
