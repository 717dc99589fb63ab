"""`relax-verify`: semantic checks of the relax dialect that IRDL cannot express.

Besides each op class's own `verify` (callees, arity, placement), every high-level op's declared
result types are checked against its inference rule. Those rules are the user API's
(`relax.op.*`, a higher stage), so they register themselves here (`register_type_check`) when
`relaxmlir.relax` is imported, as `relaxmlir-opt` and `relax.build` do.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir

from dialects import relax as rx
from dialects.irdl_dsl import Attr
from lowering.registry import PassError, register_pass

TypeCheck = Callable[[ir.Operation], str | None]
# relax op name -> check of its declared result types (None when they are right, else why not)
TYPE_CHECKS: dict[str, TypeCheck] = {}


def register_type_check(op_name: str, check: TypeCheck) -> None:
    TYPE_CHECKS[op_name] = check


def check_op(op: ir.Operation) -> str | None:
    """The first problem with one relax op (attributes, its class's checks, result types)."""
    cls = rx.op_class(op.name)
    if cls is None:
        return None
    for key, attr in cls.fields(Attr):
        if key in op.attributes:
            problem = attr.refine(op.attributes[key])
            if problem:
                return f"'{op.name}' op attribute '{key}' {problem}"
    if cls.verify is not None:
        message = cls.verify(op)
        if message:
            return f"'{op.name}' op {message}"
    type_check = TYPE_CHECKS.get(op.name)
    if type_check is not None:
        message = type_check(op)
        if message:
            return f"'{op.name}' op {message}"
    return None


def verify_module(module_op: ir.Operation) -> None:
    """Raise PassError at the first relax op that fails its op class's `verify`."""
    failure: list[tuple[ir.Operation, str]] = []

    def visit(op):
        op = op.operation if hasattr(op, "operation") else op
        if failure:
            return ir.WalkResult.INTERRUPT
        message = check_op(op)
        if message:
            failure.append((op, message))
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    with rx.cached_symbols(module_op):  # every call_tir's callee
        module_op.walk(visit)
    if failure:
        op, message = failure[0]
        raise PassError(message, op)


@register_pass(
    "relax-verify",
    "check relax ops beyond IRDL: callees, arity, placement in dataflow, result types",
)
def relax_verify():
    return verify_module
