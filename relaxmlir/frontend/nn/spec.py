"""`nn.spec`: the input signature of a method given to `Module.export_tvm`.

`nn.spec.Tensor(("n", 784), "float32")` declares one tensor input; a string dimension is a
symbol shared by every input (and result) that names it, so the batch size can vary at run time.
"""

from __future__ import annotations

from collections.abc import Sequence

from relaxmlir.relax.struct_info import TensorStructInfo


class Tensor:
    """A tensor input of an exported method: its shape (ints and symbol names) and dtype.

    Parameters
    ----------
    shape : sequence of int or str
    dtype : str, default "float32"

    Examples
    --------
    >>> model.export_tvm({"forward": {"x": nn.spec.Tensor(("n", 784), "float32")}})
    """

    def __init__(self, shape: Sequence[int | str], dtype: str = "float32"):
        if isinstance(shape, (int, str)) or not isinstance(shape, Sequence):
            raise TypeError(f"nn.spec.Tensor: shape must be a sequence of dims, got {shape!r}")
        self.struct_info = TensorStructInfo(shape, dtype)

    @property
    def shape(self) -> tuple:
        return self.struct_info.shape

    @property
    def dtype(self) -> str:
        return self.struct_info.dtype

    def __repr__(self) -> str:
        return f'nn.spec.Tensor({self.shape}, "{self.dtype}")'
