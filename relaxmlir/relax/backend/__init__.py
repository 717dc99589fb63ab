"""`relax.backend`: the table of fusion patterns that library backends offer (TVM's pattern registry).

A backend (`blas`, `cublas`, `dnnl`, ...) registers named patterns, `"<codegen>.<kernel>"`, each
a dataflow pattern with named sub-patterns (annotations) and an optional check; `FuseOpsByPattern`
cuts their matches out into composite functions and `RunCodegen` hands them to the backend's
codegen, `relax.ext.<codegen>` in the global function table. Patterns registered later take
priority: `get_patterns_with_prefix` returns them highest priority first, the order
FuseOpsByPattern wants.
The built-in backends register themselves when `relax.backend` is imported.
"""

# The built-in backends (each registers its patterns and, when usable, its codegen).
from relaxmlir.relax.backend import blas, cublas, dnnl  # noqa: F401
from relaxmlir.relax.backend.registry import (  # noqa: F401
    FusionPattern,
    PatternCheckContext,
    PatternEntry,
    as_fusion_pattern,
    get_pattern,
    get_patterns_with_prefix,
    pattern_names,
    register_patterns,
)
