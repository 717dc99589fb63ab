"""`BlockBuilder`: build relax functions imperatively, as in TVM's `relax.BlockBuilder`.

Ops are created directly as MLIR: a function is a `func.func` tagged `relax.function`, a dataflow
block an `scf.execute_region` tagged `relax.dataflow`, each emitted expression one relax op whose
SSA name is the var's name.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import func as func_d
from mlir.dialects import scf

from dialects import relax as rx
from dialects import shape as sh
from lowering import dense
from lowering.dedupe import body_key
from relaxmlir.ir import IRModule
from relaxmlir.relax.expr import Call, Constant, Expr, GlobalVar, Tuple, Var, call_tir
from relaxmlir.relax.op.common import canonical
from relaxmlir.relax.op.infer import check_call  # (also registers the result-type checks)
from relaxmlir.relax.struct_info import (
    DTYPE_ATTR,
    MARKED_DTYPES,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    flatten,
    normalize_dim,
)
from relaxmlir.scope import scope


def to_attribute(value: Any) -> ir.Attribute:
    """Python attribute values of relax ops -> MLIR attributes."""
    if isinstance(value, ir.Attribute):
        return value
    if isinstance(value, (bool, np.bool_)):
        return ir.BoolAttr.get(bool(value))
    if isinstance(value, (int, np.integer)):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))
    if isinstance(value, (float, np.floating)):
        return ir.FloatAttr.get(ir.F64Type.get(), float(value))
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    if isinstance(value, (list, tuple)):
        return ir.ArrayAttr.get([to_attribute(v) for v in value])
    if value is None:
        return ir.UnitAttr.get()
    raise TypeError(f"cannot convert {value!r} to an MLIR attribute")


class _Frame:
    """State of the function being built."""

    def __init__(self, name: str, op, block: ir.Block, params: list[Var] | None):
        self.name, self.op, self.block = name, op, block
        self.deferred = params is None
        self.arg_vars: list[Var] = []
        self.env: dict[int, list[ir.Value]] = {}
        self.expired: dict[int, str] = {}  # dataflow-local vars no longer visible
        self.dataflow: dict | None = None
        self.done = False
        self.constants: dict[int, tuple] = {}  # id -> (Constant, value)


def _te_dim(d) -> int | str:
    """A TE output extent as a relax dim, simplified: a slice from the end of `n + 1` has the
    extent `((n+1 - (n+1 + -1)) + 0) // 1` in TE's spelling, which is 1."""
    d = normalize_dim(d)
    return canonical(d) if isinstance(d, str) and not d.isidentifier() else d


