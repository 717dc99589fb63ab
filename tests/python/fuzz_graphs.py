"""Random op graphs for the differential fuzzer (tests/python/test_fuzz.py).

A `Graph` is plain data (inputs, nodes, outputs, values of the symbolic dims): its `repr` is
Python that rebuilds it, so a failing case shrunk by hypothesis pastes into a regression test
as `check_relax(Graph(...))` / `check_fx(Graph(...))`. tests/python/fuzz_builders.py builds
each graph with the BlockBuilder, as a torch module and in numpy.

The generator keeps every graph well defined in numpy, torch and relax: binary operands share a
dtype (relax does not promote), each value carries an interval bounding it (no overflow, no log
of a negative, no division near zero) and whether it is computed exactly. Float inputs are
multiples of 1/4, so sums, products and reshapes of them stay exact while they fit in the
mantissa; ops that are discontinuous in their input (floor, round, sign, comparisons, casts to
int, argmax) only take exact values, where the compiled result and numpy's cannot differ by
rounding.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import torch
from hypothesis import strategies as st

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int32", "int64")
DTYPES = (*FLOATS, *INTS, "bool")
MANTISSA = {"float32": 24, "float16": 11, "bfloat16": 8, "int32": 31, "int64": 63}
MANTISSA.update(uint8=8, bool=1)
LIMIT = {"float32": 1e6, "float16": 1e3, "bfloat16": 1e3, "int32": 2**20, "int64": 2**20}
LIMIT.update(uint8=255, bool=1)
# the ops that take bool or uint8 values (numpy and torch disagree on arithmetic on them)
SHAPE_OPS = {"reshape", "permute_dims", "expand_dims", "squeeze", "concat", "strided_slice"}
SHAPE_OPS |= {"broadcast_to", "take", "astype", "where", "tile"}
BOOL_OPS = SHAPE_OPS | {"logical_and", "logical_or", "logical_not", "equal", "not_equal"}
BOOL_OPS |= {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"}
UINT8_OPS = SHAPE_OPS | {"maximum", "minimum", "equal", "less"}
MAX_INPUTS = 8
NP_DTYPES = {"bfloat16": ml_dtypes.bfloat16}
TORCH_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


def np_dtype(dtype: str):
    return NP_DTYPES.get(dtype, np.dtype(dtype))


# -- the graph: plain data ------------------------------------------------------------------
@dataclass
class Input:
    shape: tuple  # ints, or names of symbolic dims
    dtype: str
    lo: float = -2.0  # values drawn in [lo, hi] (multiples of 1/4 for floats)
    hi: float = 2.0


@dataclass
class Node:
    op: str
    args: tuple  # value indices: inputs first, then nodes
    attrs: dict = field(default_factory=dict)


@dataclass
class Graph:
    inputs: list
    nodes: list
    outputs: list
    symbols: dict = field(default_factory=dict)  # symbolic dim -> its value at run time
    seed: int = 0  # input data

    def concrete(self, shape) -> tuple:
        return tuple(self.symbols[d] if isinstance(d, str) else d for d in shape)

    def input_arrays(self) -> list[np.ndarray]:
        gen = np.random.default_rng(self.seed)
        arrays = []
        for inp in self.inputs:
            shape = self.concrete(inp.shape)
            if inp.dtype == "bool":
                a = gen.integers(0, 2, shape).astype(bool)
            elif inp.dtype in FLOATS:
                q = gen.integers(int(inp.lo * 4), int(inp.hi * 4) + 1, shape)
                a = (q / 4).astype(np.float32).astype(np_dtype(inp.dtype))
            else:
                a = gen.integers(int(inp.lo), int(inp.hi) + 1, shape).astype(inp.dtype)
            arrays.append(np.asarray(a))
        return arrays

    def test_code(self, check: str = "check_relax") -> str:
        """A regression test to paste into tests/python/test_fuzz.py."""
        return f"def test_fuzz_regression():\n    {check}({self!r})\n"


# -- facts the generator keeps per value ----------------------------------------------------
@dataclass
class Info:
    shape: tuple
    dtype: str
    lo: float
    hi: float
    frac: int | None  # fraction bits of an exactly computed value; None: rounded somewhere

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def mag(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    @property
    def exact(self) -> bool:
        if self.frac is None or not all(map(math.isfinite, (self.lo, self.hi))):
            return False
        bits = math.ceil(math.log2(max(self.mag, 1.0))) + 1 + self.frac
        return bits <= MANTISSA[self.dtype]


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def broadcast(a: tuple, b: tuple) -> tuple:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    return tuple(y if x == 1 else x for x, y in zip(a, b))


def _frac(*infos: Info, extra: int = 0) -> int | None:
    if any(i.frac is None for i in infos):
        return None
    return max(i.frac for i in infos) + extra


# -- the generator ------------------------------------------------------------------------
class Builder:
    """Grows one graph from hypothesis draws."""

    def __init__(self, draw, symbols: dict, dtypes: tuple):
        self.draw, self.symbols, self.dtypes = draw, symbols, dtypes
        self.inputs: list[Input] = []
        self.nodes: list[Node] = []
        self.infos: list[Info] = []  # inputs' then nodes' (renumbered at the end)
        self.order: list[tuple[str, int]] = []  # ("in"|"node", index) per value

    def size(self, d) -> int:
        return self.symbols[d] if isinstance(d, str) else d

    def new_input(self, shape: tuple, dtype: str, lo: float = -2.0, hi: float = 2.0) -> int:
        if dtype == "bool":
            lo, hi = 0, 1
        elif dtype == "uint8":
            lo, hi = max(0, math.floor(lo)), math.ceil(hi)
        elif dtype not in FLOATS:
            lo, hi = math.floor(lo), math.ceil(hi)
        self.inputs.append(Input(tuple(shape), dtype, lo, hi))
        frac = 2 if dtype in FLOATS else 0
        self.infos.append(Info(tuple(shape), dtype, lo, hi, frac))
        self.order.append(("in", len(self.inputs) - 1))
        return len(self.infos) - 1

    def add(self, op: str, args: tuple, attrs: dict, info: Info) -> int | None:
        if not (abs(info.lo) <= LIMIT[info.dtype] and abs(info.hi) <= LIMIT[info.dtype]):
            return None  # would overflow the dtype (or lose all precision): not generated
        self.nodes.append(Node(op, tuple(args), dict(attrs)))
        self.infos.append(info)
        self.order.append(("node", len(self.nodes) - 1))
        return len(self.infos) - 1

    def dim(self) -> int | str:
        choices = [1, 2, 3, 4] + list(self.symbols)
        d = self.draw(st.sampled_from(choices))
        return 0 if self.draw(st.integers(0, 15)) == 0 else d

    def shape(self, max_rank: int = 3) -> tuple:
        rank = self.draw(st.integers(0, max_rank))
        return tuple(self.dim() for _ in range(rank))

    def static(self, shape) -> bool:
        return all(isinstance(d, int) for d in shape)

    def operand_like(self, x: int, dtype: str | None = None, lo=-2.0, hi=2.0) -> int:
        """An existing value or a new input whose shape broadcasts against x's."""
        info = self.infos[x]
        dtype = dtype or info.dtype
        same = [
            i
            for i, v in enumerate(self.infos)
            if v.dtype == dtype and i != x and _broadcastable(v.shape, info.shape)
        ]
        if same and self.draw(st.booleans()):
            return self.draw(st.sampled_from(same))
        kind = self.draw(st.sampled_from(["same", "trailing", "ones", "wider"]))
        shape = list(info.shape)
        if kind == "trailing":
            shape = shape[self.draw(st.integers(0, len(shape))) :]
        elif kind == "ones":
            shape = [1 if self.draw(st.booleans()) else d for d in shape]
        elif kind == "wider":
            shape = [self.draw(st.sampled_from([2, 3])) if d == 1 else d for d in shape]
            if len(shape) < 3 and self.draw(st.booleans()):
                shape = [self.draw(st.sampled_from([1, 2]))] + shape
        return self.new_input(tuple(shape), dtype, lo, hi)


