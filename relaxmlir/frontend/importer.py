"""The importer machinery: the `CONVERTERS` table, `Importer` (graph walk, dispatch, folding).

`CONVERTERS` is the one table of the importers: a torch target (a `torch`/`torch.nn.functional`/
`operator` callable, a tensor method name as FX spells it, or an ATen `OpOverload` or its
`OpOverloadPacket`) -> a rule `(ctx, node) -> value`. A value is a relax `Var`/`Constant`, a
python value (int, float, `SymDim`, tuples of them), or a tuple of values. The rules are grouped
by family in `relaxmlir.frontend.rules`, whose package import fills the table; rules that only
one importer needs (nn.Module rules, ATen-only ops) sit in that importer's module and register
into the same table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from mlir import ir
from torch import fx

from dialects.relax import INPUT_UPDATES_ATTR, STATE_ATTR
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Constant, Expr, Var, const
from relaxmlir.relax.struct_info import TensorStructInfo, TupleStructInfo
from relaxmlir.relax.transform.lift_transform_params import NUM_INPUT_ATTR
from relaxmlir.runtime.dtype import np_dtype
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


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A contiguous host copy of a torch tensor; bfloat16 becomes ml_dtypes' bfloat16 (numpy
    cannot convert it itself), the bits unchanged."""
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np_dtype("bfloat16"))
    return tensor.numpy()


def to_torch(array: np.ndarray) -> torch.Tensor:
    """The inverse of `to_numpy` (a copy)."""
    if array.dtype == np_dtype("bfloat16"):
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


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
        self.state: dict[str, Var] = {}  # name -> parameter of each buffer updated in place
        self.state_values: dict[str, np.ndarray] = {}  # name -> its value at import
        self.state_updates: dict[str, Any] = {}  # name -> its value when the call ends
        self.input_updates: dict[str, Any] = {}  # input name -> its value when the call ends

    # weights and the function ---------------------------------------------------------------
    def weight(self, name: str, tensor: torch.Tensor, as_param: bool = True):
        """A model weight: a `relax.const`, or a function parameter with `keep_params_as_input`."""
        if name not in self.weights:
            data = to_numpy(tensor)
            if self.keep_params_as_input and as_param:
                self.weights[name] = Var(name, TensorStructInfo(data.shape, str(data.dtype)))
                self.params[name] = data
            else:  # the model's own memory: no copy (relax.build checks it is unchanged)
                self.weights[name] = Constant(data, borrowed=True)
        return self.weights[name]

    def state_var(self, name: str, tensor: torch.Tensor) -> Var:
        """A buffer that the program updates in place (a running count, a static KV cache): a
        parameter of "main" after the inputs, whose value at the end of the call (set in
        `state_updates`) "main" returns after its outputs. The VM keeps it between calls, from
        the value it has now (a copy: the module's own buffer may change after the import)."""
        if name not in self.state:
            data = np.array(to_numpy(tensor), copy=True)
            self.state[name] = Var(name, TensorStructInfo(data.shape, str(data.dtype)))
            self.state_values[name] = data
        return self.state[name]

    def build(self, body: Callable[[], Any]):
        """Run `body` inside function "main" and one dataflow block; what it returns is the
        output (a value or a tuple of them). Returns the module, or `(mod, params)`.

        With state (`state_var`), "main" takes it after the inputs and returns its new values
        after the outputs, and "main_initial_state" returns its values at import (`STATE_ATTR`
        names both for the VM, which keeps the state between calls)."""
        with scope(), self.bb.function("main"):
            with self.bb.dataflow():
                result = body()
                items = result if isinstance(result, (list, tuple)) else [result]
                outs = [self.bb.emit_output(self._output_var(v)) for v in items]
                for name in self.state:
                    update = self._output_var(self.state_updates[name])
                    outs.append(self.bb.emit_output(update))
                for update in self.input_updates.values():
                    outs.append(self.bb.emit_output(self._output_var(update)))
            kept = [self.weights[name] for name in self.params]
            single = not isinstance(result, (list, tuple)) and not self.state
            self.bb.emit_func_output(
                outs[0] if single and not self.input_updates else outs,
                params=self.inputs + list(self.state.values()) + kept,
            )
        if self.state:
            with scope(), self.bb.function("main_initial_state"):
                self.bb.emit_func_output([Constant(v) for v in self.state_values.values()])
        mod = self.bb.get()
        with scope():
            if self.input_updates:  # written back into the caller's arrays by the VM
                mod["main"].op.attributes[INPUT_UPDATES_ATTR] = ir.ArrayAttr.get(
                    [ir.StringAttr.get(n) for n in self.input_updates]
                )
            if self.state:
                mod["main"].op.attributes[STATE_ATTR] = ir.DictAttr.get({
                    "params": ir.ArrayAttr.get([ir.StringAttr.get(n) for n in self.state]),
                    "init": ir.StringAttr.get("main_initial_state"),
                })  # fmt: skip
            if not self.keep_params_as_input:
                return mod
            # the parameters after the inputs and the state are weights (LiftTransformParams)
            mod["main"].op.attributes[NUM_INPUT_ATTR] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), len(self.inputs) + len(self.state)
            )
        return mod, dict(self.params)

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
        sinfo = getattr(expr, "struct_info", None)
        if isinstance(sinfo, TensorStructInfo) and 0 in tuple(sinfo.shape):
            # an empty result has no values to compute: no kernel reads the (empty) operands
            from relaxmlir.relax import op

            expr = op.zeros(tuple(sinfo.shape), sinfo.dtype)
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
        """The value of a `call_function` / `call_method` node. An in-place op (`x.add_(y)`,
        `x.index_copy_(...)`, an ATen op that writes its first argument) also rebinds its
        first argument, so that later reads of that tensor see the new value."""
        if node.target not in self.overrides:
            folded = self._fold(node)
            if folded is not _NOT_FOLDED:
                return folded
        return self.rebind_written(node, self.rule_for(node)(self, node))

    def rebind_written(self, node: fx.Node, out: Any) -> Any:
        """`out`, the value of `node`; an in-place node also makes it its first argument's."""
        if writes_in_place(node) and isinstance(node.args[0], fx.Node) and is_tensor(out):
            self.env[node.args[0]] = out
        return out

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


