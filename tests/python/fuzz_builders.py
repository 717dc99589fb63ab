"""The fuzzer's graphs built three ways: numpy (the reference of the relax graphs), the relax
BlockBuilder, and a torch module that fx traces (imported with `from_fx`, checked against torch
eager)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F
from fuzz_graphs import TORCH_DTYPES, Graph, np_dtype


# -- numpy: the reference of the relax graphs -----------------------------------------------
def _gelu(x):
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return (0.5 * x * (1 + erf(x / math.sqrt(2)))).astype(x.dtype)


def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True)) if x.size else x
    return e / np.sum(e, axis=axis, keepdims=True) if x.size else x


def _log_softmax(x, axis):
    if not x.size:
        return x
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def _layer_norm(x, g, bt, axes, eps):
    mean = x.mean(axis=tuple(axes), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=tuple(axes), keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + bt


def _slice(x, axis, begin, end, stride):
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(begin, end, stride)
    return x[tuple(idx)]


def _reduce(fn):
    def ref(x, axis, keepdims):
        ax = None if axis is None else tuple(axis)
        return fn(x, axis=ax, keepdims=keepdims)

    return ref


def _argreduce(fn):
    def ref(x, axis, keepdims):
        if axis is None:
            r = fn(x.reshape(-1))
            return np.asarray(r).reshape((1,) * x.ndim if keepdims else ())
        return fn(x, axis=axis, keepdims=keepdims)

    return ref


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


NUMPY = {
    "exp": np.exp, "expm1": np.expm1, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": _erf, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "gelu": _gelu, "silu": lambda x: x / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0), "abs": np.abs, "negative": np.negative,
    "square": np.square, "leaky_relu": lambda x, alpha: np.where(x > 0, x, x * alpha),
    "clip": lambda x, min, max: np.clip(x, min, max),
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc, "sign": np.sign,
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "divide": np.divide, "power": np.power,
    "floor_divide": np.floor_divide, "floor_mod": np.mod,
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_not": np.logical_not,
    "where": np.where, "astype": lambda x, dtype: x.astype(np_dtype(dtype)),
    "sum": _reduce(np.sum), "mean": _reduce(np.mean), "max": _reduce(np.max),
    "min": _reduce(np.min), "prod": _reduce(np.prod),
    "argmax": _argreduce(np.argmax), "argmin": _argreduce(np.argmin),
    "cumsum": lambda x, axis: np.cumsum(x, axis=axis), "softmax": _softmax,
    "log_softmax": _log_softmax, "layer_norm": _layer_norm, "matmul": np.matmul,
    "reshape": lambda x, shape: x.reshape(shape), "permute_dims": lambda x, axes: x.transpose(axes),
    "expand_dims": lambda x, axis: np.expand_dims(x, axis),
    "squeeze": lambda x, axis: np.squeeze(x, axis), "concat": lambda *xs, axis: np.concatenate(xs, axis),
    "strided_slice": _slice, "broadcast_to": lambda x, shape: np.broadcast_to(x, shape),
    "take": lambda x, i, axis: np.take(x, i, axis=axis),
    "tile": lambda x, repeats: np.tile(x, repeats), "tril": np.tril, "triu": np.triu,
    "variance": lambda x, axis, keepdims: np.var(x, axis=tuple(axis), keepdims=keepdims),
    "argsort": lambda x, axis, descending: _argsort(x, axis, descending),
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "bitwise_not": np.invert,
}  # fmt: skip


def _argsort(x, axis, descending):
    """Stable, descending too (torch's stable=True: ties keep their order)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    key = -x.astype(np.float64) if x.dtype != bool else ~x
    return np.argsort(key, axis=axis, kind="stable")


def _result_dtype(op: str, args: list[np.ndarray], attrs: dict):
    """The dtype relax gives the op's result."""
    if op in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
        return np.dtype(bool)
    if op in ("logical_and", "logical_or", "logical_not"):
        return np.dtype(bool)
    if op in ("argmax", "argmin", "argsort"):
        return np.dtype("int64")
    if op == "astype":
        return np_dtype(attrs["dtype"])
    if op == "where":
        return args[1].dtype
    return args[0].dtype


def reference(g: Graph, arrays: list[np.ndarray], every: bool = False) -> list[np.ndarray]:
    """numpy's results of the graph's outputs (of all its values with `every`); 16-bit floats
    are computed in float32 and rounded after each op."""
    values = list(arrays)
    for node in g.nodes:
        args = [values[a] for a in node.args]
        dtype = _result_dtype(node.op, args, node.attrs)
        wide = [
            a.astype(np.float32) if a.dtype in (np.float16, ml_dtypes.bfloat16) else a for a in args
        ]
        attrs = dict(node.attrs)
        if node.op == "layer_norm":
            attrs = {"axes": attrs["axes"], "eps": attrs["eps"]}
        with np.errstate(all="ignore"):
            out = NUMPY[node.op](*wide, **attrs)
        values.append(np.asarray(out).astype(dtype))
    return values if every else [values[o] for o in g.outputs]


# -- relax: the BlockBuilder graph --------------------------------------------------------
def to_relax(g: Graph):
    from relaxmlir import relax

    R = relax.op
    ops = {
        "relu": R.nn.relu, "gelu": R.nn.gelu, "silu": R.nn.silu,
        "leaky_relu": lambda x, alpha: R.nn.leaky_relu(x, alpha),
        "clip": lambda x, min, max: R.clip(x, min, max),
        "floor_mod": R.floor_mod,
        "astype": lambda x, dtype: R.astype(x, dtype),
        "argmax": lambda x, axis, keepdims: R.argmax(x, axis, keepdims),
        "argmin": lambda x, axis, keepdims: R.argmin(x, axis, keepdims),
        "cumsum": lambda x, axis: R.cumsum(x, axis),
        "softmax": lambda x, axis: R.nn.softmax(x, axis),
        "log_softmax": lambda x, axis: R.nn.log_softmax(x, axis),
        "layer_norm": lambda x, gm, bt, axes, eps: R.nn.layer_norm(x, gm, bt, axes, eps),
        "reshape": lambda x, shape: R.reshape(x, shape),
        "permute_dims": lambda x, axes: R.permute_dims(x, axes),
        "expand_dims": lambda x, axis: R.expand_dims(x, axis),
        "squeeze": lambda x, axis: R.squeeze(x, [axis]),
        "concat": lambda *xs, axis: R.concat(list(xs), axis),
        "strided_slice": lambda x, axis, begin, end, stride: R.strided_slice(
            x, [axis], [begin], [end], [stride]
        ),
        "broadcast_to": lambda x, shape: R.broadcast_to(x, shape),
        "take": lambda x, i, axis: R.take(x, i, axis),
    }  # fmt: skip
    params = [
        relax.Var(f"x{i}", relax.TensorStructInfo(inp.shape, inp.dtype))
        for i, inp in enumerate(g.inputs)
    ]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            values = list(params)
            for node in g.nodes:
                fn = ops.get(node.op) or getattr(R, node.op)
                values.append(bb.emit(fn(*[values[a] for a in node.args], **node.attrs)))
            outs = [bb.emit_output(values[o]) for o in g.outputs]
        bb.emit_func_output(outs if len(outs) > 1 else outs[0])
    return bb.get()


# -- torch: the module fx traces ----------------------------------------------------------
# Rules that need the rank of their first operand take it as `ndim` (under fx tracing a
# tensor's rank is not a python int).
def _t_reduce(fn):
    def op(x, axis, keepdims, ndim):
        if axis is None:
            if not ndim:
                return fn(x)  # 0-d: the reduction of its one element
            axis = list(range(ndim))
        return fn(x, dim=axis, keepdim=keepdims)

    return op


def _t_extreme(fn):
    def op(x, axis, keepdims, ndim):
        return fn(x, dim=[] if axis is None else axis, keepdim=keepdims) if ndim else x

    return op


def _t_prod(x, axis, keepdims, ndim):
    axis = range(ndim) if axis is None else axis
    for a in sorted((a % max(ndim, 1) for a in axis), reverse=True):
        x = torch.prod(x, dim=a, keepdim=keepdims)
    return x


def _t_slice(x, axis, begin, end, stride, ndim):
    idx = [slice(None)] * ndim
    idx[axis] = slice(begin, end, stride)
    return x[tuple(idx)]


NEEDS_RANK = {"sum", "mean", "max", "min", "prod", "strided_slice"}
TORCH = {
    "exp": torch.exp, "expm1": torch.expm1, "tanh": torch.tanh, "sin": torch.sin,
    "cos": torch.cos, "sigmoid": torch.sigmoid, "erf": torch.erf, "log": torch.log,
    "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "gelu": F.gelu, "silu": F.silu, "relu": torch.relu,
    "abs": torch.abs, "negative": torch.neg, "square": torch.square,
    "leaky_relu": lambda x, alpha: F.leaky_relu(x, alpha),
    "clip": lambda x, min, max: torch.clamp(x, min, max),
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
    "sign": torch.sign, "add": torch.add, "subtract": torch.sub, "multiply": torch.mul,
    "maximum": torch.maximum, "minimum": torch.minimum, "divide": torch.div,
    "power": torch.pow, "floor_divide": torch.floor_divide, "floor_mod": torch.remainder,
    "equal": torch.eq, "not_equal": torch.ne, "less": torch.lt, "less_equal": torch.le,
    "greater": torch.gt, "greater_equal": torch.ge, "logical_and": torch.logical_and,
    "logical_or": torch.logical_or, "logical_not": torch.logical_not, "where": torch.where,
    "astype": lambda x, dtype: x.to(TORCH_DTYPES[dtype]),
    "sum": _t_reduce(torch.sum), "mean": _t_reduce(torch.mean),
    "max": _t_extreme(torch.amax), "min": _t_extreme(torch.amin), "prod": _t_prod,
    "argmax": lambda x, axis, keepdims: torch.argmax(x, dim=axis, keepdim=keepdims),
    "argmin": lambda x, axis, keepdims: torch.argmin(x, dim=axis, keepdim=keepdims),
    "cumsum": lambda x, axis: torch.cumsum(x, axis), "softmax": lambda x, axis: F.softmax(x, axis),
    "log_softmax": lambda x, axis: F.log_softmax(x, axis),
    "layer_norm": lambda x, g, bt, axes, eps, shape: F.layer_norm(x, shape, g, bt, eps),
    "matmul": torch.matmul, "reshape": lambda x, shape: x.reshape(shape),
    "permute_dims": lambda x, axes: x.permute(axes),
    "expand_dims": lambda x, axis: torch.unsqueeze(x, axis),
    "squeeze": lambda x, axis: torch.squeeze(x, axis),
    "concat": lambda *xs, axis: torch.cat(xs, axis), "strided_slice": _t_slice,
    "broadcast_to": lambda x, shape: x.expand(shape),
    "take": lambda x, i, axis: torch.index_select(x, axis, i),
    "tile": lambda x, repeats: torch.tile(x, repeats),
    "tril": lambda x, k: torch.tril(x, k), "triu": lambda x, k: torch.triu(x, k),
    "variance": lambda x, axis, keepdims: torch.var(x, axis, correction=0, keepdim=keepdims),
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor, "bitwise_not": torch.bitwise_not,
    "argsort": lambda x, axis, descending: torch.argsort(x, dim=axis, descending=descending, stable=True),
}  # fmt: skip


class TorchGraph(torch.nn.Module):
    """The graph as torch calls on up to MAX_INPUTS inputs (a fixed signature fx can trace)."""

    def __init__(self, g: Graph):
        super().__init__()
        self.g = g
        self.shapes: list = []  # of every value: ranks and sizes that fx tracing cannot read

    def forward(self, a, b=None, c=None, d=None, e=None, f=None, g=None, h=None):
        values = list((a, b, c, d, e, f, g, h)[: len(self.g.inputs)])
        eager = not self.shapes  # the first call runs eagerly and records each value's shape
        if eager:
            self.shapes = [tuple(v.shape) for v in values]
        for node in self.g.nodes:
            attrs = dict(node.attrs)
            if node.op in NEEDS_RANK:
                attrs["ndim"] = len(self.shapes[node.args[0]])
            if node.op == "layer_norm":
                attrs["shape"] = self.shapes[node.args[1]]
            values.append(TORCH[node.op](*[values[i] for i in node.args], **attrs))
            if eager:
                self.shapes.append(tuple(values[-1].shape))
        outs = tuple(values[o] for o in self.g.outputs)
        return outs if len(outs) > 1 else outs[0]
