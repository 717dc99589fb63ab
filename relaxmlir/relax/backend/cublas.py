"""The `cublas` codegen (CUDA): matmuls and their epilogues through cuBLASLt.

Patterns `cublas.matmul[_transposed][_bias][_relu|_gelu_tanh]` match float32 matmuls, and
float16 ones (accumulated in float32), of any batch dims (broadcast included), with a right operand
transposed by `permute_dims`, a bias vector along the output's columns, then relu or the tanh
GELU. Each offloaded composite becomes a call of one C kernel of
`relaxmlir/runtime/native/cublas_kernels.c`, which runs cuBLASLt's matmul with the matching
epilogue (BIAS, RELU_BIAS, GELU_BIAS) on the model's stream; the host code of a model built for
cuda calls it with device pointers, without Python.

cuBLASLt's GELU epilogue is the tanh approximation, so `relax.nn.gelu` (erf) is not taken: a
`matmul + bias` followed by it offloads the matmul and bias, and the erf GELU stays our kernel.

`relax.ext.cublas` is registered whenever the kernels are built (they are, at install): a
module dispatches and builds for cuda on machines without cuBLASLt or a GPU; running it there
raises `CudaError` saying which is missing (`relaxmlir.runtime.cublas.runtime_problem()` asks
first).
"""

from __future__ import annotations

from mlir import ir

from relaxmlir.ir import attr_value
from relaxmlir.relax.backend.patterns import check_inputs, matmul_inputs, matmul_patterns
from relaxmlir.relax.backend.registry import FusionPattern, PatternCheckContext, register_patterns
from relaxmlir.relax.struct_info import dtype_of
from relaxmlir.runtime import cublas as cublas_runtime
from relaxmlir.runtime import libraries
from relaxmlir.runtime.registry import NativeFunc, register_func

CODEGEN = "cublas"
ACTIVATIONS = {"relu": "relax.nn.relu", "gelu_tanh": "relax.nn.gelu_tanh"}
DTYPES = {"float32": "f32", "float16": "f16"}  # the kernels' symbol prefix per dtype


def _tensor(value: ir.Value) -> ir.RankedTensorType | None:
    return ir.RankedTensorType(value.type) if isinstance(value.type, ir.RankedTensorType) else None


def _static(size: int) -> bool:
    return not ir.ShapedType.is_dynamic_size(size)


def _check_matmul(ctx: PatternCheckContext) -> bool:
    """float32 or float16 throughout, rank >= 2, a static non-empty contraction, a transpose of
    the last two dims only, a bias that is one value per output column."""
    lhs, rhs = _tensor(ctx.annotated_expr["lhs"]), _tensor(ctx.annotated_expr["rhs"])
    out = _tensor(ctx.annotated_expr["root"])
    if lhs is None or rhs is None or out is None:
        return False
    dtype = dtype_of(lhs.element_type)
    if dtype not in DTYPES or any(dtype_of(t.element_type) != dtype for t in (rhs, out)):
        return False
    if lhs.rank < 2 or rhs.rank < 2 or not _static(lhs.shape[-1]) or lhs.shape[-1] == 0:
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
        if b is None or result is None or dtype_of(b.element_type) != dtype or b.rank < 1:
            return False
        n = out.shape[-1]
        # cuBLASLt's bias epilogue adds a vector along the columns: (n,), (1, n), ...
        if not _static(n) or b.shape[-1] != n or any(d != 1 for d in b.shape[:-1]):
            return False
        if list(result.shape) != list(out.shape):  # the add only broadcasts the bias
            return False
    return True


def _patterns() -> list[FusionPattern]:
    """Lowest priority first (registration order): plain, activations, bias, bias + activation."""
    return matmul_patterns(CODEGEN, ACTIVATIONS, _check_matmul, unbiased=tuple(ACTIVATIONS))


def is_built() -> bool:
    """The kernels are built (then `relax.ext.cublas` is registered)."""
    return libraries.available("cublas_kernels")


def is_available() -> bool:
    """The kernels are built and libcublasLt is installed (a GPU is not asked for)."""
    return is_built() and cublas_runtime.find_cublaslt() is not None


def kernel_for(composite: str, dtype: str = "float32") -> NativeFunc:
    """The native kernel of a `cublas.<kernel>` composite for `dtype`."""
    prefix, _, kernel = composite.partition(".")
    if prefix != CODEGEN or not kernel:
        raise ValueError(f"cublas codegen: '{composite}' is not a cublas pattern")
    if dtype not in DTYPES:
        raise ValueError(f"cublas codegen: no kernel for dtype {dtype} (have {', '.join(DTYPES)})")
    native = NativeFunc("cublas_kernels", f"relaxmlir_cublas_{DTYPES[dtype]}_{kernel}")
    native.address()  # the kernels must be built; cuBLASLt itself is opened by the first call
    return native


def codegen(functions: list) -> dict:
    """`relax.ext.cublas`: (name, composite, function) -> the native kernel for each name."""
    out = {}
    for name, composite, func_op in functions:
        check_inputs(CODEGEN, name, composite, func_op, matmul_inputs(composite))
        ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
        dtype = dtype_of(ir.RankedTensorType(ftype.results[0]).element_type)
        out[name] = kernel_for(composite, dtype)
    return out


register_patterns(_patterns())
if is_built():
    register_func(f"relax.ext.{CODEGEN}", codegen, override=True)
