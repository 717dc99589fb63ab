"""Scheduling one PrimFunc: normalize, classify, apply the table's rules, fall back per op.

The driver above the rule machinery of `common.py` and the rewrites of `normalize.py` (which
builds on `common.py`), so that neither has to import the other's caller.
"""

from __future__ import annotations

import os
import warnings

from mlir import ir

from lowering.schedule.common import (
    PRINT_SCRIPT_ENV,
    SCHEDULE_ATTR,
    SCRIPT_ERRORS,
    ScheduleOptions,
    apply_rules,
    classify,
    linalg_ops,
)
from lowering.schedule.normalize import normalize_function


def schedule_function(func_op: ir.Operation, opts: ScheduleOptions) -> list[str]:
    """Apply the table's rules to every linalg op of `func_op`; returns the names they report.

    The scheduled function replaces `func_op` (which is erased) and carries SCHEDULE_ATTR.

    Two scripts run: every rule's `prepare` (packing), then `fold_prepacked`, then every rule's
    `schedule` and the shared `finalize`. If that fails, each op is tried alone on a copy and the
    function is scheduled with the ops that succeeded; the others keep their linalg form (naive
    loops: correct, slower) and a warning names them. With `strict` the first failure is raised.
    """
    if not linalg_ops(func_op) or _has_empty_operand(func_op):
        return []  # NOTE: tiling a loop of zero iterations asserts in MLIR; naive loops do nothing
    # Trials run on copies inside a scratch module (the interpreter wants a parented payload).
    scratch = ir.Module.create(loc=func_op.location)
    base = func_op.clone(ip=ir.InsertionPoint(scratch.body))
    normalize_function(base)
    count = len(linalg_ops(base))

    def copy() -> ir.Operation:
        return base.clone(ip=ir.InsertionPoint(scratch.body))

    trial = copy()
    try:
        used = apply_rules(trial, opts, None)
        _replace(func_op, trial, used)
        return used
    except SCRIPT_ERRORS as exc:
        trial.erase()
        if opts.strict:
            raise
        first_error = exc
    good, bad = set(), []
    for tag in range(count):
        trial = copy()
        try:
            apply_rules(trial, opts, {tag})
            good.add(tag)
        except SCRIPT_ERRORS:
            bad.append(tag)
        trial.erase()
    name = ir.StringAttr(func_op.attributes["sym_name"]).value
    ops = linalg_ops(base)
    skipped = ", ".join(f"#{t} {ops[t].name}" for t in bad)
    if os.environ.get(PRINT_SCRIPT_ENV) == "failures":
        import sys

        for t in bad:
            print(
                f"// relax-schedule-cpu could not schedule (pattern {classify(ops[t]).pattern}):\n{ops[t]}",
                file=sys.stderr,
            )
    warnings.warn(
        f"relax-schedule-cpu: @{name}: op(s) {skipped} left unscheduled: {first_error}",
        RuntimeWarning,
        stacklevel=2,
    )
    if not good:
        return []
    trial = copy()
    try:
        used = apply_rules(trial, opts, good)
    except SCRIPT_ERRORS as exc:
        trial.erase()
        warnings.warn(
            f"relax-schedule-cpu: @{name} left unscheduled: {exc}", RuntimeWarning, stacklevel=2
        )
        return []
    _replace(func_op, trial, used)
    return used


def _has_empty_operand(func_op: ir.Operation) -> bool:
    """Whether some linalg op reads or writes a tensor with a static dimension of size 0."""
    for op in linalg_ops(func_op):
        for value in list(op.operands) + list(op.results):
            if isinstance(value.type, ir.ShapedType) and 0 in ir.ShapedType(value.type).shape:
                return True
    return False


def _replace(func_op: ir.Operation, new: ir.Operation, used: list[str]) -> None:
    """Put the scheduled copy `new` in place of `func_op` (same symbol), erasing `func_op`, and
    record the rules that ran on it."""
    with new.context:
        new.attributes[SCHEDULE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(u) for u in used])
    new.detach_from_parent()
    ir.InsertionPoint(func_op).insert(new)
    func_op.erase()
