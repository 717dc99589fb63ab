"""High-level relax operators (`relax.op.*`): each returns a `Call` with inferred struct info."""

from relaxmlir.relax.op import builtin, nn  # noqa: F401
from relaxmlir.relax.op.binary import (  # noqa: F401
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
)
from relaxmlir.relax.op.create import (  # noqa: F401
    arange,
    full,
    full_like,
    ones,
    ones_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from relaxmlir.relax.op.index import (  # noqa: F401
    gather_elements,
    scatter_elements,
    strided_slice,
    take,
)
from relaxmlir.relax.op.linear_algebra import linear, matmul  # noqa: F401
from relaxmlir.relax.op.manipulate import (  # noqa: F401
    broadcast_to,
    concat,
    expand_dims,
    flatten,
    layout_transform,
    permute_dims,
    reshape,
    split,
    squeeze,
    tile,
)
from relaxmlir.relax.op.search import argmax, argmin, argsort, cumsum, where  # noqa: F401
from relaxmlir.relax.op.statistical import max, mean, min, prod, std, sum, variance  # noqa: F401
from relaxmlir.relax.op.unary import (  # noqa: F401
    abs,
    astype,
    bitwise_not,
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
