"""Run a relax module's CUDA kernels on the CPU: the module is lowered for a cuda target
through the pipeline's map stage, and `main` is interpreted thread by thread
(`lowering/gpu/interpret.py`). Numeric checks of the GPU code where no GPU is (tests, the
`interpret` mode of scripts/gpu_models_check.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.gpu.interpret import run_function
from lowering.pipelines import target_pipeline
from lowering.registry import run_pipeline
from relaxmlir.ir import IRModule
from relaxmlir.relax.pipeline import get_pipeline
from relaxmlir.scope import scope
from relaxmlir.target import Target

MAPPED = ["graph", "schedule", "bufferize", "map"]


def outputs_like(expected: list[np.ndarray]) -> list[np.ndarray]:
    """Output arrays for `interpret` shaped as the `expected` ones: NaN where float (a value the
    kernels never write shows), zeros otherwise."""
    return [
        np.full(w.shape, np.nan, w.dtype) if w.dtype.kind == "f" else np.zeros_like(w)
        for w in expected
    ]


def interpret(mod: IRModule, *arrays: np.ndarray, target: Any = "cuda") -> IRModule:
    """Lower `mod` for `target` (a cuda target) through the map stage and interpret its `main`
    on `arrays`: its inputs, then one array per output, written in place. Returns the lowered
    module (the IR that ran)."""
    tgt = Target(target)
    if tgt.kind != "cuda":
        raise ValueError(f"interpret: expected a cuda target, got ({tgt})")
    with scope(), tgt:
        lowered = get_pipeline("zero")(mod).clone()
        stages = target_pipeline(tgt, MAPPED)
        run_pipeline(lowered.module, "builtin.module(" + ",".join(stages) + ")")
        run_function(lowered.module.operation, "main", *arrays)
    return lowered
