"""Torch -> relax translation shared by `from_fx` and `from_exported_program`.

`CONVERTERS` is the one table of the importers: a torch target (a `torch`/`torch.nn.functional`/
`operator` callable, a tensor method name as FX spells it, or an ATen `OpOverload` or its
`OpOverloadPacket`) -> a rule `(ctx, node) -> value`. A value is a relax `Var`/`Constant`, a
python value (int, float, `SymDim`, tuples of them), or a tuple of values. The rules themselves
are grouped by family below the `Importer`, which walks a graph and dispatches; rules that
only one importer needs (nn.Module rules, ATen-only ops) sit in that importer's module and
register into the same table.
"""

from __future__ import annotations

import collections
import itertools
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import fx

from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Constant, Expr, Var, const
from relaxmlir.relax.struct_info import TensorStructInfo, TupleStructInfo
from relaxmlir.scope import scope

Rule = Callable[["Importer", fx.Node], Any]
CONVERTERS: dict[Any, Rule] = {}

TORCH_DTYPES = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
}
# Targets never evaluated at import time even when all their inputs are known.
_NONDETERMINISTIC = ("rand", "normal", "bernoulli", "dropout", "empty", "uniform", "multinomial")


def register(rule: Rule, *targets) -> Rule:
    """Add `rule` to `CONVERTERS` under each torch target."""
    for target in targets:
        CONVERTERS[target] = rule
    return rule


def dtype_str(dtype) -> str:
    if isinstance(dtype, torch.dtype):
        if dtype not in TORCH_DTYPES:
            raise NotImplementedError(f"unsupported torch dtype ({dtype})")
        return TORCH_DTYPES[dtype]
    return str(np.dtype(dtype))


def target_name(target) -> str:
    """How an error message names a torch target: `aten.relu.default`, `torch.relu`, ..."""
    if isinstance(target, str):
        return f"Tensor.{target}"
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(target)
    if isinstance(target, type):
        return f"{target.__module__}.{target.__qualname__}"
    try:
        return fx.node._get_qualified_name(target)
    except Exception:  # noqa: BLE001  (builtins without a qualified name)
        return repr(target)


class SymDim:
    """A symbolic size (`"n"`, `"n*2"`) flowing through the size arithmetic of a graph."""

    def __init__(self, expr: str):
        self.expr = expr

    @staticmethod
    def make(value):
        """int stays int, a symbol name becomes a `SymDim`."""
        return SymDim(value) if isinstance(value, str) else value

    def _bin(self, other, op: str, swap: bool = False):
        if not isinstance(other, (int, SymDim)):
            return NotImplemented
        if other == (1 if op in ("*", "//") else 0) and (not swap or op in ("+", "*")):
            return self  # keep `n` spelled `n` so that equal dims stay equal strings
        lhs, rhs = (other, self) if swap else (self, other)
        return SymDim(f"{_atom(lhs)}{op}{_atom(rhs)}")

    def __eq__(self, other) -> bool:
        return isinstance(other, SymDim) and other.expr == self.expr

    def __hash__(self) -> int:
        return hash(self.expr)

    def __add__(self, o):
        return self._bin(o, "+")  # noqa: E704

    def __radd__(self, o):
        return self._bin(o, "+", True)  # noqa: E704

    def __sub__(self, o):
        return self._bin(o, "-")  # noqa: E704

    def __rsub__(self, o):
        return self._bin(o, "-", True)  # noqa: E704

    def __mul__(self, o):
        return self._bin(o, "*")  # noqa: E704

    def __rmul__(self, o):
        return self._bin(o, "*", True)  # noqa: E704

    def __floordiv__(self, o):
        return self._bin(o, "//")  # noqa: E704

    def __rfloordiv__(self, o):
        return self._bin(o, "//", True)  # noqa: E704

    def __repr__(self) -> str:
        return f"SymDim({self.expr!r})"


def _atom(d) -> str:
    text = str(d.expr if isinstance(d, SymDim) else d)
    return text if text.isidentifier() or text.isdigit() else f"({text})"


def dim_value(d):
    """A dimension for a relax shape: int, or the symbolic expression string."""
    if isinstance(d, SymDim):
        return d.expr
    if isinstance(d, (str, torch.SymInt)):
        return str(d)
    return int(d)


class Deferred:
    """A value computed on first use (argmax of `max(x, dim)`, pooling indices, ...)."""

    def __init__(self, make: Callable[[], Any]):
        self.make = make
        self.value = None

    def get(self):
        if self.value is None:
            self.value = self.make()
        return self.value


# -- the importer ---------------------------------------------------------------------------
class _Builder(BlockBuilder):
    """NOTE: `BlockBuilder` caches emitted constants by `id()`; a freed temporary constant's id
    can be reused by a later one, which would then alias it. Keep every emitted one alive."""

    def __init__(self):
        super().__init__()
        self._alive: list = []

    def _materialize(self, expr, name_hint: str = ""):
        if isinstance(expr, Constant):
            self._alive.append(expr)
        return super()._materialize(expr, name_hint)