def functional_rule(node: fx.Node):
    """The rule of the functional twin of in-place ATen op `node` (`relu_` -> `relu`) when its
    mutation cannot be seen: the tensor it writes is a fresh result (no view, input or weight)
    that nothing else reads. Else None.

    ResNet's `ReLU(inplace=True)` exports as `aten.relu_`, which sent the whole graph through
    `run_decompositions` (~0.4 s of every ResNet-18 build, cold or from the cache)."""
    aten = torch.ops.aten
    target = node.target
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable or not node.args:
        return None
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    if written != schema.arguments[:1]:
        return None  # only `self` is written
    name = target.overloadpacket.__name__
    packet = getattr(aten, name[:-1], None) if name.endswith("_") else None
    if packet is None or getattr(packet, target._overloadname, None) is None:
        return None
    rule = CONVERTERS.get(getattr(packet, target._overloadname)) or CONVERTERS.get(packet)
    src = node.args[0]
    if rule is None or not isinstance(src, fx.Node) or src.op != "call_function":
        return None
    src_schema = getattr(src.target, "_schema", None)
    if src_schema is None or src_schema.is_mutable or len(src.users) != 1:
        return None
    if any(r.alias_info is not None for r in src_schema.returns):
        return None  # a view: writing it would write its base
    return rule


def written_values(graph: fx.Graph) -> set:
    """The nodes whose values in-place nodes of `graph` write (their first arguments)."""
    targets = [n.args[0] for n in graph.nodes if writes_in_place(n)]
    return {t for t in targets if isinstance(t, fx.Node)}


def writes_in_place(node: fx.Node) -> bool:
    """`x.add_(y)` (a method named with a trailing underscore) or an ATen op whose schema writes
    its first argument."""
    if not node.args:
        return False
    target = node.target
    if isinstance(target, str):
        return node.op == "call_method" and target.endswith("_") and not target.startswith("__")
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.arguments:
        return False
    alias = schema.arguments[0].alias_info
    return alias is not None and alias.is_write


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
        return to_torch(value.data)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_torch(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_torch(v) for k, v in value.items()}
    return value


def _from_torch(value):
    if isinstance(value, torch.Tensor):
        return const(to_numpy(value))
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_from_torch(v) for v in value)
    if isinstance(value, tuple):  # namedtuples (torch.return_types)
        return tuple(_from_torch(v) for v in value)
    return value


def is_tensor(value) -> bool:
    return isinstance(value, Expr) and isinstance(value.struct_info, TensorStructInfo)
