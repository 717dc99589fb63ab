"""What a compiled function writes in place: the buffers a model updates, its own inputs.

A function with state (`FunctionInfo.state`: a module exported with `self.total.add_(x)` or a
static KV cache's `index_copy_`) takes the state as parameters after its inputs and returns the
new values after its outputs. `StatefulEntry` holds the current values, passes them in, keeps
what comes back and hands the caller only the outputs, so `vm["main"](x)` changes the state at
every call as the torch module changes its buffers. The new values are the call's own result
arrays: nothing is copied between calls; state that the function writes in its parameter's
buffer (`FunctionInfo.state_inplace`: a static KV cache's new rows) has no result, and the same
array goes back in at every call. A function that writes some of its inputs
(`FunctionInfo.input_updates`: `x.add_(y)` on an argument) returns their new values last; they
are copied into the caller's arrays, as torch writes the caller's tensors.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from relaxmlir.runtime.entry import _as_array
from relaxmlir.runtime.ndarray import NDArray


class StatefulEntry:
    """`vm["main"]` of a function with state (called with the inputs only) or that writes its
    inputs (written back)."""

    def __init__(self, entry: Any, init: Any = None):
        self.entry, self.init = entry, init
        info = entry.info
        names = [p.name for p in info.params]
        # the state's values that come back as results, by their index in the state
        self.returned = [k for k, n in enumerate(info.state) if n not in info.state_inplace]
        written = info.state + info.input_updates
        unknown = [n for n in written + info.state_inplace if n not in names]
        n_returned = len(self.returned) + len(info.input_updates)
        if unknown or n_returned > len(info.results) or (info.state and init is None):
            raise ValueError(f"{info.name}: malformed state {written} for {info.signature}")
        self.positions = sorted((names.index(n), k) for k, n in enumerate(info.state))
        self.inplace = [k for k, n in enumerate(info.state) if n in info.state_inplace]
        state = set(info.state)
        inputs = [n for n in names if n not in state]  # the caller's arguments, in order
        self.updated = [inputs.index(n) for n in info.input_updates]
        self.n_args = len(info.params) - len(info.state)
        self.n_outputs = len(info.results) - n_returned
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
        """The current values, by parameter name (NDArrays; the next call replaces them, or
        writes them where the state is updated in place)."""
        with self.lock:
            return dict(zip(self.info.state, self.values))

    def arguments(self, args: tuple, keep: bool = False) -> list:
        """The inputs with the current state inserted at its parameters; `keep`: copies of the
        state written in place, so that the call leaves the current state as it is."""
        if len(args) != self.n_args:
            kept = f" (its state {', '.join(self.info.state)} is kept by the VM)"
            raise TypeError(
                f"{self.info.name}() takes {self.n_args} argument(s), got {len(args)}"
                f"{kept if self.info.state else ''}; expected signature {self.info.signature}"
            )
        full = list(args)
        for position, k in self.positions:
            value = self.values[k]
            if keep and k in self.inplace:
                value = NDArray(value.numpy(), value.device)  # a copy (CPU builds only)
            full.insert(position, value)
        return full

    def __call__(self, *args):
        n_state = len(self.returned)
        with self.lock:
            results = self.entry(*self.arguments(args))
            results = list(results) if isinstance(results, tuple) else [results]
            for k, new in zip(self.returned, results[self.n_outputs : self.n_outputs + n_state]):
                self.values[k] = new
        for position, new in zip(self.updated, results[self.n_outputs + n_state :]):
            target = _as_array(args[position], self.entry.device)
            np.copyto(target, new.numpy().view(target.dtype))  # bool travels as int8
        outputs = results[: self.n_outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
