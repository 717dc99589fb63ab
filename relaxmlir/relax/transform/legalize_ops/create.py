"""Legalization of tensor creation operators."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.transform.legalize_ops.common import (
    LegalizeRule,
    register_legalize,
    te_dim,
)


@register_legalize("relax.full")
def _full(bb: BlockBuilder, call: Call) -> Expr:
    shape, dtype = call.attrs["shape"], call.attrs["dtype"]

    def full(fill_value):
        return topi.full(shape, dtype, fill_value)

    return bb.call_te(full, call.args[0])


@register_legalize("relax.full_like")
def _full_like(bb: BlockBuilder, call: Call) -> Expr:
    def full_like(x, fill_value):
        return topi.full(x.shape, call.attrs["dtype"], fill_value)

    return bb.call_te(full_like, *call.args)


def _fill(value: int) -> LegalizeRule:
    def rule(bb: BlockBuilder, call: Call) -> Expr:
        return bb.call_te(topi.full, call.attrs["shape"], call.attrs["dtype"], value)

    return rule


register_legalize("relax.zeros", _fill(0))
register_legalize("relax.ones", _fill(1))


@register_legalize("relax.arange")
def _arange(bb: BlockBuilder, call: Call) -> Expr:
    a = call.attrs
    end = a["end"]
    if isinstance(end, str):  # a symbolic end: the length comes from the result's shape
        end = te_dim(call.struct_info.shape[0])
    return bb.call_te(topi.arange, a["start"], end, a["step"], a["dtype"])


@register_legalize("relax.tril")
def _tril(bb: BlockBuilder, call: Call) -> Expr:
    return bb.call_te(topi.trilu, call.args[0], call.attrs["k"], False)


@register_legalize("relax.triu")
def _triu(bb: BlockBuilder, call: Call) -> Expr:
    return bb.call_te(topi.trilu, call.args[0], call.attrs["k"], True)
