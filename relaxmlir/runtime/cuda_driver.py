"""CUDA in the MLIR-free runtime: the driver (`libcuda.so.1` through ctypes, opened on first use),
arrays in device memory, DLPack with torch, and calls of CUDA model libraries.

Nothing here runs at import, so CPU-only machines import and build fine; the first use of a CUDA
device raises `CudaError` naming what is missing. Device pointers are shared with torch: both use
the device's primary context, and model code runs on the caller's stream (`use_stream`, default:
torch's current stream when torch has initialized CUDA, else the legacy stream 0).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import sys
import threading
from typing import Any

import numpy as np

from relaxmlir.runtime.device import Device
from relaxmlir.runtime.dtype import np_dtype


class CudaError(RuntimeError):
    """The CUDA driver is missing, or a driver call or a kernel launch failed."""


# -- the driver ---------------------------------------------------------------------------------

_SIGNATURES = {
    "cuInit": [ctypes.c_uint],
    "cuDeviceGetCount": [ctypes.POINTER(ctypes.c_int)],
    "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int],
    "cuCtxGetCurrent": [ctypes.POINTER(ctypes.c_void_p)],
    "cuCtxSetCurrent": [ctypes.c_void_p],
    "cuCtxSynchronize": [],
    "cuMemAlloc_v2": [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t],
    "cuMemFree_v2": [ctypes.c_uint64],
    "cuMemcpyHtoD_v2": [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t],
    "cuMemcpyDtoH_v2": [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t],
    "cuMemcpyDtoD_v2": [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t],
    "cuStreamSynchronize": [ctypes.c_void_p],
    "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
}
# Stream-ordered memory (CUDA 11.2+): allocating and freeing cost no device synchronization,
# where cuMemFree waits for the whole device (every output freed would stall the next call).
_ASYNC = {
    "cuMemAllocAsync": [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_void_p],
    "cuMemFreeAsync": [ctypes.c_uint64, ctypes.c_void_p],
    "cuDeviceGetDefaultMemPool": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int],
    "cuMemPoolSetAttribute": [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p],
}
_POOL_RELEASE_THRESHOLD = 4  # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
# CUDA graphs (cuda_graph.py): a call captured once from a stream of our own, replayed on the
# caller's; cuMemcpyAsync copies a replay's outputs out of the graph's own buffers.
_GRAPHS = {
    "cuStreamCreate": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint],
    "cuStreamDestroy_v2": [ctypes.c_void_p],
    "cuStreamBeginCapture_v2": [ctypes.c_void_p, ctypes.c_int],
    "cuStreamEndCapture": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)],
    "cuGraphInstantiateWithFlags": [
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_void_p,
        ctypes.c_ulonglong,
    ],
    "cuGraphLaunch": [ctypes.c_void_p, ctypes.c_void_p],
    "cuGraphGetNodes": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)],
    "cuGraphNodeGetType": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)],
    "cuGraphExecDestroy": [ctypes.c_void_p],
    "cuGraphDestroy": [ctypes.c_void_p],
    "cuMemcpyAsync": [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p],
}


class Driver:
    """The few driver entry points the runtime needs (tensor memory and contexts)."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        self.stream_ordered = all(hasattr(lib, name) for name in _ASYNC)
        for name, argtypes in _ASYNC.items() if self.stream_ordered else ():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        self.graphs = self.stream_ordered and all(hasattr(lib, name) for name in _GRAPHS)
        for name, argtypes in _GRAPHS.items() if self.graphs else ():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        self.check(lib.cuInit(0), "cuInit")
        self._contexts: dict[int, int] = {}

    def check(self, code: int, call: str) -> None:
        if code != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(code, ctypes.byref(text))
            message = text.value.decode() if text.value else "unknown error"
            raise CudaError(f"{call} failed (CUDA error {code}: {message})")

    def device_count(self) -> int:
        count = ctypes.c_int()
        self.check(self.lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        return count.value

    def activate(self, device: Device) -> None:
        """Make the device's primary context (the one torch uses) current on this thread."""
        if device.device_id not in self._contexts:
            count = self.device_count()
            if device.device_id >= count:
                raise CudaError(f"no CUDA device {device.device_id}: this machine has {count}")
            ordinal, ctx = ctypes.c_int(), ctypes.c_void_p()
            self.check(self.lib.cuDeviceGet(ctypes.byref(ordinal), device.device_id), "cuDeviceGet")
            self.check(
                self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), ordinal),
                "cuDevicePrimaryCtxRetain",
            )
            self._contexts[device.device_id] = ctx.value
            self._keep_pool(ordinal)
        current = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
        if current.value != self._contexts[device.device_id]:
            self.check(
                self.lib.cuCtxSetCurrent(self._contexts[device.device_id]), "cuCtxSetCurrent"
            )

    def _keep_pool(self, ordinal: ctypes.c_int) -> None:
        """The device's memory pool keeps what is freed (as torch's caching allocator does):
        with the default threshold of 0 it returns the memory at every synchronization, and
        the next call maps it again (a model's workspace on every call)."""
        if not self.stream_ordered:
            return
        pool = ctypes.c_void_p()
        if self.lib.cuDeviceGetDefaultMemPool(ctypes.byref(pool), ordinal) == 0:
            keep = ctypes.c_uint64(2**64 - 1)
            self.lib.cuMemPoolSetAttribute(pool, _POOL_RELEASE_THRESHOLD, ctypes.byref(keep))

    def alloc(self, nbytes: int, stream: int | None = None) -> int:
        """Device memory; ordered on `stream` when given (and the driver has memory pools)."""
        ptr = ctypes.c_uint64()
        if stream is not None and self.stream_ordered:
            code = self.lib.cuMemAllocAsync(ctypes.byref(ptr), max(nbytes, 1), stream)
            self.check(code, "cuMemAllocAsync")
        else:
            self.check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)), "cuMemAlloc")
        return ptr.value

    def free(self, ptr: int, stream: int | None = None) -> None:
        if stream is not None and self.stream_ordered:
            self.lib.cuMemFreeAsync(ptr, stream)
        else:
            self.lib.cuMemFree_v2(ptr)

    def synchronize(self, stream: int | None) -> None:
        if stream:
            self.check(self.lib.cuStreamSynchronize(stream), "cuStreamSynchronize")
        else:
            self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")


