"""Tuning tasks: the kernels of a module as the build will schedule them, and the op calls whose
implementation the strategy table chooses.

The module goes through the target's "graph" and "layout" stages (fusion, deduplication, weight
layouts), exactly as `relax.build` runs them, so each task is a kernel the schedule pass will
see, under the key it will look up (`lowering.schedule.space.kernel_key`).

While LegalizeOps runs there, every high-level op call that its strategy legalizes with a choice
of several valid implementations (`relax.op.strategy.record_choices`) becomes a strategy task
(`kind="strategy"`): its key is the call's workload (`strategy.workload_key`: op, operand and
result types, attributes, target), its one knob `"strategy"` the names of the valid
implementations (the default: the one priority picks), and its candidate a module of that one
call (operands the build folds, such as weights, as constants of random values, the others as
parameters), built with the implementation named in the module's table of tuned choices, the
table `MetaScheduleApplyDatabase` writes. Only modules that still hold
high-level ops have strategy tasks (after `get_pipeline("zero")` the choice is made).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir

from dialects import relax as rx
from lowering.gpu import space as gpu_space
from lowering.pipelines import PIPELINES, target_pipeline, target_stages
from lowering.registry import run_pipeline
from lowering.schedule import prim_funcs
from lowering.schedule.common import ScheduleOptions, classify, linalg_ops
from lowering.schedule.space import Knob, default_point, kernel_key, space_for
from relaxmlir.ir import IRModule
from relaxmlir.meta_schedule.database import STRATEGY_KNOB
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
    kind: str = "kernel"  # or "strategy": func_text is a relax module of one op call

    def default_knobs(self) -> dict:
        return default_point(self.space)


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


def stage_names(target: Target) -> list[str]:
    return [name for name, _ in target_stages(target)]


def lower_for_tuning(mod: IRModule, target: Target, choices: list | None = None) -> IRModule:
    """A copy of `mod` after the relax "zero" pipeline (when it still has high-level ops) and
    the target's graph and layout stages; `choices` gets the strategy choices LegalizeOps made."""
    from relaxmlir.relax.op.strategy import record_choices

    mod = mod.clone()
    passes = (
        PIPELINES["zero"] if rx.high_level_ops(mod.module.operation) else []
    ) + target_pipeline(target, [s for s in ("graph", "layout") if s in stage_names(target)])
    with scope(), target, record_choices() as seen:
        run_pipeline(mod.module, "builtin.module(" + ",".join(passes) + ")")
    if choices is not None:
        choices.extend(seen)
    return mod


def _call_flops(choice) -> int:
    """2 x multiply-adds of a conv2d (any layout: a weight's elements over the output
    channels per output point) or matmul call, the result's elements otherwise."""
    out = choice.call.struct_info
    points = math.prod(getattr(out, "shape", ()))
    op, args = choice.op, [a.struct_info for a in choice.call.args]
    if op == rx.mlir_op_name("relax.nn.conv2d"):
        channels = out.shape[1] * (out.shape[4] if out.ndim == 5 else 1)
        return 2 * points * math.prod(args[1].shape) // channels
    if op == rx.mlir_op_name("relax.matmul") and args[0].ndim >= 1:
        return 2 * points * args[0].shape[-1]
    return points


FLOATS = ("float16", "float32", "float64")


def _call_module(choice) -> str:
    """A relax module whose `main` makes the recorded call, as text: operands that were
    constants (weights, which implementations may prepare at compile time) are constants of
    random values, the others parameters."""
    import numpy as np

    from relaxmlir.relax.block_builder import BlockBuilder
    from relaxmlir.relax.expr import Call, Constant, Var, const

    rng = np.random.default_rng(0)
    params, args = [], []
    for i, arg in enumerate(choice.call.args):
        if isinstance(arg, Constant):  # a scalar operand LegalizeOps reads as a value
            args.append(arg)
            continue
        sinfo = arg.struct_info
        if i < len(choice.constant_args) and choice.constant_args[i] and sinfo.dtype in FLOATS:
            args.append(const(rng.standard_normal(sinfo.shape).astype(sinfo.dtype)))
            continue
        var = Var(f"arg{i}", arg.struct_info)
        params.append(var)
        args.append(var)
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            call = Call(choice.op, args, choice.call.attrs, choice.call.struct_info)
            out = bb.emit_output(bb.emit(call))
        bb.emit_func_output(out)
    return bb.get().script()


def strategy_tasks(choices: list) -> list[Task]:
    """A task per distinct workload among `choices` with more than one valid implementation
    (static shapes only)."""
    tasks: dict[str, Task] = {}
    for c in choices:
        shapes = [a.struct_info for a in c.call.args] + [c.call.struct_info]
        if len(c.valid) < 2 or not all(getattr(s, "is_static", False) for s in shapes):
            continue
        if c.key in tasks:
            tasks[c.key].calls += 1
            continue
        dims = "x".join(str(d) for d in c.call.struct_info.shape)
        space = {STRATEGY_KNOB: Knob(STRATEGY_KNOB, tuple(c.valid), c.default)}
        name = f"{c.op} -> {dims}"  # e.g. "relax.nn_conv2d -> 1x16x6x6"
        tasks[c.key] = Task(c.key, name, _call_module(c), space, 1, _call_flops(c), kind="strategy")
    return list(tasks.values())


def extract_tasks(mod: IRModule, target: Target) -> list[Task]:
    """The tunable kernels of `mod` for `target`, heaviest first (static shapes only: a kernel
    with symbolic dims has no one size to measure)."""
    if target.kind not in SPACES:
        raise ValueError(
            f"tuning: targets of kind {', '.join(SPACES)} have tunable schedules, got ({target})"
        )
    choices: list = []
    lowered = lower_for_tuning(mod, target, choices)
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
        kernels = _tasks(module_op, target, calls)
    # the strategy table's choices (im2col or direct...) are CPU implementations
    strategies = strategy_tasks(choices) if target.kind == "llvm" else []
    return sorted(kernels + strategies, key=lambda t: -t.flops * t.calls)


# target kind -> the knob space of a kernel, as that target's schedule rules declare it
SPACES = {
    "llvm": lambda func_op, target: space_for(func_op, ScheduleOptions(target=target)),
    "cuda": gpu_space.space_for,
}


def _tasks(module_op: ir.Operation, target: Target, calls: dict[str, int]) -> list[Task]:
    tasks: dict[str, Task] = {}
    for func_op in prim_funcs(module_op):
        name = ir.StringAttr(func_op.attributes["sym_name"]).value
        if not _static(func_op) or not linalg_ops(func_op):
            continue
        space = SPACES[target.kind](func_op, target)
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
