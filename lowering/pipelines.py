"""Every pipeline of relaxmlir, in one table: one line per stage, each saying why it is there.

`PIPELINES` maps a name to a target-independent pass list (`relax.get_pipeline(name)`,
`relaxmlir-opt --pipeline=name`). `TARGETS` holds one row per target kind: the stages that lower
a whole module for it, written as a function of the `Target` (schedules, weight layouts and
codegen read its vector width, cores and features). The Python API, the driver and the tests all
read these; `check` refuses a pass that is neither registered here nor known upstream.
"""

from __future__ import annotations

from typing import Callable, Optional

import lowering.gpu  # noqa: F401  (registers the passes of the "cuda" row)
from lowering.registry import PASSES, PipelineError, split_top_level
from relaxmlir.runtime import libraries
from relaxmlir.target import Target

# -- Relax level (target independent) -----------------------------------------------------------

# `relax.get_pipeline("zero")`: what relax.build needs at the least.
ZERO = [
    "relax-inline-composites",  # pattern matches that no codegen took: back to plain ops
    "relax-fold-batch-norm",  # inference batch norms into the constant conv weights before them
    "relax-alter-op-layout",  # convolutions in the target's channel blocks (a CPU target in scope)
    "relax-combine-slices",  # an unrolled loop's slices of one tensor: one split, equal steps
    "relax-inplace-state",  # a KV cache's index_copy writes its rows into the state's buffer
    "relax-legalize-ops",  # high-level ops -> call_tir of TOPI PrimFuncs
    "relax-fold-constant",  # call_tir of constants -> constants (weights computed once)
    "relax-dead-code-elimination",  # PrimFuncs and bindings folding left unused
    # a model lifted before (LiftTransformParams): the weight re-layouts and folds the passes
    # above added move into its f_transform_params as well
    "relax-lift-transform-params{again=true}",
]
FUSION = [
    "relax-fuse-ops",  # group matmul -> bias -> relu and elementwise runs (in dataflow blocks)
    "relax-fuse-tir",  # ... into one primitive function each, without intermediate tensors
]
# What must hold before the graph is lowered to buffers.
GRAPH_LOWERING = [
    "relax-verify",  # fail early, at the op, on malformed relax IR
    *FUSION,
    "relax-dedupe-prim-funcs",  # fusion names a kernel per call site: compile each body once
    "symbol-dce",  # primitive functions that fusion made unreferenced
    "relax-inline-dataflow",  # block boundaries carry no information past this point
]


def per_function(*passes: str) -> str:
    """`passes` nested on each function: with threading on (`run_pipeline(threaded=True)`, as
    relax.build lowers), MLIR runs them on the module's functions in parallel. Only upstream
    passes that neither look outside a function nor add symbols go here."""
    return "func.func(" + ",".join(passes) + ")"


# -- Buffers (target independent) ---------------------------------------------------------------

BUFFERIZE = [
    "relax-graph-to-memref",  # graph functions -> one native entry point with out-parameters
    "relax-prim-func-dps",  # kernels return exactly their out-arguments
    "eliminate-empty-tensors",  # ... and compute into them rather than into a temporary
    # Primitive functions keep tensor signatures until here; function-boundary bufferization makes
    # their out-arguments the buffers the caller allocated (destination-passing, in place).
    "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}",
    # Scheduled loops leave self-copies of subviews and loop results that fold away only here.
    per_function("canonicalize", "cse", "canonicalize"),
    "drop-equivalent-buffer-results",  # DPS results equal their out-arguments: drop them
    per_function("canonicalize"),
    "buffer-deallocation-pipeline",  # frees for every allocation of the graph and the kernels
]
# Standalone PrimFuncs (kernel tests and benchmarks, `lowering/schedule/testing.py`): scheduled
# kernels already return a chain of in-place updates of their out-argument, and
# relax-prim-func-dps's materialize_in_destination would make one-shot bufferization fail
# ("cannot avoid RaW conflict" on the loop that writes the out-argument).
BUFFERIZE_KERNELS = [p for p in BUFFERIZE if p not in ("relax-graph-to-memref", "relax-prim-func-dps")]

