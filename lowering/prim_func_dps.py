"""`relax-prim-func-dps`: make every primitive function return exactly its out-arguments.

A primitive function computes into its trailing out-arguments. When a body returns a tensor that
is not (a chain of in-place updates of) its out-argument, e.g. an intermediate built on
`tensor.empty`, bufferization would allocate and return a new buffer instead of writing the
caller's. Wrapping each returned value in `bufferization.materialize_in_destination` into the
out-argument (and letting `eliminate-empty-tensors` reuse that buffer) keeps the contract.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import bufferization

from dialects import relax as rx
from lowering.registry import register_pass


def prim_funcs(module_op: ir.Operation) -> list[ir.Operation]:
    return [
        op.operation
        for op in module_op.regions[0].blocks[0].operations
        if op.operation.name == "func.func" and rx.PRIM_FUNC_ATTR in op.operation.attributes
        and len(op.operation.regions[0].blocks) > 0
    ]


def materialize_results(module_op: ir.Operation) -> None:
    from lowering.fuse_tir import make_inplace

    for func_op in prim_funcs(module_op):
        make_inplace(func_op)
        block = func_op.regions[0].blocks[0]
        args = list(block.arguments)
        terminator = list(block.operations)[-1]
        results = list(terminator.operands)
        outs = args[len(args) - len(results) :]
        for i, (value, out) in enumerate(zip(results, outs)):
            if value == out or value.type != out.type:
                continue
            with ir.InsertionPoint(terminator), terminator.location:
                mat = bufferization.MaterializeInDestinationOp(value.type, value, out)
            terminator.operands[i] = mat.result


@register_pass(
    "relax-prim-func-dps",
    "write the results of primitive functions into their out-arguments (destination passing)",
)
def relax_prim_func_dps():
    return materialize_results
