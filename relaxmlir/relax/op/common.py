"""Shared by the op families: building a `Call`, checking arguments, symbolic dimension algebra.

A dimension is an int or a string expression over symbol names (`"n"`, `"n*4"`), as in
`TensorStructInfo`. The algebra folds ints and otherwise writes the expression, so two dims are
known equal when their expressions are the same (`same_dim`), never by solving.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

import numpy as np

from dialects import shape as sh
from dialects.relax import mlir_op_name
from relaxmlir.relax.expr import Call, Constant, Expr, const
from relaxmlir.relax.struct_info import StructInfo, TensorStructInfo

Dim = int | str
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")


def make_call(tvm_name: str, args: Sequence[Expr], attrs: dict, sinfo: StructInfo) -> Call:
    """A `Call` of the relax op spelled `tvm_name` (e.g. `relax.nn.softmax`)."""
    return Call(mlir_op_name(tvm_name), list(args), attrs, sinfo)


def tensor_sinfo(arg: Any, op: str, what: str = "x") -> TensorStructInfo:
    """The TensorStructInfo of argument `what` of `op`, or a TypeError naming both."""
    sinfo = getattr(arg, "struct_info", None)
    if not isinstance(sinfo, TensorStructInfo):
        raise TypeError(f"{op}: expected argument '{what}' to be a tensor expression, got {arg!r}")
    return sinfo


def as_tensor(value: Any, dtype: str, op: str, what: str) -> Expr:
    """A relax expression, or a python/numpy scalar turned into a 0-d constant of `dtype`."""
    if isinstance(value, Expr):
        tensor_sinfo(value, op, what)
        return value
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return scalar_const(value, dtype)
    raise TypeError(f"{op}: expected argument '{what}' to be a tensor or a scalar, got {value!r}")


def scalar_const(value: Any, dtype: str) -> Constant:
    """A 0-d constant, shared per (value, dtype).

    NOTE: `relax.const` turns 0-d arrays into shape (1,) (numpy's `ascontiguousarray`), which
    would change the rank of results over 0-d tensors.
    """
    key = (repr(value), dtype)
    if key not in _SCALARS:
        out = const(np.asarray(value).astype(dtype))
        out.data = np.asarray(value).astype(dtype)
        out.struct_info = TensorStructInfo((), dtype)
        _SCALARS[key] = out
    return _SCALARS[key]


_SCALARS: dict[tuple, Constant] = {}


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def check_float(sinfo: TensorStructInfo, op: str, what: str = "x") -> None:
    if not is_float(sinfo.dtype):
        raise TypeError(f"{op}: expected a float tensor for '{what}', got ({sinfo.dtype})")


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{op}: axis {axis} is out of range for rank ({ndim})")
    return int(axis) % max(ndim, 1)


def normalize_axes(axes: int | Sequence[int] | None, ndim: int, op: str) -> list[int]:
    """Sorted, non-negative, unique axes; None means all of them."""
    if axes is None:
        return list(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = [axes]
    out = [normalize_axis(a, ndim, op) for a in axes]
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in ({list(axes)})")
    return sorted(out)


def as_ints(value: int | Sequence[int], n: int, op: str, what: str) -> list[int]:
    """`2` -> `[2, 2]`; a sequence must have length `n`."""
    if isinstance(value, (int, np.integer)):
        return [int(value)] * n
    value = [int(v) for v in value]
    if len(value) != n:
        raise ValueError(f"{op}: expected {n} values for '{what}', got ({value})")
    return value


# -- symbolic dimension algebra -------------------------------------------------------------
# A dim is kept as a polynomial {factors: coefficient} over symbol names and opaque atoms (a
# non-exact `//` or `%` in parentheses), so `n*28*28 // 784` folds back to `n` and `(n+1)-1` to `n`.

Poly = dict  # tuple of sorted factor names -> int coefficient; () is the constant term


def _poly(d: Dim) -> Poly:
    if isinstance(d, int):
        return {(): d} if d else {}
    return _poly_node(sh.parse(d).body)


def _poly_node(node: ast.AST) -> Poly:
    if isinstance(node, ast.Constant):
        return _poly(int(node.value))
    if isinstance(node, ast.Name):
        return {(node.id,): 1}
    if isinstance(node, ast.UnaryOp):
        return _padd({}, _poly_node(node.operand), -1)
    if isinstance(node, ast.BinOp):
        a, b = _poly_node(node.left), _poly_node(node.right)
        if isinstance(node.op, ast.Add):
            return _padd(a, b, 1)
        if isinstance(node.op, ast.Sub):
            return _padd(a, b, -1)
        if isinstance(node.op, ast.Mult):
            return _pmul(a, b)
        if isinstance(node.op, ast.FloorDiv):
            exact = _pdiv(a, b)
            if exact is not None:
                return exact
        if isinstance(node.op, ast.Mod) and _pdiv(a, b) is not None:
            return {}
        sym = "//" if isinstance(node.op, ast.FloorDiv) else "%"
        return {(f"({_atom(_render(a))}{sym}{_atom(_render(b))})",): 1}
    raise ValueError(f"unsupported symbolic dimension ({ast.unparse(node)})")


def _padd(a: Poly, b: Poly, sign: int) -> Poly:
    out = dict(a)
    for k, c in b.items():
        out[k] = out.get(k, 0) + sign * c
    return {k: c for k, c in out.items() if c}


def _pmul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ka, ca in a.items():
        for kb, cb in b.items():
            k = tuple(sorted(ka + kb))
            out[k] = out.get(k, 0) + ca * cb
    return {k: c for k, c in out.items() if c}


def _pdiv(a: Poly, b: Poly):
    """a / b when b is one monomial dividing every term of a exactly, else None."""
    if len(b) != 1:
        return None
    ((kb, cb),) = b.items()
    out: Poly = {}
    for ka, ca in a.items():
        rest = list(ka)
        if ca % cb or not all(f in rest and not rest.remove(f) for f in kb):
            return None
        out[tuple(rest)] = ca // cb
    return out


def _render(p: Poly) -> Dim:
    if not p:
        return 0
    if set(p) == {()}:
        return p[()]
    text = ""
    for k in sorted(p, key=lambda k: (k == (), k)):
        c = p[k]
        term = "*".join(list(k) + ([str(abs(c))] if abs(c) != 1 or not k else []))
        text += ("-" if c < 0 else "+" if text else "") + term
    if text.startswith("-"):
        text = f"0{text}"
    return text[1:-1] if text.startswith("(") and _balanced(text[1:-1]) else text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _atom(d: Dim) -> str:
    text = str(d)
    return text if isinstance(d, int) or text.isidentifier() else f"({text})"


def canonical(d: Dim) -> Dim:
    """The dim in canonical form: `784*n` and `n*784` both become `n*784`."""
    return _render(_poly(d))


def add(a: Dim, b: Dim) -> Dim:
    return _render(_padd(_poly(a), _poly(b), 1))


def sub(a: Dim, b: Dim) -> Dim:
    return _render(_padd(_poly(a), _poly(b), -1))


def mul(a: Dim, b: Dim) -> Dim:
    return _render(_pmul(_poly(a), _poly(b)))


def floordiv(a: Dim, b: Dim) -> Dim:
    """`a // b`: exact when b divides every term of a, else kept as an expression."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return canonical(f"{_atom(a)}//{_atom(b)}")


def ceildiv(a: Dim, b: Dim) -> Dim:
    return floordiv(add(a, sub(b, 1)), b)


def prod(dims: Sequence[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = mul(out, d)
    return out


def same_dim(a: Dim, b: Dim) -> bool:
    return canonical(a) == canonical(b)


def broadcast_shapes(shapes: Sequence[Sequence[Dim]], op: str) -> tuple:
    """numpy broadcasting; symbolic dims broadcast only with 1 or the same expression."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dims = [s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0]
        result: Dim = 1
        for d in dims:
            if d == 1:
                continue
            if result == 1:
                result = d
            elif not same_dim(result, d):
                raise ValueError(
                    f"{op}: shapes {[tuple(s) for s in shapes]} do not broadcast "
                    f"(dimension {i} of the result: {result} vs {d})"
                )
        out.append(result)
    return tuple(out)


def unify_dtypes(op: str, *sinfos: TensorStructInfo) -> str:
    dtypes = {s.dtype for s in sinfos}
    if len(dtypes) != 1:
        raise TypeError(
            f"{op}: operands must have the same dtype, got ({', '.join(s.dtype for s in sinfos)}); "
            "insert relax.op.astype"
        )
    return sinfos[0].dtype


def scalar_value(value: Any) -> int | float:
    """A python number from a number or a 0-d relax constant."""
    if isinstance(value, Constant):
        return value.data.item()
    if isinstance(value, (bool, int, float, np.number)):
        return value.item() if isinstance(value, np.number) else value
    raise TypeError(f"expected a number, got {value!r}")
