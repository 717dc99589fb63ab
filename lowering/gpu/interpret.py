"""Run the GPU kernels of a lowered module on the CPU, thread by thread: numeric tests of the
CUDA target's kernel templates on machines without a GPU.

The input is the module after the CUDA pipeline's "map" stage
(`relaxmlir.tools.gpu_interpret.interpret` lowers a relax module that far): functions on
memrefs whose kernels are `gpu.launch` regions of scf / arith / math / memref / vector ops,
barriers, warp shuffles and warp-level `ldmatrix` / `mma.sync`. Every block of the grid runs
in turn; its threads are Python generators that run until they reach a barrier or a warp
collective, where they wait for the others (a barrier for every thread of the block, a
shuffle, ldmatrix or mma for the 32 lanes of the warp). Collectives follow the PTX ISA:
`shfl.sync` lane selection, `ldmatrix` (lanes 8q..8q+7 address the rows of 8x8 piece q; lane
(g, t) receives row g, columns 2t, 2t+1 of each piece), and the fragment layouts of
`mma.sync` m16n8k16 (A: register r of lane (g, t) = 4 * g + t holds row g + 8 (r % 2),
columns 2t + 8 (r // 2) + {0, 1}; B: rows 2t + 8r + {0, 1} of column g; C: row g + 8r,
columns 2t + {0, 1}) and m16n8k8 in TF32 (A: row g + 8 (r % 2), column t + 4 (r // 2); B: row
t + 4r, column g; operands with their low 13 mantissa bits dropped).

Floats keep their width (numpy float16 / float32 scalars), so rounding is the kernel's own;
`math.fma` rounds once. A load or store outside its memref, a barrier that not every thread
reaches, and an op this interpreter does not know raise InterpretError: a kernel bug shows as
an error, not as a wrong number. Fresh buffers (memref.alloc, shared memory) start as NaN, so
a value read before it is written shows in the result.

It is slow (about a microsecond per operation per thread): for tests on small shapes.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable
from typing import Any

import numpy as np
from mlir import ir

from lowering.dense import to_numpy
from lowering.registry import contains_op
from relaxmlir.runtime.dtype import np_dtype

__all__ = ["InterpretError", "run_function"]


class InterpretError(Exception):
    """The kernel did something a GPU would not define, or used an op not interpreted here."""


_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
try:
    _DTYPES["bf16"] = np_dtype("bfloat16").type  # ml_dtypes, where installed
except TypeError:
    pass
_MASK = {1: 1, 8: 0xFF, 16: 0xFFFF, 32: 0xFFFFFFFF, 64: 0xFFFFFFFFFFFFFFFF}
_BARRIER, _SHUFFLE, _MMA, _LDMATRIX = "barrier", "shuffle", "mma", "ldmatrix"


def _np_type(t: ir.Type):
    name = str(t)
    if name in _DTYPES:
        return _DTYPES[name]
    if name == "index" or name.startswith("i"):
        return int
    raise InterpretError(f"element type {name} is not interpreted")


def _bits(t: ir.Type) -> int:
    name = str(t)
    return 64 if name == "index" else int(name[1:])


def _signed(v: int, bits: int) -> int:
    v &= _MASK[bits]
    return v - (1 << bits) if bits > 1 and v >> (bits - 1) else v


class _Compiler:
    """Turns a function's regions into lists of steps over a per-thread slot list."""

    def __init__(self, module_op: ir.Operation):
        self.module_op = module_op
        self.funcs: dict[str, ir.Operation] = {}
        for op in module_op.regions[0].blocks[0].operations:
            if op.operation.name == "func.func":
                self.funcs[ir.StringAttr(op.attributes["sym_name"]).value] = op.operation
        self.compiled: dict[str, _Function] = {}

    def function(self, name: str) -> _Function:
        if name not in self.compiled:
            if name not in self.funcs:
                raise InterpretError(f"no function @{name} in the module")
            self.compiled[name] = _Function(self, self.funcs[name])
        return self.compiled[name]


class _Function:
    def __init__(self, compiler: _Compiler, func_op: ir.Operation):
        self.compiler = compiler
        # slot 0: this thread's ids (gpu.thread_id & co.); slot 1: its cp.async copies in flight
        # slot 2: its block's dynamic shared memory
        self.slots: dict[Any, int] = {_IDS: 0, _ASYNC: _COPIES_SLOT, _DYNAMIC: _SHARED_SLOT}
        body = func_op.regions[0].blocks[0]
        self.args = [self.slot(a) for a in body.arguments]
        self.body = self.block(body)

    def slot(self, value: ir.Value) -> int:
        key = value
        if key not in self.slots:
            self.slots[key] = len(self.slots)
        return self.slots[key]

    def block(self, block: ir.Block) -> tuple[list, list[int]]:
        """(steps, slots of the terminator's operands). A step is (is_generator, callable)."""
        steps = []
        ops = [o.operation for o in block.operations]
        for op in ops[:-1] if ops and _is_terminator(ops[-1]) else ops:
            steps.append(self.op(op))
        term = ops[-1] if ops and _is_terminator(ops[-1]) else None
        return steps, [self.slot(v) for v in term.operands] if term is not None else []

    def op(self, op: ir.Operation):
        name = op.name
        ins = [self.slot(v) for v in op.operands]
        outs = [self.slot(v) for v in op.results]
        if name in _REGION_OPS:
            return True, _REGION_OPS[name](self, op, ins, outs)
        if name in _COLLECTIVES:
            return True, _COLLECTIVES[name](op, ins, outs)
        if name in _ID_OPS:
            return False, _id_op(op, outs, _ID_OPS[name])
        if name == "memref.get_global":
            return False, _get_global(self.compiler.module_op)(op, ins, outs)
        make = _LEAF.get(name)
        if make is None:
            raise InterpretError(f"op '{name}' is not interpreted (at {op.location})")
        return False, make(op, ins, outs)


_IDS = "gpu ids"  # (block x y z, thread x y z, grid x y z, block size x y z) of the thread
_ASYNC = "async copies"  # the thread's _Copies
_DYNAMIC = "dynamic shared memory"  # the block's bytes (gpu.dynamic_shared_memory)
_COPIES_SLOT, _SHARED_SLOT = 1, 2  # where a thread's env holds those two
_ID_OPS = {"gpu.block_id": 0, "gpu.thread_id": 3, "gpu.grid_dim": 6, "gpu.block_dim": 9}


