"""`relaxmlir.runtime`: runs compiled models without the compiler (numpy + ctypes only).

Devices and arrays, the packed-function registry, executables (from `relax.build` or loaded from
a shared library) and the virtual machine. Nothing here imports the MLIR bindings; torch is
imported only when the user hands in torch tensors.
"""

from relaxmlir.runtime import cublas  # noqa: F401  (registers the cublas codegen's kernels)
from relaxmlir.runtime import dnnl  # noqa: F401  (registers the dnnl codegen's kernels)
from relaxmlir.runtime.cuda_driver import CudaError, use_stream  # noqa: F401
from relaxmlir.runtime.device import Device, cpu, cuda, device  # noqa: F401
from relaxmlir.runtime.executable import Executable, FunctionInfo, PackedSpec, TensorSpec  # noqa: F401
from relaxmlir.runtime.library import load_module  # noqa: F401
from relaxmlir.runtime.libraries import (  # noqa: F401
    LibraryNotFound,
    get_num_threads,
    register_library,
    release_workspace_cache,
    set_num_threads,
    workspace_cache_info,
)
from relaxmlir.runtime.ndarray import NDArray, array, empty, from_dlpack  # noqa: F401
from relaxmlir.runtime.registry import (  # noqa: F401
    NativeFunc,
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)
from relaxmlir.runtime.timer import BenchmarkResult  # noqa: F401
from relaxmlir.runtime.vm import VirtualMachine  # noqa: F401

tensor = array  # `rm.runtime.tensor(np_array, dev)`, TVM's newer name