class Importer:
    """Walks an FX graph in order, translating each node through `CONVERTERS` (or user rules)."""

    def __init__(
        self,
        frontend: str,
        overrides: dict[Any, Rule] | None = None,
        keep_params_as_input: bool = False,
    ):
        self.frontend = frontend
        self.overrides = dict(overrides or {})
        self.keep_params_as_input = keep_params_as_input
        self.bb = _Builder()
        self.env: dict[fx.Node, Any] = {}
        self.inputs: list[Var] = []
        self.weights: dict[str, Any] = {}  # name -> Constant, or Var when kept as input
        self.params: dict[str, np.ndarray] = {}  # name -> value of each weight kept as input

    # weights and the function ---------------------------------------------------------------
    def weight(self, name: str, tensor: torch.Tensor, as_param: bool = True):
        """A model weight: a `relax.const`, or a function parameter with `keep_params_as_input`."""
        if name not in self.weights:
            data = tensor.detach().cpu().contiguous().numpy()
            if self.keep_params_as_input and as_param:
                self.weights[name] = Var(name, TensorStructInfo(data.shape, str(data.dtype)))
                self.params[name] = data
            else:
                self.weights[name] = const(data)
        return self.weights[name]

    def build(self, body: Callable[[], Any]):
        """Run `body` inside function "main" and one dataflow block; what it returns is the
        output (a value or a tuple of them). Returns the module, or `(mod, params)`."""
        with scope(), self.bb.function("main"):
            with self.bb.dataflow():
                result = body()
                items = result if isinstance(result, (list, tuple)) else [result]
                outs = [self.bb.emit_output(self._output_var(v)) for v in items]
            kept = [self.weights[name] for name in self.params]
            self.bb.emit_func_output(
                outs[0] if not isinstance(result, (list, tuple)) else outs,
                params=self.inputs + kept,
            )
        mod = self.bb.get()
        return (mod, dict(self.params)) if self.keep_params_as_input else mod

    def _output_var(self, value) -> Var:
        value = value.get() if isinstance(value, Deferred) else value
        if not is_tensor(value):
            raise NotImplementedError(f"{self.frontend}: model output {value!r} is not a tensor")
        return value if isinstance(value, Var) else self.bb.emit(value)

    # argument access ------------------------------------------------------------------------
    def retrieve(self, arg):
        """Graph nodes in `arg` (nested in lists, tuples, slices, dicts) -> their values."""
        if isinstance(arg, fx.Node):
            value = self.env[arg]
            return value.get() if isinstance(value, Deferred) else value
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.retrieve(a) for a in arg)
        if isinstance(arg, slice):
            return slice(self.retrieve(arg.start), self.retrieve(arg.stop), self.retrieve(arg.step))
        if isinstance(arg, dict):
            return {k: self.retrieve(v) for k, v in arg.items()}
        return arg

    def arg(self, node: fx.Node, index: int | None, name=(), default=None):
        """Argument `index` of `node`, else its keyword `name` (a str or several), else default."""
        if index is not None and len(node.args) > index:
            return self.retrieve(node.args[index])
        for key in (name,) if isinstance(name, str) else name:
            if key in node.kwargs:
                return self.retrieve(node.kwargs[key])
        return default

    def rest(self, node: fx.Node, index: int, name=()) -> list:
        """Varargs or one sequence argument from `index` on: `x.view(2, 3)` and `x.view((2, 3))`."""
        value = self.arg(node, index, name)
        if isinstance(value, (list, tuple, torch.Size)):
            return list(value)
        return [self.retrieve(a) for a in node.args[index:]] if value is not None else []

    def emit(self, expr: Expr) -> Var:
        out = self.bb.emit(expr)
        if isinstance(out.struct_info, TupleStructInfo):
            return tuple(out[i] for i in range(len(out.struct_info.fields)))
        return out

    # dispatch ---------------------------------------------------------------------------------
    def rule_for(self, node: fx.Node) -> Rule:
        target = node.target
        for table in (self.overrides, CONVERTERS):
            if target in table:
                return table[target]
            packet = getattr(target, "overloadpacket", None)
            if packet is not None and packet in table:
                return table[packet]
        raise NotImplementedError(
            f"unsupported torch op '{target_name(target)}' at node '{node.name}' ({self.frontend})"
        )

    def translate(self, node: fx.Node) -> Any:
        """The value of a `call_function` / `call_method` node."""
        if node.target not in self.overrides:
            folded = self._fold(node)
            if folded is not _NOT_FOLDED:
                return folded
        return self.rule_for(node)(self, node)

    def _fold(self, node: fx.Node):
        """Evaluate a node whose inputs are all known (constants, python values) with torch."""
        target = node.target
        name = target if isinstance(target, str) else getattr(target, "__name__", "")
        if any(word in str(name) for word in _NONDETERMINISTIC):
            return _NOT_FOLDED
        args, kwargs = self.retrieve(node.args), self.retrieve(node.kwargs)
        leaves = _leaves((args, kwargs))
        if any(isinstance(v, Expr) and not isinstance(v, Constant) for v in leaves):
            return _NOT_FOLDED
        has_sym = any(isinstance(v, SymDim) for v in leaves)
        if has_sym and getattr(target, "__module__", None) != "_operator":
            return _NOT_FOLDED
        args, kwargs = _to_torch(args), _to_torch(kwargs)
        try:
            if isinstance(target, str):
                result = getattr(args[0], target)(*args[1:], **kwargs)
            else:
                result = target(*args, **kwargs)
        except Exception:  # noqa: BLE001  (not evaluable here: the rule decides)
            return _NOT_FOLDED
        return _from_torch(result)


_NOT_FOLDED = object()