# -- CPU code generation ------------------------------------------------------------------------

# n-D vector transfers -> unrolled 1-D transfers (one register row each); before loops disappear.
VECTOR_CODEGEN = [per_function("convert-vector-to-scf{full-unroll=true target-rank=1}")]
# scf.forall (from the schedule) -> scf.parallel -> OpenMP; converted after memrefs (MLIR_NOTES).
OPENMP_CODEGEN = [per_function("scf-forall-to-parallel"), "convert-scf-to-openmp"]
# ... or -> async tasks on the thread pool of MLIR's async runtime (no OpenMP installed).
ASYNC_CODEGEN = [
    per_function("scf-forall-to-parallel"),
    # min-task-size=1: each forall iteration is already a coarse task (the default, 1000, would
    # run a 2-iteration forall on one thread).
    "async-parallel-for{async-dispatch=true num-workers=-1 min-task-size=1}",
    "async-to-async-runtime",
    "async-runtime-ref-counting",
    "async-runtime-ref-counting-opt",
    "convert-async-to-llvm",
]


def _quoted(target: Target) -> str:
    return f'target="{target}"'


def cpu_codegen(target: Target, runtime: Optional[str] = None) -> list[str]:
    """Loops and vectors down to the LLVM dialect, for `target` and a parallel runtime."""
    runtime = runtime or libraries.parallel_runtime()
    x86 = target.arch == "x86_64"
    return [
        "relax-prefetch-next-block",  # GEMMs fetch B's next column block into L2
        *VECTOR_CODEGEN,  # scheduled kernels: n-D vector transfers -> 1-D (one register each)
        "relax-scalar-operand-loads",  # register tiles' broadcast operands: scalar loads
        # rows of 14 or 7 lanes: one masked load each, not 8 + 4 + 2 (x86's masks)
        *([f"relax-masked-partial-vectors{{{_quoted(target)}}}"] if x86 else []),
        *(OPENMP_CODEGEN if runtime == "openmp" else ASYNC_CODEGEN),  # scf.forall -> threads
        per_function(
            "convert-linalg-to-loops",
            "arith-expand",  # floordivsi/ceildivsi and friends have no direct LLVM lowering
            "lower-affine",
            "expand-strided-metadata",
            "lower-affine",  # expand-strided-metadata emits affine.apply for subview offsets
        ),
        # a model's weights as arguments: a descriptor pointer each, not thousands of scalars
        "relax-descriptor-arguments",
        # Allocations call the native runtime's workspace cache (runtime/native/runtime.c) rather
        # than malloc; before convert-scf-to-cf: OpenMP regions need memrefs lowered (MLIR_NOTES).
        "finalize-memref-to-llvm{use-generic-functions=true}",
        per_function("convert-scf-to-cf"),
        # Contractions were lowered to FMAs by the schedule; x86vector only where it exists.
        # Function by function, on all cores (ResNet-18's lowering at 2 threads: 0.74-0.94 ->
        # 0.62-0.70 s, the same LLVM IR); no kernel has a vector.print, whose printf declaration
        # would be a symbol added to the module.
        per_function(
            "convert-vector-to-llvm{enable-x86vector}" if x86 else "convert-vector-to-llvm",
            "convert-math-to-llvm",
            "convert-ub-to-llvm",  # vectorization pads transfers with ub.poison
        ),
        "convert-math-to-libm",
        *(["convert-openmp-to-llvm"] if runtime == "openmp" else []),
        "convert-to-llvm",
        "reconcile-unrealized-casts",
        f"relax-llvm-target{{{_quoted(target)}}}",  # compile for the target's CPU and features
    ]


# -- CUDA code generation -----------------------------------------------------------------------


