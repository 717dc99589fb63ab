"""Legalization of `matmul`."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.transform.legalize_ops.common import register_legalize


@register_legalize("relax.matmul")
def _matmul(bb: BlockBuilder, call: Call) -> Expr:
    x1, x2 = call.args
    return bb.call_te(topi.matmul, x1, x2, out_dtype=call.attrs["out_dtype"])
