"""Named relax pipelines (`relax.get_pipeline`), as TVM's `relax/pipeline.py`.

The pass lists are rows of the one table in `lowering/pipelines.py`; this turns a row into a
`Sequential` of module passes. Elements with a Python API pass (LegalizeOps, FoldConstant, ...)
use it, so a pipeline raises what the pass itself raises (NotImplementedError for a missing
legalization); the rest run as registered MLIR passes. An unknown pipeline or pass name raises.
"""

from __future__ import annotations

from typing import Callable

from lowering.pipelines import PIPELINES, check
from relaxmlir.transform import Pass, Sequential, mlir_pass


def _api_passes() -> dict[str, Callable[[], Pass]]:
    from relaxmlir.relax import transform

    return {
        "relax-legalize-ops": transform.LegalizeOps,
        "relax-fold-constant": transform.FoldConstant,
        "relax-dead-code-elimination": transform.DeadCodeElimination,
        "relax-fuse-ops": transform.FuseOps,
        "relax-fuse-tir": transform.FuseTIR,
    }


def get_pipeline(name: str = "zero") -> Sequential:
    """`relax.get_pipeline("zero" | "default" | ...)`: the named pipeline as a module pass."""
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline '{name}'; known pipelines: {', '.join(sorted(PIPELINES))}")
    elements = PIPELINES[name]
    check(elements)
    api = _api_passes()
    return Sequential([api[e]() if e in api else mlir_pass(e) for e in elements], name=name)
