"""Legalization of `take`, `strided_slice`, `gather_elements`, `scatter_elements`, `index_copy`."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.transform.legalize_ops.common import call_topi, register_legalize

register_legalize("relax.take", call_topi(topi.take, "axis", "mode"))
register_legalize("relax.gather_elements", call_topi(topi.gather_elements, "axis"))
register_legalize("relax.scatter_elements", call_topi(topi.scatter_elements, "axis", "reduction"))
register_legalize("relax.index_copy", call_topi(topi.index_copy, "axis"))


@register_legalize("relax.strided_slice")
def _strided_slice(bb: BlockBuilder, call: Call) -> Expr:
    a = call.attrs
    return bb.call_te(
        topi.strided_slice, call.args[0], a["begin"], a["end"], a["strides"], a["axes"]
    )
