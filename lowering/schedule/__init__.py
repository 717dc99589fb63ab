"""`relax-schedule-cpu`: default CPU schedules for PrimFuncs (the DLight role), as transform scripts.

    relaxmlir-opt kernels.mlir --relax-schedule-cpu
    relaxmlir-opt kernels.mlir '--relax-schedule-cpu=threads=1'
    relaxmlir-opt kernels.mlir '--relax-schedule-cpu=target="llvm -mcpu=x86-64-v3"'
    relaxmlir-opt kernels.mlir '--relax-schedule-cpu=schedule=off'

Runs on tensor-level PrimFuncs (`func.func` with `relax.prim_func`), before bufferization. TE's
irregular forms (guarded pads, reshape gathers, strided windows, unit dims) are first rewritten
into regular linalg on views (`normalize.py`); then each linalg op is classified (matmul / conv /
reduction / elementwise / gather / fallback, `common.classify`) and gets the rule of
`SCHEDULES[(target kind, pattern)]`; rules size their tiles from the target's vector width and
register count. Options:
- `target=...`: a target string (default: the target in scope, else the host CPU).
- `threads=N`: the parallel split of large ops (default: the target's cores); `threads=1` emits
  no `scf.forall`.
- `schedule=off`: leave every PrimFunc as it is (naive loops after convert-linalg-to-loops);
  only `linalg.pack`/`unpack` ops (prepacked weights) are decomposed, as bufferization needs.
- `strict=true`: raise when a schedule fails instead of leaving that function unscheduled.
The parallel loops need the codegen of the target's pipeline row (`lowering/pipelines.py`).
"""

from __future__ import annotations

from dataclasses import replace

from mlir import ir

from dialects import relax as rx
from lowering.dataflow import graph_functions
from lowering.registry import PassError, register_pass, target_option
from lowering.schedule import elementwise, matmul, reduction  # noqa: F401  (fill the table)
from lowering.schedule.common import (
    PRIM_FUNC_ATTR,
    SCHEDULES,
    ScheduleOptions,
    classify,
    legalize_function,
)
from lowering.schedule.driver import schedule_function
from lowering.schedule.matmul import PackedLayout, pack_weight, use_prepacked_weight
from lowering.schedule.space import default_point, knobs_of, space_for

__all__ = [
    "SCHEDULES",
    "PackedLayout",
    "ScheduleOptions",
    "classify",
    "pack_weight",
    "schedule_module",
    "use_prepacked_weight",
]


def prim_funcs(module_op: ir.Operation) -> list[ir.Operation]:
    out = []
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and PRIM_FUNC_ATTR in op.attributes and len(op.regions[0].blocks):
            out.append(op)
    return out


def weight_only_kernels(module_op: ir.Operation) -> set[str]:
    """PrimFuncs that only the weight transforms of a lifted model call (`f_transform_params`:
    folds, re-layouts and packings of its weights). They run once per set of weights, so they
    stay naive loops: scheduled, MobileNetV2's 170 of them took 4 s more of LLVM codegen."""
    graphs = graph_functions(module_op)
    transforms = {
        ir.FlatSymbolRefAttr(f.attributes[rx.TRANSFORM_PARAMS_ATTR]).value
        for f in graphs
        if rx.TRANSFORM_PARAMS_ATTR in f.attributes
    }
    if not transforms:
        return set()
    called: dict[bool, set[str]] = {True: set(), False: set()}
    for f in graphs:
        inside = ir.StringAttr(f.attributes["sym_name"]).value in transforms

        def visit(op, inside=inside):
            if op.operation.name in rx.CALLS_TIR:
                called[inside].add(ir.FlatSymbolRefAttr(op.operation.attributes["callee"]).value)
            return ir.WalkResult.ADVANCE

        f.walk(visit)
    return called[True] - called[False]


def schedule_module(module_op: ir.Operation, opts: ScheduleOptions) -> None:
    """Schedule every PrimFunc of `module_op` in place; records the chosen rules on each one."""
    once = weight_only_kernels(module_op)
    for func_op in prim_funcs(module_op):
        if ir.StringAttr(func_op.attributes["sym_name"]).value in once:
            legalize_function(func_op)
            continue
        knobs = knobs_of(
            func_op,
            module_op,
            opts.target,
            lambda f=func_op: default_point(space_for(f, opts)),
        )
        func_opts = opts
        if knobs:
            threads = int(knobs.get("threads", 0))
            func_opts = replace(opts, knobs=knobs, threads=threads or opts.threads)
        try:
            schedule_function(func_op, func_opts)
        except Exception as exc:
            raise PassError(f"relax-schedule-cpu: {exc}", func_op) from exc


def _flag(value: str, name: str) -> bool:
    if value in ("on", "true", "1"):
        return True
    if value in ("off", "false", "0"):
        return False
    raise PassError(f"relax-schedule-cpu: expected {name}=on|off, got ({value})")


@register_pass(
    "relax-schedule-cpu",
    "tile, pack, vectorize and parallelize PrimFuncs for the host CPU (transform dialect)",
    {
        "target": "target string (default: the target in scope, else the host CPU)",
        "threads": "threads for parallel loops (default: the target's cores)",
        "schedule": "on|off (off: leave PrimFuncs unscheduled)",
        "strict": "true|false (raise when a schedule fails instead of leaving the function as is)",
    },
)
def schedule_cpu(target: str = "", threads: str = "", schedule: str = "on", strict: str = "false"):
    tgt = target_option(target, "relax-schedule-cpu", kind="llvm")
    if threads and (not threads.isdigit() or int(threads) < 1):
        raise PassError(f"relax-schedule-cpu: expected threads=N with N >= 1, got ({threads})")
    opts = ScheduleOptions(tgt, int(threads or 0), _flag(strict, "strict"))
    enabled = _flag(schedule, "schedule")

    def run(module_op: ir.Operation) -> None:
        if enabled:
            schedule_module(module_op, opts)
        else:  # prepacked weights still need their unpack decomposed
            for func_op in prim_funcs(module_op):
                legalize_function(func_op)

    return run
