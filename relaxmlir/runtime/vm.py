"""`relax.VirtualMachine`: calls the compiled entry points of an Executable (MLIR-free).

Each relax function is ONE native entry point; the VM only validates arguments, allocates the
outputs whose sizes the symbolic shapes give, patches cached descriptors and makes one ctypes call.
"""

from __future__ import annotations

from collections.abc import Callable

from relaxmlir.runtime.cuda_entry import CudaEntryPoint
from relaxmlir.runtime.device import TARGET_DEVICE, Device, cpu
from relaxmlir.runtime.entry import EntryPoint
from relaxmlir.runtime.executable import Executable, FunctionInfo
from relaxmlir.runtime.profile import ProfileReport, profile_call, profile_cuda_call, timers_of
from relaxmlir.runtime.state import StatefulEntry
from relaxmlir.runtime.timer import BenchmarkResult, time_evaluator

MEMORY_CONFIGS = ("pooled",)  # kernel workspaces are cached by the native runtime


class VirtualMachine:
    """Run the functions of an Executable: `vm["main"](*args)`.

    Arguments may be `rm.nd.NDArray`, numpy arrays or torch CPU tensors (shared, not copied);
    results are NDArrays (a tuple when the function returns several). A CUDA executable runs on
    `rm.cuda(i)` and takes arrays already on that device (NDArrays or torch CUDA tensors);
    `cuda_graph=True` replays a call whose arguments repeat as one CUDA graph (cuda_graph.py).
    A function with state (buffers the model updates in place) takes its inputs only: the VM
    keeps the state between calls (`vm.state(name)`, `vm.reset_state(name)`; runtime/state.py).
    """

    def __init__(
        self,
        executable: Executable,
        device: Device | None = None,
        memory_cfg: str | None = None,
        cuda_graph: bool = False,
        profile: bool = False,
    ):
        if not isinstance(executable, Executable):
            raise TypeError(
                "VirtualMachine expects an Executable from relax.build or runtime.load_module, "
                f"got {type(executable).__name__}"
            )
        if memory_cfg is not None and memory_cfg not in MEMORY_CONFIGS:
            raise ValueError(
                f"memory_cfg: unsupported value ({memory_cfg!r}); supported: {', '.join(MEMORY_CONFIGS)}"
            )
        self.executable = executable
        self.device = device if device is not None else cpu()
        if isinstance(self.device, (list, tuple)):
            self.device = self.device[0]
        if not isinstance(self.device, Device):
            raise TypeError(f"VirtualMachine expects a Device (rm.cpu()), got {self.device!r}")
        kind = executable.target.kind
        if self.device.device_type != TARGET_DEVICE.get(kind, kind):
            raise ValueError(f"executable built for target '{kind}' cannot run on {self.device}")
        for option, value in (("cuda_graph", cuda_graph), ("profile", profile)):
            if not isinstance(value, bool):
                raise TypeError(f"{option}: expected True or False, got {value!r}")
        # `profile` is TVM's switch to a profiling VM; here every build carries its kernel
        # timers (vm.profile works either way), so it is accepted and changes nothing.
        if cuda_graph and self.device.device_type != "cuda":
            raise ValueError(f"cuda_graph: CUDA graphs need a cuda device, the VM runs on {self.device}")
        self.cuda_graph = cuda_graph
        self._entries: dict[str, EntryPoint] = {}

    def __getitem__(self, name: str) -> EntryPoint | StatefulEntry:
        if name not in self._entries:
            if name not in self.executable.infos:
                raise KeyError(
                    f"no function '{name}' in the executable; functions: {', '.join(self.executable.infos)}"
                )
            info = self.executable.infos[name]
            if self.device.device_type == "cuda":
                entry = CudaEntryPoint(self.executable, info, self.device, self.cuda_graph)
            else:
                entry = EntryPoint(self.executable, info, self.device)
            if info.state or info.input_updates:
                init = self[info.state_init] if info.state else None
                entry = StatefulEntry(entry, init)
            self._entries[name] = entry
        return self._entries[name]

    def _stateful(self, name: str) -> StatefulEntry:
        entry = self[name]
        if not entry.info.state:
            raise ValueError(f"function '{name}' keeps no state between calls")
        return entry

    def state(self, name: str = "main") -> dict:
        """The state function `name` keeps between calls, by buffer name (NDArrays)."""
        return self._stateful(name).state()

    def reset_state(self, name: str = "main") -> None:
        """Give function `name`'s state back the values it had when the model was imported."""
        self._stateful(name).reset()

    def signature(self, name: str = "main") -> FunctionInfo:
        return self.executable.infos[name]

    def invoke(self, name: str, *args):
        return self[name](*args)

    def profile(self, func_name: str, *args) -> ProfileReport:
        """Run `func_name` once untimed, then once with every kernel call timed; the report
        lists the kernels slowest first (`print(report)`, `report.csv()`, `report.json()`).
        A function with state runs on its current state and leaves it as it was."""
        entry = self[func_name]
        if isinstance(entry, StatefulEntry):
            entry, args = entry.entry, tuple(entry.arguments(args, keep=True))
        if self.device.device_type == "cuda":
            return profile_cuda_call(entry, func_name, args)
        return profile_call(entry, timers_of(self.executable), func_name, args)

    def time_evaluator(
        self,
        func_name: str,
        dev: Device | None = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
    ) -> Callable[..., BenchmarkResult]:
        """TVM's timer: `vm.time_evaluator("main", dev, number=10, repeat=3)(*args)` returns a
        BenchmarkResult (`.mean`, `.median`, `.min`, `.max`, `.std` in seconds; `.results`: the
        mean of each repeat). One untimed call first; a repeat shorter than `min_repeat_ms` is
        run again with more calls (relaxmlir/runtime/timer.py)."""
        fn = self[func_name]  # an unknown name fails here, not at the first timing
        if dev is not None and dev != self.device:
            raise ValueError(f"time_evaluator: the VM runs on {self.device}, not {dev}")
        return time_evaluator(
            fn,
            self.device,
            number,
            repeat,
            min_repeat_ms,
            cooldown_interval_ms,
            repeats_to_cooldown,
        )
