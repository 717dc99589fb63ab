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


def chain_root(value: ir.Value) -> ir.Value:
    """Follow destination-passing updates back to the tensor that `value` updates in place."""
    while True:
        owner = value.owner
        if isinstance(owner, ir.Block):
            return value
        op = owner.operation
        index = value.result_number
        if op.name == "scf.for":
            value = op.operands[3 + index]  # lower bound, upper bound, step, then the inits
        elif op.name == "scf.forall":
            value = op.operands[len(op.operands) - len(op.results) + index]
        elif op.name in ("tensor.insert_slice", "vector.transfer_write", "tensor.insert"):
            value = op.operands[1]
        elif op.name.startswith("linalg.") and op.name != "linalg.pack":
            value = op.operands[len(op.operands) - len(op.results) + index]  # results tie to outs
        else:
            return value


def _branch_results(value: ir.Value) -> list[ir.Value] | None:
    """The values an `scf.if` result takes in each branch (the schedule's run-time dispatch
    copies of a body, lowering/schedule/driver.py), else None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "scf.if":
        return None
    op = owner.operation
    yields = [list(r.blocks[0].operations)[-1] for r in op.regions if len(r.blocks)]
    return [y.operands[value.result_number] for y in yields]


def _update_in_place(value: ir.Value, out: ir.Value) -> bool:
    """Make `value` a chain of in-place updates of `out` when it is one already or grows from a
    fresh `tensor.empty` (then computed straight into `out`); through both branches of an
    `scf.if`. False: the caller copies `value` into `out`."""
    branches = _branch_results(value)
    if branches is not None:
        roots = [chain_root(v) for v in branches]
        if all(r == out for r in roots):
            return True
        if all(_fresh(r, out) for r in roots):
            for r in roots:
                r.replace_all_uses_with(out)
            return True
        return False
    root = chain_root(value)
    if root == out:
        return True  # already a chain of in-place updates of the out-argument
    if _fresh(root, out):
        root.replace_all_uses_with(out)  # compute straight into the out-argument
        return True
    return False


def _fresh(root: ir.Value, out: ir.Value) -> bool:
    fresh = not isinstance(root.owner, ir.Block) and root.owner.operation.name == "tensor.empty"
    return fresh and root.type == out.type and len(list(root.uses)) == 1


def unshare_empty_tensors(func_op: ir.Operation) -> None:
    """Give each user of a `tensor.empty` its own: CSE merges equal empties, and two chains
    growing from one empty (a matmul and the loop that writes its epilogue) would have to share
    a buffer, which bufferization cannot do inside loops ("cannot avoid RaW conflict")."""
    for op in [o.operation for o in func_op.regions[0].blocks[0].operations]:
        if op.name != "tensor.empty":
            continue
        uses = [(u.owner, u.operand_number) for u in op.results[0].uses]
        for owner, index in uses[1:]:
            clone = op.clone(ir.InsertionPoint.after(op))
            owner.operands[index] = clone.results[0]


def materialize_results(module_op: ir.Operation) -> None:
    from lowering.fuse_tir import make_inplace

    for func_op in prim_funcs(module_op):
        make_inplace(func_op)
        unshare_empty_tensors(func_op)
        block = func_op.regions[0].blocks[0]
        args = list(block.arguments)
        terminator = list(block.operations)[-1]
        results = list(terminator.operands)
        outs = args[len(args) - len(results) :]
        for i, (value, out) in enumerate(zip(results, outs)):
            if value == out or value.type != out.type:
                continue
            if _update_in_place(value, out):
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
