"""Facts about relax values read off the IR (shared by legalization and build)."""

from __future__ import annotations

import itertools

from mlir import ir

from dialects import relax as rx
from dialects import shape as sh

_ANON = itertools.count()


def value_shape(value: ir.Value) -> tuple:
    """Symbolic shape of a graph value: `relax.shape` of its producer or parameter, else its type."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        func_op = owner.owner
        if owner.region == func_op.regions[0] and "arg_attrs" in func_op.attributes:
            attrs = ir.DictAttr(ir.ArrayAttr(func_op.attributes["arg_attrs"])[value.arg_number])
            if rx.SHAPE_ATTR in attrs:
                return sh.from_attr(attrs[rx.SHAPE_ATTR])
    else:
        op = owner.operation if hasattr(owner, "operation") else owner
        if rx.is_dataflow(op):
            terminator = list(op.regions[0].blocks[0].operations)[-1]
            return value_shape(terminator.operands[value.result_number])
        if rx.SHAPE_ATTR in op.attributes:
            return sh.from_attr(ir.ArrayAttr(op.attributes[rx.SHAPE_ATTR])[value.result_number])
    # NOTE: an unnamed dynamic dim gets a fresh symbol: equal to nothing else, bound from its tensor
    dyn = ir.ShapedType.get_dynamic_size()
    return tuple(
        f"_anon{next(_ANON)}" if d == dyn else d for d in ir.RankedTensorType(value.type).shape
    )
