"""`Executable`: compiled entry points plus what the VM needs to call them.

The code itself sits behind a small protocol (`NativeCode`): the JIT's engine (made by
`relax.build`, compiler side) or a shared library loaded from disk (`load_module`). Signatures and
the packed functions the code calls are plain data, serialized as JSON into exported libraries.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from relaxmlir.runtime import memref_abi
from relaxmlir.runtime.device import TARGET_DEVICE, Device
from relaxmlir.runtime.dtype import np_dtype
from relaxmlir.runtime.entry import EntryPoint
from relaxmlir.runtime.registry import NativeFunc, get_global_func


@dataclass
class TensorSpec:
    name: str
    shape: tuple
    dtype: str

    def __str__(self) -> str:
        return f'{self.name}: R.Tensor({self.shape}, "{self.dtype}")'

    @staticmethod
    def from_dict(d: dict) -> TensorSpec:
        return TensorSpec(d["name"], tuple(d["shape"]), d["dtype"])


@dataclass
class FunctionInfo:
    """What the VM needs to call one entry point: parameters, results, calling convention."""

    name: str
    params: list[TensorSpec]
    results: list[TensorSpec] = field(default_factory=list)
    destination_passing: bool = False  # primitive function entries write into their arguments
    # State kept by the VM between calls (buffers the model updates in place): the names of
    # the parameters that take it, whose new values are the last results, in this order (but
    # those of `state_inplace`), and the function that returns their first values.
    state: list[str] = field(default_factory=list)
    state_init: str = ""
    # Parameters that the function writes in place: their new values are the last results
    # (after the state's), which the VM copies into the caller's arrays.
    input_updates: list[str] = field(default_factory=list)
    # The state that the function writes in its parameter's buffer (a static KV cache's rows):
    # it has no result; the VM passes the same array at every call.
    state_inplace: list[str] = field(default_factory=list)

    @property
    def signature(self) -> str:
        params = ", ".join(str(p) for p in self.params)
        results = ", ".join(f'R.Tensor({r.shape}, "{r.dtype}")' for r in self.results)
        return f"{self.name}({params}) -> ({results})"

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> FunctionInfo:
        return FunctionInfo(
            d["name"],
            [TensorSpec.from_dict(p) for p in d["params"]],
            [TensorSpec.from_dict(r) for r in d["results"]],
            bool(d.get("destination_passing", False)),
            list(d.get("state", [])),
            str(d.get("state_init", "")),
            list(d.get("input_updates", [])),
            list(d.get("state_inplace", [])),
        )


@dataclass
class PackedSpec:
    """A packed function that the code calls: its C-interface symbol, the registered name it is
    bound to, and the rank and dtype of each memref argument. `native` (a `NativeFunc` as a
    dict) is set when the function is a C kernel: a loaded library binds it without the registry
    and without Python on the call path."""

    symbol: str
    name: str
    ranks: list[int]
    dtypes: list[str]
    native: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> PackedSpec:
        return PackedSpec(d["symbol"], d["name"], list(d["ranks"]), list(d["dtypes"]), d.get("native"))

    def native_func(self) -> NativeFunc | None:
        if self.native is not None:
            return NativeFunc.from_dict(self.native)
        fn = get_global_func(self.name, allow_missing=True)
        return fn if isinstance(fn, NativeFunc) else None


class NativeCode(Protocol):
    """Where the compiled functions live (a JIT engine, a loaded shared library)."""

    def lookup(self, name: str) -> Callable:
        """The packed `void(void**)` wrapper of C-interface function `name`."""

    def bind_packed(self, symbol: str, cfunc: Any) -> None:
        """Make the code's calls of `symbol` reach `cfunc` (a ctypes function)."""

    def source(self) -> str:
        """The lowered module as text (LLVM dialect for the JIT)."""

    def export_library(self, path: str, executable: Executable) -> None:
        """Write a shared library that `load_module` loads."""