def _id_op(op: ir.Operation, outs: list[int], base: int):
    (o,) = outs
    at = base + "xyz".index(str(op.attributes["dimension"]).split()[-1].strip(">"))

    def step(env):
        env[o] = env[0][at]

    return step


def _is_terminator(op: ir.Operation) -> bool:
    return op.name in ("scf.yield", "func.return", "gpu.terminator", "scf.condition")


def _run(steps, env):
    """Run compiled steps (a generator: yields at collectives)."""
    for is_gen, fn in steps:
        if is_gen:
            yield from fn(env)
        else:
            fn(env)


# -- leaf ops -------------------------------------------------------------------------------------


def _unary(fn):
    def make(op, ins, outs):
        (a,), (o,) = ins, outs

        def step(env):
            env[o] = fn(env[a])

        return step

    return make


def _binary(fn):
    def make(op, ins, outs):
        (a, b), (o,) = ins, outs

        def step(env):
            env[o] = fn(env[a], env[b])

        return step

    return make


def _typed_unary(fn):
    """A math op on a float: computed in float64, rounded to the operand's type."""

    def make(op, ins, outs):
        (a,), (o,) = ins, outs
        cast = _np_type(op.results[0].type)

        def step(env):
            x = float(env[a])
            env[o] = cast(x if pymath.isnan(x) else fn(x))  # NaN in, NaN out

        return step

    return make


def _int_binary(fn, signed: bool):
    def make(op, ins, outs):
        (a, b), (o,) = ins, outs
        bits = _bits(op.results[0].type)

        def step(env):
            x, y = int(env[a]), int(env[b])
            if signed:
                x, y = _signed(x, bits), _signed(y, bits)
            else:
                x, y = x & _MASK[bits], y & _MASK[bits]
            env[o] = _signed(fn(x, y), bits) if bits > 1 else fn(x, y) & 1

        return step

    return make


def _div_trunc(x: int, y: int) -> int:
    if y == 0:
        raise InterpretError("integer division by zero")
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def _rem_trunc(x: int, y: int) -> int:
    return x - _div_trunc(x, y) * y


def _floordiv(x: int, y: int) -> int:
    if y == 0:
        raise InterpretError("integer division by zero")
    return x // y


def _ceildiv(x: int, y: int) -> int:
    return -_floordiv(-x, y)


def _constant(op, ins, outs):
    (o,) = outs
    attr = op.attributes["value"]
    t = op.results[0].type
    if isinstance(t, ir.VectorType):
        dense = ir.DenseElementsAttr(attr)
        if not dense.is_splat:
            raise InterpretError("non-splat vector constants are not interpreted")
        elem = _np_type(ir.VectorType(t).element_type)
        splat = dense.get_splat_value()
        scalar = splat.value if hasattr(splat, "value") else float(str(splat).split(":")[0])
        value = np.full(ir.VectorType(t).shape, scalar, dtype=elem)
    elif isinstance(attr, ir.IntegerAttr) or str(t) == "index" or str(t).startswith("i"):
        value = ir.IntegerAttr(attr).value
    else:
        value = _np_type(t)(ir.FloatAttr(attr).value)

    def step(env):
        env[o] = value

    return step


_CMPI = {
    0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: a < b, 3: lambda a, b: a <= b,
    4: lambda a, b: a > b, 5: lambda a, b: a >= b, 6: lambda a, b: a < b, 7: lambda a, b: a <= b,
    8: lambda a, b: a > b, 9: lambda a, b: a >= b,
}  # fmt: skip


def _cmpi(op, ins, outs):
    (a, b), (o,) = ins, outs
    pred = ir.IntegerAttr(op.attributes["predicate"]).value
    bits = _bits(op.operands[0].type)
    test = _CMPI[pred]
    unsigned = pred >= 6

    def step(env):
        x, y = int(env[a]), int(env[b])
        if unsigned:
            x, y = x & _MASK[bits], y & _MASK[bits]
        else:
            x, y = _signed(x, bits), _signed(y, bits)
        env[o] = bool(test(x, y))

    return step


def _cmpf(op, ins, outs):
    (a, b), (o,) = ins, outs
    pred = ir.IntegerAttr(op.attributes["predicate"]).value
    ordered = {1: "eq", 2: "gt", 3: "ge", 4: "lt", 5: "le", 6: "ne"}
    unordered = {8: "eq", 9: "gt", 10: "ge", 11: "lt", 12: "le", 13: "ne"}
    rel = {
        "eq": lambda x, y: x == y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
        "lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "ne": lambda x, y: x != y,
    }  # fmt: skip

    def step(env):
        x, y = float(env[a]), float(env[b])
        nan = pymath.isnan(x) or pymath.isnan(y)
        if pred == 0:
            r = False
        elif pred == 15:
            r = True
        elif pred == 7:
            r = not nan
        elif pred == 14:
            r = nan
        elif pred in ordered:
            r = not nan and rel[ordered[pred]](x, y)
        else:
            r = nan or rel[unordered[pred]](x, y)
        env[o] = r

    return step


def _select(op, ins, outs):
    (c, a, b), (o,) = ins, outs

    def step(env):
        env[o] = env[a] if env[c] else env[b]

    return step


def _convert(op, ins, outs):
    (a,), (o,) = ins, outs
    cast = _np_type(op.results[0].type)
    src_int = _np_type(op.operands[0].type) is int
    if cast is int and not src_int:  # fptosi / fptoui: truncation toward zero

        def step(env):
            env[o] = pymath.trunc(float(env[a]))

    elif cast is int:
        src_bits, dst_bits = _bits(op.operands[0].type), _bits(op.results[0].type)
        if op.name in ("arith.extui", "arith.index_castui"):

            def step(env):
                env[o] = int(env[a]) & _MASK[src_bits]

        else:  # extsi, trunci, index_cast: two's complement at the result's width

            def step(env):
                env[o] = _signed(int(env[a]), dst_bits) if dst_bits > 1 else int(env[a]) & 1

    else:

        def step(env):
            env[o] = cast(env[a])

    return step


