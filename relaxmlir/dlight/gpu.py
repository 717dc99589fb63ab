"""`dl.gpu`: the GPU rules (rows of `lowering/gpu/schedule.RULES`), in DLight's names."""

from __future__ import annotations

from lowering.gpu import schedule as table
from relaxmlir.dlight.base import ScheduleRule
from relaxmlir.target import Target


def _rule(name: str, doc: str) -> type:
    def __init__(self) -> None:
        ScheduleRule.__init__(self, "cuda", name)

    return type(doc.split(":")[0], (ScheduleRule,), {"__init__": __init__, "__doc__": doc})


Matmul = _rule("matmul", "Matmul: 64x64 output tile per block, 4x4 register tile per thread")
GEMV = _rule("gemv", "GEMV: a matmul with few rows; one thread per output column")
Reduction = _rule("reduction", "Reduction: one thread per output, looping over the reduced axes")
GeneralReduction = _rule(
    "general_reduction", "GeneralReduction: softmax/layer norm; one block per row"
)
Fallback = _rule("fallback", "Fallback: one thread per element, coalesced along the last axis")


def apply(module_op, target: Target, names: list[str]) -> None:
    table.schedule_module(module_op, target, tuple(names))
