"""oneDNN for the `dnnl` codegen: where libdnnl is, and the native kernels that call it.

The kernels (runtime/native/dnnl_kernels.c, built at install) link against nothing; loading
them (the native library "dnnl_kernels", on the first call of a model that uses them or when the
codegen runs) opens libdnnl with dlopen. libdnnl is the file `RELAXMLIR_DNNL_LIB` names, else
the one the `onednn-cpu-gomp` wheel installed (`pip install onednn-cpu-gomp==2023.2.0`, oneDNN
3.2 built with GNU OpenMP; it ships no headers, so the kernels declare the C API they use).

Threads: oneDNN runs on its own OpenMP runtime (libgomp), our compiled kernels on libiomp5. The
kernels give oneDNN the team size our runtime would use on the calling thread
(`RELAXMLIR_NUM_THREADS`, `relaxmlir.runtime.set_num_threads`), read before each call.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.metadata
import os

from relaxmlir.runtime import libraries

ENV = "RELAXMLIR_DNNL_LIB"
WHEEL = "onednn-cpu-gomp"
HINT = (
    f"the dnnl codegen needs oneDNN 3.x: pip install {WHEEL}==2023.2.0 (or relaxmlir[dnnl]), "
    f"or set {ENV} to a libdnnl.so.3"
)


@functools.cache
def _wheel_library() -> str | None:
    try:
        files = importlib.metadata.distribution(WHEEL).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    libs = [f for f in files if f.name.startswith("libdnnl.so")]
    # the versioned file (libdnnl.so.3.2), not the names other oneDNN wheels also install
    for f in sorted(libs, key=lambda f: -len(f.name)):
        path = str(f.locate())
        if os.path.exists(path):
            return os.path.realpath(path)
    return None


def find_dnnl() -> str | None:
    """The path of libdnnl: `RELAXMLIR_DNNL_LIB` when set (None if that file does not exist),
    else the onednn-cpu-gomp wheel's."""
    forced = os.environ.get(ENV, "")
    if forced:
        return forced if os.path.exists(forced) else None
    return _wheel_library()


def _hint() -> str:
    forced = os.environ.get(ENV, "")
    if forced and not os.path.exists(forced):
        return f"{ENV}={forced} does not exist; {HINT}"
    return HINT


def _find_kernels() -> str | None:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native")
    found = sorted(glob.glob(os.path.join(here, "_dnnl*.so")))
    return found[0] if found else None


def _init_kernels(kernels: ctypes.CDLL) -> None:
    """Open libdnnl from the kernels, and hand them our OpenMP runtime's team size."""
    path = libraries.find("dnnl")
    err = ctypes.create_string_buffer(1024)
    kernels.relaxmlir_dnnl_init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    if kernels.relaxmlir_dnnl_init(path.encode(), err, len(err)):
        reason = err.value.decode(errors="replace")
        raise libraries.LibraryNotFound(f"oneDNN at {path} is unusable ({reason}); {HINT}")
    if libraries.available("openmp"):
        omp = libraries.load("openmp")
        get_max = libraries.address(omp, "omp_get_max_threads")
        kernels.relaxmlir_dnnl_follow_threads(ctypes.c_void_p(get_max))
        return
    threads = libraries.threads_from_env()  # no runtime of ours to follow: the variable itself
    if threads is not None:
        kernels.relaxmlir_dnnl_set_num_threads(ctypes.c_int(threads))


libraries.register_library("dnnl", find_dnnl, _hint())
libraries.register_library(
    "dnnl_kernels",
    _find_kernels,
    "relaxmlir's oneDNN kernels are built at install time: pip install -e . (needs a C compiler)",
    _init_kernels,
)


def cache_info() -> dict:
    """The kernels' primitive cache: entries, hits, misses (primitives made) and the bytes of
    constant weights it holds reordered."""
    kernels = libraries.load("dnnl_kernels")
    stats = (ctypes.c_uint64 * 4)()
    kernels.relaxmlir_dnnl_cache_info(stats)
    return {"entries": stats[0], "hits": stats[1], "misses": stats[2], "weight_bytes": stats[3]}


def clear_cache() -> None:
    """Free the cached primitives and reordered weights (those not running now)."""
    if libraries.is_loaded("dnnl_kernels"):
        libraries.load("dnnl_kernels").relaxmlir_dnnl_cache_clear()


def team_size() -> int:
    """The threads oneDNN would run a kernel called from this thread on."""
    return int(libraries.load("dnnl_kernels").relaxmlir_dnnl_team_size())


def last_error() -> str:
    """The last failure a kernel reported (it filled its output with NaN), or ""."""
    kernels = libraries.load("dnnl_kernels")
    kernels.relaxmlir_dnnl_last_error.restype = ctypes.c_char_p
    return kernels.relaxmlir_dnnl_last_error().decode(errors="replace")
