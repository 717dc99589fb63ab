"""The `blas` codegen (CPU): matmuls and their epilogues through `cblas_sgemm`.

Patterns `blas.matmul[_transposed][_bias][_<activation>]` match float32 matmuls (any batch
dims, a right operand transposed by `permute_dims`), a bias broadcast along the rows, and
relu / gelu / gelu_tanh / silu. Each offloaded composite becomes a call of one C kernel of
`relaxmlir/runtime/native/blas_kernels.c`, which calls the BLAS (OpenBLAS of the
scipy-openblas32 wheel, or MKL) and applies the epilogue right after, in C. `relax.ext.blas`
is registered when both the kernels and a BLAS are found.
"""

from __future__ import annotations

from mlir import ir

from lowering.composite import composite_leaves
from relaxmlir.ir import attr_value
from relaxmlir.relax.backend.patterns import make_matmul_pattern
from relaxmlir.relax.backend.registry import FusionPattern, PatternCheckContext, register_patterns
from relaxmlir.relax.struct_info import dtype_of
from relaxmlir.runtime import libraries
from relaxmlir.runtime.registry import NativeFunc, register_func

CODEGEN = "blas"
ACTIVATIONS = {
    "relu": "relax.nn.relu",
    "gelu": "relax.nn.gelu",
    "gelu_tanh": "relax.nn.gelu_tanh",
    "silu": "relax.nn.silu",
}


def _tensor(value: ir.Value) -> ir.RankedTensorType | None:
    return ir.RankedTensorType(value.type) if isinstance(value.type, ir.RankedTensorType) else None


def _check_matmul(ctx: PatternCheckContext) -> bool:
    """float32 operands of rank >= 2, a transpose of the last two dims only, a bias that
    broadcasts along the rows of the output."""
    lhs, rhs = _tensor(ctx.annotated_expr["lhs"]), _tensor(ctx.annotated_expr["rhs"])
    out = _tensor(ctx.annotated_expr["root"])
    if lhs is None or rhs is None or out is None:
        return False
    if any(dtype_of(t.element_type) != "float32" for t in (lhs, rhs, out)):
        return False
    if lhs.rank < 2 or rhs.rank < 2:
        return False
    transpose = ctx.annotated_expr.get("transpose")
    if transpose is not None:
        axes = attr_value(transpose.owner.operation.attributes["axes"])
        r = rhs.rank
        if list(axes) != list(range(r - 2)) + [r - 1, r - 2]:
            return False
    bias = ctx.annotated_expr.get("bias")
    if bias is not None:
        b, result = _tensor(bias), _tensor(ctx.matched_expr)
        if b is None or dtype_of(b.element_type) != "float32" or b.rank > result.rank:
            return False
        # the output of add must be the matmul's shape: the bias only broadcasts
        if list(result.shape) != list(out.shape):
            return False
    return True


def _patterns() -> list[FusionPattern]:
    """Lowest priority first (registration order): plain, then bias, then activations."""
    out = []
    for transposed in (False, True):
        stem = "matmul_transposed" if transposed else "matmul"
        out.append(
            FusionPattern(
                f"blas.{stem}", *make_matmul_pattern(transposed_rhs=transposed), _check_matmul
            )
        )
        pat, ann = make_matmul_pattern(activation=ACTIVATIONS["relu"], transposed_rhs=transposed)
        out.append(FusionPattern(f"blas.{stem}_relu", pat, ann, _check_matmul))
        pat, ann = make_matmul_pattern(with_bias=True, transposed_rhs=transposed)
        out.append(FusionPattern(f"blas.{stem}_bias", pat, ann, _check_matmul))
        for act, op in ACTIVATIONS.items():
            pat, ann = make_matmul_pattern(with_bias=True, activation=op, transposed_rhs=transposed)
            out.append(FusionPattern(f"blas.{stem}_bias_{act}", pat, ann, _check_matmul))
    return out


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
        want = 3 if "_bias" in composite else 2  # lhs, rhs[, bias]
        got = len(composite_leaves(func_op))
        if got != want:  # a user pattern under the blas name that the kernel cannot take
            raise ValueError(
                f"blas codegen: '{name}' ({composite}) has {got} inputs, the kernel takes {want}"
            )
        out[name] = kernel_for(composite)
    return out


register_patterns(_patterns())
if is_available():
    register_func(f"relax.ext.{CODEGEN}", codegen, override=True)
