"""Facts about relax values read off the IR (shared by legalization and build)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from mlir import ir

from dialects import relax as rx
from dialects import shape as sh
from lowering import dense
from relaxmlir.relax.expr import Call, Constant, Expr, Var
from relaxmlir.relax.struct_info import DTYPE_ATTR, TensorStructInfo, TupleStructInfo, dtype_of
from relaxmlir.runtime.dtype import np_dtype

# Attributes that encode structure, not op semantics: never handed to rules as python values.
_SKIPPED_ATTRS = {"operandSegmentSizes", "resultSegmentSizes", rx.SHAPE_ATTR, DTYPE_ATTR}

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


def value_dtype(value: ir.Value) -> str:
    """Relax dtype of a graph value: its element type's, "bool" where the producer or parameter
    marks an i8 value as one (DTYPE_ATTR)."""
    dtype = dtype_of(ir.RankedTensorType(value.type).element_type)
    if dtype != "int8":
        return dtype
    owner = value.owner
    if isinstance(owner, ir.Block):
        func_op = owner.owner
        if owner.region == func_op.regions[0] and "arg_attrs" in func_op.attributes:
            attrs = ir.DictAttr(ir.ArrayAttr(func_op.attributes["arg_attrs"])[value.arg_number])
            if DTYPE_ATTR in attrs:
                return ir.StringAttr(attrs[DTYPE_ATTR]).value
        return dtype
    op = owner.operation if hasattr(owner, "operation") else owner
    if rx.is_dataflow(op):
        terminator = list(op.regions[0].blocks[0].operations)[-1]
        return value_dtype(terminator.operands[value.result_number])
    if DTYPE_ATTR in op.attributes:
        return ir.StringAttr(ir.ArrayAttr(op.attributes[DTYPE_ATTR])[value.result_number]).value
    return dtype


def from_attribute(attr: ir.Attribute) -> Any:
    """MLIR attribute -> python value (the inverse of `block_builder.to_attribute`)."""
    attr = attr.maybe_downcast() if hasattr(attr, "maybe_downcast") else attr
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr):
        return bool(attr.value) if ir.IntegerType(attr.type).width == 1 else attr.value
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return [from_attribute(a) for a in attr]
    if isinstance(attr, ir.UnitAttr):
        return None
    return attr


def value_sinfo(value: ir.Value) -> TensorStructInfo:
    return TensorStructInfo(value_shape(value), value_dtype(value))


def arg_constant(arg: Any) -> np.ndarray | None:
    """The value of a rule's argument (a var bound to an operand) that is a `relax.constant`, as
    numpy (a weight a strategy re-lays out at compile time), else None."""
    values = getattr(arg, "values", None)
    owner = values[0].owner if values else None
    if owner is None or isinstance(owner, ir.Block) or owner.name != rx.Constant.name:
        return None
    return dense.to_numpy(owner.attributes["value"])


def _scalar_constant(value: ir.Value) -> Constant | None:
    """A one-element `relax.constant` operand as a `Constant` (rules may fold it as a scalar)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != rx.Constant.name:
        return None
    sinfo = value_sinfo(value)
    if not sinfo.is_static or int(np.prod(sinfo.shape)) != 1 or sinfo.dtype == "bool":
        return None
    data = dense.to_numpy(owner.attributes["value"]).astype(np_dtype(sinfo.dtype))
    data = data.reshape(sinfo.shape)
    const = Constant(data)
    const.data = data
    const.struct_info = sinfo
    return const


def as_call(op: ir.Operation) -> Call:
    """The relax op as a `Call` over vars bound to its operands."""
    args: list[Expr] = []
    for i, v in enumerate(op.operands):
        arg = _scalar_constant(v) or Var(f"arg{i}", value_sinfo(v))
        arg.values = [v]
        args.append(arg)
    attrs = {
        name: from_attribute(op.attributes[name])
        for name in op.attributes
        if name not in _SKIPPED_ATTRS
    }
    outs = [value_sinfo(r) for r in op.results]
    sinfo = outs[0] if len(outs) == 1 else TupleStructInfo(outs)
    return Call(op.name, args, attrs, sinfo)
