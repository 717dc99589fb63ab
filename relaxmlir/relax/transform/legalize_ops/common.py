"""The legalization registry: relax op name -> rule that builds its PrimFunc call with `topi`."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

from dialects import shape as sh
from dialects.relax import mlir_op_name
from relaxmlir import te, topi
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Call, Expr

# A rule gets the builder (for `bb.call_te`) and the op as a `Call` whose args are vars carrying
# struct info and whose attrs are python values; it returns the replacement (usually the
# `call_tir` from `bb.call_te`, or an arg var for identities).
LegalizeRule = Callable[[BlockBuilder, Call], Expr]
TEFunc = Callable[..., object]

# MLIR op name (`relax.nn_softmax`) -> rule; filled by the family modules of this package.
LEGALIZE_RULES: dict[str, LegalizeRule] = {}


def register_legalize(op_name: str, rule: LegalizeRule | None = None):
    """Register `rule` for the relax op `op_name` (TVM spelling, `relax.nn.softmax`).

    Used as a call, `register_legalize("relax.add", _binary(topi.add))`, or as a decorator.
    """

    def register(fn: LegalizeRule) -> LegalizeRule:
        key = mlir_op_name(op_name)
        if key in LEGALIZE_RULES:
            raise ValueError(f"a legalization rule for '{op_name}' is already registered")
        LEGALIZE_RULES[key] = _unless_empty(fn)
        return fn

    return register(rule) if rule is not None else register


def _unless_empty(rule: LegalizeRule) -> LegalizeRule:
    """`rule`, except that a result with no elements is a fill: its kernel reads nothing (and
    index arithmetic over an empty domain is no pattern the CPU schedules can raise)."""

    def legalize(bb: BlockBuilder, call: Call) -> Expr:
        out = call.struct_info
        shape = getattr(out, "shape", None)
        if shape is not None and any(isinstance(d, int) and d == 0 for d in shape):
            return bb.call_te(topi.full, list(shape), out.dtype, 0)
        return rule(bb, call)

    return legalize


def call_topi(te_func: TEFunc, *attr_names: str) -> LegalizeRule:
    """Rule calling `te_func(*args, *attrs)`: all of the op's args, then the named attrs."""

    def rule(bb: BlockBuilder, call: Call) -> Expr:
        return bb.call_te(te_func, *call.args, *[call.attrs[a] for a in attr_names])

    return rule


_TE_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: te.floordiv,
    ast.Mod: te.floormod,
}


def te_dim(dim: int | str):
    """A relax dim as a te index expression over symbol vars (`"n//2"` -> `te.var("n") // 2`)."""
    return sh.fold(
        dim, lambda op, a, b: _TE_OPS[op](a, b), lambda x: x if isinstance(x, int) else te.var(x)
    )
