"""`relax-descriptor-arguments`: graph functions with many buffers take descriptor pointers.

The LLVM lowering of a function unpacks each memref argument into 3 + 2 x rank scalars (pointers,
offset, sizes, strides). A graph function that takes a model's weights as arguments
(keep_params_as_input, LiftTransformParams' functions) then has thousands of parameters, each
live from the entry to its use: MobileNetV2's lifted `main` and `main_transform_params` took
1.3-1.4 s of llc each (its two code generation pieces 2.0-2.5 s, now 0.9-1.0). Here such a
function takes one `!llvm.ptr` per buffer instead, pointing at its descriptor, and reads the
descriptor right before each use. That is the C interface's convention already (`_mlir_ciface_<fn>` takes a
pointer per memref), so callers and the runtime see the same entry point.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import builtin, llvm

from dialects.relax import FUNCTION_ATTR
from lowering.llvm_target import MANY_ARGUMENTS
from lowering.registry import register_pass


def _descriptor_type(memref: ir.MemRefType) -> ir.Type:
    rank = memref.rank
    arrays = f", array<{rank} x i64>, array<{rank} x i64>" if rank else ""
    return ir.Type.parse(f"!llvm.struct<(ptr, ptr, i64{arrays})>")


def _memref_arguments(func_op: ir.Operation) -> list[ir.BlockArgument]:
    entry = func_op.regions[0].blocks[0]
    return [a for a in entry.arguments if isinstance(a.type, ir.MemRefType)]


def pass_descriptor_pointers(func_op: ir.Operation) -> int:
    """Turn each memref argument of `func_op` into a pointer to its descriptor, loaded before
    each use (so no descriptor stays live across the calls in between); returns how many."""
    args = _memref_arguments(func_op)
    ptr = ir.Type.parse("!llvm.ptr")
    for arg in args:
        memref = ir.MemRefType(arg.type)
        struct = _descriptor_type(memref)
        uses = [(use.owner, use.operand_number) for use in arg.uses]
        arg.set_type(ptr)
        for user, number in uses:
            with ir.InsertionPoint(user), user.location:
                loaded = llvm.load(struct, arg)
                view = builtin.unrealized_conversion_cast([memref], [loaded])
            user.operands[number] = view
    entry = func_op.regions[0].blocks[0]
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    inputs = [a.type for a in entry.arguments]
    func_op.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(inputs, list(ftype.results))
    )
    return len(args)


def descriptor_arguments(module_op: ir.Operation, min_buffers: int = MANY_ARGUMENTS + 1) -> int:
    """Every graph function of `module_op` with at least `min_buffers` buffer arguments."""
    done = 0
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "func.func" or FUNCTION_ATTR not in op.attributes:
            continue
        if not len(op.regions[0].blocks) or len(_memref_arguments(op)) < min_buffers:
            continue
        done += pass_descriptor_pointers(op)
    return done


@register_pass(
    "relax-descriptor-arguments",
    "graph functions with many buffer arguments take a pointer to each buffer's descriptor "
    "(read at each use) instead of its unpacked fields",
    {"min-buffers": f"from how many buffer arguments (default {MANY_ARGUMENTS + 1})"},
)
def descriptor_arguments_pass(**options: str):
    min_buffers = options.get("min-buffers", str(MANY_ARGUMENTS + 1))
    if not min_buffers.isdigit():
        raise ValueError(
            f"relax-descriptor-arguments: min-buffers={min_buffers!r}: expected a count"
        )
    return lambda module_op: descriptor_arguments(module_op, int(min_buffers))