def _broadcastable(a: tuple, b: tuple) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))


def _pick_axis(b: Builder, info: Info) -> int:
    a = b.draw(st.integers(0, info.ndim - 1))
    return a - info.ndim if b.draw(st.booleans()) else a  # negative axes too


# Each op: `gen(builder, x) -> value index or None` draws the attributes and other operands.
GENERATORS: dict = {}


def generator(*names: str):
    def deco(fn):
        for n in names:
            GENERATORS[n] = fn
        return fn

    return deco


# float unary ops: (interval map, domain check, keeps exactness)
_UNARY_FLOAT = {
    "exp": (lambda lo, hi: (math.exp(lo), math.exp(hi)), lambda i: i.hi <= 6),
    "expm1": (lambda lo, hi: (math.expm1(lo), math.expm1(hi)), lambda i: i.hi <= 6),
    "tanh": (lambda lo, hi: (-1.0, 1.0), None),
    "sigmoid": (lambda lo, hi: (0.0, 1.0), None),
    "sin": (lambda lo, hi: (-1.0, 1.0), None),
    "cos": (lambda lo, hi: (-1.0, 1.0), None),
    "erf": (lambda lo, hi: (-1.0, 1.0), None),
    "log": (lambda lo, hi: (math.log(lo), math.log(hi)), lambda i: i.lo >= 0.25),
    "log2": (lambda lo, hi: (math.log2(lo), math.log2(hi)), lambda i: i.lo >= 0.25),
    "log10": (lambda lo, hi: (math.log10(lo), math.log10(hi)), lambda i: i.lo >= 0.25),
    "log1p": (lambda lo, hi: (math.log1p(lo), math.log1p(hi)), lambda i: i.lo >= -0.75),
    "sqrt": (lambda lo, hi: (math.sqrt(lo), math.sqrt(hi)), lambda i: i.lo >= 0.25),
    "rsqrt": (lambda lo, hi: (1 / math.sqrt(hi), 1 / math.sqrt(lo)), lambda i: i.lo >= 0.25),
    "gelu": (lambda lo, hi: (min(lo, 0) - 0.2, max(hi, 0)), None),
    "silu": (lambda lo, hi: (min(lo, 0) - 0.3, max(hi, 0)), None),
}


