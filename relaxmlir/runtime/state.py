"""State that a compiled function keeps between calls: the buffers a model updates in place.

A function with state (`FunctionInfo.state`: a module exported with `self.total.add_(x)` or a
static KV cache's `index_copy_`) takes the state as parameters after its inputs and returns the
new values after its outputs. `StatefulEntry` holds the current values, passes them in, keeps
what comes back and hands the caller only the outputs, so `vm["main"](x)` changes the state at
every call as the torch module changes its buffers. The new values are the call's own result
arrays: nothing is copied between calls.
"""

from __future__ import annotations

import threading
from typing import Any


class StatefulEntry:
    """`vm["main"]` of a function with state: called with the inputs only."""

    def __init__(self, entry: Any, init: Any):
        self.entry, self.init = entry, init
        info = entry.info
        names = [p.name for p in info.params]
        unknown = [n for n in info.state if n not in names]
        if unknown or len(info.state) > len(info.results):
            raise ValueError(f"{info.name}: malformed state {info.state} for {info.signature}")
        self.positions = sorted((names.index(n), k) for k, n in enumerate(info.state))
        self.n_args = len(info.params) - len(info.state)
        self.n_outputs = len(info.results) - len(info.state)
        self.lock = threading.Lock()  # one call at a time: each one reads the last one's state
        self.values: list = []
        self.reset()

    @property
    def info(self) -> Any:
        return self.entry.info

    def reset(self) -> None:
        """Back to the values the state had when the model was imported."""
        values = self.init()
        values = list(values) if isinstance(values, tuple) else [values]
        with self.lock:
            self.values = values

    def state(self) -> dict[str, Any]:
        """The current values, by parameter name (NDArrays; the next call replaces them)."""
        with self.lock:
            return dict(zip(self.info.state, self.values))

    def arguments(self, args: tuple) -> list:
        """The inputs with the current state inserted at its parameters."""
        if len(args) != self.n_args:
            raise TypeError(
                f"{self.info.name}() takes {self.n_args} argument(s), got {len(args)} (its state "
                f"{', '.join(self.info.state)} is kept by the VM); expected signature "
                f"{self.info.signature}"
            )
        full = list(args)
        for position, k in self.positions:
            full.insert(position, self.values[k])
        return full

    def __call__(self, *args):
        with self.lock:
            results = self.entry(*self.arguments(args))
            results = list(results) if isinstance(results, tuple) else [results]
            self.values = results[self.n_outputs :]
        outputs = results[: self.n_outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
