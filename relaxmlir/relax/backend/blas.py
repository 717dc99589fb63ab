"""The `blas` codegen (CPU): matmuls and their epilogues through `cblas_sgemm`.

Patterns `blas.matmul[_transposed][_bias][_<activation>]` match float32 matmuls (any batch
dims, a right operand transposed by `permute_dims`), a bias broadcast along the rows, and
relu / gelu / gelu_tanh / silu. Each offloaded composite becomes a call of one C kernel of
`relaxmlir/runtime/native/blas_kernels.c`, which calls the BLAS (OpenBLAS of the
scipy-openblas32 wheel, or MKL) and applies the epilogue right after, in C. `relax.ext.blas`
is registered when both the kernels and a BLAS are found.
"""

from __future__ import annotations

from relaxmlir.relax.backend.patterns import (
    check_inputs,
    check_matmul,
    matmul_inputs,
    matmul_patterns,
)
from relaxmlir.relax.backend.registry import FusionPattern, register_patterns
from relaxmlir.runtime import libraries
from relaxmlir.runtime.registry import NativeFunc, register_func

CODEGEN = "blas"
ACTIVATIONS = {
    "relu": "relax.nn.relu",
    "gelu": "relax.nn.gelu",
    "gelu_tanh": "relax.nn.gelu_tanh",
    "silu": "relax.nn.silu",
}


def _patterns() -> list[FusionPattern]:
    """Lowest priority first (registration order): plain, relu, bias, bias + activation."""
    return matmul_patterns(CODEGEN, ACTIVATIONS, check_matmul)


def is_available() -> bool:
    """The kernels are built and a BLAS library is installed."""
    return libraries.available("blas_kernels") and libraries.available("blas")


def kernel_for(composite: str) -> NativeFunc:
    """The native kernel of a `blas.<kernel>` composite."""
    prefix, _, kernel = composite.partition(".")
    if prefix != CODEGEN or not kernel:
        raise ValueError(f"blas codegen: '{composite}' is not a blas pattern")
    native = NativeFunc("blas_kernels", f"relaxmlir_blas_{kernel}")
    native.address()  # loads the kernels and the BLAS now: a missing one is an error at build
    return native


def codegen(functions: list) -> dict:
    """`relax.ext.blas`: (name, composite, function) -> the native kernel for each name."""
    out = {}
    for name, composite, func_op in functions:
        check_inputs(CODEGEN, name, composite, func_op, matmul_inputs(composite))
        out[name] = kernel_for(composite)
    return out


register_patterns(_patterns())
if is_available():
    register_func(f"relax.ext.{CODEGEN}", codegen, override=True)
