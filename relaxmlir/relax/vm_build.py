"""`relax.build` (TVM's `relax/vm_build.py`): lower an IRModule for a target and JIT it into a runtime `Executable`.

The compiler's side of the runtime contract: it runs the target's row of `lowering/pipelines.py`,
reads the signatures and packed-function calls off the module, and hands the lowered module to
the JIT (`lowering/jit.py`). The `Executable` and the VM are the runtime's (`relaxmlir.runtime`).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Union

from mlir import ir
from mlir.dialects import func as func_d

from dialects import relax as rx
from dialects import shape as sh
from lowering.graph_to_memref import (
    EXTERNAL_LIBS_ATTR,
    PACKED_ARGS_ATTR,
    PACKED_ATTR,
    inplace_results,
)
from lowering import cache, dense
from lowering.export import ExportError
from lowering.jit import JitCode, JitError, needed_libraries
from lowering.pipelines import target_pipeline, target_stages
from lowering.registry import PassError, PipelineError, run_pipeline
from relaxmlir.ir import IRModule, _format_diagnostics
from relaxmlir.relax.analysis import value_shape
from relaxmlir.relax.op import strategy
from relaxmlir.relax.struct_info import dtype_of
from relaxmlir.runtime.device import TARGET_DEVICE
from relaxmlir.runtime.executable import Executable, FunctionInfo, PackedSpec, TensorSpec
from relaxmlir.runtime.registry import NativeFunc, get_global_func
from relaxmlir.scope import scope
from relaxmlir.target import Target, as_target

EXEC_MODES = ("compiled",)  # every relax function becomes one native entry point


class BuildError(RuntimeError):
    """Lowering failed; the message names the pass and the MLIR diagnostic."""


def _function_infos(mod: IRModule) -> dict[str, FunctionInfo]:
    infos = {}
    relax_funcs = [f for f in mod.functions.values() if f.is_relax_function]
    for f in relax_funcs:
        params = [TensorSpec(name, s.shape, s.dtype) for name, s in f.params]
        terminator = list(f.op.regions[0].blocks[0].operations)[-1]
        inplace = inplace_results(f.op)  # no out-parameter: the VM keeps the state's array
        results = [
            TensorSpec(f"out{i}", tuple(value_shape(v)), dtype)
            for i, (v, dtype) in enumerate(zip(terminator.operands, f.result_dtypes))
            if i not in inplace
        ]
        infos[f.name] = FunctionInfo(f.name, params, results)
        if rx.STATE_ATTR in f.op.attributes:
            state = ir.DictAttr(f.op.attributes[rx.STATE_ATTR])
            infos[f.name].state = [ir.StringAttr(a).value for a in ir.ArrayAttr(state["params"])]
            infos[f.name].state_init = ir.StringAttr(state["init"]).value
            if rx.STATE_INPLACE_KEY in state:
                names = ir.ArrayAttr(state[rx.STATE_INPLACE_KEY])
                infos[f.name].state_inplace = [ir.StringAttr(a).value for a in names]
        if rx.INPUT_UPDATES_ATTR in f.op.attributes:
            names = ir.ArrayAttr(f.op.attributes[rx.INPUT_UPDATES_ATTR])
            infos[f.name].input_updates = [ir.StringAttr(a).value for a in names]
    if not relax_funcs:  # a module of primitive functions: each public one is an entry point
        for f in list(mod.functions.values()):
            attrs = f.op.attributes
            visibility = attrs["sym_visibility"] if "sym_visibility" in attrs else None
            if visibility is None or ir.StringAttr(visibility).value == "public":
                info = _wrap_prim_func(mod, f)
                infos[info.name] = info
    return infos


def _packed_signatures(mod: IRModule, infos: dict[str, FunctionInfo]) -> None:
    """Static shapes that the layout stage changed in an entry point's signature: a weight
    computed by `f_transform_params` (LiftTransformParams) becomes its packed panels, which that
    function returns and `f` takes; the VM allocates and checks arrays by these specs."""
    for f in mod.functions.values():
        info = infos.get(f.name)
        if not f.is_relax_function or info is None:
            continue
        ftype = f.function_type
        inplace = inplace_results(f.op)
        kept = [t for i, t in enumerate(ftype.results) if i not in inplace]
        for specs, types in ((info.params, ftype.inputs), (info.results, kept)):
            for i, (spec, t) in enumerate(zip(specs, types)):
                if not sh.isa(t, ir.RankedTensorType) or not ir.RankedTensorType(t).has_static_shape:
                    continue
                t = ir.RankedTensorType(t)
                if tuple(t.shape) != tuple(spec.shape):
                    specs[i] = TensorSpec(spec.name, tuple(t.shape), spec.dtype)


def _wrap_prim_func(mod: IRModule, f) -> FunctionInfo:
    """Entry point for a public primitive function: a relax function that `call_tir`s it.

    The VM then passes the caller's output arrays as the out-parameters (destination passing).
    """
    name = f.name
    ftype = f.function_type
    n_out = len(ftype.results)
    n_in = len(ftype.inputs) - n_out
    specs = [TensorSpec(n, s.shape, s.dtype) for n, s in f.params]
    f.op.attributes["sym_name"] = ir.StringAttr.get(f"__tir_{name}")
    f.op.attributes["sym_visibility"] = ir.StringAttr.get("private")
    with ir.InsertionPoint(mod.body):
        entry_type = ir.FunctionType.get(list(ftype.inputs[:n_in]), list(ftype.results))
        wrapper = func_d.FuncOp(name, entry_type)
    wrapper.attributes[rx.FUNCTION_ATTR] = ir.UnitAttr.get()
    if "arg_attrs" in f.op.attributes:
        arg_attrs = list(ir.ArrayAttr(f.op.attributes["arg_attrs"]))[:n_in]
        wrapper.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
    entry = wrapper.add_entry_block()
    with ir.InsertionPoint(entry):
        attrs = {"callee": ir.FlatSymbolRefAttr.get(f"__tir_{name}")}
        out_shapes = [s.shape for s in specs[n_in:]]
        if not all(sh.is_static(s) for s in out_shapes):
            attrs[rx.SHAPE_ATTR] = ir.ArrayAttr.get([sh.to_attr(s) for s in out_shapes])
        call = rx.create(rx.CallTIR.name, list(entry.arguments), list(ftype.results), attrs)
        func_d.ReturnOp(list(call.results))
    return FunctionInfo(name, specs[:n_in], specs[n_in:], destination_passing=True)


def _walk_names(mod: IRModule, pick) -> set[str]:
    found: set[str] = set()

    def visit(op):
        op = op.operation if hasattr(op, "operation") else op
        name = pick(op)
        if name:
            found.add(name)
        return ir.WalkResult.ADVANCE

    mod.module.operation.walk(visit)
    return found


def _packed_names(mod: IRModule) -> set[str]:
    def pick(op):
        if op.name in (rx.CallDPSPacked.name, rx.CallPacked.name):
            return ir.StringAttr(op.attributes["callee"]).value
        return None

    return _walk_names(mod, pick)


def _packed_specs(mod: IRModule) -> list[PackedSpec]:
    """One spec per external declaration of a packed function in the lowered module."""
    specs = []
    for op in mod.body.operations:
        op = op.operation
        name = ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else ""
        # the C-interface twin that LLVM lowering adds carries the attributes too: one spec each
        if PACKED_ATTR in op.attributes and not name.startswith("_mlir_ciface_"):
            types = [ir.TypeAttr(t).value for t in ir.ArrayAttr(op.attributes[PACKED_ARGS_ATTR])]
            specs.append(
                PackedSpec(
                    ir.StringAttr(op.attributes["sym_name"]).value,
                    ir.StringAttr(op.attributes[PACKED_ATTR]).value,
                    [ir.MemRefType(t).rank for t in types],
                    [dtype_of(ir.MemRefType(t).element_type) for t in types],
                )
            )
            native = specs[-1].native_func()  # a C kernel: recorded, so a loaded library binds it
            specs[-1].native = native.to_dict() if native is not None else None
    return specs


def _check_packed_devices(mod: IRModule, tgt: Target) -> None:
    """Host code hands packed functions its buffers as they are: host memory on llvm, device
    memory on cuda. Each function must take that memory: on cuda only native kernels of a CUDA
    library (library dispatch: cublas) do; Python functions and CPU kernels take host memory."""
    want = TARGET_DEVICE.get(tgt.kind, "cpu")
    for name in sorted(_packed_names(mod)):
        fn = get_global_func(name)
        native = isinstance(fn, NativeFunc)
        device = fn.device if native else "cpu"
        if device != want:
            what = f"a {device} kernel ({fn.symbol})" if native else "a Python function"
            raise ValueError(
                f"target {tgt.kind}: packed function '{name}' is {what}, which cannot take the "
                f"{want} memory that {tgt.kind} host code passes"
                + (" (offload to cublas on cuda)" if want == "cuda" else "")
            )


def _external_libraries(mod: IRModule) -> list[str]:
    """Native libraries that backends (library dispatch) named on the module."""
    attrs = mod.module.operation.attributes
    if EXTERNAL_LIBS_ATTR not in attrs:
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[EXTERNAL_LIBS_ATTR])]


def _build_cuda(mod: IRModule, tgt: Target, infos: dict[str, FunctionInfo]) -> Executable:
    """The cuda row: lower, then link host code + PTX + the CUDA runtime into a library (no JIT:
    the library is what runs, here and on machines without MLIR)."""
    import shutil
    import tempfile
    import weakref

    from lowering.export import ExportError
    from lowering.gpu.codegen import link_library
    from relaxmlir.runtime.library import load_module

    try:
        run_pipeline(
            mod.module,
            "builtin.module(" + ",".join(target_pipeline(tgt)) + ")",
            print_ir_after_all=os.environ.get("RELAXMLIR_PRINT_IR_AFTER_ALL", "") not in ("", "0"),
        )
        folder = tempfile.mkdtemp(prefix="relaxmlir-cuda-")
        # packed calls (cublas kernels) are forwarded by the library's glue, bound at load time
        describing = Executable(_NoCode(), infos, _packed_specs(mod), tgt, ())
        path = link_library(mod.module, describing, folder)
    except PassError as exc:
        raise BuildError(f"{exc.location}: error: {exc}") from None
    except (PipelineError, ExportError) as exc:
        raise BuildError(str(exc)) from None
    ex = load_module(path)
    ex.lowered = mod.module  # `as_text()` of the library is its metadata; this is the IR
    dense.hold(ex, mod.module)
    weakref.finalize(ex, shutil.rmtree, folder, True)  # the mapped library outlives its file
    return ex


class _NoCode:
    """Code of the Executable that only describes a library being written."""

    def bind_packed(self, symbol: str, cfunc: Any) -> None:
        pass


def _as_module(mod: Any) -> IRModule:
    if isinstance(mod, IRModule):
        return mod
    if hasattr(mod, "module") and isinstance(mod.module, ir.Module):  # te PrimFunc
        return IRModule(mod.module)
    raise TypeError(f"build expects an IRModule or a PrimFunc, got {type(mod).__name__}")


def _cache_key(mod: IRModule, tgt: Target):
    """The compile-cache key of building `mod` for `tgt` (None: the cache is off)."""
    packed = _packed_names(mod)
    if tgt.kind != "llvm" or not cache.enabled():
        return None
    if any(get_global_func(n, allow_missing=True) is None for n in packed):
        return None  # an unregistered packed function is reported by the build itself
    # The strategy table decides how high-level ops are legalized inside the build: a user's
    # strategy changes the code without changing the input module.
    pipeline = ",".join(target_pipeline(tgt)) + ";strategies=" + strategy.fingerprint()
    return cache.build_key(mod.module, tgt, pipeline, packed)


# The llvm row's stages from this one on run with threading on; those before it hold passes that
# run pipelines and transform scripts of their own (layout's packing, the schedule).
FIRST_THREADED_STAGE = "bufferize"


def build(
    mod: Union[IRModule, Any],
    target: Union[str, dict, Target, None] = None,
    exec_mode: str = "compiled",
) -> Executable:
    """Compile `mod` for `target` and return an Executable.

    Parameters
    ----------
    mod : IRModule or PrimFunc
        Modules that still hold high-level relax ops go through `relax.get_pipeline("zero")`.
    target : str, dict or Target, optional
        "llvm" (the host CPU), a target string such as "llvm -mcpu=x86-64-v3", a dict, or a
        `rm.target.Target`; default: the target in scope (`with target:`), else the host CPU.
    exec_mode : "compiled"
        Every relax function becomes one native entry point (TVM's "bytecode" mode has no
        counterpart here).

    Raises ValueError for unregistered packed functions or bad options, BuildError when lowering
    fails, NotImplementedError for ops without a legalization.
    """
    if exec_mode not in EXEC_MODES:
        raise ValueError(f"exec_mode: unsupported value ({exec_mode!r}); supported: {', '.join(EXEC_MODES)}")
    tgt = as_target(target)
    mod = _as_module(mod)
    # what the build makes and its executable does not keep is given back at its end
    with scope(), tgt, dense.build_scope():
        dense.check_borrowed(mod.module)
        key = _cache_key(mod, tgt)
        if key is not None:
            hit = cache.load(key)
            cache.stats["hits" if hit is not None else "misses"] += 1
            if hit is not None:
                return hit
        if rx.high_level_ops(mod.module.operation):
            from relaxmlir.relax.pipeline import get_pipeline

            mod = get_pipeline("zero")(mod)
            remaining = rx.high_level_ops(mod.module.operation)
            if remaining:
                raise NotImplementedError(
                    f"no legalization for relax op(s) {sorted(remaining)} (target {tgt.kind})"
                )
        mod = mod.clone()
        mod.verify()
        missing = sorted(n for n in _packed_names(mod) if get_global_func(n, allow_missing=True) is None)
        if missing:
            raise ValueError(f"packed function(s) {missing} are not registered (use relaxmlir.register_func)")
        _check_packed_devices(mod, tgt)
        infos = _function_infos(mod)
        if not infos:
            raise ValueError("module has no entry point: no relax function and no public primitive function")
        if tgt.kind == "cuda":
            return _build_cuda(mod, tgt, infos)
        print_ir = os.environ.get("RELAXMLIR_PRINT_IR_AFTER_ALL", "") not in ("", "0")
        try:
            # RELAXMLIR_PRINT_IR_AFTER_ALL=1 prints the module after every stage (to stderr). The
            # stages from bufferization on run their per-function passes on several functions at
            # once (ResNet-18: 0.71-0.83 -> 0.56-0.71 s, MobileNetV2 1.08 -> 0.82 at 2 cores).
            names = [name for name, _ in target_stages(tgt)]
            first = names.index(FIRST_THREADED_STAGE)
            for stages, threaded in (names[:first], False), (names[first:], True):
                run_pipeline(
                    mod.module,
                    "builtin.module(" + ",".join(target_pipeline(tgt, stages)) + ")",
                    print_ir_after_all=print_ir,
                    threaded=threaded,
                )
                if not threaded:
                    _packed_signatures(mod, infos)
        except PassError as exc:
            raise BuildError(f"{exc.location}: error: {exc}") from None
        except PipelineError as exc:
            raise BuildError(str(exc)) from None
        external = _external_libraries(mod)
        libs = needed_libraries(mod.module, external)
        if key is not None and cache.cacheable(tgt, libs):
            # The entry's library is this build's code too: no JIT compilation on top of it.
            try:
                return cache.store(key, mod.module, infos, _packed_specs(mod), tgt, libs)
            except (OSError, ExportError) as exc:
                warnings.warn(f"relaxmlir compile cache: not stored ({exc}); using the JIT")
        try:
            code = JitCode(mod.module, tgt, external)
        except ir.MLIRError as exc:
            raise BuildError(_format_diagnostics(exc)) from None
        except JitError as exc:
            raise BuildError(str(exc)) from None
        return Executable(code, infos, _packed_specs(mod), tgt, tuple(code.libraries))


compile = build
