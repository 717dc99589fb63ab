"""`LegalizeOps` (`relax-legalize-ops`): high-level relax ops -> `call_tir` of topi PrimFuncs.

For each high-level op of a graph function, the rule of `legalize_ops.LEGALIZE_RULES` gets a
`Call` whose args are vars with the operands' struct info (symbolic names from `relax.shape`) and
whose attrs are python values. Its `bb.call_te(...)` builds the PrimFunc (identical bodies are
shared) and the op is replaced by a `relax.call_tir` with the same result types and `relax.shape`.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from mlir import ir

from dialects import relax as rx
from dialects import shape as sh
from lowering import dense
from lowering.dataflow import graph_functions
from lowering.dedupe import body_key
from lowering.registry import PassError, register_pass
from lowering.verify import check_op
from relaxmlir import topi
from relaxmlir.relax.analysis import as_call, value_shape, value_sinfo
from relaxmlir.relax.block_builder import BlockBuilder, is_te_tensor, to_attribute
from relaxmlir.relax.expr import Call, Constant, Expr, GlobalVar, Tuple, Var, call_tir
from relaxmlir.relax.op import strategy
from relaxmlir.relax.struct_info import (
    DTYPE_ATTR,
    MARKED_DTYPES,
    TensorStructInfo,
    dtype_of,
    flatten,
)
from relaxmlir.relax.transform.legalize_ops import LEGALIZE_RULES, LegalizeRule
from relaxmlir.target import Target
from relaxmlir.transform import Pass

# Ops that torch computes in float32 for float16/bfloat16 tensors (CPU accumulation type):
# products and convolutions, reductions and normalizations, and activations built of several
# roundings. With 16-bit float operands they are legalized as astype(float32) -> the op in
# float32 (so the f32 schedules apply) -> astype back: one rounding per op, as in torch.
# Ops not listed (data movement, add/multiply, max, relu, casts) are exact or correctly rounded
# in 16 bits and keep their own dtype.
COMPUTE_IN_F32 = {
    rx.mlir_op_name(name)
    for name in (
        "relax.matmul", "relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv2d_transpose",
        "relax.nn.softmax", "relax.nn.log_softmax", "relax.nn.layer_norm", "relax.nn.rms_norm",
        "relax.nn.group_norm", "relax.nn.instance_norm", "relax.nn.batch_norm",
        "relax.nn.avg_pool1d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d",
        "relax.sum", "relax.mean", "relax.variance", "relax.std", "relax.prod", "relax.cumsum",
        "relax.cumprod", "relax.nn.gelu", "relax.nn.gelu_tanh", "relax.nn.silu", "relax.nn.mish",
        "relax.nn.softplus", "relax.nn.selu", "relax.nn.celu", "relax.nn.elu",
        "relax.nn.log_sigmoid", "relax.sigmoid", "relax.tanh", "relax.erf", "relax.expm1",
        "relax.log1p", "relax.power", "relax.hypot", "relax.nn.scaled_dot_product_attention",
        "relax.nn.attention", "relax.einsum", "relax.nn.interpolate", "relax.image.resize2d",
    )
}  # fmt: skip
_HALF = ("f16", "bf16")
# ... except these on cuda, whose kernels read 16-bit operands and accumulate in float32.
HALF_OPERANDS_ON_CUDA = {rx.mlir_op_name(n) for n in ("relax.matmul", "relax.nn.conv2d")}


def _is_half(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType) and str(t.element_type) in _HALF


def _with_element(t: ir.Type, element: ir.Type) -> ir.Type:
    return ir.RankedTensorType.get(ir.RankedTensorType(t).shape, element)


class MissingRuleError(PassError):
    """A high-level op has no legalization rule (raised as NotImplementedError by the API)."""


MATMUL = rx.mlir_op_name("relax.matmul")
PERMUTE_DIMS = rx.mlir_op_name("relax.permute_dims")


def _transposed_operands(ops: list[ir.Operation]) -> dict[int, list]:
    """Matmuls (static rows) with an operand that is `permute_dims` swapping the last two axes,
    by the index of their first such permute_dims: {permute index: [(matmul index, {operand:
    permute index})]}. (A GEMV's [N, K] matrix then goes to the row template: dot products of
    contiguous rows.)"""
    index = {op: at for at, op in enumerate(ops)}
    out: dict[int, list] = {}
    for at, op in enumerate(ops):
        if op.name != MATMUL:
            continue
        folded = {}
        for i, v in enumerate(op.operands):
            owner = v.owner
            if isinstance(owner, ir.Block) or owner.name != PERMUTE_DIMS:
                continue
            rank = ir.RankedTensorType(v.type).rank
            axes = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(owner.attributes["axes"])]
            producer = index.get(owner.operation)
            if producer is not None and rank >= 2 and axes == [*range(rank - 2), rank - 1, rank - 2]:
                folded[i] = producer
        x = ir.RankedTensorType(op.operands[0].type)
        static = all(d != ir.ShapedType.get_dynamic_size() for d in x.shape)
        if folded and static:
            out.setdefault(min(folded.values()), []).append((at, folded))
    return out


def _replace(op: ir.Operation, values: list[ir.Value]) -> list[ir.Value]:
    """Every use of `op`'s results goes to `values`; `op` is erased."""
    for old, value in zip(op.results, values):
        old.replace_all_uses_with(value)
    op.erase()
    return values


