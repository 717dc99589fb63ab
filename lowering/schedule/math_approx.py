"""Polynomial `math.exp`, `math.tanh`, `math.erf` (and `math.powf` by a constant integer) on f32
(scalars and vectors), in scheduled PrimFuncs.

`convert-math-to-llvm` turns a vector `math.exp` into `llvm.intr.exp`, which LLVM scalarizes into
one `expf` libm call per lane (softmax of a 4x128x128 attention: 117 us of a 1 ms encoder layer).
The MLIR polynomial-approximation patterns are not reachable from Python, so the expansion is
written here: Cephes' `expf`, the scheme MLIR's `math-polynomial-approximation` uses.

    n = round(x * log2(e));  r = x - n * ln2  (two-part ln2, FMAs)
    exp(x) = 2^n * (1 + r + r^2 * P(r))   (degree-5 P; 2^n built in the exponent bits)

x is clamped to [X_MIN, log(FLT_MAX)], where every product stays a normal float; below X_MIN
the result is 0 (flushed: exp of x in [-103.3, -87.34] is subnormal, under 1.2e-38), above
log(FLT_MAX) +inf, NaN stays NaN. Relative error below 2.5e-7 on normal results. Products that
round into the subnormal range cost a microcode assist per lane: with exp kept down to -104, a
decode step's softmax over a 1024-row cache with most positions masked (-inf) took 16.3 us
instead of 9 (4 x 3 x 1024 scores).

tanh and erf (GELU) are odd rational functions of x on a clamped range, the approximations of
Eigen / XLA (`generic_fast_tanh_float`, `ErfImpl32`): absolute error below 3e-7 in f32.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, math

LOG2E = 1.44269504088896341
LN2_HI = 0.693359375
LN2_LO = -2.12194440e-4
CEPHES_P = (1.9875691500e-4, 1.3981999507e-3, 8.3333452819e-3, 4.1665795894e-2, 1.6666665459e-1)
CEPHES_P5 = 5.0000001201e-1
# the f32 just above log(FLT_MIN) = -126 ln 2: from there n >= -126 and r >= 0, so 2^n * exp(r)
# is normal (but for the last bits of r's rounding)
X_MIN = -87.33654022216797
X_MAX = 88.7228394  # log(FLT_MAX): above it exp overflows to +inf


def _splat(t: ir.Type, value: float) -> ir.Value:
    elem = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
    attr = (
        ir.FloatAttr.get(elem, value)
        if isinstance(elem, ir.F32Type)
        else ir.IntegerAttr.get(elem, int(value))
    )
    if isinstance(t, ir.VectorType):
        attr = ir.DenseElementsAttr.get_splat(ir.VectorType(t), attr)
    return arith.ConstantOp(t, attr).result


def _with_elem(t: ir.Type, elem: ir.Type) -> ir.Type:
    if isinstance(t, ir.VectorType):
        return ir.VectorType.get(ir.VectorType(t).shape, elem)
    return elem


def expand_exp(x: ir.Value) -> ir.Value:
    """Build the polynomial exp of f32 `x` at the current insertion point."""
    t = x.type
    i32 = _with_elem(t, ir.IntegerType.get_signless(32))
    c = lambda v: _splat(t, v)
    fma = math.fma
    xc = arith.minimumf(arith.maximumf(x, c(X_MIN)), c(X_MAX))
    n = math.roundeven(arith.mulf(xc, c(LOG2E)))
    r = fma(n, c(-LN2_HI), xc)
    r = fma(n, c(-LN2_LO), r)
    p = c(CEPHES_P[0])
    for coef in CEPHES_P[1:] + (CEPHES_P5,):
        p = fma(p, r, c(coef))
    r2 = arith.mulf(r, r)
    y = fma(p, r2, arith.addf(r, c(1.0)))
    # 2^n as two factors 2^(n >> 1) * 2^(n - (n >> 1)): n spans [-150, 128], beyond one exponent.
    ni = arith.fptosi(i32, n)
    n1 = arith.shrsi(ni, _splat(i32, 1))
    for part in (n1, arith.subi(ni, n1)):
        bits = arith.shli(arith.addi(part, _splat(i32, 127)), _splat(i32, 23))
        y = arith.mulf(y, arith.bitcast(t, bits))
    above = arith.cmpf(arith.CmpFPredicate.OGT, x, c(X_MAX))
    below = arith.cmpf(arith.CmpFPredicate.OLT, x, c(X_MIN))
    return arith.select(above, c(float("inf")), arith.select(below, c(0.0), y))


TANH_CLAMP = 7.90531110763549805  # tanh(x) rounds to +-1 in f32 beyond
TANH_TINY = 0.0004  # below, tanh(x) = x to f32 precision
TANH_P = (
    -2.76076847742355e-16,
    2.00018790482477e-13,
    -8.60467152213735e-11,
    5.12229709037114e-08,
    1.48572235717979e-05,
    6.37261928875436e-04,
    4.89352455891786e-03,
)
TANH_Q = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
ERF_CLAMP = 4.0  # erf(x) rounds to +-1 in f32 beyond
ERF_P = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
ERF_Q = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)


def _odd_rational(x: ir.Value, clamp: float, p_coefs, q_coefs) -> ir.Value:
    """x * P(x^2) / Q(x^2) on x clamped to [-clamp, clamp] (Horner, FMAs)."""
    t = x.type

    def c(v):
        return _splat(t, v)

    xc = arith.minimumf(arith.maximumf(x, c(-clamp)), c(clamp))
    x2 = arith.mulf(xc, xc)
    p = c(p_coefs[0])
    for coef in p_coefs[1:]:
        p = math.fma(x2, p, c(coef))
    q = c(q_coefs[0])
    for coef in q_coefs[1:]:
        q = math.fma(x2, q, c(coef))
    return arith.divf(arith.mulf(xc, p), q)


def expand_tanh(x: ir.Value) -> ir.Value:
    y = _odd_rational(x, TANH_CLAMP, TANH_P, TANH_Q)
    tiny = arith.cmpf(arith.CmpFPredicate.OLT, math.absf(x), _splat(x.type, TANH_TINY))
    return arith.select(tiny, x, y)


def expand_erf(x: ir.Value) -> ir.Value:
    return _odd_rational(x, ERF_CLAMP, ERF_P, ERF_Q)


def constant_float(v: ir.Value) -> float | None:
    """The value of a scalar f32 constant, or of a splat vector of one (None otherwise)."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name == "vector.broadcast":
        return constant_float(op.operands[0])
    if op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.DenseElementsAttr):
        if not attr.is_splat:
            return None
        attr = attr.get_splat_value()
    return attr.value if isinstance(attr, ir.FloatAttr) else None


