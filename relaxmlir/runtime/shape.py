"""Symbolic dimensions as the runtime sees them: parse, bind to actual sizes, evaluate.

A dimension is an int or a string expression over symbol names (`"n"`, `"n*2"`, `"(n+1)//2"`).
Signatures carry them so that the VM checks that two `n` agree and sizes the outputs; the
compiler's `relax.shape` attribute encoding (dialects/shape.py) builds on these functions.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Sequence
from typing import Union

Dim = Union[int, str]

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
# `-k` as well: TE spells a negative offset so (`(n+1) + -1`, a slice from the end)
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.Name, ast.Constant, ast.Load)
_ALLOWED += tuple(_BINOPS)


def is_static(shape: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) for d in shape)


@functools.lru_cache(maxsize=4096)
def parse(expr: str) -> ast.Expression:
    """The syntax tree of a dimension expression; only + - * // % (and a unary -) over names
    and ints."""
    tree = ast.parse(expr, mode="eval")
    for sub in ast.walk(tree):
        bad_constant = isinstance(sub, ast.Constant) and not isinstance(sub.value, int)
        if not isinstance(sub, _ALLOWED) or bad_constant:
            raise ValueError(f"unsupported symbolic dimension syntax ({ast.dump(sub)})")
    return tree


def symbols(expr: Dim) -> set[str]:
    if isinstance(expr, int):
        return set()
    return {n.id for n in ast.walk(parse(expr)) if isinstance(n, ast.Name)}


def fold(expr: Dim, combine: Callable, leaf: Callable[[int | str], object]):
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
        if isinstance(node, ast.UnaryOp):
            return combine(ast.Sub, leaf(0), go(node.operand))
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


def bind(shape: Sequence[Dim], actual: Sequence[int], env: dict[str, int]) -> str | None:
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
