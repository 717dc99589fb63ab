"""relaxmlir: TVM Unity's Relax/TensorIR programming model on upstream MLIR.

Importing the package loads only the runtime (numpy + ctypes): arrays, devices, targets, the
packed-function registry and executables loaded from disk. The compiler (`relax`, `te`, `topi`,
`frontend`, `build`, ..., which need the MLIR bindings) loads on first use of those names.
"""

import importlib

from relaxmlir import runtime, target  # noqa: F401
from relaxmlir.runtime import (  # noqa: F401
    Device,
    NDArray,
    cpu,
    cuda,
    device,
    get_global_func,
    list_global_func_names,
    load_module,
    register_func,
)

__version__ = "0.1.0"

# name -> (module, attribute or None for the module itself), imported on first access
_LAZY = {
    "nd": ("relaxmlir.nd", None),
    "relax": ("relaxmlir.relax", None),
    "te": ("relaxmlir.te", None),
    "topi": ("relaxmlir.topi", None),
    "tir": ("relaxmlir.te", None),
    "transform": ("relaxmlir.transform", None),
    "frontend": ("relaxmlir.frontend", None),
    "dlight": ("relaxmlir.dlight", None),
    "meta_schedule": ("relaxmlir.meta_schedule", None),
    "ir": ("relaxmlir.ir", None),
    "build": ("relaxmlir.relax.vm_build", "build"),
    "compile": ("relaxmlir.relax.vm_build", "build"),
    "IRModule": ("relaxmlir.ir", "IRModule"),
    "ParseError": ("relaxmlir.ir", "ParseError"),
    "parse": ("relaxmlir.ir", "parse"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'relaxmlir' has no attribute '{name}'")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
