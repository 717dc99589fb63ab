"""`rm.nd`: arrays on devices (TVM's `tvm.nd`); the implementation is the runtime's."""

from relaxmlir.runtime.device import Device, cpu, cuda  # noqa: F401
from relaxmlir.runtime.ndarray import NDArray, array, empty, from_dlpack  # noqa: F401