@generator(*_UNARY_FLOAT)
def _gen_unary_float(b: Builder, x: int, op: str):
    info = b.infos[x]
    rng, ok = _UNARY_FLOAT[op]
    if not is_float(info.dtype) or (ok and not ok(info)):
        return None
    lo, hi = rng(info.lo, info.hi)
    return b.add(op, (x,), {}, Info(info.shape, info.dtype, lo, hi, None))


@generator("relu", "abs", "negative", "square", "leaky_relu", "clip")
def _gen_unary_exact(b: Builder, x: int, op: str):
    info = b.infos[x]
    lo, hi, frac, attrs = info.lo, info.hi, info.frac, {}
    if op in ("relu", "leaky_relu") and not is_float(info.dtype):
        return None
    if op == "relu":
        lo, hi = max(lo, 0.0), max(hi, 0.0)
    elif op == "abs":
        lo, hi = (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), info.mag
    elif op == "negative":
        lo, hi = -hi, -lo
    elif op == "square":
        lo, hi, frac = 0.0, info.mag**2, _frac(info, extra=info.frac or 0)
    elif op == "leaky_relu":
        alpha = b.draw(st.sampled_from([0.01, 0.25]))
        frac = _frac(info, extra=2) if alpha == 0.25 else None
        attrs, lo = {"alpha": alpha}, min(lo * alpha, 0.0)
    else:
        a = b.draw(st.sampled_from([-1.5, -0.5, 0.0]))
        c = b.draw(st.sampled_from([0.0, 0.75, 1.0]))
        if not is_float(info.dtype):
            a, c = math.floor(a), math.ceil(c)
        attrs, lo, hi = {"min": a, "max": c}, a, c
    return b.add(op, (x,), attrs, Info(info.shape, info.dtype, lo, hi, frac))


@generator("floor", "ceil", "round", "trunc", "sign")
def _gen_rounding(b: Builder, x: int, op: str):
    info = b.infos[x]
    if not is_float(info.dtype) or not info.exact:
        return None
    lo, hi = (-1.0, 1.0) if op == "sign" else (math.floor(info.lo), math.ceil(info.hi))
    return b.add(op, (x,), {}, Info(info.shape, info.dtype, lo, hi, 0))


def _interval_mul(a: Info, c: Info) -> tuple[float, float]:
    corners = [a.lo * c.lo, a.lo * c.hi, a.hi * c.lo, a.hi * c.hi]
    return min(corners), max(corners)


