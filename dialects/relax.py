"""The `relax` dialect: graph-level ops of relaxmlir, defined from Python through IRDL.

Naming: IRDL op names may not contain dots, so TVM's `relax.nn.softmax` is spelled
`relax.nn_softmax` here; `mlir_op_name` is the one place that maps between the two.

A dataflow block is an upstream `scf.execute_region` tagged with the unit attribute
`relax.dataflow` (see `DATAFLOW_ATTR`): IRDL in MLIR 22 cannot declare a terminator, and
`scf.execute_region` (run the region once, yield its outputs) is exactly a dataflow block, its
`scf.yield` being `R.output`. `no_inline` keeps canonicalization from dissolving it.
"""

from __future__ import annotations

from contextlib import contextmanager

from mlir import ir

from dialects.irdl_dsl import Attr, Dialect, Op, Operand, Result
from dialects.shape import isa

RELAX = Dialect("relax")

DATAFLOW_ATTR = "relax.dataflow"  # unit attribute on scf.execute_region
FUNCTION_ATTR = "relax.function"  # unit attribute on a graph-level func.func
PRIM_FUNC_ATTR = "relax.prim_func"  # unit attribute on a destination-passing primitive function
SHAPE_ATTR = "relax.shape"  # symbolic shapes: arg attr, or op attr holding one list per result
NUM_INPUT_ATTR = "relax.num_input"  # graph function: its leading parameters that are inputs
TRANSFORM_PARAMS_ATTR = "relax.transform_params"  # graph function: what computes its weights
# graph function with state that persists between calls (an exported module's buffers updated
# in place): {params = names of the state parameters, init = the function returning their first
# values, inplace = those written in their own buffers, `relax-inplace-state`}; its last results
# are the state's new values, in that order (the in-place ones get no out-parameter)
STATE_ATTR = "relax.state"
STATE_INPLACE_KEY = "inplace"
# graph function that writes some of its inputs in place (torch: `x.add_(y)` on an argument):
# the names of those parameters, whose new values are its last results (after the state's)
INPUT_UPDATES_ATTR = "relax.input_updates"


def mlir_op_name(tvm_name: str) -> str:
    """`relax.nn.softmax` -> `relax.nn_softmax` (IRDL op names cannot contain dots)."""
    head, _, rest = tvm_name.partition(".")
    return f"{head}.{rest.replace('.', '_')}"


def is_dataflow(op: ir.Operation) -> bool:
    return op.name == "scf.execute_region" and DATAFLOW_ATTR in op.attributes


def weight_index(value: ir.Value) -> int | None:
    """For an argument of a graph function with `num_input`: its index among the function's
    weights (the arguments after its inputs); None for an input or any other value."""
    if not isinstance(value.owner, ir.Block):
        return None
    func_op = value.owner.owner.operation
    if func_op.name != "func.func" or NUM_INPUT_ATTR not in func_op.attributes:
        return None
    num_input = ir.IntegerAttr(func_op.attributes[NUM_INPUT_ATTR]).value
    index = ir.BlockArgument(value).arg_number - num_input
    return index if index >= 0 else None


