"""The global function table: what compiled code calls by name (packed functions).

An entry is a Python callable (compiled code reaches it through a ctypes trampoline) or a
`NativeFunc`, a C function in one of the runtime's native libraries that compiled code calls
directly. Both take one unranked memref per argument (`{int64_t rank; void *descriptor}`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import asdict, dataclass

_FUNCTIONS: dict[str, Callable] = {}


def register_func(name: str, f: Callable | None = None, override: bool = False):
    """Register `f` under `name`; usable as `@register_func("env.relu")`.

    Registering an existing name raises unless `override=True`.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_func expects a non-empty name, got {name!r}")

    def register(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"register_func('{name}'): {fn!r} is not callable")
        if name in _FUNCTIONS and not override:
            raise ValueError(f"global function '{name}' is already registered; pass override=True to replace it")
        _FUNCTIONS[name] = fn
        return fn

    return register if f is None else register(f)


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    if name not in _FUNCTIONS:
        if allow_missing:
            return None
        raise ValueError(f"global function '{name}' is not registered")
    return _FUNCTIONS[name]


def list_global_func_names() -> list[str]:
    return sorted(_FUNCTIONS)


def remove_global_func(name: str) -> None:
    _FUNCTIONS.pop(name, None)


@dataclass(frozen=True)
class NativeFunc:
    """A packed function implemented in C: `symbol` of the native library `library` (a name of
    the table in `runtime.libraries`, loaded on first use). Compiled code calls it without
    Python; calling it from Python (`f(*arrays)`) goes through ctypes, for tests and tools."""

    library: str
    symbol: str

    def address(self) -> int:
        from relaxmlir.runtime import libraries

        found = libraries.address(libraries.load(self.library), self.symbol)
        if not found:
            raise ValueError(f"native library '{self.library}' has no function '{self.symbol}'")
        return found

    @property
    def device(self) -> str:
        """Where the memory it takes lives ("cpu", "cuda"): its library's device."""
        from relaxmlir.runtime import libraries

        info = libraries.LIBRARIES.get(self.library)
        return info.device if info is not None else "cpu"

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> NativeFunc:
        return NativeFunc(str(d["library"]), str(d["symbol"]))

    def __call__(self, *arrays) -> None:
        import numpy as np

        from relaxmlir.runtime import memref_abi

        if self.device != "cpu":
            raise TypeError(
                f"{self.symbol} is a {self.device} kernel (it takes device memory): it runs from "
                f"the host code of a model built for {self.device}, not from Python"
            )
        keep, args = [], []
        for a in arrays:
            a = a.view_numpy() if hasattr(a, "view_numpy") else a
            if not isinstance(a, np.ndarray):
                raise TypeError(f"{self.symbol}: expected numpy arrays or NDArrays, got {type(a).__name__}")
            if not a.flags.c_contiguous:
                raise ValueError(f"{self.symbol}: arrays must be C-contiguous (outputs are written in place)")
            slot = memref_abi.ArgSlot(a.ndim)
            slot.set(a)
            u = memref_abi.UnrankedDescriptor(a.ndim, ctypes.addressof(slot.desc))
            keep += [a, slot, u]
            args.append(ctypes.pointer(u))
        fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(args)))(self.address())
        fn(*[ctypes.cast(p, ctypes.c_void_p) for p in args])
