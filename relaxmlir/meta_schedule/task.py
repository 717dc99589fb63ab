"""Tuning tasks: the kernels of a module as the build will schedule them.

The module goes through the target's "graph" and "layout" stages (fusion, deduplication, weight
layouts), exactly as `relax.build` runs them, so each task is a kernel the schedule pass will
see, under the key it will look up (`lowering.schedule.space.kernel_key`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from dialects import relax as rx
from lowering.pipelines import PIPELINES, target_pipeline
from lowering.registry import run_pipeline
from lowering.schedule import prim_funcs
from lowering.schedule.common import ScheduleOptions, classify, linalg_ops
from lowering.schedule.space import Knob, kernel_key, space_for
from relaxmlir.ir import IRModule
from relaxmlir.scope import scope
from relaxmlir.target import Target


@dataclass
class Task:
    key: str
    name: str
    func_text: str  # the kernel alone, as MLIR text (a public func in its own module)
    space: dict[str, Knob]
    calls: int  # call sites in the model
    flops: int  # 2 x multiply-adds for contractions, elements otherwise (an estimate)

    def default_knobs(self) -> dict:
        return {name: knob.default for name, knob in self.space.items()}


def _flops(func_op: ir.Operation) -> int:
    total = 0
    for op in linalg_ops(func_op):
        info = classify(op)
        if not info.static:
            return 0
        points = 1
        for r in info.ranges:
            points *= r or 1
        total += 2 * points if info.pattern in ("matmul", "conv") else points
    return total


def _static(func_op: ir.Operation) -> bool:
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    return all(ir.ShapedType(t).has_static_shape for t in list(ftype.inputs) + list(ftype.results))


def lower_for_tuning(mod: IRModule, target: Target) -> IRModule:
    """A copy of `mod` after the relax "zero" pipeline (when it still has high-level ops) and
    the target's graph and layout stages."""
    mod = mod.clone()
    passes = (
        PIPELINES["zero"] if rx.high_level_ops(mod.module.operation) else []
    ) + target_pipeline(target, ["graph", "layout"])
    with scope(), target:
        run_pipeline(mod.module, "builtin.module(" + ",".join(passes) + ")")
    return mod


def extract_tasks(mod: IRModule, target: Target) -> list[Task]:
    """The tunable kernels of `mod` for `target`, heaviest first (static shapes only: a kernel
    with symbolic dims has no one size to measure)."""
    if target.kind != "llvm":
        raise ValueError(f"tuning: only llvm targets have tunable schedules so far, got ({target})")
    lowered = lower_for_tuning(mod, target)
    module_op = lowered.module.operation
    calls: dict[str, int] = {}

    def count(op):
        op = op.operation
        if op.name == rx.CallTIR.name:
            name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            calls[name] = calls.get(name, 0) + 1
        return ir.WalkResult.ADVANCE

    module_op.walk(count)
    with scope(), target:
        return _tasks(module_op, target, calls)


def _tasks(module_op: ir.Operation, target: Target, calls: dict[str, int]) -> list[Task]:
    opts = ScheduleOptions(target=target)
    tasks: dict[str, Task] = {}
    for func_op in prim_funcs(module_op):
        name = ir.StringAttr(func_op.attributes["sym_name"]).value
        if not _static(func_op) or not linalg_ops(func_op):
            continue
        space = space_for(func_op, opts)
        if not space:
            continue
        key = kernel_key(func_op, target)
        if key in tasks:
            tasks[key].calls += calls.get(name, 1)
            continue
        with func_op.context, ir.Location.unknown():
            scratch = ir.Module.create()
            copy = func_op.clone(ip=ir.InsertionPoint(scratch.body))
            copy.attributes["sym_visibility"] = ir.StringAttr.get("public")
            copy.attributes["sym_name"] = ir.StringAttr.get("kernel")
        tasks[key] = Task(key, name, str(scratch), space, calls.get(name, 1), _flops(func_op))
    return sorted(tasks.values(), key=lambda t: -t.flops * t.calls)