class BlockBuilder:
    """Build an IRModule of relax functions.

    Examples
    --------
    >>> bb = relax.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     with bb.dataflow():
    ...         lv0 = bb.emit_te(te_matmul, x, w)
    ...         gv = bb.emit_output(bb.emit_te(te_relu, lv0))
    ...     bb.emit_func_output(gv)
    >>> mod = bb.get()
    """

    def __init__(self, mod: IRModule | None = None):
        self._mod = mod if mod is not None else IRModule()
        self._frame: _Frame | None = None
        self._counter = itertools.count()
        self._func_text: dict[str, str] = {}  # primitive function body text -> name (dedupe)

    # -- module -----------------------------------------------------------------------------
    def get(self) -> IRModule:
        """The module built so far."""
        if self._frame is not None:
            raise ValueError("BlockBuilder.get called inside a function; call emit_func_output first")
        return self._mod

    def add_func(self, func: Any, func_name: str) -> GlobalVar:
        """Add a primitive function (te PrimFunc) to the module; identical bodies are shared."""
        with scope():
            if not hasattr(func, "emit"):
                raise TypeError(f"add_func expects a PrimFunc, got {type(func).__name__}")
            key = body_key(func.func_op if hasattr(func, "func_op") else func)
            if key in self._func_text:
                return GlobalVar(self._func_text[key])
            name = self._unique_symbol(func_name)
            func.emit(self._mod.module, name)
            self._func_text[key] = name
            return GlobalVar(name)

    def _unique_symbol(self, hint: str) -> str:
        existing = set(self._mod.functions)
        if hint not in existing:
            return hint
        for i in itertools.count(1):
            if f"{hint}{i}" not in existing:
                return f"{hint}{i}"
        raise AssertionError

    # -- functions and blocks ---------------------------------------------------------------
    @contextlib.contextmanager
    def function(self, name: str, params: Sequence[Var] | None = None, attrs: dict | None = None):
        """Scope of a relax function; params may instead be given to `emit_func_output`."""
        if self._frame is not None:
            raise ValueError("nested BlockBuilder.function scopes are not supported")
        if name in self._mod:
            raise ValueError(f"function '{name}' already exists in the module")
        with scope():
            with ir.InsertionPoint(self._mod.body):
                op = func_d.FuncOp(name, ir.FunctionType.get([], []))
            op.attributes[rx.FUNCTION_ATTR] = ir.UnitAttr.get()
            for key, value in (attrs or {}).items():
                op.attributes[key] = to_attribute(value)
            block = op.add_entry_block()
            frame = _Frame(name, op, block, None if params is None else list(params))
            self._frame = frame
            for var in params or []:
                self._add_param(var)
        try:
            yield self
            if not frame.done:
                raise ValueError(f"function '{name}': emit_func_output must be called in a relax function")
        finally:
            self._frame = None

    def _add_param(self, var: Var) -> list[ir.Value]:
        frame = self._frame
        if not isinstance(var, Var) or not isinstance(var.struct_info, TensorStructInfo):
            raise TypeError(f"function parameters must be relax.Var with TensorStructInfo, got {var!r}")
        arg = frame.block.add_argument(var.struct_info.mlir_type(), ir.Location.name(var.name_hint))
        frame.arg_vars.append(var)
        frame.env[id(var)] = [arg]
        var.values = [arg]
        return [arg]

    @contextlib.contextmanager
    def dataflow(self):
        """Scope of a dataflow block: pure bindings; `emit_output` marks what escapes it."""
        frame = self._require_function("dataflow")
        if frame.dataflow is not None:
            raise ValueError("dataflow blocks cannot be nested")
        with scope():
            with ir.InsertionPoint(frame.block):
                holder = scf.ExecuteRegionOp([], no_inline=True)
            holder.regions[0].blocks.append()
            frame.dataflow = {"op": holder, "outputs": [], "locals": []}
        try:
            yield self
        finally:
            with scope():
                self._close_dataflow(frame)

    def _close_dataflow(self, frame: _Frame) -> None:
        df = frame.dataflow
        frame.dataflow = None
        holder = df["op"]
        outputs: list[Var] = df["outputs"]
        values = [v for var in outputs for v in frame.env[id(var)]]
        loc = ir.Location.name(self._out_name()) if outputs else ir.Location.unknown()
        with ir.InsertionPoint(holder):
            region_op = scf.ExecuteRegionOp([v.type for v in values], no_inline=True, loc=loc)
        region_op.operation.attributes[rx.DATAFLOW_ATTR] = ir.UnitAttr.get()
        body = holder.regions[0].blocks[0]
        body.append_to(region_op.regions[0])
        with ir.InsertionPoint(body):
            scf.YieldOp(values)
        holder.operation.erase()
        results = list(region_op.results)
        for var in outputs:
            n = len(frame.env[id(var)])
            frame.env[id(var)], results = results[:n], results[n:]
            var.values = frame.env[id(var)]
        output_ids = {id(v) for v in outputs}
        for var in df["locals"]:
            if id(var) not in output_ids:
                frame.env.pop(id(var), None)
                frame.expired[id(var)] = var.name_hint

    def _require_function(self, what: str) -> _Frame:
        if self._frame is None:
            raise ValueError(f"{what} must be called in a relax function (inside `with bb.function(...)`)")
        return self._frame

    def _insertion_block(self) -> ir.Block:
        frame = self._frame
        if frame.dataflow is not None:
            return frame.dataflow["op"].regions[0].blocks[0]
        return frame.block

    # -- emission ---------------------------------------------------------------------------
    def emit(self, expr: Expr, name_hint: str = "") -> Var:
        """Bind `expr` to a new var in the current block and return it."""
        frame = self._require_function("emit")
        if isinstance(expr, Var):
            return expr
        name = self._name(name_hint)
        with scope():
            values, sinfo = self._materialize(expr, name)
        var = Var(name, sinfo)
        frame.env[id(var)] = values
        var.values = values
        if frame.dataflow is not None:
            frame.dataflow["locals"].append(var)
        return var

    def _name(self, hint: str) -> str:
        if hint:
            return hint
        prefix = "lv" if self._frame.dataflow is not None else "gv"
        return f"{prefix}{next(self._counter)}"

    def emit_output(self, output, name_hint: str = "") -> Var:
        """Mark a var (or emit an expression) as an output of the current dataflow block."""
        frame = self._require_function("emit_output")
        if frame.dataflow is None:
            raise ValueError("emit_output must be called inside a dataflow block")
        if isinstance(output, (list, tuple)):
            output = Tuple([self.emit(o) if not isinstance(o, Var) else o for o in output])
        var = output if isinstance(output, Var) else self.emit(output, name_hint or self._out_name())
        frame.env[id(var)] = self._values_of(var)  # tuple elements are bound here too
        frame.dataflow["outputs"].append(var)
        return var

    def _out_name(self) -> str:
        return f"gv{next(self._counter)}"

    def emit_func_output(self, output, params: Sequence[Var] | None = None) -> GlobalVar:
        """Return `output` (a var, expression, or a tuple of them) from the current function."""
        frame = self._require_function("emit_func_output")
        if frame.done:
            raise ValueError(f"emit_func_output called twice in function '{frame.name}'")
        if frame.dataflow is not None:
            raise ValueError("emit_func_output must be called outside of a dataflow block")
        with scope():
            items = list(output) if isinstance(output, (list, tuple)) else [output]
            values, dtypes = [], []
            for item in items:
                var = item if isinstance(item, Var) else self.emit(item)
                values += self._values_of(var)
                dtypes += [getattr(s, "dtype", None) for s in flatten(var.struct_info)]
            self._finalize_params(frame, params)
            with ir.InsertionPoint(frame.block):
                func_d.ReturnOp(values)
            self._set_signature(frame, [v.type for v in values])
            if any(d in MARKED_DTYPES for d in dtypes):
                frame.op.attributes["res_attrs"] = ir.ArrayAttr.get(
                    [_dtype_entry(d) for d in dtypes] if len(dtypes) == len(values) else []
                )
        frame.done = True
        return GlobalVar(frame.name)

    def _finalize_params(self, frame: _Frame, params: Sequence[Var] | None) -> None:
        if params is None:
            if frame.deferred and frame.arg_vars:
                raise ValueError(
                    f"function '{frame.name}' uses free vars {[v.name_hint for v in frame.arg_vars]}: "
                    f"pass params to bb.function(...) or bb.emit_func_output(..., params=[...])"
                )
            return
        params = list(params)
        if not frame.deferred:
            if [id(p) for p in params] != [id(v) for v in frame.arg_vars]:
                raise ValueError(f"function '{frame.name}': params given twice and they differ")
            return
        missing = [v.name_hint for v in frame.arg_vars if id(v) not in {id(p) for p in params}]
        if missing:
            raise ValueError(f"function '{frame.name}' uses vars {missing} that are not in params")
        old_args = list(frame.block.arguments)
        old_by_var = {id(v): a for v, a in zip(frame.arg_vars, old_args)}
        frame.arg_vars = []
        for var in params:
            new = self._add_param(var)[0]
            if id(var) in old_by_var:
                old_by_var[id(var)].replace_all_uses_with(new)
        for i in reversed(range(len(old_args))):
            frame.block.erase_argument(i)

    def _set_signature(self, frame: _Frame, result_types: list[ir.Type]) -> None:
        arg_types = [a.type for a in frame.block.arguments]
        frame.op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(arg_types, result_types))
        arg_attrs = []
        for var in frame.arg_vars:
            entries = {"relax.name": ir.StringAttr.get(var.name_hint)}
            if var.struct_info.dtype in MARKED_DTYPES:
                entries[DTYPE_ATTR] = ir.StringAttr.get(var.struct_info.dtype)
            if not var.struct_info.is_static:
                entries[rx.SHAPE_ATTR] = sh.to_attr(var.struct_info.shape)
            arg_attrs.append(ir.DictAttr.get(entries))
        frame.op.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)

    def _values_of(self, var: Var) -> list[ir.Value]:
        frame = self._frame
        if id(var) in frame.env:
            return frame.env[id(var)]
        if id(var) in frame.expired:
            raise ValueError(
                f"var '{var.name_hint}' is local to a dataflow block; use bb.emit_output to use it outside"
            )
        if var.values is not None and all(_defined_in(v, frame.op) for v in var.values):
            return var.values  # a tuple element of a bound var
        if frame.deferred and isinstance(var.struct_info, TensorStructInfo):
            with ir.InsertionPoint(frame.block):
                return self._add_param(var)
        raise ValueError(f"var '{var.name_hint}' is not defined in function '{frame.name}'")

    def _materialize(self, expr, name_hint: str = "") -> tuple[list[ir.Value], StructInfo]:
        frame = self._frame
        if isinstance(expr, Var):
            return self._values_of(expr), expr.struct_info
        if isinstance(expr, Constant):
            cached = frame.constants.get(id(expr))
            if cached is None or cached[0] is not expr:
                t = expr.struct_info.mlir_type()
                attrs = {"value": dense.elements(expr.data, type=t, borrowed=expr.borrowed)}
                dtype = expr.struct_info.dtype
                if dtype in MARKED_DTYPES:  # else a bool/uint8 constant reads back as int8
                    attrs[DTYPE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(dtype)])
                with ir.InsertionPoint(self._insertion_block()):
                    op = rx.Constant.create(
                        results=[t],
                        attributes=attrs,
                        loc=ir.Location.name(name_hint or "const"),
                    )
                # Keep the Constant alive with its value: a freed object's id can be reused.
                cached = frame.constants[id(expr)] = (expr, op.result)
            return [cached[1]], expr.struct_info
        if isinstance(expr, Tuple):
            values = []
            for f in expr.fields:
                values += self._materialize(f)[0]
            return values, expr.struct_info
        if isinstance(expr, Call):
            return self._emit_call(expr, name_hint), expr.struct_info
        raise TypeError(f"cannot emit {type(expr).__name__}: {expr!r}")

    def _emit_call(self, call: Call, name_hint: str) -> list[ir.Value]:
        frame = self._frame
        if call.struct_info is None:
            raise ValueError(f"'{call.op}' call has no struct info")
        check_call(call)  # a hand-made Call must carry what its op's rule infers
        if call.op in rx.SIDE_EFFECTING and frame.dataflow is not None:
            raise ValueError(f"'{call.op}' is side-effecting and not allowed inside a dataflow block")
        operands = []
        for arg in call.args:
            operands += self._materialize(arg)[0]
        attrs = {}
        for key, value in call.attrs.items():
            if key == "callee" and call.op == rx.CallTIR.name:
                value = self._callee_symbol(value)
            attrs[key] = to_attribute(value)
        outs = flatten(call.struct_info) if not isinstance(call.struct_info, TupleStructInfo) or call.struct_info.fields else []
        if any(not s.is_static for s in outs):
            attrs[rx.SHAPE_ATTR] = ir.ArrayAttr.get([sh.to_attr(s.shape) for s in outs])
        if any(s.dtype in MARKED_DTYPES for s in outs):
            attrs[DTYPE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(s.dtype) for s in outs])
        with ir.InsertionPoint(self._insertion_block()):
            op = rx.create(
                call.op,
                results=[s.mlir_type() for s in outs],
                operands=operands,
                attributes=attrs,
                loc=ir.Location.name(name_hint or self._name("")) if outs else ir.Location.unknown(),
            )
        return list(op.results)

    def _callee_symbol(self, callee) -> ir.Attribute:
        if isinstance(callee, GlobalVar):
            name = callee.name_hint
        elif isinstance(callee, str):
            name = callee
        elif hasattr(callee, "emit"):
            name = self.add_func(callee, getattr(callee, "name", "prim_func")).name_hint
        else:
            raise TypeError(f"call_tir callee must be a GlobalVar, a name or a PrimFunc, got {callee!r}")
        if name not in self._mod:
            raise ValueError(f"call_tir callee '{name}' is not a function of the module")
        return ir.FlatSymbolRefAttr.get(name)

    # -- TE integration ---------------------------------------------------------------------
    def call_te(self, te_func, *args, primfunc_name_hint: str | None = None, **kwargs) -> Call:
        """Apply `te_func` to placeholders for the relax args; return the `call_tir` to its PrimFunc."""
        from relaxmlir import te

        relax_args: list = []
        placeholders: list = []

        def convert(arg):
            if is_te_tensor(arg):
                sinfo = arg.struct_info
                if not isinstance(sinfo, TensorStructInfo):
                    raise TypeError(f"emit_te: argument {arg!r} is not a tensor")
                name = getattr(arg, "name_hint", f"arg{len(placeholders)}")
                ph = te.placeholder(sinfo.shape, name=name, dtype=sinfo.dtype)
                relax_args.append(arg)
                placeholders.append(ph)
                return ph
            if isinstance(arg, (list, tuple)):
                return type(arg)(convert(a) for a in arg)
            return arg

        te_args = [convert(a) for a in args]
        te_kwargs = {k: convert(v) for k, v in kwargs.items()}
        out = te_func(*te_args, **te_kwargs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        prim = te.create_prim_func(placeholders + outs)
        hint = primfunc_name_hint or getattr(te_func, "__name__", "te_func").strip("<>")
        gv = self.add_func(prim, hint)
        out_sinfo = [TensorStructInfo([_te_dim(d) for d in o.shape], o.dtype) for o in outs]
        return call_tir(gv, relax_args, out_sinfo)

    def emit_te(self, te_func, *args, name_hint: str = "", primfunc_name_hint: str | None = None, **kwargs) -> Var:
        """Create a PrimFunc from `te_func` on the relax args, add it, and emit its `call_tir`."""
        self._require_function("emit_te")
        call = self.call_te(te_func, *args, primfunc_name_hint=primfunc_name_hint, **kwargs)
        return self.emit(call, name_hint)


def is_te_tensor(arg: Any) -> bool:
    """Whether `call_te` passes `arg` as a tensor (a placeholder of the TE function)."""
    return isinstance(arg, (Var, Constant)) or (
        isinstance(arg, Call) and isinstance(arg.struct_info, TensorStructInfo)
    )


def _defined_in(value: ir.Value, func_op) -> bool:
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    while op is not None:
        if op == func_op.operation:
            return True
        op = op.parent
    return False


def _dtype_entry(dtype: str | None) -> ir.DictAttr:
    """A `res_attrs` entry: bool and uint8 results are marked (DTYPE_ATTR), others left empty."""
    marked = dtype in MARKED_DTYPES
    return ir.DictAttr.get({DTYPE_ATTR: ir.StringAttr.get(dtype)} if marked else {})
