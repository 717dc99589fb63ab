"""`vm.profile(func_name, *args)`: the time of each kernel in one call, as TVM's VM profiler.

Compiled CPU entry points call `relaxmlir_profile_begin/end` around every kernel call
(lowering/profile_hooks.py); runtime.c keeps the rows while profiling is on. The report sums the
calls of a kernel (a deduplicated kernel runs once per layer), gives each its share of the call's
wall time, and what the kernels leave out (allocation, copies, the VM's own work) as "other".
"""

from __future__ import annotations

import ctypes
import json
import time
from dataclasses import dataclass
from typing import Any

from relaxmlir.runtime import libraries

ENABLE, ROWS = "relaxmlir_profile_enable", "relaxmlir_profile_rows"


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


def profile_call(entry: Any, timers: ctypes.CDLL, func_name: str, args: tuple) -> ProfileReport:
    """One untimed call (first-call work: page faults, workspaces), then one call with the
    kernel timers on."""
    enable = timers[ENABLE]
    enable.argtypes, enable.restype = [ctypes.c_int], None
    read = timers[ROWS]
    read.argtypes = [
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_double),
        ctypes.c_int,
    ]
    read.restype = ctypes.c_int
    entry(*args)
    enable(1)
    try:
        start = time.perf_counter()
        entry(*args)
        total_us = (time.perf_counter() - start) * 1e6
    finally:
        enable(0)
    cap = 4096
    names = (ctypes.c_char_p * cap)()
    calls = (ctypes.c_int64 * cap)()
    ns = (ctypes.c_double * cap)()
    n = read(names, calls, ns, cap)
    rows = [ProfileRow(names[i].decode(errors="replace"), calls[i], ns[i] / 1e3) for i in range(n)]
    return ProfileReport(func_name, rows, total_us)
