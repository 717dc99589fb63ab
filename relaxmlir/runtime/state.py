"""What a compiled function writes in place: the buffers a model updates, its own inputs.

A function with state (`FunctionInfo.state`: a module exported with `self.total.add_(x)` or a
static KV cache's `index_copy_`) takes the state as parameters after its inputs and returns the
new values after its outputs. `StatefulEntry` holds the current values, passes them in, keeps
what comes back and hands the caller only the outputs, so `vm["main"](x)` changes the state at
every call as the torch module changes its buffers. The new values are the call's own result
arrays: nothing is copied between calls. A function that writes some of its inputs
(`FunctionInfo.input_updates`: `x.add_(y)` on an argument) returns their new values last; they
are copied into the caller's arrays, as torch writes the caller's tensors.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from relaxmlir.runtime.entry import _as_array


class StatefulEntry:
    """`vm["main"]` of a function with state (called with the inputs only) or that writes its
    inputs (written back)."""

    def __init__(self, entry: Any, init: Any = None):
        self.entry, self.init = entry, init
        info = entry.info
        names = [p.name for p in info.params]
        written = info.state + info.input_updates
        unknown = [n for n in written if n not in names]
        if unknown or len(written) > len(info.results) or (info.state and init is None):
            raise ValueError(f"{info.name}: malformed state {written} for {info.signature}")
        self.positions = sorted((names.index(n), k) for k, n in enumerate(info.state))
        state = set(info.state)
        inputs = [n for n in names if n not in state]  # the caller's arguments, in order
        self.updated = [inputs.index(n) for n in info.input_updates]
        self.n_args = len(info.params) - len(info.state)
        self.n_outputs = len(info.results) - len(written)
        self.lock = threading.Lock()  # one call at a time: each one reads the last one's state
        self.values: list = []
        if info.state:
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
            kept = f" (its state {', '.join(self.info.state)} is kept by the VM)"
            raise TypeError(
                f"{self.info.name}() takes {self.n_args} argument(s), got {len(args)}"
                f"{kept if self.info.state else ''}; expected signature {self.info.signature}"
            )
        full = list(args)
        for position, k in self.positions:
            full.insert(position, self.values[k])
        return full

    def __call__(self, *args):
        n_state = len(self.positions)
        with self.lock:
            results = self.entry(*self.arguments(args))
            results = list(results) if isinstance(results, tuple) else [results]
            self.values = results[self.n_outputs : self.n_outputs + n_state]
        for position, new in zip(self.updated, results[self.n_outputs + n_state :]):
            target = _as_array(args[position], self.entry.device)
            np.copyto(target, new.numpy().view(target.dtype))  # bool travels as int8
        outputs = results[: self.n_outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
