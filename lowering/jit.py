"""The JIT: an ExecutionEngine over a module lowered to the LLVM dialect, for one target.

Every engine of the project is made here (relax.build, FoldConstant, kernel tests), so the rules
hold everywhere: the code is compiled for the target's CPU and features (`llvm-target` stage of
the pipeline), a target the machine cannot run is refused before any code runs, the native
libraries the code calls are loaded privately and their symbols handed to the engine by address
(nothing is loaded at import, nothing enters the process's global symbol scope), and an engine
outlives in-flight worker threads of parallel kernels by a moment.
"""

from __future__ import annotations

import ctypes
import threading
import time
import weakref
from typing import Any, Callable, Sequence

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from dialects import clone_module
from lowering import dense, llvm_codegen
from lowering.export import (
    CONSTANT_ALIGN,
    constant_bytes,
    detach_constants,
    export_library,
    large_constants,
)
from lowering.registry import contains_op
from relaxmlir.runtime import libraries


class JitError(RuntimeError):
    """The module cannot be JIT-compiled or run here (target, missing library, MLIR error)."""


def external_symbols(module: ir.Module) -> list[str]:
    """Names of the functions the lowered module calls but does not define: its declarations,
    and the OpenMP runtime's entry points when it holds omp ops (they are declared only when the
    module is translated to LLVM IR)."""
    out = []
    for op in module.body.operations:
        op = op.operation
        if op.name == "llvm.func" and not len(op.regions[0].blocks):
            out.append(ir.StringAttr(op.attributes["sym_name"]).value)
    if contains_op(module.operation, "omp."):
        out += libraries.OPENMP_ENTRY_POINTS
    return out


def needed_libraries(module: ir.Module, extra: Sequence[str] = ()) -> list[str]:
    """Built-in libraries for the module's external symbols, then the ones it names itself."""
    found = libraries.libraries_for(external_symbols(module))
    return found + [name for name in extra if name not in found]


class _Constants:
    """The large constants of a JIT-compiled module, outside the code: one buffer each, and the
    pointer slot that the code loads the buffer's address from (`export.detach_constants`)."""

    def __init__(self, detached: list[tuple[str, ir.Attribute]]):
        self.buffers: list[np.ndarray] = []
        self.slots: list[ctypes.c_void_p] = []
        self.addresses: dict[str, int] = {}
        for name, attr in detached:
            data = np.frombuffer(constant_bytes(attr), np.uint8)
            # one copy where a model's weights are borrowed (the code must not see them change)
            # or lack the alignment an exported library gives
            if dense.is_borrowed(attr) or data.ctypes.data % CONSTANT_ALIGN:
                data = dense.aligned_copy(data)
            slot = ctypes.c_void_p(data.ctypes.data)
            self.buffers.append(data)
            self.slots.append(slot)
            self.addresses[name] = ctypes.addressof(slot)


def _detach_constants(module: ir.Module) -> tuple[ir.Module, _Constants]:
    """The module the engine compiles: `module` itself, or a copy whose large constants (weights)
    are read through pointer slots (as in an exported library) instead of being LLVM globals.
    LLVM copies a global's bytes twice on the way to machine code, and compiles them serially:
    BERT-base's 440 MB took 10 s of a 16 s build and 700 MB of memory. The constants stay in
    their attributes (no copy where they are aligned); `module` keeps them for export."""
    if not large_constants(module):
        return module, _Constants([])
    copy = clone_module(module)
    with copy.context:
        # the slots are declarations: the engine binds them (a defined one too would be a
        # duplicate definition, an LLVM fatal error)
        detached = detach_constants(copy, defined=False)
    return copy, _Constants(detached)


class JitCode:
    """`NativeCode` of an Executable: the engine, made when the module is handed over."""

    def __init__(
        self,
        module: ir.Module,
        target: Any,
        extra_libraries: Sequence[str] = (),
        opt_level: int = 3,
    ):
        self.module, self.target = module, target
        dense.hold(self, module)  # the weights the build made, which the code reads
        self.libraries = needed_libraries(module, extra_libraries)
        missing = target.runs_on_host() if target is not None else []
        self._bound: list[Any] = []  # ctypes callbacks must outlive the engine
        self.engine = None
        # Code for a CPU this machine lacks is still built (export_library writes it); only
        # running it here is refused.
        self.unrunnable = (
            f"code for target '{target}' cannot run on this machine (it lacks: "
            f"{', '.join(missing)}); export it with export_library and run it on such a CPU"
            if missing
            else ""
        )
        if missing:
            return
        symbols = libraries.resolve(external_symbols(module), self.libraries)
        # LLVM may call these while generating code for 16-bit floats; the JIT has no
        # compiler-rt to find them in (an exported library links them from runtime.c)
        symbols.update(libraries.resolve(libraries.SOFT_FLOAT_ENTRY_POINTS, ["relaxmlir"]))
        compiled, self._constants = _detach_constants(module)
        symbols.update(self._constants.addresses)
        llvm_codegen.set_backend_options()
        try:
            self.engine = ExecutionEngine(compiled, opt_level=opt_level, shared_libs=[])
        except ir.MLIRError as exc:
            raise JitError(str(exc)) from None
        for name, addr in symbols.items():
            self.engine.raw_register_runtime(name, ctypes.c_void_p(addr))
        _release_later(self, self.engine)

    def lookup(self, name: str) -> Callable:
        if self.engine is None:
            raise JitError(self.unrunnable)
        try:
            return self.engine.lookup(name)
        except RuntimeError:
            raise JitError(f"no compiled function '{name}'") from None

    def bind_packed(self, symbol: str, cfunc: Any) -> None:
        if self.engine is not None:
            self.engine.register_runtime(symbol, cfunc)
        self._bound.append(cfunc)

    def source(self) -> str:
        return str(self.module)

    def export_library(self, path: str, executable: Any) -> None:
        # the engine runs copies of a model's borrowed weights: a library of other ones is refused
        dense.check_borrowed(self.module)
        export_library(self.module, executable, path)


# A worker of the async runtime still runs a few instructions of JIT code (coroutine cleanup)
# after it signals the task done, so freeing an engine right after a parallel call can pull the
# code from under it (segfault, seen when tests build and drop kernels in a loop). Engines are
# therefore freed a while after their owner goes away.
_GRAVE_DELAY_S = 1.0
_GRAVEYARD: list[tuple[float, object]] = []
_GRAVE_LOCK = threading.Lock()


def _bury(engine: object) -> None:
    now = time.monotonic()
    with _GRAVE_LOCK:
        _GRAVEYARD.append((now, engine))
        while _GRAVEYARD and now - _GRAVEYARD[0][0] > _GRAVE_DELAY_S:
            _GRAVEYARD.pop(0)


def _release_later(owner: object, engine: object) -> None:
    weakref.finalize(owner, _bury, engine)
