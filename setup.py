"""Builds relaxmlir's native runtime (relaxmlir/runtime/native/*.c) at install time.

They are plain C libraries that compiled code calls (workspace allocator, the kernels of the blas
and cublas codegens); Python loads them with ctypes, so they use no Python API. `_entry` is the
exception: a Python extension module for the call of an entry point (runtime/entry.py).
Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "relaxmlir.runtime.native._runtime",
            ["relaxmlir/runtime/native/runtime.c"],
            extra_compile_args=["-O2", "-fvisibility=hidden"],
        ),
        # The call of an entry point for plain numpy arrays (runtime/entry.py): the one module
        # here that uses the Python C API.
        Extension(
            "relaxmlir.runtime.native._entry",
            ["relaxmlir/runtime/native/entry.c"],
            extra_compile_args=["-O2", "-fvisibility=hidden"],
        ),
        # The `blas` codegen's kernels; they find the BLAS itself at run time (no link to it).
        Extension(
            "relaxmlir.runtime.native._blas",
            ["relaxmlir/runtime/native/blas_kernels.c"],
            extra_compile_args=["-O3", "-fvisibility=hidden"],
            libraries=["m"],
        ),
        # The `cublas` codegen's kernels; they open libcublasLt and the CUDA driver at run time.
        Extension(
            "relaxmlir.runtime.native._cublas",
            ["relaxmlir/runtime/native/cublas_kernels.c"],
            extra_compile_args=["-O2", "-fvisibility=hidden"],
            libraries=["dl", "pthread"],
        ),
        # The `dnnl` codegen's kernels; they dlopen oneDNN at run time (no link to it).
        Extension(
            "relaxmlir.runtime.native._dnnl",
            ["relaxmlir/runtime/native/dnnl_kernels.c"],
            extra_compile_args=["-O2", "-fvisibility=hidden"],
            libraries=["dl", "pthread", "m"],
        ),
    ]
)
