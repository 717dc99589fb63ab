"""FoldConstant's numpy evaluator: PrimFuncs of parallel `linalg.generic`s with integer/float
scalar bodies, run over index grids instead of JIT-compiled.

Constant re-layouts of weights are such kernels (the phase split of a strided convolution's
weights: gathers through index arithmetic, `scf.if` for padding): each JIT compile cost ~0.1 s,
seven of them ~1 s of ResNet-18's build. `evaluate` interprets the body elementwise over the
whole iteration space at once (numpy broadcasting over sparse index grids), with the semantics
of the arith ops (wrapping integers, C division, no float contraction); it returns None for
anything it does not know, and the caller JIT-compiles that kernel as before.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
from mlir import ir

# Iteration spaces above this many points are left to the JIT (the index grids would be large).
MAX_POINTS = 1 << 22


class _Unsupported(Exception):
    pass


def _dtype(t: ir.Type) -> np.dtype:
    if isinstance(t, ir.IndexType):
        return np.dtype(np.int64)
    if isinstance(t, ir.IntegerType):
        width = t.width
        if width == 1:
            return np.dtype(np.bool_)
        if width in (8, 16, 32, 64):
            return np.dtype(f"int{width}")
    for cls, dtype in ((ir.F16Type, np.float16), (ir.F32Type, np.float32), (ir.F64Type, np.float64)):
        if isinstance(t, cls):
            return np.dtype(dtype)
    raise _Unsupported(f"type {t}")


def _trunc_div(a, b):
    q = np.floor_divide(a, b)
    return q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))


def _ceil_div(a, b):
    return -np.floor_divide(-a, b)


def _unsigned(f: Callable) -> Callable:
    def apply(a, b):
        a, b = np.asarray(a), np.asarray(b)
        u = np.dtype(f"uint{a.dtype.itemsize * 8}")
        return f(a.astype(u), b.astype(u))

    return apply


_BINARY: dict[str, Callable] = {
    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
    "arith.floordivsi": np.floor_divide, "arith.divsi": _trunc_div, "arith.ceildivsi": _ceil_div,
    "arith.remsi": np.fmod, "arith.divui": _unsigned(np.floor_divide),
    "arith.remui": _unsigned(np.remainder), "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
    "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
}  # fmt: skip
_CASTS = (
    "arith.index_cast", "arith.extsi", "arith.trunci", "arith.sitofp", "arith.fptosi",
    "arith.extf", "arith.truncf",
)  # fmt: skip
# arith.cmpi predicates by number: eq, ne, slt, sle, sgt, sge, ult, ule, ugt, uge
_CMPI = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal]
_CMPI += [_unsigned(f) for f in (np.less, np.less_equal, np.greater, np.greater_equal)]
# arith.cmpf: ordered (false if either is NaN) 1-6, unordered (true if either is NaN) 8-13
_CMPF = {1: np.equal, 2: np.greater, 3: np.greater_equal, 4: np.less, 5: np.less_equal, 6: np.not_equal}


def _cmpf(predicate: int, a, b):
    nan = np.isnan(a) | np.isnan(b)
    if predicate in _CMPF:
        return _CMPF[predicate](a, b) & ~nan
    if predicate - 7 in _CMPF:
        return _CMPF[predicate - 7](a, b) | nan
    if predicate in (0, 7, 14, 15):  # false, ord, uno, true
        return [np.zeros_like(nan), ~nan, nan, np.ones_like(nan)][(0, 7, 14, 15).index(predicate)]
    raise _Unsupported(f"cmpf predicate {predicate}")


def _affine(expr: ir.AffineExpr, grid: list):
    if isinstance(expr, ir.AffineDimExpr):
        return grid[ir.AffineDimExpr(expr).position]
    if isinstance(expr, ir.AffineConstantExpr):
        return ir.AffineConstantExpr(expr).value
    for cls, f in (
        (ir.AffineAddExpr, np.add), (ir.AffineMulExpr, np.multiply),
        (ir.AffineModExpr, np.remainder), (ir.AffineFloorDivExpr, np.floor_divide),
        (ir.AffineCeilDivExpr, _ceil_div),
    ):  # fmt: skip
        if isinstance(expr, cls):
            e = cls(expr)
            return f(_affine(e.lhs, grid), _affine(e.rhs, grid))
    raise _Unsupported(f"affine expression {expr}")


def _gather(array: np.ndarray, indices: list) -> np.ndarray:
    """`array[indices]`, indices clipped into range (a branch not taken may compute any)."""
    clipped = tuple(np.clip(i, 0, n - 1) for i, n in zip(indices, array.shape))
    return array[clipped]


class _Body:
    """Evaluates a block's scalar ops elementwise over the iteration grid."""

    def __init__(self, env: dict, grid: list):
        self.env, self.grid = env, grid

    def run(self, block: ir.Block) -> list:
        for op in block.operations:
            op = op.operation
            if op.name in ("linalg.yield", "scf.yield"):
                return [self.env[v] for v in op.operands]
            self.op(op)
        raise _Unsupported("block without a terminator")

    def op(self, op: ir.Operation) -> None:
        name, env = op.name, self.env
        args = [env[v] for v in op.operands]
        if name == "scf.if":
            then = self.run(op.regions[0].blocks[0])
            otherwise = self.run(op.regions[1].blocks[0]) if len(op.regions[1].blocks) else []
            values = [np.where(args[0], t, e) for t, e in zip(then, otherwise)]
        elif name == "arith.constant":
            attr = op.attributes["value"]
            if isinstance(attr, ir.BoolAttr):
                value = attr.value
            elif isinstance(attr, ir.IntegerAttr):
                value = attr.value
            elif isinstance(attr, ir.FloatAttr):
                value = attr.value
            else:
                raise _Unsupported(f"constant {attr}")
            values = [np.asarray(value).astype(_dtype(op.results[0].type))[()]]
        elif name == "linalg.index":
            values = [self.grid[ir.IntegerAttr(op.attributes["dim"]).value]]
        elif name in _BINARY:
            values = [_BINARY[name](*args)]
        elif name in _CASTS:
            values = [args[0]]  # the result type's dtype is applied below
        elif name == "arith.negf":
            values = [np.negative(args[0])]
        elif name == "arith.select":
            values = [np.where(*args)]
        elif name == "arith.cmpi":
            values = [_CMPI[ir.IntegerAttr(op.attributes["predicate"]).value](*args)]
        elif name == "arith.cmpf":
            values = [_cmpf(ir.IntegerAttr(op.attributes["predicate"]).value, *args)]
        elif name == "tensor.extract":
            values = [_gather(args[0], args[1:])]
        else:
            raise _Unsupported(name)
        if len(values) != len(op.results):
            raise _Unsupported(f"{name} results")
        for result, value in zip(op.results, values):
            dtype = _dtype(result.type)
            env[result] = np.asarray(value).astype(dtype, copy=False) if np.ndim(value) else dtype.type(value)


