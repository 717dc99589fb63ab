"""The `relax` dialect: graph-level ops of relaxmlir, defined from Python through IRDL.

Naming: IRDL op names may not contain dots, so TVM's `relax.nn.softmax` is spelled
`relax.nn_softmax` here; `mlir_op_name` is the one place that maps between the two.

A dataflow block is an upstream `scf.execute_region` tagged with the unit attribute
`relax.dataflow` (see `DATAFLOW_ATTR`): IRDL in MLIR 22 cannot declare a terminator, and
`scf.execute_region` (run the region once, yield its outputs) is exactly a dataflow block, its
`scf.yield` being `R.output`. `no_inline` keeps canonicalization from dissolving it.
"""

from __future__ import annotations

from typing import Optional

from mlir import ir

from dialects.irdl_dsl import Attr, Dialect, Op, Operand, Result
from dialects.shape import isa

RELAX = Dialect("relax")

DATAFLOW_ATTR = "relax.dataflow"  # unit attribute on scf.execute_region
FUNCTION_ATTR = "relax.function"  # unit attribute on a graph-level func.func
PRIM_FUNC_ATTR = "relax.prim_func"  # unit attribute on a destination-passing primitive function
SHAPE_ATTR = "relax.shape"  # symbolic shapes: arg attr, or op attr holding one list per result


def mlir_op_name(tvm_name: str) -> str:
    """`relax.nn.softmax` -> `relax.nn_softmax` (IRDL op names cannot contain dots)."""
    head, _, rest = tvm_name.partition(".")
    return f"{head}.{rest.replace('.', '_')}"


def is_dataflow(op: ir.Operation) -> bool:
    return op.name == "scf.execute_region" and DATAFLOW_ATTR in op.attributes


def enclosing_dataflow(op: ir.Operation) -> Optional[ir.Operation]:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if is_dataflow(parent):
            return parent
        parent = parent.parent
    return None


def lookup_symbol(op: ir.Operation, name: str) -> Optional[ir.Operation]:
    """Find the func.func named `name` in the module that encloses `op`."""
    module = op
    while module is not None and module.name != "builtin.module":
        module = module.parent
    if module is None:
        return None
    for candidate in module.regions[0].blocks[0].operations:
        sym = candidate.attributes["sym_name"] if "sym_name" in candidate.attributes else None
        if sym is not None and ir.StringAttr(sym).value == name:
            return candidate.operation
    return None


def _verify_call_tir(op: ir.Operation) -> Optional[str]:
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    func = lookup_symbol(op, callee)
    if func is None:
        return f"callee @{callee} not found in the module"
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    expected = len(op.operands) + len(op.results)
    if len(ftype.inputs) != expected:
        return (
            f"callee @{callee} takes {len(ftype.inputs)} arguments, expected ({expected}): "
            f"{len(op.operands)} inputs + {len(op.results)} outputs"
        )
    actual = [v.type for v in op.operands] + [r.type for r in op.results]
    for i, (want, got) in enumerate(zip(ftype.inputs, actual)):
        if not _compatible(want, got):
            return f"argument #{i} of @{callee} has type ({want}), got ({got})"
    return None


def _compatible(a: ir.Type, b: ir.Type) -> bool:
    if a == b:
        return True
    if not (isa(a, ir.RankedTensorType) and isa(b, ir.RankedTensorType)):
        return False
    a, b = ir.RankedTensorType(a), ir.RankedTensorType(b)
    if a.element_type != b.element_type or a.rank != b.rank:
        return False
    dyn = ir.ShapedType.get_dynamic_size()
    return all(x == y or dyn in (x, y) for x, y in zip(a.shape, b.shape))


def _verify_not_in_dataflow(op: ir.Operation) -> Optional[str]:
    if enclosing_dataflow(op) is not None:
        return "is side-effecting and not allowed inside a dataflow block"
    return None


def _verify_packed_name(op: ir.Operation) -> Optional[str]:
    if not ir.StringAttr(op.attributes["callee"]).value:
        return "expects a non-empty packed function name"
    return None


def _verify_constant(op: ir.Operation) -> Optional[str]:
    value = op.attributes["value"]
    if not isa(value, ir.DenseElementsAttr):
        return "expects a dense elements value"
    if ir.DenseElementsAttr(value).type != op.results[0].type:
        return f"value type ({ir.DenseElementsAttr(value).type}) does not match result type ({op.results[0].type})"
    return None


@RELAX.op
class CallTIR(Op):
    """Destination-passing call of a primitive function: outputs are allocated by the caller."""

    mnemonic = "call_tir"
    args = Operand("tensor", variadic=True)
    outs = Result("tensor", variadic=True)
    callee = Attr("symbol")
    verify = staticmethod(_verify_call_tir)


@RELAX.op
class CallDPSPacked(Op):
    """Destination-passing call of a registered (packed) function, by name."""

    mnemonic = "call_dps_packed"
    args = Operand("tensor", variadic=True)
    outs = Result("tensor", variadic=True)
    callee = Attr("string")
    verify = staticmethod(_verify_packed_name)


@RELAX.op
class CallPacked(Op):
    """Side-effecting call of a registered function that may write its arguments in place."""

    mnemonic = "call_packed"
    args = Operand("tensor", variadic=True)
    callee = Attr("string")

    @staticmethod
    def verify(op: ir.Operation) -> Optional[str]:
        return _verify_packed_name(op) or _verify_not_in_dataflow(op)


@RELAX.op
class AllocTensor(Op):
    """`R.builtin.alloc_tensor`: a fresh, uninitialised tensor; side-effecting, so outside dataflow."""

    mnemonic = "builtin_alloc_tensor"
    out = Result("tensor")
    verify = staticmethod(_verify_not_in_dataflow)


@RELAX.op
class Constant(Op):
    """A constant tensor (weights); printed elided when large."""

    mnemonic = "constant"
    out = Result("tensor")
    value = Attr("any")
    verify = staticmethod(_verify_constant)


# Ops that may not appear inside a dataflow block (they have effects the block may not have).
SIDE_EFFECTING = {CallPacked.name, AllocTensor.name}


def op_class(name: str) -> Optional[type[Op]]:
    return RELAX.ops.get(name)


def create(name: str, operands=(), results=(), attributes=None, loc=None) -> ir.Operation:
    """Create the relax op `name` (adds segment sizes for variadic groups)."""
    cls = op_class(name)
    if cls is None:
        raise ValueError(f"unknown relax op '{name}'")
    return cls.create(operands, results, attributes, loc)
