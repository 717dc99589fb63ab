"""`vm.time_evaluator`: TVM's way to time a compiled function, on this runtime.

The timer calls the function once untimed (first-call work: caches, lazy loading), then
`repeat` times runs it `number` times in a row and keeps the mean of each such batch. A batch
shorter than `min_repeat_ms` is measured again with more calls, so short functions are timed
over a span the clock resolves. On a CUDA device every batch ends with a synchronization of the
stream the calls went to, so the time is the device's, not the launch's.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from relaxmlir.runtime.device import Device


@dataclass(frozen=True)
class BenchmarkResult:
    """Per-repeat mean times in seconds (`results`) and their summary, as TVM reports them."""

    results: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)

    def __str__(self) -> str:
        header = f"{'mean (ms)':>11} {'median (ms)':>11} {'max (ms)':>11} {'min (ms)':>11} {'std (ms)':>11}"
        values = (self.mean, self.median, self.max, self.min, self.std)
        return (
            "Execution time summary:\n"
            + header
            + "\n"
            + " ".join(f"{v * 1e3:11.4f}" for v in values)
        )


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"time_evaluator: {name} must be an int >= 1, got {value!r}")
    return value


def _non_negative(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"time_evaluator: {name} must be a number >= 0, got {value!r}")
    return float(value)


def _synchronizer(device: Device) -> Callable[[], None]:
    """What ends a batch on `device`: nothing on the CPU (the calls return when done), a stream
    synchronization on CUDA."""
    if device.device_type != "cuda":
        return lambda: None
    from relaxmlir.runtime.cuda_driver import current_stream, driver

    def sync() -> None:
        driver().synchronize(current_stream(device))

    return sync


def time_evaluator(
    fn: Callable,
    device: Device,
    number: int = 10,
    repeat: int = 1,
    min_repeat_ms: float = 0,
    cooldown_interval_ms: float = 0,
    repeats_to_cooldown: int = 1,
) -> Callable[..., BenchmarkResult]:
    """A function of `fn`'s arguments that times `fn` on them (module docstring); it pauses
    `cooldown_interval_ms` after every `repeats_to_cooldown` repeats."""
    number = _positive_int("number", number)
    repeat = _positive_int("repeat", repeat)
    every = _positive_int("repeats_to_cooldown", repeats_to_cooldown)
    min_repeat_s = _non_negative("min_repeat_ms", min_repeat_ms) / 1e3
    cooldown_s = _non_negative("cooldown_interval_ms", cooldown_interval_ms) / 1e3
    sync = _synchronizer(device)

    def evaluate(*args) -> BenchmarkResult:
        fn(*args)  # untimed: also checks the arguments before any timing
        sync()
        results = []
        calls = number
        for r in range(repeat):
            if r and cooldown_s and r % every == 0:
                time.sleep(cooldown_s)
            while True:
                start = time.perf_counter()
                for _ in range(calls):
                    fn(*args)
                sync()
                elapsed = time.perf_counter() - start
                if elapsed >= min_repeat_s:
                    break
                # too short to trust: enough calls to fill the span, at least 1.6x as many
                per_call = max(elapsed / calls, 1e-9)
                calls = max(int(min_repeat_s / per_call) + 1, int(calls * 1.618) + 1)
            results.append(elapsed / calls)
        return BenchmarkResult(tuple(results))

    return evaluate