def enclosing_dataflow(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if is_dataflow(parent):
            return parent
        parent = parent.parent
    return None


def _prim_funcs(module: ir.Operation) -> dict[str, ir.Operation]:
    """The primitive functions of `module`'s body by name (the first of a name, as a scan finds)."""
    found: dict[str, ir.Operation] = {}
    for candidate in module.regions[0].blocks[0].operations:
        attrs = candidate.attributes
        if PRIM_FUNC_ATTR in attrs and "sym_name" in attrs:
            found.setdefault(ir.StringAttr(attrs["sym_name"]).value, candidate.operation)
    return found


# (module, its symbols) while a pass runs under `cached_symbols`
_CACHE: list[tuple[ir.Operation, dict[str, ir.Operation]]] = []


@contextmanager
def cached_symbols(module_op: ir.Operation):
    """Let `lookup_symbol` find primitive functions from one scan of `module_op` inside the
    block, for a pass that looks up every call's callee (a scan per lookup made that quadratic:
    2.4 ms per lookup at 2000 functions, 2 s of RegNetY-400MF's build). A name not in the scan
    is scanned for again (functions the pass adds are found); the pass must not erase or rename
    a primitive function. MLIR's own SymbolTable is no option: it aborts the process on a
    duplicate name, which passes create for a moment (a new entry function beside the old)."""
    _CACHE.append((module_op, _prim_funcs(module_op)))
    try:
        yield
    finally:
        _CACHE.pop()


def lookup_symbol(op: ir.Operation, name: str) -> ir.Operation | None:
    """Find the func.func named `name` in the module that encloses `op`."""
    module = op
    while module is not None and module.name != "builtin.module":
        module = module.parent
    if module is None:
        return None
    if _CACHE and _CACHE[-1][0] == module:
        prims = _CACHE[-1][1]
        if name not in prims:
            prims.update(_prim_funcs(module))
        if name in prims:
            return prims[name]
    for candidate in module.regions[0].blocks[0].operations:
        sym = candidate.attributes["sym_name"] if "sym_name" in candidate.attributes else None
        if sym is not None and ir.StringAttr(sym).value == name:
            return candidate.operation
    return None


def _verify_call_tir(op: ir.Operation) -> str | None:
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    func = lookup_symbol(op, callee)
    if func is None:
        return f"callee @{callee} not found in the module"
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    expected = len(op.operands) + len(op.results)
    if len(ftype.inputs) != expected:
        return (
            f"callee @{callee} takes {len(ftype.inputs)} arguments, expected ({expected}): "
            f"{len(op.operands)} inputs + {len(op.results)} outputs"
        )
    actual = [v.type for v in op.operands] + [r.type for r in op.results]
    for i, (want, got) in enumerate(zip(ftype.inputs, actual)):
        if not _compatible(want, got):
            return f"argument #{i} of @{callee} has type ({want}), got ({got})"
    return None


def _compatible(a: ir.Type, b: ir.Type) -> bool:
    if a == b:
        return True
    if not (isa(a, ir.RankedTensorType) and isa(b, ir.RankedTensorType)):
        return False
    a, b = ir.RankedTensorType(a), ir.RankedTensorType(b)
    if a.element_type != b.element_type or a.rank != b.rank:
        return False
    dyn = ir.ShapedType.get_dynamic_size()
    return all(x == y or dyn in (x, y) for x, y in zip(a.shape, b.shape))


def _verify_not_in_dataflow(op: ir.Operation) -> str | None:
    if enclosing_dataflow(op) is not None:
        return "is side-effecting and not allowed inside a dataflow block"
    return None


def _verify_packed_name(op: ir.Operation) -> str | None:
    if not ir.StringAttr(op.attributes["callee"]).value:
        return "expects a non-empty packed function name"
    return None


def _verify_constant(op: ir.Operation) -> str | None:
    value = op.attributes["value"]
    if isa(value, ir.DenseElementsAttr):
        value = ir.DenseElementsAttr(value)
    else:
        try:  # weights: dense_resource blobs (the bindings do not downcast to that class)
            value = ir.DenseResourceElementsAttr(value)
        except ValueError:
            return "expects a dense elements value"
    if value.type != op.results[0].type:
        return f"value type ({value.type}) does not match result type ({op.results[0].type})"
    return None


@RELAX.op
class CallTIR(Op):
    """Destination-passing call of a primitive function: outputs are allocated by the caller."""

    mnemonic = "call_tir"
    args = Operand("tensor", variadic=True)
    outs = Result("tensor", variadic=True)
    callee = Attr("symbol")
    verify = staticmethod(_verify_call_tir)


def _verify_call_tir_inplace(op: ir.Operation) -> str | None:
    if len(op.results) > len(op.operands):
        return f"{len(op.results)} results but only {len(op.operands)} operands to write them into"
    written = list(op.operands)[len(op.operands) - len(op.results) :]
    for i, (value, result) in enumerate(zip(written, op.results)):
        if value.type != result.type:
            return f"result #{i} ({result.type}) is written into an operand of type ({value.type})"
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    func = lookup_symbol(op, callee)
    if func is None:
        return f"callee @{callee} not found in the module"
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    if [str(t) for t in ftype.inputs] != [str(v.type) for v in op.operands]:
        return f"callee @{callee} has type ({ftype}), not one argument per operand"
    return None


@RELAX.op
class CallTIRInplace(Op):
    """Call of a primitive function that writes its results into its last operands' buffers
    (TVM's `call_tir_inplace`, the written arguments last): the callee takes the operands, the
    written ones as its out-arguments, whose other elements it leaves as they are. Each
    written operand must be read by nothing else after the call (`relax-inplace-state`)."""

    mnemonic = "call_tir_inplace"
    args = Operand("tensor", variadic=True)
    outs = Result("tensor", variadic=True)
    callee = Attr("symbol")
    verify = staticmethod(_verify_call_tir_inplace)


@RELAX.op
class CallDPSPacked(Op):
    """Destination-passing call of a registered (packed) function, by name."""

    mnemonic = "call_dps_packed"
    args = Operand("tensor", variadic=True)
    outs = Result("tensor", variadic=True)
    callee = Attr("string")
    verify = staticmethod(_verify_packed_name)


@RELAX.op
class CallPacked(Op):
    """Side-effecting call of a registered function that may write its arguments in place."""

    mnemonic = "call_packed"
    args = Operand("tensor", variadic=True)
    callee = Attr("string")

    @staticmethod
    def verify(op: ir.Operation) -> str | None:
        return _verify_packed_name(op) or _verify_not_in_dataflow(op)


@RELAX.op
class AllocTensor(Op):
    """`R.builtin.alloc_tensor`: a fresh, uninitialised tensor; side-effecting, so outside dataflow."""

    mnemonic = "builtin_alloc_tensor"
    out = Result("tensor")
    verify = staticmethod(_verify_not_in_dataflow)


@RELAX.op
class Constant(Op):
    """A constant tensor (weights); printed elided when large."""

    mnemonic = "constant"
    out = Result("tensor")
    value = Attr("any")
    verify = staticmethod(_verify_constant)


# Calls of primitive functions: their `callee` is a kernel of the module.
CALLS_TIR = (CallTIR.name, CallTIRInplace.name)

# Ops that may not appear inside a dataflow block (they have effects the block may not have).
SIDE_EFFECTING = {CallPacked.name, AllocTensor.name}


def op_class(name: str) -> type[Op] | None:
    return RELAX.ops.get(name)


def create(name: str, operands=(), results=(), attributes=None, loc=None) -> ir.Operation:
    """Create the relax op `name` (adds segment sizes for variadic groups)."""
    cls = op_class(name)
    if cls is None:
        raise ValueError(f"unknown relax op '{name}'")
    return cls.create(operands, results, attributes, loc)


# ---------------------------------------------------------------------------------------------
# High-level operators (TVM's `relax.op.*`). Shapes and dtypes are inferred in Python at emit time
# (`relaxmlir/relax/op/`); `relax-legalize-ops` turns each into a `call_tir` of a PrimFunc. Results
# with symbolic dims carry `relax.shape`. Optional TVM arguments are stored resolved (e.g. the
# reduced axes, never "None"), since IRDL requires every declared attribute.
# ---------------------------------------------------------------------------------------------


class _Unary(Op):
    x = Operand("tensor")
    out = Result("tensor")


class _Binary(Op):
    """Numpy broadcasting of `lhs` and `rhs`; both operands share one dtype."""

    lhs = Operand("tensor")
    rhs = Operand("tensor")
    out = Result("tensor")


class _Reduce(Op):
    x = Operand("tensor")
    out = Result("tensor")
    axis = Attr("int_array")
    keepdims = Attr("bool")


@RELAX.op
class Abs(_Unary):
    """Elementwise `|x|`."""

    mnemonic = "abs"


@RELAX.op
class Negative(_Unary):
    """Elementwise `-x`."""

    mnemonic = "negative"


@RELAX.op
class Exp(_Unary):
    """Elementwise `e**x` (float)."""

    mnemonic = "exp"


@RELAX.op
class Log(_Unary):
    """Elementwise natural logarithm (float)."""

    mnemonic = "log"


@RELAX.op
class Sqrt(_Unary):
    """Elementwise square root (float)."""

    mnemonic = "sqrt"


@RELAX.op
class Rsqrt(_Unary):
    """Elementwise `1 / sqrt(x)` (float)."""

    mnemonic = "rsqrt"


@RELAX.op
class Sigmoid(_Unary):
    """Elementwise `1 / (1 + exp(-x))` (float)."""

    mnemonic = "sigmoid"


@RELAX.op
class Tanh(_Unary):
    """Elementwise hyperbolic tangent (float)."""

    mnemonic = "tanh"


@RELAX.op
class Erf(_Unary):
    """Elementwise Gauss error function (float)."""

    mnemonic = "erf"


@RELAX.op
class Sin(_Unary):
    """Elementwise sine (float)."""

    mnemonic = "sin"


@RELAX.op
class Cos(_Unary):
    """Elementwise cosine (float)."""

    mnemonic = "cos"


@RELAX.op
class Floor(_Unary):
    """Elementwise round toward -inf (identity on integers)."""

    mnemonic = "floor"


@RELAX.op
class Ceil(_Unary):
    """Elementwise round toward +inf (identity on integers)."""

    mnemonic = "ceil"


@RELAX.op
class Round(_Unary):
    """Elementwise round half to even (identity on integers)."""

    mnemonic = "round"


@RELAX.op
class Sign(_Unary):
    """Elementwise -1, 0 or 1 by the sign of `x`, in x's dtype."""

    mnemonic = "sign"


@RELAX.op
class Square(_Unary):
    """Elementwise `x * x`."""

    mnemonic = "square"


@RELAX.op
class Trunc(_Unary):
    """Elementwise round toward zero (identity on integers)."""

    mnemonic = "trunc"


@RELAX.op
class Log1p(_Unary):
    """Elementwise `log(1 + x)`, accurate for small x (float)."""

    mnemonic = "log1p"


@RELAX.op
class Expm1(_Unary):
    """Elementwise `exp(x) - 1`, accurate for small x (float)."""

    mnemonic = "expm1"


@RELAX.op
class Log2(_Unary):
    """Elementwise base-2 logarithm (float)."""

    mnemonic = "log2"


@RELAX.op
class Log10(_Unary):
    """Elementwise base-10 logarithm (float)."""

    mnemonic = "log10"


@RELAX.op
class Tan(_Unary):
    """Elementwise tangent (float)."""

    mnemonic = "tan"


@RELAX.op
class Asin(_Unary):
    """Elementwise arcsine (float; NaN outside [-1, 1])."""

    mnemonic = "asin"


@RELAX.op
class Acos(_Unary):
    """Elementwise arccosine (float; NaN outside [-1, 1])."""

    mnemonic = "acos"


@RELAX.op
class Atan(_Unary):
    """Elementwise arctangent (float)."""

    mnemonic = "atan"


@RELAX.op
class Sinh(_Unary):
    """Elementwise hyperbolic sine (float)."""

    mnemonic = "sinh"


@RELAX.op
class Cosh(_Unary):
    """Elementwise hyperbolic cosine (float)."""

    mnemonic = "cosh"


@RELAX.op
class Asinh(_Unary):
    """Elementwise inverse hyperbolic sine (float)."""

    mnemonic = "asinh"


@RELAX.op
class Acosh(_Unary):
    """Elementwise inverse hyperbolic cosine (float; NaN below 1)."""

    mnemonic = "acosh"


@RELAX.op
class Atanh(_Unary):
    """Elementwise inverse hyperbolic tangent (float; NaN outside [-1, 1])."""

    mnemonic = "atanh"


@RELAX.op
class Exp2(_Unary):
    """Elementwise `2**x` (float)."""

    mnemonic = "exp2"


@RELAX.op
class IsNan(_Unary):
    """Elementwise `x != x`, a bool tensor (all false on integers)."""

    mnemonic = "isnan"


@RELAX.op
class IsInf(_Unary):
    """Elementwise `|x| == inf`, a bool tensor (all false on integers)."""

    mnemonic = "isinf"


@RELAX.op
class IsFinite(_Unary):
    """Elementwise neither NaN nor infinite, a bool tensor (all true on integers)."""

    mnemonic = "isfinite"


@RELAX.op
class LogicalNot(_Unary):
    """Elementwise logical not of a bool tensor."""

    mnemonic = "logical_not"


@RELAX.op
class BitwiseNot(_Unary):
    """Elementwise bitwise not of an integer or bool tensor (`~x`; logical not on bool)."""

    mnemonic = "bitwise_not"


@RELAX.op
class Relu(_Unary):
    """`relax.nn.relu`: elementwise `max(x, 0)`."""

    mnemonic = "nn_relu"


@RELAX.op
class Gelu(_Unary):
    """`relax.nn.gelu`: `x * (1 + erf(x / sqrt(2))) / 2` (exact, torch's default)."""

    mnemonic = "nn_gelu"


@RELAX.op
class GeluTanh(_Unary):
    """`relax.nn.gelu_tanh`: the tanh approximation of gelu (torch's approximate="tanh")."""

    mnemonic = "nn_gelu_tanh"


@RELAX.op
class Silu(_Unary):
    """`relax.nn.silu`: `x * sigmoid(x)`."""

    mnemonic = "nn_silu"


@RELAX.op
class LeakyRelu(_Unary):
    """`relax.nn.leaky_relu`: `x if x >= 0 else alpha * x`."""

    mnemonic = "nn_leaky_relu"
    alpha = Attr("float")


@RELAX.op
class Clip(_Unary):
    """Elementwise `min(max(x, min), max)`; the bounds are converted to x's dtype."""

    mnemonic = "clip"
    min = Attr("float")
    max = Attr("float")


@RELAX.op
class Astype(_Unary):
    """Elementwise cast to `dtype` (C semantics: float -> int truncates, bool is `!= 0`)."""

    mnemonic = "astype"
    dtype = Attr("string")


@RELAX.op
class Softmax(_Unary):
    """`relax.nn.softmax`: `exp(x - max) / sum(exp(x - max))` along `axis`."""

    mnemonic = "nn_softmax"
    axis = Attr("integer")


@RELAX.op
class LogSoftmax(_Unary):
    """`relax.nn.log_softmax`: `x - max - log(sum(exp(x - max)))` along `axis`."""

    mnemonic = "nn_log_softmax"
    axis = Attr("integer")


@RELAX.op
class Dropout(_Unary):
    """`relax.nn.dropout` in inference: the identity (TVM also returns the mask; not kept here)."""

    mnemonic = "nn_dropout"
    rate = Attr("float")


@RELAX.op
class Add(_Binary):
    """`lhs + rhs`."""

    mnemonic = "add"


@RELAX.op
class Subtract(_Binary):
    """`lhs - rhs`."""

    mnemonic = "subtract"


@RELAX.op
class Multiply(_Binary):
    """`lhs * rhs`."""

    mnemonic = "multiply"


@RELAX.op
class Divide(_Binary):
    """`lhs / rhs`: true division on floats, truncating on integers (TVM's `div`)."""

    mnemonic = "divide"


@RELAX.op
class FloorDivide(_Binary):
    """`floor(lhs / rhs)`."""

    mnemonic = "floor_divide"


@RELAX.op
class FloorMod(_Binary):
    """`lhs - floor(lhs / rhs) * rhs` (sign of the divisor, like python and torch)."""

    mnemonic = "floor_mod"


@RELAX.op
class Mod(_Binary):
    """`lhs - trunc(lhs / rhs) * rhs` (sign of the dividend, C's fmod and torch.fmod)."""

    mnemonic = "mod"


@RELAX.op
class Atan2(_Binary):
    """Elementwise arctangent of `lhs / rhs` in the quadrant of (rhs, lhs) (float)."""

    mnemonic = "atan2"


@RELAX.op
class Hypot(_Binary):
    """Elementwise `sqrt(lhs**2 + rhs**2)` without overflow (float)."""

    mnemonic = "hypot"


@RELAX.op
class Copysign(_Binary):
    """Elementwise `|lhs|` with the sign bit of `rhs` (float)."""

    mnemonic = "copysign"


@RELAX.op
class Power(_Binary):
    """`lhs ** rhs` (float)."""

    mnemonic = "power"


@RELAX.op
class Maximum(_Binary):
    """Elementwise maximum."""

    mnemonic = "maximum"


@RELAX.op
class Minimum(_Binary):
    """Elementwise minimum."""

    mnemonic = "minimum"


@RELAX.op
class Equal(_Binary):
    """`lhs == rhs`, a bool tensor."""

    mnemonic = "equal"


@RELAX.op
class NotEqual(_Binary):
    """`lhs != rhs`, a bool tensor."""

    mnemonic = "not_equal"


@RELAX.op
class Less(_Binary):
    """`lhs < rhs`, a bool tensor."""

    mnemonic = "less"


@RELAX.op
class LessEqual(_Binary):
    """`lhs <= rhs`, a bool tensor."""

    mnemonic = "less_equal"


@RELAX.op
class Greater(_Binary):
    """`lhs > rhs`, a bool tensor."""

    mnemonic = "greater"


@RELAX.op
class GreaterEqual(_Binary):
    """`lhs >= rhs`, a bool tensor."""

    mnemonic = "greater_equal"


@RELAX.op
class LogicalAnd(_Binary):
    """Elementwise logical and of bool tensors."""

    mnemonic = "logical_and"


@RELAX.op
class LogicalOr(_Binary):
    """Elementwise logical or of bool tensors."""

    mnemonic = "logical_or"


@RELAX.op
class LogicalXor(_Binary):
    """Elementwise logical exclusive or of bool tensors."""

    mnemonic = "logical_xor"


@RELAX.op
class BitwiseAnd(_Binary):
    """Elementwise bitwise and of integer or bool tensors."""

    mnemonic = "bitwise_and"


@RELAX.op
class BitwiseOr(_Binary):
    """Elementwise bitwise or of integer or bool tensors."""

    mnemonic = "bitwise_or"


@RELAX.op
class BitwiseXor(_Binary):
    """Elementwise bitwise exclusive or of integer or bool tensors."""

    mnemonic = "bitwise_xor"


@RELAX.op
class Where(Op):
    """`x1 if condition else x2`, all three broadcast (numpy rules); condition is bool."""

    mnemonic = "where"
    condition = Operand("tensor")
    x1 = Operand("tensor")
    x2 = Operand("tensor")
    out = Result("tensor")


@RELAX.op
class Matmul(Op):
    """numpy `matmul`: batch dims broadcast, 1-D operands are promoted then squeezed."""

    mnemonic = "matmul"
    x1 = Operand("tensor")
    x2 = Operand("tensor")
    out = Result("tensor")
    out_dtype = Attr("string")


@RELAX.op
class PermuteDims(_Unary):
    """`out.shape[i] = x.shape[axes[i]]` (numpy transpose)."""

    mnemonic = "permute_dims"
    axes = Attr("int_array")


@RELAX.op
class Reshape(_Unary):
    """Same elements in row-major order, new `shape` (ints and symbolic dims, no -1 left)."""

    mnemonic = "reshape"
    shape = Attr("array")


@RELAX.op
class LayoutTransform(_Unary):
    """The same tensor in another data layout: "NCHW" <-> "NCHW<b>c" (channels in blocks of b,
    the block innermost; `relaxmlir.topi.layout`)."""

    mnemonic = "layout_transform"
    src_layout = Attr("string")
    dst_layout = Attr("string")


@RELAX.op
class Flatten(_Unary):
    """Reshape to 1-D (TVM semantics; torch.flatten(x, 1) is a reshape)."""

    mnemonic = "flatten"


@RELAX.op
class Squeeze(_Unary):
    """Drop the listed size-1 `axis` (all size-1 axes when created with axis=None)."""

    mnemonic = "squeeze"
    axis = Attr("int_array")


@RELAX.op
class ExpandDims(_Unary):
    """Insert size-1 axes at the positions `axis` of the result."""

    mnemonic = "expand_dims"
    axis = Attr("int_array")


@RELAX.op
class BroadcastTo(_Unary):
    """Broadcast `x` to `shape` (numpy rules)."""

    mnemonic = "broadcast_to"
    shape = Attr("array")


@RELAX.op
class Tile(_Unary):
    """Repeat the whole tensor `repeats[i]` times along each axis (numpy tile)."""

    mnemonic = "tile"
    repeats = Attr("array")


@RELAX.op
class Concat(Op):
    """Join `tensors` along `axis`; the other dims must agree."""

    mnemonic = "concat"
    tensors = Operand("tensor", variadic=True)
    out = Result("tensor")
    axis = Attr("integer")

    @staticmethod
    def verify(op: ir.Operation) -> str | None:
        return None if len(op.operands) else "expects at least one tensor"


@RELAX.op
class Split(Op):
    """Split along `axis` at the ascending `indices` (sections are resolved to indices)."""

    mnemonic = "split"
    x = Operand("tensor")
    outs = Result("tensor", variadic=True)
    indices = Attr("array")
    axis = Attr("integer")


@RELAX.op
class Take(Op):
    """`x` gathered at integer `indices` along `axis` (flattened x when created with axis=None)."""

    mnemonic = "take"
    x = Operand("tensor")
    indices = Operand("tensor")
    out = Result("tensor")
    axis = Attr("integer")
    mode = Attr("string")


@RELAX.op
class StridedSlice(_Unary):
    """`x[begin:end:strides]` on `axes`; bounds are clamped like python slices."""

    mnemonic = "strided_slice"
    axes = Attr("int_array")
    begin = Attr("array")
    end = Attr("array")
    strides = Attr("array")


@RELAX.op
class Sum(_Reduce):
    """Sum over `axis`; `keepdims` keeps them as size 1."""

    mnemonic = "sum"


@RELAX.op
class Mean(_Reduce):
    """Arithmetic mean over `axis` (float)."""

    mnemonic = "mean"


@RELAX.op
class Max(_Reduce):
    """Maximum over `axis`."""

    mnemonic = "max"


@RELAX.op
class Min(_Reduce):
    """Minimum over `axis`."""

    mnemonic = "min"


@RELAX.op
class Prod(_Reduce):
    """Product over `axis`."""

    mnemonic = "prod"


@RELAX.op
class Variance(_Reduce):
    """Population variance (divisor n) over `axis` (float)."""

    mnemonic = "variance"


@RELAX.op
class Argmax(_Reduce):
    """int64 index of the first maximum along the single `axis` (all axes flattened if empty)."""

    mnemonic = "argmax"


@RELAX.op
class Argmin(_Reduce):
    """int64 index of the first minimum along the single `axis` (all axes flattened if empty)."""

    mnemonic = "argmin"


@RELAX.op
class Cumsum(_Unary):
    """Running sum along `axis` in `dtype` (`exclusive`: the sum of the elements before)."""

    mnemonic = "cumsum"
    axis = Attr("integer")
    dtype = Attr("string")
    exclusive = Attr("bool")


@RELAX.op
class Argsort(_Unary):
    """Stable sort order along `axis` as `dtype` indices; NaN sorts above every number."""

    mnemonic = "argsort"
    axis = Attr("integer")
    descending = Attr("bool")
    dtype = Attr("string")


@RELAX.op
class GatherElements(Op):
    """`out[i] = data[i with i[axis] = indices[i]]`; out takes the shape of `indices`."""

    mnemonic = "gather_elements"
    data = Operand("tensor")
    indices = Operand("tensor")
    out = Result("tensor")
    axis = Attr("integer")


@RELAX.op
class ScatterElements(Op):
    """`data` with `updates[i]` written ("update") or added ("add") at `i with i[axis] =
    indices[i]`; `indices` and `updates` share a shape no larger than data's."""

    mnemonic = "scatter_elements"
    data = Operand("tensor")
    indices = Operand("tensor")
    updates = Operand("tensor")
    out = Result("tensor")
    axis = Attr("integer")
    reduction = Attr("string")


@RELAX.op
class IndexCopy(Op):
    """`data` with the slices of `source` along `axis` written at the positions in the 1-D
    `index` (torch's index_copy; of repeated positions the last one wins, one outside the axis
    writes nothing); `source` has data's shape but `len(index)` along the axis."""

    mnemonic = "index_copy"
    data = Operand("tensor")
    index = Operand("tensor")
    source = Operand("tensor")
    out = Result("tensor")
    axis = Attr("integer")


@RELAX.op
class Full(Op):
    """A tensor of `shape` and `dtype` filled with the 0-d `fill_value`."""

    mnemonic = "full"
    fill_value = Operand("tensor")
    out = Result("tensor")
    shape = Attr("array")
    dtype = Attr("string")


@RELAX.op
class FullLike(Op):
    """A tensor shaped like `x` filled with the 0-d `fill_value`, in `dtype`."""

    mnemonic = "full_like"
    x = Operand("tensor")
    fill_value = Operand("tensor")
    out = Result("tensor")
    dtype = Attr("string")


@RELAX.op
class Zeros(Op):
    """A tensor of `shape` and `dtype` filled with 0."""

    mnemonic = "zeros"
    out = Result("tensor")
    shape = Attr("array")
    dtype = Attr("string")


@RELAX.op
class Ones(Op):
    """A tensor of `shape` and `dtype` filled with 1."""

    mnemonic = "ones"
    out = Result("tensor")
    shape = Attr("array")
    dtype = Attr("string")


@RELAX.op
class Arange(Op):
    """`start, start + step, ...` below `end` (numpy arange), in `dtype`."""

    mnemonic = "arange"
    out = Result("tensor")
    start = Attr("any")
    end = Attr("any")
    step = Attr("any")
    dtype = Attr("string")


@RELAX.op
class Tril(_Unary):
    """Zero the elements above the `k`-th diagonal of the last two axes."""

    mnemonic = "tril"
    k = Attr("integer")


@RELAX.op
class Triu(_Unary):
    """Zero the elements below the `k`-th diagonal of the last two axes."""

    mnemonic = "triu"
    k = Attr("integer")


@RELAX.op
class Pad(_Unary):
    """`relax.nn.pad`: `pad_width` holds (before, after) per axis; `pad_mode` is "constant"
    (`pad_value`), "reflect" (mirror without the edge) or "edge" (repeat the edge)."""

    mnemonic = "nn_pad"
    pad_width = Attr("int_array")
    pad_mode = Attr("string")
    pad_value = Attr("float")


@RELAX.op
class Conv2d(Op):
    """`relax.nn.conv2d`, NCHW data and OIHW weight; padding is (top, left, bottom, right)."""

    mnemonic = "nn_conv2d"
    data = Operand("tensor")
    weight = Operand("tensor")
    out = Result("tensor")
    strides = Attr("array")
    padding = Attr("array")
    dilation = Attr("array")
    groups = Attr("integer")
    data_layout = Attr("string")
    kernel_layout = Attr("string")
    out_dtype = Attr("string")


class _Pool2d(Op):
    data = Operand("tensor")
    out = Result("tensor")
    pool_size = Attr("array")
    strides = Attr("array")
    padding = Attr("array")
    dilation = Attr("array")
    ceil_mode = Attr("bool")
    count_include_pad = Attr("bool")
    layout = Attr("string")


@RELAX.op
class MaxPool2d(_Pool2d):
    """`relax.nn.max_pool2d` over NCHW windows; padding never wins the max."""

    mnemonic = "nn_max_pool2d"


@RELAX.op
class AvgPool2d(_Pool2d):
    """`relax.nn.avg_pool2d` over NCHW windows (torch's divisor rules for padding/ceil_mode)."""

    mnemonic = "nn_avg_pool2d"


@RELAX.op
class AdaptiveAvgPool2d(Op):
    """`relax.nn.adaptive_avg_pool2d`: NCHW windows `[floor(i*H/oh), ceil((i+1)*H/oh))`."""

    mnemonic = "nn_adaptive_avg_pool2d"
    data = Operand("tensor")
    out = Result("tensor")
    output_size = Attr("array")
    layout = Attr("string")


@RELAX.op
class LayerNorm(Op):
    """`relax.nn.layer_norm`: normalize over `axes` (biased variance), then `* gamma + beta`."""

    mnemonic = "nn_layer_norm"
    data = Operand("tensor")
    gamma = Operand("tensor")
    beta = Operand("tensor")
    out = Result("tensor")
    axes = Attr("int_array")
    epsilon = Attr("float")
    center = Attr("bool")
    scale = Attr("bool")


@RELAX.op
class BatchNorm(Op):
    """`relax.nn.batch_norm` in inference: moving statistics along `axis`; result is the
    normalized tensor only (TVM returns a tuple with the unchanged statistics)."""

    mnemonic = "nn_batch_norm"
    data = Operand("tensor")
    gamma = Operand("tensor")
    beta = Operand("tensor")
    moving_mean = Operand("tensor")
    moving_var = Operand("tensor")
    out = Result("tensor")
    axis = Attr("integer")
    epsilon = Attr("float")
    center = Attr("bool")
    scale = Attr("bool")


# Ops that lower directly (no legalization): the runtime-level core of the dialect.
CORE_OPS = {
    CallTIR.name,
    CallTIRInplace.name,
    CallDPSPacked.name,
    CallPacked.name,
    AllocTensor.name,
    Constant.name,
}


def high_level_ops(root: ir.Operation) -> set[str]:
    """Names of the relax ops under `root` that still need legalization."""
    found: set[str] = set()

    def visit(op):
        name = op.operation.name
        if name.startswith("relax.") and name not in CORE_OPS:
            found.add(name)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found