def _fma(op, ins, outs):
    (a, b, c), (o,) = ins, outs
    cast = _np_type(op.results[0].type)

    def step(env):  # the product of two f32 is exact in f64: one rounding, as the GPU's fma
        env[o] = cast(np.float64(env[a]) * np.float64(env[b]) + np.float64(env[c]))

    return step


def _check(arr: np.ndarray, idx: tuple, what: str) -> None:
    for i, n in zip(idx, arr.shape):
        if not 0 <= i < n:
            raise InterpretError(
                f"{what} at {list(idx)} outside a memref of shape {list(arr.shape)}"
            )


def _int_attr(op: ir.Operation, key: str) -> int:
    """An integer attribute of `op`, 0 where it has none (an alignment, a group count)."""
    return ir.IntegerAttr(op.attributes[key]).value if key in op.attributes else 0


def _window(arr: np.ndarray, at: tuple, n: int, alignment: int, what: str) -> tuple:
    """The index of n elements from `at` along the last axis, checked in bounds (and aligned)."""
    _check(arr, at[:-1] + (at[-1] + n - 1,), what)
    if alignment:
        _aligned(arr, at, alignment, what)
    return at[:-1] + (slice(at[-1], at[-1] + n),)


def _load(op, ins, outs):
    m, idx, (o,) = ins[0], ins[1:], outs
    if op.name == "vector.load":
        n, alignment = ir.VectorType(op.results[0].type).shape[-1], _int_attr(op, "alignment")

        def vstep(env):
            arr = env[m]
            env[o] = arr[_window(arr, tuple(env[i] for i in idx), n, alignment, op.name)].copy()

        return vstep

    def step(env):
        arr, at = env[m], tuple(env[i] for i in idx)
        _check(arr, at, "memref.load")
        env[o] = arr[at]

    return step


def _store(op, ins, outs):
    v, m, idx = ins[0], ins[1], ins[2:]

    def step(env):
        arr, at = env[m], tuple(env[i] for i in idx)
        _check(arr, at, "memref.store")
        value = env[v]
        if arr.dtype.kind in "iu":  # two's complement at the array's width
            value = np.array(int(value) & _MASK[8 * arr.dtype.itemsize], np.uint64).astype(
                arr.dtype
            )
        arr[at] = value

    return step


