"""`rm.nd` / `rm.runtime.tensor`: arrays on a device. A CPU NDArray owns a host buffer and speaks
DLPack, so torch and numpy view it without copying."""

from __future__ import annotations

from typing import Any

import numpy as np

from relaxmlir.runtime.device import Device, cpu, cuda  # noqa: F401  (rm.nd.cpu, rm.nd.cuda)
from relaxmlir.runtime.dtype import dtype_name, np_dtype


class NDArray:
    """An n-dimensional array on a device (host memory for `cpu`).

    Supports `__dlpack__`, so `torch.from_dlpack(a)` and `np.from_dlpack(a)` share its memory.
    """

    __slots__ = ("_array", "device")

    def __init__(self, array: np.ndarray, device: Device | None = None):
        self._array = array
        self.device = device or cpu()

    @property
    def shape(self) -> tuple:
        return self._array.shape

    @property
    def dtype(self) -> str:
        return dtype_name(self._array.dtype)

    @property
    def ndim(self) -> int:
        return self._array.ndim

    def numpy(self) -> np.ndarray:
        """A copy as a numpy array (as in TVM)."""
        return self._array.copy()

    def asnumpy(self) -> np.ndarray:
        return self.numpy()

    def view_numpy(self) -> np.ndarray:
        """A numpy view of the same memory (no copy)."""
        return self._array

    def copyfrom(self, source: Any) -> NDArray:
        src = _host_array(source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: shape {src.shape} does not match {self.shape}")
        if src.dtype != self._array.dtype:
            raise TypeError(f"copyfrom: dtype {src.dtype} does not match {self._array.dtype}")
        self._array[...] = src
        return self

    def copyto(self, target: Any) -> Any:
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        return array(self._array, device=target)

    def __dlpack__(self, *args, **kwargs):
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return (self.device.dlpack_code, self.device.device_id)

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)

    def __repr__(self) -> str:
        return f"<relaxmlir.nd.NDArray shape={self.shape}, {self.device}>\n{self._array!r}"


def _host_array(data: Any) -> np.ndarray:
    """A numpy array of `data` (NDArray, numpy array, torch CPU tensor, nested lists/scalars),
    with a supported dtype; TypeError otherwise (object, str, complex, ragged lists)."""
    if isinstance(data, NDArray):
        return data.view_numpy()
    if hasattr(data, "detach") and hasattr(data, "numpy"):  # torch.Tensor
        if getattr(data, "device", None) is not None and data.device.type != "cpu":
            raise TypeError(f"expected a CPU tensor, got one on {data.device}")
        data = data.detach()
        if str(data.dtype) == "torch.bfloat16":  # numpy cannot view it: reinterpret the bits
            import torch

            return data.view(torch.int16).numpy().view(np_dtype("bfloat16"))
        return data.numpy()
    try:
        out = np.asarray(data)
    except ValueError as exc:  # ragged nested sequences
        raise TypeError(f"cannot make an array of {type(data).__name__}: {exc}") from None
    dtype_name(out.dtype)  # raises TypeError for object/str/complex arrays
    return out


def array(data: Any, device: Device | None = None, dtype: str | None = None) -> NDArray:
    """Copy `data` (numpy array, nested lists, torch CPU tensor, NDArray) into a new NDArray.

    Non-contiguous and negative-stride inputs are copied into C order. Object, string and complex
    arrays raise TypeError.
    """
    device = device or cpu()
    if device.device_type != "cpu":
        raise ValueError(f"nd.array: device {device} is not available in this build (cpu only)")
    src = _host_array(data)
    if dtype is not None:
        src = src.astype(np_dtype(dtype))
    return NDArray(np.array(src, order="C", copy=True), device)


def empty(shape, dtype: str = "float32", device: Device | None = None) -> NDArray:
    device = device or cpu()
    if device.device_type != "cpu":
        raise ValueError(f"nd.empty: device {device} is not available in this build (cpu only)")
    return NDArray(np.empty(shape, dtype=np_dtype(dtype)), device)


def from_dlpack(obj: Any) -> NDArray:
    """View a DLPack-capable CPU tensor as an NDArray without copying."""
    out = np.from_dlpack(obj)
    dtype_name(out.dtype)
    return NDArray(out)
