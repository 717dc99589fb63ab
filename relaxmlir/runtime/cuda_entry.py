"""Calling a CUDA model library: device arguments in, device results out, one native call on the
caller's stream, then the first failure its CUDA runtime recorded raised as CudaError."""

from __future__ import annotations

import ctypes
import warnings
from typing import Any

import numpy as np

from relaxmlir.runtime import libraries, memref_abi
from relaxmlir.runtime import shape as sh
from relaxmlir.runtime.cuda_driver import (
    CudaError,
    DeviceData,
    copy_into,
    current_stream,
    driver,
    empty,
)
from relaxmlir.runtime.cuda_graph import SKIP, CallGraph, GraphCache, capture, pays
from relaxmlir.runtime.device import Device
from relaxmlir.runtime.dtype import np_dtype
from relaxmlir.runtime.ndarray import NDArray

# Kernels read and write contiguous buffers in 16-byte vectors: a buffer must start on a
# 16-byte boundary (device allocations start on 256 or more; a view at an odd offset may not).
ALIGNMENT = 16


def _device_data(value: Any, device: Device, what: str) -> DeviceData:
    """The device memory of an argument, which must already live on `device`."""
    if isinstance(value, NDArray):
        if value.device != device:
            raise TypeError(
                f"{what} is on {value.device}, the VM runs on {device}: copy it with rm.nd.array(x, {device!r})"
            )
        return value._cuda
    if hasattr(value, "data_ptr") and hasattr(value, "is_cuda"):  # torch.Tensor, shared
        if not value.is_cuda or value.device.index != device.device_id:
            raise TypeError(
                f"{what} is a torch tensor on {value.device}, the VM runs on {device}: move it with .to('cuda:{device.device_id}')"
            )
        if not value.is_contiguous():
            raise ValueError(f"{what} must be contiguous (call .contiguous())")
        dtype = np_dtype(str(value.dtype).replace("torch.", ""))
        return DeviceData(value.data_ptr(), tuple(value.shape), dtype, value)
    kind = "a numpy array" if isinstance(value, np.ndarray) else type(value).__name__
    raise TypeError(
        f"{what} is {kind} in host memory, the VM runs on {device}: copy it with rm.nd.array(x, {device!r})"
    )