def tvm_name(op_name: str) -> str:
    """`relax.nn_softmax` -> `relax.nn.softmax` (for messages)."""
    head, _, rest = op_name.partition(".")
    return f"{head}.{rest.replace('nn_', 'nn.', 1) if rest.startswith('nn_') else rest}"


class _Unkeyed(Exception):
    pass


def _freeze(value: Any) -> Any:
    """A hashable stand-in for a call_te argument: a tensor by its struct info, scalars by type
    and repr (0.0 and -0.0 differ), sequences and dicts by their items."""
    if is_te_tensor(value):
        sinfo = value.struct_info
        if not isinstance(sinfo, TensorStructInfo):
            raise _Unkeyed
        return ("tensor", tuple(str(d) for d in sinfo.shape), sinfo.dtype)
    if value is None or isinstance(value, (bool, int, float, str, np.generic)):
        return (type(value).__name__, repr(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _freeze(v)) for k, v in sorted(value.items())))
    raise _Unkeyed  # e.g. a te expression or an array: built each time


def _call_key(te_func, args, kwargs, hint) -> tuple | None:
    try:
        hash(te_func)
        return (te_func, _freeze(list(args)), _freeze(kwargs), hint)
    except (_Unkeyed, TypeError):
        return None


def _tensor_args(args, kwargs) -> list:
    """The relax arguments of a call_te, in the order `BlockBuilder.call_te` passes them."""
    out = []

    def visit(value):
        if is_te_tensor(value):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)

    for a in args:
        visit(a)
    for v in kwargs.values():
        visit(v)
    return out


