"""Legalization of `argmax` and `argmin` (`where` is a broadcasting op, in binary.py)."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.transform.legalize_ops.common import LegalizeRule, TEFunc, register_legalize


def _arg_reduce(te_func: TEFunc) -> LegalizeRule:
    def rule(bb: BlockBuilder, call: Call) -> Expr:
        axis = call.attrs["axis"]
        return bb.call_te(te_func, call.args[0], axis[0] if axis else None, call.attrs["keepdims"])

    return rule


register_legalize("relax.argmax", _arg_reduce(topi.argmax))
register_legalize("relax.argmin", _arg_reduce(topi.argmin))
