"""Pattern builders shared by the backends (TVM's `relax.backend.patterns`)."""

from __future__ import annotations

from relaxmlir.relax.dpl import DFPattern, is_op, wildcard


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
