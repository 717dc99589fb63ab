"""`FoldConstant` (`relax-fold-constant`): evaluate `call_tir`s whose inputs are all constants.

The callee is compiled on its own with the CPU pipeline's bufferization and codegen stages
(cached per distinct body) and run on the constant inputs; the call becomes a `relax.constant`.
"""

from __future__ import annotations

import ctypes

import numpy as np
from mlir import ir
from mlir.runtime.np_to_memref import get_ranked_memref_descriptor

from dialects import relax as rx
from lowering import dense
from lowering.dataflow import graph_functions
from lowering.dedupe import body_key
from lowering.jit import JitCode
from lowering.pipelines import BUFFERIZE, cpu_codegen
from lowering.registry import PassError, register_pass, run_pipeline
from relaxmlir.runtime.dtype import np_dtype
from relaxmlir.target import Target
from relaxmlir.relax.struct_info import dtype_of
from relaxmlir.relax.transform import fold_constant_numpy
from relaxmlir.transform import Pass

# Results above this many elements, and above the elements of the constants they are computed
# from, stay computed at run time (they would bloat the module: a broadcast of a small constant).
# A result no larger than its inputs folds whatever its size: VGG's first linear layer transposed
# its 411 MB weight (103M elements) at every call (146 ms of a 310 ms inference), and its matmul
# could not read packed panels of a weight that was not a constant.
MAX_ELEMENTS = 1 << 24


def dense_to_numpy(attr: ir.Attribute, tensor_type: ir.Type) -> np.ndarray | None:
    """The value of a dense elements attribute, or None when it is not readable here."""
    t = ir.RankedTensorType(tensor_type)
    if not dense.is_elements(attr):
        return None
    dtype = np_dtype(dtype_of(t.element_type))
    return dense.to_numpy(attr).astype(dtype, copy=False).reshape(t.shape)


def _ctypes_view(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint16) if array.dtype.kind in "fV" and array.itemsize == 2 else array


def _constant_operands(op: ir.Operation) -> list[np.ndarray] | None:
    arrays = []
    for v in op.operands:
        owner = v.owner
        if isinstance(owner, ir.Block) or owner.name != rx.Constant.name:
            return None
        array = dense_to_numpy(owner.attributes["value"], v.type)
        if array is None:
            return None
        arrays.append(array)
    return arrays


def _foldable_results(op: ir.Operation, inputs: list[np.ndarray]) -> bool:
    total = 0
    for r in op.results:
        t = ir.RankedTensorType(r.type)
        if not t.has_static_shape or t.element_type == ir.IntegerType.get_signless(1):
            return False
        total += int(np.prod(t.shape))
    return total <= max(MAX_ELEMENTS, sum(a.size for a in inputs))


# A float16/bfloat16 constant larger than this is not folded into a wider copy: the weights of a
# half() / bfloat16() model stay 16-bit in the executable (the cast to f32 that LegalizeOps puts
# before their matmul runs at each call), as torch keeps them; small ones (biases, norms) fold.
MAX_WIDENED_16BIT = 1 << 14


def _widens_16bit_weight(inputs: list[np.ndarray], op: ir.Operation) -> bool:
    if not any(
        a.dtype.itemsize == 2 and a.dtype.kind in "fV" and a.size > MAX_WIDENED_16BIT
        for a in inputs
    ):
        return False
    wide = {ir.F32Type.get(), ir.F64Type.get()}
    return any(ir.RankedTensorType(r.type).element_type in wide for r in op.results)


def _permutation(callee: ir.Operation) -> list[int] | None:
    """`axes` when the PrimFunc only permutes its one input (`np.transpose(x, axes)`), the form
    LegalizeOps gives `permute_dims`; else None.

    Weights of linear layers are transposed at compile time: BERT-base's 72 went through a JIT
    kernel of naive loops (3 compiles, 0.6 s running); numpy does them in ~0.1 s."""
    body = callee.regions[0].blocks[0]
    ops = [op.operation for op in body.operations]
    if len(ops) != 2 or ops[0].name != "linalg.generic" or ops[1].name != "func.return":
        return None
    generic = ops[0]
    if len(generic.operands) != 2 or len(callee.regions[0].blocks[0].arguments) != 2:
        return None
    if list(generic.operands) != list(body.arguments):
        return None
    if list(ops[1].operands) != list(generic.results):
        return None
    inner = [op.operation for op in generic.regions[0].blocks[0].operations]
    block_args = list(generic.regions[0].blocks[0].arguments)
    if len(inner) != 1 or inner[0].name != "linalg.yield":
        return None
    if list(inner[0].operands) != block_args[:1]:
        return None
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    rank = maps[1].n_dims
    if not maps[1].is_permutation or maps[1] != ir.AffineMap.get_identity(rank):
        return None
    if not maps[0].is_permutation or maps[0].n_dims != rank:
        return None
    # out[d] = in[d[p0], d[p1], ...]: output axis p_k is input axis k
    picks = [ir.AffineDimExpr(e).position for e in maps[0].results]
    axes = [0] * rank
    for k, p in enumerate(picks):
        axes[p] = k
    return axes