def cuda_stages(target: Target) -> "Stages":
    """Kernels mapped to blocks and threads, outlined into gpu.modules, NVVM, PTX; host code
    calling the mgpu* runtime (MLIR_NOTES, GPU section). The arch and its PTX version come from
    the Target, validated before any pass runs (LLVM aborts on an unsupported PTX version)."""
    arch, ptx = target.arch, target.ptx_version
    quoted = _quoted(target)
    bufferize = [p for p in BUFFERIZE if p != "buffer-deallocation-pipeline"]
    return [
        ("graph", GRAPH_LOWERING),
        ("schedule", [f"relax-schedule-gpu{{{quoted}}}"]),  # scf.forall over blocks, then threads
        ("bufferize", [
            *bufferize,
            "relax-gpu-private-buffers",  # fused temporaries: per-thread allocas, never freed
            "buffer-deallocation-pipeline",
        ]),  # fmt: skip
        ("map", [
            "relax-gpu-map",  # each mapped forall -> gpu.launch with the rule's block size
            "relax-gpu-contract",  # contractions -> shared-memory tiled kernels (Matmul rule)
            "relax-gpu-rows",  # softmax / norms / row reductions -> one block per row
            "relax-gpu-transpose",  # transposing copies -> shared-memory tiles
            "relax-gpu-host-copies",  # copies between strided views: a device kernel
            "func.func(convert-linalg-to-loops)",  # NVVM lowering wants loops, not linalg
            "canonicalize",
            "cse",
            "gpu-launch-sink-index-computations",  # else loop bounds become kernel parameters
        ]),  # fmt: skip
        ("outline", [
            "relax-gpu-note-min-blocks",  # a launch's occupancy request, kept across outlining
            "gpu-kernel-outlining",  # gpu.launch -> gpu.module + gpu.launch_func
            "relax-gpu-min-blocks",  # ... as the kernel's register cap (nvvm.maxnreg)
            "relax-gpu-align-shared",  # shared tiles on 16 bytes (vector accesses)
            "relax-gpu-fmod",  # arith.remf -> libdevice's fmod (NVVM lowering refuses llvm.frem)
            "relax-gpu-host-memory",  # host buffers live on the device (gpu.alloc, gpu.memcpy)
            "relax-gpu-record-constants",  # constant sizes, for the device copies after LLVM
        ]),  # fmt: skip
        ("nvvm", [
            # warpgroup MMA (wgmma) while its accumulators are still scf.for values: the
            # conversion retypes loop-carried values, not block arguments after scf-to-cf
            "gpu.module(convert-nvgpu-to-nvvm)",
            "convert-vector-to-scf",
            "convert-scf-to-cf",  # before convert-gpu-to-nvvm inside the gpu module (MLIR_NOTES)
            "convert-nvvm-to-llvm",
            "convert-func-to-llvm",
            "expand-strided-metadata",
            f"nvvm-attach-target{{chip={arch} features=+ptx{ptx} O=3}}",  # PTX version: always set
            "lower-affine",
            "convert-arith-to-llvm",
            "convert-index-to-llvm",
            "canonicalize",
            "cse",
            # tensor-core fragments: 2-D vectors -> 1-D, nvgpu.mma.sync -> nvvm.mma.sync
            "gpu.module(convert-nvgpu-to-nvvm)",
            # math.exp/tanh/erf -> libdevice (__nv_expf...), linked in by gpu-module-to-binary
            "gpu.module(convert-gpu-to-nvvm,canonicalize,cse,reconcile-unrealized-casts)",
        ]),  # fmt: skip
        ("host", [
            "gpu-to-llvm",  # launches stay gpu.launch_func until translation (mgpu* calls)
            "finalize-memref-to-llvm",
            "convert-to-llvm",
            "reconcile-unrealized-casts",
            "relax-gpu-device-constants",  # constants read through their device copies
        ]),  # fmt: skip
        ("ptx", ["gpu-module-to-binary{format=isa}"]),  # PTX text, JIT-compiled by the driver
    ]