@generator(
    "add", "subtract", "multiply", "maximum", "minimum", "divide", "power", "floor_divide",
    "floor_mod",
)  # fmt: skip
def _gen_binary(b: Builder, x: int, op: str):
    info = b.infos[x]
    if op == "divide" and not is_float(info.dtype):
        return None
    if op == "power" and not (info.lo >= 0.25 and info.hi <= 4 or info.dtype in INTS):
        return None
    if op == "power" and info.mag > 4:
        return None
    if info.dtype == "bool":
        return None
    # the other operand: away from zero for divisions, a small exponent for power
    if op in ("divide", "floor_divide", "floor_mod"):
        lo, hi = (0.5, 2.0) if is_float(info.dtype) else (1, 3)
        if b.draw(st.booleans()):
            lo, hi = -hi, -lo
        y = b.new_input(_other_shape(b, info), info.dtype, lo, hi)
    elif op == "power":  # integers: no negative exponents (numpy refuses them)
        lo, hi = (-1.0, 2.0) if is_float(info.dtype) else (0, 3)
        y = b.new_input(_other_shape(b, info), info.dtype, lo, hi)
    else:
        y = b.operand_like(x)
    o = b.infos[y]
    if op in ("divide", "floor_divide", "floor_mod") and not (o.lo > 0 or o.hi < 0):
        return None
    shape = broadcast(info.shape, o.shape)
    if op in ("add", "subtract"):
        r = (
            (info.lo - o.hi, info.hi - o.lo)
            if op == "subtract"
            else (info.lo + o.lo, info.hi + o.hi)
        )
        frac = _frac(info, o)
    elif op == "multiply":
        r, frac = _interval_mul(info, o), (None if _frac(info, o) is None else info.frac + o.frac)
    elif op in ("maximum", "minimum"):
        r, frac = (min(info.lo, o.lo), max(info.hi, o.hi)), _frac(info, o)
    elif op == "divide":
        m = info.mag / min(abs(o.lo), abs(o.hi))
        r, frac = (-m, m), None
    elif op == "power" and info.dtype in INTS:
        m = max(info.mag, 1) ** o.hi
        r, frac = (-m, m), 0
    elif op == "power":
        m = max(info.hi, 1 / info.lo) ** max(abs(o.lo), abs(o.hi))
        r, frac = (0.0, m), None
    elif op == "floor_divide":
        if not (info.exact and o.exact):
            return None
        m = math.ceil(info.mag / min(abs(o.lo), abs(o.hi))) + 1
        r, frac = (-m, m), 0
    else:  # floor_mod
        if not (info.exact and o.exact):
            return None
        m = max(abs(o.lo), abs(o.hi))
        r, frac = (-m, m), (None if is_float(info.dtype) else 0)
    return b.add(op, (x, y), {}, Info(shape, info.dtype, r[0], r[1], frac))


def _other_shape(b: Builder, info: Info) -> tuple:
    shape = list(info.shape)
    if b.draw(st.booleans()):
        shape = [1 if b.draw(st.booleans()) else d for d in shape]
    return tuple(shape[b.draw(st.integers(0, len(shape))) :])


