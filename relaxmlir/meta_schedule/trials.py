"""Tuning where the compiler and the device are on different machines: candidates are built
and exported here, measured there by the MLIR-free runner (`relaxmlir.runtime.trials`), and
the results come back into the database (TVM's RPC runner, as a folder instead of a socket).

    export_trials(mod, "cuda", work_dir, folder, max_trials_global=64)   # here
    python -m relaxmlir.runtime.trials folder                          # where the GPU is
    import_trials(work_dir, folder)                                    # here again
    relax.transform.MetaScheduleApplyDatabase(work_dir) ...            # as after tune_tir

Each task's candidates are its default schedule first (the reference its others are checked
against, and the baseline), then points of its knob space not measured yet, drawn at random
without repeats (one round: there are no measurements to guide a cost model before the run).
`tune_tir` takes the same route in one call for a cuda target on a machine that has a GPU.
"""

from __future__ import annotations

import json
import os
import random
import shutil

from relaxmlir.meta_schedule.database import CONFIRM_MARGIN, CONFIRM_ROUNDS, JSONDatabase, knobs_id
from relaxmlir.meta_schedule.measure import BuilderPool, _build_spec
from relaxmlir.meta_schedule.search import (
    CostModel,
    neighbours,
    per_task_budget,
    propose,
    space_size,
)
from relaxmlir.meta_schedule.task import Task, extract_tasks
from relaxmlir.runtime import trials as runner
from relaxmlir.runtime.device import TARGET_DEVICE
from relaxmlir.target import as_target


def export_trials(
    mod,
    target,
    work_dir: str,
    folder: str,
    max_trials_global: int = 64,
    max_trials_per_task: int | None = None,
    num_workers: int = 2,
    timeout_s: float = 120.0,
    seed: int = 0,
    tasks: list[Task] | None = None,
) -> str:
    """Build the candidates of `mod`'s tasks for `target` into `folder` (libraries and
    `trials.json`) for `python -m relaxmlir.runtime.trials folder`; the workloads go to the
    database in `work_dir`, and candidates it has records of are left out (a resumed tuning).
    Returns the manifest's path."""
    if not work_dir:
        raise ValueError("export_trials: give a work_dir for the tuning database")
    if not isinstance(max_trials_global, int) or max_trials_global < 1:
        raise ValueError(
            f"export_trials: max_trials_global must be a positive int, got {max_trials_global!r}"
        )
    if mod is None and tasks is None:
        raise ValueError("export_trials: give the module to tune (or its tasks)")
    _clear(folder)
    tgt = as_target(target)
    tstr = str(tgt)
    tasks = extract_tasks(mod, tgt) if tasks is None else tasks
    db = JSONDatabase(work_dir)
    db.commit_tasks(tasks, tstr)
    per_task = per_task_budget(max_trials_global, max_trials_per_task, len(tasks))
    rng = random.Random(seed)
    os.makedirs(os.path.join(folder, "libs"))
    plans: list[tuple[Task, list[dict]]] = []
    left = max_trials_global
    for t in tasks:
        measured = db.measured(t.key, tstr)
        default = t.default_knobs()
        budget = min(per_task, space_size(t), left) - len(measured)
        if budget <= 0:
            continue
        # the default always leads: the runner checks the others against its outputs; then
        # its neighbours (one knob changed), then random points (no measurement to learn from)
        taken = measured | {knobs_id(default)}
        picks = [k for k in neighbours(t, default, rng) if knobs_id(k) not in taken]
        picks = picks[: budget - 1]
        taken |= {knobs_id(k) for k in picks}
        picks += propose(t, taken, [], CostModel(), budget - 1 - len(picks), rng)
        plans.append((t, [default, *picks]))
        left -= len(picks) + 1
    pool = BuilderPool(max(1, num_workers), folder)
    manifest_tasks = []
    try:
        jobs = []
        for ti, (t, candidates) in enumerate(plans):
            for ci, knobs in enumerate(candidates):
                lib = os.path.join("libs", f"t{ti}-c{ci}.so")
                spec = _build_spec(t.func_text, knobs, tstr, os.path.join(folder, lib), "")
                jobs.append((ti, knobs, lib, pool.submit(spec, timeout_s)))
        built: dict[int, list] = {}
        for ti, knobs, lib, job in jobs:
            built.setdefault(ti, []).append((knobs, lib, job.result()))
    finally:
        pool.close()
    for ti, (t, _) in enumerate(plans):
        entries = built.get(ti, [])
        signature = next((b for _, _, b in entries if "error" not in b), None)
        manifest_tasks.append({
            "key": t.key,
            "name": t.name,
            "flops": t.flops,
            "calls": t.calls,
            "args": signature["args"] if signature else [],
            "outs": signature["outs"] if signature else [],
            "candidates": [
                {"knobs": k, "error": b["error"]} if "error" in b else {"knobs": k, "lib": lib}
                for k, lib, b in entries
            ],
        })  # fmt: skip
    for log in os.listdir(folder):
        if log.startswith("builder-") and log.endswith(".log"):
            os.remove(os.path.join(folder, log))
    manifest = {
        "version": runner.VERSION,
        "target": tstr,
        "device": TARGET_DEVICE.get(tgt.kind, tgt.kind),
        "confirm": {"rounds": CONFIRM_ROUNDS, "margin": CONFIRM_MARGIN},
        "tasks": manifest_tasks,
    }
    path = os.path.join(folder, runner.MANIFEST)
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
    return path


def _clear(folder: str) -> None:
    """Make room for an export: an earlier export in `folder` is replaced; any other content
    is the user's, and an error."""
    if not os.path.exists(folder):
        return
    if not os.path.isdir(folder):
        raise ValueError(f"export_trials: {folder} is a file, not a folder")
    entries = set(os.listdir(folder))
    if entries and runner.MANIFEST not in entries:
        raise ValueError(
            f"export_trials: {folder} holds files and no {runner.MANIFEST}: give an empty or "
            "new folder (an earlier export there is replaced)"
        )
    shutil.rmtree(folder)


def import_trials(work_dir: str, folder: str) -> JSONDatabase:
    """Read the runner's results in `folder` into the database in `work_dir`: a record per
    measured candidate, a decision per confirmed task, all under the manifest's target."""
    manifest = runner.read_manifest(folder)
    path = os.path.join(folder, runner.RESULTS)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path}: no results yet; run `python -m relaxmlir.runtime.trials {folder}` where "
            "the device is"
        )
    tstr = manifest["target"]
    db = JSONDatabase(work_dir)
    known = {t["key"] for t in manifest["tasks"]}
    for r in runner.read_results(folder):
        key = r["key"]
        if key not in known:
            continue
        if "decision" in r:
            d = r["decision"]
            if d["candidate"] is not None and db.decision(key, tstr) is None:
                db.commit_decision(
                    key, tstr, d["chosen"], d["candidate"], d["default_us"], d["candidate_us"]
                )
        elif knobs_id(r["knobs"]) not in db.measured(key, tstr):
            db.commit_record(key, tstr, r["knobs"], r.get("times_us", []), r.get("error"))
    return db


def run_here(folder: str, timeout_s: float) -> None:
    """Measure exported trials on this machine, each candidate in a process of its own."""
    runner.run_trials(folder, timeout_s)
