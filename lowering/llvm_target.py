"""`relax-llvm-target`: stamp the target's CPU and features on every LLVM function.

LLVM compiles each function for its own `target-cpu` / `target-features` attributes, so the code
uses exactly the target's instruction set (an AVX2 build on an AVX-512 machine holds no zmm
register), in the JIT and in exported objects alike. The C-interface wrappers are kept out of
line: the ExecutionEngine adds packed wrappers of its own, without attributes, that would
otherwise inline our functions and compile them for the host's features. So are functions that
fork threads (an `omp.parallel`): inlined into the graph function, the regions OpenMP outlines
from them tie that function to every such kernel, and split code generation
(`export._deal`) could not part them (ResNet-18 at 2 threads: pieces of 1.17M and 0.33M
characters, llc 0.55 s instead of ~0.3).
"""

from __future__ import annotations

from mlir import ir

from lowering.registry import contains_op, register_pass, target_option


def stamp_target(module_op: ir.Operation, target) -> None:
    features = ", ".join(f'"{f}"' for f in target.llvm_features().split(","))
    cpu = ir.StringAttr.get(target.mcpu)
    feature_attr = ir.Attribute.parse(f"#llvm.target_features<[{features}]>")
    parallel = target.num_cores > 1
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "llvm.func" or not len(op.regions[0].blocks):
            continue
        op.attributes["target_cpu"] = cpu
        op.attributes["target_features"] = feature_attr
        if ir.StringAttr(op.attributes["sym_name"]).value.startswith("_mlir_ciface_") or (
            parallel and contains_op(op, "omp.parallel")
        ):
            op.attributes["no_inline"] = ir.UnitAttr.get()


@register_pass(
    "relax-llvm-target",
    "set target_cpu/target_features of every llvm.func from the target (after LLVM lowering)",
    {"target": "target string (default: the target in scope, else the host CPU)"},
)
def relax_llvm_target(target: str = ""):
    tgt = target_option(target, "relax-llvm-target", kind="llvm")
    return lambda module_op: stamp_target(module_op, tgt)
