"""`relax.dpl`: a dataflow-pattern language over relax graphs (TVM's `tvm.relax.dpl`).

Patterns are small trees matched against an SSA value of a relax function: `is_op("relax.matmul")(
wildcard(), is_const())` matches a value produced by `relax.matmul` whose first operand is anything
and whose second is a `relax.constant`. Alternatives (`a | b`), conjunctions (`a & b`), attribute,
dtype and shape constraints, and arbitrary predicates compose the same way. A match reports which
value each pattern node matched and which operations it covers, which is what `FuseOpsByPattern`
needs to cut the covered operations out into a composite function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlir import ir

from dialects import relax as rx
from relaxmlir.ir import Function, attr_value
from relaxmlir.relax.struct_info import dtype_of

__all__ = [
    "DFPattern",
    "Match",
    "has_attr",
    "has_dtype",
    "has_shape",
    "is_const",
    "is_op",
    "is_tuple_get_item",
    "is_var",
    "wildcard",
]


@dataclass
class Match:
    """The result of a successful match: the value bound to each pattern node, and the
    operations whose results the pattern's call nodes matched (in no particular order)."""

    bindings: dict = field(default_factory=dict)  # id(pattern) -> ir.Value
    ops: list = field(default_factory=list)  # ir.Operation covered by call patterns

    def __getitem__(self, pattern: DFPattern) -> ir.Value:
        return self.bindings[id(pattern)]

    def get(self, pattern: DFPattern) -> ir.Value | None:
        return self.bindings.get(id(pattern))

    def _copy(self) -> Match:
        return Match(dict(self.bindings), list(self.ops))


