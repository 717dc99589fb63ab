"""`dl.gpu`: the GPU rules (rows of `lowering/gpu/schedule.RULES`), in DLight's names."""

from __future__ import annotations

from lowering.gpu import schedule as table
from relaxmlir.dlight.base import ScheduleRule
from relaxmlir.target import Target


def _rule(name: str, doc: str) -> type:
    def __init__(self) -> None:
        ScheduleRule.__init__(self, "cuda", name)

    return type(doc.split(":")[0], (ScheduleRule,), {"__init__": __init__, "__doc__": doc})


Matmul = _rule(
    "matmul",
    "Matmul: contractions (convolutions too) staged through shared memory, register tiles, "
    "split-K, epilogue folded in",
)
GEMV = _rule("gemv", "GEMV: a matmul with few rows; one thread per output column")
Reduction = _rule(
    "reduction",
    "Reduction: one block per row over trailing axes, else one thread per output",
)
GeneralReduction = _rule(
    "general_reduction", "GeneralReduction: softmax/layer norm; one block per row, warp shuffles"
)
Fallback = _rule(
    "fallback",
    "Fallback: one thread per element, coalesced along the last axis; transposes via shared tiles",
)


def apply(module_op, target: Target, names: list[str]) -> None:
    table.schedule_module(module_op, target, tuple(names))
