"""`vm.profile(func_name, *args)`: the time of each kernel in one call, as TVM's VM profiler.

On the CPU, compiled entry points call `relaxmlir_profile_begin/end` around every kernel call
(lowering/profile_hooks.py) and runtime.c keeps the rows while profiling is on. On CUDA, the
model library's runtime (cuda_runtime.c) records a pair of events around every launch and the
report reads their elapsed times (kernels that cuBLAS launches are not among them). The report
sums the calls of a kernel (a deduplicated kernel runs once per layer), gives each its share of
the call's wall time, and what the kernels leave out (allocation, copies, launch gaps, the VM's
own work) as "other".
"""

from __future__ import annotations

import ctypes
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from relaxmlir.runtime import libraries

ENABLE, ROWS = "relaxmlir_profile_enable", "relaxmlir_profile_rows"
CUDA_ENABLE, CUDA_ROWS = "relaxmlir_cuda_profile_enable", "relaxmlir_cuda_profile_rows"
MAX_LAUNCHES = 1 << 16  # launches one profiled call may report


@dataclass
class ProfileRow:
    name: str
    calls: int
    total_us: float

    @property
    def mean_us(self) -> float:
        return self.total_us / self.calls if self.calls else 0.0


class ProfileReport:
    """Kernels of one call, slowest first; `table()`, `csv()`, `json()`; print() shows the table."""

    def __init__(self, func_name: str, rows: list[ProfileRow], total_us: float):
        self.func_name = func_name
        self.rows = sorted(rows, key=lambda r: r.total_us, reverse=True)
        self.total_us = total_us

    @property
    def kernels_us(self) -> float:
        return sum(r.total_us for r in self.rows)

    @property
    def other_us(self) -> float:
        return max(self.total_us - self.kernels_us, 0.0)

    def _lines(self) -> list[tuple[str, str, str, str, str]]:
        total = self.total_us or 1.0
        out = [
            (r.name, str(r.calls), f"{r.total_us:.2f}", f"{r.mean_us:.2f}", f"{100 * r.total_us / total:.2f}")
            for r in self.rows
        ]
        out.append(("(other)", "", f"{self.other_us:.2f}", "", f"{100 * self.other_us / total:.2f}"))
        out.append(("(total)", "", f"{self.total_us:.2f}", "", "100.00"))
        return out

    def table(self) -> str:
        head = ("Name", "Count", "Duration (us)", "Mean (us)", "Percent")
        lines = [head, *self._lines()]
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        fmt = [
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
            for line in lines
        ]
        return "\n".join([fmt[0], "-" * len(fmt[0]), *fmt[1:]])

    def csv(self) -> str:
        rows = ["name,count,duration_us,mean_us,percent"]
        rows += [",".join(line) for line in self._lines()]
        return "\n".join(rows)

    def json(self) -> str:
        return json.dumps(
            {
                "function": self.func_name,
                "total_us": self.total_us,
                "other_us": self.other_us,
                "kernels": [
                    {"name": r.name, "count": r.calls, "duration_us": r.total_us, "mean_us": r.mean_us}
                    for r in self.rows
                ],
            }
        )

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<ProfileReport {self.func_name}: {len(self.rows)} kernels, {self.total_us:.1f} us>"


def timers_of(executable: Any) -> ctypes.CDLL:
    """The library whose runtime keeps the executable's timers: an exported (or cached) library
    links its own copy of runtime.c; JIT code calls the shared one."""
    lib = getattr(executable.code, "lib", None)
    if lib is None:
        lib = libraries.load("relaxmlir")
    if not libraries.address(lib, ENABLE):
        raise ValueError(
            "vm.profile: this library was exported before relaxmlir could time kernels; export it again"
        )
    return lib


def _timed_call(entry: Any, args: tuple, enable: Any, wait: Callable[[], None] | None = None) -> float:
    """One untimed call (first-call work: page faults, workspaces), then one with the kernel
    timers on (`enable`); the second call's wall time in microseconds, its work waited for
    (`wait`) where it runs asynchronously."""
    enable.argtypes, enable.restype = [ctypes.c_int], None
    entry(*args)
    if wait is not None:
        wait()
    enable(1)
    try:
        start = time.perf_counter()
        entry(*args)
        if wait is not None:
            wait()
        return (time.perf_counter() - start) * 1e6
    finally:
        enable(0)


def profile_call(entry: Any, timers: ctypes.CDLL, func_name: str, args: tuple) -> ProfileReport:
    """The CPU kernels' rows, summed by runtime.c."""
    total_us = _timed_call(entry, args, timers[ENABLE])
    read = timers[ROWS]
    read.argtypes = [
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_double),
        ctypes.c_int,
    ]
    read.restype = ctypes.c_int
    cap = 4096
    names = (ctypes.c_char_p * cap)()
    calls = (ctypes.c_int64 * cap)()
    ns = (ctypes.c_double * cap)()
    n = read(names, calls, ns, cap)
    rows = [ProfileRow(names[i].decode(errors="replace"), calls[i], ns[i] / 1e3) for i in range(n)]
    return ProfileReport(func_name, rows, total_us)


def profile_cuda_call(entry: Any, func_name: str, args: tuple) -> ProfileReport:
    """An event pair around every launch of the timed call, summed here by kernel."""
    from relaxmlir.runtime.cuda_driver import CudaError, current_stream, driver
    from relaxmlir.runtime.cuda_entry import CudaEntryPoint, raise_pending

    if entry._graphs is not None:  # replays launch nothing the timers see: time a plain call
        entry = CudaEntryPoint(entry.executable, entry.info, entry.device)
    lib = entry.executable.code.lib
    if not libraries.address(lib, CUDA_ENABLE):
        raise ValueError(
            "vm.profile: this library was exported before relaxmlir could time CUDA kernels; export it again"
        )

    def wait() -> None:
        driver().synchronize(current_stream(entry.device))

    total_us = _timed_call(entry, args, lib[CUDA_ENABLE], wait)
    read = lib[CUDA_ROWS]
    read.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_float), ctypes.c_int]
    read.restype = ctypes.c_int
    names = (ctypes.c_char_p * MAX_LAUNCHES)()
    ms = (ctypes.c_float * MAX_LAUNCHES)()
    n = read(names, ms, MAX_LAUNCHES)
    if n < 0:
        raise_pending(entry._take_error)
        raise CudaError("vm.profile: reading the kernel timers failed")
    rows: dict[str, ProfileRow] = {}
    for i in range(n):
        name = names[i].decode(errors="replace")
        row = rows.setdefault(name, ProfileRow(name, 0, 0.0))
        row.calls += 1
        row.total_us += ms[i] * 1e3
    return ProfileReport(func_name, list(rows.values()), total_us)
