"""TOPI: the operator inventory written once with `te`; `LegalizeOps` builds PrimFuncs from it.

Each function takes `te.Tensor`s (and python attributes) and returns `te.Tensor`(s), like TVM's
`tvm.topi`; `te.create_prim_func` or `bb.emit_te` turn the result into a linalg PrimFunc.
"""

from relaxmlir.topi import nn  # noqa: F401
from relaxmlir.topi.broadcast import (  # noqa: F401
    add,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    divide,
    equal,
    floor_divide,
    floor_mod,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_and,
    logical_or,
    maximum,
    minimum,
    multiply,
    not_equal,
    power,
    subtract,
    where,
)
from relaxmlir.topi.math import (  # noqa: F401
    abs,
    bitwise_not,
    cast,
    ceil,
    clip,
    cos,
    erf,
    exp,
    expm1,
    floor,
    log,
    log1p,
    log2,
    log10,
    logical_not,
    negative,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    tanh,
    trunc,
)
from relaxmlir.topi.nn.dense import matmul  # noqa: F401
from relaxmlir.topi.reduction import (  # noqa: F401
    argmax,
    argmin,
    max,
    mean,
    min,
    prod,
    sum,
    variance,
)
from relaxmlir.topi.scan import argsort, cumsum, gather_elements, scatter_elements  # noqa: F401
from relaxmlir.topi.transform import (  # noqa: F401
    arange,
    broadcast_to,
    concatenate,
    expand_dims,
    full,
    reshape,
    split,
    squeeze,
    strided_slice,
    take,
    tile,
    transpose,
    trilu,
)
