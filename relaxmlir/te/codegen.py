"""Scalar code generation for TE expressions: rule tables from expression ops to arith/math.

`Emitter` lowers one expression DAG at the current insertion point, either as a value of its
element type or as an `index` (for tensor subscripts). The per-compute `linalg.generic`
assembly that drives it lives in `prim_func.py`.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

from mlir import ir
from mlir.dialects import arith, linalg, math, scf, tensor

from relaxmlir.te import expr as E
from relaxmlir.te.expr import Expr

_FLOATS = {"float16": ir.F16Type, "bfloat16": ir.BF16Type, "float32": ir.F32Type,
           "float64": ir.F64Type}
_INT_DIV = ("truncdiv", "truncmod", "floordiv", "floormod")


def mlir_type(dtype: str) -> ir.Type:
    """TE dtype -> MLIR element type (unsigned ints are signless; ops pick the semantics)."""
    if dtype in _FLOATS:
        return _FLOATS[dtype].get()
    return ir.IntegerType.get_signless(E.bits(dtype))


def storage_type(dtype: str) -> ir.Type:
    """Element type of tensors: bool is stored as i8 (0/1), like numpy and DLPack.

    NOTE: MLIR 22's memref-to-LLVM lowering asserts on `memref<...xi1>` stores, so i1 exists
    only as a scalar inside bodies; reads and writes convert at the tensor boundary.
    """
    return ir.IntegerType.get_signless(8) if dtype == "bool" else mlir_type(dtype)


def from_storage(v: ir.Value, dtype: str) -> ir.Value:
    if dtype != "bool":
        return v
    return arith.cmpi(arith.CmpIPredicate.ne, v, arith.constant(v.type, 0))


def to_storage(v: ir.Value, dtype: str) -> ir.Value:
    return arith.extui(storage_type(dtype), v) if dtype == "bool" else v


def constant(value, dtype: str) -> ir.Value:
    ty = mlir_type(dtype)
    if E.kind(dtype) == "f":
        return arith.constant(ty, ir.FloatAttr.get(ty, float(value)))
    n = E.bits(dtype)
    v = int(value) & ((1 << n) - 1)
    if n > 1 and v >= 1 << (n - 1):  # signless attrs want the two's complement value
        v -= 1 << n
    return arith.constant(ty, ir.IntegerAttr.get(ty, v))


def index_constant(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), int(value))


def _float_floordiv(a, b):
    return math.floor(arith.divf(a, b))


def _float_floormod(a, b):
    return arith.subf(a, arith.mulf(math.floor(arith.divf(a, b)), b))


def _int_floormod(a, b):
    # NOTE: a - floordiv(a, b) * b keeps TVM's sign-of-divisor result for negative operands
    return arith.subi(a, arith.muli(arith.floordivsi(a, b), b))


def _uint_pow(a, b):
    """Square and multiply over the exponent's bits, wrapping as torch does."""
    t = a.type
    one = arith.constant(t, 1)
    result, base = one, a
    for k in range(ir.IntegerType(t).width):
        bit = arith.andi(arith.shrui(b, arith.constant(t, k)), one)
        taken = arith.cmpi(arith.CmpIPredicate.ne, bit, arith.constant(t, 0))
        result = arith.select(taken, arith.muli(result, base), result)
        base = arith.muli(base, base)
    return result


def _int_pow(a, b):
    """`_uint_pow`; a negative exponent truncates `1 / a**-b`: 1 for a == 1, -1 or 1 for
    a == -1 (odd or even b), 0 otherwise (torch's integer pow)."""
    t = a.type
    zero, one, minus_one = (arith.constant(t, v) for v in (0, 1, -1))
    odd = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(b, one), zero)
    inverse = arith.select(
        arith.cmpi(arith.CmpIPredicate.eq, a, minus_one), arith.select(odd, minus_one, one), zero
    )
    inverse = arith.select(arith.cmpi(arith.CmpIPredicate.eq, a, one), one, inverse)
    negative = arith.cmpi(arith.CmpIPredicate.slt, b, zero)
    return arith.select(negative, inverse, _uint_pow(a, b))


