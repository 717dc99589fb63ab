"""`relax-prim-func-dps`: make every primitive function return exactly its out-arguments.

A primitive function computes into its trailing out-arguments. When a body returns a tensor that
is not (a chain of in-place updates of) its out-argument, e.g. an intermediate built on
`tensor.empty`, bufferization would allocate and return a new buffer instead of writing the
caller's. Wrapping each returned value in `bufferization.materialize_in_destination` into the
out-argument (and letting `eliminate-empty-tensors` reuse that buffer) keeps the contract.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import bufferization

from dialects import relax as rx
from lowering.registry import register_pass
from lowering.views import covers_whole, row_major_view


def prim_funcs(module_op: ir.Operation) -> list[ir.Operation]:
    return [
        op.operation
        for op in module_op.regions[0].blocks[0].operations
        if op.operation.name == "func.func"
        and rx.PRIM_FUNC_ATTR in op.operation.attributes
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


def _view_source(value: ir.Value) -> ir.Value | None:
    """The tensor `value` is a row-major view of (same elements, same order): through
    collapse_shape / expand_shape and an insert_slice that fills a whole `tensor.empty` (TE's
    unit axes); None when `value` is not such a view."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name in ("tensor.collapse_shape", "tensor.expand_shape"):
        return op.operands[0]
    if op.name == "tensor.insert_slice":
        dest = op.operands[-1]
        if isinstance(dest.owner, ir.Block) or dest.owner.operation.name != "tensor.empty":
            return None
        if len(list(dest.uses)) != 1 or not covers_whole(op):
            return None
        return op.operands[0]
    return None


def _update_through_views(value: ir.Value, out: ir.Value, terminator) -> ir.Value | None:
    """A result that is a reshape of a computation on a fresh `tensor.empty` (a permute whose
    output is then collapsed, [128, 4, 64] -> [128, 256]) computes straight into the matching
    view of `out`: without this, it was computed into a temporary and copied to `out`, serially,
    after the kernel's parallel loops."""
    source = _view_source(value)
    while source is not None and _view_source(source) is not None:
        source = _view_source(source)
    if source is None:
        return None
    root = chain_root(source)
    if isinstance(root.owner, ir.Block) or root.owner.operation.name != "tensor.empty":
        return None
    root_t, out_t = ir.RankedTensorType(root.type), ir.RankedTensorType(out.type)
    if not (root_t.has_static_shape and out_t.has_static_shape) or len(list(root.uses)) != 1:
        return None
    if root_t.element_type != out_t.element_type or math.prod(root_t.shape) != math.prod(
        out_t.shape
    ):
        return None
    with ir.InsertionPoint(root.owner.operation), root.owner.operation.location:
        view = row_major_view(out, root.type)
    root.replace_all_uses_with(view)
    root.owner.operation.erase()
    # The result is `source` reshaped to `out` (the insert into a fresh tensor would copy).
    with ir.InsertionPoint(terminator), terminator.location:
        return row_major_view(source, out.type)


def _erase_unused(value: ir.Value) -> None:
    """Erase the op defining `value` and then its operands' defining ops while nothing uses them."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v.owner, ir.Block):
            continue
        op = v.owner.operation
        if not op.name.startswith("tensor.") or any(len(list(r.uses)) for r in op.results):
            continue  # only the views and empties this pass replaced (tensor ops: no effects)
        operands = list(op.operands)
        op.erase()
        stack.extend(operands)


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


_READ_ONLY_USERS = ("tensor.collapse_shape", "tensor.expand_shape", "tensor.extract_slice")


def reshape_unit_inserts(func_op: ir.Operation) -> None:
    """`insert_slice %x into %empty` filling the whole of a fresh tensor (TE's squeeze and
    expand_dims of unit axes, after unit dims were dropped) -> a reshape of %x, where only
    reshapes and slices read it: bufferization copied %x into a new buffer (the Q/K/V slices of
    attention: a 128 KB serial copy each, before their parallel loops)."""
    for op in list(_walk(func_op)):
        if op.name != "tensor.insert_slice":
            continue
        value = op.results[0]
        if _view_source(value) is None or not all(
            u.owner.name in _READ_ONLY_USERS for u in value.uses
        ):
            continue
        dest = op.operands[1]
        with ir.InsertionPoint(op), op.location:
            view = row_major_view(op.operands[0], value.type)
        value.replace_all_uses_with(view)
        op.erase()
        if not list(dest.uses):
            dest.owner.erase()


def _walk(func_op: ir.Operation):
    for block in func_op.regions[0].blocks:
        for op in block.operations:
            yield op.operation


def materialize_results(module_op: ir.Operation) -> None:
    from lowering.fuse_tir import make_inplace

    for func_op in prim_funcs(module_op):
        make_inplace(func_op)
        reshape_unit_inserts(func_op)
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
            reshaped = _update_through_views(value, out, terminator)
            if reshaped is not None:
                # a view of the out-argument itself, which bufferization returns as is
                terminator.operands[i] = reshaped
                _erase_unused(value)  # the old views: a second reader would force a copy
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
