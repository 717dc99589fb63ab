"""Symbolic shapes in IR: the `relax.shape` attribute encoding.

A dimension is an int or a string expression over symbol names (`"n"`, `"n*2"`); the expression
language lives in the MLIR-free runtime (relaxmlir/runtime/shape.py). MLIR types carry `?` for
symbolic dims; the attribute keeps the names so that two `n` are known equal and output sizes can
be computed from input sizes.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlir import ir

from relaxmlir.runtime.shape import Dim, bind, evaluate, fold, is_static, parse, symbols  # noqa: F401


def isa(value, cls) -> bool:
    """`isinstance` on MLIR types/attributes after downcasting to their concrete class."""
    if hasattr(value, "maybe_downcast"):
        value = value.maybe_downcast()
    return isinstance(value, cls)


def to_attr(shape: Sequence[Dim]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get(
        [ir.IntegerAttr.get(i64, d) if isinstance(d, int) else ir.StringAttr.get(d) for d in shape]
    )


def from_attr(attr: ir.Attribute) -> tuple[Dim, ...]:
    out: list[Dim] = []
    for item in ir.ArrayAttr(attr):
        if isa(item, ir.IntegerAttr):
            out.append(ir.IntegerAttr(item).value)
        else:
            out.append(ir.StringAttr(item).value)
    return tuple(out)
