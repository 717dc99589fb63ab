"""The tuning loop (TVM MetaSchedule's `tune_tir` / `tune_relax`) and its task scheduler.

Every task first gets its default schedule measured (the reference for correctness and the
baseline). Then, round after round, the scheduler picks the task with the most to gain, its
weight being its best time times its call count (the share of the model's run time it holds),
discounted by the trials it already had, and measures a batch of proposals for it. Budgets:
`max_trials_global` in all, `max_trials_per_task` each (default: the global budget spread over
the tasks, at least 8). Records already in the database count: a rerun resumes.

Last, each task whose fastest record is not its default schedule has the two timed again,
taking turns (`CONFIRM_ROUNDS`), and keeps the candidate only when it beats the default by
`CONFIRM_MARGIN`: the fastest of 64 noisy timings is partly luck (on ResNet-18 the searched
bests summed to 0.70x of the defaults, and measured again side by side to 1.00x), and a tuned
kernel must never be slower than its default. The decisions go to the database.
"""

from __future__ import annotations

import os
import random
import sys
import time

from relaxmlir.meta_schedule.database import (
    CONFIRM_MARGIN,
    CONFIRM_ROUNDS,
    JSONDatabase,
    knobs_id,
    median,
)
from relaxmlir.meta_schedule.measure import Measurer
from relaxmlir.meta_schedule.search import CostModel, per_task_budget, propose, space_size
from relaxmlir.meta_schedule.task import Task, extract_tasks
from relaxmlir.target import Target, as_target


