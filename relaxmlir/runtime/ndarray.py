"""`rm.nd` / `rm.runtime.tensor`: arrays on a device. A CPU NDArray owns a host buffer and speaks
DLPack, so torch and numpy view it without copying; a CUDA NDArray holds device memory
(`runtime/cuda_driver.py`), copied to the host by `.numpy()` and shared with torch through DLPack."""

from __future__ import annotations

from typing import Any

import numpy as np

from relaxmlir.runtime.device import DLPACK_CODES, Device, cpu, cuda  # noqa: F401  (rm.nd.cpu, rm.nd.cuda)
from relaxmlir.runtime.dtype import dtype_name, np_dtype


class NDArray:
    """An n-dimensional array on a device (host memory for `cpu`).

    Supports `__dlpack__`, so `torch.from_dlpack(a)` and `np.from_dlpack(a)` share its memory.
    """

    __slots__ = ("_array", "_cuda", "device")

    def __init__(self, array: np.ndarray, device: Device | None = None):
        self._array = array
        self._cuda = None  # device memory (runtime.cuda_driver.DeviceData) when on a CUDA device
        self.device = device or cpu()

    @staticmethod
    def on_device(data: Any, device: Device) -> NDArray:
        """An NDArray over device memory (`runtime.cuda_driver.DeviceData`)."""
        out = NDArray(None, device)
        out._cuda = data
        return out

    @property
    def shape(self) -> tuple:
        return self._cuda.shape if self._cuda is not None else self._array.shape

    @property
    def dtype(self) -> str:
        return dtype_name(self._cuda.dtype if self._cuda is not None else self._array.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numpy(self) -> np.ndarray:
        """A copy as a numpy array (as in TVM); from a device, after the work queued on it."""
        if self._cuda is not None:
            from relaxmlir.runtime import cuda_driver as cuda

            return cuda.download(self._cuda, self.device)
        return self._array.copy()

    def asnumpy(self) -> np.ndarray:
        return self.numpy()

    def view_numpy(self) -> np.ndarray:
        """A numpy view of the same memory (no copy; host arrays only)."""
        if self._cuda is not None:
            raise TypeError(f"an array on {self.device} has no host view: use .numpy() to copy it")
        return self._array

    def copyfrom(self, source: Any) -> NDArray:
        if self._cuda is not None:
            from relaxmlir.runtime import cuda_driver as cuda

            src = source._cuda if isinstance(source, NDArray) and source._cuda is not None else _host_array(source)
            if tuple(src.shape) != self.shape:
                raise ValueError(f"copyfrom: shape {tuple(src.shape)} does not match {self.shape}")
            if np.dtype(src.dtype) != self._cuda.dtype:
                raise TypeError(f"copyfrom: dtype {src.dtype} does not match {self._cuda.dtype}")
            cuda.copy_into(self._cuda, src, self.device)
            return self
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
        return array(self.numpy() if self._cuda is not None else self._array, device=target)

    def __dlpack__(self, *args, **kwargs):
        if self._cuda is not None:
            from relaxmlir.runtime import cuda_driver as cuda

            stream = kwargs.get("stream")
            if stream not in (None, -1) and stream != cuda.current_stream(self.device):
                # the consumer reads on another stream: our queued work must be done first
                cuda.driver().synchronize(cuda.current_stream(self.device))
            return cuda.to_dlpack(self._cuda, self.device)
        if self._array.dtype.name == "bfloat16":
            # numpy exports no bfloat16 over DLPack: describe the host buffer ourselves
            from relaxmlir.runtime import cuda_driver as cuda

            data = cuda.DeviceData(self._array.ctypes.data, self.shape, self._array.dtype, self._array)
            return cuda.to_dlpack(data, self.device)
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return (self.device.dlpack_code, self.device.device_id)

    def __array__(self, dtype=None, copy=None):
        host = self.numpy() if self._cuda is not None else self._array
        return host if dtype is None else host.astype(dtype)

    def __repr__(self) -> str:
        if self._cuda is not None:
            try:
                body = repr(self.numpy())
            except RuntimeError as exc:  # no driver here: still printable
                body = f"<device memory at {self._cuda.ptr:#x}, not readable: {exc}>"
        else:
            body = repr(self._array)
        return f"<relaxmlir.nd.NDArray shape={self.shape}, {self.device}>\n{body}"


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
        data = data.resolve_conj().numpy() if data.is_complex() else data.numpy()
        dtype_name(data.dtype)  # raises TypeError for complex tensors
        return data
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
    if device.device_type == "cuda":
        from relaxmlir.runtime import cuda_driver as cuda

        if getattr(data, "is_cuda", False) and dtype is None:  # a torch CUDA tensor
            data = from_dlpack(data.contiguous())
        if isinstance(data, NDArray) and data._cuda is not None and dtype is None:
            out = NDArray.on_device(cuda.empty(data.shape, data._cuda.dtype, device), device)
            return out.copyfrom(data)
        src = _host_array(data.numpy() if isinstance(data, NDArray) else data)
        src = src.astype(np_dtype(dtype)) if dtype is not None else src
        return NDArray.on_device(cuda.upload(src, device), device)
    src = _host_array(data.numpy() if isinstance(data, NDArray) and data._cuda is not None else data)
    if dtype is not None:
        src = src.astype(np_dtype(dtype))
    return NDArray(np.array(src, order="C", copy=True), device)


def empty(shape, dtype: str = "float32", device: Device | None = None) -> NDArray:
    device = device or cpu()
    if device.device_type == "cuda":
        from relaxmlir.runtime import cuda_driver as cuda

        return NDArray.on_device(cuda.empty(shape, np_dtype(dtype), device), device)
    return NDArray(np.empty(shape, dtype=np_dtype(dtype)), device)


def from_dlpack(obj: Any) -> NDArray:
    """View a DLPack-capable tensor (CPU, or CUDA such as a torch CUDA tensor) as an NDArray
    without copying."""
    if hasattr(obj, "__dlpack_device__") and obj.__dlpack_device__()[0] == DLPACK_CODES["cuda"]:
        from relaxmlir.runtime import cuda_driver as cuda

        device = Device("cuda", int(obj.__dlpack_device__()[1]))
        # DLPack names CUDA's legacy default stream 1 (0 is reserved and torch refuses it)
        stream = cuda.current_stream(device) or 1
        data, device = cuda.from_dlpack_capsule(obj.__dlpack__(stream=stream), obj)
        return NDArray.on_device(data, device)
    bf16 = str(getattr(obj, "dtype", "")) == "torch.bfloat16"
    if bf16 and type(obj).__module__.startswith("torch"):
        import torch

        # NOTE: numpy's DLPack import has no bfloat16: view the bits as int16, then as bfloat16
        return NDArray(np.from_dlpack(obj.view(torch.int16)).view(np_dtype("bfloat16")))
    out = np.from_dlpack(obj)
    dtype_name(out.dtype)
    return NDArray(out)
