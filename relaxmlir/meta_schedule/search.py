"""Search: evolutionary proposals ranked by a learned cost model, with epsilon-greedy exploration.

The cost model is gradient-boosted trees (LightGBM) over features of a candidate: each knob's
value and its position among the legal values, and the kernel's size (log FLOPs, so one model
learns across kernels). It predicts log run time and retrains as measurements arrive. Each
round proposes mutations of the best measured candidates plus random samples, never one already
measured, ranks them by the model, and keeps a fraction `epsilon` of random picks.
"""

from __future__ import annotations

import itertools
import math
import random

from relaxmlir.meta_schedule.database import knobs_id

ENUMERATE_LIMIT = 4096  # spaces up to this size are enumerated rather than sampled


def features(task, knobs: dict) -> list[float]:
    out = [math.log2(max(task.flops, 1))]
    for name in sorted(task.space):
        values = task.space[name].values
        v = knobs.get(name, task.space[name].default)
        index = float(values.index(v)) if v in values else -1.0
        out += [float(v) if isinstance(v, (int, float)) else index, index]  # names: by position
    return out


class CostModel:
    """log(time) regressor over `features`; untrained until it has a few measurements."""

    MIN_SAMPLES = 8

    def __init__(self):
        self.rows: list[tuple[int, list[float], float]] = []  # (feature count, x, log us)
        self.models: dict[int, object] = {}

    def update(self, task, knobs: dict, median_us: float | None) -> None:
        if median_us:
            x = features(task, knobs)
            self.rows.append((len(x), x, math.log(median_us)))

    def fit(self) -> None:
        import numpy as np

        try:
            import lightgbm
        except ImportError as exc:  # the tune extra
            raise ImportError(
                "tuning needs LightGBM for its cost model: pip install lightgbm"
            ) from exc
        by_width: dict[int, list] = {}
        for width, x, y in self.rows:
            by_width.setdefault(width, []).append((x, y))
        for width, rows in by_width.items():
            if len(rows) < self.MIN_SAMPLES:
                continue
            xs = np.array([x for x, _ in rows])
            ys = np.array([y for _, y in rows])
            params = {
                "objective": "regression",
                "num_leaves": 8,
                "min_data_in_leaf": 2,
                "min_data_in_bin": 1,
                "learning_rate": 0.2,
                "verbose": -1,
                "num_threads": 1,
            }
            data = lightgbm.Dataset(xs, ys, params={"min_data_in_bin": 1, "verbose": -1})
            self.models[width] = lightgbm.train(params, data, num_boost_round=64)

    def predict(self, task, candidates: list[dict]) -> list[float] | None:
        if not candidates:
            return []
        xs = [features(task, k) for k in candidates]
        model = self.models.get(len(xs[0]))
        if model is None:
            return None
        import numpy as np

        return list(model.predict(np.array(xs)))


def _random(task, rng: random.Random) -> dict:
    return {name: rng.choice(knob.values) for name, knob in task.space.items()}


def _mutate(task, knobs: dict, rng: random.Random) -> dict:
    out = dict(knobs)
    name = rng.choice(sorted(task.space))
    out[name] = rng.choice(task.space[name].values)
    return out


def neighbours(task, around: dict, rng: random.Random) -> list[dict]:
    """The points one knob away from `around` (each other value of each knob), the knobs taking
    turns (each knob's first change, then each one's second, ...), so that a small budget
    changes every knob once before any twice: a first measurement on a new machine compares
    each knob with the default, one at a time."""
    changes = []
    for name in sorted(task.space):
        others = [v for v in task.space[name].values if v != around.get(name)]
        rng.shuffle(others)
        changes.append([{**around, name: v} for v in others])
    out = []
    for turn in itertools.zip_longest(*changes):
        out += [k for k in turn if k is not None]
    return out


def per_task_budget(max_trials_global: int, max_trials_per_task: int | None, tasks: int) -> int:
    """Trials a task may take: as given, else the global budget spread over the tasks, at
    least 8."""
    return max_trials_per_task or max(8, max_trials_global // max(tasks, 1))


def space_size(task) -> int:
    n = 1
    for knob in task.space.values():
        n *= len(knob.values)
    return n


def propose(
    task,
    measured: set[str],
    best: list[dict],
    model: CostModel,
    n: int,
    rng: random.Random,
    epsilon: float = 0.25,
) -> list[dict]:
    """Up to `n` unmeasured candidates for `task`."""
    if space_size(task) <= ENUMERATE_LIMIT:
        names = sorted(task.space)
        pool = [
            dict(zip(names, vals))
            for vals in itertools.product(*(task.space[k].values for k in names))
        ]
    else:
        pool = [_random(task, rng) for _ in range(256)]
        for parent in best[:8]:
            pool += [_mutate(task, parent, rng) for _ in range(16)]
    seen, fresh = set(measured), []
    for k in pool:
        kid = knobs_id(k)
        if kid not in seen:
            seen.add(kid)
            fresh.append(k)
    if not fresh:
        return []
    scores = model.predict(task, fresh)
    if scores is None:  # no model yet: explore
        rng.shuffle(fresh)
        return fresh[:n]
    ranked = [k for _, k in sorted(zip(scores, range(len(fresh))), key=lambda p: p[0])]
    ordered = [fresh[i] for i in ranked]
    n_random = round(n * epsilon)
    picks = ordered[: n - n_random]
    rest = ordered[n - n_random :]
    rng.shuffle(rest)
    return picks + rest[:n_random]
