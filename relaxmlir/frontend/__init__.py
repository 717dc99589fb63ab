"""Frontends: the PyTorch importers `from_fx` (torch.fx) and `from_exported_program`
(torch.export), and `nn` (models written in Python, `from relaxmlir.frontend import nn`).

The importers load on first use, so `nn` works without importing torch.
"""

import importlib

# name -> (module, attribute), imported on first access
_LAZY = {
    "from_fx": ("relaxmlir.frontend.fx", "from_fx"),
    "from_exported_program": ("relaxmlir.frontend.exported_program", "from_exported_program"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'relaxmlir.frontend' has no attribute '{name}'")
    module_name, attr = _LAZY[name]
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
