"""CUDA graphs of whole model calls (`relax.VirtualMachine(ex, rm.cuda(0), cuda_graph=True)`).

A model call launches one kernel per fused operator (BERT-base: 278), and on a fast GPU the
host's launch cost, not the kernels, sets the pace of a small batch. With graphs on, a call
whose arguments repeat (the same device pointers and shapes, on the same stream: a model's
weights and a serving loop's input buffers) is captured once, from a stream of our own, into
an executable graph, and later calls replay it with one launch on the caller's stream. The
graph writes its results into buffers of its own; each replay copies them into fresh arrays,
so results never change under the caller. Intermediates are the graph's own memory nodes.

The first call with new arguments runs as usual (it also loads the kernels and uploads the
constants, which must not happen inside a capture); the next call with the same arguments
captures, on a stream the function keeps per caller stream, after the native libraries have set
up their state for it (cuBLAS's workspace). Arguments that alternate call by call are never
captured. A capture the driver refuses turns graphs off for that function with a warning, and
the call runs as usual. A graph is kept only where it pays (`pays`): a replay saves the GPU's
idle gap between launches and costs the copy of the results, so a call of one or two kernels
writing a large result runs as usual.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Callable, Sequence

from relaxmlir.runtime import cuda_driver
from relaxmlir.runtime.cuda_driver import DeviceData, driver, empty
from relaxmlir.runtime.device import Device

CU_STREAM_NON_BLOCKING = 1
CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
CU_GRAPH_NODE_TYPE_KERNEL = 0
MAX_GRAPHS = 8  # per function: argument sets kept, least recently used dropped first
# Measured on an H200 (benchmarks/RESULTS_GPU.md): a replay saves ~1.1 us of GPU idle time per
# kernel (BERT-base, 278 launches: 2.33 -> 1.99 ms; ResNet-18 b1, 40: 0.407 -> 0.363) and
# copies results at ~0.6 us per MB (gelu over 2^24 floats, one kernel and a 64 MB result:
# 0.076 -> 0.113 ms), plus a few microseconds of its own.
LAUNCH_GAP_US = 1.1
COPY_US_PER_MB = 0.6
REPLAY_US = 2.0
SKIP = "skip"  # a key whose graph did not pay: runs as usual, not captured again


def pays(launches: int, result_bytes: int) -> bool:
    """Whether replaying a graph of `launches` kernels beats the plain call, the copy of
    `result_bytes` of results included."""
    return launches * LAUNCH_GAP_US > REPLAY_US + result_bytes / 1e6 * COPY_US_PER_MB


class CallGraph:
    """One captured call: its executable graph and the buffers it writes results into."""

    def __init__(self, handle: int, outputs: list[DeviceData], device: Device):
        self.handle, self.outputs, self.device = handle, outputs, device

    def replay(self, stream: int) -> list[DeviceData]:
        """Launch the graph on `stream`; its results copied into fresh arrays, in stream order."""
        drv = driver()
        drv.check(drv.lib.cuGraphLaunch(self.handle, stream), "cuGraphLaunch")
        fresh = []
        for out in self.outputs:
            data = empty(out.shape, out.dtype, self.device, stream)
            code = drv.lib.cuMemcpyAsync(data.ptr, out.ptr, out.nbytes, stream)
            drv.check(code, "cuMemcpyAsync")
            fresh.append(data)
        return fresh

    def __del__(self):
        if cuda_driver._DRIVER is not None and getattr(self, "handle", None):
            # launches already queued complete first (the driver defers the release)
            cuda_driver._DRIVER.lib.cuGraphExecDestroy(self.handle)


def kernel_nodes(graph: ctypes.c_void_p) -> int:
    """How many kernels a graph launches (ours and those of the libraries it calls: cuBLAS)."""
    drv = driver()
    count = ctypes.c_size_t(0)
    drv.check(drv.lib.cuGraphGetNodes(graph, None, ctypes.byref(count)), "cuGraphGetNodes")
    nodes = (ctypes.c_void_p * count.value)()
    drv.check(drv.lib.cuGraphGetNodes(graph, nodes, ctypes.byref(count)), "cuGraphGetNodes")
    kind, kernels = ctypes.c_int(), 0
    for node in nodes[: count.value]:
        drv.check(drv.lib.cuGraphNodeGetType(node, ctypes.byref(kind)), "cuGraphNodeGetType")
        kernels += kind.value == CU_GRAPH_NODE_TYPE_KERNEL
    return kernels


def capture(
    call: Callable[[int], None],
    set_capture: Callable[[int], None],
    stream: int,
    prepares: Sequence[Callable[[int], None]] = (),
) -> tuple[int, int]:
    """Record `call(stream)`, which queues a model call's work on `stream` (a stream of the
    caller's own, not the legacy one), into an executable graph; returns its handle and the
    kernels it launches. `prepares` set up the native libraries' per-stream state first (what a
    capture refuses: cuBLAS's workspace). CudaError when the driver refuses (the capture is ended
    first)."""
    drv = driver()
    for prepare in prepares:
        prepare(stream)
    code = drv.lib.cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
    drv.check(code, "cuStreamBeginCapture")
    graph = ctypes.c_void_p()
    set_capture(1)
    try:
        call(stream)
    finally:
        set_capture(0)
        ended = drv.lib.cuStreamEndCapture(stream, ctypes.byref(graph))
        if ended != 0 and graph.value:
            drv.lib.cuGraphDestroy(graph)
    drv.check(ended, "cuStreamEndCapture")
    exe = ctypes.c_void_p()
    try:
        launches = kernel_nodes(graph)
        code = drv.lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, 0)
        drv.check(code, "cuGraphInstantiate")
    finally:
        drv.lib.cuGraphDestroy(graph)
    return exe.value, launches


class GraphCache:
    """A function's graphs by argument key (pointers, shapes, stream), least recently used
    dropped first; a key is captured when two calls in a row have it."""

    def __init__(self):
        self.graphs: OrderedDict[tuple, CallGraph | str] = OrderedDict()
        self.seen: tuple | None = None
        self.off = False  # a capture failed: this function runs without graphs
        # one capture stream per caller stream: the graphs replayed on one stream run one after
        # another, so they may share what a library keeps per stream (cuBLAS's workspace)
        self.streams: dict[int, int] = {}

    def capture_stream(self, caller: int) -> int:
        if caller not in self.streams:
            drv = driver()
            cap = ctypes.c_void_p()
            code = drv.lib.cuStreamCreate(ctypes.byref(cap), CU_STREAM_NON_BLOCKING)
            drv.check(code, "cuStreamCreate")
            self.streams[caller] = cap.value
        return self.streams[caller]

    def __del__(self):
        if cuda_driver._DRIVER is not None:
            for stream in getattr(self, "streams", {}).values():
                cuda_driver._DRIVER.lib.cuStreamDestroy_v2(stream)

    def get(self, key: tuple) -> CallGraph | str | None:
        """The key's graph, SKIP (its graph did not pay), or None (not captured)."""
        graph = self.graphs.get(key)
        if graph is not None:
            self.graphs.move_to_end(key)
        return graph

    def should_capture(self, key: tuple) -> bool:
        if self.off:
            return False
        if key == self.seen:
            return True
        self.seen = key
        return False

    def add(self, key: tuple, graph: CallGraph | str) -> None:
        self.graphs[key] = graph
        while len(self.graphs) > MAX_GRAPHS:
            self.graphs.popitem(last=False)
