"""`relax.op.builtin`: runtime builtins (allocation)."""

from __future__ import annotations

from dialects import relax as rx
from relaxmlir.relax.expr import Call
from relaxmlir.relax.struct_info import TensorStructInfo


def alloc_tensor(shape, dtype: str = "float32", runtime_device_index: int = 0) -> Call:
    """`R.builtin.alloc_tensor`: a fresh uninitialised tensor; only outside dataflow blocks."""
    return Call(rx.AllocTensor.name, [], {}, TensorStructInfo(tuple(shape), dtype))
