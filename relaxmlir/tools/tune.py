"""`relaxmlir-tune`: tune the kernels of a .mlir module and record the results in a work dir.

    relaxmlir-tune model.mlir --trials 64 --work-dir tuning/ [--target "llvm -num-cores=2"]

Then build with the records: `relax.transform.MetaScheduleApplyDatabase("tuning/")` (or
`rm.meta_schedule.apply_database`) before `relax.build`. A rerun with the same work dir resumes.
"""

from __future__ import annotations

import argparse
import sys

import relaxmlir
import relaxmlir.relax
from relaxmlir.meta_schedule import extract_tasks, tune_tasks
from relaxmlir.target import Target
from relaxmlir.tools import ToolError, read_source


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="relaxmlir-tune", description="Tune a relax .mlir module's kernels."
    )
    p.add_argument("input", help="the .mlir file, or - for stdin")
    p.add_argument("--trials", type=int, required=True, help="measurements in all")
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
    return p


def main(argv: list[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    try:
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
        for t in tasks:
            records = db.records_of(t.key, str(target))
            default = next((r for r in records if r["knobs"] == t.default_knobs()), None)
            best = db.best(t.key, str(target))
            if best is None:
                print(f"{t.name}: no valid measurement")
                continue
            base = default["median_us"] if default and default.get("median_us") else None
            gain = f" ({base / best['median_us']:.2f}x the default)" if base else ""
            line = f"{t.name}: {len(records)} trials, best {best['median_us']:.1f} us{gain}"
            d = db.decision(t.key, str(target))
            if d is not None and d["default_us"] and d["candidate_us"]:
                kept = "kept" if d["knobs"] == d["candidate"] else "default kept"
                line += (
                    f"; timed again in turns: {d['candidate_us']:.1f} us against the default's "
                    f"{d['default_us']:.1f} ({kept})"
                )
            print(line)
        return 0
    except ToolError as exc:
        print(f"relaxmlir-tune: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