# -- The target table ---------------------------------------------------------------------------

Stages = list[tuple[str, list[str]]]


def llvm_stages(target: Target) -> Stages:
    return [
        ("graph", GRAPH_LOWERING),
        ("layout", [
            f"relax-pack-constant-weights{{{_quoted(target)}}}",  # weights in the CPU panels
            "symbol-dce",  # PrimFuncs that packing replaced
        ]),  # fmt: skip
        ("schedule", [f"relax-schedule-cpu{{{_quoted(target)}}}"]),  # tile/pack/vectorize/threads
        ("bufferize", [
            *BUFFERIZE,
            "relax-profile-hooks",  # kernel calls timed when profiling is on (vm.profile)
        ]),  # fmt: skip
        ("codegen", cpu_codegen(target)),
    ]


# Target kind -> its stages. A new target is one row (the CUDA target adds "cuda").
TARGETS: dict[str, Callable[[Target], Stages]] = {
    "llvm": llvm_stages,
    "cuda": cuda_stages,
}

# Named target-independent pipelines (the driver's --pipeline=NAME; "llvm" is the host's row).
PIPELINES: dict[str, list[str]] = {
    "zero": ZERO,
    "default": ZERO + FUSION,
    "graph-lowering": GRAPH_LOWERING,
    "bufferize": BUFFERIZE,
    "bufferize-kernels": BUFFERIZE_KERNELS,
}


def target_stages(target: Target) -> Stages:
    if target.kind not in TARGETS:
        raise ValueError(f"no pipeline for target kind '{target.kind}'; known: {', '.join(TARGETS)}")
    return TARGETS[target.kind](target)


def target_pipeline(target: Target, stages: Optional[list[str]] = None) -> list[str]:
    """The pass list that lowers a module for `target` (all stages, or the named ones)."""
    rows = target_stages(target)
    known = [name for name, _ in rows]
    unknown = set(stages or []) - set(known)
    if unknown:
        raise ValueError(f"unknown stage(s) {sorted(unknown)}; stages: {', '.join(known)}")
    return [p for name, passes in rows if stages is None or name in stages for p in passes]


def pipeline_names() -> list[str]:
    return sorted(PIPELINES) + sorted(TARGETS)


def pipeline_elements(name: str, target: Optional[Target] = None) -> list[str]:
    """The elements of a named pipeline; a target kind's name gives its row for `target`
    (default: the target in scope, else the host)."""
    if name in PIPELINES:
        return list(PIPELINES[name])
    if name in TARGETS:
        target = target or Target.current() or Target(name)
        return target_pipeline(target)
    raise ValueError(f"unknown pipeline '{name}'; known pipelines: {', '.join(pipeline_names())}")


def get_pipeline(name: str, target: Optional[Target] = None) -> str:
    """The textual pipeline `builtin.module(...)` registered under `name`."""
    return "builtin.module(" + ",".join(pipeline_elements(name, target)) + ")"


_UPSTREAM_OK: set[str] = set()


def check(elements: list[str]) -> None:
    """Raise PipelineError naming any element that is neither a project pass nor an upstream
    pass (upstream names are checked by parsing them alone, once)."""
    from mlir import ir
    from mlir.passmanager import PassManager

    for element in elements:
        name = element.partition("{")[0].strip()
        if name in PASSES or element in _UPSTREAM_OK:
            continue
        try:
            with ir.Context():
                PassManager.parse(f"builtin.module({element})")
        except (ValueError, ir.MLIRError) as exc:
            raise PipelineError(f"pipeline element '{element}' is not a known pass: {exc}") from None
        _UPSTREAM_OK.add(element)


def split(pipeline: str) -> list[str]:
    """`builtin.module(a,b{x=1})` -> ["a", "b{x=1}"]."""
    text = pipeline.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module(") : -1]
    return split_top_level(text)
