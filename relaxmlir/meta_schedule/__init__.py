"""`rm.meta_schedule`: auto-tuning of schedule knobs with a persistent database (TVM's
MetaSchedule role). `tune_tir(mod, target, work_dir, max_trials_global)` measures candidates and
records them; `apply_database(mod, work_dir)` (or the `MetaScheduleApplyDatabase` pass) makes the
build use the best records. See tune.py for the loop, database.py for the file format, and
trials.py for tuning where the device is another machine (`export_trials` / `import_trials`).
"""

from relaxmlir.meta_schedule.database import JSONDatabase  # noqa: F401
from relaxmlir.meta_schedule.task import Task, extract_tasks  # noqa: F401
from relaxmlir.meta_schedule.trials import export_trials, import_trials  # noqa: F401
from relaxmlir.meta_schedule.tune import apply_database, tune_relax, tune_tasks, tune_tir  # noqa: F401
