"""Legalization of `relax.nn.*`: activations, softmax, normalization, convolution, pooling."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.topi.nn import blocked
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Expr
from relaxmlir.relax.transform.legalize_ops.common import (
    LegalizeRule,
    call_topi,
    register_legalize,
)

register_legalize("relax.nn.relu", call_topi(topi.nn.relu))
register_legalize("relax.nn.gelu", call_topi(topi.nn.gelu))
register_legalize("relax.nn.gelu_tanh", call_topi(topi.nn.gelu_tanh))
register_legalize("relax.nn.silu", call_topi(topi.nn.silu))
register_legalize("relax.nn.leaky_relu", call_topi(topi.nn.leaky_relu, "alpha"))
register_legalize("relax.nn.softmax", call_topi(topi.nn.softmax, "axis"))
register_legalize("relax.nn.log_softmax", call_topi(topi.nn.log_softmax, "axis"))
register_legalize(
    "relax.nn.layer_norm", call_topi(topi.nn.layer_norm, "axes", "epsilon", "center", "scale")
)
register_legalize(
    "relax.nn.batch_norm", call_topi(topi.nn.batch_norm, "axis", "epsilon", "center", "scale")
)


@register_legalize("relax.nn.dropout")
def _dropout(bb: BlockBuilder, call: Call) -> Expr:
    return call.args[0]  # inference: the identity


@register_legalize("relax.nn.conv2d")
def _conv2d(bb: BlockBuilder, call: Call) -> Expr:
    a = call.attrs
    if a.get("data_layout", "NCHW") == "NCHW":
        compute, groups = topi.nn.conv2d, [a["groups"]]
    elif a["groups"] == 1:  # channel-blocked (relax-alter-op-layout)
        compute, groups = blocked.conv2d_nchwc, []
    else:  # channel-blocked and depthwise (groups = channels)
        from relaxmlir.relax.op.strategy import emit_depthwise_conv2d_nchwc

        return emit_depthwise_conv2d_nchwc(bb, call)
    return bb.call_te(
        compute, *call.args, a["strides"], a["padding"], a["dilation"], *groups, a["out_dtype"]
    )


def _pool2d(pool_type: str) -> LegalizeRule:
    def rule(bb: BlockBuilder, call: Call) -> Expr:
        a = call.attrs
        if a["layout"] != "NCHW":  # channel-blocked (relax-alter-op-layout)
            return bb.call_te(
                blocked.pool2d_nchwc,
                call.args[0],
                a["pool_size"],
                a["strides"],
                a["dilation"],
                a["padding"],
                pool_type,
                a["count_include_pad"],
            )
        return bb.call_te(
            topi.nn.pool2d,
            call.args[0],
            a["pool_size"],
            a["strides"],
            a["dilation"],
            a["padding"],
            pool_type,
            a["ceil_mode"],
            a["layout"],
            a["count_include_pad"],
        )

    return rule


register_legalize("relax.nn.max_pool2d", _pool2d("max"))
register_legalize("relax.nn.avg_pool2d", _pool2d("avg"))


@register_legalize("relax.nn.adaptive_avg_pool2d")
def _adaptive_avg_pool2d(bb: BlockBuilder, call: Call) -> Expr:
    a = call.attrs
    if a["layout"] != "NCHW":  # channel-blocked, global (relax-alter-op-layout)
        return bb.call_te(blocked.global_avg_pool_nchwc, call.args[0])
    return bb.call_te(topi.nn.adaptive_pool, call.args[0], a["output_size"], "avg", a["layout"])


@register_legalize("relax.nn.pad")
def _pad(bb: BlockBuilder, call: Call) -> Expr:
    a = call.attrs
    width = a["pad_width"]
    before, after = width[0::2], width[1::2]
    if not any(width):
        return call.args[0]  # NOTE: topi.nn.pad hands back its input: no kernel to build
    if a["pad_mode"] == "constant":
        return bb.call_te(topi.nn.pad, call.args[0], before, after, a["pad_value"])
    mode = "REFLECT" if a["pad_mode"] == "reflect" else "EDGE"
    return bb.call_te(topi.nn.mirror_pad, call.args[0], before, after, mode)