def _generic(op: ir.Operation, env: dict) -> list[np.ndarray]:
    n_ins, n_outs = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if any("parallel" not in str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])):
        raise _Unsupported("reduction")
    arrays = [env[v] for v in operands]
    domain = [None] * maps[0].n_dims
    for array, m in zip(arrays, maps):
        for j, expr in enumerate(m.results):
            if isinstance(expr, ir.AffineDimExpr):
                domain[ir.AffineDimExpr(expr).position] = array.shape[j]
    if None in domain or int(np.prod(domain)) > MAX_POINTS:
        raise _Unsupported("iteration space")
    grid = list(np.indices(domain, sparse=True))
    body = op.regions[0].blocks[0]
    local = dict(env)
    for arg, array, m in zip(body.arguments, arrays, maps):
        local[arg] = _gather(array, [_affine(e, grid) for e in m.results])
    yields = _Body(local, grid).run(body)
    results = []
    for k in range(n_outs):
        out = np.array(arrays[n_ins + k])  # a copy: the operand may be another's value
        indices = tuple(np.broadcast_arrays(*[_affine(e, grid) for e in maps[n_ins + k].results]))
        out[indices] = np.broadcast_to(yields[k], domain)
        results.append(out)
    return results


def evaluate(callee: ir.Operation, inputs: list[np.ndarray], outs: list[np.ndarray]) -> Optional[list[np.ndarray]]:
    """The results of PrimFunc `callee` on `inputs` (destination arguments `outs`), or None when
    its body holds something this evaluator does not take."""
    block = callee.regions[0].blocks[0]
    env = dict(zip(block.arguments, list(inputs) + list(outs)))
    try:
        with np.errstate(all="ignore"):  # wrapping integers, division by zero: as compiled code
            for op in block.operations:
                op = op.operation
                if op.name == "func.return":
                    return [np.ascontiguousarray(env[v]) for v in op.operands]
                if op.name != "linalg.generic":
                    raise _Unsupported(op.name)
                for result, value in zip(op.results, _generic(op, env)):
                    env[result] = value
    except (_Unsupported, KeyError, IndexError, ValueError, TypeError):
        return None
    return None
