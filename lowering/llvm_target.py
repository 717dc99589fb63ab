"""`relax-llvm-target`: stamp the target's CPU and features on every LLVM function.

LLVM compiles each function for its own `target-cpu` / `target-features` attributes, so the code
uses exactly the target's instruction set (an AVX2 build on an AVX-512 machine holds no zmm
register), in the JIT and in exported objects alike. The C-interface wrappers are kept out of
line: the ExecutionEngine adds packed wrappers of its own, without attributes, that would
otherwise inline our functions and compile them for the host's features.

Kernels (`relax.prim_func`) are kept out of line too. opt inlined the ones a graph function
calls once and kept their definitions (they are external), so their code was compiled twice
(MobileNetV2's `main` had grown to 404k characters of LLVM IR). At 2 threads the inlined fork
wrappers tied `main` to every region OpenMP outlines, and split code generation (`export._deal`)
could not part them: ResNet-18's pieces were 1.17M and 0.33M characters, now 718k / 709k.
Measured at the same speed (ResNet-18, MobileNetV2, the W6 encoder layer, the MLP at batch 1;
1 and 2 threads).
"""

from __future__ import annotations

from mlir import ir

from dialects.relax import PRIM_FUNC_ATTR
from lowering.registry import register_pass, target_option


def stamp_target(module_op: ir.Operation, target) -> None:
    features = ", ".join(f'"{f}"' for f in target.llvm_features().split(","))
    cpu = ir.StringAttr.get(target.mcpu)
    feature_attr = ir.Attribute.parse(f"#llvm.target_features<[{features}]>")
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "llvm.func" or not len(op.regions[0].blocks):
            continue
        op.attributes["target_cpu"] = cpu
        op.attributes["target_features"] = feature_attr
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if name.startswith("_mlir_ciface_") or PRIM_FUNC_ATTR in op.attributes:
            op.attributes["no_inline"] = ir.UnitAttr.get()
        if name.startswith("_mlir_ciface_") and _arity(op) > MANY_ARGUMENTS:
            op.attributes["passthrough"] = ir.ArrayAttr.get([ir.StringAttr.get("optnone")])
        _keep_llvm_argument_attributes(op)


def _keep_llvm_argument_attributes(func_op: ir.Operation) -> None:
    """Drop the argument and result annotations that are not LLVM's (`relax.name`): the
    translation to LLVM IR looked each one up in the context's dialects, ~5 ms apiece, and a
    model's weights as arguments carry hundreds (MobileNetV2 with LiftTransformParams: 738
    names, 3.5 of its 3.6 s of translation)."""
    for key in ("arg_attrs", "res_attrs"):
        if key not in func_op.attributes:
            continue
        kept = []
        for entry in ir.ArrayAttr(func_op.attributes[key]):
            entries = ir.DictAttr(entry)
            named = [entries[i] for i in range(len(entries))]
            kept.append(
                ir.DictAttr.get({a.name: a.attr for a in named if a.name.startswith("llvm.")})
            )
        func_op.attributes[key] = ir.ArrayAttr.get(kept)


# A C-interface wrapper unpacks each memref descriptor into scalars for the call it makes: with
# a model's weights as arguments (keep_params_as_input, LiftTransformParams' functions) that is
# thousands of loads and a call with thousands of operands, which instruction selection and
# scheduling took seconds over (MobileNetV2's two wrappers: 2.8 s of 6.3 s of llc). Compiled
# without optimization (fast instruction selection), they take a fraction of that, and run
# once per call of the model. In the CPU pipeline `relax-descriptor-arguments` (same threshold)
# now gives such functions a pointer per descriptor, so their wrappers only forward pointers;
# this covers modules lowered without it.
MANY_ARGUMENTS = 64


def _arity(func_op: ir.Operation) -> int:
    return len(list(func_op.regions[0].blocks[0].arguments))


@register_pass(
    "relax-llvm-target",
    "set target_cpu/target_features of every llvm.func from the target (after LLVM lowering)",
    {"target": "target string (default: the target in scope, else the host CPU)"},
)
def relax_llvm_target(target: str = ""):
    tgt = target_option(target, "relax-llvm-target", kind="llvm")
    return lambda module_op: stamp_target(module_op, tgt)
