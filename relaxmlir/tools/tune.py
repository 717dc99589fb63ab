"""`relaxmlir-tune`: tune the kernels of a .mlir module and record the results in a work dir.

    relaxmlir-tune model.mlir --trials 64 --work-dir tuning/ [--target "llvm -num-cores=2"]

Then build with the records: `relax.transform.MetaScheduleApplyDatabase("tuning/")` (or
`rm.meta_schedule.apply_database`) before `relax.build`. A rerun with the same work dir resumes.

Where the device is another machine (a GPU machine without the compiler):

    relaxmlir-tune model.mlir --target cuda --trials 64 --work-dir tuning/ --export-trials t/
    python -m relaxmlir.runtime.trials t/            # there, with the relaxmlir runtime
    relaxmlir-tune --work-dir tuning/ --import-trials t/
"""

from __future__ import annotations

import argparse
import os
import sys

import relaxmlir
import relaxmlir.relax
from relaxmlir.meta_schedule import export_trials, extract_tasks, import_trials, tune_tasks
from relaxmlir.runtime import trials
from relaxmlir.target import Target
from relaxmlir.tools import ToolError, read_source


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="relaxmlir-tune", description="Tune a relax .mlir module's kernels."
    )
    p.add_argument("input", nargs="?", help="the .mlir file, or - for stdin")
    p.add_argument("--trials", type=int, help="measurements in all")
    p.add_argument("--work-dir", required=True, help="folder of the tuning database (created)")
    p.add_argument("--per-task", type=int, default=None, help="measurements per kernel at most")
    p.add_argument("--target", default="llvm", help='target string (default: "llvm", the host)')
    p.add_argument("--workers", type=int, default=2, help="parallel builds (default 2)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per build or run")
    p.add_argument(
        "--distributed",
        default="",
        metavar="ADDRESS",
        help="a Dask scheduler: its workers build and time",
    )
    p.add_argument(
        "--cache-flush",
        action="store_true",
        help="time kernels with cold caches (the weights of a large model do not stay cached)",
    )
    p.add_argument(
        "--export-trials",
        metavar="FOLDER",
        help="build the candidates into FOLDER to be timed elsewhere (python -m "
        "relaxmlir.runtime.trials FOLDER) instead of timing them here",
    )
    p.add_argument(
        "--import-trials",
        metavar="FOLDER",
        help="read the results of trials timed elsewhere into the work dir (no input needed)",
    )
    return p


def _report(db, target: str, items: list[tuple[str, str, dict]]) -> None:
    """One line per task (key, name, default knobs): trials, best time, gain, confirmation."""
    for key, name, default_knobs in items:
        records = db.records_of(key, target)
        default = next((r for r in records if r["knobs"] == default_knobs), None)
        best = db.best(key, target)
        if best is None:
            print(f"{name}: no valid measurement")
            continue
        base = default["median_us"] if default and default.get("median_us") else None
        gain = f" ({base / best['median_us']:.2f}x the default)" if base else ""
        line = f"{name}: {len(records)} trials, best {best['median_us']:.1f} us{gain}"
        d = db.decision(key, target)
        if d is not None and d["default_us"] and d["candidate_us"]:
            kept = "kept" if d["knobs"] == d["candidate"] else "default kept"
            line += (
                f"; timed again in turns: {d['candidate_us']:.1f} us against the default's "
                f"{d['default_us']:.1f} ({kept})"
            )
        print(line)


def _import(opts) -> int:
    manifest = os.path.join(opts.import_trials, trials.MANIFEST)
    if not os.path.exists(manifest):
        raise ToolError(f"{opts.import_trials} holds no {trials.MANIFEST} (see --export-trials)")
    try:
        db = import_trials(opts.work_dir, opts.import_trials)
        m = trials.read_manifest(opts.import_trials)
    except (FileNotFoundError, ValueError) as exc:
        raise ToolError(str(exc)) from None
    items = [
        (t["key"], t["name"], t["candidates"][0]["knobs"]) for t in m["tasks"] if t["candidates"]
    ]
    _report(db, m["target"], items)
    return 0


def main(argv: list[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    try:
        if opts.import_trials:
            return _import(opts)
        if opts.input is None or opts.trials is None:
            raise ToolError("give the input module and --trials (or --import-trials FOLDER)")
        if opts.trials < 1 or (opts.per_task is not None and opts.per_task < 1) or opts.workers < 1:
            raise ToolError("--trials, --per-task and --workers expect positive counts")
        text, name = read_source(opts.input)
        try:
            mod = relaxmlir.parse(text)
            target = Target(opts.target)
        except ValueError as exc:
            raise ToolError(f"{name}: {exc}") from None
        tasks = extract_tasks(mod, target)
        choices = sum(t.kind == "strategy" for t in tasks)
        also = f" and {choices} strategy choice(s)" if choices else ""
        print(f"{len(tasks) - choices} kernel(s){also} to tune for {target}", file=sys.stderr)
        if opts.export_trials:
            export_trials(
                mod, target, opts.work_dir, opts.export_trials, opts.trials, opts.per_task,
                opts.workers, opts.timeout * 4, tasks=tasks,
            )  # fmt: skip
            print(
                f"trials in {opts.export_trials}: run `python -m relaxmlir.runtime.trials "
                f"{opts.export_trials}` where the device is, then `relaxmlir-tune --work-dir "
                f"{opts.work_dir} --import-trials {opts.export_trials}`"
            )
            return 0
        try:
            db = tune_tasks(
                tasks,
                target,
                opts.work_dir,
                opts.trials,
                opts.per_task,
                opts.workers,
                opts.timeout,
                distributed=opts.distributed,
                cache_flush=opts.cache_flush,
            )
        except RuntimeError as exc:  # nowhere to time the candidates (cuda without a GPU)
            raise ToolError(str(exc)) from None
        _report(db, str(target), [(t.key, t.name, t.default_knobs()) for t in tasks])
        return 0
    except ToolError as exc:
        print(f"relaxmlir-tune: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
