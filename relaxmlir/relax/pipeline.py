"""Named relax pipelines (`relax.get_pipeline`), as TVM's `relax/pipeline.py`."""

from __future__ import annotations

from typing import Callable

from relaxmlir.transform import Sequential


def zero_pipeline() -> Sequential:
    """High-level ops -> primitive functions; what `relax.build` needs at the least."""
    from relaxmlir.relax import transform

    passes = [getattr(transform, name)() for name in ("LegalizeOps", "FoldConstant", "DeadCodeElimination") if hasattr(transform, name)]
    return Sequential(passes, name="zero")


def default_pipeline() -> Sequential:
    """`zero` plus fusion when available."""
    from relaxmlir.relax import transform

    passes = list(zero_pipeline().passes)
    for name in ("FuseOps", "FuseTIR"):
        if hasattr(transform, name):
            passes.append(getattr(transform, name)())
    return Sequential(passes, name="default")


PIPELINE_MAP: dict[str, Callable[[], Sequential]] = {
    "zero": zero_pipeline,
    "default": default_pipeline,
}


def get_pipeline(name: str = "zero") -> Sequential:
    if name not in PIPELINE_MAP:
        raise ValueError(f"unknown pipeline '{name}'; known pipelines: {', '.join(PIPELINE_MAP)}")
    return PIPELINE_MAP[name]()
