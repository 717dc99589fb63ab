"""`LiftTransformParams`: compute what depends only on the weights once, not at every call.

A model imported with `keep_params_as_input=True` takes its weights as parameters (the function
attribute `num_input` counts the leading inputs), so the work a bound model does once at
compile time (transposing linear weights, reshaping biases) runs at every call: BERT-base spent
63 of its 210 ms transposing weights. As TVM's pass of the same name, each such function `f` is
split in two: `f_transform_params(*weights)` computes every value that reads only weights (and
constants), and `f` takes those values after its inputs. Run the first once when the weights
are loaded (it is there even when nothing is computed yet: `relax.build` moves into it what its
pipeline adds on the weights, e.g. batch norms folded into convolution weights and their
blocked layouts):

    mod = relax.transform.LiftTransformParams()(mod)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    weights = vm["main_transform_params"](*params.values())
    out = vm["main"](x, *weights)

`relax.build` then also packs the lifted matmul weights (`relax-pack-constant-weights`): the
packing is appended to `f_transform_params`, so `f` reads panels, as with bound weights.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func as func_d
from mlir.dialects import scf

from dialects import relax as rx
from lowering.bind_params import arg_names
from lowering.dataflow import graph_functions, inline_function_dataflow
from lowering.registry import register_pass
from relaxmlir.transform import Pass

NUM_INPUT_ATTR = rx.NUM_INPUT_ATTR  # the leading parameters that are inputs (the rest: weights)
TRANSFORM_PARAMS_ATTR = rx.TRANSFORM_PARAMS_ATTR  # on `f`: the function computing its weights
SUFFIX = "_transform_params"

# Ops that may have effects or whose value is not a function of their operands.
_NOT_LIFTED = {rx.CallDPSPacked.name, "relax.call_packed", "relax.print", "relax.assert_op"}


def lift_transform_params(module_op: ir.Operation, only_lifted: bool = False) -> list[str]:
    """Split every graph function with `num_input` and computations on its weights; returns
    the names of the functions added or extended. A function split before is split again:
    what the passes since added on its weights (e.g. a layout transform) moves into its
    `f_transform_params`. `only_lifted`: only those (relax.build's pipelines)."""
    done = []
    funcs = graph_functions(module_op)
    transforms = {
        ir.FlatSymbolRefAttr(f.attributes[TRANSFORM_PARAMS_ATTR]).value
        for f in funcs
        if TRANSFORM_PARAMS_ATTR in f.attributes
    }
    for func_op in funcs:
        if NUM_INPUT_ATTR not in func_op.attributes:
            continue
        if ir.StringAttr(func_op.attributes["sym_name"]).value in transforms:
            continue  # all weights: what it computes is what is lifted
        if only_lifted and TRANSFORM_PARAMS_ATTR not in func_op.attributes:
            continue
        name = _lift(module_op, func_op)
        if name is not None:
            done.append(name)
    return done


def _body_ops(func_op: ir.Operation) -> list[ir.Operation]:
    """The function's ops in order, those of its dataflow blocks included (not the blocks)."""
    ops = []
    for op in func_op.regions[0].blocks[0].operations:
        op = op.operation
        if rx.is_dataflow(op):
            ops += [o.operation for o in op.regions[0].blocks[0].operations]
        ops.append(op)
    return ops


def _liftable(op: ir.Operation, derived: set, ops_of_constants: set) -> bool:
    if not op.name.startswith("relax.") or op.name in _NOT_LIFTED or len(op.regions):
        return False
    if not len(op.results) or not len(op.operands):
        return False
    operands = list(op.operands)
    if not any(v in derived for v in operands):
        return False  # inputs only, or constants only (FoldConstant's)
    return all(v in derived or _owner(v) in ops_of_constants for v in operands)


def _owner(value: ir.Value) -> ir.Operation | None:
    return None if isinstance(value.owner, ir.Block) else value.owner.operation


def _lift(module_op: ir.Operation, func_op: ir.Operation) -> str | None:
    block = func_op.regions[0].blocks[0]
    num_input = ir.IntegerAttr(func_op.attributes[NUM_INPUT_ATTR]).value
    weights = list(block.arguments)[num_input:]
    if not weights:
        return None
    ops = _body_ops(func_op)
    constants = {op for op in ops if op.name == rx.Constant.name}
    derived, lifted = set(weights), []
    for op in ops:
        if _liftable(op, derived, constants):
            lifted.append(op)
            derived.update(op.results)
    first = TRANSFORM_PARAMS_ATTR not in func_op.attributes
    if not lifted and not first:
        return None  # nothing new since the last split
    inside = set(lifted)
    # What the rest of the function reads: the new weights, in the order first read.
    frontier: list[ir.Value] = []
    for op in ops:
        if op in inside:
            continue
        for v in op.operands:
            if v in derived and v not in frontier:
                frontier.append(v)
    if not first:
        name = ir.FlatSymbolRefAttr(func_op.attributes[TRANSFORM_PARAMS_ATTR]).value
        transform = rx.lookup_symbol(module_op, name)
    else:
        name = ir.StringAttr(func_op.attributes["sym_name"]).value + SUFFIX
        if rx.lookup_symbol(module_op, name) is not None:
            raise ValueError(
                f"LiftTransformParams: the module already has a function named '{name}' "
                "(the name of the weight transform it would add)"
            )
        transform = _new_transform_function(func_op, name, weights)
    _extend(transform, weights, lifted, frontier)
    _rewrite(func_op, num_input, lifted, frontier)
    with func_op.context:
        func_op.attributes[TRANSFORM_PARAMS_ATTR] = ir.FlatSymbolRefAttr.get(name)
    return name


def _new_transform_function(func_op, name, weights) -> ir.Operation:
    """`name(*weights) -> weights`: the identity, which `_extend` grows."""
    first = len(list(func_op.regions[0].blocks[0].arguments)) - len(weights)
    with func_op.context, func_op.location:
        transform = func_d.FuncOp(
            name,
            ir.FunctionType.get([w.type for w in weights], [w.type for w in weights]),
            ip=ir.InsertionPoint(func_op),
        )
        transform.attributes[rx.FUNCTION_ATTR] = ir.UnitAttr.get()
        transform.attributes[NUM_INPUT_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), 0
        )
        transform.attributes["arg_attrs"] = _name_attrs(arg_names(func_op)[first:])
        entry = transform.add_entry_block()
        func_d.ReturnOp(list(entry.arguments), ip=ir.InsertionPoint(entry))
    return transform.operation


