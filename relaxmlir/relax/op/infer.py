"""Result types of relax ops from their own inference rules, for IR that did not come from them.

Text (`relaxmlir-opt`), hand-built `Call`s and rewrites can declare any result type on a relax op.
`check(op)` rebuilds the op through its `relax.op.*` function (the same code the BlockBuilder
uses) from the op's operand types and attributes, and compares what that infers with what the op
declares. The checks are registered with `relax-verify` (lowering/verify.py) on import, so
`relaxmlir-opt --relax-verify`, `relax.build` and `relax-legalize-ops` all refuse such ops.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from mlir import ir

from dialects import shape as sh
from dialects.irdl_dsl import Attr
from dialects.relax import CORE_OPS, RELAX, mlir_op_name, op_class
from lowering.verify import register_type_check
from relaxmlir.relax import op as _op
from relaxmlir.relax.analysis import as_call, value_shape
from relaxmlir.relax.expr import Call, Var
from relaxmlir.relax.struct_info import (
    StructInfo,
    TensorStructInfo,
    flatten,
)

Rebuild = Callable[[Call], Call]


def _by_name(fn) -> Rebuild:
    """Operands positionally, attributes by keyword (most ops)."""
    return lambda call: fn(*call.args, **call.attrs)


def _axis_or_none(fn) -> Rebuild:
    """argmax/argmin store an optional axis as a list ([] = over all elements)."""

    def rebuild(call: Call) -> Call:
        attrs = dict(call.attrs)
        axis = attrs.pop("axis", [])
        return fn(*call.args, axis=axis[0] if axis else None, **attrs)

    return rebuild


def _bool_operands(fn, positions: tuple[int, ...]) -> Rebuild:
    """bool tensors are bytes in the IR (i8): read those operands back as bool."""

    def rebuild(call: Call) -> Call:
        args = list(call.args)
        for i in positions:
            sinfo = args[i].struct_info
            if isinstance(sinfo, TensorStructInfo) and sinfo.dtype == "int8":
                name = getattr(args[i], "name_hint", f"operand{i}")  # a Constant has none
                var = Var(name, TensorStructInfo(sinfo.shape, "bool"))
                var.values = getattr(args[i], "values", None)
                args[i] = var
        return fn(*args, **call.attrs)

    return rebuild


def _concat(call: Call) -> Call:
    return _op.concat(list(call.args), **call.attrs)


def _full(call: Call) -> Call:
    attrs = call.attrs
    return _op.full(attrs["shape"], call.args[0], attrs.get("dtype"))


def _split(call: Call) -> Call:
    attrs = call.attrs
    return _op.split(call.args[0], attrs["indices"], attrs.get("axis", 0))


# mlir op name -> how to rebuild the op through its relax.op function; filled from the relax.op
# namespaces, with the irregular ones overridden below.
REBUILD: dict[str, Rebuild] = {}


def _fill_table() -> None:
    for namespace, prefix in ((_op, "relax."), (_op.nn, "relax.nn.")):
        for name, fn in vars(namespace).items():
            if callable(fn) and not name.startswith("_") and not isinstance(fn, type):
                op_name = mlir_op_name(prefix + name)
                if op_name in RELAX.ops and op_name not in CORE_OPS:
                    REBUILD[op_name] = _by_name(fn)
    REBUILD.update(
        {
            "relax.argmax": _axis_or_none(_op.argmax),
            "relax.argmin": _axis_or_none(_op.argmin),
            "relax.logical_and": _bool_operands(_op.logical_and, (0, 1)),
            "relax.logical_or": _bool_operands(_op.logical_or, (0, 1)),
            "relax.logical_xor": _bool_operands(_op.logical_xor, (0, 1)),
            "relax.logical_not": _bool_operands(_op.logical_not, (0,)),
            "relax.where": _bool_operands(_op.where, (0,)),
            "relax.concat": _concat,
            "relax.full": _full,
            "relax.split": _split,
        }
    )


_fill_table()


def _declared_attrs(call: Call) -> Call:
    """`call` with only the attributes its op class declares: an op may carry discardable
    attributes of other passes (locations, notes) that are no argument of its rule."""
    cls = op_class(call.op)
    declared = {key for key, _ in cls.fields(Attr)} if cls is not None else set(call.attrs)
    attrs = {k: v for k, v in call.attrs.items() if k in declared}
    return Call(call.op, call.args, attrs, call.struct_info)


def infer(op: ir.Operation) -> StructInfo:
    """What the op's own rule infers from its operands and attributes (TypeError/ValueError
    from the rule when they are invalid)."""
    return REBUILD[op.name](_declared_attrs(as_call(op))).struct_info


def _same_dim(a: sh.Dim, b: sh.Dim) -> bool:
    """Equal ints, or expressions equal at random values of their symbols (two unrelated
    symbols are different dims; `n*2` and `2*n` are the same)."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    names = sorted(sh.symbols(a) | sh.symbols(b))
    rng = random.Random(0)
    for _ in range(4):
        env = {n: rng.randint(2, 1 << 16) for n in names}
        if sh.evaluate(a, env) != sh.evaluate(b, env):
            return False
    return True


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def check(op: ir.Operation) -> str | None:
    """None when the op's declared results are what its rule infers, else the message."""
    try:
        inferred = flatten(infer(op))
    except (TypeError, ValueError) as exc:
        return f"is invalid: {exc}"
    results = list(op.results)
    if len(inferred) != len(results):
        return f"declares {len(results)} results, but its operands give {len(inferred)}"
    for i, (want, result) in enumerate(zip(inferred, results)):
        declared = str(result.type)
        expected = str(want.mlir_type())
        if declared != expected:
            return f"result #{i} is declared {declared}, but its operands give {expected}"
        shape = value_shape(result)
        for got, dim in zip(shape, want.shape):
            anonymous = isinstance(got, str) and got.startswith("_anon")
            if not anonymous and not _same_dim(got, dim):
                return (
                    f"result #{i} is declared with shape {_shape_text(shape)} (relax.shape), "
                    f"but its operands give {_shape_text(want.shape)}"
                )
    return None


def check_call(call: Call) -> None:
    """The BlockBuilder's check at `emit`: a hand-made `Call` of a relax op must carry the struct
    info its rule infers (ValueError naming the op, the inferred and the declared struct info)."""
    rebuild = REBUILD.get(call.op)
    if rebuild is None:
        return
    try:
        want = rebuild(_declared_attrs(call)).struct_info
    except (TypeError, ValueError) as exc:
        raise ValueError(f"'{call.op}' is invalid: {exc}") from None
    if not _same_sinfo(want, call.struct_info):
        raise ValueError(
            f"'{call.op}' declares struct info {call.struct_info}, but its arguments give {want}"
        )


def _same_sinfo(a: Any, b: Any) -> bool:
    fa, fb = flatten(a), flatten(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if x.dtype != y.dtype or len(x.shape) != len(y.shape):
            return False
        if not all(_same_dim(p, q) for p, q in zip(x.shape, y.shape)):
            return False
    return True


for _name in REBUILD:
    register_type_check(_name, check)