_INT_ARRAYS = {1: np.bool_, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def _array_dtype(t: ir.Type):
    """numpy dtype of a buffer of element type `t` (integers at their width)."""
    elem = _np_type(t)
    return _INT_ARRAYS[_bits(t)] if elem is int else elem


def _new_buffer(shape, t: ir.Type) -> np.ndarray:
    """A fresh buffer on a 256-byte boundary (as device allocations), NaN where float."""
    dtype = np.dtype(_array_dtype(t))
    count = int(np.prod(shape, dtype=np.int64))
    out = _new_bytes(count * dtype.itemsize).view(dtype).reshape(shape)
    out[...] = np.nan if dtype.kind in "fV" else 0
    return out


def _new_bytes(n: int) -> np.ndarray:
    """n bytes on a 256-byte boundary, all bits set (NaN in every float type)."""
    raw = np.empty(n + 256, np.uint8)
    start = -raw.__array_interface__["data"][0] % 256
    out = raw[start : start + n]
    out[...] = 0xFF
    return out


def _aligned(arr: np.ndarray, at: tuple, alignment: int, what: str) -> None:
    address = arr.__array_interface__["data"][0] + sum(i * s for i, s in zip(at, arr.strides))
    if address % alignment:
        raise InterpretError(f"{what} at {list(at)}: address not {alignment}-byte aligned")


def _alloc(op, ins, outs):
    (o,) = outs
    t = ir.MemRefType(op.results[0].type)
    dyn = list(ins)

    def step(env):
        sizes = iter(env[i] for i in dyn)
        shape = [next(sizes) if s == ir.ShapedType.get_dynamic_size() else s for s in t.shape]
        env[o] = _new_buffer(shape, t.element_type)

    return step


def _get_global(module_op: ir.Operation):
    def make(op, ins, outs):
        (o,) = outs
        name = ir.FlatSymbolRefAttr(op.attributes["name"]).value
        glob = next(
            (
                g.operation
                for g in module_op.regions[0].blocks[0].operations
                if g.operation.name == "memref.global"
                and ir.StringAttr(g.attributes["sym_name"]).value == name
            ),
            None,
        )
        if glob is None or "initial_value" not in glob.attributes:
            raise InterpretError(f"memref.get_global @{name}: no initialized memref.global")
        shape = ir.MemRefType(op.results[0].type).shape
        value = np.array(to_numpy(glob.attributes["initial_value"])).reshape(shape)

        def step(env):
            env[o] = value

        return step

    return make


def _affine(e: ir.AffineExpr, n_dims: int) -> Callable:
    """An affine expression as a function of the operand list (dims, then symbols)."""
    if isinstance(e, ir.AffineDimExpr):
        at = e.position
        return lambda v: v[at]
    if isinstance(e, ir.AffineSymbolExpr):
        at = n_dims + e.position
        return lambda v: v[at]
    if isinstance(e, ir.AffineConstantExpr):
        c = e.value
        return lambda v: c
    lhs, rhs = _affine(e.lhs, n_dims), _affine(e.rhs, n_dims)
    if isinstance(e, ir.AffineAddExpr):
        return lambda v: lhs(v) + rhs(v)
    if isinstance(e, ir.AffineMulExpr):
        return lambda v: lhs(v) * rhs(v)
    if isinstance(e, ir.AffineModExpr):
        return lambda v: lhs(v) % rhs(v)
    if isinstance(e, ir.AffineFloorDivExpr):
        return lambda v: lhs(v) // rhs(v)
    if isinstance(e, ir.AffineCeilDivExpr):
        return lambda v: -(-lhs(v) // rhs(v))
    raise InterpretError(f"affine expression {e} is not interpreted")


def _affine_apply(op, ins, outs):
    amap = ir.AffineMapAttr(op.attributes["map"]).value
    fns = [_affine(e, amap.n_dims) for e in amap.results]
    pick = {"affine.apply": None, "affine.min": min, "affine.max": max}[op.name]
    (o,) = outs

    def step(env):
        vals = [int(env[i]) for i in ins]
        results = [f(vals) for f in fns]
        env[o] = results[0] if pick is None else pick(results)

    return step


def _nothing(op, ins, outs):
    def step(env):
        pass

    return step


def _view(op, ins, outs):
    """memref.expand_shape / collapse_shape / cast: a numpy view with the result's shape. A
    dynamic size comes from the source's sizes (a collapsed group's product, a cast's own) or
    from the expand's output-shape operands."""
    (a,), (o,) = ins[:1], outs
    t = ir.MemRefType(op.results[0].type)
    dynamic = ir.ShapedType.get_dynamic_size()
    static = list(t.shape)
    if op.name == "memref.collapse_shape":
        reassociation = ir.ArrayAttr(op.attributes["reassociation"])
        groups = [[int(ir.IntegerAttr(i).value) for i in g] for g in reassociation]
    elif op.name == "memref.expand_shape":
        static = list(ir.DenseI64ArrayAttr(op.attributes["static_output_shape"]))
    sizes = list(ins[1:])

    def shape_of(env) -> list[int]:
        if dynamic not in static:
            return static
        src = env[a].shape
        if op.name == "memref.collapse_shape":
            return [int(np.prod([src[i] for i in g], dtype=np.int64)) for g in groups]
        if op.name == "memref.expand_shape":
            dyn = iter(int(env[v]) for v in sizes)
            return [next(dyn) if d == dynamic else d for d in static]
        return list(src)  # a cast keeps the sizes it has

    def step(env):
        view = env[a].reshape(shape_of(env))
        if not np.shares_memory(view, env[a]) and view.size:
            raise InterpretError(f"{op.name}: the result is not a view of its source")
        env[o] = view

    return step


def _subview(op, ins, outs):
    dynamic = ir.ShapedType.get_dynamic_size()
    src, rest = ins[0], list(ins[1:])
    (o,) = outs
    static = [
        list(ir.DenseI64ArrayAttr(op.attributes[k]))
        for k in ("static_offsets", "static_sizes", "static_strides")
    ]
    rank = ir.MemRefType(op.results[0].type).rank

    def step(env):
        dyn = iter(env[i] for i in rest)
        offs, sizes, strides = ([next(dyn) if v == dynamic else v for v in vals] for vals in static)
        arr = env[src]
        view = arr[tuple(slice(f, f + s * st, st) for f, s, st in zip(offs, sizes, strides))]
        if view.ndim != rank:  # rank-reducing: drop the unit axes the result type leaves out
            keep = list(ir.MemRefType(op.results[0].type).shape)
            view = view.reshape(keep)
        env[o] = view

    return step


def _vector_store(op, ins, outs):
    v, m, idx = ins[0], ins[1], ins[2:]
    n, alignment = ir.VectorType(op.operands[0].type).shape[-1], _int_attr(op, "alignment")

    def step(env):
        arr = env[m]
        arr[_window(arr, tuple(env[i] for i in idx), n, alignment, op.name)] = env[v]

    return step


def _dynamic_shared(op, ins, outs):
    (o,) = outs

    def step(env):
        env[o] = env[_SHARED_SLOT]

    return step


def _byte_view(op, ins, outs):
    """memref.view: a typed buffer at a byte offset of a 1-D byte buffer."""
    raw, shift = ins[0], ins[1]
    if len(ins) > 2:
        raise InterpretError("memref.view with dynamic sizes is not interpreted")
    t = ir.MemRefType(op.results[0].type)
    dtype = np.dtype(_array_dtype(t.element_type))
    count = int(np.prod(t.shape, dtype=np.int64))
    (o,) = outs

    def step(env):
        arr, at = env[raw], env[shift]
        end = at + count * dtype.itemsize
        if at < 0 or end > arr.shape[0]:
            raise InterpretError(
                f"memref.view of bytes {at}..{end} in a buffer of {arr.shape[0]} bytes"
            )
        env[o] = arr[at:end].view(dtype).reshape(t.shape)

    return step


def _dim(op, ins, outs):
    (m, d), (o,) = ins, outs

    def step(env):
        env[o] = env[m].shape[env[d]]

    return step


def _copy(op, ins, outs):
    src, dst = ins

    def step(env):
        np.copyto(env[dst], env[src], casting="unsafe")

    return step


def _from_elements(op, ins, outs):
    (o,) = outs
    t = ir.VectorType(op.results[0].type)
    elem, shape = _np_type(t.element_type), t.shape

    def step(env):
        env[o] = np.array([env[i] for i in ins], dtype=elem).reshape(shape)

    return step


def _position(op: ir.Operation, dyn: list[int]) -> Callable:
    """vector.extract / insert: the position, static entries with the dynamic ones filled in."""
    pos = list(ir.DenseI64ArrayAttr(op.attributes["static_position"]))
    dynamic = ir.ShapedType.get_dynamic_size()

    def at(env) -> tuple:
        it = iter(env[i] for i in dyn)
        return tuple(next(it) if p == dynamic else p for p in pos)

    return at


def _vector_extract(op, ins, outs):
    src, (o,) = ins[0], outs
    at = _position(op, ins[1:])

    def step(env):
        v = env[src][at(env)]
        env[o] = v.copy() if isinstance(v, np.ndarray) else v

    return step


def _to_elements(op, ins, outs):
    """vector.to_elements: every element of the vector, in row-major order."""
    (src,) = ins

    def step(env):
        for o, v in zip(outs, np.asarray(env[src]).reshape(-1)):
            env[o] = v

    return step


def _vector_insert(op, ins, outs):
    val, dst, (o,) = ins[0], ins[1], outs
    at = _position(op, ins[2:])

    def step(env):
        new = env[dst].copy()
        new[at(env)] = env[val]
        env[o] = new

    return step


def _bitcast(op, ins, outs):
    (a,), (o,) = ins, outs
    t = ir.VectorType(op.results[0].type)
    dtype = _array_dtype(t.element_type)

    def step(env):
        env[o] = np.ascontiguousarray(env[a]).view(dtype).reshape(t.shape)

    return step


def _extractvalue(op, ins, outs):
    (a,), (o,) = ins, outs
    (at,) = list(ir.DenseI64ArrayAttr(op.attributes["position"]))

    def step(env):
        env[o] = env[a][at]

    return step


def _broadcast(op, ins, outs):
    (a,), (o,) = ins, outs
    t = ir.VectorType(op.results[0].type)
    elem = _np_type(t.element_type)

    def step(env):
        env[o] = np.broadcast_to(np.asarray(env[a], dtype=elem), t.shape).copy()

    return step


class _Copies:
    """A thread's cp.async copies in flight: those issued since its last commit, then its
    committed groups, oldest first. A copy's destination reads as NaN from its issue until
    a wait completes it, so a read that does not wait for its copy shows in the result (as does
    a copy into a tile that others still read)."""

    def __init__(self):
        self.open: list[tuple] = []
        self.groups: list[list[tuple]] = []

    def complete(self, pending: int) -> None:
        while len(self.groups) > pending:
            for arr, at, data in self.groups.pop(0):
                arr[at] = data


def _async_copy(op, ins, outs):
    """nvgpu.device_async_copy (cp.async): `srcElements` elements read from the source, the
    rest of the `dstElements` written as zeros; both addresses aligned to the copy's size."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    dst, dst_idx = ins[0], ins[1 : 1 + sizes[1]]
    src = ins[1 + sizes[1]]
    src_idx = ins[2 + sizes[1] : 2 + sizes[1] + sizes[3]]
    src_n = ins[-1] if sizes[4] else None
    count = ir.IntegerAttr(op.attributes["dstElements"]).value
    (o,) = outs

    def step(env):
        d_arr, s_arr = env[dst], env[src]
        n = count if src_n is None else env[src_n]
        if not 0 <= n <= count:
            raise InterpretError(f"{op.name}: source size {n} outside 0..{count}")
        align = count * d_arr.dtype.itemsize
        d_at = _window(d_arr, tuple(env[i] for i in dst_idx), count, align, op.name)
        data = np.zeros(count, d_arr.dtype)
        if n:
            s_at = _window(s_arr, tuple(env[i] for i in src_idx), n, align, op.name)
            data[:n] = s_arr[s_at]
        if d_arr.dtype.kind == "f":
            d_arr[d_at] = np.nan
        env[_COPIES_SLOT].open.append((d_arr, d_at, data))
        env[o] = None

    return step


def _async_group(op, ins, outs):
    (o,) = outs

    def step(env):
        copies = env[_COPIES_SLOT]
        copies.groups.append(copies.open)
        copies.open = []
        env[o] = None

    return step


def _async_wait(op, ins, outs):
    pending = _int_attr(op, "numGroups")

    def step(env):
        env[_COPIES_SLOT].complete(pending)

    return step


_LEAF: dict[str, Callable] = {
    "arith.constant": _constant,
    "arith.addi": _int_binary(lambda x, y: x + y, True),
    "arith.subi": _int_binary(lambda x, y: x - y, True),
    "arith.muli": _int_binary(lambda x, y: x * y, True),
    "arith.divui": _int_binary(_floordiv, False),
    "arith.divsi": _int_binary(_div_trunc, True),
    "arith.remui": _int_binary(lambda x, y: x % y if y else _floordiv(x, y), False),
    "arith.remsi": _int_binary(_rem_trunc, True),
    "arith.floordivsi": _int_binary(_floordiv, True),
    "arith.ceildivsi": _int_binary(_ceildiv, True),
    "arith.ceildivui": _int_binary(_ceildiv, False),
    "arith.andi": _int_binary(lambda x, y: x & y, False),
    "arith.ori": _int_binary(lambda x, y: x | y, False),
    "arith.xori": _int_binary(lambda x, y: x ^ y, False),
    "arith.shli": _int_binary(lambda x, y: x << y, False),
    "arith.shrui": _int_binary(lambda x, y: x >> y, False),
    "arith.shrsi": _int_binary(lambda x, y: x >> y, True),
    "arith.maxsi": _int_binary(max, True),
    "arith.minsi": _int_binary(min, True),
    "arith.maxui": _int_binary(max, False),
    "arith.minui": _int_binary(min, False),
    "arith.cmpi": _cmpi,
    "arith.cmpf": _cmpf,
    "arith.select": _select,
    "arith.addf": _binary(lambda x, y: x + y),
    "arith.subf": _binary(lambda x, y: x - y),
    "arith.mulf": _binary(lambda x, y: x * y),
    "arith.divf": _binary(lambda x, y: x / y),
    "arith.remf": _binary(np.fmod),
    "arith.maximumf": _binary(np.maximum),
    "arith.minimumf": _binary(np.minimum),
    "arith.maxnumf": _binary(np.fmax),
    "arith.minnumf": _binary(np.fmin),
    "arith.negf": _unary(lambda x: -x),
    "arith.extf": _convert,
    "arith.truncf": _convert,
    "arith.sitofp": _convert,
    "arith.uitofp": _convert,
    "arith.fptosi": _convert,
    "arith.fptoui": _convert,
    "arith.index_cast": _convert,
    "arith.index_castui": _convert,
    "arith.extsi": _convert,
    "arith.extui": _convert,
    "arith.trunci": _convert,
    "math.fma": _fma,
    "math.exp": _typed_unary(lambda x: pymath.exp(x) if x < 709 else pymath.inf),
    "math.exp2": _typed_unary(lambda x: 2.0**x if x < 1024 else pymath.inf),
    "math.log": _typed_unary(
        lambda x: pymath.log(x) if x > 0 else (-pymath.inf if x == 0 else pymath.nan)
    ),
    "math.sqrt": _typed_unary(lambda x: pymath.sqrt(x) if x >= 0 else pymath.nan),
    "math.rsqrt": _typed_unary(
        lambda x: 1 / pymath.sqrt(x) if x > 0 else (pymath.inf if x == 0 else pymath.nan)
    ),
    "math.tanh": _typed_unary(pymath.tanh),
    "math.erf": _typed_unary(pymath.erf),
    "math.absf": _typed_unary(abs),
    "math.floor": _typed_unary(lambda x: float(np.floor(x))),
    "math.ceil": _typed_unary(lambda x: float(np.ceil(x))),
    "math.sin": _typed_unary(pymath.sin),
    "math.cos": _typed_unary(pymath.cos),
    "math.tan": _typed_unary(pymath.tan),
    "math.atan": _typed_unary(pymath.atan),
    "math.asin": _typed_unary(lambda x: pymath.asin(x) if -1 <= x <= 1 else pymath.nan),
    "math.acos": _typed_unary(lambda x: pymath.acos(x) if -1 <= x <= 1 else pymath.nan),
    "math.sinh": _typed_unary(
        lambda x: pymath.sinh(x) if abs(x) < 710 else pymath.copysign(pymath.inf, x)
    ),
    "math.cosh": _typed_unary(lambda x: pymath.cosh(x) if abs(x) < 710 else pymath.inf),
    "math.asinh": _typed_unary(pymath.asinh),
    "math.acosh": _typed_unary(lambda x: pymath.acosh(x) if x >= 1 else pymath.nan),
    "math.atanh": _typed_unary(
        lambda x: (
            pymath.atanh(x)
            if -1 < x < 1
            else (pymath.copysign(pymath.inf, x) if abs(x) == 1 else pymath.nan)
        )
    ),
    "math.log2": _typed_unary(
        lambda x: pymath.log2(x) if x > 0 else (-pymath.inf if x == 0 else pymath.nan)
    ),
    "math.log10": _typed_unary(
        lambda x: pymath.log10(x) if x > 0 else (-pymath.inf if x == 0 else pymath.nan)
    ),
    "math.log1p": _typed_unary(
        lambda x: pymath.log1p(x) if x > -1 else (-pymath.inf if x == -1 else pymath.nan)
    ),
    "math.expm1": _typed_unary(lambda x: pymath.expm1(x) if x < 709 else pymath.inf),
    "math.trunc": _typed_unary(lambda x: float(np.trunc(x))),
    "math.round": _typed_unary(lambda x: float(np.copysign(np.floor(abs(x) + 0.5), x))),
    "math.roundeven": _typed_unary(lambda x: float(np.rint(x))),
    "math.powf": _binary(np.power),
    "math.atan2": _binary(np.arctan2),
    "math.copysign": _binary(np.copysign),
    "affine.apply": _affine_apply,
    "affine.min": _affine_apply,
    "affine.max": _affine_apply,
    "memref.load": _load,
    "vector.load": _load,
    "memref.store": _store,
    "memref.alloc": _alloc,
    "memref.alloca": _alloc,
    "memref.dealloc": _nothing,
    "memref.assume_alignment": _nothing,
    "memref.expand_shape": _view,
    "memref.collapse_shape": _view,
    "memref.cast": _view,
    "memref.subview": _subview,
    "memref.copy": _copy,
    "memref.dim": _dim,
    "vector.store": _vector_store,
    "vector.from_elements": _from_elements,
    "vector.extract": _vector_extract,
    "vector.insert": _vector_insert,
    "vector.to_elements": _to_elements,
    "vector.broadcast": _broadcast,
    "vector.bitcast": _bitcast,
    "llvm.extractvalue": _extractvalue,
    "vector.splat": _broadcast,
    "gpu.dynamic_shared_memory": _dynamic_shared,
    "memref.view": _byte_view,
    "nvgpu.device_async_copy": _async_copy,
    "nvgpu.device_async_create_group": _async_group,
    "nvgpu.device_async_wait": _async_wait,
}


# -- ops with regions ------------------------------------------------------------------------------


def _for(fn: _Function, op, ins, outs):
    lb, ub, step_, inits = ins[0], ins[1], ins[2], ins[3:]
    block = op.regions[0].blocks[0]
    iv, carried = fn.slot(block.arguments[0]), [fn.slot(a) for a in list(block.arguments)[1:]]
    steps, yielded = fn.block(block)

    def run(env):
        vals = [env[i] for i in inits]
        i, hi, st = env[lb], env[ub], env[step_]
        while i < hi:
            env[iv] = i
            for s, v in zip(carried, vals):
                env[s] = v
            yield from _run(steps, env)
            vals = [env[s] for s in yielded]
            i += st
        for s, v in zip(outs, vals):
            env[s] = v

    return run


def _if(fn: _Function, op, ins, outs):
    (cond,) = ins
    then = fn.block(op.regions[0].blocks[0])
    other = fn.block(op.regions[1].blocks[0]) if len(op.regions[1].blocks) else ([], [])

    def run(env):
        steps, yielded = then if env[cond] else other
        yield from _run(steps, env)
        for s, y in zip(outs, yielded):
            env[s] = env[y]

    return run


def _call(fn: _Function, op, ins, outs):
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value

    def run(env):
        target = fn.compiler.function(callee)
        sub = [None] * len(target.slots)
        for s, a in zip(target.args, ins):
            sub[s] = env[a]
        yield from _run(target.body[0], sub)
        for s, r in zip(outs, target.body[1]):
            env[s] = sub[r]

    return run


def _launch(fn: _Function, op, ins, outs):
    body = op.regions[0].blocks[0]
    args = list(body.arguments)
    attrs = op.attributes
    key = "workgroup_attributions"
    n_work = ir.IntegerAttr(attrs[key]).value if key in attrs else 0
    ids, sizes_args = [fn.slot(a) for a in args[:6]], [fn.slot(a) for a in args[6:12]]
    work = [(fn.slot(a), ir.MemRefType(a.type)) for a in args[12 : 12 + n_work]]
    private = [(fn.slot(a), ir.MemRefType(a.type)) for a in args[12 + n_work :]]
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    dims_at = segments[0]  # after the async dependencies: grid x y z, block x y z
    dims = ins[dims_at : dims_at + 6]
    dynamic = op.opview.dynamicSharedMemorySize
    dynamic = fn.slot(dynamic) if dynamic is not None else None
    steps, _ = fn.block(body)

    def buffer(t):
        return _new_buffer(t.shape, t.element_type)

    def run(env):
        gx, gy, gz, bx, by, bz = (env[d] for d in dims)
        for kz in range(gz):
            for ky in range(gy):
                for kx in range(gx):
                    shared = [(s, buffer(t)) for s, t in work]
                    raw = _new_bytes(env[dynamic] if dynamic is not None else 0)
                    threads = []
                    for tz in range(bz):
                        for ty in range(by):
                            for tx in range(bx):
                                local = list(env)
                                local[0] = (kx, ky, kz, tx, ty, tz, gx, gy, gz, bx, by, bz)
                                for s, v in zip(ids, (kx, ky, kz, tx, ty, tz)):
                                    local[s] = v
                                for s, v in zip(sizes_args, (gx, gy, gz, bx, by, bz)):
                                    local[s] = v
                                for s, arr in shared:
                                    local[s] = arr
                                for s, t in private:
                                    local[s] = buffer(t)
                                local[_COPIES_SLOT] = _Copies()
                                local[_SHARED_SLOT] = raw
                                threads.append(_thread(steps, local))
                    _schedule(threads, f"gpu.launch at {op.location}")
        return
        yield  # a generator, as every region op

    return run


def _thread(steps, env):
    """One thread of a block: its steps, then a check that no cp.async copy is in flight (the
    block's shared memory goes when its last thread ends)."""
    yield from _run(steps, env)
    copies = env[_COPIES_SLOT]
    if copies.open or copies.groups:
        raise InterpretError("a thread ended with cp.async copies not waited for")


_REGION_OPS = {"scf.for": _for, "scf.if": _if, "func.call": _call, "gpu.launch": _launch}


# -- collectives ----------------------------------------------------------------------------------


def _barrier(op, ins, outs):
    where = str(op.location)
    request = (_BARRIER, id(op), where)

    def run(env):
        yield request

    return run


def _shuffle(op, ins, outs):
    value, offset, width = ins
    result, valid = outs
    mode = str(op.attributes["mode"]).split()[-1].strip(">").split(".")[-1]

    def run(env):
        got = yield (_SHUFFLE, mode, env[value], env[offset], env[width])
        env[result], env[valid] = got

    return run


def _mma(op, ins, outs):
    a, b, c = ins
    (o,) = outs
    shape = [ir.IntegerAttr(v).value for v in ir.ArrayAttr(op.attributes["mmaShape"])]
    tf32 = "tf32Enabled" in op.attributes
    if shape != ([16, 8, 8] if tf32 else [16, 8, 16]):
        raise InterpretError(f"nvgpu.mma.sync of shape {shape} is not interpreted")

    def run(env):
        env[o] = yield (_MMA, env[a], env[b], env[c], tf32)

    return run


def _nvvm_mma(op, ins, outs):
    """nvvm.mma.sync m16n8k16 on bf16 pairs packed in i32 registers (A: 4, B: 2), f32 C (4):
    the same fragments as nvgpu's, returned as a 4-float struct."""
    if str(op.attributes["shape"]) != "#nvvm.shape<m = 16, n = 8, k = 16>":
        raise InterpretError(f"nvvm.mma.sync {op.attributes['shape']} is not interpreted")
    types = {str(op.attributes[k]) for k in ("multiplicandAPtxType", "multiplicandBPtxType")}
    if types != {"#nvvm.mma_type<bf16>"}:
        raise InterpretError(f"nvvm.mma.sync on {types} is not interpreted")
    bf16 = _DTYPES.get("bf16")
    if bf16 is None:
        raise InterpretError("nvvm.mma.sync on bf16 needs ml_dtypes")
    (o,) = outs

    def unpack(words):  # each i32 holds two bf16, the first in the low half
        return np.array(words, np.uint32).view(bf16).reshape(len(words), 2)

    def run(env):
        a, b, c = [env[i] for i in ins[:4]], [env[i] for i in ins[4:6]], [env[i] for i in ins[6:]]
        frag_c = np.array(c, np.float32).reshape(2, 2)
        d = yield (
            _MMA,
            unpack([int(x) & _MASK[32] for x in a]),
            unpack([int(x) & _MASK[32] for x in b]),
            frag_c,
            False,
        )
        env[o] = tuple(np.float32(x) for x in d.reshape(4))

    return run


def _ldmatrix(op, ins, outs):
    m, idx, (o,) = ins[0], ins[1:], outs
    tiles = ir.IntegerAttr(op.attributes["numTiles"]).value
    transpose = ir.BoolAttr(op.attributes["transpose"]).value
    shape = ir.VectorType(op.results[0].type).shape

    def run(env):
        env[o] = yield (_LDMATRIX, env[m], tuple(env[i] for i in idx), tiles, transpose, shape)

    return run


_COLLECTIVES = {
    "gpu.barrier": _barrier,
    "gpu.shuffle": _shuffle,
    "nvgpu.mma.sync": _mma,
    "nvgpu.ldmatrix": _ldmatrix,
    "nvvm.mma.sync": _nvvm_mma,
}


def _shuffle_warp(reqs: dict[int, tuple]) -> dict[int, tuple]:
    out = {}
    for lane, (_, mode, value, offset, width) in reqs.items():
        if mode == "xor":
            src = lane ^ offset
        elif mode == "down":
            src = lane + offset
        elif mode == "up":
            src = lane - offset
        elif mode == "idx":
            src = offset
        else:
            raise InterpretError(f"gpu.shuffle mode {mode} is not interpreted")
        ok = 0 <= src < width and src in reqs
        out[lane] = (reqs[src][2] if ok else value, ok)
    return out


def _tf32(x: np.ndarray) -> np.ndarray:
    """float32 as the tensor cores read it in TF32: the low 13 mantissa bits dropped."""
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _mma_warp(reqs: dict[int, tuple]) -> dict[int, Any]:
    """mma.sync m16n8k16 (16-bit operands) or m16n8k8 (TF32): the warp's fragments gathered into
    A, B and C as the PTX ISA lays them out, D = A B + C in float32, scattered back."""
    if sorted(reqs) != list(range(32)):
        raise InterpretError("nvgpu.mma.sync reached by only some lanes of a warp")
    tf32 = reqs[0][4]
    k = 8 if tf32 else 16
    a = np.zeros((16, k), np.float32)
    b = np.zeros((k, 8), np.float32)
    c = np.zeros((16, 8), np.float32)
    for lane, (_, fa, fb, fc, _) in reqs.items():
        g, t = lane // 4, lane % 4
        for r in range(4):
            if tf32:  # a_r: row g + 8 (r % 2), column t + 4 (r // 2)
                a[g + 8 * (r % 2), t + 4 * (r // 2)] = fa[r][0]
                continue
            for e in range(2):
                a[g + 8 * (r % 2), 2 * t + 8 * (r // 2) + e] = fa[r][e]
        for r in range(2):
            if tf32:  # b_r: row t + 4r, column g
                b[t + 4 * r, g] = fb[r][0]
            else:
                for e in range(2):
                    b[2 * t + 8 * r + e, g] = fb[r][e]
            for e in range(2):
                c[g + 8 * r, 2 * t + e] = fc[r][e]
    if tf32:
        a, b = _tf32(a), _tf32(b)
    d = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
    out = {}
    for lane, req in reqs.items():
        g, t = lane // 4, lane % 4
        frag = np.empty((2, 2), dtype=np.asarray(req[3]).dtype)
        for r in range(2):
            for e in range(2):
                frag[r, e] = d[g + 8 * r, 2 * t + e]
        out[lane] = frag
    return out


def _ldmatrix_warp(reqs: dict[int, tuple]) -> dict[int, Any]:
    """ldmatrix: lanes 8q .. 8q + 7 give the rows of 8x8 piece q (8 consecutive 16-bit elements
    from their address); lane (g, t) receives elements (g, 2t), (g, 2t + 1) of every piece (of
    its transpose with .trans)."""
    if sorted(reqs) != list(range(32)):
        raise InterpretError("nvgpu.ldmatrix reached by only some lanes of a warp")
    tiles, transpose, shape = reqs[0][3], reqs[0][4], reqs[0][5]
    pieces = []
    for q in range(tiles):
        rows = []
        for lane in range(8 * q, 8 * q + 8):
            arr, at = reqs[lane][1], reqs[lane][2]
            rows.append(arr[_window(arr, at, 8, 0, "nvgpu.ldmatrix row")])
        piece = np.stack(rows)
        pieces.append(piece.T if transpose else piece)
    out = {}
    for lane in reqs:
        g, t = lane // 4, lane % 4
        frag = np.stack([p[g, 2 * t : 2 * t + 2] for p in pieces]).reshape(shape)
        out[lane] = frag
    return out


def _schedule(threads: list, where: str) -> None:
    """Run one block's threads to completion, meeting at barriers and warp collectives. Each
    warp in turn runs as far as it can (to a barrier or its end) before the next one starts:
    the first warps run ahead of the last ones, so a read of shared memory that another warp
    has not written yet, or a write over a tile that another warp still reads, shows (the
    values read are NaN) unless a barrier orders them."""
    waiting: dict[int, tuple] = {}
    live = set(range(len(threads)))
    ready = set(live)  # to be advanced with nothing: not started, or released by a barrier
    warps = [range(w, min(w + 32, len(threads))) for w in range(0, len(threads), 32)]
    serve = {_SHUFFLE: _shuffle_warp, _MMA: _mma_warp, _LDMATRIX: _ldmatrix_warp}

    def advance(i: int, value: Any) -> None:
        try:
            waiting[i] = threads[i].send(value)
        except StopIteration:
            live.discard(i)
            waiting.pop(i, None)

    while live:
        progressed = False
        for lanes in warps:
            for i in lanes:
                if i in ready:
                    ready.discard(i)
                    advance(i, None)
                    progressed = True
            while True:  # the warp's collectives, until it reaches a barrier or its end
                at = [i for i in lanes if i in live]
                kinds = {waiting[i][0] for i in at}
                if len(kinds) != 1 or _BARRIER in kinds:
                    break
                base = lanes[0]
                results = serve[kinds.pop()]({i - base: waiting[i] for i in at})
                for lane, value in results.items():
                    advance(base + lane, value)
                progressed = True
        if not live:
            break
        at_barrier = [waiting[i] for i in live if waiting[i][0] == _BARRIER]
        if at_barrier and len(at_barrier) == len(live):
            if len({r[1] for r in at_barrier}) > 1 or len(live) != len(threads):
                raise InterpretError(
                    f"{where}: a barrier that not every thread of the block reaches "
                    f"({len(live)} of {len(threads)} threads live, "
                    f"{len({r[1] for r in at_barrier})} different barriers)"
                )
            ready = set(live)
            progressed = True
        if not progressed:
            kinds = sorted({waiting[i][0] for i in live})
            raise InterpretError(
                f"{where}: threads wait at different collectives ({', '.join(kinds)}): a "
                "barrier or warp operation that not every thread reaches"
            )


def _refuse_wgmma(module_op: ir.Operation) -> None:
    """Hopper's warpgroup MMA (sm_90a) reads shared memory through descriptors the interpreter
    does not model: say so before the first op it cannot run."""
    if contains_op(module_op, "nvgpu.warpgroup."):
        raise InterpretError(
            "wgmma kernels (nvgpu.warpgroup ops, built for sm_90a) are not interpreted; "
            "interpret a build for sm_90, whose kernels take mma.sync"
        )


def run_function(module_op: ir.Operation, name: str, *arrays: np.ndarray) -> list:
    """Interpret function `name` of `module_op` (after the CUDA pipeline's map stage) on numpy
    arrays for its memref arguments (written in place); returns its results."""
    _refuse_wgmma(module_op)
    fn = _Compiler(module_op).function(name)
    env: list = [None] * len(fn.slots)
    if len(arrays) != len(fn.args):
        raise InterpretError(f"@{name} takes {len(fn.args)} arguments, got {len(arrays)}")
    for s, a in zip(fn.args, arrays):
        env[s] = a
    with np.errstate(all="ignore"):  # IEEE results (inf, NaN), as the GPU computes them
        for request in _run(fn.body[0], env):
            raise InterpretError(f"@{name}: a collective ({request[0]}) outside any gpu.launch")
    return [env[s] for s in fn.body[1]]
