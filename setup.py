"""Builds relaxmlir's native runtime (relaxmlir/runtime/native/runtime.c) at install time.

It is a plain C library that compiled kernels call (workspace allocator); Python loads it with
ctypes, so it uses no Python API. Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "relaxmlir.runtime.native._runtime",
            ["relaxmlir/runtime/native/runtime.c"],
            extra_compile_args=["-O2", "-fvisibility=hidden"],
        )
    ]
)
