"""`relax-inline-dataflow`: dissolve dataflow blocks into their function body.

After legalization and fusion the block boundaries carry no more information: lowering works
on a straight line of calls.
"""

from __future__ import annotations

from mlir import ir

from dialects import relax as rx
from lowering.registry import register_pass


def graph_functions(module_op: ir.Operation) -> list[ir.Operation]:
    """The `func.func` ops tagged as relax graph functions."""
    return [
        op.operation
        for op in module_op.regions[0].blocks[0].operations
        if op.operation.name == "func.func" and rx.FUNCTION_ATTR in op.operation.attributes
    ]


def dataflow_blocks(func_op: ir.Operation) -> list[ir.Operation]:
    return [
        op.operation
        for op in func_op.regions[0].blocks[0].operations
        if rx.is_dataflow(op.operation)
    ]


def inline_dataflow(module_op: ir.Operation) -> None:
    for func_op in graph_functions(module_op):
        inline_function_dataflow(func_op)


def inline_function_dataflow(func_op: ir.Operation) -> None:
    """The ops of `func_op`'s dataflow blocks moved into its body, the blocks erased."""
    for region_op in dataflow_blocks(func_op):
        body = region_op.regions[0].blocks[0]
        ops = [op.operation for op in body.operations]
        terminator = ops[-1]
        for op in ops[:-1]:
            op.move_before(region_op)
        for result, value in zip(region_op.results, list(terminator.operands)):
            result.replace_all_uses_with(value)
        region_op.erase()


@register_pass("relax-inline-dataflow", "move the ops of dataflow blocks into the enclosing function")
def relax_inline_dataflow():
    return inline_dataflow
