"""Scalar expressions of the TE layer: one `Expr` node type, TVM's dtype rules, intrinsics."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, Optional, Sequence, Union

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64")

# Elementwise math intrinsics: te function name -> expression op (codegen has the lowering).
FLOAT_INTRINSICS = ("exp", "exp2", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh",
                    "sigmoid", "erf", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                    "asinh", "acosh", "atanh")
# Binary float intrinsics (math dialect ops of two operands).
FLOAT_BINARY_INTRINSICS = ("atan2", "copysign")
ROUNDING_INTRINSICS = ("floor", "ceil", "round", "trunc")


def kind(dtype: str) -> str:
    """'f' float, 'i' signed int, 'u' unsigned int, 'b' bool: picks the arith op family."""
    if dtype == "bool":
        return "b"
    if dtype.startswith("float") or dtype == "bfloat16":
        return "f"
    return "u" if dtype.startswith("uint") else "i"


def bits(dtype: str) -> int:
    return 1 if dtype == "bool" else int(dtype.lstrip("abcdefghijklmnopqrstuvwxyz"))


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"te: unsupported dtype '{dtype}' (expected one of {', '.join(DTYPES)})")
    return dtype


class Expr:
    """A scalar expression node: `op` names the operation, `args` are child expressions.

    `arg` holds the op's non-expression payload (a constant's value, a var's name, the tensor of
    a read, the function of a call). Nodes compare by identity; `==` builds an expression.
    """

    __slots__ = ("op", "dtype", "args", "arg")
    __hash__ = object.__hash__

    def __init__(self, op: str, dtype: str, args: Sequence["Expr"] = (), arg: Any = None):
        self.op, self.dtype, self.args, self.arg = op, dtype, tuple(args), arg

    def __repr__(self) -> str:
        if self.op == "const":
            return repr(self.arg)
        if self.op == "var":
            return self.arg
        if self.op == "read":
            return f"{self.arg.name}[{', '.join(map(repr, self.args))}]"
        if self.op == "reduce":
            axes = ", ".join(a.name for a in self.arg[1])
            return f"te.{self.arg[0]}({self.args[0]!r}, axis=[{axes}])"
        if self.op in _INFIX:
            return f"({self.args[0]!r} {_INFIX[self.op]} {self.args[1]!r})"
        inner = ", ".join(map(repr, self.args))
        return f"{self.op}{'.' + str(self.arg) if self.arg else ''}({inner})"

    def __bool__(self) -> bool:
        # TVM semantics: `a == b` on expressions is truthy only for the same node.
        if self.op == "eq":
            return self.args[0] is self.args[1]
        if self.op == "ne":
            return self.args[0] is not self.args[1]
        raise ValueError(f"te: cannot use expression {self!r} as a python bool "
                         "(use te.all, te.any or te.if_then_else)")

    def __neg__(self) -> "Expr":
        return Expr("neg", self.dtype, (self,))

    def __invert__(self) -> "Expr":
        return logical("xor", self, const(True if self.dtype == "bool" else -1, self.dtype))

    def equal(self, other) -> "Expr":
        """Elementwise `==` as an expression (same as the operator)."""
        return compare("eq", self, other)

    def astype(self, dtype: str) -> "Expr":
        """Cast to `dtype` (TVM's `expr.astype`)."""
        return cast(self, dtype)


_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
          "and": "&", "or": "|", "xor": "^"}


class Var(Expr):
    """A named integer variable: a compute's index, or a symbolic dimension such as `n`."""

    __slots__ = ()

    def __init__(self, name: str, dtype: str = "int64"):
        if kind(check_dtype(dtype)) not in "iu":
            raise ValueError(f"te.var: expected an integer dtype, got ({dtype})")
        super().__init__("var", dtype, (), name)

    @property
    def name(self) -> str:
        return self.arg

    name_hint = name


class IterVar(Var):
    """A reduction axis: a `Var` ranging over `[dom[0], dom[1])` (TVM's `te.reduce_axis`)."""

    __slots__ = ("dom",)

    def __init__(self, dom: tuple, name: str, dtype: str):
        super().__init__(name, dtype)
        self.dom = dom

    @property
    def var(self) -> "IterVar":
        return self


def var(name: str = "v", dtype: str = "int64") -> Var:
    """A symbolic integer, usable as a tensor dimension (`te.placeholder((n, 4))`)."""
    return Var(name, dtype)


size_var = var