_DRIVER: Driver | None = None
_DRIVER_LOCK = threading.Lock()
LIBCUDA = "libcuda.so.1"


def driver() -> Driver:
    """The driver, loaded on first use; CudaError when this machine has none."""
    global _DRIVER
    if _DRIVER is not None:  # every call and allocation asks: no lock once loaded
        return _DRIVER
    with _DRIVER_LOCK:
        if _DRIVER is None:
            try:
                lib = ctypes.CDLL(LIBCUDA, mode=ctypes.RTLD_LOCAL)
            except OSError as exc:
                raise CudaError(
                    f"CUDA is not available: cannot load the CUDA driver ({LIBCUDA}): {exc}; "
                    "an NVIDIA GPU and its driver are needed to run cuda code"
                ) from None
            _DRIVER = Driver(lib)
        return _DRIVER


def available() -> bool:
    """Whether a CUDA device can be used here (driver present, at least one device)."""
    try:
        return driver().device_count() > 0
    except CudaError:
        return False


# -- streams ------------------------------------------------------------------------------------

_STREAM = threading.local()


@contextlib.contextmanager
def use_stream(handle: int):
    """Run model calls on the CUstream `handle` (an int, e.g. `torch.cuda.Stream().cuda_stream`)."""
    previous = getattr(_STREAM, "handle", None)
    _STREAM.handle = int(handle)
    try:
        yield
    finally:
        _STREAM.handle = previous


def current_stream(device: Device) -> int:
    handle = getattr(_STREAM, "handle", None)
    if handle is not None:
        return handle
    torch = sys.modules.get("torch")  # only when the user imported it: never imported here
    if torch is not None and torch.cuda.is_initialized():
        # the raw handle, as torch's own generated code reads it: current_stream() builds a
        # Stream object per call (microseconds, on every model call)
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return int(raw(device.device_id))
        return int(torch.cuda.current_stream(device.device_id).cuda_stream)
    return 0


# -- arrays -------------------------------------------------------------------------------------


class _Allocation:
    """Owns device memory; freed when the last DeviceData holding it goes away."""

    def __init__(self, nbytes: int, device: Device, stream: int | None = None):
        drv = driver()
        if stream is None:  # (a caller that passes the stream has activated the device)
            drv.activate(device)
            stream = current_stream(device)
        # On the stream work is queued on now (torch's current one when torch drives): the
        # memory is ready for that work, and freeing it later waits for nothing else.
        self.stream = stream
        self.ptr = drv.alloc(nbytes, stream)

    def __del__(self):
        if _DRIVER is not None and getattr(self, "ptr", 0):
            _DRIVER.free(self.ptr, getattr(self, "stream", None))


class DeviceData:
    """Device memory viewed as a C-contiguous array: what a CUDA NDArray holds. `owner` keeps the
    memory alive (an allocation, a torch tensor, a consumed DLPack capsule)."""

    __slots__ = ("dtype", "owner", "ptr", "shape")

    def __init__(self, ptr: int, shape: tuple, dtype: np.dtype, owner: Any):
        self.ptr, self.shape, self.dtype, self.owner = ptr, shape, dtype, owner

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def empty(shape, dtype: Any, device: Device, stream: int | None = None) -> DeviceData:
    data = DeviceData(0, tuple(int(d) for d in shape), np.dtype(dtype), None)
    data.owner = _Allocation(data.nbytes, device, stream)
    data.ptr = data.owner.ptr
    return data


