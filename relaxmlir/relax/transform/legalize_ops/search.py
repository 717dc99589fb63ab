"""Legalization of `argmax`, `argmin`, `argsort` and `cumsum` (`where` is a broadcasting op, in
binary.py)."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.transform.legalize_ops.common import (
    LegalizeRule,
    TEFunc,
    call_topi,
    register_legalize,
)


def _arg_reduce(te_func: TEFunc) -> LegalizeRule:
    def rule(bb: BlockBuilder, call: Call) -> Expr:
        axis = call.attrs["axis"]
        return bb.call_te(te_func, call.args[0], axis[0] if axis else None, call.attrs["keepdims"])

    return rule


register_legalize("relax.argmax", _arg_reduce(topi.argmax))
register_legalize("relax.argmin", _arg_reduce(topi.argmin))
register_legalize("relax.argsort", call_topi(topi.argsort, "axis", "descending", "dtype"))
register_legalize("relax.cumsum", call_topi(topi.cumsum, "axis", "dtype", "exclusive"))
