"""Legalization of `take` and `strided_slice`."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.transform.legalize_ops.common import call_topi, register_legalize

register_legalize("relax.take", call_topi(topi.take, "axis", "mode"))


@register_legalize("relax.strided_slice")
def _strided_slice(bb: BlockBuilder, call: Call) -> Expr:
    a = call.attrs
    return bb.call_te(
        topi.strided_slice, call.args[0], a["begin"], a["end"], a["strides"], a["axes"]
    )