class ModuleBuilder(BlockBuilder):
    """The builder rules see: `call_te` adds PrimFuncs to the module being legalized."""

    def __init__(self, module_op: ir.Operation):
        super().__init__()
        self.module_op = module_op
        self.block = module_op.regions[0].blocks[0]
        self.op_hint = "prim_func"
        # (te function, arguments' shapes and values) -> (GlobalVar, result struct info)
        self._calls: dict[tuple, tuple] = {}
        for op in self.block.operations:
            op = op.operation
            if op.name == "func.func" and rx.PRIM_FUNC_ATTR in op.attributes:
                self._func_text.setdefault(
                    body_key(op), ir.StringAttr(op.attributes["sym_name"]).value
                )

    def _symbols(self) -> set[str]:
        return {
            ir.StringAttr(op.operation.attributes["sym_name"]).value
            for op in self.block.operations
            if "sym_name" in op.operation.attributes
        }

    def add_func(self, func: Any, func_name: str) -> GlobalVar:
        src = func.func_op
        key = body_key(src)
        if key in self._func_text:
            return GlobalVar(self._func_text[key])
        taken = self._symbols()
        name = next(
            n
            for n in itertools.chain([func_name], (f"{func_name}{i}" for i in itertools.count(1)))
            if n not in taken
        )
        if src.context != self.module_op.context:
            src = ir.Module.parse(str(func.module), context=self.module_op.context).body.operations[
                0
            ]
        with ir.Location.unknown(self.module_op.context):
            new = src.clone(ip=ir.InsertionPoint(self.block))
        new.attributes["sym_name"] = ir.StringAttr.get(name, self.module_op.context)
        new.attributes["sym_visibility"] = ir.StringAttr.get("private", self.module_op.context)
        self._func_text[key] = name
        return GlobalVar(name)

    def call_te(self, te_func, *args, primfunc_name_hint: str | None = None, **kwargs) -> Call:
        """`BlockBuilder.call_te`, naming the PrimFunc after the op being legalized.

        A rule's TE function applied again to tensors of the same shapes and dtypes with equal
        other arguments gives the PrimFunc it gave before: BERT-base's 448 calls build ~40
        distinct ones, and building each again (TE, then the PrimFunc, then its key) took most
        of its legalization. Rules' functions are pure by contract (their result depends on
        their arguments and the target); one this does not recognize is built each time."""
        hint = primfunc_name_hint or self.op_hint
        key = _call_key(te_func, args, kwargs, hint)
        known = self._calls.get(key) if key is not None else None
        if known is not None:
            gv, out_sinfo = known
            return call_tir(gv, _tensor_args(args, kwargs), out_sinfo)
        call = super().call_te(te_func, *args, primfunc_name_hint=hint, **kwargs)
        if key is not None:
            self._calls[key] = (call.attrs["callee"], call.struct_info)
        return call


