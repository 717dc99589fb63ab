"""Tensors of the TE layer: placeholders, computes, reduction axes and reducers."""

from __future__ import annotations

import builtins
import inspect
from typing import Any, Callable, Iterator, List, Optional, Sequence, Union

from relaxmlir.te import expr as E
from relaxmlir.te.expr import Expr, IterVar, Var

Dim = Union[int, Expr]
REDUCERS = ("sum", "max", "min")


def normalize_dim(d: Any) -> Dim:
    """An int, a symbol name, a `Var` or an integer expression of symbols."""
    if isinstance(d, str):
        return Var(d, "int64")
    if isinstance(d, Expr):
        if E.kind(d.dtype) not in "iu":
            raise ValueError(f"te: expected an integer dimension, got ({d.dtype}) {d!r}")
        return d
    if hasattr(d, "__index__"):
        if int(d) < 0:
            raise ValueError(f"te: expected a non-negative dimension, got ({int(d)})")
        return int(d)
    raise TypeError(f"te: cannot use {d!r} as a dimension (expected int, str or te.var)")


def dim_key(d: Dim) -> Union[int, str]:
    """What makes two dimensions equal: the int, or the symbol/expression spelling."""
    return d if isinstance(d, int) else repr(d)


def walk(e: Expr) -> Iterator[Expr]:
    """Pre-order walk of an expression DAG; shared nodes are visited once."""
    seen, stack = set(), [e]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed(node.args))


class Tensor:
    """A placeholder (function input) or the result of `te.compute`.

    Computes keep their index `axis` vars and `body`; a top-level reduction keeps its
    `reduce_axis` list. Tensors compare by identity.
    """

    def __init__(self, shape: Sequence[Dim], dtype: str, name: str, axis=(), body=None,
                 tag: str = "", attrs: Optional[dict] = None):
        self.shape = tuple(shape)
        self.tag, self.attrs = tag, dict(attrs or {})
        self.dtype = E.check_dtype(dtype)
        self.name = name
        self.axis: List[Var] = list(axis)
        self.body: Optional[Expr] = body

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_placeholder(self) -> bool:
        return self.body is None

    @property
    def op(self) -> "Tensor":
        """TVM spells `C.op.axis`; the tensor is its own op here."""
        return self

    @property
    def reduce_axis(self) -> List[IterVar]:
        if self.body is not None and self.body.op == "reduce":
            return list(self.body.arg[1])
        return []

    def inputs(self) -> List["Tensor"]:
        """Tensors read by this compute's body, in first-read order."""
        out: List[Tensor] = []
        for node in walk(self.body) if self.body is not None else ():
            if node.op == "read" and builtins.all(t is not node.arg for t in out):
                out.append(node.arg)
        return out

    def __getitem__(self, indices: Any) -> Expr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise ValueError(f"te: tensor '{self.name}' expects {self.ndim} indices, "
                             f"got ({len(indices)})")
        idx = []
        for i in indices:
            i = E.convert(i)
            if E.kind(i.dtype) not in "iu":
                raise ValueError(f"te: index of '{self.name}' must be an integer, got ({i.dtype})")
            idx.append(i)
        return Expr("read", self.dtype, idx, self)

    def __call__(self, *indices: Any) -> Expr:
        return self[indices]

    def __repr__(self) -> str:
        kind = "placeholder" if self.is_placeholder else "compute"
        return f"Tensor({kind} {self.name}, shape={self.shape}, dtype={self.dtype})"


def _shape(shape: Any) -> tuple:
    if isinstance(shape, (int, str, Expr)) or hasattr(shape, "__index__"):
        shape = (shape,)
    return tuple(normalize_dim(d) for d in shape)


def _index_dtype(*dims: Dim) -> str:
    """TVM gives loop vars the dtype of their extent: int32 for ints, else the symbol's."""
    for d in dims:
        if isinstance(d, Expr):
            return d.dtype
    return "int32"


