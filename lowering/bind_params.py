"""`relax-bind-params`: turn named parameters of a graph function into constants."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from mlir import ir

from dialects import relax as rx
from lowering import dense
from lowering.registry import PassError, register_pass


def arg_names(func_op: ir.Operation) -> list[str]:
    """A graph function's parameter names (`relax.name`), `arg<i>` where it has none."""
    n = len(func_op.regions[0].blocks[0].arguments)
    if "arg_attrs" not in func_op.attributes:
        return [f"arg{i}" for i in range(n)]
    names = []
    for i, attrs in enumerate(ir.ArrayAttr(func_op.attributes["arg_attrs"])):
        attrs = ir.DictAttr(attrs)
        names.append(ir.StringAttr(attrs["relax.name"]).value if "relax.name" in attrs else f"arg{i}")
    return names


def _element_type_ok(array: np.ndarray, tensor_type: ir.RankedTensorType) -> bool:
    return ir.DenseElementsAttr.get(np.zeros((1,), array.dtype)).type.element_type == tensor_type.element_type


def bind_params(module_op: ir.Operation, func_name: str, params: Mapping[str, np.ndarray]) -> None:
    """Replace parameters of `func_name` named in `params` by `relax.constant` ops."""
    func_op = next(
        (op.operation for op in module_op.regions[0].blocks[0].operations
         if op.operation.name == "func.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value == func_name),
        None,
    )
    if func_op is None:
        raise PassError(f"relax-bind-params: no function named '{func_name}'", module_op)
    block = func_op.regions[0].blocks[0]
    names = arg_names(func_op)
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise PassError(f"relax-bind-params: {func_name} has no parameter(s) {unknown}; parameters: {names}", func_op)
    keep = []
    first = list(block.operations)[0] if len(block.operations) else None
    for i, (name, arg) in enumerate(zip(names, list(block.arguments))):
        if name not in params:
            keep.append(i)
            continue
        data = np.ascontiguousarray(params[name])
        ttype = ir.RankedTensorType(arg.type)
        if tuple(data.shape) != tuple(ttype.shape) or not _element_type_ok(data, ttype):
            raise PassError(
                f"relax-bind-params: parameter '{name}' expects ({ttype}), got array of shape {data.shape} and dtype {data.dtype}",
                func_op,
            )
        ip = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(block)
        with ip:
            op = rx.Constant.create(
                results=[arg.type],
                attributes={"value": dense.elements(data, type=arg.type)},
                loc=ir.Location.name(name),
            )
        arg.replace_all_uses_with(op.result)
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    arg_attrs = list(ir.ArrayAttr(func_op.attributes["arg_attrs"])) if "arg_attrs" in func_op.attributes else None
    for i in reversed(range(len(names))):
        if i not in keep:
            block.erase_argument(i)
    func_op.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([ftype.inputs[i] for i in keep], list(ftype.results))
    )
    if arg_attrs is not None:
        func_op.attributes["arg_attrs"] = ir.ArrayAttr.get([arg_attrs[i] for i in keep])


@register_pass(
    "relax-bind-params",
    "bind parameters of a graph function to constants read from an .npz file",
    options={"func": "function name (default main)", "file": ".npz file of named arrays"},
)
def relax_bind_params(func: str = "main", file: str = ""):
    if not file:
        raise ValueError("relax-bind-params needs file=<params.npz>")

    def run(module_op: ir.Operation) -> None:
        with np.load(file, allow_pickle=False) as data:
            bind_params(module_op, func, {k: data[k] for k in data.files})

    return run