def _leaves(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _leaves(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, slice):
        return _leaves([value.start, value.stop, value.step])
    return [value]


def _to_torch(value):
    if isinstance(value, Constant):
        return torch.from_numpy(value.data.copy())
    if isinstance(value, (list, tuple)):
        return type(value)(_to_torch(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_torch(v) for k, v in value.items()}
    return value


def _from_torch(value):
    if isinstance(value, torch.Tensor):
        return const(value.detach().contiguous().numpy())
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_from_torch(v) for v in value)
    if isinstance(value, tuple):  # namedtuples (torch.return_types)
        return tuple(_from_torch(v) for v in value)
    return value


# -- helpers shared by the rules ------------------------------------------------------------
def is_tensor(value) -> bool:
    return isinstance(value, Expr) and isinstance(value.struct_info, TensorStructInfo)


def shape_of(x) -> tuple:
    return tuple(x.struct_info.shape)


def ndim(x) -> int:
    return len(x.struct_info.shape)


def axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def as_tensor(value, like=None, dtype: str | None = None):
    """A python scalar -> a 0-d constant in `like`'s dtype (float if the scalar is a float)."""
    if is_tensor(value):
        return value
    if dtype is None:
        dtype = like.struct_info.dtype if like is not None else "float32"
        if isinstance(value, float) and not dtype.startswith(("float", "bfloat")):
            dtype = "float32"
        if isinstance(value, bool) and like is None:
            dtype = "bool"
    return const(np.array(value, dtype=dtype))


def make_pair(v, n: int = 2) -> list:
    if isinstance(v, (list, tuple)):
        return list(v) * n if len(v) == 1 else list(v)
    return [v] * n


def rop():
    """`relax.op`, looked up late so that ops added after import are found."""
    from relaxmlir.relax import op

    return op


def resolve(op_name: str):
    """`"nn.relu"` -> `relax.op.nn.relu`."""
    obj = rop()
    for part in op_name.split("."):
        obj = getattr(obj, part)
    return obj


def call(ctx: Importer, op_name: str, *args, **kwargs):
    """Emit `relax.op.<op_name>(*args, **kwargs)`."""
    return ctx.emit(resolve(op_name)(*args, **kwargs))


def first(ctx: Importer, node: fx.Node):
    return ctx.arg(node, 0, ("input", "self", "x"))


F = torch.nn.functional
aten = torch.ops.aten


# -- elementwise ----------------------------------------------------------------------------
def unary(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        return call(ctx, op_name, first(ctx, node))

    return rule


for _op_name, _targets in {
    "nn.relu": (torch.relu, F.relu, "relu", aten.relu),
    "nn.silu": (F.silu, aten.silu),
    "sigmoid": (torch.sigmoid, F.sigmoid, "sigmoid", aten.sigmoid),
    "tanh": (torch.tanh, F.tanh, "tanh", aten.tanh),
    "exp": (torch.exp, "exp", aten.exp),
    "log": (torch.log, "log", aten.log),
    "sqrt": (torch.sqrt, "sqrt", aten.sqrt),
    "rsqrt": (torch.rsqrt, "rsqrt", aten.rsqrt),
    "abs": (torch.abs, "abs", aten.abs),
    "negative": (torch.neg, torch.negative, operator.neg, "neg", aten.neg),
    "sin": (torch.sin, "sin", aten.sin),
    "cos": (torch.cos, "cos", aten.cos),
    "erf": (torch.erf, torch.special.erf, "erf", aten.erf),
    "logical_not": (torch.logical_not, "logical_not", aten.logical_not),
}.items():
    register(unary(_op_name), *_targets)


def _gelu(ctx: Importer, node: fx.Node):
    approximate = ctx.arg(node, 1, "approximate", "none")
    return call(ctx, "nn.gelu_tanh" if approximate == "tanh" else "nn.gelu", first(ctx, node))


def _leaky_relu(ctx: Importer, node: fx.Node):
    slope = ctx.arg(node, 1, "negative_slope", 0.01)
    return call(ctx, "nn.leaky_relu", first(ctx, node), slope)


def _hardtanh(ctx: Importer, node: fx.Node):
    lo, hi = ctx.arg(node, 1, "min_val", -1.0), ctx.arg(node, 2, "max_val", 1.0)
    return call(ctx, "clip", first(ctx, node), lo, hi)


def bitwise(op_name: str) -> Rule:
    """`~`, `&`, `|` on bool tensors (masks) are the logical ops."""

    def rule(ctx: Importer, node: fx.Node):
        args = [first(ctx, node)] + (
            [ctx.arg(node, 1, "other")] if op_name != "logical_not" else []
        )
        dtype = next(a.struct_info.dtype for a in args if is_tensor(a))
        if dtype != "bool":
            raise NotImplementedError(
                f"unsupported torch op '{target_name(node.target)}' on {dtype} at node '{node.name}'"
            )
        return emit_binary(ctx, op_name, *args) if len(args) == 2 else call(ctx, op_name, args[0])

    return rule


register(_gelu, F.gelu, aten.gelu)
register(_leaky_relu, F.leaky_relu, aten.leaky_relu)
register(_hardtanh, F.hardtanh, aten.hardtanh)
register(lambda ctx, node: call(ctx, "clip", first(ctx, node), 0.0, 6.0), F.relu6)
register(
    bitwise("logical_not"), operator.invert, torch.bitwise_not, "bitwise_not", aten.bitwise_not
)
register(bitwise("logical_and"), operator.and_, torch.bitwise_and, "bitwise_and", aten.bitwise_and)
register(bitwise("logical_or"), operator.or_, torch.bitwise_or, "bitwise_or", aten.bitwise_or)

_DTYPE_RANK = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "bfloat16",
    "float16",
    "float32",
    "float64",
]


def astype(ctx: Importer, x, dtype: str):
    return x if x.struct_info.dtype == dtype else call(ctx, "astype", x, dtype)


def binary_operands(ctx: Importer, lhs, rhs):
    """Scalars become constants of the tensor's dtype; mixed dtypes meet at the wider one."""
    like = lhs if is_tensor(lhs) else rhs
    lhs, rhs = as_tensor(lhs, like), as_tensor(rhs, like)
    dl, dr = lhs.struct_info.dtype, rhs.struct_info.dtype
    if dl != dr:
        wide = max(dl, dr, key=_DTYPE_RANK.index)
        lhs, rhs = astype(ctx, lhs, wide), astype(ctx, rhs, wide)
    return lhs, rhs


def emit_binary(ctx: Importer, op_name: str, lhs, rhs):
    lhs, rhs = binary_operands(ctx, lhs, rhs)
    return call(ctx, op_name, lhs, rhs)


def binary(op_name: str, swap: bool = False) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        lhs, rhs = first(ctx, node), ctx.arg(node, 1, ("other", "exponent"))
        if swap:
            lhs, rhs = rhs, lhs
        alpha = ctx.arg(node, 2, "alpha", 1) if op_name in ("add", "subtract") else 1
        if alpha != 1:
            rhs = emit_binary(ctx, "multiply", rhs, alpha) if is_tensor(rhs) else rhs * alpha
        return emit_binary(ctx, op_name, lhs, rhs)

    return rule


def _divide(ctx: Importer, node: fx.Node):
    lhs, rhs = first(ctx, node), ctx.arg(node, 1, "other")
    mode = ctx.arg(node, 2, "rounding_mode")
    if mode == "floor":
        return emit_binary(ctx, "floor_divide", lhs, rhs)
    lhs, rhs = binary_operands(ctx, lhs, rhs)
    if not lhs.struct_info.dtype.startswith(("float", "bfloat")):
        lhs, rhs = astype(ctx, lhs, "float32"), astype(ctx, rhs, "float32")
    out = call(ctx, "divide", lhs, rhs)
    if mode == "trunc":  # sign(q) * floor(|q|)
        out = call(
            ctx, "multiply", call(ctx, "sign", out), call(ctx, "floor", call(ctx, "abs", out))
        )
    return out


for _op_name, _targets in {
    "add": (torch.add, operator.add, operator.iadd, "add", "add_", aten.add),
    "subtract": (torch.sub, torch.subtract, operator.sub, operator.isub, "sub", aten.sub),
    "multiply": (torch.mul, torch.multiply, operator.mul, operator.imul, "mul", "mul_", aten.mul),
    "floor_divide": (torch.floor_divide, operator.floordiv, "floor_divide", aten.floor_divide),
    "power": (torch.pow, operator.pow, "pow", aten.pow),
    "maximum": (torch.maximum, aten.maximum),
    "minimum": (torch.minimum, aten.minimum),
    "equal": (torch.eq, operator.eq, "eq", aten.eq),
    "not_equal": (torch.ne, operator.ne, "ne", aten.ne),
    "less": (torch.lt, operator.lt, "lt", aten.lt),
    "less_equal": (torch.le, operator.le, "le", aten.le),
    "greater": (torch.gt, operator.gt, "gt", aten.gt),
    "greater_equal": (torch.ge, operator.ge, "ge", aten.ge),
    "logical_and": (torch.logical_and, "logical_and", aten.logical_and),
    "logical_or": (torch.logical_or, "logical_or", aten.logical_or),
}.items():
    register(binary(_op_name), *_targets)
register(binary("subtract", swap=True), aten.rsub)
register(
    _divide,
    torch.div,
    torch.divide,
    torch.true_divide,
    operator.truediv,
    operator.itruediv,
    "div",
    aten.div,
)


# -- matrix products ------------------------------------------------------------------------
def _matmul(ctx: Importer, node: fx.Node):
    return call(ctx, "matmul", first(ctx, node), ctx.arg(node, 1, ("other", "mat2")))


def _linear(ctx: Importer, node: fx.Node):
    x, w, b = first(ctx, node), ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    return call(ctx, "linear", x, w, b)


def _addmm(ctx: Importer, node: fx.Node):
    """`beta * input + alpha * (mat1 @ mat2)` (also `baddbmm`)."""
    bias, a = first(ctx, node), ctx.arg(node, 1, ("mat1", "batch1"))
    b = ctx.arg(node, 2, ("mat2", "batch2"))
    beta, alpha = ctx.arg(node, None, "beta", 1), ctx.arg(node, None, "alpha", 1)
    out = call(ctx, "matmul", a, b)
    if alpha != 1:
        out = emit_binary(ctx, "multiply", out, alpha)
    if beta != 1:
        bias = emit_binary(ctx, "multiply", bias, beta)
    return emit_binary(ctx, "add", out, bias) if beta != 0 else out


register(
    _matmul,
    torch.matmul,
    operator.matmul,
    "matmul",
    torch.mm,
    torch.bmm,
    "mm",
    "bmm",
    aten.matmul,
    aten.mm,
    aten.bmm,
)
register(_linear, F.linear, aten.linear)
register(_addmm, torch.addmm, torch.baddbmm, aten.addmm, aten.baddbmm)


# -- shapes, views and data movement ---------------------------------------------------------
def _sym_dims(x) -> tuple:
    return tuple(SymDim.make(d) for d in shape_of(x))


def _product(dims):
    out = 1
    for d in dims:
        out = SymDim.make(d) * out if isinstance(out, int) else out * SymDim.make(d)
    return out


def _infer_minus_one(in_shape: tuple, shape: list) -> list:
    """Resolve a `-1` in a target shape when the sizes (symbolic ones too) determine it."""
    shape = [dim_value(d) for d in shape]
    if -1 not in shape:
        return shape
    in_left, out_left = list(in_shape), []
    for d in shape:
        if d == -1:
            continue
        if d in in_left:
            in_left.remove(d)
        else:
            out_left.append(d)
    if all(isinstance(d, int) for d in in_left + out_left):
        size = int(np.prod(in_left, dtype=np.int64)) // max(
            int(np.prod(out_left, dtype=np.int64)), 1
        )
    elif not out_left:
        size = dim_value(_product(in_left))
    else:
        return shape
    return [size if d == -1 else d for d in shape]