class Legalizer:
    """Applies the rules to every high-level op of a module's graph functions."""

    def __init__(
        self,
        module_op: ir.Operation,
        rules: dict[str, LegalizeRule],
        target: str,
        custom: dict[str, LegalizeRule] | None = None,
    ):
        self.rules, self.target = rules, target
        self.custom = custom or {}  # the user's rules: above strategies
        self.target_obj = Target.current() or Target(target or "llvm")
        self.target_kind = self.target_obj.kind
        self.bb = ModuleBuilder(module_op)
        self.module_op = module_op

    def run(self) -> None:
        for func_op in graph_functions(self.module_op):
            ops: list[ir.Operation] = []

            def collect(op, ops=ops):
                op = op.operation if hasattr(op, "operation") else op
                if op.name.startswith("relax.") and op.name not in rx.CORE_OPS:
                    ops.append(op)
                return ir.WalkResult.ADVANCE

            func_op.walk(collect)
            # cuda: a matmul reading a transposed argument is legalized first, while the
            # permute_dims still names its input (see _transposed_operands)
            early = _transposed_operands(ops) if self.target_kind == "cuda" else {}
            done: set[int] = set()
            for at, op in enumerate(ops):
                if at in done:
                    continue
                for mm, folded in early.get(at, []):
                    sources = {i: ops[p].operands[0] for i, p in folded.items()}
                    self._legalize_matmul_transposed(ops[mm], sources)
                    done.add(mm)
                self.legalize(op)

    def legalize(self, op: ir.Operation, widen_half: bool = True) -> list[ir.Value]:
        """Replace `op` by what its rule builds; returns the replacement values. `widen_half`:
        16-bit operands of a COMPUTE_IN_F32 op are cast to float32 first."""
        problem = check_op(op)  # a rule trusts the declared types: a wrong one would reach run time
        if problem:
            raise PassError(problem, op)
        if (
            widen_half
            and op.name in COMPUTE_IN_F32
            and op.name not in self.custom
            and any(_is_half(v.type) for v in list(op.operands) + list(op.results))
        ):
            if op.name in HALF_OPERANDS_ON_CUDA and self.target_kind == "cuda":
                return self._legalize_f32_accumulate(op)
            return self._legalize_in_f32(op)
        call = as_call(op)
        rule, hook = self.rules.get(op.name), None
        if op.name in self.custom:
            rule = self.custom[op.name]
        elif strategy.has_strategy(op.name, self.target_kind):
            impl = strategy.select_implementation(
                op.name, call, self.target_obj, str(op.location), self.module_op
            )
            rule = strategy.implementation_rule(impl, strategy.COMPUTE_ATTRS.get(op.name))
            hook = impl.schedule
        if rule is None:
            raise MissingRuleError(
                f"no legalization rule for '{tvm_name(op.name)}' ('{op.name}') at {op.location} "
                f"for target '{self.target}'; register one with register_legalize",
                op,
            )
        self.bb.op_hint = op.name.partition(".")[2].removeprefix("nn_")
        with ir.InsertionPoint(op), op.location:
            new = rule(self.bb, call)
            values = self.materialize(new, op)
        if len(values) != len(op.results):
            raise PassError(
                f"legalization of '{tvm_name(op.name)}' produced {len(values)} values, "
                f"expected ({len(op.results)})",
                op,
            )
        if hook is not None and isinstance(new, Call) and isinstance(new.attrs.get("callee"), GlobalVar):
            hook(rx.lookup_symbol(self.module_op, new.attrs["callee"].name_hint))
        return _replace(op, values)

    def _narrow(self, value: ir.Value, like: ir.Type) -> ir.Value:
        """`value` computed in float32 for a result of type `like`: cast back once when that is
        16-bit, else as it is."""
        if not _is_half(like):
            return value
        return self._astype(value, ir.RankedTensorType(like).element_type)

    def _astype(self, value: ir.Value, element: ir.Type) -> ir.Value:
        """A legalized `relax.astype` of `value` to `element` at the insertion point."""
        attrs = {"dtype": ir.StringAttr.get(dtype_of(element))}
        shape = value_shape(value)
        if not all(isinstance(d, int) for d in shape):
            attrs[rx.SHAPE_ATTR] = ir.ArrayAttr.get([sh.to_attr(shape)])
        cast = rx.create(rx.Astype.name, [value], [_with_element(value.type, element)], attrs)
        return self.legalize(cast)[0]

    def _legalize_f32_accumulate(self, op: ir.Operation) -> list[ir.Value]:
        """A matmul or convolution of 16-bit floats on cuda: the operands stay 16-bit (the
        kernel reads half the bytes; tensor cores take them as they are), the products
        accumulate in float32 (`out_dtype`), and a 16-bit result is cast back once."""
        (result,) = op.results
        with ir.InsertionPoint(op), op.location:
            f32 = ir.F32Type.get()
            attrs = {name: op.attributes[name] for name in op.attributes}
            attrs["out_dtype"] = ir.StringAttr.get("float32")
            wide = _with_element(result.type, f32)
            inner_op = rx.create(op.name, list(op.operands), [wide], attrs)
            (inner,) = self.legalize(inner_op, widen_half=False)
            value = self._narrow(inner, result.type)
        return _replace(op, [value])

    def _legalize_matmul_transposed(self, op: ir.Operation, folded: dict) -> list[ir.Value]:
        """A matmul reading a transposed operand's source directly (topi's transpose_a / _b):
        the contraction (or, for a GEMV, the row) kernel reads through any map, so the
        transposed copy is not computed (it goes with dead-code elimination when nothing else
        reads it). 16-bit operands keep their width and accumulate in float32, as
        `_legalize_f32_accumulate`."""
        (result,) = op.results
        call = as_call(op)
        args = list(call.args)
        for i, source in folded.items():
            args[i] = Var(f"arg{i}", value_sinfo(source))
            args[i].values = [source]
        half = _is_half(result.type) or any(_is_half(v.type) for v in op.operands)
        out_dtype = "float32" if half else call.attrs["out_dtype"]
        self.bb.op_hint = "matmul"
        with ir.InsertionPoint(op), op.location:
            new = self.bb.call_te(
                topi.matmul, args[0], args[1], transpose_a=0 in folded, transpose_b=1 in folded,
                out_dtype=out_dtype,
            )  # fmt: skip
            # 16-bit: the float32 result as the call built it, then one rounding
            (value,) = self.materialize(new, None) if half else self.materialize(new, op)
            value = self._narrow(value, result.type)
        return _replace(op, [value])

    def _legalize_in_f32(self, op: ir.Operation) -> list[ir.Value]:
        """`op` on 16-bit floats as the same op in float32 between two casts (COMPUTE_IN_F32)."""
        with ir.InsertionPoint(op), op.location:
            f32 = ir.F32Type.get()
            operands = [self._astype(v, f32) if _is_half(v.type) else v for v in op.operands]
            types = [_with_element(r.type, f32) if _is_half(r.type) else r.type for r in op.results]
            attrs = {name: op.attributes[name] for name in op.attributes}
            for name in ("out_dtype", "dtype"):
                if name in attrs and ir.StringAttr(attrs[name]).value in ("float16", "bfloat16"):
                    attrs[name] = ir.StringAttr.get("float32")
            inner = self.legalize(rx.create(op.name, operands, types, attrs))
            values = [self._narrow(v, r.type) for v, r in zip(inner, op.results)]
        return _replace(op, values)

    def materialize(self, expr: Expr, op: ir.Operation | None = None) -> list[ir.Value]:
        """The values of `expr` at the insertion point; `op` is the op being replaced (its
        result types and `relax.shape` are kept)."""
        if getattr(expr, "values", None) is not None:
            return list(expr.values)
        if isinstance(expr, Tuple):
            return [v for f in expr.fields for v in self.materialize(f)]
        if isinstance(expr, Constant):
            attr = dense.elements(expr.data, type=expr.struct_info.mlir_type())
            return list(
                rx.Constant.create([], [expr.struct_info.mlir_type()], {"value": attr}).results
            )
        if not isinstance(expr, Call):
            raise TypeError(f"a legalization rule returned {expr!r}, expected a relax expression")
        operands = [v for a in expr.args for v in self.materialize(a)]
        attrs = {}
        for key, value in expr.attrs.items():
            if key == "callee" and expr.op == rx.CallTIR.name:
                value = ir.FlatSymbolRefAttr.get(getattr(value, "name_hint", value))
            attrs[key] = to_attribute(value)
        if op is not None:
            types = [r.type for r in op.results]
            for kept in (rx.SHAPE_ATTR, DTYPE_ATTR):
                if kept in op.attributes:
                    attrs[kept] = op.attributes[kept]
        else:
            outs = flatten(expr.struct_info)
            types = [s.mlir_type() for s in outs]
            if not all(s.is_static for s in outs):
                attrs[rx.SHAPE_ATTR] = ir.ArrayAttr.get([sh.to_attr(s.shape) for s in outs])
            if any(s.dtype in MARKED_DTYPES for s in outs):
                attrs[DTYPE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(s.dtype) for s in outs])
        new = rx.create(expr.op, operands, types, attrs)
        if expr.op not in rx.CORE_OPS:  # a rule composed other high-level ops
            return self.legalize(new)
        return list(new.results)