def _owner(value: ir.Value) -> ir.Operation | None:
    """The operation defining `value`, or None for a block argument."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if isinstance(owner, ir.OpView) else owner


def arg_name(value: ir.Value) -> str | None:
    """The `relax.name` of a function parameter (None for other values or unnamed ones)."""
    if not isinstance(value.owner, ir.Block):
        return None
    func = value.owner.owner
    func = func.operation if func is not None else None
    if func is None or func.name != "func.func":
        return None
    name = Function(func).arg_attr(ir.BlockArgument(value).arg_number, "relax.name")
    return ir.StringAttr(name).value if name is not None else None


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_same(a, e) for a, e in zip(actual, expected))
        )
    if isinstance(expected, float) or isinstance(actual, float):
        return isinstance(actual, (int, float)) and float(actual) == float(expected)
    return actual == expected


class DFPattern:
    """A node of a pattern tree; `match(value)` returns a `Match` or None."""

    def match(self, value: ir.Value) -> Match | None:
        return self._match(value, Match())

    def _match(self, value: ir.Value, m: Match) -> Match | None:  # pragma: no cover - abstract
        raise TypeError(f"{type(self).__name__} is not a pattern")

    def _bind(self, value: ir.Value, m: Match) -> Match | None:
        """Record that this node matched `value`; a node seen twice must match the same value
        (so `x = wildcard(); is_op("relax.add")(x, x)` only matches `a + a`)."""
        bound = m.bindings.get(id(self))
        if bound is not None:
            return m if bound == value else None
        m.bindings[id(self)] = value
        return m

    # -- composition (TVM's operators and methods) --
    def __or__(self, other: DFPattern) -> DFPattern:
        return OrPattern(self, other)

    def __and__(self, other: DFPattern) -> DFPattern:
        return AndPattern(self, other)

    def has_attr(self, attrs: dict) -> DFPattern:
        return AttrPattern(self, dict(attrs))

    def has_dtype(self, dtype: str) -> DFPattern:
        return TypePattern(self, dtype=dtype)

    def has_shape(self, shape: Sequence[int]) -> DFPattern:
        return TypePattern(self, shape=list(shape))

    def where(self, predicate: Callable[[ir.Value], bool]) -> DFPattern:
        """Constrain the matched value with any Python predicate on it."""
        return PredicatePattern(self, predicate)

    def __call__(self, *args: DFPattern) -> DFPattern:
        raise TypeError(f"{type(self).__name__} cannot be called with argument patterns")


class WildcardPattern(DFPattern):
    """Any value."""

    def _match(self, value, m):
        return self._bind(value, m)

    def __repr__(self) -> str:
        return "*"


class VarPattern(DFPattern):
    """A parameter of the function (optionally by name)."""

    def __init__(self, name: str = ""):
        self.name = name

    def _match(self, value, m):
        if not isinstance(value, ir.BlockArgument):
            return None
        if self.name and arg_name(value) != self.name:
            return None
        return self._bind(value, m)

    def __repr__(self) -> str:
        return f"is_var({self.name!r})"


class ConstantPattern(DFPattern):
    """A value defined by `relax.constant`."""

    def _match(self, value, m):
        op = _owner(value)
        if op is None or op.name != rx.Constant.name:
            return None
        return self._bind(value, m)

    def __repr__(self) -> str:
        return "is_const()"


class OpPattern(DFPattern):
    """The operator of a call: `is_op("relax.matmul")`; call it with argument patterns."""

    def __init__(self, op_name: str):
        if not isinstance(op_name, str) or not op_name.startswith("relax."):
            raise ValueError(
                f"is_op expects a relax op name such as 'relax.matmul', got {op_name!r}"
            )
        self.op_name = op_name
        self.mlir_name = rx.mlir_op_name(op_name)
        if rx.op_class(self.mlir_name) is None:
            raise ValueError(f"is_op: unknown relax op '{op_name}'")

    def __call__(self, *args: DFPattern) -> CallPattern:
        for a in args:
            if not isinstance(a, DFPattern):
                raise TypeError(f"is_op('{self.op_name}')(...): argument {a!r} is not a pattern")
        return CallPattern(self, list(args))

    def _match(self, value, m):
        # A bare op pattern matches any call of the op, whatever its operands.
        op = _owner(value)
        if op is None or op.name != self.mlir_name:
            return None
        m = self._bind(value, m)
        if m is not None:
            m.ops.append(op)
        return m

    def __repr__(self) -> str:
        return f"is_op({self.op_name!r})"


class CallPattern(DFPattern):
    """A call of `op` whose operands match `args` in order (all operands when args are given)."""

    def __init__(self, op: OpPattern, args: list[DFPattern]):
        self.op = op
        self.args = args

    def _match(self, value, m):
        op = _owner(value)
        if op is None or op.name != self.op.mlir_name:
            return None
        if len(op.operands) != len(self.args):
            return None
        m = self._bind(value, m)
        if m is None:
            return None
        m.ops.append(op)
        for operand, arg in zip(op.operands, self.args):
            m = arg._match(operand, m)
            if m is None:
                return None
        return m

    def __repr__(self) -> str:
        return f"{self.op!r}({', '.join(map(repr, self.args))})"


class TupleGetItemPattern(DFPattern):
    """Result `index` of a multi-result op matching `tuple` (any result when index is None)."""

    def __init__(self, tuple_pattern: DFPattern, index: int | None = None):
        self.tuple = tuple_pattern
        self.index = index

    def _match(self, value, m):
        if not isinstance(value, ir.OpResult):
            return None
        result = ir.OpResult(value)
        if self.index is not None and result.result_number != self.index:
            return None
        owner = _owner(value)
        if owner is None or len(owner.results) < 2:
            return None
        m = self._bind(value, m)
        if m is None:
            return None
        # The tuple pattern sees the op through its first result.
        return self.tuple._match(owner.results[0], m)

    def __repr__(self) -> str:
        return f"is_tuple_get_item({self.tuple!r}, {self.index})"


class OrPattern(DFPattern):
    def __init__(self, left: DFPattern, right: DFPattern):
        self.left, self.right = left, right

    def _match(self, value, m):
        for side in (self.left, self.right):
            found = side._match(value, m._copy())
            if found is not None:
                return self._bind(value, found)
        return None

    def __repr__(self) -> str:
        return f"({self.left!r} | {self.right!r})"


class AndPattern(DFPattern):
    def __init__(self, left: DFPattern, right: DFPattern):
        self.left, self.right = left, right

    def _match(self, value, m):
        m = self.left._match(value, m)
        m = self.right._match(value, m) if m is not None else None
        return self._bind(value, m) if m is not None else None

    def __repr__(self) -> str:
        return f"({self.left!r} & {self.right!r})"


class AttrPattern(DFPattern):
    """`pattern.has_attr({"axes": [1, 0]})`: the defining op has these attribute values."""

    def __init__(self, pattern: DFPattern, attrs: dict):
        self.pattern, self.attrs = pattern, attrs

    def _match(self, value, m):
        op = _owner(value)
        if op is None:
            return None
        for key, expected in self.attrs.items():
            if key not in op.attributes or not _same(attr_value(op.attributes[key], str), expected):
                return None
        m = self.pattern._match(value, m)
        return self._bind(value, m) if m is not None else None

    def __repr__(self) -> str:
        return f"{self.pattern!r}.has_attr({self.attrs})"


class TypePattern(DFPattern):
    """`pattern.has_dtype("float32")` / `.has_shape([1, 784])` (-1 matches any extent)."""

    def __init__(self, pattern: DFPattern, dtype: str = "", shape: list | None = None):
        self.pattern, self.dtype, self.shape = pattern, dtype, shape

    def _match(self, value, m):
        if not isinstance(value.type, ir.RankedTensorType):
            return None
        t = ir.RankedTensorType(value.type)
        if self.dtype and dtype_of(t.element_type) != self.dtype:
            return None
        if self.shape is not None:
            if t.rank != len(self.shape):
                return None
            for actual, want in zip(t.shape, self.shape):
                if want != -1 and actual != want:
                    return None
        m = self.pattern._match(value, m)
        return self._bind(value, m) if m is not None else None

    def __repr__(self) -> str:
        what = f"has_dtype({self.dtype!r})" if self.dtype else f"has_shape({self.shape})"
        return f"{self.pattern!r}.{what}"


class PredicatePattern(DFPattern):
    def __init__(self, pattern: DFPattern, predicate: Callable[[ir.Value], bool]):
        if not callable(predicate):
            raise TypeError(f"where(): {predicate!r} is not callable")
        self.pattern, self.predicate = pattern, predicate

    def _match(self, value, m):
        m = self.pattern._match(value, m)
        if m is None or not self.predicate(value):
            return None
        return self._bind(value, m)

    def __repr__(self) -> str:
        return f"{self.pattern!r}.where({getattr(self.predicate, '__name__', 'predicate')})"


# -- constructors (TVM's names) ------------------------------------------------------------------


def wildcard() -> DFPattern:
    return WildcardPattern()


def is_op(op_name: str) -> OpPattern:
    return OpPattern(op_name)


def is_const() -> DFPattern:
    return ConstantPattern()


def is_var(name: str = "") -> DFPattern:
    return VarPattern(name)


def is_tuple_get_item(tuple_pattern: DFPattern, index: int | None = None) -> DFPattern:
    return TupleGetItemPattern(tuple_pattern, index)


def has_attr(attrs: dict, pattern: DFPattern | None = None) -> DFPattern:
    return AttrPattern(pattern or wildcard(), dict(attrs))


def has_dtype(dtype: str, pattern: DFPattern | None = None) -> DFPattern:
    return TypePattern(pattern or wildcard(), dtype=dtype)


def has_shape(shape: Sequence[int], pattern: DFPattern | None = None) -> DFPattern:
    return TypePattern(pattern or wildcard(), shape=list(shape))