def _total(divide: Callable, signed: bool) -> Callable:
    """An integer division or remainder defined for every operand, as numpy's: `x // 0` and
    `x % 0` are 0, and `MIN // -1` wraps to MIN (`MIN % -1` is 0). The hardware's divide traps
    on both: a zero divisor in the user's data ended the process with SIGFPE."""
    eq = arith.CmpIPredicate.eq

    def build(a, b):
        t = a.type
        zero = arith.constant(t, 0)
        by_zero = arith.cmpi(eq, b, zero)
        bad = by_zero
        if signed:
            lowest = arith.constant(t, -(1 << (ir.IntegerType(t).width - 1)))
            minus_one = arith.constant(t, -1)
            wraps = arith.andi(arith.cmpi(eq, a, lowest), arith.cmpi(eq, b, minus_one))
            bad = arith.ori(by_zero, wraps)
        # MIN over a divisor of 1 is MIN (its wrapped quotient), its remainder 0
        out = divide(a, arith.select(bad, arith.constant(t, 1), b))
        return arith.select(by_zero, zero, out)

    return build


# op -> (float, signed int, unsigned int or bool) builder; None means "not for that kind"
BINARY: Dict[str, tuple] = {
    "add": (arith.addf, arith.addi, arith.addi),
    "sub": (arith.subf, arith.subi, arith.subi),
    "mul": (arith.mulf, arith.muli, arith.muli),
    "div": (arith.divf, None, None),
    "truncdiv": (None, _total(arith.divsi, True), _total(arith.divui, False)),
    "truncmod": (arith.remf, _total(arith.remsi, True), _total(arith.remui, False)),
    "floordiv": (_float_floordiv, _total(arith.floordivsi, True), _total(arith.divui, False)),
    "floormod": (_float_floormod, _total(_int_floormod, True), _total(arith.remui, False)),
    "min": (arith.minimumf, arith.minsi, arith.minui),
    "max": (arith.maximumf, arith.maxsi, arith.maxui),
    "pow": (math.powf, _int_pow, _uint_pow),
    "atan2": (math.atan2, None, None),
    "copysign": (math.copysign, None, None),
    "and": (None, arith.andi, arith.andi),
    "or": (None, arith.ori, arith.ori),
    "xor": (None, arith.xori, arith.xori),
}

# comparison -> (cmpf predicate, signed cmpi predicate, unsigned cmpi predicate)
COMPARE: Dict[str, tuple] = {
    "lt": ("olt", "slt", "ult"), "le": ("ole", "sle", "ule"),
    "gt": ("ogt", "sgt", "ugt"), "ge": ("oge", "sge", "uge"),
    "eq": ("oeq", "eq", "eq"), "ne": ("une", "ne", "ne"),
}
_CMPF = {name: getattr(arith.CmpFPredicate, name.upper()) for name, _, _ in COMPARE.values()}
_CMPI = {name: getattr(arith.CmpIPredicate, name)
         for _, signed, unsigned in COMPARE.values() for name in (signed, unsigned)}


def _sigmoid(x):
    one = arith.constant(x.type, ir.FloatAttr.get(x.type, 1.0))
    return arith.divf(one, arith.addf(one, math.exp(arith.negf(x))))


# float intrinsics: te name -> builder on one value (integer inputs are rejected in expr.py)
UNARY: Dict[str, Callable] = {
    "exp": math.exp, "exp2": math.exp2, "log": math.log, "log2": math.log2,
    "log10": math.log10, "log1p": math.log1p, "sqrt": math.sqrt, "rsqrt": math.rsqrt,
    "tanh": math.tanh, "erf": math.erf, "sin": math.sin, "cos": math.cos, "tan": math.tan,
    "asin": math.asin, "acos": math.acos, "atan": math.atan, "sinh": math.sinh,
    "cosh": math.cosh, "asinh": math.asinh, "acosh": math.acosh, "atanh": math.atanh,
    "sigmoid": _sigmoid,
    "floor": math.floor, "ceil": math.ceil, "round": math.roundeven, "trunc": math.trunc,
    "abs": math.absf,
}


_NATIVE_HALF = ("abs", "floor", "ceil", "round", "trunc", "sqrt")


def _column(dtype: str) -> int:
    return {"f": 0, "i": 1, "u": 2, "b": 2}[E.kind(dtype)]


def cast_value(v: ir.Value, src: str, dst: str) -> ir.Value:
    """Convert between dtypes with C semantics (sign from the source, bool as `!= 0`)."""
    ks, kd, ty = E.kind(src), E.kind(dst), mlir_type(dst)
    if kd == "b":
        zero = constant(0, src)
        if ks == "f":
            return arith.cmpf(_CMPF["une"], v, zero)
        return arith.cmpi(_CMPI["ne"], v, zero)
    if ks == "f" and kd == "f":
        if E.bits(dst) == E.bits(src):  # float16 <-> bfloat16: through f32 (exact), one rounding
            v, src = arith.extf(ir.F32Type.get(), v), "float32"
        return arith.extf(ty, v) if E.bits(dst) > E.bits(src) else arith.truncf(ty, v)
    if kd == "f":
        return arith.sitofp(ty, v) if ks == "i" else arith.uitofp(ty, v)
    if ks == "f":
        return arith.fptosi(ty, v) if kd == "i" else arith.fptoui(ty, v)
    if E.bits(dst) == E.bits(src):
        return v
    if E.bits(dst) < E.bits(src):
        return arith.trunci(ty, v)
    return arith.extsi(ty, v) if ks == "i" else arith.extui(ty, v)


