"""Legalization of elementwise unary operators."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.relax.transform.legalize_ops.common import call_topi, register_legalize

register_legalize("relax.abs", call_topi(topi.abs))
register_legalize("relax.negative", call_topi(topi.negative))
register_legalize("relax.exp", call_topi(topi.exp))
register_legalize("relax.log", call_topi(topi.log))
register_legalize("relax.sqrt", call_topi(topi.sqrt))
register_legalize("relax.rsqrt", call_topi(topi.rsqrt))
register_legalize("relax.sigmoid", call_topi(topi.sigmoid))
register_legalize("relax.tanh", call_topi(topi.tanh))
register_legalize("relax.erf", call_topi(topi.erf))
register_legalize("relax.sin", call_topi(topi.sin))
register_legalize("relax.cos", call_topi(topi.cos))
register_legalize("relax.floor", call_topi(topi.floor))
register_legalize("relax.ceil", call_topi(topi.ceil))
register_legalize("relax.round", call_topi(topi.round))
register_legalize("relax.sign", call_topi(topi.sign))
register_legalize("relax.square", call_topi(topi.square))
register_legalize("relax.trunc", call_topi(topi.trunc))
register_legalize("relax.log1p", call_topi(topi.log1p))
register_legalize("relax.expm1", call_topi(topi.expm1))
register_legalize("relax.log2", call_topi(topi.log2))
register_legalize("relax.log10", call_topi(topi.log10))
register_legalize("relax.logical_not", call_topi(topi.logical_not))
register_legalize("relax.bitwise_not", call_topi(topi.bitwise_not))
register_legalize("relax.clip", call_topi(topi.clip, "min", "max"))
register_legalize("relax.astype", call_topi(topi.cast, "dtype"))