class _Trampoline:
    """A ctypes function that compiled code calls: views the memref descriptors as NDArrays and
    calls the registered Python function. Errors are kept and raised by the VM after the call."""

    def __init__(self, spec: PackedSpec):
        self.spec = spec
        self.symbol, self.packed_name = spec.symbol, spec.name
        self.np_dtypes = [np_dtype(d) for d in spec.dtypes]
        self.error: BaseException | None = None
        self.cfunc = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(spec.ranks)))(self)

    def __call__(self, *addresses) -> None:
        from relaxmlir.runtime.ndarray import NDArray

        try:
            arrays = [NDArray(memref_abi.view_unranked(a, d)) for a, d in zip(addresses, self.np_dtypes)]
            get_global_func(self.packed_name)(*arrays)
        except BaseException as exc:  # noqa: BLE001  (re-raised by the VM once the call returns)
            if self.error is None:
                self.error = exc


class Executable:
    """The result of `relax.build` or `load_module`: entry points and their signatures.

    `vm = relax.VirtualMachine(ex, rm.cpu())` runs it; `ex.export_library(path)` writes it to a
    shared library (JIT builds only).
    """

    def __init__(
        self,
        code: NativeCode,
        infos: dict[str, FunctionInfo],
        packed: list[PackedSpec],
        target: Any,
        libraries: tuple[str, ...] = (),
    ):
        native = {p.symbol: p.native_func() for p in packed}
        missing = sorted(
            {
                p.name
                for p in packed
                if native[p.symbol] is None and get_global_func(p.name, allow_missing=True) is None
            }
        )
        if missing:
            raise ValueError(
                f"packed function(s) {missing} are not registered (use relaxmlir.register_func)"
            )
        self.code = code
        self.infos = infos
        self.packed = packed
        self.target = target  # a relaxmlir.target.Target
        self.libraries = tuple(libraries)  # native libraries the code calls (runtime.libraries)
        # C kernels are bound by address (compiled code calls them directly); Python functions
        # through a trampoline each.
        self.native_bindings = {s: f for s, f in native.items() if f is not None}
        for symbol, fn in self.native_bindings.items():
            code.bind_packed(symbol, ctypes.c_void_p(fn.address()))
        self.callbacks = [_Trampoline(p) for p in packed if native[p.symbol] is None]
        for cb in self.callbacks:
            code.bind_packed(cb.symbol, cb.cfunc)

    def __contains__(self, name: str) -> bool:
        return name in self.infos

    def function_names(self) -> list[str]:
        return list(self.infos)

    def as_text(self) -> str:
        """The lowered module (LLVM dialect for a JIT build; the library's metadata otherwise)."""
        return self.code.source()

    def export_library(self, path: str) -> str:
        """Write ONE shared library holding the code, constants and signatures; load it with
        `rm.runtime.load_module(path)` (no compiler needed there). Returns `path`."""
        self.code.export_library(str(path), self)
        return str(path)

    def __getitem__(self, name: str):
        """Call an entry directly, e.g. a primitive function in destination-passing style:
        `ex["mm"](a, b, c)`."""
        if name not in self.infos:
            raise KeyError(f"no function '{name}' in the executable; functions: {', '.join(self.infos)}")
        device = Device(TARGET_DEVICE.get(self.target.kind, self.target.kind), 0)
        if device.device_type == "cuda":
            from relaxmlir.runtime.cuda_entry import CudaEntryPoint

            return CudaEntryPoint(self, self.infos[name], device)
        return EntryPoint(self, self.infos[name], device)

    def metadata(self) -> dict:
        """Signatures, packed functions, target and libraries: what an exported library embeds."""
        return {
            "functions": [i.to_dict() for i in self.infos.values()],
            "packed": [p.to_dict() for p in self.packed],
            "target": str(self.target),
            "libraries": list(self.libraries),
        }