class Progress:
    """One status line per run on a terminal (trials, best time and GFLOP/s per task, ETA);
    silent when stderr is not a terminal."""

    def __init__(self, total: int, enabled: bool | None = None):
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    def update(self, task: Task, best_us: float | None, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / max(self.done, 1) * max(self.total - self.done, 0)
        best = f"{best_us:.1f} us, {task.flops / best_us / 1e3:.1f} GFLOP/s" if best_us else "-"
        sys.stderr.write(
            f"\rtuning {self.done}/{self.total} trials | {task.name}: best {best} | ETA {eta:.0f} s   "
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def tune_tasks(
    tasks: list[Task],
    target: Target,
    work_dir: str,
    max_trials_global: int,
    max_trials_per_task: int | None = None,
    num_workers: int = 2,
    timeout_s: float = 60.0,
    seed: int = 0,
    progress: bool | None = None,
    distributed: str = "",
    cache_flush: bool = False,
) -> JSONDatabase:
    """`cache_flush`: write twice the last-level cache (from every core of the target) before
    each timed call, so that kernels are timed with cold caches, as the layers of a model whose
    weights exceed the cache run (TVM's `enable_cpu_cache_flush`)."""
    if not isinstance(max_trials_global, int) or max_trials_global < 1:
        raise ValueError(
            f"tuning: max_trials_global must be a positive int, got {max_trials_global!r}"
        )
    db = JSONDatabase(work_dir)
    tstr = str(target)
    if not tasks:
        return db
    if target.kind == "cuda":
        return _tune_on_gpu(tasks, target, work_dir, max_trials_global, max_trials_per_task,
                            num_workers, timeout_s, seed, distributed)  # fmt: skip
    per_task = per_task_budget(max_trials_global, max_trials_per_task, len(tasks))
    db.commit_tasks(tasks, tstr)
    budget = {t.key: min(per_task, space_size(t)) for t in tasks}
    used = {t.key: len(db.records_of(t.key, tstr)) for t in tasks}
    remaining_global = max_trials_global - sum(min(used[k], budget[k]) for k in used)
    model = CostModel()
    for t in tasks:
        for r in db.records_of(t.key, tstr):
            model.update(t, r["knobs"], r.get("median_us"))
    rng = random.Random(seed)
    flush = (
        (2 * int(target.get("l3-cache") or 32 << 20), target.num_cores) if cache_flush else (0, 1)
    )
    measurer = Measurer(work_dir, num_workers, timeout_s, distributed, flush=flush)
    bar = Progress(
        max(0, min(remaining_global, sum(max(0, budget[k] - used[k]) for k in used))), progress
    )
    try:
        # Round 0: the default schedules (reference and baseline).
        for t in tasks:
            if remaining_global <= 0:
                break
            if knobs_id(t.default_knobs()) in db.measured(t.key, tstr):
                continue
            _commit(db, model, t, tstr, measurer.measure(t, [t.default_knobs()], tstr))
            used[t.key] += 1
            remaining_global -= 1
            best = db.best(t.key, tstr)
            bar.update(t, best and best["median_us"], 1)
        model.fit()
        while remaining_global > 0:
            open_tasks = [t for t in tasks if used[t.key] < budget[t.key] and db.best(t.key, tstr)]
            if not open_tasks:
                break
            t = max(
                open_tasks,
                key=lambda t: db.best(t.key, tstr)["median_us"] * t.calls / (1 + used[t.key]),
            )
            n = min(max(2, num_workers * 2), budget[t.key] - used[t.key], remaining_global)
            best_records = sorted(
                (r for r in db.records_of(t.key, tstr) if r.get("median_us")),
                key=lambda r: r["median_us"],
            )
            candidates = propose(
                t, db.measured(t.key, tstr), [r["knobs"] for r in best_records], model, n, rng
            )
            if not candidates:
                budget[t.key] = used[t.key]  # the space is exhausted
                continue
            _commit(db, model, t, tstr, measurer.measure(t, candidates, tstr))
            used[t.key] += len(candidates)
            remaining_global -= len(candidates)
            model.fit()
            best = db.best(t.key, tstr)
            bar.update(t, best and best["median_us"], len(candidates))
        for t in tasks:
            confirm(db, measurer, t, tstr)
    finally:
        bar.close()
        measurer.close()
    return db


def _tune_on_gpu(
    tasks, target, work_dir, max_trials_global, max_trials_per_task, num_workers, timeout_s, seed,
    distributed,
) -> JSONDatabase:  # fmt: skip
    """cuda candidates are timed on this machine's GPU through the trials route (built and
    exported first, then measured by the runtime's runner, then read back): one round per
    space, which is small: the default, its neighbours (one knob changed each), then random
    points."""
    from relaxmlir.meta_schedule.trials import export_trials, import_trials, run_here
    from relaxmlir.runtime import cuda_driver

    if distributed:
        raise ValueError("tuning for cuda: --distributed is not supported; use export_trials")
    if not cuda_driver.available():
        raise RuntimeError(
            "tuning for cuda times candidates on a GPU, and this machine has none. Build them "
            "here with rm.meta_schedule.export_trials(mod, target, work_dir, folder) (or "
            "relaxmlir-tune --export-trials folder), run `python -m relaxmlir.runtime.trials "
            "folder` where the GPU is, then read the results back with "
            "rm.meta_schedule.import_trials(work_dir, folder)"
        )
    folder = os.path.join(work_dir, "trials-cuda")
    export_trials(
        None, target, work_dir, folder, max_trials_global, max_trials_per_task, num_workers,
        timeout_s * 4, seed, tasks=tasks,
    )  # fmt: skip
    run_here(folder, timeout_s)
    return import_trials(work_dir, folder)


def confirm(db: JSONDatabase, measurer: Measurer, task: Task, target: str) -> dict | None:
    """Time the task's fastest record against its default schedule, taking turns, and record
    which of the two the build applies (see the module docstring). None: nothing to confirm
    (no record, the default is fastest, or this record was confirmed already)."""
    best, default = db.best(task.key, target), task.default_knobs()
    if best is None or knobs_id(best["knobs"]) == knobs_id(default):
        return None
    if db.decision(task.key, target) is not None:
        return None
    rounds = measurer.compare(task, [default, best["knobs"]], target, CONFIRM_ROUNDS)
    medians = []
    for results in rounds:
        ok = [median(r["times_us"]) for r in results if r.get("times_us")]
        medians.append(median(ok) if len(ok) == len(results) else None)
    d_us, c_us = medians
    wins = d_us is not None and c_us is not None and c_us <= (1 - CONFIRM_MARGIN) * d_us
    return db.commit_decision(
        task.key, target, best["knobs"] if wins else default, best["knobs"], d_us, c_us
    )


def _commit(
    db: JSONDatabase, model: CostModel, task: Task, target: str, results: list[dict]
) -> None:
    for r in results:
        rec = db.commit_record(task.key, target, r["knobs"], r.get("times_us", []), r.get("error"))
        model.update(task, r["knobs"], rec["median_us"])


def tune_tir(
    mod,
    target=None,
    work_dir: str = "",
    max_trials_global: int = 64,
    max_trials_per_task: int | None = None,
    num_workers: int = 2,
    timeout_s: float = 60.0,
    progress: bool | None = None,
    distributed: str = "",
    cache_flush: bool = False,
) -> JSONDatabase:
    """Tune the kernels of `mod` (relax or already legalized) for `target` (default: the target
    in scope, else the host) and record the measurements in `work_dir`. `distributed`: the
    address of a Dask scheduler whose workers build and time the candidates; `cache_flush`:
    time them with cold caches (`tune_tasks`)."""
    if not work_dir:
        raise ValueError("tune_tir: give a work_dir for the tuning database")
    tgt = as_target(target)
    tasks = extract_tasks(mod, tgt)
    return tune_tasks(
        tasks,
        tgt,
        work_dir,
        max_trials_global,
        max_trials_per_task,
        num_workers,
        timeout_s,
        progress=progress,
        distributed=distributed,
        cache_flush=cache_flush,
    )


tune_relax = tune_tir  # a relax module is legalized first, as tune_tir does


def annotate(module_op, work_dir: str, target: Target) -> None:
    """Put the best records of `work_dir` for exactly `target` on `module_op`: the kernels'
    knobs (read by the schedule pass) and the op calls' implementations (read by LegalizeOps,
    so they count only while the module still holds high-level ops)."""
    from lowering.schedule.space import set_tuned_table
    from relaxmlir.relax.op.strategy import set_tuned_choices

    db = JSONDatabase(work_dir)
    set_tuned_table(module_op, db.guarded_knobs(str(target)))
    set_tuned_choices(module_op, db.best_strategies(str(target)))


def apply_database(mod, work_dir: str, target=None):
    """A copy of `mod` carrying the best records of `work_dir` for `target` (module attributes
    read by LegalizeOps and the schedule pass); kernels and op calls without records keep their
    default schedule and implementation."""
    out = mod.clone()
    annotate(out.module.operation, work_dir, as_target(target))
    return out
