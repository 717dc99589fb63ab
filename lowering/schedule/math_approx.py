"""Polynomial `math.exp` on f32 (scalars and vectors), expanded in scheduled PrimFuncs.

`convert-math-to-llvm` turns a vector `math.exp` into `llvm.intr.exp`, which LLVM scalarizes into
one `expf` libm call per lane (softmax of a 4x128x128 attention: 117 us of a 1 ms encoder layer).
The MLIR polynomial-approximation patterns are not reachable from Python, so the expansion is
written here: Cephes' `expf`, the scheme MLIR's `math-polynomial-approximation` uses.

    n = round(x * log2(e));  r = x - n * ln2  (two-part ln2, FMAs)
    exp(x) = 2^n * (1 + r + r^2 * P(r))   (degree-5 P; 2^n built in the exponent bits)

x is clamped to [-104, log(FLT_MAX)] (exp(-inf) = 0, subnormal results kept); above it +inf, NaN
stays NaN. Relative error below 2.5e-7 on normal results.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, math

LOG2E = 1.44269504088896341
LN2_HI = 0.693359375
LN2_LO = -2.12194440e-4
CEPHES_P = (1.9875691500e-4, 1.3981999507e-3, 8.3333452819e-3, 4.1665795894e-2, 1.6666665459e-1)
CEPHES_P5 = 5.0000001201e-1
X_MIN = -104.0  # exp rounds to 0 below (the smallest subnormal is exp(-103.28))
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
    return arith.select(above, c(float("inf")), y)


def approximate_math(root: ir.Operation) -> int:
    """Replace every f32 `math.exp` under `root` by `expand_exp`; returns how many."""
    found = []

    def visit(op):
        op = op.operation
        if op.name == "math.exp":
            t = op.results[0].type
            elem = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
            if isinstance(elem, ir.F32Type):
                found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            new = expand_exp(op.operands[0])
        op.results[0].replace_all_uses_with(new)
        op.erase()
    return len(found)
