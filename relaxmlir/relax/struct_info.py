"""Struct info: the static shape and dtype of a relax value (`R.Tensor((n, 784), "float32")`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np
from mlir import ir

from dialects import shape as sh

_DTYPES = {
    "float32": ir.F32Type.get,
    "float64": ir.F64Type.get,
    "float16": ir.F16Type.get,
    "bfloat16": ir.BF16Type.get,
    "int64": lambda: ir.IntegerType.get_signless(64),
    "int32": lambda: ir.IntegerType.get_signless(32),
    "int16": lambda: ir.IntegerType.get_signless(16),
    "int8": lambda: ir.IntegerType.get_signless(8),
    # signless as in the kernels (arith ops pick the unsigned semantics)
    "uint8": lambda: ir.IntegerType.get_signless(8),
    # bool tensors are bytes (0/1), as in numpy and DLPack: memref<..xi1> does not lower to LLVM
    "bool": lambda: ir.IntegerType.get_signless(8),
}


# bool and uint8 tensors share int8's element type (i8), so their relax dtype is recorded beside
# it: on an op, one dtype name per result (ArrayAttr); on a function argument or result
# (arg_attrs / res_attrs), a string. Only values of MARKED_DTYPES carry it.
DTYPE_ATTR = "relax.dtype"
MARKED_DTYPES = ("bool", "uint8")


def mlir_element_type(dtype: str) -> ir.Type:
    if dtype not in _DTYPES:
        raise TypeError(f"unsupported dtype '{dtype}'; supported: {', '.join(_DTYPES)}")
    return _DTYPES[dtype]()


def dtype_of(element_type: ir.Type) -> str:
    text = str(element_type)
    table = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
             "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "ui8": "uint8", "i1": "bool"}
    if text not in table:
        raise TypeError(f"unsupported element type ({text})")
    return table[text]


def normalize_dim(d) -> sh.Dim:
    """int, str symbol, or an object with `.name` (te.Var) -> int | str."""
    if isinstance(d, (int, np.integer)):
        return int(d)
    if isinstance(d, str):
        sh.parse(d)
        return d
    name = getattr(d, "name", None)
    if isinstance(name, str) and name.isidentifier():
        return name
    text = str(d)  # a te expression over size vars, e.g. "(n * 2)"
    try:
        sh.parse(text)
    except (SyntaxError, ValueError):
        pass
    else:
        return text
    raise TypeError(f"shape dimension must be an int or a symbol name, got {d!r}")


class StructInfo:
    pass


@dataclass(frozen=True)
class TensorStructInfo(StructInfo):
    """A tensor of `shape` (ints and symbol names) and `dtype`."""

    shape: tuple
    dtype: str = "float32"

    def __init__(self, shape: Sequence[Union[int, str]], dtype: str = "float32"):
        object.__setattr__(self, "shape", tuple(normalize_dim(d) for d in shape))
        object.__setattr__(self, "dtype", str(np.dtype(dtype)) if dtype != "bfloat16" else dtype)
        if self.dtype not in _DTYPES:
            raise TypeError(f"unsupported dtype '{dtype}'; supported: {', '.join(_DTYPES)}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return sh.is_static(self.shape)

    def mlir_type(self) -> ir.RankedTensorType:
        from relaxmlir.scope import scope

        with scope():
            dyn = ir.ShapedType.get_dynamic_size()
            dims = [d if isinstance(d, int) else dyn for d in self.shape]
            return ir.RankedTensorType.get(dims, mlir_element_type(self.dtype))

    def __repr__(self) -> str:
        return f"R.Tensor({self.shape}, \"{self.dtype}\")"


@dataclass(frozen=True)
class TupleStructInfo(StructInfo):
    fields: tuple

    def __init__(self, fields: Sequence[StructInfo]):
        object.__setattr__(self, "fields", tuple(fields))


def tensor_sinfo_of(value: ir.Value, shape_attr=None) -> TensorStructInfo:
    """Struct info of an MLIR tensor value (symbolic names from a `relax.shape` attribute)."""
    t = ir.RankedTensorType(value.type)
    if shape_attr is not None:
        return TensorStructInfo(sh.from_attr(shape_attr), dtype_of(t.element_type))
    dyn = ir.ShapedType.get_dynamic_size()
    dims = [d if d != dyn else f"d{i}" for i, d in enumerate(t.shape)]
    return TensorStructInfo(dims, dtype_of(t.element_type))


def flatten(sinfo) -> list[TensorStructInfo]:
    if isinstance(sinfo, TupleStructInfo):
        return [t for f in sinfo.fields for t in flatten(f)]
    if isinstance(sinfo, (list, tuple)):
        return [t for f in sinfo for t in flatten(f)]
    if not isinstance(sinfo, TensorStructInfo):
        raise TypeError(f"expected TensorStructInfo, got {sinfo!r}")
    return [sinfo]
