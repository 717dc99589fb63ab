"""The tunable knobs of the GPU schedule rules: their legal values for one kernel.

The CPU rules declare theirs in `lowering/schedule/space.py`; this is the same table for the
cuda target, read the same way (a kernel's `relax.schedule_knobs`, or the module's tuned table,
keyed by `kernel_key`, through `knobs_of` in `relax-schedule-gpu`). The default point of every
space is the schedule the rules choose on their own, so tuning can only add options.

The Matmul rule's contraction kernel (contract.py) has up to five knobs: the block tile among
the configs its operands allow (FMA, f16 / bf16 tensor cores, TF32), the K splits (split-K),
on tensor cores how many tiles the cp.async ring holds (0: as many as fit in shared memory),
and on FMA tiles how many blocks per SM their registers leave room for (0: the rule's choice)
and, for convolutions, whether K tiles hold whole windows (1) or keep the config's BK (0).
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir

from lowering.gpu import contract
from lowering.schedule.common import generalize, linalg_ops
from lowering.schedule.space import Knob

SPLIT_CHOICES = (1, 2, 4, 8, 16)
STAGE_CHOICES = (0, 2, 3, 4)


def _contraction(ops: list[ir.Operation], target) -> list[Knob]:
    tf32 = bool(target.get("allow-tf32", 0))
    wgmma = contract.has_wgmma(target)
    p = contract.plan(ops, tf32, wgmma=wgmma)
    if p is None:
        return []
    op = ops[p.contraction]
    configs = contract.configs_for(op, tf32, tuning=True, wgmma=wgmma)
    r = contract.roles(op)
    k = r.extent(r.k)
    splits = {s for s in SPLIT_CHOICES if s == 1 or k >= s * p.config.bk}
    knobs = [
        Knob(contract.TILE_KNOB, tuple(c.name for c in configs), p.config.name),
        Knob(contract.SPLITS_KNOB, tuple(sorted(splits | {p.splits})), p.splits),
    ]
    if p.config.mma:
        knobs.append(Knob(contract.STAGES_KNOB, STAGE_CHOICES, 0))
    elif not any(c.mma for c in configs):  # FMA tiles: their register cap, their K tiles
        knobs.append(Knob(contract.MIN_BLOCKS_KNOB, contract.MIN_BLOCKS_CHOICES, 0))
        if len(r.k) > 1:  # a window to tile K by
            knobs.append(Knob(contract.WINDOW_KNOB, (1, 0), 1))
    return knobs


# rule -> the knobs it reads, from the kernel's generalized ops
KNOB_TABLE: dict[str, Callable[[list[ir.Operation], object], list[Knob]]] = {
    "matmul": _contraction,
}


def space_for(func_op: ir.Operation, target) -> dict[str, Knob]:
    """The knobs of the GPU rules that schedule `func_op` for the cuda `target` (a Target:
    its attributes are read with `.get`); empty: nothing to tune."""
    scratch = ir.Module.create(loc=func_op.location)
    copy = func_op.clone(ip=ir.InsertionPoint(scratch.body))
    generalize(copy)
    ops = linalg_ops(copy)
    out: dict[str, Knob] = {}
    for rule in KNOB_TABLE.values():
        for knob in rule(ops, target):
            out.setdefault(knob.name, knob)
    return out