def legalize_module(
    module_op: ir.Operation, rules: dict | None = None, target: str = "llvm"
) -> None:
    """Legalize every high-level op of `module_op` in place (raises MissingRuleError).
    An op with an operator strategy for the target (`relax.op.strategy`) gets the chosen
    implementation, unless `rules` (the user's) name it."""
    Legalizer(module_op, {**LEGALIZE_RULES, **(rules or {})}, target, rules).run()


@register_pass(
    "relax-legalize-ops",
    "lower high-level relax ops to call_tir of PrimFuncs built from topi",
    {"target": "target named in diagnostics (default: llvm)"},
)
def relax_legalize_ops(target: str = "llvm"):
    return lambda module_op: legalize_module(module_op, target=target)


def LegalizeOps(
    customize_legalize_map: dict[str, LegalizeRule] | None = None,
    enable_warning: bool = False,
    target: str = "llvm",
) -> Pass:
    """Legalize high-level ops into `call_tir`s of PrimFuncs written with topi.

    Parameters
    ----------
    customize_legalize_map : dict, optional
        Rules by TVM op name (`"relax.add"`) that override the registered ones.
    enable_warning : bool
        Accepted for TVM compatibility; a missing rule is always an error here.
    target : str
        Named in the error for an op without a rule.

    Returns
    -------
    Pass

    Examples
    --------
    >>> mod = relax.transform.LegalizeOps()(mod)
    """
    rules = {rx.mlir_op_name(k): v for k, v in (customize_legalize_map or {}).items()}

    def run(mod) -> None:
        try:
            legalize_module(mod.module.operation, rules, target)
        except MissingRuleError as exc:
            raise NotImplementedError(str(exc)) from None

    return Pass("LegalizeOps", run)
