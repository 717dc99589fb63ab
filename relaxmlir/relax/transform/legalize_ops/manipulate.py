"""Legalization of shape manipulation operators."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.topi import layout
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.transform.legalize_ops.common import call_topi, register_legalize, te_dim

register_legalize("relax.reshape", call_topi(topi.reshape, "shape"))
register_legalize("relax.permute_dims", call_topi(topi.transpose, "axes"))
register_legalize(
    "relax.layout_transform", call_topi(layout.layout_transform, "src_layout", "dst_layout")
)
register_legalize("relax.squeeze", call_topi(topi.squeeze, "axis"))
register_legalize("relax.expand_dims", call_topi(topi.expand_dims, "axis"))
register_legalize("relax.broadcast_to", call_topi(topi.broadcast_to, "shape"))
register_legalize("relax.tile", call_topi(topi.tile, "repeats"))


@register_legalize("relax.flatten")
def _flatten(bb: BlockBuilder, call: Call) -> Expr:
    return bb.call_te(topi.reshape, call.args[0], call.struct_info.shape)


@register_legalize("relax.concat")
def _concat(bb: BlockBuilder, call: Call) -> Expr:
    return bb.call_te(topi.concatenate, list(call.args), call.attrs["axis"])


@register_legalize("relax.split")
def _split(bb: BlockBuilder, call: Call) -> Expr:
    # NOTE: symbolic split points ("n//2") must be expressions of x's own dims in the kernel
    indices = [te_dim(i) for i in call.attrs["indices"]]
    return bb.call_te(topi.split, call.args[0], indices, call.attrs["axis"])