def reshape(ctx: Importer, x, shape):
    shape = _infer_minus_one(shape_of(x), list(shape))
    if tuple(shape) == shape_of(x):
        return x
    return call(ctx, "reshape", x, shape)


def permute(ctx: Importer, x, axes):
    axes = [axis(a, ndim(x)) for a in axes]
    if axes == list(range(ndim(x))):
        return x
    return call(ctx, "permute_dims", x, axes)


def transpose(ctx: Importer, x, d0: int, d1: int):
    axes = list(range(ndim(x)))
    d0, d1 = axis(d0, ndim(x)), axis(d1, ndim(x))
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return permute(ctx, x, axes)


def flatten(ctx: Importer, x, start: int = 0, end: int = -1):
    rank = ndim(x)
    if rank == 0:
        return reshape(ctx, x, [1])
    start, end = axis(start, rank), axis(end, rank)
    dims = _sym_dims(x)
    return reshape(ctx, x, dims[:start] + (_product(dims[start : end + 1]),) + dims[end + 1 :])


def strided_slice(ctx: Importer, x, axes, begin, end, strides=None):
    """Slice along `axes`, clamping bounds to static sizes; untouched axes are dropped."""
    strides = strides or [1] * len(axes)
    keep = [[], [], [], []]
    for a, b, e, s in zip(axes, begin, end, strides):
        size = shape_of(x)[a]
        if isinstance(size, int):
            b = max(0, min(size, b + size if b < 0 else b))
            e = max(0, min(size, e + size if e < 0 else e))
            if (b, e, s) == (0, size, 1):
                continue
        elif (b, s) == (0, 1) and e >= 2**62:
            continue  # a whole symbolic dim; relax.strided_slice resolves other symbolic bounds
        for lst, v in zip(keep, (a, b, e, s)):
            lst.append(v)
    if not keep[0]:
        return x
    return call(ctx, "strided_slice", x, *keep)


def _slice_bounds(sl: slice):
    """(begin, end, stride) of a python slice; an open end is "to the end" for strided_slice."""
    start = 0 if sl.start is None else sl.start
    stop = 2**63 - 1 if sl.stop is None else sl.stop
    step = 1 if sl.step is None else sl.step
    if step <= 0:
        raise NotImplementedError(f"slice step must be positive (got {step})")
    return start, stop, step


def squeeze(ctx: Importer, x, axes=None):
    rank = ndim(x)
    if axes is None:
        axes = list(range(rank))
    axes = [axis(a, rank) for a in (axes if isinstance(axes, (list, tuple)) else [axes])]
    axes = [a for a in axes if shape_of(x)[a] == 1]  # torch ignores axes of size != 1
    return call(ctx, "squeeze", x, axes) if axes else x


def select(ctx: Importer, x, dim: int, index: int):
    dim = axis(dim, ndim(x))
    index = index + shape_of(x)[dim] if index < 0 else index
    return squeeze(ctx, strided_slice(ctx, x, [dim], [index], [index + 1]), [dim])


def getitem(ctx: Importer, node: fx.Node):
    """`x[idx]`: tuple items, sizes, or tensor indexing with ints, slices, None, ... and one tensor."""
    obj, idx = ctx.arg(node, 0), ctx.arg(node, 1)
    if not is_tensor(obj):
        return obj[idx]
    items = list(idx) if isinstance(idx, tuple) else [idx]
    rank = ndim(obj)
    used = sum(1 for it in items if it is not None and it is not Ellipsis)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (rank - used)
    items += [slice(None)] * (rank - sum(1 for it in items if it is not None))
    axes, begin, end, strides, drop, new_axes, take = [], [], [], [], [], [], None
    in_axis = out_axis = 0
    for it in items:
        if it is None:
            new_axes.append(out_axis)
            out_axis += 1
            continue
        size = shape_of(obj)[in_axis]
        if isinstance(it, int) and not isinstance(it, bool):
            k = it + size if it < 0 else it
            axes.append(in_axis), begin.append(k), end.append(k + 1), strides.append(1)
            drop.append(in_axis)
        elif isinstance(it, slice):
            b, e, s = _slice_bounds(it)
            axes.append(in_axis), begin.append(b), end.append(e), strides.append(s)
            out_axis += 1
        elif is_tensor(it) and take is None:
            take = (in_axis, it)
            out_axis += ndim(it)
        else:
            raise NotImplementedError(f"unsupported index {it!r} at node '{node.name}'")
        in_axis += 1
    out = strided_slice(ctx, obj, axes, begin, end, strides)
    if take is not None:
        if drop:
            raise NotImplementedError(
                f"tensor index mixed with integer indices at node '{node.name}'"
            )
        out = call(ctx, "take", out, take[1], take[0])
    out = squeeze(ctx, out, drop) if drop else out
    return call(ctx, "expand_dims", out, new_axes) if new_axes else out


