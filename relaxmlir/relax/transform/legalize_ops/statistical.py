"""Legalization of reductions (`sum`, `mean`, `max`, `min`, `prod`, `variance`)."""

from __future__ import annotations

from relaxmlir import topi
from relaxmlir.relax.transform.legalize_ops.common import call_topi, register_legalize

register_legalize("relax.sum", call_topi(topi.sum, "axis", "keepdims"))
register_legalize("relax.mean", call_topi(topi.mean, "axis", "keepdims"))
register_legalize("relax.max", call_topi(topi.max, "axis", "keepdims"))
register_legalize("relax.min", call_topi(topi.min, "axis", "keepdims"))
register_legalize("relax.prod", call_topi(topi.prod, "axis", "keepdims"))
register_legalize("relax.variance", call_topi(topi.variance, "axis", "keepdims"))
