"""Pattern builders and checks shared by the backends (TVM's `relax.backend.patterns`)."""

from __future__ import annotations

from mlir import ir

from lowering.composite import composite_leaves
from relaxmlir.ir import attr_value
from relaxmlir.relax.backend.registry import FusionPattern, PatternCheckContext
from relaxmlir.relax.dpl import DFPattern, is_op, wildcard
from relaxmlir.relax.struct_info import dtype_of


def make_matmul_pattern(
    with_bias: bool = False,
    activation: str | None = None,
    transposed_rhs: bool = False,
) -> tuple[DFPattern, dict[str, DFPattern]]:
    """`activation(matmul(lhs, rhs or permute_dims(rhs)) + bias)`, and its named parts
    (`lhs`, `rhs`, `root` = the matmul, `bias`)."""
    lhs, rhs = wildcard(), wildcard()
    annotations = {"lhs": lhs, "rhs": rhs}
    if transposed_rhs:
        transposed = is_op("relax.permute_dims")(rhs)
        annotations["transpose"] = transposed
        rhs = transposed
    out = is_op("relax.matmul")(lhs, rhs)
    annotations["root"] = out
    if with_bias:
        bias = wildcard()
        annotations["bias"] = bias
        out = is_op("relax.add")(out, bias)
    if activation:
        out = is_op(activation)(out)
    return out, annotations


def matmul_patterns(
    codegen: str,
    activations: dict[str, str],
    check,
    unbiased: tuple[str, ...] = ("relu",),
) -> list[FusionPattern]:
    """A library's matmul family, lowest priority first (registration order), for the right
    operand as is and transposed by `permute_dims`: `<codegen>.matmul[_transposed]`, then
    `..._<act>` for the activations in `unbiased`, `..._bias`, and `..._bias_<act>` for every
    activation (name -> relax op) its kernels apply."""
    out = []
    for transposed in (False, True):
        stem = f"{codegen}.matmul_transposed" if transposed else f"{codegen}.matmul"
        family = [(stem, {})]
        family += [(f"{stem}_{act}", {"activation": activations[act]}) for act in unbiased]
        family += [(f"{stem}_bias", {"with_bias": True})]
        family += [
            (f"{stem}_bias_{act}", {"with_bias": True, "activation": op})
            for act, op in activations.items()
        ]
        for name, parts in family:
            pattern, annotations = make_matmul_pattern(transposed_rhs=transposed, **parts)
            out.append(FusionPattern(name, pattern, annotations, check))
    return out


def make_conv2d_pattern(
    with_bias: bool = False,
    with_residual: bool = False,
    activation: str | None = None,
) -> tuple[DFPattern, dict[str, DFPattern]]:
    """`activation(conv2d(data, weight) + bias + residual)`, and its named parts (`data`,
    `weight`, `root` = the conv2d, `bias`, `residual`). The residual may be either operand of
    its add (`x + conv(x)` as well as `conv(x) + x`); the bias is the right one, as frontends
    write it."""
    data, weight = wildcard(), wildcard()
    out = is_op("relax.nn.conv2d")(data, weight)
    annotations = {"data": data, "weight": weight, "root": out}
    if with_bias:
        bias = wildcard()
        annotations["bias"] = bias
        out = is_op("relax.add")(out, bias)
    if with_residual:
        residual = wildcard()
        annotations["residual"] = residual
        out = is_op("relax.add")(out, residual) | is_op("relax.add")(residual, out)
    if activation:
        out = is_op(activation)(out)
    return out, annotations


def tensor_type(value: ir.Value) -> ir.RankedTensorType | None:
    return ir.RankedTensorType(value.type) if isinstance(value.type, ir.RankedTensorType) else None


def check_matmul(ctx: PatternCheckContext) -> bool:
    """float32 operands of rank >= 2, a transpose of the last two dims only, a bias that
    broadcasts along the rows of the output."""
    lhs, rhs = tensor_type(ctx.annotated_expr["lhs"]), tensor_type(ctx.annotated_expr["rhs"])
    out = tensor_type(ctx.annotated_expr["root"])
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
        b, result = tensor_type(bias), tensor_type(ctx.matched_expr)
        if b is None or dtype_of(b.element_type) != "float32" or b.rank > result.rank:
            return False
        # the output of add must be the matmul's shape: the bias only broadcasts
        if list(result.shape) != list(out.shape):
            return False
    return True


def check_inputs(codegen: str, name: str, composite: str, func_op, want: int) -> None:
    """A codegen's guard against a user pattern registered under its name whose composite takes
    another number of inputs than the kernel (`want`): a ValueError naming both."""
    got = len(composite_leaves(func_op))
    if got != want:
        raise ValueError(
            f"{codegen} codegen: '{name}' ({composite}) has {got} inputs, the kernel takes {want}"
        )


def matmul_inputs(composite: str) -> int:
    """lhs, rhs and, for the `_bias` patterns, the bias."""
    return 3 if "_bias" in composite else 2
