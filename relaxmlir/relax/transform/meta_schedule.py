"""`MetaScheduleTuneTIR` / `MetaScheduleApplyDatabase`: tuning as module passes (TVM's names),
run inside `with target:` (default: the host)."""

from __future__ import annotations

from relaxmlir.transform import Pass


def MetaScheduleTuneTIR(
    work_dir: str, max_trials_global: int, max_trials_per_task: int | None = None
) -> Pass:
    """Tune the kernels of the module and record the measurements in `work_dir`; the module
    itself is returned unchanged (apply the records with `MetaScheduleApplyDatabase`)."""
    from relaxmlir.meta_schedule import tune_tir

    def run(mod) -> None:
        tune_tir(mod, None, work_dir, max_trials_global, max_trials_per_task)

    return Pass("MetaScheduleTuneTIR", run)


def MetaScheduleApplyDatabase(work_dir: str) -> Pass:
    """Make the build schedule each kernel with its best record in `work_dir` for the target in
    scope; kernels without records keep their default schedule."""
    from lowering.schedule.space import set_tuned_table
    from relaxmlir.meta_schedule.database import JSONDatabase
    from relaxmlir.target import Target

    def run(mod) -> None:
        target = Target.current() or Target("llvm")
        set_tuned_table(mod.module.operation, JSONDatabase(work_dir).best_knobs(str(target)))

    return Pass("MetaScheduleApplyDatabase", run)