def _size(ctx: Importer, node: fx.Node):
    dims = _sym_dims(first(ctx, node))
    dim = ctx.arg(node, 1, "dim")
    return dims if dim is None else dims[dim]


def _getattr(ctx: Importer, node: fx.Node):
    obj, name = ctx.arg(node, 0), ctx.arg(node, 1)
    if not is_tensor(obj):
        return getattr(obj, name)
    if name == "shape":
        return _sym_dims(obj)
    if name == "ndim":
        return ndim(obj)
    if name == "dtype":
        return getattr(torch, obj.struct_info.dtype)
    if name in ("T", "mT"):
        return (
            transpose(ctx, obj, -2, -1)
            if name == "mT"
            else permute(ctx, obj, range(ndim(obj))[::-1])
        )
    raise NotImplementedError(f"unsupported tensor attribute '{name}' at node '{node.name}'")


def _view(ctx: Importer, node: fx.Node):
    x = first(ctx, node)
    return reshape(ctx, x, ctx.rest(node, 1, ("shape", "size")))


def _flatten(ctx: Importer, node: fx.Node):
    return flatten(
        ctx, first(ctx, node), ctx.arg(node, 1, "start_dim", 0), ctx.arg(node, 2, "end_dim", -1)
    )


def _unflatten(ctx: Importer, node: fx.Node):
    x, dim, sizes = first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "sizes")
    dim, dims = axis(dim, ndim(x)), _sym_dims(x)
    return reshape(ctx, x, dims[:dim] + tuple(sizes) + dims[dim + 1 :])


def _permute(ctx: Importer, node: fx.Node):
    return permute(ctx, first(ctx, node), ctx.rest(node, 1, "dims"))


def _transpose(ctx: Importer, node: fx.Node):
    return transpose(ctx, first(ctx, node), ctx.arg(node, 1, "dim0"), ctx.arg(node, 2, "dim1"))


def _t(ctx: Importer, node: fx.Node):
    x = first(ctx, node)
    return transpose(ctx, x, 0, 1) if ndim(x) == 2 else x


def _unsqueeze(ctx: Importer, node: fx.Node):
    x = first(ctx, node)
    return call(ctx, "expand_dims", x, axis(ctx.arg(node, 1, "dim"), ndim(x) + 1))


def _squeeze(ctx: Importer, node: fx.Node):
    return squeeze(ctx, first(ctx, node), ctx.arg(node, 1, "dim"))


def broadcast_to(ctx: Importer, x, shape):
    shape = list(shape)
    lead = len(shape) - ndim(x)
    shape = [shape_of(x)[i - lead] if d == -1 else dim_value(d) for i, d in enumerate(shape)]
    return x if tuple(shape) == shape_of(x) else call(ctx, "broadcast_to", x, shape)


def _expand(ctx: Importer, node: fx.Node):
    return broadcast_to(ctx, first(ctx, node), ctx.rest(node, 1, "size"))


def _expand_as(ctx: Importer, node: fx.Node):
    return broadcast_to(ctx, first(ctx, node), shape_of(ctx.arg(node, 1, "other")))


def _view_as(ctx: Importer, node: fx.Node):
    return reshape(ctx, first(ctx, node), shape_of(ctx.arg(node, 1, "other")))


def _identity(ctx: Importer, node: fx.Node):
    return first(ctx, node)


def _astype_rule(dtype: str | None) -> Rule:
    """`x.to(...)`, `x.float()`, `x.type(dtype)`, `aten._to_copy(x, dtype=...)`: a dtype argument
    (positional or keyword, or another tensor's dtype) casts; devices and formats are ignored."""

    def rule(ctx: Importer, node: fx.Node):
        x = first(ctx, node)
        target = dtype
        if target is None:
            for a in list(ctx.retrieve(node.args[1:])) + [ctx.retrieve(node.kwargs.get("dtype"))]:
                if isinstance(a, torch.dtype):
                    target = dtype_str(a)
                elif is_tensor(a):
                    target = a.struct_info.dtype
        return astype(ctx, x, target) if target else x

    return rule


def _cat(ctx: Importer, node: fx.Node):
    tensors = ctx.arg(node, 0, "tensors")
    return call(ctx, "concat", list(tensors), ctx.arg(node, 1, "dim", 0))


def _stack(ctx: Importer, node: fx.Node):
    tensors, dim = ctx.arg(node, 0, "tensors"), ctx.arg(node, 1, "dim", 0)
    dim = axis(dim, ndim(tensors[0]) + 1)
    return call(ctx, "concat", [call(ctx, "expand_dims", t, dim) for t in tensors], dim)


def split(ctx: Importer, x, sizes: list, dim: int) -> tuple:
    """One `strided_slice` per part: each part is its own var (a graph output, too)."""
    dim, bounds = axis(dim, ndim(x)), [0] + [int(i) for i in np.cumsum(sizes)]
    return tuple(strided_slice(ctx, x, [dim], [b], [e]) for b, e in itertools.pairwise(bounds))