def _extend(transform: ir.Operation, weights, lifted, frontier) -> None:
    """`transform` computes `lifted` (and the constants they read) from what it returned for
    `weights`, and returns `frontier` instead."""
    from mlir.dialects import func as func_d

    ret = list(transform.regions[0].blocks[0].operations)[-1].operation
    mapping = dict(zip(weights, ret.operands))
    with transform.context, transform.location:
        ip = ir.InsertionPoint(ret)
        for op in lifted:
            for v in op.operands:
                owner = _owner(v)
                if v not in mapping and owner is not None and owner.name == rx.Constant.name:
                    mapping[v] = owner.clone(ip=ip).results[0]
            clone = op.clone(ip=ip)
            for i, v in enumerate(list(clone.operands)):
                clone.operands[i] = mapping[v]
            mapping.update(zip(op.results, clone.results))
        func_d.ReturnOp([mapping[v] for v in frontier], ip=ip)
        ret.erase()
        kind = ir.FunctionType(ir.TypeAttr(transform.attributes["function_type"]).value)
        transform.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(kind.inputs), [v.type for v in frontier])
        )
        _as_dataflow(transform)


def _as_dataflow(func_op: ir.Operation) -> None:
    """`func_op`'s body as one dataflow block (what fusion groups: without it, MobileNetV2's
    642 weight ops were as many kernels, 4 s of LLVM codegen)."""
    block = func_op.regions[0].blocks[0]
    inline_function_dataflow(func_op)  # the block of an earlier split: opened, then made again
    *body, ret = [o.operation for o in block.operations]
    if not body:
        return
    values = list(ret.operands)
    region_op = scf.ExecuteRegionOp(
        [v.type for v in values], no_inline=True, ip=ir.InsertionPoint(ret)
    )
    region_op.operation.attributes[rx.DATAFLOW_ATTR] = ir.UnitAttr.get()
    inner = region_op.regions[0].blocks.append()
    for op in body:
        op.detach_from_parent()
        ir.InsertionPoint(inner).insert(op)
    scf.YieldOp(values, ip=ir.InsertionPoint(inner))
    for i, result in enumerate(region_op.results):
        ret.operands[i] = result


def _rewrite(func_op, num_input, lifted, frontier) -> None:
    """`func_op` takes its inputs, then the frontier values; the lifted ops are erased."""
    block = func_op.regions[0].blocks[0]
    names = arg_names(func_op)
    new_names = names[:num_input] + [
        names[ir.BlockArgument(v).arg_number]
        if isinstance(v.owner, ir.Block)
        else f"{_hint(v)}_{i}"
        for i, v in enumerate(frontier)
    ]  # a weight read as it is keeps its name
    old_count = len(list(block.arguments))
    with func_op.context, func_op.location:
        new_args = [block.add_argument(v.type, func_op.location) for v in frontier]
        for v, arg in zip(frontier, new_args):
            v.replace_all_uses_with(arg)
        # The constants the lifted ops read (copied along), found before any op is erased: an
        # erased op must not be touched again (a lifted op reading another lifted op read freed
        # memory here, and crashed the process now and then).
        lifted_ops = set(lifted)
        read = {_owner(v) for op in lifted for v in op.operands}
        constants = [
            op
            for op in read
            if op is not None and op not in lifted_ops and op.name == rx.Constant.name
        ]
        for op in reversed(lifted):
            op.erase()
        for op in constants:  # those that only the lifted ops read
            if not list(op.results[0].uses):
                op.erase()
        for index in range(old_count - 1, num_input - 1, -1):
            block.erase_argument(index)
        func_type = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
        func_op.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in block.arguments], func_type.results)
        )
        func_op.attributes["arg_attrs"] = _name_attrs(new_names)


def _name_attrs(names: list[str]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.DictAttr.get({"relax.name": ir.StringAttr.get(n)}) for n in names])


def _hint(value: ir.Value) -> str:
    """A lifted value's name: its op's callee or kind (`permute_dims`, `reshape`)."""
    op = value.owner.operation
    if "callee" in op.attributes:
        return ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    return op.name.removeprefix("relax.")


@register_pass(
    "relax-lift-transform-params",
    "move what graph functions compute from their weights alone (after `num_input` inputs) "
    "into a function `<name>_transform_params`, run once when the weights are loaded",
    {"again": "true: only functions split before (what later passes added on their weights)"},
)
def relax_lift_transform_params(again: str = "false"):
    if again not in ("true", "false"):
        raise ValueError(f"relax-lift-transform-params: again={again!r}: expected true or false")
    return lambda module_op: lift_transform_params(module_op, only_lifted=again == "true")


def LiftTransformParams() -> Pass:
    """Split each function with `num_input` into `f_transform_params(*weights)` (what reads only
    the weights) and `f(*inputs, *transformed_weights)`; see the module docstring."""
    return Pass("LiftTransformParams", lambda mod: lift_transform_params(mod.module.operation))
