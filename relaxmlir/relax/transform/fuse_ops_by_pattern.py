"""`FuseOpsByPattern` and `RunCodegen`: offload parts of a relax graph to library kernels.

FuseOpsByPattern walks each relax function from its last op to its first and, at each op not yet
taken, tries the patterns in the order given (highest priority first). A match whose check
passes, whose ops all sit in one block and whose intermediate values are used only inside the
match becomes a composite function (`lowering/composite.py`) called from the graph. Walking
backwards lets the longest chain (matmul -> add -> relu) claim its ops before a shorter pattern
rooted inside it could.

RunCodegen hands the composite functions of each codegen to `relax.ext.<codegen>` (the global
function table), which returns a native kernel per function; each call becomes
`relax.call_dps_packed("<function name>", args)` bound to that kernel, so compiled code calls
the library without Python. The kernel's arguments are the composite's leaves in pattern order
(depth first, operands left to right; constants bound into the function are passed too), then
the constant inputs the codegen adds (a kernel given as `(kernel, [arrays])`: attributes the
kernel cannot see in its operands, such as a convolution's strides), then the output.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from mlir import ir
from mlir.dialects import func

from dialects import relax as rx
from lowering import dense
from lowering.composite import (
    CODEGEN_ATTR,
    COMPOSITE_ATTR,
    calls_of,
    composite_functions,
    composite_leaves,
    leaves,
)
from lowering.dataflow import graph_functions
from lowering.registry import PassError, register_pass
from relaxmlir.relax.backend.registry import (
    FusionPattern,
    PatternCheckContext,
    PatternEntry,
    as_fusion_pattern,
    get_patterns_with_prefix,
)
from relaxmlir.relax.dpl import arg_name
from relaxmlir.runtime.registry import get_global_func, register_func
from relaxmlir.transform import Pass


def _tvm_name(mlir_name: str) -> str:
    """`relax.nn_relu` -> `relax_nn_relu` (TVM's spelling in fused function names)."""
    head, _, rest = mlir_name.partition(".")
    return f"{head}_{rest}"


def _all_ops(func_op: ir.Operation) -> list[ir.Operation]:
    ops: list[ir.Operation] = []

    def visit(op):
        op = op.operation
        if op.name.startswith("relax."):
            ops.append(op)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    return ops


def _is_constant(value: ir.Value) -> bool:
    owner = value.owner
    return not isinstance(owner, ir.Block) and owner.operation.name == rx.Constant.name


def _escapes(ops: list[ir.Operation], root: ir.Operation) -> bool:
    """An intermediate value of the match is used outside it."""
    for op in ops:
        if op == root:
            continue
        for result in op.results:
            for use in result.uses:
                if not any(use.owner == o for o in ops):
                    return True
    return False


class _Group:
    def __init__(
        self, pattern: FusionPattern, root: ir.Operation, ops: list[ir.Operation], annotated: dict
    ):
        self.pattern, self.root, self.ops, self.annotated = pattern, root, ops, annotated


def _match_function(func_op: ir.Operation, patterns: list[FusionPattern]) -> list[_Group]:
    ops = _all_ops(func_op)
    taken: list[ir.Operation] = []
    groups: list[_Group] = []
    for root in reversed(ops):
        if len(root.results) != 1 or any(root == t for t in taken):
            continue
        for fp in patterns:
            m = fp.pattern.match(root.results[0])
            if m is None:
                continue
            matched: list[ir.Operation] = []
            for op in m.ops:
                if not any(op == o for o in matched):
                    matched.append(op)
            block = root.block
            if any(op.block != block for op in matched) or any(
                any(op == t for t in taken) for op in matched
            ):
                continue
            if _escapes(matched, root):
                continue
            annotated = {
                k: m.get(p) for k, p in fp.annotation_patterns.items() if m.get(p) is not None
            }
            if fp.check is not None and not fp.check(
                PatternCheckContext(root.results[0], annotated, matched, m)
            ):
                continue
            taken.extend(matched)
            groups.append(_Group(fp, root, matched, annotated))
            break
    return groups


def _program_order(ops: list[ir.Operation]) -> list[ir.Operation]:
    """`ops` (all in one block, checked when matching) in the block's order."""
    return [op.operation for op in ops[0].block.operations if any(op.operation == o for o in ops)]


class _Outliner:
    def __init__(self, module_op: ir.Operation, bind_constants: bool, annotate_codegen: bool):
        self.module_op = module_op
        self.body = module_op.regions[0].blocks[0]
        self.bind_constants = bind_constants
        self.annotate_codegen = annotate_codegen
        self.names = {
            ir.StringAttr(op.operation.attributes["sym_name"]).value
            for op in self.body.operations
            if "sym_name" in op.operation.attributes
        }

    def _unique(self, name: str) -> str:
        if name not in self.names:
            self.names.add(name)
            return name
        i = 1
        while f"{name}{i}" in self.names:
            i += 1
        self.names.add(f"{name}{i}")
        return f"{name}{i}"

    def outline(self, group: _Group) -> None:
        ops = _program_order(group.ops)
        root = group.root
        inputs = leaves(root, ops, dedupe=True)
        params = [v for v in inputs if not (self.bind_constants and _is_constant(v))]
        consts = [v for v in inputs if self.bind_constants and _is_constant(v)]
        codegen = group.pattern.codegen
        stem = "fused_" + "_".join(_tvm_name(op.name) for op in ops)
        name = self._unique(f"{stem}_{codegen}" if self.annotate_codegen else stem)

        names_by_value = [(v, k) for k, v in group.annotated.items()]
        arg_names = []
        for i, v in enumerate(params):
            label = (
                next((k for av, k in names_by_value if av == v), None) or arg_name(v) or f"arg{i}"
            )
            arg_names.append(label)
        result_type = root.results[0].type
        with ir.InsertionPoint(self.body), root.location:
            fn = func.FuncOp(
                name,
                ir.FunctionType.get([v.type for v in params], [result_type]),
                visibility="private",
            )
            fn.attributes[COMPOSITE_ATTR] = ir.StringAttr.get(group.pattern.name)
            if self.annotate_codegen:
                fn.attributes[CODEGEN_ATTR] = ir.StringAttr.get(codegen)
            fn.arg_attrs = ir.ArrayAttr.get(
                [ir.DictAttr.get({"relax.name": ir.StringAttr.get(n)}) for n in arg_names]
            )
            entry = fn.add_entry_block(arg_locs=[ir.Location.name(n) for n in arg_names])
        mapping = {v: a for v, a in zip(params, entry.arguments)}

        # The call, where the root was.
        with ir.InsertionPoint(root), root.location:
            call = func.CallOp([result_type], ir.FlatSymbolRefAttr.get(name), params)
        if rx.SHAPE_ATTR in root.attributes:
            call.operation.attributes[rx.SHAPE_ATTR] = root.attributes[rx.SHAPE_ATTR]
        root.results[0].replace_all_uses_with(call.results[0])

        ip = ir.InsertionPoint(entry)
        for c in consts:
            mapping[c] = c.owner.operation.clone(ip=ip).results[0]
        for op in ops:
            op.detach_from_parent()
            ip.insert(op)
            for i, operand in enumerate(op.operands):
                if operand in mapping:
                    op.operands[i] = mapping[operand]
        with ip, root.location:
            func.ReturnOp([root.results[0]])


def fuse_ops_by_pattern(
    module_op: ir.Operation,
    patterns: list[FusionPattern],
    bind_constants: bool,
    annotate_codegen: bool,
) -> None:
    outliner = _Outliner(module_op, bind_constants, annotate_codegen)
    for func_op in graph_functions(module_op):
        for group in _match_function(func_op, patterns):
            outliner.outline(group)


def FuseOpsByPattern(
    patterns: Sequence[PatternEntry],
    bind_constants: bool = True,
    annotate_codegen: bool = False,
) -> Pass:
    """Cut each match of `patterns` out into a composite function called from the graph.

    Parameters
    ----------
    patterns : list of FusionPattern or (name, pattern[, annotations[, check]])
        Highest priority first (as `relax.backend.get_patterns_with_prefix` returns them).
    bind_constants : bool
        Constants the match reads go inside the composite function rather than being passed.
    annotate_codegen : bool
        Tag each composite with `relax.codegen = "<prefix of the pattern name>"`, so that
        `RunCodegen` offloads it; untagged composites are compiled by the project's own kernels.
    """
    fps = [as_fusion_pattern(p) for p in patterns]
    return Pass(
        "FuseOpsByPattern",
        lambda mod: fuse_ops_by_pattern(
            mod.module.operation, fps, bind_constants, annotate_codegen
        ),
    )


# -- RunCodegen --------------------------------------------------------------------------------


def _kernel_args(call: ir.Operation, callee: ir.Operation) -> list[ir.Value]:
    """The composite's leaves as values of the caller (bound constants are cloned before the
    call)."""
    args = []
    ip = ir.InsertionPoint(call)
    cloned: dict = {}
    for leaf in composite_leaves(callee):
        if isinstance(leaf.owner, ir.Block):
            args.append(call.operands[ir.BlockArgument(leaf).arg_number])
        else:
            if leaf not in cloned:
                cloned[leaf] = leaf.owner.operation.clone(ip=ip).results[0]
            args.append(cloned[leaf])
    return args


def _constants(call: ir.Operation, arrays: list) -> list[ir.Value]:
    """`relax.constant`s of `arrays` before `call` (a codegen's extra kernel inputs)."""
    out = []
    with ir.InsertionPoint(call), call.location:
        for array in arrays:
            attr = dense.elements(array)
            out.append(rx.Constant.create([], [attr.type], {"value": attr}).result)
    return out


def run_codegen(module_op: ir.Operation) -> None:
    composites = {
        name: op
        for name, op in composite_functions(module_op).items()
        if CODEGEN_ATTR in op.attributes
    }
    if not composites:
        return
    by_codegen: dict[str, list] = {}
    for name, op in composites.items():
        by_codegen.setdefault(ir.StringAttr(op.attributes[CODEGEN_ATTR]).value, []).append(
            (name, op)
        )
    kernels: dict = {}
    for codegen, funcs in by_codegen.items():
        ext = get_global_func(f"relax.ext.{codegen}", allow_missing=True)
        if ext is None:
            raise ValueError(
                f"RunCodegen: no codegen '{codegen}' is registered (relax.ext.{codegen}) for "
                f"{', '.join(n for n, _ in funcs)}; is the backend's library installed?"
            )
        out = ext(
            [(name, ir.StringAttr(op.attributes[COMPOSITE_ATTR]).value, op) for name, op in funcs]
        )
        for name, _ in funcs:
            if name not in out:
                raise ValueError(f"RunCodegen: codegen '{codegen}' returned no kernel for '{name}'")
            kernels[name] = out[name]
    extra: dict[str, list] = {}
    for name, kernel in kernels.items():
        kernel, extra[name] = kernel if isinstance(kernel, tuple) else (kernel, [])
        register_func(name, kernel, override=True)
    for call in calls_of(module_op, set(composites)):
        name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        args = _kernel_args(call, composites[name]) + _constants(call, extra[name])
        attrs = {"callee": ir.StringAttr.get(name)}
        if rx.SHAPE_ATTR in call.attributes:
            attrs[rx.SHAPE_ATTR] = call.attributes[rx.SHAPE_ATTR]
        with ir.InsertionPoint(call), call.location:
            packed = rx.create(rx.CallDPSPacked.name, args, [r.type for r in call.results], attrs)
        for old, new in zip(call.results, packed.results):
            old.replace_all_uses_with(new)
        call.erase()
    for op in composites.values():
        op.erase()


def RunCodegen(target_options: dict | None = None, entry_functions: list | None = None) -> Pass:
    """Offload every composite function tagged with a codegen to that codegen's native kernels
    (`relax.ext.<codegen>`), replacing its calls by `call_dps_packed` of the kernel."""
    del target_options, entry_functions  # accepted for TVM compatibility; no backend uses them
    return Pass("RunCodegen", lambda mod: run_codegen(mod.module.operation))


# -- the driver's names (relaxmlir-opt, lit tests) ---------------------------------------------


@register_pass(
    "relax-fuse-ops-by-pattern",
    "cut the matches of registered patterns out into composite functions (FuseOpsByPattern)",
    {
        "patterns": 'name prefixes of registered patterns: blas, or quoted "blas,dnnl" (required)',
        "annotate-codegen": "1: tag composites with their codegen (default 0)",
        "bind-constants": "0: pass constants as arguments (default 1)",
    },
)
def relax_fuse_ops_by_pattern(**options: str):
    prefixes = [p for p in options.get("patterns", "").strip("\"'").split(",") if p]
    if not prefixes:
        raise PassError("relax-fuse-ops-by-pattern: give patterns=<prefix>[,<prefix>...]")
    fps = [p for prefix in prefixes for p in get_patterns_with_prefix(prefix)]
    if not fps:
        raise PassError(f"relax-fuse-ops-by-pattern: no registered pattern starts with {prefixes}")
    flags = {}
    for key, default in (("annotate-codegen", "0"), ("bind-constants", "1")):
        value = options.get(key, default)
        if value not in ("0", "1", "true", "false"):
            raise PassError(f"relax-fuse-ops-by-pattern: {key} expects 0 or 1, got ({value})")
        flags[key] = value in ("1", "true")
    return lambda module_op: fuse_ops_by_pattern(
        module_op, fps, flags["bind-constants"], flags["annotate-codegen"]
    )


@register_pass(
    "relax-run-codegen",
    "offload codegen-tagged composite functions to library kernels (RunCodegen)",
)
def relax_run_codegen():
    return run_codegen
