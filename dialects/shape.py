"""Symbolic shapes: the `relax.shape` attribute encoding and its small expression language.

A dimension is an int or a string expression over symbol names (`"n"`, `"n*2"`, `"(n+1)//2"`).
MLIR types carry `?` for symbolic dims; the attribute keeps the names so that two `n` are known
equal and output sizes can be computed from input sizes.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional, Sequence, Union

from mlir import ir

Dim = Union[int, str]


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


def is_static(shape: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) for d in shape)


_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


def _check(node: ast.AST) -> None:
    allowed = (ast.Expression, ast.BinOp, ast.Name, ast.Constant, ast.Load) + tuple(_BINOPS)
    for sub in ast.walk(node):
        if not isinstance(sub, allowed) or (isinstance(sub, ast.Constant) and not isinstance(sub.value, int)):
            raise ValueError(f"unsupported symbolic dimension syntax ({ast.dump(sub)})")


def parse(expr: str) -> ast.Expression:
    tree = ast.parse(expr, mode="eval")
    _check(tree)
    return tree


def symbols(expr: Dim) -> set[str]:
    if isinstance(expr, int):
        return set()
    return {n.id for n in ast.walk(parse(expr)) if isinstance(n, ast.Name)}


def fold(expr: Dim, combine: Callable, leaf: Callable[[Union[int, str]], object]):
    """Evaluate `expr` bottom-up: `leaf` maps names/ints, `combine(op, a, b)` applies an operator."""
    if isinstance(expr, int):
        return leaf(expr)

    def go(node):
        if isinstance(node, ast.Expression):
            return go(node.body)
        if isinstance(node, ast.Constant):
            return leaf(node.value)
        if isinstance(node, ast.Name):
            return leaf(node.id)
        return combine(type(node.op), go(node.left), go(node.right))

    return go(parse(expr))


def evaluate(expr: Dim, env: dict[str, int]) -> int:
    def leaf(x):
        if isinstance(x, int):
            return x
        if x not in env:
            raise ValueError(f"symbolic dimension '{x}' is not bound by any input")
        return env[x]

    return fold(expr, lambda op, a, b: _BINOPS[op](a, b), leaf)


def bind(shape: Sequence[Dim], actual: Sequence[int], env: dict[str, int]) -> Optional[str]:
    """Bind plain symbol names in `shape` to `actual`; return an error message on mismatch."""
    if len(shape) != len(actual):
        return f"rank {len(actual)} does not match expected rank {len(shape)}"
    for i, (want, got) in enumerate(zip(shape, actual)):
        if isinstance(want, str) and want.isidentifier():
            if env.setdefault(want, got) != got:
                return f"dimension {i} is {got} but '{want}' is already bound to {env[want]}"
    for i, (want, got) in enumerate(zip(shape, actual)):
        if isinstance(want, int) and want != got:
            return f"dimension {i} is {got}, expected {want}"
        if isinstance(want, str) and not want.isidentifier():
            if symbols(want) <= set(env) and evaluate(want, env) != got:
                return f"dimension {i} is {got}, expected {want} = {evaluate(want, env)}"
    return None