def cast_to_index(v: ir.Value, dtype: str) -> ir.Value:
    if E.kind(dtype) not in "iub":
        raise ValueError(f"te: expected an integer index, got ({dtype})")
    unsigned = E.kind(dtype) in "ub"
    return (arith.index_castui if unsigned else arith.index_cast)(ir.IndexType.get(), v)


class Emitter:
    """Lowers expressions at the current insertion point.

    Parameters
    ----------
    symbols : symbol name -> `index` value (bound from argument shapes at function entry)
    tensors : id(Tensor) -> tensor value, for reads done with `tensor.extract`
    loops : id(loop var) -> (linalg dimension, lower bound); empty outside a linalg body
    slots : id(read node) -> block argument, for reads that are `ins` operands
    block : the linalg body block (where `linalg.index` ops go)
    """

    def __init__(self, symbols: dict, tensors: dict, loops: Optional[dict] = None,
                 slots: Optional[dict] = None, block: Optional[ir.Block] = None):
        self.symbols, self.tensors = symbols, tensors
        self.loops, self.slots, self.block = loops or {}, slots or {}, block
        self.dims: dict = {}
        self.memo = [{}]  # one scope per region: values made in an scf.if branch stay there
        self._unsafe: dict = {}

    def _lookup(self, key):
        for scope in reversed(self.memo):
            if key in scope:
                return scope[key]
        return None

    def value(self, e: Expr) -> ir.Value:
        """`e` as a value of its element type."""
        hit = self._lookup((id(e), False))
        if hit is None:
            hit = VALUE_RULES[e.op](self, e)
            self.memo[-1][(id(e), False)] = hit
        return hit

    def index(self, e) -> ir.Value:
        """An integer expression (or python int) as an `index` value, for subscripts/sizes."""
        if isinstance(e, int):
            return index_constant(e)
        hit = self._lookup((id(e), True))
        if hit is None:
            rule = INDEX_RULES.get(e.op)
            hit = rule(self, e) if rule else cast_to_index(self.value(e), e.dtype)
            self.memo[-1][(id(e), True)] = hit
        return hit

    def unsafe(self, e: Expr) -> bool:
        """Whether evaluating `e` eagerly could fault: a guarded read or an integer division."""
        if id(e) not in self._unsafe:
            own = (e.op == "read" and id(e) not in self.slots) or (
                e.op in _INT_DIV and E.kind(e.dtype) != "f")
            self._unsafe[id(e)] = own or any(self.unsafe(a) for a in e.args)
        return self._unsafe[id(e)]

    def in_region(self, block: ir.Block, e: Expr) -> ir.Value:
        with ir.InsertionPoint(block):
            self.memo.append({})
            v = self.value(e)
            self.memo.pop()
            scf.YieldOp([v])
        return v


def _var_index(em: Emitter, e: Expr) -> ir.Value:
    if id(e) in em.loops:
        dim, lo = em.loops[id(e)]
        if dim not in em.dims:  # NOTE: linalg.index must sit directly in the linalg body
            with ir.InsertionPoint.at_block_begin(em.block):
                em.dims[dim] = linalg.IndexOp(dim).result
        v = em.dims[dim]
        return v if isinstance(lo, int) and lo == 0 else arith.addi(v, em.index(lo))
    if e.arg not in em.symbols:
        raise ValueError(f"te.create_prim_func: variable '{e.arg}' is not bound by any "
                         f"argument shape (known symbols: {sorted(em.symbols)})")
    return em.symbols[e.arg]


def _binary(em: Emitter, e: Expr) -> ir.Value:
    a, b = (em.value(x) for x in e.args)
    dtype = e.args[0].dtype
    fn = BINARY[e.op][_column(dtype)]
    if fn is None:
        raise ValueError(f"te: '{e.op}' is not defined for ({dtype})")
    if e.op in E.FLOAT_BINARY_INTRINSICS and E.bits(dtype) < 32:
        # as for the unary intrinsics: libm has no f16/bf16 atan2, so it runs in f32
        f32 = ir.F32Type.get()
        return arith.truncf(a.type, fn(arith.extf(f32, a), arith.extf(f32, b)))
    return fn(a, b)


