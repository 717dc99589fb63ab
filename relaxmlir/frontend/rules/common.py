"""Helpers shared by the rule families: argument access, op emission, operand promotion."""

from __future__ import annotations

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Importer, SymDim, dim_value, is_tensor
from relaxmlir.relax.expr import const

F = torch.nn.functional
aten = torch.ops.aten


def shape_of(x) -> tuple:
    return tuple(x.struct_info.shape)


def ndim(x) -> int:
    return len(x.struct_info.shape)


def axis(a: int, rank: int) -> int:
    """`a` counted from the end when negative; a 0-d tensor takes dims -1 and 0, as in torch."""
    bound = max(rank, 1)
    if not isinstance(a, (int, np.integer)) or not -bound <= a < bound:
        raise ValueError(f"dim {a} is out of range for a tensor of rank {rank}")
    return int(a) % bound


def as_tensor(value, like=None, dtype: str | None = None):
    """A python scalar -> a 0-d constant in `like`'s dtype, unless the scalar is of a higher
    category (torch's promotion): a float beside an integer or bool tensor is float32, an int
    beside a bool tensor int64 (`(a > 0) == 2` compares numbers, `(a > 0) + 1` counts)."""
    if is_tensor(value):
        return value
    if dtype is None:
        dtype = like.struct_info.dtype if like is not None else "float32"
        if isinstance(value, float) and not dtype.startswith(("float", "bfloat")):
            dtype = "float32"
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            dtype = "int64" if dtype == "bool" else dtype
        if isinstance(value, bool) and like is None:
            dtype = "bool"
    return const(np.array(value, dtype=dtype), dtype)


def symbolic_value(ctx: Importer, size: SymDim, like=None):
    """A symbolic size as a 0-d tensor (in `like`'s dtype when that is an integer type): the
    last element of `arange(size + 1)`, whose length carries the size into a kernel. The
    positions of a decode step over a cache of n rows are `arange(1) + n`."""
    dtype = like.struct_info.dtype if is_tensor(like) else "int64"
    dtype = dtype if dtype.startswith(("int", "uint")) else "int64"
    count = call(ctx, "arange", 0, dim_value(size + 1), 1, dtype)
    last = call(ctx, "strided_slice", count, [0], [-1], [2**31 - 1])
    return call(ctx, "reshape", last, ())


def make_pair(v, n: int = 2) -> list:
    if isinstance(v, (list, tuple)):
        return list(v) * n if len(v) == 1 else list(v)
    return [v] * n


def rop():
    """`relax.op`, looked up late so that ops added after import are found."""
    from relaxmlir.relax import op

    return op


def resolve(op_name: str):
    """`"nn.relu"` -> `relax.op.nn.relu`."""
    obj = rop()
    for part in op_name.split("."):
        obj = getattr(obj, part)
    return obj


def call(ctx: Importer, op_name: str, *args, **kwargs):
    """Emit `relax.op.<op_name>(*args, **kwargs)`."""
    return ctx.emit(resolve(op_name)(*args, **kwargs))


def first(ctx: Importer, node: fx.Node):
    return ctx.arg(node, 0, ("input", "self", "x"))


# promotion order of mixed-dtype binary operands
_DTYPE_RANK = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "bfloat16",
    "float16",
    "float32",
    "float64",
]


def astype(ctx: Importer, x, dtype: str):
    return x if x.struct_info.dtype == dtype else call(ctx, "astype", x, dtype)


def _category(dtype: str) -> int:
    return 0 if dtype == "bool" else 2 if "float" in dtype else 1


def binary_operands(ctx: Importer, lhs, rhs):
    """Scalars become constants of the tensor's dtype; mixed dtypes meet at the wider one,
    except that a 0-d tensor does not widen a tensor with dimensions of its own category
    (torch's rule: int32 tensor vs an int64 0-d sum stays int32)."""
    like = lhs if is_tensor(lhs) else rhs
    lhs, rhs = (symbolic_value(ctx, v, like) if isinstance(v, SymDim) else v for v in (lhs, rhs))
    lhs, rhs = as_tensor(lhs, like), as_tensor(rhs, like)
    dl, dr = lhs.struct_info.dtype, rhs.struct_info.dtype
    if dl != dr:
        wide = max(dl, dr, key=_DTYPE_RANK.index)
        scalar_l, scalar_r = ndim(lhs) == 0, ndim(rhs) == 0
        if scalar_l != scalar_r and _category(dl) == _category(dr):
            wide = dr if scalar_l else dl
        lhs, rhs = astype(ctx, lhs, wide), astype(ctx, rhs, wide)
    return lhs, rhs


def emit_binary(ctx: Importer, op_name: str, lhs, rhs):
    lhs, rhs = binary_operands(ctx, lhs, rhs)
    return call(ctx, op_name, lhs, rhs)