def placeholder(shape: Any, dtype: Optional[str] = None, name: str = "placeholder") -> Tensor:
    """A function input (TVM's argument order: shape, dtype, name).

    Parameters
    ----------
    shape : tuple of int, str or te.var
        Static sizes, or symbols; the same symbol name in two tensors means equal sizes.
    dtype : str, default "float32"
    name : str

    Returns
    -------
    Tensor

    Examples
    --------
    >>> A = te.placeholder(("n", 784), name="A")
    """
    if dtype is not None and dtype not in E.DTYPES and name in E.DTYPES:
        dtype, name = name, dtype  # tolerate placeholder(shape, name, dtype) positionally
    return Tensor(_shape(shape), dtype or "float32", name)


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over `[lo, hi)`; `dom` is `(lo, hi)` (TVM's `te.reduce_axis`)."""
    lo, hi = (0, dom) if not isinstance(dom, (tuple, list)) else tuple(dom)
    lo, hi = normalize_dim(lo), normalize_dim(hi)
    return IterVar((lo, hi), name, _index_dtype(lo, hi))


def _arg_names(fcompute: Callable, n: int) -> List[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) == n and builtins.all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params):
        return [p.name for p in params]
    return [f"i{k}" for k in range(n)]


def compute(shape: Any, fcompute: Callable, name: str = "compute", tag: str = "",
            attrs: Optional[dict] = None) -> Tensor:
    """A tensor defined elementwise by `fcompute(*indices)`.

    The body may be a reduction (`te.sum(A[i, k], axis=k)`) only at its top level, as in TVM.

    Parameters
    ----------
    shape : tuple of int, str or te.var
    fcompute : callable taking one index var per dimension and returning an expression
    name : str

    Returns
    -------
    Tensor

    Examples
    --------
    >>> k = te.reduce_axis((0, 128), name="k")
    >>> C = te.compute((64, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    """
    shape = _shape(shape)
    axis = [Var(n, _index_dtype(d)) for n, d in zip(_arg_names(fcompute, len(shape)), shape)]
    body = fcompute(*axis)
    if isinstance(body, (list, tuple)):
        if len(body) != 1:
            raise NotImplementedError(f"te.compute '{name}': multiple outputs are not supported")
        body = body[0]
    body = E.convert(body)
    top = body.args if body.op == "reduce" else (body,)
    for root in top:
        if builtins.any(node.op == "reduce" for node in walk(root)):
            raise ValueError(f"te.compute '{name}': reduction must be at the top level of the "
                             f"body (got {body!r})")
    return Tensor(shape, body.dtype, name, axis, body, tag, attrs)


def _reduce(combiner: str, source: Any, axis: Any, where: Any = None) -> Expr:
    source = E.convert(source)
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not axes or not builtins.all(isinstance(a, IterVar) for a in axes):
        raise ValueError(f"te.{combiner}: axis must be te.reduce_axis vars, got ({axis!r})")
    if where is not None:
        source = E.if_then_else(where, source, identity(combiner, source.dtype))
    return Expr("reduce", source.dtype, (source,), (combiner, axes))


def identity(combiner: str, dtype: str) -> Expr:
    """The value a reduction starts from (TVM's `T.init`): 0, lowest or highest."""
    kind = E.kind(dtype)
    if combiner == "sum":
        return E.const(0, dtype)
    if kind == "f":
        return E.const(float("-inf") if combiner == "max" else float("inf"), dtype)
    if kind == "b":
        return E.const(combiner == "min", dtype)
    n = E.bits(dtype)
    lo, hi = ((0, 2**n - 1) if kind == "u" else (-(2 ** (n - 1)), 2 ** (n - 1) - 1))
    return E.const(lo if combiner == "max" else hi, dtype)


def sum(expr: Any, axis: Any, where: Any = None, init: Any = None) -> Expr:  # noqa: A001
    """Sum-reduce `expr` over the reduce axis (or list of axes) `axis`."""
    if init is not None:
        raise NotImplementedError("te.sum: init= is not supported")
    return _reduce("sum", expr, axis, where)


def _minmax(name: str, a: Any, b: Any, axis: Any, where: Any) -> Expr:
    if axis is None and (isinstance(b, IterVar) or isinstance(b, (list, tuple))):
        axis, b = b, None
    if axis is not None:
        return _reduce(name, a, axis, where)
    if b is None:
        raise ValueError(f"te.{name}: expected a second operand or axis=")
    return E.binary(name, a, b)


def max(a: Any, b: Any = None, axis: Any = None, where: Any = None) -> Expr:  # noqa: A001
    """`te.max(x, axis=k)` reduces; `te.max(a, b)` is the elementwise maximum."""
    return _minmax("max", a, b, axis, where)


def min(a: Any, b: Any = None, axis: Any = None, where: Any = None) -> Expr:  # noqa: A001
    """`te.min(x, axis=k)` reduces; `te.min(a, b)` is the elementwise minimum."""
    return _minmax("min", a, b, axis, where)
