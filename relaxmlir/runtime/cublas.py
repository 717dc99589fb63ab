"""cuBLASLt for the `cublas` codegen: where libcublasLt is, and the native kernels that call it.

The kernels (runtime/native/cublas_kernels.c, built at install) link against nothing: they are
registered here as the native library "cublas_kernels" (device "cuda"), and loading them only
tells them where libcublasLt is, so models that call them build and load on machines without
cuBLAS or a GPU; the first kernel call opens libcublasLt and the driver, and a missing one is a
`CudaError` raised by the VM after the call. libcublasLt is searched in `RELAXMLIR_CUBLAS_LIB`,
the `nvidia-cublas` wheel (`pip install nvidia-cublas`; also what torch's CUDA wheels install),
torch's own lib folder, `$CUDA_HOME`/`/usr/local/cuda`, then the system's library path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os

from relaxmlir.runtime import libraries

ENV = "RELAXMLIR_CUBLAS_LIB"
HINT = (
    "pip install nvidia-cublas (or relaxmlir[cublas]), or set RELAXMLIR_CUBLAS_LIB to a "
    "libcublasLt.so"
)
DRIVER = "libcuda.so.1"
_LIB_GLOBS = ("libcublasLt.so.*[0-9]", "libcublasLt.so")


def _in_folder(folder: str) -> str | None:
    for pattern in _LIB_GLOBS:
        # newest major version first (libcublasLt.so.13 before .12)
        found = sorted(glob.glob(os.path.join(folder, pattern)), reverse=True)
        if found:
            return found[0]
    return None


def find_cublaslt() -> str | None:
    """The path of libcublasLt, or None (see the module docstring for the search order)."""
    forced = os.environ.get(ENV, "")
    if forced:
        return forced if os.path.exists(forced) else None
    folders = []
    nvidia = libraries.package_folder("nvidia")  # namespace package of NVIDIA's wheels
    if nvidia:
        # cu13 wheels: nvidia/cu13/lib; cu12 wheels (torch's dependencies): nvidia/cublas/lib
        folders += sorted(glob.glob(os.path.join(nvidia, "cu*", "lib")), reverse=True)
        folders.append(os.path.join(nvidia, "cublas", "lib"))
    torch = libraries.package_folder("torch")
    if torch:
        folders.append(os.path.join(torch, "lib"))
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if os.environ.get(var):
            folders.append(os.path.join(os.environ[var], "lib64"))
    folders.append("/usr/local/cuda/lib64")
    for folder in folders:
        found = _in_folder(folder)
        if found:
            return found
    return ctypes.util.find_library("cublasLt")


def _hint() -> str:
    forced = os.environ.get(ENV, "")
    if forced and not os.path.exists(forced):
        return f"{ENV}={forced} does not exist"
    return HINT


def _find_kernels() -> str | None:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native")
    found = sorted(glob.glob(os.path.join(here, "_cublas*.so")))
    return found[0] if found else None


def _configure(kernels: ctypes.CDLL) -> None:
    """Tell the kernels where libcublasLt is (not opened here: the first kernel call does)."""
    kernels.relaxmlir_cublas_configure.argtypes = [ctypes.c_char_p] * 3
    path = find_cublaslt()
    kernels.relaxmlir_cublas_configure(
        path.encode() if path else None, DRIVER.encode(), _hint().encode()
    )


libraries.register_library(
    "cublas_kernels",
    _find_kernels,
    "relaxmlir's cuBLASLt kernels are built at install time: pip install -e . (needs a C compiler)",
    _configure,
    device="cuda",
)


def _take_error(kernels: ctypes.CDLL) -> str:
    buf = ctypes.create_string_buffer(1024)
    kernels.relaxmlir_cuda_take_error.argtypes = [ctypes.c_char_p, ctypes.c_int]
    n = kernels.relaxmlir_cuda_take_error(buf, len(buf))
    return buf.value.decode(errors="replace") if n else ""


def version() -> int:
    """cuBLASLt's version number (e.g. 131000 for 13.10.0); `CudaError` when it cannot be loaded."""
    from relaxmlir.runtime.cuda_driver import CudaError

    kernels = libraries.load("cublas_kernels")
    kernels.relaxmlir_cublas_version.restype = ctypes.c_size_t
    found = kernels.relaxmlir_cublas_version()
    if not found:
        raise CudaError(_take_error(kernels) or "cublas: cuBLASLt reported no version")
    return int(found)


def runtime_problem() -> str | None:
    """Why the cublas kernels cannot run here (no cuBLASLt, no driver, no device), or None."""
    try:
        kernels = libraries.load("cublas_kernels")
    except libraries.LibraryNotFound as exc:
        return str(exc)
    if kernels.relaxmlir_cublas_probe():
        return None
    return _take_error(kernels) or "cublas: unusable (no reason recorded)"