def _split(ctx: Importer, node: fx.Node):
    x, size = (
        first(ctx, node),
        ctx.arg(node, 1, ("split_size_or_sections", "split_size", "split_sizes")),
    )
    dim = axis(ctx.arg(node, 2, "dim", 0), ndim(x))
    if isinstance(size, int):
        length = shape_of(x)[dim]
        size = [size] * (length // size) + ([length % size] if length % size else [])
    return split(ctx, x, list(size), dim)


def _chunk(ctx: Importer, node: fx.Node):
    x, chunks = first(ctx, node), ctx.arg(node, 1, "chunks")
    dim = axis(ctx.arg(node, 2, "dim", 0), ndim(x))
    length = shape_of(x)[dim]
    step = -(-length // chunks)
    return split(ctx, x, [min(step, length - i) for i in range(0, length, step)], dim)


def _unbind(ctx: Importer, node: fx.Node):
    x, dim = first(ctx, node), axis(ctx.arg(node, 1, "dim", 0), ndim(first(ctx, node)))
    parts = split(ctx, x, [1] * shape_of(x)[dim], dim)
    return tuple(squeeze(ctx, p, [dim]) for p in parts)


def _select(ctx: Importer, node: fx.Node):
    return select(ctx, first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "index"))


def _slice(ctx: Importer, node: fx.Node):
    x, dim = first(ctx, node), ctx.arg(node, 1, "dim", 0)
    start, end = ctx.arg(node, 2, "start"), ctx.arg(node, 3, "end")
    b, e, s = _slice_bounds(slice(start, end, ctx.arg(node, 4, "step", 1)))
    return strided_slice(ctx, x, [axis(dim, ndim(x))], [b], [e], [s])


def _narrow(ctx: Importer, node: fx.Node):
    x, dim, start = first(ctx, node), ctx.arg(node, 1, "dim"), ctx.arg(node, 2, "start")
    return strided_slice(
        ctx, x, [axis(dim, ndim(x))], [start], [start + ctx.arg(node, 3, "length")]
    )


register(getitem, operator.getitem)
register(_size, "size", aten.sym_size)
register(_getattr, getattr)
register(lambda ctx, node: ndim(first(ctx, node)), "dim")
register(lambda ctx, node: _product(_sym_dims(first(ctx, node))), "numel")
register(_view, "view", "reshape", torch.reshape, aten.view, aten.reshape, aten._unsafe_view)
register(_flatten, torch.flatten, "flatten", aten.flatten)
register(_unflatten, torch.unflatten, "unflatten", aten.unflatten)
register(_permute, torch.permute, "permute", aten.permute)
register(_transpose, torch.transpose, "transpose", torch.swapaxes, aten.transpose)
register(_t, torch.t, "t", aten.t)
register(_unsqueeze, torch.unsqueeze, "unsqueeze", aten.unsqueeze)
register(_squeeze, torch.squeeze, "squeeze", aten.squeeze)
register(_expand, "expand", aten.expand)
register(_expand_as, "expand_as", aten.expand_as)
register(_view_as, "view_as", "reshape_as", aten.view_as, aten.reshape_as)
register(
    _identity,
    "contiguous",
    "clone",
    "detach",
    torch.clone,
    torch.detach,
    F.dropout,
    torch.dropout,
    "cpu",
    aten.clone,
    aten.alias,
    aten.detach,
    aten.contiguous,
    aten.dropout,
    aten.lift_fresh_copy,
)
register(_astype_rule(None), "to", "type", "type_as", aten.to, aten._to_copy)
for _name, _dtype in {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "int": "int32",
    "long": "int64",
    "bool": "bool",
}.items():
    register(_astype_rule(_dtype), _name)
register(_cat, torch.cat, torch.concat, aten.cat, aten.concat)
register(_stack, torch.stack, aten.stack)
register(_split, torch.split, "split", aten.split, aten.split_with_sizes)
register(_chunk, torch.chunk, "chunk", aten.chunk)
register(_unbind, torch.unbind, "unbind", aten.unbind)
register(_select, torch.select, "select", aten.select)
register(_slice, aten.slice)
register(_narrow, torch.narrow, "narrow", aten.narrow)


# -- reductions and normalisations -----------------------------------------------------------
def _axes(x, dim) -> list | None:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return [axis(d, ndim(x)) for d in dims]


def reduce(ctx: Importer, op_name: str, x, dim=None, keepdim: bool = False):
    return call(ctx, op_name, x, _axes(x, dim), keepdim)


def reduction(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x = first(ctx, node)
        dtype = ctx.arg(node, None, "dtype")
        if dtype is not None:
            x = astype(ctx, x, dtype_str(dtype))
        dim, keepdim = (
            ctx.arg(node, 1, ("dim", "axis")),
            ctx.arg(node, 2, ("keepdim", "keepdims"), False),
        )
        return reduce(ctx, op_name, x, dim, keepdim)

    return rule


MinMax = collections.namedtuple("MinMax", ["values", "indices"])


def _max_min(op_name: str, arg_op: str, pairwise: str) -> Rule:
    """`torch.max(x)`, `torch.max(x, dim)` -> (values, indices), `torch.max(x, other)`."""

    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, ("dim", "other"))
        if is_tensor(dim):
            return emit_binary(ctx, pairwise, x, dim)
        if dim is None:
            return reduce(ctx, op_name, x)
        keepdim = ctx.arg(node, 2, "keepdim", False)
        values = reduce(ctx, op_name, x, dim, keepdim)
        return MinMax(values, Deferred(lambda: call(ctx, arg_op, x, axis(dim, ndim(x)), keepdim)))

    return rule


def _arg_reduce(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
        keepdim = ctx.arg(node, 2, "keepdim", False)
        return call(ctx, op_name, x, None if dim is None else axis(dim, ndim(x)), keepdim)

    return rule


def _any_all(op_name: str) -> Rule:
    """`any`/`all` over `dim` as the max/min of the mask as numbers (decomposed)."""

    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
        numbers = astype(ctx, x, "float32")
        out = reduce(ctx, op_name, numbers, dim, ctx.arg(node, 2, "keepdim", False))
        return emit_binary(ctx, "greater", out, 0.0)

    return rule


def variance(ctx: Importer, x, dim, correction, keepdim: bool):
    """`sum((x - mean)^2) / (N - correction)` over `dim` (decomposed)."""
    axes = _axes(x, dim) or list(range(ndim(x)))
    centered = emit_binary(ctx, "subtract", x, reduce(ctx, "mean", x, axes, True))
    total = reduce(ctx, "sum", emit_binary(ctx, "multiply", centered, centered), axes, keepdim)
    count = int(np.prod([shape_of(x)[a] for a in axes]))
    return emit_binary(ctx, "divide", total, float(max(count - correction, 0)))


def _var_std(is_std: bool) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
        unbiased = ctx.arg(node, None, "unbiased", True)
        keepdim = ctx.arg(node, None, "keepdim", False)
        if len(node.args) > 2 and isinstance(node.args[2], bool):  # var(x, dim, unbiased, keepdim)
            unbiased, keepdim = node.args[2], ctx.arg(node, 3, "keepdim", keepdim)
        if isinstance(dim, bool):  # var(x, unbiased)
            dim, unbiased = None, dim
        correction = ctx.arg(node, None, "correction", 1 if unbiased else 0)
        out = variance(ctx, x, dim, 1 if correction is None else correction, keepdim)
        return call(ctx, "sqrt", out) if is_std else out

    return rule


def softmax_rule(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x, dim = first(ctx, node), ctx.arg(node, 1, "dim")
        dtype = ctx.arg(node, 2, "dtype") if not str(node.target).startswith("aten._") else None
        if isinstance(dtype, torch.dtype):
            x = astype(ctx, x, dtype_str(dtype))
        return call(ctx, op_name, x, axis(-1 if dim is None else dim, ndim(x)))

    return rule


for _op_name, _targets in {
    "sum": (torch.sum, "sum", aten.sum),
    "mean": (torch.mean, "mean", aten.mean),
    "max": (torch.amax, "amax", aten.amax),
    "min": (torch.amin, "amin", aten.amin),
}.items():
    register(reduction(_op_name), *_targets)
register(_max_min("max", "argmax", "maximum"), torch.max, "max", aten.max)
register(_max_min("min", "argmin", "minimum"), torch.min, "min", aten.min)
register(_any_all("max"), torch.any, "any", aten.any)
register(_any_all("min"), torch.all, "all", aten.all)
register(_arg_reduce("argmax"), torch.argmax, "argmax", aten.argmax)
register(_arg_reduce("argmin"), torch.argmin, "argmin", aten.argmin)
register(_var_std(False), torch.var, "var", aten.var)
register(_var_std(True), torch.std, "std", aten.std)
register(
    softmax_rule("nn.softmax"), torch.softmax, F.softmax, "softmax", aten.softmax, aten._softmax
)
register(
    softmax_rule("nn.log_softmax"),
    torch.log_softmax,
    F.log_softmax,
    "log_softmax",
    aten.log_softmax,
    aten._log_softmax,
)


def default_param(ctx: Importer, param, channels: int, dtype: str, fill: float):
    """An absent affine parameter (gamma/beta) as a constant filled with `fill`."""
    return param if param is not None else const(np.full((channels,), fill, dtype=dtype))


def batch_norm(ctx: Importer, x, weight, bias, mean, var, eps: float):
    """Inference batch normalisation over axis 1."""
    channels, dtype = shape_of(mean)[0], x.struct_info.dtype
    weight = default_param(ctx, weight, channels, dtype, 1.0)
    bias = default_param(ctx, bias, channels, dtype, 0.0)
    out = call(ctx, "nn.batch_norm", x, weight, bias, mean, var, axis=1, epsilon=eps)
    return out[0] if isinstance(out, tuple) else out


def layer_norm(ctx: Importer, x, normalized_shape, weight, bias, eps: float):
    shape = [
        int(d)
        for d in (
            normalized_shape if isinstance(normalized_shape, (list, tuple)) else [normalized_shape]
        )
    ]
    dtype = x.struct_info.dtype
    weight = weight if weight is not None else const(np.ones(shape, dtype=dtype))
    bias = bias if bias is not None else const(np.zeros(shape, dtype=dtype))
    axes = list(range(ndim(x) - len(shape), ndim(x)))
    return call(ctx, "nn.layer_norm", x, weight, bias, axes, epsilon=eps)


def _batch_norm(ctx: Importer, node: fx.Node):
    """`F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)`."""
    x, mean, var = (
        first(ctx, node),
        ctx.arg(node, 1, "running_mean"),
        ctx.arg(node, 2, "running_var"),
    )
    weight, bias = ctx.arg(node, 3, "weight"), ctx.arg(node, 4, "bias")
    if ctx.arg(node, 5, "training", False):
        raise NotImplementedError(f"batch_norm in training mode at node '{node.name}'")
    return batch_norm(ctx, x, weight, bias, mean, var, ctx.arg(node, 7, "eps", 1e-5))


def _layer_norm(ctx: Importer, node: fx.Node):
    x, shape = first(ctx, node), ctx.arg(node, 1, "normalized_shape")
    weight, bias = ctx.arg(node, 2, "weight"), ctx.arg(node, 3, "bias")
    return layer_norm(ctx, x, shape, weight, bias, ctx.arg(node, 4, "eps", 1e-5))


register(_batch_norm, F.batch_norm)
register(_layer_norm, F.layer_norm, aten.layer_norm)


# -- convolution, pooling, embedding, attention ---------------------------------------------
def conv2d(ctx: Importer, x, weight, bias, stride, padding, dilation, groups: int):
    """NCHW / OIHW convolution; `padding` may be ints or "same"/"valid"; rank-3 input is conv1d."""
    if ndim(x) == 3:  # conv1d as conv2d over a height of 1
        x4 = call(ctx, "expand_dims", x, 2)
        w4 = call(ctx, "expand_dims", weight, 2)
        pad = padding if isinstance(padding, str) else [0] + make_pair(padding, 1)
        out = conv2d(
            ctx, x4, w4, bias, [1] + make_pair(stride, 1), pad, [1] + make_pair(dilation, 1), groups
        )
        return squeeze(ctx, out, [2])
    stride, dilation = make_pair(stride), make_pair(dilation)
    if padding == "valid":
        padding = [0, 0]
    elif padding == "same":
        kernel = shape_of(weight)[2:]
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        padding = [t // 2 for t in total] + [t - t // 2 for t in total]
    padding = make_pair(padding) if len(make_pair(padding)) == 2 else list(padding)
    out = call(
        ctx,
        "nn.conv2d",
        x,
        weight,
        strides=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
    )
    if bias is None:
        return out
    return emit_binary(ctx, "add", out, reshape(ctx, bias, [1, shape_of(bias)[0], 1, 1]))


def max_pool2d(ctx: Importer, x, kernel, stride, padding, dilation, ceil_mode: bool):
    kernel = make_pair(kernel)
    stride = make_pair(stride) if stride not in (None, [], ()) else kernel
    return call(
        ctx,
        "nn.max_pool2d",
        x,
        pool_size=kernel,
        strides=stride,
        padding=make_pair(padding),
        dilation=make_pair(dilation),
        ceil_mode=ceil_mode,
    )


def avg_pool2d(
    ctx: Importer,
    x,
    kernel,
    stride,
    padding,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override=None,
):
    if divisor_override is not None:
        raise NotImplementedError("avg_pool2d with divisor_override")
    kernel = make_pair(kernel)
    stride = make_pair(stride) if stride not in (None, [], ()) else kernel
    padding = make_pair(padding)
    kwargs = {"count_include_pad": count_include_pad} if any(padding) else {}
    return call(
        ctx,
        "nn.avg_pool2d",
        x,
        pool_size=kernel,
        strides=stride,
        padding=padding,
        ceil_mode=ceil_mode,
        **kwargs,
    )


def adaptive_avg_pool2d(ctx: Importer, x, output_size):
    size = make_pair(output_size)
    size = [shape_of(x)[2 + i] if s is None else s for i, s in enumerate(size)]
    return call(ctx, "nn.adaptive_avg_pool2d", x, size)


def attention(ctx: Importer, q, k, v, mask=None, is_causal: bool = False, scale=None):
    """softmax(q @ k^T * scale + mask) @ v over the last two axes (scaled dot-product attention)."""
    scale = 1.0 / float(np.sqrt(shape_of(q)[-1])) if scale is None else float(scale)
    scores = emit_binary(ctx, "multiply", call(ctx, "matmul", q, transpose(ctx, k, -2, -1)), scale)
    if is_causal:
        length, source = shape_of(q)[-2], shape_of(k)[-2]
        mask = const(np.tril(np.ones((length, source), dtype=bool)))
    if mask is not None and mask.struct_info.dtype == "bool":
        scores = call(ctx, "where", mask, scores, as_tensor(float("-inf"), scores))
    elif mask is not None:
        scores = emit_binary(ctx, "add", scores, mask)
    return call(ctx, "matmul", call(ctx, "nn.softmax", scores, ndim(scores) - 1), v)


def _conv(ctx: Importer, node: fx.Node):
    """`F.conv2d(input, weight, bias, stride, padding, dilation, groups)` (also conv1d)."""
    x, w, b = first(ctx, node), ctx.arg(node, 1, "weight"), ctx.arg(node, 2, "bias")
    return conv2d(
        ctx,
        x,
        w,
        b,
        ctx.arg(node, 3, "stride", 1),
        ctx.arg(node, 4, "padding", 0),
        ctx.arg(node, 5, "dilation", 1),
        ctx.arg(node, 6, "groups", 1),
    )


def _max_pool(ctx: Importer, node: fx.Node):
    x, kernel = first(ctx, node), ctx.arg(node, 1, "kernel_size")
    out = max_pool2d(
        ctx,
        x,
        kernel,
        ctx.arg(node, 2, "stride"),
        ctx.arg(node, 3, "padding", 0),
        ctx.arg(node, 4, "dilation", 1),
        ctx.arg(node, 5, "ceil_mode", False),
    )
    if ctx.arg(node, 6, "return_indices", False) or "with_indices" in str(node.target):
        return out, Deferred(lambda: _no_indices(node))
    return out


def _no_indices(node: fx.Node):
    raise NotImplementedError(f"the indices of max_pool2d at node '{node.name}' are not supported")


def _avg_pool(ctx: Importer, node: fx.Node):
    x, kernel = first(ctx, node), ctx.arg(node, 1, "kernel_size")
    return avg_pool2d(
        ctx,
        x,
        kernel,
        ctx.arg(node, 2, "stride"),
        ctx.arg(node, 3, "padding", 0),
        ctx.arg(node, 4, "ceil_mode", False),
        ctx.arg(node, 5, "count_include_pad", True),
        ctx.arg(node, 6, "divisor_override"),
    )


def _adaptive_avg_pool(ctx: Importer, node: fx.Node):
    return adaptive_avg_pool2d(ctx, first(ctx, node), ctx.arg(node, 1, "output_size"))


def _embedding(ctx: Importer, node: fx.Node):
    """`F.embedding(input, weight)`; note `aten.embedding(weight, indices)` swaps them."""
    indices, weight = first(ctx, node), ctx.arg(node, 1, "weight")
    if isinstance(node.target, torch._ops.OpOverload):
        indices, weight = weight, indices
    return call(ctx, "take", weight, indices, 0)


def _sdpa(ctx: Importer, node: fx.Node):
    q, k, v = first(ctx, node), ctx.arg(node, 1, "key"), ctx.arg(node, 2, "value")
    if ctx.arg(node, None, "enable_gqa", False):
        raise NotImplementedError(
            f"scaled_dot_product_attention with enable_gqa at node '{node.name}'"
        )
    return attention(
        ctx,
        q,
        k,
        v,
        ctx.arg(node, 3, "attn_mask"),
        ctx.arg(node, 5, "is_causal", False),
        ctx.arg(node, None, "scale"),
    )


register(_conv, F.conv2d, F.conv1d, aten.conv2d, aten.conv1d)
register(
    _max_pool,
    F.max_pool2d,
    F.max_pool2d_with_indices,
    aten.max_pool2d,
    aten.max_pool2d_with_indices,
)
register(_avg_pool, F.avg_pool2d, aten.avg_pool2d)
register(
    _adaptive_avg_pool, F.adaptive_avg_pool2d, aten.adaptive_avg_pool2d, aten._adaptive_avg_pool2d
)
register(_embedding, F.embedding, aten.embedding)
register(_sdpa, F.scaled_dot_product_attention, aten.scaled_dot_product_attention)


# -- selection, masks and tensor creation ----------------------------------------------------
def where(ctx: Importer, cond, x, y):
    like = x if is_tensor(x) else y
    x, y = binary_operands(ctx, as_tensor(x, like), as_tensor(y, like))
    return call(ctx, "where", cond, x, y)


def _where(ctx: Importer, node: fx.Node):
    cond, x, y = (
        ctx.arg(node, 0, "condition"),
        ctx.arg(node, 1, ("input", "self")),
        ctx.arg(node, 2, "other"),
    )
    if x is None:
        raise NotImplementedError(f"torch.where(condition) (nonzero) at node '{node.name}'")
    return where(ctx, cond, x, y)


def _masked_fill(ctx: Importer, node: fx.Node):
    x, mask, value = first(ctx, node), ctx.arg(node, 1, "mask"), ctx.arg(node, 2, "value")
    return where(
        ctx,
        mask,
        as_tensor(value, x) if not is_tensor(value) else astype(ctx, value, x.struct_info.dtype),
        x,
    )


def _masked_fill_(ctx: Importer, node: fx.Node):
    """In-place: later uses of the tensor see the filled value."""
    out = _masked_fill(ctx, node)
    ctx.env[node.args[0]] = out
    return out


def _clamp(ctx: Importer, node: fx.Node):
    x, lo, hi = first(ctx, node), ctx.arg(node, 1, "min"), ctx.arg(node, 2, "max")
    if is_tensor(lo) or is_tensor(hi):
        x = emit_binary(ctx, "maximum", x, lo) if lo is not None else x
        return emit_binary(ctx, "minimum", x, hi) if hi is not None else x
    lo = float("-inf") if lo is None else lo
    hi = float("inf") if hi is None else hi
    return call(ctx, "clip", x, lo, hi)


def _triangle(op_name: str) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        return call(ctx, op_name, first(ctx, node), ctx.arg(node, 1, "diagonal", 0))

    return rule


def full(ctx: Importer, shape, value, dtype: str):
    """A filled tensor of a (possibly symbolic) shape: a scalar constant broadcast to it."""
    return call(
        ctx, "broadcast_to", const(np.array(value, dtype=dtype)), [dim_value(d) for d in shape]
    )


def _full_like(fill) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        x = first(ctx, node)
        value = ctx.arg(node, 1, "fill_value") if fill is None else fill
        dtype = ctx.arg(node, None, "dtype")
        return full(ctx, shape_of(x), value, dtype_str(dtype) if dtype else x.struct_info.dtype)

    return rule


def _full(fill) -> Rule:
    def rule(ctx: Importer, node: fx.Node):
        if fill is None:
            shape, value = ctx.arg(node, 0, "size"), ctx.arg(node, 1, "fill_value")
        else:
            shape, value = ctx.rest(node, 0, "size"), fill
        dtype = ctx.arg(node, None, "dtype")
        if dtype is None:
            dtype = torch.float32 if isinstance(value, float) or fill is not None else torch.int64
        return full(ctx, shape, value, dtype_str(dtype))

    return rule


register(_where, torch.where, aten.where)
register(_masked_fill, torch.masked_fill, "masked_fill", aten.masked_fill)
register(_masked_fill_, "masked_fill_")
register(_clamp, torch.clamp, torch.clip, "clamp", "clip", aten.clamp, aten.clip)
register(_triangle("tril"), torch.tril, "tril", aten.tril)
register(_triangle("triu"), torch.triu, "triu", aten.triu)
register(_full_like(None), torch.full_like, aten.full_like)
register(_full_like(0), torch.zeros_like, aten.zeros_like)
register(_full_like(1), torch.ones_like, aten.ones_like)
register(_full(None), torch.full, aten.full)
register(_full(0), torch.zeros, aten.zeros)
register(_full(1), torch.ones, aten.ones)
