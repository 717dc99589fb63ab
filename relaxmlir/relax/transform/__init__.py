"""`relax.transform`: graph-level passes of the Python API."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from lowering.bind_params import bind_params
from relaxmlir.transform import Pass, Sequential, mlir_pass  # noqa: F401


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "view_numpy"):
        return value.view_numpy()
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def BindParams(func_name: str, params: Mapping[str, Any]) -> Pass:
    """Bind parameters of `func_name` (by name) to constants; the function keeps the others.

    `params` maps parameter names to numpy arrays, NDArrays or torch tensors.
    """
    arrays = {name: _to_numpy(v) for name, v in params.items()}
    return Pass("BindParams", lambda mod: bind_params(mod.module.operation, func_name, arrays))


def FuseOps() -> Pass:
    """Group call_tir chains that can become one PrimFunc (annotates `relax.fuse_group`)."""
    return mlir_pass("relax-fuse-ops")


def FuseTIR() -> Pass:
    """Merge each fusion group into one PrimFunc without intermediate tensors."""
    return mlir_pass("relax-fuse-tir")

from relaxmlir.relax.transform.legalize import LegalizeOps  # noqa: F401,E402
from relaxmlir.relax.transform.dead_code import DeadCodeElimination  # noqa: F401,E402
from relaxmlir.relax.transform.fold_constant import FoldConstant  # noqa: F401,E402
from relaxmlir.relax.transform.combine_slices import CombineSlices  # noqa: F401,E402
from relaxmlir.relax.transform.inplace_state import InplaceState  # noqa: F401,E402
from relaxmlir.relax.transform.alter_op_layout import AlterOpLayout, FoldBatchnormToConv2D  # noqa: F401,E402
from relaxmlir.relax.transform.fuse_ops_by_pattern import FuseOpsByPattern, RunCodegen  # noqa: F401,E402
from relaxmlir.relax.transform.meta_schedule import MetaScheduleApplyDatabase, MetaScheduleTuneTIR  # noqa: F401,E402
from relaxmlir.relax.transform.lift_transform_params import LiftTransformParams  # noqa: F401,E402
