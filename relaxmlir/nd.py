"""`rm.nd`: device arrays. `NDArray` owns a host buffer and speaks DLPack, so torch and numpy view
it without copying."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np


@dataclass(frozen=True)
class Device:
    device_type: str = "cpu"
    device_id: int = 0

    # DLPack device type codes
    @property
    def dlpack_code(self) -> int:
        return {"cpu": 1, "cuda": 2}[self.device_type]

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"


def cpu(device_id: int = 0) -> Device:
    return Device("cpu", device_id)


def cuda(device_id: int = 0) -> Device:
    return Device("cuda", device_id)


class NDArray:
    """An n-dimensional array on a device (host memory for `cpu`).

    Supports `__dlpack__`, so `torch.from_dlpack(a)` and `np.from_dlpack(a)` share its memory.
    """

    __slots__ = ("_array", "device")

    def __init__(self, array: np.ndarray, device: Optional[Device] = None):
        self._array = array
        self.device = device or cpu()

    @property
    def shape(self) -> tuple:
        return self._array.shape

    @property
    def dtype(self) -> str:
        return str(self._array.dtype)

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

    def copyfrom(self, source: Any) -> "NDArray":
        src = np.asarray(source.numpy() if hasattr(source, "numpy") else source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: shape {src.shape} does not match {self.shape}")
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


def array(data: Any, device: Optional[Device] = None) -> NDArray:
    """Copy `data` (numpy array, list, torch CPU tensor, NDArray) into a new NDArray."""
    device = device or cpu()
    if device.device_type != "cpu":
        raise ValueError(f"nd.array: device {device} is not available in this build (cpu only)")
    if isinstance(data, NDArray):
        data = data.view_numpy()
    elif hasattr(data, "detach") and hasattr(data, "numpy"):  # torch.Tensor
        data = data.detach().cpu().numpy()
    return NDArray(np.array(data, order="C", copy=True), device)


def empty(shape, dtype: str = "float32", device: Optional[Device] = None) -> NDArray:
    return NDArray(np.empty(shape, dtype=dtype), device or cpu())


def from_dlpack(obj: Any) -> NDArray:
    """View a DLPack-capable CPU tensor as an NDArray without copying."""
    return NDArray(np.from_dlpack(obj))