def upload(host: np.ndarray, device: Device) -> DeviceData:
    """New device memory holding a copy of the host array `host`."""
    host = np.ascontiguousarray(host)
    out = empty(host.shape, host.dtype, device)
    drv = driver()
    if out.owner.stream:  # the synchronous copy runs on the legacy stream: wait for the memory
        drv.synchronize(out.owner.stream)
    drv.check(drv.lib.cuMemcpyHtoD_v2(out.ptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
    return out


def download(data: DeviceData, device: Device) -> np.ndarray:
    """A host copy, after the work queued on the caller's stream."""
    drv = driver()
    drv.activate(device)
    drv.synchronize(current_stream(device))
    out = np.empty(data.shape, data.dtype)
    if out.nbytes:
        drv.check(drv.lib.cuMemcpyDtoH_v2(out.ctypes.data, data.ptr, out.nbytes), "cuMemcpyDtoH")
    return out


def copy_into(dst: DeviceData, src: Any, device: Device) -> None:
    """Copy a host array or a device array into `dst` (same shape and dtype, checked by the caller)."""
    drv = driver()
    drv.activate(device)
    if isinstance(src, DeviceData):
        drv.check(drv.lib.cuMemcpyDtoD_v2(dst.ptr, src.ptr, dst.nbytes), "cuMemcpyDtoD")
    else:
        src = np.ascontiguousarray(src)
        drv.check(drv.lib.cuMemcpyHtoD_v2(dst.ptr, src.ctypes.data, dst.nbytes), "cuMemcpyHtoD")


# -- DLPack (dlpack.h, version 0.8 ABI: DLManagedTensor) -------------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DELETER),
]

# numpy kind -> DLPack type code: kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool
_DL_CODES = {"i": 0, "u": 1, "f": 2, "bf": 4, "b": 6}
_CAPSULE_NEW = ctypes.pythonapi.PyCapsule_New
_CAPSULE_NEW.restype, _CAPSULE_NEW.argtypes = (
    ctypes.py_object,
    [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p],
)
_CAPSULE_PTR = ctypes.pythonapi.PyCapsule_GetPointer
_CAPSULE_PTR.restype, _CAPSULE_PTR.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_CAPSULE_RENAME = ctypes.pythonapi.PyCapsule_SetName
_CAPSULE_RENAME.restype, _CAPSULE_RENAME.argtypes = (
    ctypes.c_int,
    [ctypes.py_object, ctypes.c_char_p],
)
_EXPORTED: dict[int, tuple] = {}  # manager_ctx id -> what the consumer's tensor keeps alive


@_DELETER
def _release(managed):
    _EXPORTED.pop(ctypes.addressof(managed.contents), None)


def to_dlpack(data: DeviceData, device: Device):
    """A "dltensor" capsule viewing `data` (zero copy); it keeps the memory alive until the
    consumer calls the deleter."""
    kind = "bf" if data.dtype.name == "bfloat16" else data.dtype.kind
    if kind not in _DL_CODES:
        raise TypeError(f"__dlpack__: unsupported dtype {data.dtype}")
    shape = (ctypes.c_int64 * max(len(data.shape), 1))(*data.shape)
    managed = DLManagedTensor()
    managed.dl_tensor = DLTensor(
        data.ptr, DLDevice(device.dlpack_code, device.device_id), len(data.shape),
        DLDataType(_DL_CODES[kind], data.dtype.itemsize * 8, 1), shape, None, 0,
    )  # fmt: skip
    managed.deleter = _release
    _EXPORTED[ctypes.addressof(managed)] = (managed, shape, data)
    return _CAPSULE_NEW(ctypes.addressof(managed), b"dltensor", None)


def from_dlpack_capsule(capsule: Any, producer: Any) -> tuple[DeviceData, Device]:
    """The CUDA memory of a "dltensor" capsule (zero copy), and its device."""
    address = _CAPSULE_PTR(capsule, b"dltensor")
    managed = DLManagedTensor.from_address(address)
    t = managed.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    codes = {v: k for k, v in _DL_CODES.items()}
    if t.dtype.lanes != 1 or t.dtype.code not in codes:
        raise TypeError(
            f"from_dlpack: unsupported DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits)"
        )
    if t.dtype.code in (4, 6):
        dtype = np_dtype("bfloat16" if t.dtype.code == 4 else "bool")
    else:
        dtype = np.dtype(f"{codes[t.dtype.code]}{t.dtype.bits // 8}")
    if t.strides:
        strides = tuple(t.strides[i] for i in range(t.ndim))
        if strides != sh_contiguous(shape):
            raise ValueError(
                f"from_dlpack: a strided CUDA tensor (strides {strides}) must be made contiguous first"
            )
    _CAPSULE_RENAME(capsule, b"used_dltensor")
    keep = _ConsumedCapsule(address, producer)
    data = DeviceData(t.data + t.byte_offset, shape, dtype, keep)
    return data, Device("cuda", t.device.device_id)


def sh_contiguous(shape: tuple) -> tuple:
    out, stride = [], 1
    for d in reversed(shape):
        out.append(stride)
        stride *= d
    return tuple(reversed(out))


class _ConsumedCapsule:
    """Calls the producer's deleter when the array viewing its memory goes away."""

    def __init__(self, address: int, producer: Any):
        self.address, self.producer = address, producer

    def __del__(self):
        managed = DLManagedTensor.from_address(self.address)
        if managed.deleter:
            managed.deleter(ctypes.pointer(managed))