class CudaEntryPoint:
    """`vm["main"]` of a CUDA executable: device arguments, device results, one native call on the
    caller's stream, then the runtime's first error (if any) raised as CudaError."""

    def __init__(self, executable: Any, info: Any, device: Device, cuda_graph: bool = False):
        self.executable, self.info, self.device = executable, info, device
        self.native = executable.code.lookup(info.name)
        lib = executable.code.lib
        self._graphs: GraphCache | None = None
        if cuda_graph:
            if not libraries.address(lib, "relaxmlir_cuda_set_capture"):
                raise ValueError(
                    "cuda_graph: this library was exported before relaxmlir captured CUDA "
                    "graphs; export it again"
                )
            self._set_capture = lib.relaxmlir_cuda_set_capture
            self._set_capture.argtypes, self._set_capture.restype = [ctypes.c_int], None
            self._graphs = GraphCache()
        self._set_stream = lib.relaxmlir_cuda_set_stream
        self._set_stream.argtypes = [ctypes.c_void_p]
        self._set_device = lib.relaxmlir_cuda_set_device
        self._set_device.argtypes = [ctypes.c_int]
        self._take_error = lib.relaxmlir_cuda_take_error
        self._take_error.argtypes, self._take_error.restype = (
            [ctypes.c_char_p, ctypes.c_int],
            ctypes.c_int,
        )
        # the device blocks its runtime keeps for reuse go back on release_workspace_cache()
        # (a library exported before the runtime kept blocks lacks the function)
        if libraries.address(lib, "relaxmlir_cuda_release_blocks"):
            libraries.RELEASE_HOOKS.setdefault(lib._name, lib.relaxmlir_cuda_release_blocks)
        # Native kernels that do device work themselves (cublas) follow the model's stream and
        # report their failures the same way: their libraries export the same two functions.
        self._native_streams, self._native_errors, self._native_prepares = [], [], []
        for name in sorted({f.library for f in executable.native_bindings.values()}):
            native = libraries.load(name)
            if libraries.address(native, "relaxmlir_cuda_take_error"):
                native.relaxmlir_cuda_set_stream.argtypes = [ctypes.c_void_p]
                native.relaxmlir_cuda_take_error.argtypes = [ctypes.c_char_p, ctypes.c_int]
                native.relaxmlir_cuda_take_error.restype = ctypes.c_int
                self._native_streams.append(native.relaxmlir_cuda_set_stream)
                self._native_errors.append(native.relaxmlir_cuda_take_error)
                if libraries.address(native, "relaxmlir_cuda_prepare_stream"):
                    prepare = native.relaxmlir_cuda_prepare_stream
                    prepare.argtypes, prepare.restype = [ctypes.c_void_p], ctypes.c_int
                    self._native_prepares.append(
                        lambda stream, prepare=prepare, take=native.relaxmlir_cuda_take_error: (
                            prepare(stream) or raise_pending(take)
                        )
                    )
        self._error_buf = ctypes.create_string_buffer(1024)  # the failure a call leaves, if any
        self.slots = [memref_abi.ArgSlot(len(s.shape)) for s in info.params + info.results]
        self._last: tuple | None = None  # (arguments, their device data, shape bindings)
        self.packed = memref_abi.packed_args(self.slots)
        self.dtypes = [np_dtype(s.dtype) for s in info.params + info.results]

    def _error(self, message: str) -> str:
        return f"{message}; expected signature {self.info.signature}"

    def __call__(self, *args):
        info = self.info
        dps = info.destination_passing
        specs = info.params + (info.results if dps else [])
        if len(args) != len(specs):
            raise TypeError(
                self._error(f"{info.name}() takes {len(specs)} argument(s), got {len(args)}")
            )
        last = self._last
        same = last is not None and all(a is b for a, b in zip(args, last[0]))
        if same:
            # The arrays of the previous call again (a model's weights, call after call):
            # checked then, immutable since, and their slots still hold them.
            datas, env = list(last[1]), last[2]
            key = last[3]
        else:
            env: dict[str, int] = {}
            datas = []
            copied = False  # an input read through an aligned copy
            for i, (arg, spec, dtype) in enumerate(zip(args, specs, self.dtypes)):
                what = f"argument {i} ('{spec.name}')"
                data = _device_data(arg, self.device, what)
                if data.dtype != dtype:
                    raise TypeError(self._error(f"{what} has dtype {data.dtype}, expected {dtype}"))
                problem = sh.bind(spec.shape, data.shape, env)
                if problem:
                    raise ValueError(self._error(f"{what} has shape {data.shape}: {problem}"))
                if data.ptr % ALIGNMENT:
                    if i >= len(info.params):
                        raise ValueError(
                            self._error(
                                f"{what}: an output must start on a {ALIGNMENT}-byte boundary "
                                "(this one is a view at an odd offset); pass a fresh array"
                            )
                        )
                    aligned = empty(data.shape, data.dtype, self.device)  # an input: copied
                    copy_into(aligned, data, self.device)
                    data, copied = aligned, True
                datas.append(data)
            for slot, data in zip(self.slots, datas):
                _set_slot(slot, data)
            # NDArrays only (a torch tensor can be re-pointed between calls), and no input
            # read through an aligned copy (its source can change)
            immutable = not copied and all(isinstance(a, NDArray) for a in args)
            key = tuple((d.ptr, d.shape) for d in datas) if self._graphs is not None else None
            self._last = (args, tuple(datas), env, key) if immutable else None
        drv = driver()
        drv.activate(self.device)
        stream = current_stream(self.device)  # once per call: torch's lookup is not free
        if self._graphs is not None:
            graph = self._graph(key + (stream,), datas, env, stream)
            if graph is not None:
                outs = [NDArray.on_device(d, self.device) for d in graph.replay(stream)]
                if dps:
                    return None
                return outs[0] if len(outs) == 1 else tuple(outs)
        outs = []
        if not dps:
            for data in self._results(env, stream):
                outs.append(NDArray.on_device(data, self.device))
                datas.append(data)
        for slot, data in zip(self.slots[len(args) :], datas[len(args) :]):
            _set_slot(slot, data)  # the results
        self._run(stream)
        if dps:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _results(self, env: dict, stream: int) -> list[DeviceData]:
        """Fresh device arrays for the results, their shapes evaluated in `env`."""
        results = []
        for spec, dtype in zip(self.info.results, self.dtypes[len(self.info.params) :]):
            shape = tuple(sh.evaluate(d, env) if not isinstance(d, int) else d for d in spec.shape)
            results.append(empty(shape, dtype, self.device, stream))
        return results

    def _graph(self, key: tuple, datas: list, env: dict, stream: int) -> CallGraph | None:
        """The graph of this argument set: kept, captured now (its second call), or None."""
        graphs = self._graphs
        graph = graphs.get(key)
        if graph is not None or not graphs.should_capture(key):
            return None if graph is SKIP else graph
        if not driver().graphs:
            graphs.off = True
            warnings.warn("cuda_graph: this CUDA driver cannot capture graphs; running without", stacklevel=3)
            return None
        n = len(datas)
        outputs = [] if self.info.destination_passing else self._results(env, stream)
        for slot, data in zip(self.slots[n:], outputs):
            _set_slot(slot, data)  # the graph's own result buffers
        try:
            handle, launches = capture(
                self._run, self._set_capture, graphs.capture_stream(stream), self._native_prepares
            )
        except CudaError as exc:
            graphs.off = True
            warnings.warn(
                f"cuda_graph: capturing {self.info.name}() failed ({exc}); running it without graphs",
                stacklevel=3,
            )
            return None
        graph = CallGraph(handle, outputs, self.device)
        if not pays(launches, sum(o.nbytes for o in outputs)):
            graphs.add(key, SKIP)  # (this call runs as usual; the graph is released)
            return None
        graphs.add(key, graph)
        return graph

    def _run(self, stream: int) -> None:
        """The native call on `stream`, then the first failure any library recorded, raised."""
        self._set_device(self.device.device_id)
        self._set_stream(stream)
        for set_stream in self._native_streams:
            set_stream(stream)
        self.native(self.packed)
        if self._native_errors:
            # every library's record is read (and cleared) before the first one is raised: a
            # failure left behind would stop that library's next call
            buf = self._error_buf
            pending = [_take(t, buf) for t in (self._take_error, *self._native_errors)]
            first = next((m for m in pending if m), "")
            if first:
                raise CudaError(first)
        else:
            raise_pending(self._take_error, self._error_buf)


def _take(take_error: Any, buf: Any = None) -> str:
    """The failure a library recorded ("" if none), cleared there; `buf`: a string buffer to
    reuse."""
    if buf is None:
        buf = ctypes.create_string_buffer(1024)
    return buf.value.decode(errors="replace") if take_error(buf, len(buf)) else ""


def raise_pending(take_error: Any, buf: Any = None) -> None:
    """Raise the first failure that the library's CUDA runtime recorded (and clear it)."""
    message = _take(take_error, buf)
    if message:
        raise CudaError(message)


def _set_slot(slot: memref_abi.ArgSlot, data: DeviceData) -> None:
    d = slot.desc
    d.allocated = data.ptr
    d.aligned = data.ptr
    if data.shape != slot.shape:
        slot.shape = data.shape
        d.offset = 0
        stride = 1
        for i in range(slot.rank - 1, -1, -1):
            d.sizes[i] = data.shape[i]
            d.strides[i] = stride
            stride *= data.shape[i]