def _compare(em: Emitter, e: Expr) -> ir.Value:
    a, b = (em.value(x) for x in e.args)
    col = _column(e.args[0].dtype)
    if col == 0:
        return arith.cmpf(_CMPF[COMPARE[e.op][0]], a, b)
    return arith.cmpi(_CMPI[COMPARE[e.op][col]], a, b)


def _neg(em: Emitter, e: Expr) -> ir.Value:
    x = em.value(e.args[0])
    if E.kind(e.dtype) == "f":
        return arith.negf(x)
    return arith.subi(constant(0, e.dtype), x)


def _call(em: Emitter, e: Expr) -> ir.Value:
    x = em.value(e.args[0])
    if e.arg == "abs" and E.kind(e.dtype) != "f":
        # max(x, 0 - x), not math.absi: plain arith vectorizes to any rank (math-to-llvm lowers
        # absi on 1-D vectors only); abs(INT_MIN) wraps to INT_MIN either way, as in torch
        return arith.maxsi(x, arith.subi(constant(0, e.dtype), x))
    if E.kind(e.dtype) == "f" and E.bits(e.dtype) < 32 and e.arg not in _NATIVE_HALF:
        # NOTE: libm has no f16/bf16 entry points, so transcendentals run in f32 (as TVM does)
        f32 = ir.F32Type.get()
        return arith.truncf(x.type, UNARY[e.arg](arith.extf(f32, x)))
    return UNARY[e.arg](x)


def _read(em: Emitter, e: Expr) -> ir.Value:
    if id(e) in em.slots:
        return from_storage(em.slots[id(e)], e.dtype)
    v = tensor.extract(em.tensors[id(e.arg)], [em.index(i) for i in e.args])
    return from_storage(v, e.dtype)


def _select(em: Emitter, e: Expr) -> ir.Value:
    cond = em.value(e.args[0])
    if not (em.unsafe(e.args[1]) or em.unsafe(e.args[2])):
        return arith.select(cond, em.value(e.args[1]), em.value(e.args[2]))
    # NOTE: scf.if so that the branch not taken never reads out of bounds (padding)
    op = scf.IfOp(cond, [mlir_type(e.dtype)], has_else=True)
    em.in_region(op.then_block, e.args[1])
    em.in_region(op.else_block, e.args[2])
    return op.result


def _reduce(em: Emitter, e: Expr) -> ir.Value:
    raise ValueError(f"te: reduction {e!r} must be at the top level of a compute")


VALUE_RULES: Dict[str, Callable[[Emitter, Expr], ir.Value]] = {
    "const": lambda em, e: constant(e.arg, e.dtype),
    "var": lambda em, e: (arith.index_castui if E.kind(e.dtype) == "u" else arith.index_cast)(
        mlir_type(e.dtype), em.index(e)),
    "read": _read,
    "cast": lambda em, e: cast_value(em.value(e.args[0]), e.args[0].dtype, e.dtype),
    "neg": _neg,
    "select": _select,
    "call": _call,
    "reduce": _reduce,
    **{op: _binary for op in BINARY},
    **{op: _compare for op in COMPARE},
}


def _index_binary(fn: Callable) -> Callable:
    return lambda em, e: fn(em.index(e.args[0]), em.index(e.args[1]))


# integer subscripts computed directly on `index` (signed semantics, like TVM's index math)
INDEX_RULES: Dict[str, Callable[[Emitter, Expr], ir.Value]] = {
    "const": lambda em, e: index_constant(e.arg),
    "var": _var_index,
    "add": _index_binary(arith.addi),
    "sub": _index_binary(arith.subi),
    "mul": _index_binary(arith.muli),
    "truncdiv": _index_binary(arith.divsi),
    "truncmod": _index_binary(arith.remsi),
    "floordiv": _index_binary(arith.floordivsi),
    "floormod": _index_binary(_int_floormod),
    "min": _index_binary(arith.minsi),
    "max": _index_binary(arith.maxsi),
    "neg": lambda em, e: arith.subi(index_constant(0), em.index(e.args[0])),
    "cast": lambda em, e: em.index(e.args[0]) if E.kind(e.args[0].dtype) in "iu"
    else cast_to_index(em.value(e), e.dtype),
}


def combine(combiner: str, dtype: str, acc: ir.Value, v: ir.Value) -> ir.Value:
    """The reduction update `acc <- acc (+|max|min) v`."""
    op = "add" if combiner == "sum" else combiner
    if E.kind(dtype) == "b" and op == "add":
        op = "or"
    return BINARY[op][_column(dtype)](acc, v)
