"""Legalization of broadcasting binary operators and `where`.

As in TVM, a single-element constant operand is folded into the kernel as a scalar (`x * 0.5`
reads one tensor), when that does not change the result's rank.
"""

from __future__ import annotations

from typing import Any

from relaxmlir import te, topi
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Constant, Expr
from relaxmlir.relax.transform.legalize_ops.common import LegalizeRule, TEFunc, register_legalize


def _scalar_operands(args: list) -> list[Any]:
    """Replace each one-element constant by a `te.const`, keeping at least one tensor."""
    ranks = [a.struct_info.ndim for a in args]
    out = list(args)
    for i, a in enumerate(args):
        others = [r for j, r in enumerate(ranks) if j != i and not isinstance(out[j], te.Expr)]
        if isinstance(a, Constant) and a.data.size == 1 and others and max(others) >= a.data.ndim:
            out[i] = te.const(a.data.item(), a.struct_info.dtype)
    return out


def _binary(te_func: TEFunc) -> LegalizeRule:
    """Rule for a broadcasting `te_func(lhs, rhs)` (also `where(cond, x1, x2)`)."""

    def rule(bb: BlockBuilder, call: Call) -> Expr:
        return bb.call_te(te_func, *_scalar_operands(call.args))

    def bool_rule(bb: BlockBuilder, call: Call) -> Expr:
        if call.struct_info.dtype != "bool":
            return rule(bb, call)
        return bb.call_te(_to_bool(te_func), *_scalar_operands(call.args))

    return bool_rule


def _to_bool(te_func: TEFunc) -> TEFunc:
    """TE computes bool add/multiply in int32; torch's bool result is `!= 0` of that (logical
    or / and)."""

    def compute(*args):
        out = te_func(*args)
        return out if out.dtype == "bool" else topi.cast(out, "bool")

    return compute


register_legalize("relax.add", _binary(topi.add))
register_legalize("relax.subtract", _binary(topi.subtract))
register_legalize("relax.multiply", _binary(topi.multiply))
register_legalize("relax.divide", _binary(topi.divide))
register_legalize("relax.floor_divide", _binary(topi.floor_divide))
register_legalize("relax.floor_mod", _binary(topi.floor_mod))
register_legalize("relax.power", _binary(topi.power))
register_legalize("relax.mod", _binary(topi.mod))
register_legalize("relax.atan2", _binary(topi.atan2))
register_legalize("relax.hypot", _binary(topi.hypot))
register_legalize("relax.copysign", _binary(topi.copysign))
register_legalize("relax.maximum", _binary(topi.maximum))
register_legalize("relax.minimum", _binary(topi.minimum))
register_legalize("relax.equal", _binary(topi.equal))
register_legalize("relax.not_equal", _binary(topi.not_equal))
register_legalize("relax.less", _binary(topi.less))
register_legalize("relax.less_equal", _binary(topi.less_equal))
register_legalize("relax.greater", _binary(topi.greater))
register_legalize("relax.greater_equal", _binary(topi.greater_equal))
register_legalize("relax.logical_and", _binary(topi.logical_and))
register_legalize("relax.logical_or", _binary(topi.logical_or))
register_legalize("relax.logical_xor", _binary(topi.logical_xor))
register_legalize("relax.bitwise_and", _binary(topi.bitwise_and))
register_legalize("relax.bitwise_or", _binary(topi.bitwise_or))
register_legalize("relax.bitwise_xor", _binary(topi.bitwise_xor))
register_legalize("relax.where", _binary(topi.where))
