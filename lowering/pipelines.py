"""Named pipelines: one line per stage, each saying why it is there.

`PIPELINES` maps a name to a list of pass-pipeline elements (project passes by their registered
names, upstream passes by their textual names). `TARGETS` maps a target name to the pipeline that
lowers a whole module for it and the runtime libraries the ExecutionEngine must load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import mlir

from lowering.schedule.runtime import PARALLEL_CODEGEN, PARALLEL_LLVM, SHARED_LIBS, VECTOR_CODEGEN

MLIR_LIB_DIR = os.path.join(list(mlir.__path__)[0], "lib")

# Relax graph level: what must hold before the graph is lowered to buffers.
GRAPH_LOWERING = [
    "relax-verify",  # fail early, at the op, on malformed relax IR
    "relax-fuse-ops",  # group matmul -> bias -> relu and elementwise runs (in dataflow blocks)
    "relax-fuse-tir",  # ... into one primitive function each, without intermediate tensors
    "relax-pack-constant-weights",  # constant matmul weights packed once, at compile time
    "symbol-dce",  # primitive functions that fusion or packing made unreferenced
    "relax-inline-dataflow",  # block boundaries carry no information past this point
]

# Primitive functions: schedules run on tensors, before bufferization (tile, pack, vectorize).
SCHEDULE_CPU = [
    "relax-schedule-cpu",  # default schedules by op pattern: pack/tile/vectorize/parallelize
]

BUFFERIZE = [
    "relax-graph-to-memref",  # graph functions -> one native entry point with out-parameters
    "relax-prim-func-dps",  # kernels return exactly their out-arguments
    "eliminate-empty-tensors",  # ... and compute into them rather than into a temporary
    # Primitive functions keep tensor signatures until here; function-boundary bufferization makes
    # their out-arguments the buffers the caller allocated (destination-passing, in place).
    "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}",
    # Scheduled loops leave self-copies of subviews and loop results that fold away only here.
    "canonicalize",
    "cse",
    "canonicalize",
    "drop-equivalent-buffer-results",  # DPS results equal their out-arguments: drop them
    "canonicalize",
    "buffer-deallocation-pipeline",  # frees for every allocation of the graph and the kernels
]

# Loops and vectors down to the LLVM dialect.
CPU_CODEGEN = [
    *VECTOR_CODEGEN,  # scheduled kernels: n-D vector transfers -> 1-D (one zmm row each)
    *PARALLEL_CODEGEN,  # scheduled kernels: scf.forall -> OpenMP or async tasks (schedule/runtime.py)
    "convert-linalg-to-loops",
    "arith-expand",  # floordivsi/ceildivsi and friends have no direct LLVM lowering
    "lower-affine",
    "expand-strided-metadata",
    "lower-affine",  # expand-strided-metadata emits affine.apply for subview offsets
    "finalize-memref-to-llvm",  # before convert-scf-to-cf: OpenMP regions need it (MLIR_NOTES)
    "convert-scf-to-cf",
    "convert-vector-to-llvm{enable-x86vector}",  # contractions were lowered to FMAs by the schedule
    "convert-math-to-llvm",
    "convert-math-to-libm",
    *PARALLEL_LLVM,  # OpenMP: omp dialect -> LLVM (nothing for async)
    "convert-ub-to-llvm",  # vectorization pads transfers with ub.poison
    "convert-to-llvm",
    "reconcile-unrealized-casts",
]


@dataclass
class Target:
    name: str
    pipeline: list[str]
    shared_libs: list[str] = field(default_factory=list)
    opt_level: int = 3


TARGETS: dict[str, Target] = {
    "llvm": Target(
        "llvm",
        GRAPH_LOWERING + SCHEDULE_CPU + BUFFERIZE + CPU_CODEGEN,
        shared_libs=list(SHARED_LIBS),  # c runner utils + the async runtime (parallel loops)
    ),
}

PIPELINES: dict[str, list[str]] = {
    "graph-lowering": GRAPH_LOWERING,
    "bufferize": BUFFERIZE,
    "cpu-codegen": CPU_CODEGEN,
    "llvm": TARGETS["llvm"].pipeline,
}


def get_target(name: str) -> Target:
    key = {"cpu": "llvm", "c": "llvm"}.get(name, name)
    if key not in TARGETS:
        raise ValueError(f"unknown target '{name}'; known targets: {', '.join(sorted(TARGETS))}")
    return TARGETS[key]


def get_pipeline(name: str) -> str:
    """The textual pipeline `builtin.module(...)` registered under `name`."""
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline '{name}'; known pipelines: {', '.join(sorted(PIPELINES))}")
    return "builtin.module(" + ",".join(PIPELINES[name]) + ")"
