"""Relax expressions built in Python before the BlockBuilder materialises them as MLIR ops."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np
from mlir import ir

from dialects import relax as rx
from relaxmlir.relax.struct_info import StructInfo, TensorStructInfo, TupleStructInfo, flatten


class Expr:
    struct_info: Optional[StructInfo] = None


class Var(Expr):
    """A named relax value: a function parameter, or the result of `bb.emit`."""

    def __init__(self, name_hint: str, struct_info: Optional[StructInfo] = None):
        if struct_info is not None and not isinstance(struct_info, StructInfo):
            raise TypeError(f"relax.Var '{name_hint}': struct_info must be a StructInfo, got {struct_info!r}")
        self.name_hint = name_hint
        self.struct_info = struct_info
        self.values: Optional[list[ir.Value]] = None  # bound while a function is being built

    def __getitem__(self, index: int) -> "Var":
        if not isinstance(self.struct_info, TupleStructInfo):
            raise TypeError(f"relax.Var '{self.name_hint}' is not a tuple")
        fields = self.struct_info.fields
        if not -len(fields) <= index < len(fields):
            raise IndexError(f"tuple index {index} out of range for '{self.name_hint}' ({len(fields)} fields)")
        index %= len(fields)
        start = sum(len(flatten(f)) for f in fields[:index])
        item = Var(f"{self.name_hint}_{index}", fields[index])
        if self.values is not None:
            item.values = self.values[start : start + len(flatten(fields[index]))]
        return item

    @property
    def shape(self):
        return self.struct_info.shape

    @property
    def dtype(self):
        return self.struct_info.dtype

    def __repr__(self) -> str:
        return f"relax.Var({self.name_hint!r}, {self.struct_info!r})"


class DataflowVar(Var):
    """A var local to a dataflow block (kept for API parity with TVM)."""


class GlobalVar(Expr):
    """A reference to a function of the module by name."""

    def __init__(self, name_hint: str):
        self.name_hint = name_hint

    def __repr__(self) -> str:
        return f"I.GlobalVar({self.name_hint!r})"


class ExternFunc(Expr):
    def __init__(self, global_symbol: str):
        self.global_symbol = global_symbol


class Constant(Expr):
    """A constant tensor; becomes a `relax.constant` op when emitted.

    `borrowed`: `data` views memory its maker keeps (an imported model's weights): a large one is
    not copied into the IR, and `relax.build` refuses it if it changed since."""

    def __init__(self, data: np.ndarray, borrowed: bool = False):
        self.borrowed = borrowed
        data = np.asarray(data)
        # np.ascontiguousarray would turn a 0-d array into shape (1,)
        self.data = data if data.flags.c_contiguous else np.ascontiguousarray(data)
        self.struct_info = TensorStructInfo(self.data.shape, str(self.data.dtype))


class Tuple(Expr):
    def __init__(self, fields: Sequence[Expr]):
        self.fields = list(fields)
        self.struct_info = TupleStructInfo([f.struct_info for f in self.fields])


class Call(Expr):
    """A call of a relax op (`op` is the MLIR op name) with attributes and result struct info."""

    def __init__(
        self,
        op: str,
        args: Sequence[Any],
        attrs: Optional[dict] = None,
        struct_info: Optional[StructInfo] = None,
    ):
        self.op = op
        self.args = list(args)
        self.attrs = dict(attrs or {})
        self.struct_info = struct_info

    def __repr__(self) -> str:
        return f"relax.Call({self.op}, {len(self.args)} args)"


def const(value, dtype: Optional[str] = None) -> Constant:
    """`relax.const(numpy_array_or_scalar, dtype=None)`."""
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    data = np.asarray(value)
    if dtype is not None:
        data = data.astype(dtype)
    elif data.dtype == np.float64 and np.ndim(value) == 0:
        data = data.astype(np.float32)
    return Constant(data)


def _out_sinfo(out_sinfo) -> StructInfo:
    if isinstance(out_sinfo, (list, tuple)):
        fields = [_out_sinfo(s) for s in out_sinfo]
        return fields[0] if len(fields) == 1 else TupleStructInfo(fields)
    if not isinstance(out_sinfo, (TensorStructInfo, TupleStructInfo)):
        raise TypeError(f"out_sinfo must be TensorStructInfo or a list of them, got {out_sinfo!r}")
    return out_sinfo


def _args(args) -> list:
    if isinstance(args, Tuple):
        return list(args.fields)
    if isinstance(args, (list, tuple)):
        return list(args)
    return [args]


def call_tir(func: Union[GlobalVar, str, Any], args, out_sinfo) -> Call:
    """Destination-passing call of a primitive function: `R.call_tir(f, (x, w), out_sinfo)`.

    `func` is a GlobalVar, a function name, or a `te`/PrimFunc object (added to the module when
    the call is emitted).
    """
    return Call(rx.CallTIR.name, _args(args), {"callee": func}, _out_sinfo(out_sinfo))


def call_dps_packed(func: Union[str, ExternFunc], args, out_sinfo) -> Call:
    """Destination-passing call of a registered function: `R.call_dps_packed("env.linear", ...)`."""
    name = func.global_symbol if isinstance(func, ExternFunc) else func
    if not isinstance(name, str) or not name:
        raise TypeError(f"call_dps_packed expects a registered function name, got {func!r}")
    return Call(rx.CallDPSPacked.name, _args(args), {"callee": name}, _out_sinfo(out_sinfo))


def call_packed(func: Union[str, ExternFunc], *args) -> Call:
    """Side-effecting call of a registered function that may write its arguments in place.

    Only outside dataflow blocks; it returns no value (results are the mutated arguments).
    """
    name = func.global_symbol if isinstance(func, ExternFunc) else func
    return Call(rx.CallPacked.name, list(args), {"callee": name}, TupleStructInfo([]))
