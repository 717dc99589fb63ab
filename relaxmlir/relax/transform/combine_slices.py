"""`relax-combine-slices`: many slices of one tensor along one axis become one `split`.

torch.export unrolls a recurrent network over its steps, and each step reads its own slice of
the inputs' projection (`x_proj[:, t]`). Fusion puts each slice in its step's kernel, so the
steps' kernels differ only in that slice's offset and none is merged with another
(`relax-dedupe-prim-funcs`): an LSTM over 64 steps scheduled and compiled 64 kernels per layer.
One split (one kernel with a result per piece, one pass over the tensor) gives every step a
plain input instead, and their kernels are equal.
"""

from __future__ import annotations

from itertools import pairwise

from mlir import ir

from dialects import relax as rx
from dialects import shape as sh
from lowering.dataflow import graph_functions
from lowering.registry import register_pass
from relaxmlir.transform import Pass

# Fewer slices of one tensor stay slices, each fused into its reader (an LSTM step's four gates,
# `gates.chunk(4, 1)`; attention's q, k, v): a split would be a kernel and a copy of its own.
MIN_SLICES = 8


def _ints(op: ir.Operation, key: str) -> list | None:
    values = []
    for a in ir.ArrayAttr(op.attributes[key]):
        if not sh.isa(a, ir.IntegerAttr):
            return None  # a symbolic bound
        values.append(ir.IntegerAttr(a).value)
    return values


def _interval(op: ir.Operation) -> tuple[int, int, int] | None:
    """(axis, begin, end) of a unit-stride slice along one static axis, bounds within it."""
    x = op.operands[0]
    if not sh.isa(x.type, ir.RankedTensorType):
        return None
    shape = ir.RankedTensorType(x.type).shape
    axes = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(op.attributes["axes"])]
    begin, end, strides = _ints(op, "begin"), _ints(op, "end"), _ints(op, "strides")
    if len(axes) != 1 or begin is None or end is None or strides != [1]:
        return None
    axis = axes[0] % len(shape)
    size = shape[axis]
    if ir.ShapedType.is_dynamic_size(size):
        return None
    b, e = begin[0], end[0]
    b, e = (b + size if b < 0 else b), (e + size if e < 0 else e)
    e = min(e, size)
    return (axis, b, e) if 0 <= b < e else None


def combine_slices(module_op: ir.Operation) -> None:
    for func_op in graph_functions(module_op):
        groups: dict = {}  # (tensor, axis, block) -> [(begin, end, slice op)]

        def visit(op, groups=groups):
            op = op.operation
            if op.name == rx.StridedSlice.name:
                found = _interval(op)
                if found is not None:
                    axis, b, e = found
                    key = (op.operands[0], axis, op.block)
                    groups.setdefault(key, []).append((b, e, op))
            return ir.WalkResult.ADVANCE

        func_op.walk(visit)
        for (x, axis, block), slices in groups.items():
            if len(slices) >= MIN_SLICES:
                _split(x, axis, block, slices)


def _split(x: ir.Value, axis: int, block: ir.Block, slices: list) -> None:
    slices.sort(key=lambda s: s[:2])
    if any(b < prev_e for (_, prev_e, _), (b, _, _) in pairwise(slices)):
        return  # overlapping windows: not pieces of one split
    kind = ir.RankedTensorType(x.type)
    size = kind.shape[axis]
    bounds = sorted({v for b, e, _ in slices for v in (b, e)} - {0, size})
    edges = [0, *bounds, size]
    types = []
    for lo, hi in pairwise(edges):
        shape = list(kind.shape)
        shape[axis] = hi - lo
        types.append(ir.RankedTensorType.get(shape, kind.element_type))
    order = {op.operation: i for i, op in enumerate(block.operations)}
    first = min((op for _, _, op in slices), key=lambda op: order[op])
    i64 = ir.IntegerType.get_signless(64)
    with ir.InsertionPoint(first), first.location:
        split = rx.Split.create(
            [x], types,
            {
                "indices": ir.ArrayAttr.get([ir.IntegerAttr.get(i64, v) for v in bounds]),
                "axis": ir.IntegerAttr.get(i64, axis),
            },
        )  # fmt: skip
    piece = {lo: split.results[i] for i, lo in enumerate(edges[:-1])}
    for b, _, op in slices:
        op.results[0].replace_all_uses_with(piece[b])
        op.erase()


@register_pass(
    "relax-combine-slices",
    "many unit-stride slices of one tensor along one axis -> one relax.split",
)
def relax_combine_slices():
    return combine_slices


def CombineSlices() -> Pass:
    """Many slices of one tensor along one axis (an unrolled loop's steps) as one `split`."""
    return Pass("CombineSlices", lambda mod: combine_slices(mod.module.operation))
