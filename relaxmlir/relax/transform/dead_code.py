"""`DeadCodeElimination` (`relax-dead-code-elimination`): drop unused pure relax ops, unused
dataflow-block outputs, and private PrimFuncs that nothing calls."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf

from dialects import relax as rx
from lowering.dataflow import graph_functions
from lowering.registry import register_pass
from relaxmlir.transform import Pass


def _ops(func_op: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def collect(op):
        found.append(op.operation if hasattr(op, "operation") else op)
        return ir.WalkResult.ADVANCE

    func_op.walk(collect)
    return found


def _unused(op: ir.Operation) -> bool:
    return all(not list(r.uses) for r in op.results)


def _shrink_dataflow(op: ir.Operation) -> bool:
    """Drop the unused results of a dataflow block (and the block itself once empty)."""
    keep = [i for i, r in enumerate(op.results) if list(r.uses)]
    if len(keep) == len(op.results):
        return False
    body = op.regions[0].blocks[0]
    terminator = list(body.operations)[-1]
    if not keep and len(list(body.operations)) == 1:
        op.erase()
        return True
    values = [terminator.operands[i] for i in keep]
    with ir.InsertionPoint(op), op.location:
        new = scf.ExecuteRegionOp([v.type for v in values], no_inline=True)
    new.operation.attributes[rx.DATAFLOW_ATTR] = ir.UnitAttr.get(op.context)
    body.append_to(new.regions[0])
    with ir.InsertionPoint(terminator), terminator.location:
        scf.YieldOp(values)
    terminator.erase()
    for i, result in zip(keep, new.results):
        op.results[i].replace_all_uses_with(result)
    op.erase()
    return True


def _eliminate_in_function(func_op: ir.Operation) -> None:
    changed = True
    while changed:
        changed = False
        for op in reversed(_ops(func_op)):  # users before producers
            if rx.is_dataflow(op):
                if _shrink_dataflow(op):
                    changed = True
                    break  # the walk's handles into the old block are stale now
            elif (
                op.name.startswith("relax.")
                and op.name not in rx.SIDE_EFFECTING
                and op.results
                and _unused(op)
            ):
                op.erase()
                changed = True


def _referenced_symbols(module_op: ir.Operation) -> set[str]:
    names: set[str] = set()

    def visit(op):
        op = op.operation if hasattr(op, "operation") else op
        if (op.name in rx.CALLS_TIR or op.name == "func.call") and "callee" in op.attributes:
            names.add(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    return names


def eliminate_dead_code(module_op: ir.Operation) -> None:
    for func_op in graph_functions(module_op):
        _eliminate_in_function(func_op)
    used = _referenced_symbols(module_op)
    for op in list(module_op.regions[0].blocks[0].operations):
        op = op.operation
        if op.name != "func.func" or rx.PRIM_FUNC_ATTR not in op.attributes:
            continue
        private = (
            "sym_visibility" in op.attributes
            and ir.StringAttr(op.attributes["sym_visibility"]).value == "private"
        )
        if private and ir.StringAttr(op.attributes["sym_name"]).value not in used:
            op.erase()


@register_pass(
    "relax-dead-code-elimination",
    "remove unused pure relax ops, unused dataflow outputs and unreferenced private PrimFuncs",
)
def relax_dead_code_elimination():
    return eliminate_dead_code


def DeadCodeElimination(entry_functions=None) -> Pass:
    """Remove unused bindings and PrimFuncs no graph function calls.

    Parameters
    ----------
    entry_functions : list of str, optional
        Accepted for TVM compatibility; every graph function is kept.

    Returns
    -------
    Pass
    """
    return Pass("DeadCodeElimination", lambda mod: eliminate_dead_code(mod.module.operation))