def const(value: Union[int, float, bool], dtype: Optional[str] = None) -> Expr:
    """A constant; the dtype defaults as in TVM (bool, int32 or float32)."""
    if dtype is None:
        dtype = ("bool" if isinstance(value, bool) else
                 "int32" if isinstance(value, int) else "float32")
    k = kind(check_dtype(dtype))
    value = float(value) if k == "f" else bool(value) if k == "b" else int(value)
    return Expr("const", dtype, (), value)


def convert(value: Any, like: Optional[str] = None) -> Expr:
    """Python scalar -> `Expr`; ints take the dtype of the other operand like TVM does."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return const(value, "bool")
    if isinstance(value, int):
        return const(value, like if like and like != "bool" else "int32")
    if isinstance(value, float):
        return const(value, like if like and kind(like) == "f" else "float32")
    if hasattr(value, "dtype") and getattr(value, "shape", None) == ():  # numpy scalar
        return convert(value.item(), like)
    raise TypeError(f"te: cannot convert {type(value).__name__} ({value!r}) to an expression")


def _operands(a: Any, b: Any) -> tuple:
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        a, b = convert(a), convert(b)
    a = convert(a, b.dtype if isinstance(b, Expr) else None)
    b = convert(b, a.dtype)
    return match_types(a, b)


def match_types(a: Expr, b: Expr) -> tuple:
    """TVM's `BinaryOpMatchTypes`: int->float, widen same-signed ints, else an error."""
    ta, tb = a.dtype, b.dtype
    if ta == tb:
        return a, b
    ka, kb = kind(ta), kind(tb)
    if ka == "b" or kb == "b":
        return (cast(a, tb), b) if ka == "b" else (a, cast(b, ta))
    if ka != "f" and kb == "f":
        return cast(a, tb), b
    if ka == "f" and kb != "f":
        return a, cast(b, ta)
    if ka == kb and ka in "iu":
        return (cast(a, tb), b) if bits(ta) < bits(tb) else (a, cast(b, ta))
    if ka in "iu" and kb in "iu":  # signed/unsigned mix: the wider one must be signed
        signed, unsigned = (a, b) if ka == "i" else (b, a)
        if bits(signed.dtype) > bits(unsigned.dtype):
            return (a, cast(b, ta)) if signed is a else (cast(a, tb), b)
    raise ValueError(f"te: cannot match types ({ta}) vs ({tb}); insert an explicit astype")


def binary(op: str, a: Any, b: Any) -> Expr:
    a, b = _operands(a, b)
    if a.dtype == "bool" and op not in ("min", "max"):
        a, b = cast(a, "int32"), cast(b, "int32")
    return Expr(op, a.dtype, (a, b))


def div(a: Any, b: Any) -> Expr:
    """`/`: true division on floats, truncating division on integers (TVM's `div`)."""
    a, b = _operands(a, b)
    return binary("div" if kind(a.dtype) == "f" else "truncdiv", a, b)


def compare(op: str, a: Any, b: Any) -> Expr:
    a, b = _operands(a, b)
    return Expr(op, "bool", (a, b))


def logical(op: str, a: Any, b: Any) -> Expr:
    a, b = _operands(a, b)
    if kind(a.dtype) == "f":
        raise ValueError(f"te: logical '{op}' expects bool or integer operands, got ({a.dtype})")
    return Expr(op, a.dtype, (a, b))


def cast(value: Any, dtype: Any) -> Expr:
    """Cast `value` to `dtype`; `te.cast(dtype, value)` (TIR's order) is accepted too."""
    if isinstance(value, str) and not isinstance(dtype, str):
        value, dtype = dtype, value
    value = convert(value)
    if value.dtype == check_dtype(dtype):
        return value
    return Expr("cast", dtype, (value,))


def if_then_else(cond: Any, then_value: Any, else_value: Any) -> Expr:
    """`cond ? then_value : else_value`; the branch not taken is never evaluated.

    That makes it safe for padding: `if_then_else(i >= 1, A[i - 1], 0.0)` never reads `A[-1]`.
    """
    cond = convert(cond)
    if cond.dtype != "bool":
        cond = cast(cond, "bool")
    a, b = _operands(then_value, else_value)
    return Expr("select", a.dtype, (cond, a, b))


