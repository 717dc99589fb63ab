"""Composite functions: what `FuseOpsByPattern` cuts out of a relax graph.

A composite function is a private `func.func` holding the ops one pattern matched, tagged with
`relax.composite = "<codegen>.<kernel>"` (and `relax.codegen` when annotated for a codegen); the
graph calls it with `func.call`. `RunCodegen` replaces those calls by library calls.
`relax-inline-composites` puts the ops of the calls still left back in place, so a module
partitioned but not offloaded compiles with the project's own kernels (and its fusion).
"""

from __future__ import annotations

from mlir import ir

from dialects import relax as rx
from lowering.dataflow import graph_functions
from lowering.registry import register_pass

COMPOSITE_ATTR = "relax.composite"  # on a composite func.func: the pattern's name
CODEGEN_ATTR = "relax.codegen"  # ... and the codegen that should compile it


def composite_functions(module_op: ir.Operation) -> dict[str, ir.Operation]:
    """Composite functions of the module by name."""
    out = {}
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and COMPOSITE_ATTR in op.attributes:
            out[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return out


def calls_of(module_op: ir.Operation, names: set[str]) -> list[ir.Operation]:
    """The `func.call`s of functions in `names` inside relax graph functions."""
    found: list[ir.Operation] = []

    def visit(op):
        op = op.operation
        if op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in names:
            found.append(op)
        return ir.WalkResult.ADVANCE

    for func_op in graph_functions(module_op):
        func_op.walk(visit)
    return found


def leaves(root: ir.Operation, inside: list[ir.Operation], dedupe: bool) -> list[ir.Value]:
    """Values the matched ops read from outside the match, depth first from the root."""
    out: list[ir.Value] = []

    def visit(value: ir.Value) -> None:
        owner = value.owner
        op = None if isinstance(owner, ir.Block) else owner.operation
        if op is not None and any(op == o for o in inside):
            for operand in op.operands:
                visit(operand)
        elif not dedupe or all(value != v for v in out):
            out.append(value)

    for operand in root.operands:
        visit(operand)
    return out


def composite_leaves(callee: ir.Operation) -> list[ir.Value]:
    """The inputs of a composite function's kernel, in pattern order (depth first from the
    result, operands left to right, repeats kept): parameters and bound constants."""
    body = callee.regions[0].blocks[0]
    ret = list(body.operations)[-1]
    root = ret.operands[0].owner.operation
    inside = [op.operation for op in body.operations if op.operation.name != rx.Constant.name][:-1]
    return leaves(root, inside, dedupe=False)


def inline_call(call: ir.Operation, callee: ir.Operation) -> None:
    """Clone `callee`'s body in place of `call` (params -> the call's operands)."""
    body = callee.regions[0].blocks[0]
    mapping = {arg: operand for arg, operand in zip(body.arguments, call.operands)}
    ip = ir.InsertionPoint(call)
    ops = [op.operation for op in body.operations]
    for op in ops[:-1]:
        clone = op.clone(ip=ip)
        for i, operand in enumerate(op.operands):
            if operand in mapping:
                clone.operands[i] = mapping[operand]
        for old, new in zip(op.results, clone.results):
            mapping[old] = new
    for result, value in zip(call.results, ops[-1].operands):
        result.replace_all_uses_with(mapping.get(value, value))
    call.erase()


def inline_composites(module_op: ir.Operation) -> None:
    composites = composite_functions(module_op)
    if not composites:
        return
    for call in calls_of(module_op, set(composites)):
        inline_call(call, composites[ir.FlatSymbolRefAttr(call.attributes["callee"]).value])
    for op in composites.values():
        op.erase()


@register_pass(
    "relax-inline-composites",
    "put the ops of composite functions not offloaded by RunCodegen back into their callers",
)
def relax_inline_composites():
    return inline_composites
