"""Passes and named pipelines from the relax dialect down to LLVM (and later the GPU dialect)."""

from lowering.registry import (  # noqa: F401
    PASSES,
    PassError,
    PipelineError,
    get_pass,
    register_pass,
    run_pipeline,
)

# Importing the pass modules fills the registry.
from lowering import (  # noqa: F401,E402
    bind_params,
    dataflow,
    dedupe,
    descriptor_args,
    fuse_ops,
    fuse_tir,
    graph_to_memref,
    llvm_target,
    pack_weights,
    partial_vectors,
    prefetch,
    prim_func_dps,
    profile_hooks,
    scalar_loads,
    verify,
)
from lowering.pipelines import PIPELINES, get_pipeline  # noqa: F401,E402