def all(*conds: Any) -> Expr:  # noqa: A001 - TVM's name
    """Logical and of all conditions (TVM's `te.all`)."""
    conds = list(conds[0]) if len(conds) == 1 and isinstance(conds[0], (list, tuple)) else conds
    out = convert(conds[0])
    for c in conds[1:]:
        out = logical("and", out, c)
    return out


def any(*conds: Any) -> Expr:  # noqa: A001 - TVM's name
    """Logical or of all conditions (TVM's `te.any`)."""
    conds = list(conds[0]) if len(conds) == 1 and isinstance(conds[0], (list, tuple)) else conds
    out = convert(conds[0])
    for c in conds[1:]:
        out = logical("or", out, c)
    return out


def floordiv(a: Any, b: Any) -> Expr:
    return binary("floordiv", a, b)


def floormod(a: Any, b: Any) -> Expr:
    return binary("floormod", a, b)


def truncdiv(a: Any, b: Any) -> Expr:
    a, b = _operands(a, b)
    return binary("div" if kind(a.dtype) == "f" else "truncdiv", a, b)


def truncmod(a: Any, b: Any) -> Expr:
    return binary("truncmod", a, b)


def power(a: Any, b: Any) -> Expr:
    return binary("pow", a, b)


def _float_binary(name: str):
    def fn(a: Any, b: Any) -> Expr:
        a, b = _operands(a, b)
        if kind(a.dtype) != "f":
            raise ValueError(f"te.{name}: expected float expressions, got ({a.dtype})")
        return Expr(name, a.dtype, (a, b))

    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}(a, b)` (TVM's `tir.{name}`; float operands)."
    return fn


atan2 = _float_binary("atan2")
copysign = _float_binary("copysign")


def isnan(x: Any) -> Expr:
    """`x != x` (only NaN compares unequal to itself); false for integers, as in TVM."""
    x = convert(x)
    return x != x if kind(x.dtype) == "f" else const(False, "bool")


def isinf(x: Any) -> Expr:
    """`|x| == inf`; false for integers."""
    x = convert(x)
    return abs(x) == const(float("inf"), x.dtype) if kind(x.dtype) == "f" else const(False, "bool")


def isfinite(x: Any) -> Expr:
    """`|x| < inf` (false for NaN, which compares false); true for integers."""
    x = convert(x)
    return abs(x) < const(float("inf"), x.dtype) if kind(x.dtype) == "f" else const(True, "bool")


def call(name: str, x: Any) -> Expr:
    """A unary math intrinsic; float-only ones reject integer inputs as TVM's LLVM rules do."""
    x = convert(x)
    if name in ROUNDING_INTRINSICS and kind(x.dtype) != "f":
        return x
    if name in FLOAT_INTRINSICS and kind(x.dtype) != "f":
        raise ValueError(f"te.{name}: expected a float expression, got ({x.dtype})")
    return Expr("call", x.dtype, (x,), name)


def abs(x: Any) -> Expr:  # noqa: A001 - TVM's name
    x = convert(x)
    return x if kind(x.dtype) in "ub" else Expr("call", x.dtype, (x,), "abs")


def _unary(name: str):
    def fn(x: Any) -> Expr:
        return call(name, x)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise `{name}` (TVM's `te.{name}`)."
    return fn


exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
sinh = _unary("sinh")
cosh = _unary("cosh")
asinh = _unary("asinh")
acosh = _unary("acosh")
atanh = _unary("atanh")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")
trunc = _unary("trunc")

pow = power  # noqa: A001 - TVM's alias
indexdiv, indexmod = floordiv, floormod


def _method(fn: Callable, reflected: bool) -> Callable:
    def method(self: Expr, other: Any) -> Expr:
        return fn(other, self) if reflected else fn(self, other)

    return method


# python operator -> expression builder; `/` and `%` follow TVM (truncdiv on ints, floormod)
_OPERATORS: Dict[str, Callable] = {
    "add": partial(binary, "add"), "sub": partial(binary, "sub"),
    "mul": partial(binary, "mul"), "truediv": div, "floordiv": floordiv, "mod": floormod,
    "pow": power, "and": partial(logical, "and"), "or": partial(logical, "or"),
    "xor": partial(logical, "xor"),
}
for _name, _fn in _OPERATORS.items():
    setattr(Expr, f"__{_name}__", _method(_fn, False))
    setattr(Expr, f"__r{_name}__", _method(_fn, True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):  # python reflects comparisons itself
    setattr(Expr, f"__{_name}__", _method(partial(compare, _name), False))
