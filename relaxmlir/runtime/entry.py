"""Calling one compiled entry point: validate the arguments, patch cached descriptors, call.

Shared by the VM (`vm["main"]`) and by `Executable.__getitem__` (`ex["mm"](a, b, c)`); it holds
the executable only to reach its code and packed-function callbacks.

Arguments that are C-contiguous numpy arrays (or NDArrays) of the expected dtypes and sizes take
the C call of native/entry.c, which binds the symbols, writes the descriptors, allocates the
results and calls the code in one function (the W1 MLP at a batch of 1: 11.4 -> 6.0 us a call,
its kernel 5.5); everything else comes back to the Python call here, which converts arguments
(torch tensors, strided views) or raises the error that names the mismatch.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from relaxmlir.runtime import memref_abi
from relaxmlir.runtime import shape as sh
from relaxmlir.runtime.device import Device
from relaxmlir.runtime.dtype import np_dtype
from relaxmlir.runtime.ndarray import NDArray, _host_array
from relaxmlir.runtime.result_memory import RESULT_CACHED, result_array

try:  # the C call for plain arrays (native/entry.c); the Python path below serves without it
    from relaxmlir.runtime.native import _entry
except ImportError:  # pragma: no cover - a checkout whose extensions were not built
    _entry = None


def _as_array(value: Any, device: Device) -> np.ndarray:
    """A host view of an argument (NDArray, numpy array, torch CPU tensor, DLPack object)."""
    if isinstance(value, NDArray):
        if value.device != device:
            raise TypeError(f"expected an array on {device}, got one on {value.device}")
        return value.view_numpy()
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # torch.Tensor: share its memory
        if value.device.type != device.device_type:
            raise TypeError(f"expected a tensor on {device}, got one on {value.device}")
        return _host_array(value)
    if hasattr(value, "__dlpack__"):
        return _host_array(np.from_dlpack(value))
    raise TypeError(f"expected an NDArray, numpy array or torch tensor, got {type(value).__name__}")


def _layout_matches() -> bool:
    """Whether native/entry.c reads numpy's array fields (data, rank, sizes, dtype, contiguity)
    as numpy itself reports them, on a few probes (else the C call stays unused)."""
    if _entry is None:
        return False
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for a in (base, base[:, 1:], base.T, np.zeros((), np.int64), base.astype(np.float64)[0]):
        data, rank, dims, descr, contiguous = _entry.array_fields(np.ndarray, a)
        expected = (a.__array_interface__["data"][0], a.ndim, a.shape, id(a.dtype))
        if (data, rank, dims, descr, bool(contiguous)) != (*expected, a.flags.c_contiguous):
            return False
    return True


_C_CALL = _layout_matches()


def _plan(shape) -> tuple | None:
    """A shape as ints and plain symbol names, or None when a dim is an expression."""
    for d in shape:
        plain = isinstance(d, int) and not isinstance(d, bool)
        if not plain and not (isinstance(d, str) and d.isidentifier()):
            return None
    return tuple(shape)


class EntryPoint:
    """A callable bound to one function: cached native pointer, descriptors and packed array."""

    def __init__(self, executable: Any, info: Any, device: Device):
        self.executable, self.info, self.device = executable, info, device
        self.native = executable.code.lookup(info.name)
        specs = info.params + info.results
        self.slots = [memref_abi.ArgSlot(len(s.shape)) for s in specs]
        self.packed = memref_abi.packed_args(self.slots)
        self.param_dtypes = [np_dtype(p.dtype) for p in info.params]
        self.result_dtypes = [np_dtype(r.dtype) for r in info.results]
        self.static_results = [
            tuple(r.shape) if sh.is_static(r.shape) else None for r in info.results
        ]
        # Fast path: every shape static, results returned (not destination passing).
        self.static_params = [tuple(p.shape) for p in info.params]
        self.fast = (
            not info.destination_passing
            and all(sh.is_static(p.shape) for p in info.params)
            and all(s is not None for s in self.static_results)
        )
        # Symbolic fast path: dims that are ints or plain symbols ("n"), every result symbol
        # bound by a parameter; anything else (expressions, DPS) takes the checked call.
        self.param_plans = [_plan(p.shape) for p in info.params]
        result_plans = [_plan(r.shape) for r in info.results]
        bound = {d for p in self.param_plans if p is not None for d in p if type(d) is str}
        self.symbolic_fast = (
            not self.fast
            and not info.destination_passing
            and all(p is not None for p in self.param_plans + result_plans)
            and all(d in bound for r in result_plans for d in r if type(d) is str)
        )
        self.result_plans = list(zip(result_plans, self.result_dtypes))
        self.result_shapes: dict[tuple, list] = {}  # parameter shapes -> results (symbolic path)
        self.n_params = len(info.params)
        self.param_slots = self.slots[: self.n_params]
        self.result_slots = self.slots[self.n_params :]
        self.result_specs = list(zip(self.static_results, self.result_dtypes))
        # Each result's site in the native block cache (result_memory), and whether a static
        # one is large enough to take a cached block (the others stay a bare np.empty).
        self.result_sites = [id(self) * 31 + i for i in range(len(self.result_dtypes))]
        self.cached_results = any(
            s is not None and int(np.prod(s)) * np.dtype(d).itemsize >= RESULT_CACHED
            for s, d in self.result_specs
        )
        self.lock = threading.RLock()  # the Python call's (a packed function may call back in)
        self.c_call = self._c_call(result_plans)

    def _c_call(self, result_plans: list):
        """The C call of native/entry.c for this entry point (None where it cannot serve: a
        symbolic expression or an unbound result symbol, packed-function callbacks, whose errors
        the Python call checks after the call, more results, symbols or dims than it holds). With
        destination passing every argument is checked alike, outputs binding symbols as inputs
        do, and the call returns None. Each call has descriptors of its own; the calls it cannot
        take go to `_python_call`."""
        dps = self.info.destination_passing
        arg_plans = self.param_plans + (result_plans if dps else [])
        plain = self.fast or self.symbolic_fast or (dps and None not in arg_plans)
        if not (_C_CALL and plain) or self.executable.callbacks or len(result_plans) > 64:
            return None
        symbols: dict[str, int] = {}
        for plan in arg_plans:
            for d in plan:
                if type(d) is str:
                    symbols.setdefault(d, len(symbols))
        if len(symbols) > 64 or any(len(p) > 16 for p in arg_plans + result_plans):
            return None

        def spec(plan, dtype, site):
            coded = tuple(d if type(d) is int else -1 - symbols[d] for d in plan)
            return (np.dtype(dtype), coded, site)

        dtypes = self.param_dtypes + (self.result_dtypes if dps else [])
        params = [spec(plan, dtype, 0) for plan, dtype in zip(arg_plans, dtypes)]
        results = []  # destination passing: the outputs are arguments
        if not dps:
            pairs = zip(self.result_plans, self.result_sites)
            results = [spec(plan, dtype, site) for (plan, dtype), site in pairs]
        return _entry.FastEntry(
            ctypes.cast(self.native, ctypes.c_void_p).value,
            params,
            results,
            len(symbols),
            np.ndarray,
            np.empty,
            result_array,
            RESULT_CACHED,
            NDArray,
            self.device,
            self._python_call,
        )

    def _error(self, message: str, exc_type: type = ValueError) -> Exception:
        return exc_type(f"{message}; expected signature {self.info.signature}")

    def __call__(self, *args):
        if self.c_call is not None:
            return self.c_call(*args)
        return self._python_call(*args)

    def _python_call(self, *args):
        """The call in Python, on this object's descriptors: one thread at a time (the code runs
        with the GIL released; a second thread's call rewrote the descriptors of the first)."""
        with self.lock:
            return self._call_locked(args)

    def _call_locked(self, args):
        if self.fast and len(args) == self.n_params:
            keep = []
            for slot, arg, shape, dtype in zip(self.param_slots, args, self.static_params, self.param_dtypes):
                if type(arg) is NDArray:
                    if arg.device != self.device:  # the checked path names both devices
                        return self._checked_call(args)
                    a = arg.view_numpy()
                else:
                    a = arg
                if type(a) is not np.ndarray or a.shape != shape or a.dtype != dtype or not a.flags.c_contiguous:
                    return self._checked_call(args)
                slot.set(a)
                keep.append(a)
            if self.cached_results:
                return self._run_with_results(self._results(self.result_specs))
            return self._run_with_results([np.empty(shape, dtype) for shape, dtype in self.result_specs])
        if self.symbolic_fast and len(args) == self.n_params:
            return self._symbolic_call(args)
        return self._checked_call(args)

    def _symbolic_call(self, args):
        """Plain contiguous arrays of the right dtype and rank: bind the symbols directly (the
        checked call, which explains any mismatch, takes everything else). The result shapes of
        the last few input shapes are kept, so a repeated shape skips the binding. The loop is
        kept flat: at a batch of 1 this path is most of a small model's call (W2 at n = 1:
        5.1 -> 4.4 us, its static build 4.0; with the shapes kept 0.5 us less again)."""
        arrays, shapes = [], []
        for arg, dtype in zip(args, self.param_dtypes):
            if type(arg) is not np.ndarray:
                if type(arg) is not NDArray or arg.device != self.device:
                    return self._checked_call(args)
                arg = arg.view_numpy()
                if type(arg) is not np.ndarray:
                    return self._checked_call(args)
            if arg.dtype != dtype or not arg.flags.c_contiguous:
                return self._checked_call(args)
            arrays.append(arg)
            shapes.append(arg.shape)
        key = tuple(shapes)
        results = self.result_shapes.get(key)
        if results is None:
            results = self._bind_shapes(key)
            if results is None:
                return self._checked_call(args)
            if len(self.result_shapes) >= 8:
                self.result_shapes.pop(next(iter(self.result_shapes)))
            self.result_shapes[key] = results
        for slot, a in zip(self.param_slots, arrays):
            slot.set(a)
        return self._run_with_results(self._results(results))

    def _results(self, specs) -> list:
        """Result arrays for (shape, dtype) `specs`, large ones from the block cache."""
        sites = self.result_sites
        return [result_array(shape, dtype, site) for (shape, dtype), site in zip(specs, sites)]

    def _bind_shapes(self, shapes: tuple) -> list | None:
        """(shape, dtype) of each result for these parameter shapes; None on a mismatch."""
        env: dict[str, int] = {}
        for plan, shape in zip(self.param_plans, shapes):
            if len(shape) != len(plan):
                return None
            for want, got in zip(plan, shape):
                if type(want) is int:
                    if want != got:
                        return None
                elif env.setdefault(want, got) != got:
                    return None
        return [
            (tuple([d if type(d) is int else env[d] for d in plan]), dtype)
            for plan, dtype in self.result_plans
        ]

    def _run_with_results(self, outs: list):
        """Call with the parameters already set and `outs` as the results; NDArray(s) back."""
        for slot, o in zip(self.result_slots, outs):
            slot.set(o)
        self._call()
        results = [NDArray(o, self.device) for o in outs]
        return results[0] if len(results) == 1 else tuple(results)

    def _checked_call(self, args):
        """Validate and convert every argument (with signature errors), then call."""
        info = self.info
        dps = info.destination_passing
        expected = len(info.params) + (len(info.results) if dps else 0)
        if len(args) != expected:
            raise self._error(f"{info.name}() takes {expected} argument(s), got {len(args)}", TypeError)
        arrays = []
        env: dict[str, int] = {}
        specs = info.params + (info.results if dps else [])
        dtypes = self.param_dtypes + (self.result_dtypes if dps else [])
        for i, (arg, spec, dtype) in enumerate(zip(args, specs, dtypes)):
            a = _as_array(arg, self.device)
            if a.dtype == np.bool_ and dtype == np.int8:  # bool tensors are stored as bytes
                a = a.view(np.int8)
            if a.dtype != dtype:
                raise self._error(f"argument {i} ('{spec.name}') has dtype {a.dtype}, expected {dtype}", TypeError)
            problem = sh.bind(spec.shape, a.shape, env)
            if problem:
                raise self._error(f"argument {i} ('{spec.name}') has shape {a.shape}: {problem}")
            if not a.flags.c_contiguous:
                if dps and i >= len(info.params):
                    raise self._error(f"output argument {i} ('{spec.name}') must be C-contiguous")
                a = np.ascontiguousarray(a)
            arrays.append(a)
        if dps:
            for slot, a in zip(self.slots, arrays):
                slot.set(a)
            self._call()
            return None
        specs = []
        for spec, dtype, static in zip(info.results, self.result_dtypes, self.static_results):
            shape = static if static is not None else tuple(sh.evaluate(d, env) for d in spec.shape)
            specs.append((shape, dtype))
        outs = self._results(specs)
        for slot, a in zip(self.param_slots, arrays):
            slot.set(a)
        return self._run_with_results(outs)

    def _call(self) -> None:
        self.native(self.packed)
        for cb in self.executable.callbacks:
            if cb.error is not None:
                error, cb.error = cb.error, None
                raise RuntimeError(
                    f"packed function '{cb.packed_name}' raised {type(error).__name__}: {error}"
                ) from error
