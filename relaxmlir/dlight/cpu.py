"""`dl.cpu`: the CPU rules (the `relax-schedule-cpu` table, keyed by op pattern), in DLight's form.

A PrimFunc is scheduled when every one of its ops falls under a given rule's pattern; the others
are left to `relax.build`, whose schedule stage runs the whole table.
"""

from __future__ import annotations

from mlir import ir

from lowering.schedule import prim_funcs
from lowering.schedule.common import ScheduleOptions, classify, linalg_ops
from lowering.schedule.driver import schedule_function
from lowering.schedule.normalize import normalize_function
from relaxmlir.dlight.base import ScheduleRule
from relaxmlir.target import Target


def _rule(name: str, doc: str) -> type:
    def __init__(self) -> None:
        ScheduleRule.__init__(self, "llvm", name)

    return type(doc.split(":")[0], (ScheduleRule,), {"__init__": __init__, "__doc__": doc})


Matmul = _rule("matmul", "Matmul: packed panels, register micro-tiles, cache tiles, threads")
GEMV = _rule("gemv", "GEMV: the matmul rule, whose tiles follow the row count (1-row panels)")
Conv = _rule("conv", "Conv: direct convolution, vectorized over output width and channels")
Reduction = _rule("reduction", "Reduction: vectorized reductions along the innermost axis")
GeneralReduction = _rule(
    "general_reduction", "GeneralReduction: reductions and their elementwise users"
)
Elementwise = _rule(
    "elementwise",
    "Elementwise: vectorized (gathers along one loop too), split across threads when large",
)
Fallback = _rule(
    "fallback", "Fallback: elementwise, conv and irregular ops (naive loops for those)"
)

# Rule -> the op patterns of the CPU table (lowering/schedule) it covers.
PATTERNS = {
    "matmul": {"matmul"},
    "gemv": {"matmul"},
    "conv": {"conv"},
    "reduction": {"reduction"},
    "general_reduction": {"reduction", "elementwise"},
    "elementwise": {"elementwise", "gather"},
    "fallback": {"fallback", "elementwise", "gather", "conv"},
}


def _patterns(func_op: ir.Operation) -> set[str]:
    scratch = ir.Module.create(loc=func_op.location)
    copy = func_op.clone(ip=ir.InsertionPoint(scratch.body))
    normalize_function(copy)
    return {classify(op).pattern for op in linalg_ops(copy)}


def apply(module_op: ir.Operation, target: Target, names: list[str]) -> None:
    opts = ScheduleOptions(target)
    covered = set().union(*(PATTERNS[n] for n in names))
    for func_op in prim_funcs(module_op):
        patterns = _patterns(func_op)
        if patterns and patterns <= covered:
            schedule_function(func_op, opts)