def _transpose(x: np.ndarray, axes: list[int]) -> np.ndarray:
    """`np.transpose(x, axes)` as a contiguous array in memory of its own (`dense.aligned_empty`:
    BERT-base's 72 weight transposes took 2.0 s in numpy's fresh huge pages); matrices by 64x64
    tiles (numpy's strided copy of a whole 3072x768 matrix took 28 ms, the tiles 2-6 ms)."""
    if x.ndim != 2 or axes != [1, 0]:
        return dense.aligned_copy(np.transpose(x, axes))
    out = dense.aligned_empty(x.shape[::-1], x.dtype)
    rows, cols = x.shape
    for i in range(0, rows, 64):
        for j in range(0, cols, 64):
            out[j : j + 64, i : i + 64] = x[i : i + 64, j : j + 64].T
    return out


class _Evaluator:
    """Compiles each distinct callee once and runs it destination-passing.

    NOTE: the kernels are compiled in a context of their own: creating an ExecutionEngine in a
    context that is running a PassManager (this pass under relaxmlir-opt) asserts in MLIR.
    """

    def __init__(self):
        self.ctx = ir.Context()
        self.engines: dict[str, JitCode] = {}

    def _compile(self, callee: ir.Operation) -> JitCode:
        target = Target("llvm")  # evaluated here, on this machine, whatever the build's target
        with self.ctx, ir.Location.unknown(self.ctx):
            module = ir.Module.parse(callee.get_asm(use_local_scope=True))
            fn = module.body.operations[0]
            fn.attributes["sym_name"] = ir.StringAttr.get("main")
            # drop-equivalent-buffer-results only rewrites private functions
            fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
            run_pipeline(module, "builtin.module(" + ",".join(BUFFERIZE) + ")")
            del fn.attributes["sym_visibility"]
            fn.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            run_pipeline(module, "builtin.module(" + ",".join(cpu_codegen(target)) + ")")
            return JitCode(module, target, opt_level=2)

    def __call__(self, callee: ir.Operation, inputs: list, result_types: list) -> list[np.ndarray]:
        axes = _permutation(callee)
        if axes is not None:
            return [_transpose(inputs[0], axes)]
        outs = [
            np.zeros(
                ir.RankedTensorType(t).shape,
                np_dtype(dtype_of(ir.RankedTensorType(t).element_type)),
            )
            for t in result_types
        ]
        values = fold_constant_numpy.evaluate(callee, inputs, outs)
        if values is not None:
            return values
        key = body_key(callee)  # printed in local scope: str() walks the whole module
        if key not in self.engines:
            self.engines[key] = self._compile(callee)
        arrays = [np.ascontiguousarray(a) for a in inputs] + outs
        # NOTE: the descriptor needs only the address and layout: 16-bit floats go as uint16
        # (np_to_memref has no ctypes type for float16/bfloat16)
        descs = [get_ranked_memref_descriptor(_ctypes_view(a)) for a in arrays]
        ptrs = [ctypes.pointer(ctypes.pointer(d)) for d in descs]
        packed = (ctypes.c_void_p * len(ptrs))(*[ctypes.cast(p, ctypes.c_void_p) for p in ptrs])
        self.engines[key].lookup("main")(packed)
        return outs


def fold_constants(module_op: ir.Operation) -> None:
    evaluate = _Evaluator()
    # A call of the same kernel on the same constants is folded once and its constants shared:
    # an LSTM unrolled over 64 steps transposes its recurrent weight at every step, and 64
    # copies of it would each be packed, stored and streamed from memory at run time.
    folded: dict[tuple, list[ir.Value]] = {}
    for func_op in graph_functions(module_op):
        calls: list[ir.Operation] = []

        def collect(op, calls=calls):
            op = op.operation if hasattr(op, "operation") else op
            if op.name == rx.CallTIR.name:
                calls.append(op)
            return ir.WalkResult.ADVANCE

        func_op.walk(collect)
        for op in calls:  # program order, so a folded result can feed the next fold
            name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            key = (name, tuple(op.operands), tuple(str(r.type) for r in op.results))
            if key in folded:  # (its operands were read and found foldable the first time)
                for result, const in zip(op.results, folded[key]):
                    result.replace_all_uses_with(const)
                op.erase()
                continue
            inputs = _constant_operands(op)
            if inputs is None or not _foldable_results(op, inputs) or _widens_16bit_weight(inputs, op):
                continue
            callee = rx.lookup_symbol(op, name)
            if callee is None:
                raise PassError(f"relax-fold-constant: callee @{name} not found", op)
            values = evaluate(callee, inputs, [r.type for r in op.results])
            consts = []
            with ir.InsertionPoint(op), op.location:
                for result, value in zip(op.results, values):
                    # a fresh result is given to the attribute; a view of an input is copied
                    owned = not any(np.may_share_memory(value, x) for x in inputs)
                    attr = dense.elements(value, type=result.type, owned=owned)
                    const = rx.Constant.create([], [result.type], {"value": attr})
                    result.replace_all_uses_with(const.result)
                    consts.append(const.result)
            folded[key] = consts
            op.erase()


@register_pass("relax-fold-constant", "evaluate call_tir ops whose inputs are all relax.constant")
def relax_fold_constant():
    return fold_constants


def FoldConstant() -> Pass:
    """Fold `call_tir`s of constant inputs into constants (PrimFuncs left unused stay until
    `DeadCodeElimination`).

    Returns
    -------
    Pass

    Examples
    --------
    >>> mod = relax.transform.FoldConstant()(relax.transform.LegalizeOps()(mod))
    """
    return Pass("FoldConstant", lambda mod: fold_constants(mod.module.operation))
