"""`relax-profile-hooks`: bracket every kernel call of an entry point with the runtime's timers.

`vm.profile("main", *args)` reports the time of each kernel of a call, as TVM's VM profiler
does. The VM here is compiled code, so the entry points carry the hooks themselves: around each
call of a primitive function or a packed function, `relaxmlir_profile_begin(name)` and
`relaxmlir_profile_end(name)` (runtime.c), `name` the address of a NUL-terminated string (the
callee's symbol, or the registered name of a packed function). Turned off, a hook is a call that
reads a flag and returns (a few nanoseconds against kernels of microseconds), so every CPU build
has them and any executable can be profiled.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref

from dialects import relax as rx
from lowering.graph_to_memref import PACKED_ATTR, constant_global
from lowering.registry import register_pass

BEGIN, END = "relaxmlir_profile_begin", "relaxmlir_profile_end"


def _callee_names(body: ir.Block) -> dict[str, str]:
    """What the report calls each function a call may target: packed declarations by their
    registered name, every other function by its symbol."""
    names = {}
    for op in body.operations:
        if op.operation.name == "func.func":
            symbol = ir.StringAttr(op.attributes["sym_name"]).value
            attrs = op.attributes
            names[symbol] = ir.StringAttr(attrs[PACKED_ATTR]).value if PACKED_ATTR in attrs else symbol
    return names


def add_profile_hooks(module_op: ir.Operation) -> None:
    body = module_op.regions[0].blocks[0]
    names = _callee_names(body)
    if BEGIN in names:
        return  # instrumented already
    entries = [
        op
        for op in body.operations
        if op.operation.name == "func.func" and rx.FUNCTION_ATTR in op.attributes
    ]
    calls = [
        call
        for entry in entries
        for block in entry.regions[0].blocks
        for call in block.operations
        if call.operation.name == "func.call"
    ]
    if not calls:
        return
    callees = [ir.FlatSymbolRefAttr(c.attributes["callee"]).value for c in calls]
    labels = [names.get(callee, callee) for callee in callees]
    i64 = ir.IntegerType.get_signless(64)
    i8 = ir.IntegerType.get_signless(8)
    strings: dict[str, tuple[str, ir.MemRefType]] = {}
    with ir.InsertionPoint.at_block_begin(body), ir.Location.unknown():
        for hook in (BEGIN, END):
            func.FuncOp(hook, ir.FunctionType.get([i64], []), visibility="private")
        for name in sorted(set(labels)):
            data = name.encode() + b"\0"
            mtype = ir.MemRefType.get([len(data)], i8)
            symbol = f"__profile_name_{len(strings)}"
            value = ir.DenseElementsAttr.get(
                memoryview(bytearray(data)), type=ir.RankedTensorType.get([len(data)], i8)
            )
            constant_global(symbol, value, mtype)
            strings[name] = (symbol, mtype)
    for call, label in zip(calls, labels):
        symbol, mtype = strings[label]
        with ir.InsertionPoint(call), call.location:
            buffer = memref.GetGlobalOp(mtype, symbol).result
            address = memref.ExtractAlignedPointerAsIndexOp(buffer).result
            name = arith.IndexCastOp(i64, address).result
            func.CallOp([], ir.FlatSymbolRefAttr.get(BEGIN), [name])
        with ir.InsertionPoint.after(call), call.location:
            func.CallOp([], ir.FlatSymbolRefAttr.get(END), [name])


@register_pass(
    "relax-profile-hooks",
    "time every kernel call of the entry points when profiling is on (vm.profile)",
)
def relax_profile_hooks():
    return add_profile_hooks
