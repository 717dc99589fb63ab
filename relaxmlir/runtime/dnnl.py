"""oneDNN for the `dnnl` codegen: where libdnnl is, and the native kernels that call it.

The kernels (runtime/native/dnnl_kernels.c, built at install) link against nothing; loading
them (the native library "dnnl_kernels", on the first call of a model that uses them or when the
codegen runs) opens libdnnl with dlopen. libdnnl is the file `RELAXMLIR_DNNL_LIB` names, else
the one the `onednn-cpu-iomp` wheel installed (`pip install onednn-cpu-iomp==2023.2.0
intel-cmplr-lib-rt`, oneDNN 3.2 built with Intel OpenMP; it ships no headers, so the kernels
declare the C API they use), else the `onednn-cpu-gomp` wheel's (the same oneDNN on GNU OpenMP).

Threads: the Intel-OpenMP build runs on OUR OpenMP runtime. Its libdnnl has no RUNPATH; its
DT_NEEDED libiomp5.so and Intel compiler runtime (libintlc, libimf, libsvml, libirng of the
`intel-cmplr-lib-rt` wheel) are loaded here first, privately, so the loader binds libdnnl to
them (see `_preload_dependencies`): oneDNN and our compiled kernels share one libiomp5 thread
pool. The GNU-OpenMP build runs on libgomp (in a process that imported torch, torch's): a
second pool, whose spinning workers stall ours when a model mixes dnnl calls with our kernels
(ResNet-18, 2 threads, all convolutions in oneDNN: 240-590 ms median against 62-82 ms on one
pool); it still works, with a warning. Either way the kernels give oneDNN the team size our
runtime would use on the calling thread (`RELAXMLIR_NUM_THREADS`,
`relaxmlir.runtime.set_num_threads`), read before each call.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.metadata
import mmap
import os
import struct
import warnings

from relaxmlir.runtime import libraries

ENV = "RELAXMLIR_DNNL_LIB"
WHEEL = "onednn-cpu-iomp"
# the `dnnl` extra's wheel before: still used when it is the one installed
GOMP_WHEEL = "onednn-cpu-gomp"
WHEELS = (WHEEL, GOMP_WHEEL)
RUNTIME_WHEEL = "intel-cmplr-lib-rt"
HINT = (
    f"the dnnl codegen needs oneDNN 3.x: pip install {WHEEL}==2023.2.0 {RUNTIME_WHEEL} "
    f"(or relaxmlir[dnnl]), or set {ENV} to a libdnnl.so.3"
)
# Intel's compiler runtime, in the order they depend on each other (libintlc first)
COMPILER_RUNTIME = ("libintlc.so.5", "libirng.so", "libimf.so", "libsvml.so")


@functools.cache
def _wheel_library() -> str | None:
    for wheel in WHEELS:
        try:
            files = importlib.metadata.distribution(wheel).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        libs = [f for f in files if f.name.startswith("libdnnl.so")]
        # the versioned file (libdnnl.so.3.2), not the names other oneDNN wheels also install
        for f in sorted(libs, key=lambda f: -len(f.name)):
            path = str(f.locate())
            if os.path.exists(path):
                return os.path.realpath(path)
    return None


def find_dnnl() -> str | None:
    """The path of libdnnl: `RELAXMLIR_DNNL_LIB` when set (None if that file does not exist),
    else the onednn-cpu-iomp wheel's, else the onednn-cpu-gomp wheel's."""
    forced = os.environ.get(ENV, "")
    if forced:
        return forced if os.path.exists(forced) else None
    return _wheel_library()


def needed_libraries(path: str) -> list[str]:
    """The DT_NEEDED names of the ELF64 little-endian shared library at `path` ([] when it is
    not one: dlopen then says what is wrong with it)."""
    try:
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return []
    with data:
        try:
            return _dynamic_needed(data)
        except (struct.error, IndexError, UnicodeDecodeError):
            return []


def _dynamic_needed(data: mmap.mmap) -> list[str]:
    if data[:6] != b"\x7fELF\x02\x01":
        return []
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        kind, _, offset, vaddr, _, filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize
        )
        if kind == 1:  # PT_LOAD
            loads.append((vaddr, offset, filesz))
        elif kind == 2:  # PT_DYNAMIC
            dynamic = (offset, filesz)
    if dynamic is None:
        return []
    entries, strtab = [], None
    for at in range(dynamic[0], dynamic[0] + dynamic[1], 16):
        tag, value = struct.unpack_from("<qQ", data, at)
        if tag == 0:  # DT_NULL
            break
        if tag == 1:  # DT_NEEDED
            entries.append(value)
        elif tag == 5:  # DT_STRTAB (an address: find its file offset)
            strtab = next((value - v + o for v, o, n in loads if v <= value < v + n), None)
    if strtab is None:
        return []
    return [data[strtab + e : data.find(b"\0", strtab + e)].decode() for e in entries]


def _runtime_folders(dnnl: str) -> list[str]:
    """Where Intel's compiler runtime may be: beside libdnnl (both wheels install into
    <prefix>/lib), else where the intel-cmplr-lib-rt wheel put it."""
    folders = [os.path.dirname(os.path.realpath(dnnl))]
    try:
        files = importlib.metadata.distribution(RUNTIME_WHEEL).files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    folders += [os.path.dirname(str(f.locate())) for f in files if f.name in COMPILER_RUNTIME]
    return list(dict.fromkeys(folders))


_PRELOADED: list[ctypes.CDLL] = []  # kept open: libdnnl is bound to them


def _preload_dependencies(dnnl: str) -> None:
    """Load what libdnnl needs and the loader cannot find, before the kernels dlopen it.

    The onednn-cpu-iomp libdnnl has no RUNPATH, and its DT_NEEDED libiomp5.so, libintlc.so.5,
    libimf.so, libsvml.so and libirng.so lie in <prefix>/lib, which is not on the loader's path.
    Rather than the environment (LD_LIBRARY_PATH is read at process start) or the global symbol
    scope (RTLD_GLOBAL would hand libimf's math and libiomp5's omp_* to every later library),
    they are loaded here privately (RTLD_LOCAL) by path: glibc satisfies a DT_NEEDED with an
    object already loaded under that soname whatever its RTLD_ flags, and binds libdnnl's
    symbols to it through libdnnl's own dependency scope. libiomp5.so is our OpenMP library
    (`libraries.load("openmp")`, with its KMP_BLOCKTIME default), so oneDNN's parallel regions
    run on the thread pool of our compiled kernels."""
    needed = needed_libraries(dnnl)
    if "libgomp.so.1" in needed:
        warnings.warn(
            f"{dnnl} is oneDNN built with GNU OpenMP ({GOMP_WHEEL}): its thread pool and "
            "relaxmlir's (libiomp5) spin against each other when a model mixes dnnl calls with "
            f"compiled kernels; pip uninstall {GOMP_WHEEL} && pip install {WHEEL}==2023.2.0 "
            f"{RUNTIME_WHEEL} runs both on one pool",
            RuntimeWarning,
            stacklevel=2,
        )
    if "libiomp5.so" in needed:
        ours = libraries.find("openmp") if libraries.available("openmp") else ""
        if os.path.basename(ours) == "libiomp5.so":
            libraries.load("openmp")
        else:  # no OpenMP of ours, or RELAXMLIR_OPENMP_LIB is another one (libomp): its own
            _load_beside(dnnl, ["libiomp5.so"])
    runtime = [n for n in COMPILER_RUNTIME if n in needed]
    if runtime:
        # with libintlc.so.5, which libimf, libsvml and libirng need (and their RUNPATH misses)
        _load_beside(dnnl, list(dict.fromkeys([COMPILER_RUNTIME[0], *runtime])))


def _load_beside(dnnl: str, names: list[str]) -> None:
    folders = _runtime_folders(dnnl)
    for name in names:
        path = next(
            (os.path.join(d, name) for d in folders if os.path.exists(os.path.join(d, name))), None
        )
        if path is None:
            raise libraries.LibraryNotFound(
                f"{dnnl} needs {name}, found in none of {', '.join(folders)}: "
                f"pip install {RUNTIME_WHEEL} (Intel's compiler runtime)"
            )
        _PRELOADED.append(ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL))


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
    """Open libdnnl from the kernels (after what it needs), and hand them our OpenMP runtime's
    team size."""
    path = libraries.find("dnnl")
    _preload_dependencies(path)
    err = ctypes.create_string_buffer(1024)
    kernels.relaxmlir_dnnl_init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    if kernels.relaxmlir_dnnl_init(path.encode(), err, len(err)):
        reason = err.value.decode(errors="replace")
        raise libraries.LibraryNotFound(f"oneDNN at {path} is unusable ({reason}); {HINT}")
    if libraries.available("openmp"):
        # the same runtime as oneDNN's for the Intel-OpenMP build (then a no-op), else followed
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