MAX_POW_MULTIPLIES = 8  # x^n by squaring: (bits of n - 1) squares + (set bits - 1) multiplies


def expand_powf(x: ir.Value, y: ir.Value) -> ir.Value | None:
    """x^n for a constant integer n as multiplies (square and multiply): GPT-2's GELU computes
    `pow(x, 3.0)`, which LLVM turns into one `powf` libm call per lane (7 ms of a 128x3072
    activation at one thread). None for other exponents (they stay libm calls)."""
    n = constant_float(y)
    if n is None or not n.is_integer():  # also refuses inf and nan
        return None
    n = int(n)
    if abs(n).bit_length() + abs(n).bit_count() - 2 > MAX_POW_MULTIPLIES:
        return None
    if n == 0:
        return _splat(x.type, 1.0)
    result, base, e = None, x, abs(n)
    while e:
        if e & 1:
            result = base if result is None else arith.mulf(result, base)
        e >>= 1
        if e:
            base = arith.mulf(base, base)
    return arith.divf(_splat(x.type, 1.0), result) if n < 0 else result


EXPANSIONS = {
    "math.exp": expand_exp,
    "math.tanh": expand_tanh,
    "math.erf": expand_erf,
    "math.powf": expand_powf,
}


def approximate_math(root: ir.Operation) -> int:
    """Replace every f32 op of `EXPANSIONS` under `root` by its expansion; returns how many."""
    found = []

    def visit(op):
        op = op.operation
        if op.name in EXPANSIONS:
            t = op.results[0].type
            elem = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
            if isinstance(elem, ir.F32Type):
                found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    done = 0
    for op in found:
        with ir.InsertionPoint(op), op.location:
            new = EXPANSIONS[op.name](*op.operands)
        if new is None:  # no cheaper form for these operands
            continue
        op.results[0].replace_all_uses_with(new)
        op.erase()
        done += 1
    return done


def contract_fma(root: ir.Operation) -> int:
    """`addf(x, mulf(a, b))` on vectors -> `math.fma(a, b, x)` when the product has no other use.

    Vectorized convolutions (and elementwise bodies) keep the payload's separate multiply and add,
    and LLVM does not contract them without fast-math flags: twice the instructions and a
    rounding step more than the FMA that BLAS libraries use."""
    found = []

    def visit(op):
        op = op.operation
        if op.name == "arith.addf" and isinstance(op.results[0].type, ir.VectorType):
            for i, v in enumerate(op.operands):
                owner = v.owner
                if isinstance(owner, ir.Block) or owner.operation.name != "arith.mulf":
                    continue
                if len(list(v.uses)) == 1:
                    found.append((op, owner.operation, 1 - i))
                    break
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    # The addend is read at the rewrite, not at the walk: in a chain `(a*b + c*d) + e*f` it is
    # the previous add, which the previous rewrite has replaced and erased (a handle taken
    # before that dangles: heap corruption in a depthwise convolution's 9-tap sum).
    for add, mul, addend in found:
        with ir.InsertionPoint(add), add.location:
            new = math.fma(mul.operands[0], mul.operands[1], add.operands[addend])
        add.results[0].replace_all_uses_with(new)
        add.erase()
        mul.erase()
    return len(found)
