"""`relax.build`: lower an IRModule for a target and JIT it into an `Executable`."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from dialects import relax as rx
from dialects import shape as sh
from lowering.graph_to_memref import PACKED_ARGS_ATTR, PACKED_ATTR
from lowering.pipelines import get_target
from lowering.registry import PassError, PipelineError, run_pipeline
from lowering.schedule import runtime
from relaxmlir import memref_abi
from relaxmlir.ir import IRModule, _format_diagnostics
from relaxmlir.registry import get_global_func
from relaxmlir.relax.analysis import value_shape
from relaxmlir.relax.struct_info import dtype_of
from relaxmlir.scope import scope


@dataclass
class TensorSpec:
    name: str
    shape: tuple
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}: R.Tensor({self.shape}, \"{self.dtype}\")"


@dataclass
class FunctionInfo:
    """What the VM needs to call one entry point: parameters, results, calling convention."""

    name: str
    params: list[TensorSpec]
    results: list[TensorSpec] = field(default_factory=list)
    destination_passing: bool = False  # primitive function entries write into their arguments

    @property
    def signature(self) -> str:
        params = ", ".join(str(p) for p in self.params)
        results = ", ".join(f"R.Tensor({r.shape}, \"{r.dtype}\")" for r in self.results)
        return f"{self.name}({params}) -> ({results})"


class BuildError(RuntimeError):
    """Lowering failed; the message names the pass and the MLIR diagnostic."""


def _spec(name: str, value_type: ir.Type, shape: tuple) -> TensorSpec:
    return TensorSpec(name, tuple(shape), dtype_of(ir.RankedTensorType(value_type).element_type))


def _function_infos(mod: IRModule) -> dict[str, FunctionInfo]:
    infos = {}
    relax_funcs = [f for f in mod.functions.values() if f.is_relax_function]
    for f in relax_funcs:
        params = [TensorSpec(name, s.shape, s.dtype) for name, s in f.params]
        terminator = list(f.op.regions[0].blocks[0].operations)[-1]
        results = [
            _spec(f"out{i}", v.type, value_shape(v)) for i, v in enumerate(terminator.operands)
        ]
        infos[f.name] = FunctionInfo(f.name, params, results)
    if not relax_funcs:  # a module of primitive functions: each public one is an entry point
        for f in list(mod.functions.values()):
            visibility = f.op.attributes["sym_visibility"] if "sym_visibility" in f.op.attributes else None
            if visibility is None or ir.StringAttr(visibility).value == "public":
                info = _wrap_prim_func(mod, f)
                infos[info.name] = info
    return infos


def _wrap_prim_func(mod: IRModule, f) -> FunctionInfo:
    """Entry point for a public primitive function: a relax function that `call_tir`s it.

    The VM then passes the caller's output arrays as the out-parameters (destination passing).
    """
    from mlir.dialects import func as func_d

    name = f.name
    ftype = f.function_type
    n_out = len(ftype.results)
    n_in = len(ftype.inputs) - n_out
    specs = [TensorSpec(n, s.shape, s.dtype) for n, s in f.params]
    f.op.attributes["sym_name"] = ir.StringAttr.get(f"__tir_{name}")
    f.op.attributes["sym_visibility"] = ir.StringAttr.get("private")
    with ir.InsertionPoint(mod.body):
        wrapper = func_d.FuncOp(name, ir.FunctionType.get(list(ftype.inputs[:n_in]), list(ftype.results)))
    wrapper.attributes[rx.FUNCTION_ATTR] = ir.UnitAttr.get()
    if "arg_attrs" in f.op.attributes:
        wrapper.attributes["arg_attrs"] = ir.ArrayAttr.get(list(ir.ArrayAttr(f.op.attributes["arg_attrs"]))[:n_in])
    entry = wrapper.add_entry_block()
    with ir.InsertionPoint(entry):
        attrs = {"callee": ir.FlatSymbolRefAttr.get(f"__tir_{name}")}
        out_shapes = [s.shape for s in specs[n_in:]]
        if not all(sh.is_static(s) for s in out_shapes):
            attrs[rx.SHAPE_ATTR] = ir.ArrayAttr.get([sh.to_attr(s) for s in out_shapes])
        call = rx.create(rx.CallTIR.name, list(entry.arguments), list(ftype.results), attrs)
        func_d.ReturnOp(list(call.results))
    return FunctionInfo(name, specs[:n_in], specs[n_in:], destination_passing=True)


def _packed_names(mod: IRModule) -> set[str]:
    names = set()

    def visit(op):
        op = op.operation if hasattr(op, "operation") else op
        if op.name in (rx.CallDPSPacked.name, rx.CallPacked.name):
            names.add(ir.StringAttr(op.attributes["callee"]).value)
        return ir.WalkResult.ADVANCE

    mod.module.operation.walk(visit)
    return names


def _high_level_ops(mod: IRModule) -> set[str]:
    core = {rx.CallTIR.name, rx.CallDPSPacked.name, rx.CallPacked.name, rx.AllocTensor.name, rx.Constant.name}
    found = set()

    def visit(op):
        op = op.operation if hasattr(op, "operation") else op
        if op.name.startswith("relax.") and op.name not in core:
            found.add(op.name)
        return ir.WalkResult.ADVANCE

    mod.module.operation.walk(visit)
    return found


class _Callback:
    """A ctypes trampoline from compiled code into a registered Python function."""

    def __init__(self, symbol: str, packed_name: str, arg_types: list[ir.Type]):
        self.symbol, self.packed_name = symbol, packed_name
        self.ranks = [ir.MemRefType(t).rank for t in arg_types]
        self.dtypes = [np.dtype(dtype_of(ir.MemRefType(t).element_type)) for t in arg_types]
        self.error: Optional[BaseException] = None
        self.cfunc = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(arg_types)))(self)

    def __call__(self, *addresses) -> None:
        from relaxmlir.nd import NDArray

        try:
            arrays = [NDArray(memref_abi.view(a, r, d)) for a, r, d in zip(addresses, self.ranks, self.dtypes)]
            get_global_func(self.packed_name)(*arrays)
        except BaseException as exc:  # raised by the VM once the native call returns
            if self.error is None:
                self.error = exc


class Executable:
    """The result of `relax.build`: JIT-compiled entry points and the metadata to call them."""

    def __init__(self, engine, infos, callbacks, lowered_text: str, target: str):
        self.engine = engine
        self.infos: dict[str, FunctionInfo] = infos
        self.callbacks: list[_Callback] = callbacks
        self.lowered_text = lowered_text
        self.target = target

    def __contains__(self, name: str) -> bool:
        return name in self.infos

    def function_names(self) -> list[str]:
        return list(self.infos)

    def as_text(self) -> str:
        """The lowered LLVM-dialect module (for debugging)."""
        return self.lowered_text

    def __getitem__(self, name: str):
        """Call a primitive-function entry directly, destination-passing: `ex["main"](a, b, c)`."""
        from relaxmlir.vm import VirtualMachine

        return VirtualMachine(self)[name]


def _as_module(mod: Any) -> IRModule:
    if isinstance(mod, IRModule):
        return mod
    if hasattr(mod, "module") and isinstance(mod.module, ir.Module):  # te PrimFunc
        return IRModule(mod.module)
    raise TypeError(f"build expects an IRModule or a PrimFunc, got {type(mod).__name__}")


def build(mod: Union[IRModule, Any], target: str = "llvm", exec_mode: str = "compiled") -> Executable:
    """Compile `mod` for `target` ("llvm" = the host CPU) and return an Executable.

    Modules that still hold high-level relax ops go through `relax.get_pipeline("zero")` first.
    Raises ValueError for unregistered packed functions and BuildError when lowering fails.
    """
    tgt = get_target(target)
    mod = _as_module(mod)
    with scope():
        if _high_level_ops(mod):
            from relaxmlir.relax.pipeline import get_pipeline

            mod = get_pipeline("zero")(mod)
            remaining = _high_level_ops(mod)
            if remaining:
                raise NotImplementedError(f"no legalization for relax op(s) {sorted(remaining)} (target {target})")
        mod = mod.clone()
        mod.verify()
        missing = sorted(n for n in _packed_names(mod) if get_global_func(n, allow_missing=True) is None)
        if missing:
            raise ValueError(f"packed function(s) {missing} are not registered (use relaxmlir.register_func)")
        infos = _function_infos(mod)
        if not infos:
            raise ValueError("module has no entry point: no relax function and no public primitive function")
        try:
            run_pipeline(
                mod.module,
                "builtin.module(" + ",".join(tgt.pipeline) + ")",
                # RELAXMLIR_PRINT_IR_AFTER_ALL=1 prints the module after every stage (to stderr)
                print_ir_after_all=os.environ.get("RELAXMLIR_PRINT_IR_AFTER_ALL", "") not in ("", "0"),
            )
        except PassError as exc:
            raise BuildError(f"{exc.location}: error: {exc}") from None
        except PipelineError as exc:
            raise BuildError(str(exc)) from None
        callbacks = _collect_callbacks(mod)
        try:
            engine = ExecutionEngine(mod.module, opt_level=tgt.opt_level, shared_libs=tgt.shared_libs)
        except ir.MLIRError as exc:
            raise BuildError(_format_diagnostics(exc)) from None
        for cb in callbacks:
            engine.register_runtime(cb.symbol, cb.cfunc)
        executable = Executable(engine, infos, callbacks, "", target)
        # Parallel kernels: an engine must outlive in-flight worker threads by a moment, and
        # kernel workspaces stay in the heap instead of page-faulting at every call.
        runtime.release_engine_later(executable, engine)
        runtime.configure_malloc()
        return executable


def _collect_callbacks(mod: IRModule) -> list[_Callback]:
    """One trampoline per external declaration of a packed function in the lowered module."""
    callbacks = []
    for op in mod.body.operations:
        op = op.operation
        if PACKED_ATTR in op.attributes:
            symbol = ir.StringAttr(op.attributes["sym_name"]).value
            name = ir.StringAttr(op.attributes[PACKED_ATTR]).value
            types = [ir.TypeAttr(t).value for t in ir.ArrayAttr(op.attributes[PACKED_ARGS_ATTR])]
            callbacks.append(_Callback(symbol, name, types))
    return callbacks


compile = build
