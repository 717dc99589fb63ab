"""`MetaScheduleTuneTIR` / `MetaScheduleApplyDatabase`: tuning as module passes (TVM's names),
run inside `with target:` (default: the host)."""

from __future__ import annotations

from relaxmlir.transform import Pass


def MetaScheduleTuneTIR(
    work_dir: str,
    max_trials_global: int,
    max_trials_per_task: int | None = None,
    cache_flush: bool = False,
) -> Pass:
    """Tune the kernels of the module and record the measurements in `work_dir`; the module
    itself is returned unchanged (apply the records with `MetaScheduleApplyDatabase`).
    `cache_flush`: time the kernels with cold caches (`meta_schedule.tune_tasks`)."""
    from relaxmlir.meta_schedule import tune_tir

    def run(mod) -> None:
        tune_tir(
            mod, None, work_dir, max_trials_global, max_trials_per_task, cache_flush=cache_flush
        )

    return Pass("MetaScheduleTuneTIR", run)


def MetaScheduleApplyDatabase(work_dir: str) -> Pass:
    """Make the build schedule each kernel with its best record in `work_dir` for the target in
    scope, and legalize each op call that has a tuned implementation with it (while the module
    still holds high-level ops); kernels and calls without records keep their defaults."""
    from relaxmlir.meta_schedule.tune import annotate
    from relaxmlir.target import Target

    def run(mod) -> None:
        annotate(mod.module.operation, work_dir, Target.current() or Target("llvm"))

    return Pass("MetaScheduleApplyDatabase", run)
