"""`ApplyDefaultSchedule`: the module pass over the rule tables of each target kind."""

from __future__ import annotations

from relaxmlir.dlight import cpu, gpu
from relaxmlir.dlight.base import ScheduleRule
from relaxmlir.target import Target
from relaxmlir.transform import Pass

# Target kind -> the function that schedules a module's PrimFuncs with the named rules.
APPLY = {"cuda": gpu.apply, "llvm": cpu.apply}


def ApplyDefaultSchedule(*rules: ScheduleRule) -> Pass:
    """A module pass scheduling the PrimFuncs of a module for the target in scope
    (`with rm.target.Target(...)`), with `rules` tried in order.

    Raises ValueError without a target in scope, or when a rule is for another target kind.
    """
    if not rules:
        raise ValueError("ApplyDefaultSchedule: give at least one rule (e.g. dl.gpu.Fallback())")
    for rule in rules:
        if not isinstance(rule, ScheduleRule):
            raise TypeError(f"ApplyDefaultSchedule: expected dl.gpu/dl.cpu rules, got {rule!r}")

    def run(mod) -> None:
        target = Target.current()
        if target is None:
            raise ValueError(
                "ApplyDefaultSchedule: no target in scope: use `with rm.target.Target(...):`"
            )
        wrong = [r for r in rules if r.kind != target.kind]
        if wrong:
            raise ValueError(
                f"ApplyDefaultSchedule: rule(s) {wrong} do not schedule for target '{target.kind}'"
            )
        APPLY[target.kind](mod.module.operation, target, [r.name for r in rules])

    return Pass("ApplyDefaultSchedule", run)
