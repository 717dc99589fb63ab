"""relaxmlir: TVM Unity's Relax/TensorIR programming model on upstream MLIR."""

import dialects  # noqa: F401  (loads our dialects into the shared context)
import lowering  # noqa: F401  (fills the pass registry)

from relaxmlir import nd, relax, te, transform  # noqa: F401
from relaxmlir.build import build, compile  # noqa: F401,A004
from relaxmlir.ir import IRModule, ParseError, parse  # noqa: F401
from relaxmlir.nd import cpu, cuda  # noqa: F401
from relaxmlir.registry import get_global_func, list_global_func_names, register_func  # noqa: F401

__version__ = "0.1.0"
