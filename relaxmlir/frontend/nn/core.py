"""`nn.Tensor` and `nn.Parameter`, and the trace that `export_tvm` runs forward code under.

A Tensor wraps one relax expression (a var bound in the dataflow block being built). Every
`nn.op.*` call emits its relax op right away through the BlockBuilder of the active trace,
named after the op (`matmul`, `matmul1`, ...) as TVM's `nn` frontend names them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from relaxmlir.relax import op as rop
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Expr
from relaxmlir.relax.struct_info import TensorStructInfo


class _Trace:
    """The function being exported: its builder and the var names used so far."""

    def __init__(self, bb: BlockBuilder, taken: Sequence[str]):
        self.bb = bb
        self.counts: dict[str, int] = {}
        self.taken = set(taken)

    def unique(self, name: str) -> str:
        while True:
            k = self.counts.get(name, 0)
            self.counts[name] = k + 1
            candidate = name if k == 0 else f"{name}{k}"
            if candidate not in self.taken:
                self.taken.add(candidate)
                return candidate


_TRACES: list[_Trace] = []


@contextlib.contextmanager
def trace(bb: BlockBuilder, taken: Sequence[str]) -> Iterator[_Trace]:
    """Make `bb` the builder that `nn.op.*` emit into (inside its function's dataflow block)."""
    state = _Trace(bb, taken)
    _TRACES.append(state)
    try:
        yield state
    finally:
        _TRACES.pop()


def wrap_nested(expr: Expr, name: str) -> Tensor:
    """Emit a relax expression in the current trace and wrap the new var as an `nn.Tensor`.

    This is how a new `nn.op` is written: `wrap_nested(relax.op.exp(x._expr), "exp")`.
    """
    if not _TRACES:
        raise RuntimeError(
            f"nn op '{name}' called outside of export_tvm: nn ops build IR only while a "
            "module is exported (model.export_tvm(spec))"
        )
    state = _TRACES[-1]
    return Tensor(state.bb.emit(expr, state.unique(name)))


def _expr(value: Any, what: str = "x") -> Any:
    """The relax expression of a Tensor; python scalars pass through (relax ops take them)."""
    if isinstance(value, Tensor):
        return value._expr_checked()
    if isinstance(value, (bool, int, float, np.number)):
        return value
    raise TypeError(f"expected an nn.Tensor for '{what}', got {type(value).__name__}")


def _binary(fn, name: str, lhs: Any, rhs: Any) -> Tensor:
    return wrap_nested(fn(_expr(lhs, "lhs"), _expr(rhs, "rhs")), name)


class Tensor:
    """A traced value: a relax expression with `.shape`, `.dtype` and arithmetic operators.

    Shapes hold ints and symbol names (`["n", 784]`); `a @ b` is `nn.op.matmul`.
    """

    def __init__(self, expr: Expr):
        self._expr = expr

    def _expr_checked(self) -> Expr:
        return self._expr

    @property
    def shape(self) -> list:
        return list(self._expr.struct_info.shape)

    @property
    def dtype(self) -> str:
        return self._expr.struct_info.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __add__(self, other: Any) -> Tensor:
        return _binary(rop.add, "add", self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _binary(rop.add, "add", other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _binary(rop.subtract, "subtract", self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _binary(rop.subtract, "subtract", other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _binary(rop.multiply, "multiply", self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _binary(rop.multiply, "multiply", other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _binary(rop.divide, "divide", self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _binary(rop.divide, "divide", other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return _binary(rop.matmul, "matmul", self, other)

    def __neg__(self) -> Tensor:
        return wrap_nested(rop.negative(self._expr_checked()), "negative")

    def astype(self, dtype: str) -> Tensor:
        return wrap_nested(rop.astype(self._expr_checked(), dtype), "astype")

    def reshape(self, *shape) -> Tensor:
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else shape
        return wrap_nested(rop.reshape(self._expr_checked(), list(dims)), "reshape")

    def permute_dims(self, *axes) -> Tensor:
        dims = axes[0] if len(axes) == 1 and isinstance(axes[0], (list, tuple)) else axes
        return wrap_nested(
            rop.permute_dims(self._expr_checked(), list(dims) or None), "permute_dims"
        )

    def __repr__(self) -> str:
        return f'nn.Tensor({self.shape}, "{self.dtype}")'


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # torch
        return value.detach().cpu().numpy()
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):  # rm.nd.NDArray
        return value.numpy()
    return np.asarray(value)


class Parameter(Tensor):
    """A weight of a module: declared shape and dtype, and an optional numpy value (`.data`).

    While a module is exported it stands for the function parameter named after its
    attribute path; outside of that it is only a holder of the value.

    Parameters
    ----------
    shape : sequence of int or str
    dtype : str, default "float32"
    """

    def __init__(self, shape: Sequence[int | str], dtype: str = "float32"):
        sinfo = TensorStructInfo(shape, dtype)  # validates dims and dtype
        super().__init__(None)
        self._shape, self._dtype = tuple(sinfo.shape), sinfo.dtype
        self._data: np.ndarray | None = None

    @property
    def shape(self) -> list:
        return list(self._shape)

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def struct_info(self) -> TensorStructInfo:
        return TensorStructInfo(self._shape, self._dtype)

    @property
    def data(self) -> np.ndarray | None:
        """The value (numpy), or None; numpy arrays, torch tensors and NDArrays can be assigned."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        if value is None:
            self._data = None
            return
        array = _to_numpy(value)
        if tuple(array.shape) != self._shape or str(array.dtype) != self._dtype:
            raise ValueError(
                f"parameter expects shape {self._shape} and dtype {self._dtype}, "
                f"got shape {tuple(array.shape)} and dtype {array.dtype}"
            )
        self._data = np.ascontiguousarray(array)

    def _expr_checked(self) -> Expr:
        if self._expr is None:
            raise RuntimeError(
                f"nn.Parameter{self.shape} used outside of export_tvm: parameters become "
                "function inputs only while a module is exported"
            )
        return self._expr

    def __repr__(self) -> str:
        return f'nn.Parameter({self.shape}, "{self.dtype}")'
