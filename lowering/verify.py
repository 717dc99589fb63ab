"""`relax-verify`: semantic checks of the relax dialect that IRDL cannot express."""

from __future__ import annotations

from mlir import ir

from dialects import relax as rx
from dialects.irdl_dsl import Attr
from lowering.registry import PassError, register_pass


def verify_module(module_op: ir.Operation) -> None:
    """Raise PassError at the first relax op that fails its op class's `verify`."""
    failure: list[tuple[ir.Operation, str]] = []

    def visit(op):
        op = op.operation if hasattr(op, "operation") else op
        if failure:
            return ir.WalkResult.INTERRUPT
        cls = rx.op_class(op.name)
        if cls is None:
            return ir.WalkResult.ADVANCE
        for key, attr in cls.fields(Attr):
            if key in op.attributes:
                problem = attr.refine(op.attributes[key])
                if problem:
                    failure.append((op, f"'{op.name}' op attribute '{key}' {problem}"))
                    return ir.WalkResult.INTERRUPT
        if cls.verify is not None:
            message = cls.verify(op)
            if message:
                failure.append((op, f"'{op.name}' op {message}"))
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    if failure:
        op, message = failure[0]
        raise PassError(message, op)


@register_pass("relax-verify", "check relax ops beyond IRDL: callees, arity, placement in dataflow")
def relax_verify():
    return verify_module
