"""`relax-loop-annotations`: loop annotations from scf loops into LLVM IR's `!llvm.loop`.

A schedule marks a loop with `llvm.loop_annotation` (`Script.keep_rolled`: "do not unroll");
convert-scf-to-cf hands that attribute on to the loop's latch branch, and convert-to-llvm keeps it
there, but under its dialect-prefixed name: the translation to LLVM IR reads only the inherent
`loop_annotation` of `llvm.br` / `llvm.cond_br`, so the hint was dropped on the way. This pass,
after the conversion to the LLVM dialect, moves it to that attribute.
"""

from __future__ import annotations

from mlir import ir

from lowering.registry import register_pass
from lowering.schedule.common import LOOP_ANNOTATION_ATTR as _CARRIED

_BRANCHES = ("llvm.br", "llvm.cond_br")
_INHERENT = "loop_annotation"


def move_loop_annotations(module_op: ir.Operation) -> int:
    """Move every branch's carried annotation to its inherent one; returns how many."""
    moved = []

    def visit(op):
        op = op.operation
        if op.name in _BRANCHES and _CARRIED in op.attributes:
            moved.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for op in moved:
        value = op.attributes[_CARRIED]
        del op.attributes[_CARRIED]
        op.attributes[_INHERENT] = value
    return len(moved)


@register_pass(
    "relax-loop-annotations",
    "move llvm.loop_annotation from latch branches to the attribute LLVM IR translation reads",
)
def relax_loop_annotations():
    return move_loop_annotations
