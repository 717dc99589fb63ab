"""The tuning database: what was measured, kept in `work_dir`, append-only.

Two JSON-lines files (one JSON object per line, appended as results arrive, so an interrupted
run loses at most its last line, which is skipped when read back):

- `database_workload.json`: one line per task: `{"key", "target", "name", "flops", "knobs",
  "kind"}`; `knobs` is its search space (knob name -> legal values and default). `kind`
  "kernel" (or absent, in older files): `key` is the structural hash of the kernel as the
  schedule pass sees it plus the target string (`lowering.schedule.space.kernel_key`).
  `kind` "strategy": an op call whose implementation the strategy table chooses; `key` is its
  workload (`relax.op.strategy.workload_key`: op, operand and result types, attributes,
  target) and its one knob `"strategy"` lists the valid implementations' names.
- `database_tuning_record.json`: one line per measured candidate: `{"key", "target", "knobs",
  "median_us", "times_us", "error"}`; `error` is null, or why the candidate failed (build error,
  crash, timeout, wrong result). A strategy task's record has `"knobs": {"strategy": name}` and
  times one call of the op's module (whatever kernels the implementation emits).

- `database_decision.json`: one line per confirmed task: `{"key", "target", "knobs",
  "candidate", "default_us", "candidate_us"}`. The fastest record of a search is the luckiest of
  many noisy timings, so it is timed again against the default schedule, the two taking turns;
  `knobs` is what won (the candidate only when it beat the default by the tuner's margin), and
  it is what the build applies while `candidate` is still the task's fastest record.

Records are only ever looked up with the target they were measured on: a record from another
CPU (or other features) is never applied.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from relaxmlir.runtime.trials import knobs_id, median  # one definition, MLIR-free

WORKLOADS = "database_workload.json"
RECORDS = "database_tuning_record.json"
DECISIONS = "database_decision.json"


# A task's fastest record is timed again against its default, taking turns, and kept only when
# it wins by the margin (tune.confirm, and the trials runner for the trials route).
CONFIRM_ROUNDS = 3  # turns each of default and candidate gets in the confirmation
CONFIRM_MARGIN = 0.02  # the candidate's median must be this much below the default's


def _read_lines(path: str) -> list[dict]:
    out = []
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by an interrupted run
            if isinstance(item, dict):
                out.append(item)
    return out


STRATEGY_KNOB = "strategy"  # the one knob of a strategy task (kernel knobs are "<rule>.<knob>")


def is_strategy_knobs(knobs: dict | None) -> bool:
    """Knobs of a strategy task (one implementation name), not of a kernel."""
    knobs = knobs or {}
    return set(knobs) == {STRATEGY_KNOB} and isinstance(knobs[STRATEGY_KNOB], str)


def is_strategy_record(record: dict) -> bool:
    return is_strategy_knobs(record.get("knobs"))


class JSONDatabase:
    """The database of one work directory (TVM's `JSONDatabase`)."""

    def __init__(self, work_dir: str):
        if not isinstance(work_dir, (str, os.PathLike)) or not str(work_dir):
            raise ValueError(f"tuning database: work_dir must be a folder path, got {work_dir!r}")
        self.work_dir = str(work_dir)
        os.makedirs(self.work_dir, exist_ok=True)
        self._lock = threading.Lock()
        self.workloads: dict[tuple[str, str], dict] = {}
        for w in _read_lines(os.path.join(self.work_dir, WORKLOADS)):
            if "key" in w and "target" in w:
                self.workloads[(w["key"], w["target"])] = w
        self.records: dict[tuple[str, str], list[dict]] = {}
        for r in _read_lines(os.path.join(self.work_dir, RECORDS)):
            if "key" in r and "target" in r and isinstance(r.get("knobs"), dict):
                self.records.setdefault((r["key"], r["target"]), []).append(r)

        self.decisions: dict[tuple[str, str], dict] = {}
        for d in _read_lines(os.path.join(self.work_dir, DECISIONS)):
            if "key" in d and "target" in d and isinstance(d.get("knobs"), dict):
                self.decisions[(d["key"], d["target"])] = d  # a later line supersedes

    def _append(self, filename: str, item: dict) -> None:
        line = json.dumps(item, sort_keys=True) + "\n"
        with self._lock, open(os.path.join(self.work_dir, filename), "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def commit_workload(self, key: str, target: str, **info: Any) -> dict:
        if (key, target) not in self.workloads:
            item = {"key": key, "target": target, **info}
            self._append(WORKLOADS, item)
            self.workloads[(key, target)] = item
        return self.workloads[(key, target)]

    def commit_tasks(self, tasks: list, target: str) -> None:
        """Each task's workload (key, name, size, knob space), once."""
        for t in tasks:
            self.commit_workload(
                t.key,
                target,
                name=t.name,
                flops=t.flops,
                knobs={k: v.to_dict() for k, v in t.space.items()},
                kind=t.kind,
            )

    def commit_record(
        self, key: str, target: str, knobs: dict, times_us: list, error: str | None
    ) -> dict:
        times = sorted(float(t) for t in times_us)
        item = {
            "key": key,
            "target": target,
            "knobs": dict(knobs),
            "times_us": times,
            "median_us": median(times) if times and error is None else None,
            "error": error,
        }
        self._append(RECORDS, item)
        self.records.setdefault((key, target), []).append(item)
        return item

    def records_of(self, key: str, target: str) -> list[dict]:
        return list(self.records.get((key, target), []))

    def measured(self, key: str, target: str) -> set[str]:
        return {knobs_id(r["knobs"]) for r in self.records.get((key, target), [])}

    def _valid(self, key: str, target: str) -> list[dict]:
        """The task's records that measured a time (no error)."""
        return [
            r
            for r in self.records.get((key, target), [])
            if r.get("error") is None and r.get("median_us")
        ]

    def best(self, key: str, target: str) -> dict | None:
        """The fastest valid record of a kernel on exactly this target (None: no record)."""
        valid = self._valid(key, target)
        return min(valid, key=lambda r: r["median_us"]) if valid else None

    def commit_decision(
        self, key: str, target: str, knobs: dict, candidate: dict, default_us: float | None,
        candidate_us: float | None,
    ) -> dict:  # fmt: skip
        item = {
            "key": key,
            "target": target,
            "knobs": dict(knobs),
            "candidate": dict(candidate),
            "default_us": default_us,
            "candidate_us": candidate_us,
        }
        self._append(DECISIONS, item)
        self.decisions[(key, target)] = item
        return item

    def decision(self, key: str, target: str) -> dict | None:
        """The confirmation of the task's current fastest record (None: none, or it was made
        for a record that a later search has since beaten)."""
        d, best = self.decisions.get((key, target)), self.best(key, target)
        if d is None or best is None or knobs_id(d["candidate"]) != knobs_id(best["knobs"]):
            return None
        return d

    def chosen(self, key: str, target: str) -> dict | None:
        """The knobs the build applies: the confirmed decision, else the fastest record."""
        d = self.decision(key, target)
        if d is not None:
            return d["knobs"]
        best = self.best(key, target)
        return best["knobs"] if best is not None else None

    def best_knobs(self, target: str) -> dict[str, dict]:
        """key -> the knobs to apply (`chosen`), for every kernel tuned on `target`."""
        out = {}
        for key, t in self.records:
            if t == target:
                knobs = self.chosen(key, t)
                if knobs is not None and not is_strategy_knobs(knobs):
                    out[key] = knobs
        return out

    def guarded_knobs(self, target: str) -> dict[str, dict]:
        """key -> `{"knobs": chosen, "over": points}`, for every kernel tuned on `target`:
        `points` are the knob points measured no faster than the chosen one (itself included).
        A build applies the knobs only where its default is one of them (`knobs_of`): a record
        measured against another default (the schedule rules changed since) proves nothing
        against this one, and the kernel keeps its default."""
        out = {}
        for key, knobs in self.best_knobs(target).items():
            valid = self._valid(key, target)
            mine = [r["median_us"] for r in valid if knobs_id(r["knobs"]) == knobs_id(knobs)]
            fastest = min(mine, default=None)
            over = [r["knobs"] for r in valid if fastest is not None and r["median_us"] >= fastest]
            if knobs_id(knobs) not in {knobs_id(o) for o in over}:
                over.append(knobs)
            out[key] = {"knobs": knobs, "over": over}
        return out

    def best_strategies(self, target: str) -> dict[str, str]:
        """workload key -> the implementation to apply (`chosen`), for every op call tuned on
        `target` (the module table `relax.op.strategy.TUNED_ATTR`)."""
        out = {}
        for key, t in self.records:
            if t == target:
                knobs = self.chosen(key, t)
                if knobs is not None and is_strategy_knobs(knobs):
                    out[key] = knobs[STRATEGY_KNOB]
        return out

    def __len__(self) -> int:
        return sum(len(v) for v in self.records.values())