@generator("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
def _gen_compare(b: Builder, x: int, op: str):
    info = b.infos[x]
    if not info.exact or info.dtype == "bool":
        return None
    y = b.operand_like(x)
    o = b.infos[y]
    if not o.exact:
        return None
    return b.add(op, (x, y), {}, Info(broadcast(info.shape, o.shape), "bool", 0, 1, 0))


@generator("logical_and", "logical_or", "logical_not")
def _gen_logical(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.dtype != "bool":
        return None
    if op == "logical_not":
        return b.add(op, (x,), {}, info)
    y = b.operand_like(x)
    return b.add(op, (x, y), {}, Info(broadcast(info.shape, b.infos[y].shape), "bool", 0, 1, 0))


@generator("where")
def _gen_where(b: Builder, x: int, op: str):
    info = b.infos[x]
    cond = b.operand_like(x, dtype="bool")
    y = b.operand_like(x)
    o, c = b.infos[y], b.infos[cond]
    if not _broadcastable(c.shape, o.shape):
        return None
    shape = broadcast(broadcast(c.shape, info.shape), o.shape)
    info2 = Info(shape, info.dtype, min(info.lo, o.lo), max(info.hi, o.hi), _frac(info, o))
    return b.add(op, (cond, x, y), {}, info2)


@generator("astype")
def _gen_astype(b: Builder, x: int, op: str):
    info = b.infos[x]
    to = b.draw(st.sampled_from([d for d in b.dtypes if d != info.dtype] + ["uint8", "bool"]))
    if to == info.dtype:
        return None
    if is_float(info.dtype) and not is_float(to) and not info.exact:
        return None  # truncation (or != 0) of a rounded value
    if to == "uint8" and not (info.lo >= 0 and info.hi < 256):
        return None  # negative floats to uint8 differ between numpy, torch and C
    lo, hi, frac = info.lo, info.hi, info.frac
    if to == "bool":
        lo, hi, frac = 0, 1, 0
    elif not is_float(to):
        lo, hi, frac = math.trunc(lo), math.trunc(hi), 0
    return b.add(op, (x,), {"dtype": to}, Info(info.shape, to, lo, hi, frac))


def _nonempty(b: Builder, info: Info, axes) -> bool:
    axes = range(info.ndim) if axes is None else axes
    return all(b.size(info.shape[a]) > 0 for a in axes)


@generator("sum", "mean", "max", "min", "prod")
def _gen_reduce(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.dtype == "bool" or (op == "mean" and not is_float(info.dtype)):
        return None
    if info.ndim and b.draw(st.booleans()):
        axes = sorted(b.draw(st.sets(st.sampled_from(range(info.ndim)), min_size=1)))
        if b.draw(st.booleans()):
            axes = [a - info.ndim for a in axes]
        axis = axes
    else:
        axes, axis = list(range(info.ndim)), None
    pos = [a % max(info.ndim, 1) for a in axes]
    if op in ("max", "min") and not _nonempty(b, info, pos):
        return None  # numpy and torch have no identity for max/min
    keepdims = b.draw(st.booleans())
    shape = tuple(
        1 if i in pos else d for i, d in enumerate(info.shape) if keepdims or i not in pos
    )
    count = math.prod(b.size(info.shape[a]) for a in pos)
    lo, hi, frac = info.lo, info.hi, info.frac
    if op == "sum":
        lo, hi = min(lo * count, lo, 0.0), max(hi * count, hi, 0.0)
    elif op == "prod":
        if count > 8 or info.mag > 2:
            return None
        m = info.mag**count
        lo, hi, frac = -m, max(m, 1.0), (None if frac is None else frac * max(count, 1))
    elif op == "mean":
        frac = None
        if count == 0:
            return None  # NaN with a warning in numpy
    return b.add(
        op, (x,), {"axis": axis, "keepdims": keepdims}, Info(shape, info.dtype, lo, hi, frac)
    )


@generator("argmax", "argmin")
def _gen_argreduce(b: Builder, x: int, op: str):
    info = b.infos[x]
    if not info.exact or info.dtype == "bool":
        return None  # ties must be ties in both
    if info.ndim and b.draw(st.booleans()):
        axis = _pick_axis(b, info)
        pos = [axis % info.ndim]
    else:
        axis, pos = None, list(range(info.ndim))
    if not _nonempty(b, info, pos):
        return None
    keepdims = b.draw(st.booleans())
    shape = tuple(
        1 if i in pos else d for i, d in enumerate(info.shape) if keepdims or i not in pos
    )
    n = math.prod(b.size(d) for d in info.shape)
    return b.add(op, (x,), {"axis": axis, "keepdims": keepdims}, Info(shape, "int64", 0, n, 0))


@generator("cumsum")
def _gen_cumsum(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.ndim == 0 or info.dtype == "bool":
        return None
    axis = _pick_axis(b, info)
    n = b.size(info.shape[axis])
    lo, hi = min(info.lo * n, info.lo, 0.0), max(info.hi * n, info.hi, 0.0)
    return b.add(op, (x,), {"axis": axis}, Info(info.shape, info.dtype, lo, hi, info.frac))


@generator("softmax", "log_softmax")
def _gen_softmax(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.ndim == 0 or not is_float(info.dtype) or info.mag > 30:
        return None
    axis = _pick_axis(b, info)
    lo, hi = (0.0, 1.0) if op == "softmax" else (-2 * info.mag - 10, 0.0)
    return b.add(op, (x,), {"axis": axis}, Info(info.shape, info.dtype, lo, hi, None))


@generator("layer_norm")
def _gen_layer_norm(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.ndim == 0 or not is_float(info.dtype) or info.mag > 100:
        return None
    k = b.draw(st.integers(1, info.ndim))
    norm = info.shape[info.ndim - k :]
    if not b.static(norm) or math.prod(norm) == 0:
        return None  # torch takes normalized_shape as ints; no statistics of nothing
    gamma = b.new_input(norm, info.dtype, 0.5, 1.5)
    beta = b.new_input(norm, info.dtype)
    m = 1.5 * math.sqrt(max(math.prod(norm), 1)) + 2
    attrs = {"axes": list(range(info.ndim - k, info.ndim)), "eps": 1e-5}
    return b.add(op, (x, gamma, beta), attrs, Info(info.shape, info.dtype, -m, m, None))


@generator("matmul")
def _gen_matmul(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.ndim == 0 or info.dtype == "bool" or info.dtype == "uint8":
        return None
    k = info.shape[-1]
    n = b.draw(st.sampled_from([1, 2, 3, 5]))
    kind = b.draw(st.sampled_from(["vector", "matrix", "batched"]))
    if kind == "vector":
        wshape = (k,)
    elif kind == "matrix" or info.ndim < 2:
        wshape = (k, n)
    else:
        wshape = tuple(b.draw(st.sampled_from([1, d])) for d in info.shape[:-2]) + (k, n)
    w = b.new_input(wshape, info.dtype)
    o = b.infos[w]
    a_batch = info.shape[:-2] if info.ndim >= 2 else ()
    w_batch = wshape[:-2]
    shape = broadcast(a_batch, w_batch)
    shape += (info.shape[-2],) if info.ndim >= 2 else ()
    shape += (wshape[-1],) if len(wshape) >= 2 else ()
    kk = max(b.size(k), 1)
    m = kk * info.mag * o.mag
    frac = None if _frac(info, o) is None else info.frac + o.frac
    return b.add(op, (x, w), {}, Info(shape, info.dtype, -m, m, frac))


@generator("reshape")
def _gen_reshape(b: Builder, x: int, op: str):
    info = b.infos[x]
    if not b.static(info.shape):
        return None
    total = math.prod(info.shape)
    shape = _factor(b, total)
    if total > 0 and len(shape) and b.draw(st.booleans()):
        shape = list(shape)
        shape[b.draw(st.integers(0, len(shape) - 1))] = -1
    out = tuple(
        total // max(1, math.prod(d for d in shape if d != -1)) if d == -1 else d for d in shape
    )
    return b.add(
        op, (x,), {"shape": tuple(shape)}, Info(out, info.dtype, info.lo, info.hi, info.frac)
    )


def _factor(b: Builder, total: int) -> tuple:
    if total == 0:
        return tuple(b.draw(st.sampled_from([[0], [0, 3], [2, 0], [1, 0, 2]])))
    dims, rest = [], total
    for p in (2, 3, 5, 7):
        while rest % p == 0:
            dims.append(p)
            rest //= p
    dims += [rest] if rest > 1 else []
    out = []
    for d in dims:
        if out and b.draw(st.booleans()):
            out[-1] *= d
        else:
            out.append(d)
    if b.draw(st.booleans()):
        out.insert(b.draw(st.integers(0, len(out))), 1)
    return tuple(out)


@generator("permute_dims")
def _gen_permute(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.ndim < 2:
        return None
    axes = b.draw(st.permutations(list(range(info.ndim))))
    shape = tuple(info.shape[a] for a in axes)
    return b.add(
        op, (x,), {"axes": list(axes)}, Info(shape, info.dtype, info.lo, info.hi, info.frac)
    )


@generator("expand_dims")
def _gen_expand(b: Builder, x: int, op: str):
    info = b.infos[x]
    axis = b.draw(st.integers(-info.ndim - 1, info.ndim))
    shape = list(info.shape)
    shape.insert(axis % (info.ndim + 1), 1)
    return b.add(
        op, (x,), {"axis": axis}, Info(tuple(shape), info.dtype, info.lo, info.hi, info.frac)
    )


@generator("squeeze")
def _gen_squeeze(b: Builder, x: int, op: str):
    info = b.infos[x]
    ones = [i for i, d in enumerate(info.shape) if d == 1]
    if not ones:
        return None
    axis = b.draw(st.sampled_from(ones))
    shape = tuple(d for i, d in enumerate(info.shape) if i != axis)
    return b.add(op, (x,), {"axis": axis}, Info(shape, info.dtype, info.lo, info.hi, info.frac))


@generator("concat")
def _gen_concat(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.ndim == 0:
        return None
    axis = _pick_axis(b, info)
    pos = axis % info.ndim
    others = [x] if b.draw(st.booleans()) else []
    if not others:
        shape = list(info.shape)
        shape[pos] = b.draw(st.sampled_from([0, 1, 2, 3]))
        others = [b.new_input(tuple(shape), info.dtype)]
    args = (x, *others)
    ds = [b.infos[a].shape[pos] for a in args]
    total = sum(ds) if all(isinstance(d, int) for d in ds) else None
    if total is None:
        return None  # the sum of symbolic dims is not a dim of the fuzzer's graphs
    shape = tuple(total if i == pos else d for i, d in enumerate(info.shape))
    infos = [b.infos[a] for a in args]
    lo, hi = min(i.lo for i in infos), max(i.hi for i in infos)
    return b.add(op, args, {"axis": axis}, Info(shape, info.dtype, lo, hi, _frac(*infos)))


@generator("strided_slice")
def _gen_slice(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.ndim == 0:
        return None
    axis = b.draw(st.integers(0, info.ndim - 1))
    begin = b.draw(st.integers(-4, 4))
    end = b.draw(st.sampled_from([-3, -1, 0, 1, 2, 3, 5, 2**31 - 1]))
    stride = b.draw(st.sampled_from([1, 1, 2, 3]))
    n = b.size(info.shape[axis])
    size = len(range(n)[slice(begin, end, stride)])
    d = info.shape[axis]
    if isinstance(d, str):
        # symbolic dims keep symbolic slices only when python slicing is a whole dim
        if (begin, end, stride) != (0, 2**31 - 1, 1):
            return None
        size = d
    shape = tuple(size if i == axis else s for i, s in enumerate(info.shape))
    attrs = {"axis": axis, "begin": begin, "end": end, "stride": stride}
    return b.add(op, (x,), attrs, Info(shape, info.dtype, info.lo, info.hi, info.frac))


@generator("broadcast_to")
def _gen_broadcast_to(b: Builder, x: int, op: str):
    info = b.infos[x]
    if not b.static(info.shape):
        return None
    shape = tuple(b.draw(st.sampled_from([1, 2, 3])) if d == 1 else d for d in info.shape)
    if len(shape) < 3 and b.draw(st.booleans()):
        shape = (2,) + shape
    return b.add(op, (x,), {"shape": shape}, Info(shape, info.dtype, info.lo, info.hi, info.frac))


@generator("take")
def _gen_take(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.ndim == 0:
        return None
    axis = b.draw(st.integers(0, info.ndim - 1))
    n = b.size(info.shape[axis])
    if n == 0 or isinstance(info.shape[axis], str):
        return None
    k = b.draw(st.sampled_from([0, 1, 2, 4]))
    idx = b.new_input((k,), b.draw(st.sampled_from(INTS)), 0, n - 1)
    shape = tuple(k if i == axis else s for i, s in enumerate(info.shape))
    return b.add(op, (x, idx), {"axis": axis}, Info(shape, info.dtype, info.lo, info.hi, info.frac))


@generator("tile")
def _gen_tile(b: Builder, x: int, op: str):
    info = b.infos[x]
    reps = tuple(b.draw(st.sampled_from([1, 2, 3])) for _ in range(b.draw(st.integers(1, 3))))
    n = max(len(reps), info.ndim)
    full = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - info.ndim) + info.shape
    if any(isinstance(d, str) and r != 1 for d, r in zip(shape, full)):
        return None  # n * 2 is not a dim of the fuzzer's graphs
    shape = tuple(d if r == 1 else d * r for d, r in zip(shape, full))
    return b.add(op, (x,), {"repeats": reps}, Info(shape, info.dtype, info.lo, info.hi, info.frac))


@generator("tril", "triu")
def _gen_trilu(b: Builder, x: int, op: str):
    info = b.infos[x]
    if info.ndim < 2:
        return None
    k = b.draw(st.integers(-2, 2))
    lo, hi = min(info.lo, 0), max(info.hi, 0)
    return b.add(op, (x,), {"k": k}, Info(info.shape, info.dtype, lo, hi, info.frac))


@generator("variance")
def _gen_variance(b: Builder, x: int, op: str):
    info = b.infos[x]
    if not is_float(info.dtype) or info.ndim == 0 or info.mag > 30:
        return None
    axes = sorted(b.draw(st.sets(st.sampled_from(range(info.ndim)), min_size=1)))
    if not _nonempty(b, info, axes):
        return None  # the mean of nothing
    keepdims = b.draw(st.booleans())
    shape = tuple(
        1 if i in axes else d for i, d in enumerate(info.shape) if keepdims or i not in axes
    )
    attrs = {"axis": axes, "keepdims": keepdims}
    return b.add(op, (x,), attrs, Info(shape, info.dtype, 0.0, info.mag**2, None))


@generator("argsort")
def _gen_argsort(b: Builder, x: int, op: str):
    info = b.infos[x]
    if not info.exact or info.ndim == 0 or info.dtype == "bool":
        return None  # ties must be ties in both
    axis = _pick_axis(b, info)
    attrs = {"axis": axis, "descending": b.draw(st.booleans())}
    n = b.size(info.shape[axis])
    return b.add(op, (x,), attrs, Info(info.shape, "int64", 0, max(n - 1, 0), 0))


@generator("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")
def _gen_bitwise(b: Builder, x: int, op: str):
    info = b.infos[x]
    if is_float(info.dtype):
        return None
    m = 2 ** math.ceil(math.log2(max(info.mag, 1) + 1))  # results stay within the bit width
    if info.dtype == "bool":
        m = 1
    if op == "bitwise_not":
        return b.add(op, (x,), {}, Info(info.shape, info.dtype, -m - 1, m, 0))
    y = b.operand_like(x)
    o = b.infos[y]
    m = max(m, 2 ** math.ceil(math.log2(max(o.mag, 1) + 1)))
    lo = 0 if info.dtype == "bool" else -m
    shape = broadcast(info.shape, o.shape)
    return b.add(op, (x, y), {}, Info(shape, info.dtype, lo, m if lo else 1, 0))


# op families: the short run fuzzes each with its ops first (a few cases cover them all)
FAMILIES = {
    "unary": [*_UNARY_FLOAT, "relu", "abs", "negative", "square", "leaky_relu", "clip"],
    "rounding": ["floor", "ceil", "round", "trunc", "sign", "astype"],
    "binary": ["add", "subtract", "multiply", "maximum", "minimum", "divide", "power"],
    "logic": ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"],
    "select": ["where", "logical_and", "logical_or", "logical_not", "floor_divide", "floor_mod"],
    "bitwise": ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "equal", "astype"],
    "reduce": ["sum", "mean", "max", "min", "prod", "argmax", "argmin", "cumsum"],
    "shape": ["reshape", "permute_dims", "expand_dims", "squeeze", "concat", "strided_slice"],
    "layout": ["tile", "tril", "triu", "argsort", "variance", "broadcast_to"],
    "nn": ["softmax", "log_softmax", "layer_norm", "matmul", "broadcast_to", "take"],
}


@st.composite
def graphs(draw, max_ops: int = 4, family: str | None = None, dtypes: tuple = DTYPES):
    """A random graph of 1 to `max_ops` ops (of `family` mostly, when given)."""
    symbols = {"n": draw(st.sampled_from([1, 2, 3, 5, 0]))} if draw(st.booleans()) else {}
    b = Builder(draw, symbols, dtypes)
    first_dtype = draw(st.sampled_from(dtypes))
    lo, hi = draw(st.sampled_from([(-2.0, 2.0), (0.25, 2.0), (-4.0, 1.0)]))
    b.new_input(b.shape(), first_dtype, lo, hi)
    n_ops = draw(st.integers(1, max_ops))
    names = sorted(GENERATORS)
    # NOTE: hypothesis draws the first of a list far more often (~6x): a seeded python random
    # spreads the ops evenly (shrinking still drops ops and simplifies shapes and attributes)
    pick = random.Random(draw(st.integers(0, 2**32 - 1)))
    tries = 0
    while len(b.nodes) < n_ops and tries < 40:
        tries += 1
        # the newest value most of the time: chains rather than forests
        x = len(b.infos) - 1 if draw(st.integers(0, 3)) else draw(st.integers(0, len(b.infos) - 1))
        op = pick.choice(FAMILIES[family] if family and pick.random() < 0.7 else names)
        if len(b.inputs) > MAX_INPUTS - 2:
            break  # an op adds two inputs at most
        dtype = b.infos[x].dtype
        if (dtype == "bool" and op not in BOOL_OPS) or (dtype == "uint8" and op not in UINT8_OPS):
            continue
        GENERATORS[op](b, x, op)
    return _finish(b, draw)


def _finish(b: Builder, draw) -> Graph:
    # renumber: inputs first, then nodes, in creation order
    index = {}
    for i, (kind, k) in enumerate(b.order):
        if kind == "in":
            index[i] = k
    for i, (kind, k) in enumerate(b.order):
        if kind == "node":
            index[i] = len(b.inputs) + k
    nodes = [Node(n.op, tuple(index[a] for a in n.args), n.attrs) for n in b.nodes]
    used = {a for n in nodes for a in n.args}
    values = len(b.inputs) + len(nodes)
    outputs = [v for v in range(len(b.inputs), values) if v not in used]
    if not outputs:
        outputs = [values - 1]
    return Graph(b.inputs, nodes, outputs, b.symbols, draw(st.integers(0, 2**16)))
