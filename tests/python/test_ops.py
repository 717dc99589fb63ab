"""Every high-level relax op, legalized, compiled and run against numpy/torch, from one table.

Each `op_record` row is one op on fixed shapes and dtypes. The rows of a family share ONE module
(all their ops in one function), so the whole table costs one JIT build per family; a family that
fails to build is retried row by row so the failure names its op.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.relax.struct_info import TupleStructInfo

R = relax.op
RTOL, ATOL = 1e-4, 1e-5
SYMBOLS = {"n": 3, "b": 2, "s": 5, "h": 7}  # values of symbolic dims in the inputs


# -- the op table ----------------------------------------------------------------------------
@dataclass
class OpRecord:
    name: str
    build: Callable  # relax vars -> relax expression
    ref: Callable  # numpy arrays -> array or list of arrays
    shapes: Sequence[tuple]  # may name symbols of SYMBOLS
    dtypes: Sequence[str]
    rng: Callable
    rtol: float
    atol: float
    family: str
    xfail: str = ""


def normal(shape, dtype, gen):
    return gen.standard_normal(shape).astype(dtype)


def positive(shape, dtype, gen):
    return gen.uniform(0.5, 2.0, shape).astype(dtype)


def ints(low, high):
    return lambda shape, dtype, gen: gen.integers(low, high, shape).astype(dtype)


def bools(shape, dtype, gen):
    return gen.integers(0, 2, shape).astype(bool)


def t(fn):
    """A torch reference: numpy in, numpy out."""

    def ref(*arrays):
        out = fn(*[torch.from_numpy(np.ascontiguousarray(a)) for a in arrays])
        return [o.numpy() for o in out] if isinstance(out, (list, tuple)) else out.numpy()

    return ref


RECORDS: list[OpRecord] = []
_FAMILY = ["unary"]


def op_record(
    name: str,
    build: Callable,
    ref: Callable,
    shapes: Sequence[tuple],
    dtypes="float32",
    rng: Callable = normal,
    rtol: float = RTOL,
    atol: float = ATOL,
    xfail: str = "",
) -> None:
    dtypes = [dtypes] * len(shapes) if isinstance(dtypes, str) else list(dtypes)
    RECORDS.append(OpRecord(name, build, ref, shapes, dtypes, rng, rtol, atol, _FAMILY[0], xfail))


def family(name: str) -> None:
    _FAMILY[0] = name


S, S2 = (2, 3, 4), (3, 4)
family("unary")
op_record("abs", R.abs, np.abs, [S])
op_record("negative", R.negative, np.negative, [S])
op_record("exp", R.exp, np.exp, [S])
op_record("log", R.log, np.log, [S], rng=positive)
op_record("sqrt", R.sqrt, np.sqrt, [S], rng=positive)
op_record("rsqrt", R.rsqrt, lambda x: 1 / np.sqrt(x), [S], rng=positive)
op_record("sigmoid", R.sigmoid, t(torch.sigmoid), [S])
op_record("tanh", R.tanh, np.tanh, [S])
op_record("erf", R.erf, t(torch.erf), [S])
op_record("sin", R.sin, np.sin, [S])
op_record("cos", R.cos, np.cos, [S])
op_record("floor", R.floor, np.floor, [S])
op_record("ceil", R.ceil, np.ceil, [S])
op_record("round", R.round, np.round, [S])
op_record("sign", R.sign, np.sign, [S])
op_record("square", R.square, np.square, [S])
op_record("clip", lambda x: R.clip(x, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), [S])
op_record("astype_f2i", lambda x: R.astype(x, "int32"), lambda x: x.astype("int32"), [S])
op_record(
    "astype_i2f",
    lambda x: R.astype(x, "float32"),
    lambda x: x.astype("float32"),
    [S],
    "int64",
    ints(-9, 9),
)
op_record("abs_int", R.abs, np.abs, [S], "int32", ints(-9, 9))
op_record("relu", R.nn.relu, t(F.relu), [S])
op_record("gelu", R.nn.gelu, t(F.gelu), [S])
op_record("gelu_tanh", R.nn.gelu_tanh, t(lambda x: F.gelu(x, approximate="tanh")), [S])
op_record("silu", R.nn.silu, t(F.silu), [S])
op_record("leaky_relu", lambda x: R.nn.leaky_relu(x, 0.1), t(lambda x: F.leaky_relu(x, 0.1)), [S])
op_record("softmax", R.nn.softmax, t(lambda x: F.softmax(x, -1)), [S])
op_record("softmax_axis1", lambda x: R.nn.softmax(x, 1), t(lambda x: F.softmax(x, 1)), [S])
op_record("log_softmax", R.nn.log_softmax, t(lambda x: F.log_softmax(x, -1)), [S])
op_record("dropout", R.nn.dropout, lambda x: x, [S])

family("binary")
op_record("add", R.add, np.add, [S2, (4,)])
op_record("subtract", R.subtract, np.subtract, [(2, 1, 4), (3, 1)])
op_record("multiply", R.multiply, np.multiply, [S, S])
op_record("divide", R.divide, np.divide, [S, S], rng=positive)
op_record("floor_divide", R.floor_divide, np.floor_divide, [S, S], rng=positive)
op_record("floor_mod", R.floor_mod, np.mod, [S, S], rng=positive)
op_record("power", R.power, np.power, [S, S], rng=positive)
op_record("maximum", R.maximum, np.maximum, [S, (1, 4)])
op_record("minimum", R.minimum, np.minimum, [(4,), S])
op_record("add_scalar", lambda x: R.add(x, 1.5), lambda x: x + np.float32(1.5), [S])
op_record("rsub_scalar", lambda x: R.subtract(2.0, x), lambda x: np.float32(2.0) - x, [S])
op_record("add_int32", R.add, np.add, [S, S], "int32", ints(-50, 50))
op_record("multiply_int64", R.multiply, np.multiply, [S, (4,)], "int64", ints(-50, 50))
op_record("floor_divide_int", R.floor_divide, np.floor_divide, [S, S], "int64", ints(1, 9))
op_record(
    "divide_int",
    R.divide,
    lambda a, b: np.fix(a / b).astype("int64"),
    [S, S],
    "int64",
    lambda s, d, g: g.choice([-7, -3, -1, 2, 5], s).astype(d),
)

family("bool")
op_record("equal", R.equal, np.equal, [S, S], "int32", ints(0, 3))
op_record("not_equal", R.not_equal, np.not_equal, [S, S], "int32", ints(0, 3))
op_record("less", R.less, np.less, [S, (4,)])
op_record("less_equal", R.less_equal, np.less_equal, [S, S])
op_record("greater", R.greater, np.greater, [S, S])
op_record("greater_equal", R.greater_equal, np.greater_equal, [S, S])
op_record("logical_and", R.logical_and, np.logical_and, [S, S], "bool", bools)
op_record("logical_or", R.logical_or, np.logical_or, [S, S], "bool", bools)
op_record("logical_not", R.logical_not, np.logical_not, [S], "bool", bools)
op_record(
    "where",
    lambda c, a, b: R.where(R.less(c, 0.0), a, b),
    lambda c, a, b: np.where(c < 0, a, b),
    [S, S, (4,)],
)

family("linear_algebra")
op_record("matmul", R.matmul, np.matmul, [(3, 8), (8, 5)])
op_record("matmul_batched", R.matmul, np.matmul, [(2, 1, 3, 4), (5, 4, 2)])
op_record("matmul_vec_mat", R.matmul, np.matmul, [(4,), (2, 4, 3)])
op_record("matmul_mat_vec", R.matmul, np.matmul, [(2, 3, 4), (4,)])
op_record("linear", R.linear, t(F.linear), [(3, 8), (5, 8), (5,)])
op_record("linear_3d_nobias", R.linear, t(F.linear), [(2, 3, 8), (5, 8)])

family("manipulate")
op_record("reshape", lambda x: R.reshape(x, (4, -1)), lambda x: x.reshape(4, -1), [S])
op_record(
    "permute_dims", lambda x: R.permute_dims(x, [1, 2, 0]), lambda x: x.transpose(1, 2, 0), [S]
)
op_record("permute_dims_reverse", R.permute_dims, np.transpose, [S])
op_record("flatten", R.flatten, np.ravel, [S])
op_record("squeeze", lambda x: R.squeeze(x, [1]), lambda x: x.squeeze(1), [(2, 1, 3, 1)])
op_record("squeeze_all", R.squeeze, np.squeeze, [(2, 1, 3, 1)])
op_record("expand_dims", lambda x: R.expand_dims(x, [0, -1]), lambda x: x[None, ..., None], [S2])
op_record(
    "broadcast_to",
    lambda x: R.broadcast_to(x, (2, 3, 4)),
    lambda x: np.broadcast_to(x, (2, 3, 4)),
    [(3, 1)],
)
op_record("tile", lambda x: R.tile(x, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3)), [S2])
op_record(
    "concat",
    lambda a, b, c: R.concat([a, b, c], axis=1),
    lambda a, b, c: np.concatenate([a, b, c], 1),
    [(2, 1, 4), (2, 3, 4), (2, 2, 4)],
)
op_record("split_sections", lambda x: R.split(x, 3, axis=1), lambda x: np.split(x, 3, 1), [(2, 6)])
op_record(
    "split_indices",
    lambda x: R.split(x, [1, 3], axis=0),
    lambda x: np.split(x, [1, 3], 0),
    [(5, 2)],
)

family("index")
op_record(
    "take",
    lambda x, i: R.take(x, i, axis=0),
    lambda x, i: np.take(x, i, 0),
    [(6, 4), (2, 3)],
    ["float32", "int64"],
    lambda s, d, g: normal(s, d, g) if d == "float32" else ints(-6, 6)(s, d, g),
)
op_record(
    "take_axis1_clip",
    lambda x, i: R.take(x, i, axis=1, mode="clip"),
    lambda x, i: np.take(x, i, 1, mode="clip"),
    [(3, 4), (5,)],
    ["float32", "int64"],
    lambda s, d, g: normal(s, d, g) if d == "float32" else ints(0, 9)(s, d, g),
)
op_record(
    "take_flat",
    lambda x, i: R.take(x, i),
    lambda x, i: np.take(x, i),
    [(3, 4), (5,)],
    ["float32", "int32"],
    lambda s, d, g: normal(s, d, g) if d == "float32" else ints(0, 12)(s, d, g),
)
op_record(
    "strided_slice",
    lambda x: R.strided_slice(x, [0, 2], [1, -1], [3, 0], [1, -2]),
    lambda x: x[1:3, :, -1:0:-2],
    [(4, 3, 6)],
)
op_record(
    "strided_slice_to_end",
    lambda x: R.strided_slice(x, [1], [1], [2**63 - 1]),
    lambda x: x[:, 1:],
    [S2],
)

family("statistical")
op_record("sum", R.sum, lambda x: np.sum(x), [S])
op_record(
    "sum_keepdims",
    lambda x: R.sum(x, [0, 2], keepdims=True),
    lambda x: x.sum((0, 2), keepdims=True),
    [S],
)
op_record("mean", lambda x: R.mean(x, 1), lambda x: x.mean(1), [S])
op_record("max", lambda x: R.max(x, -1), lambda x: x.max(-1), [S])
op_record("min", lambda x: R.min(x, [0, 1]), lambda x: x.min((0, 1)), [S])
op_record("prod", lambda x: R.prod(x, 1), lambda x: x.prod(1), [S])
op_record("variance", lambda x: R.variance(x, 2), lambda x: x.var(2), [S])
op_record("std", lambda x: R.std(x, 0, keepdims=True), lambda x: x.std(0, keepdims=True), [S])
op_record("sum_int64", lambda x: R.sum(x, 1), lambda x: x.sum(1), [S], "int64", ints(-9, 9))
op_record("argmax", lambda x: R.argmax(x, 1), lambda x: x.argmax(1), [S])
op_record("argmin_flat", R.argmin, lambda x: np.argmin(x), [S])
op_record(
    "argmax_keepdims",
    lambda x: R.argmax(x, 2, keepdims=True),
    lambda x: np.expand_dims(x.argmax(2), 2),
    [S],
)

family("create")
op_record("full", lambda: R.full((2, 3), 1.5), lambda: np.full((2, 3), 1.5, "float32"), [])
op_record(
    "full_like", lambda x: R.full_like(x, 7, "int32"), lambda x: np.full(x.shape, 7, "int32"), [S2]
)
op_record("zeros", lambda: R.zeros((3, 2)), lambda: np.zeros((3, 2), "float32"), [])
op_record("ones_int", lambda: R.ones((4,), "int64"), lambda: np.ones(4, "int64"), [])
op_record("zeros_like", R.zeros_like, np.zeros_like, [S2])
op_record("ones_like", R.ones_like, np.ones_like, [S2])
op_record("arange", lambda: R.arange(2, 11, 3), lambda: np.arange(2, 11, 3), [])
op_record(
    "arange_float",
    lambda: R.arange(0.5, 2.0, 0.25),
    lambda: np.arange(0.5, 2.0, 0.25, "float32"),
    [],
)
op_record("tril", R.tril, np.tril, [(2, 4, 5)])
op_record("triu_k1", lambda x: R.triu(x, 1), lambda x: np.triu(x, 1), [(4, 5)])

family("nn")
op_record("conv2d", R.nn.conv2d, t(F.conv2d), [(2, 3, 8, 8), (4, 3, 3, 3)], rtol=1e-4, atol=1e-4)
op_record(
    "conv2d_stride_pad_dilation",
    lambda x, w: R.nn.conv2d(x, w, strides=2, padding=(1, 2), dilation=(2, 1)),
    t(lambda x, w: F.conv2d(x, w, stride=2, padding=(1, 2), dilation=(2, 1))),
    [(1, 2, 9, 7), (3, 2, 3, 2)],
    atol=1e-4,
)
op_record(
    "conv2d_groups",
    lambda x, w: R.nn.conv2d(x, w, padding=1, groups=2),
    t(lambda x, w: F.conv2d(x, w, padding=1, groups=2)),
    [(1, 4, 5, 5), (6, 2, 3, 3)],
    atol=1e-4,
)
op_record(
    "max_pool2d",
    lambda x: R.nn.max_pool2d(x, 2, 2),
    t(lambda x: F.max_pool2d(x, 2, 2)),
    [(2, 3, 8, 8)],
)
op_record(
    "max_pool2d_pad_ceil",
    lambda x: R.nn.max_pool2d(x, 3, 2, padding=1, ceil_mode=True),
    t(lambda x: F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True)),
    [(1, 2, 8, 8)],
)
op_record(
    "avg_pool2d_include_pad",
    lambda x: R.nn.avg_pool2d(x, 3, 2, padding=1, count_include_pad=True),
    t(lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=True)),
    [(1, 2, 7, 7)],
)
op_record(
    "avg_pool2d_exclude_pad_ceil",
    lambda x: R.nn.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
    t(lambda x: F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False)),
    [(1, 2, 8, 8)],
)
op_record(
    "adaptive_avg_pool2d_1x1",
    lambda x: R.nn.adaptive_avg_pool2d(x, 1),
    t(lambda x: F.adaptive_avg_pool2d(x, 1)),
    [(2, 3, 5, 5)],
)
op_record(
    "adaptive_avg_pool2d_3x2",
    lambda x: R.nn.adaptive_avg_pool2d(x, (3, 2)),
    t(lambda x: F.adaptive_avg_pool2d(x, (3, 2))),
    [(1, 2, 7, 5)],
)
op_record(
    "layer_norm",
    lambda x, g, b: R.nn.layer_norm(x, g, b, [-1]),
    t(lambda x, g, b: F.layer_norm(x, (4,), g, b)),
    [S, (4,), (4,)],
)
op_record(
    "layer_norm_2axes",
    lambda x, g, b: R.nn.layer_norm(x, g, b, [1, 2], epsilon=1e-3),
    t(lambda x, g, b: F.layer_norm(x, (3, 4), g, b, eps=1e-3)),
    [S, S2, S2],
)
op_record(
    "batch_norm",
    lambda x, g, b, m, v: R.nn.batch_norm(x, g, b, m, v),
    t(lambda x, g, b, m, v: F.batch_norm(x, m, v, g, b, training=False)),
    [(2, 3, 4, 4), (3,), (3,), (3,), (3,)],
    rng=lambda s, d, g: positive(s, d, g) if len(s) == 1 else normal(s, d, g),
)

family("symbolic")
op_record(
    "conv2d_symbolic_hw",
    lambda x, w: R.nn.conv2d(x, w, strides=2, padding=1),
    t(lambda x, w: F.conv2d(x, w, stride=2, padding=1)),
    [("n", 2, "h", "h"), (3, 2, 3, 3)],
    atol=1e-4,
)
op_record(
    "adaptive_avg_pool2d_symbolic_hw",
    lambda x: R.nn.adaptive_avg_pool2d(x, 1),
    t(lambda x: F.adaptive_avg_pool2d(x, 1)),
    [("n", 2, "h", "h")],
)
op_record("add_n", R.add, np.add, [("n", 4), (4,)])
op_record("matmul_n", R.matmul, np.matmul, [("n", 8), (8, 3)])
op_record("linear_b_s", R.linear, t(F.linear), [("b", "s", 8), (3, 8), (3,)])
op_record("softmax_n", R.nn.softmax, t(lambda x: F.softmax(x, -1)), [("n", 5)])
op_record("sum_over_n", lambda x: R.sum(x, 0), lambda x: x.sum(0), [("n", 4)])
op_record(
    "mean_over_n",
    lambda x: R.mean(x, 0, keepdims=True),
    lambda x: x.mean(0, keepdims=True),
    [("n", 4)],
)
op_record(
    "reshape_n",
    lambda x: R.reshape(x, ("n", -1)),
    lambda x: x.reshape(x.shape[0], -1),
    [("n", 2, 3)],
)
op_record("flatten_n", R.flatten, np.ravel, [("n", 2)])
op_record("permute_n", lambda x: R.permute_dims(x, [1, 0]), np.transpose, [("n", 2)])
op_record(
    "conv2d_n",
    lambda x, w: R.nn.conv2d(x, w, padding=1),
    t(lambda x, w: F.conv2d(x, w, padding=1)),
    [("n", 2, 6, 6), (3, 2, 3, 3)],
    atol=1e-4,
)
op_record(
    "max_pool2d_n",
    lambda x: R.nn.max_pool2d(x, 2, 2),
    t(lambda x: F.max_pool2d(x, 2, 2)),
    [("n", 2, 6, 6)],
)
op_record(
    "layer_norm_b_s",
    lambda x, g, b: R.nn.layer_norm(x, g, b, [-1]),
    t(lambda x, g, b: F.layer_norm(x, (8,), g, b)),
    [("b", "s", 8), (8,), (8,)],
)
op_record(
    "take_b_s",
    lambda x, i: R.take(x, i, axis=0),
    lambda x, i: np.take(x, i, 0),
    [(10, 4), ("b", "s")],
    ["float32", "int64"],
    lambda s, d, g: normal(s, d, g) if d == "float32" else ints(0, 10)(s, d, g),
)
op_record(
    "concat_n",
    lambda a, b: R.concat([a, b], 0),
    lambda a, b: np.concatenate([a, b], 0),
    [("n", 2), (4, 2)],
)
op_record(
    "strided_slice_n",
    lambda x: R.strided_slice(x, [0], [1], [2**63 - 1]),
    lambda x: x[1:],
    [("n", 2)],
)
op_record(
    "expand_squeeze_n", lambda x: R.squeeze(R.expand_dims(x, 1), [1]), lambda x: x, [("n", 2)]
)
op_record("batched_matmul_b", R.matmul, np.matmul, [("b", "s", 4), ("b", 4, "s")])
op_record("argmax_n", lambda x: R.argmax(x, 1), lambda x: x.argmax(1), [("n", 5)])


# -- building, running, comparing ------------------------------------------------------------
def concrete(shape: tuple) -> tuple:
    return tuple(SYMBOLS[d] if isinstance(d, str) else d for d in shape)


def inputs_of(rec: OpRecord, seed: int) -> list[np.ndarray]:
    gen = np.random.default_rng(seed)
    return [rec.rng(concrete(s), d, gen) for s, d in zip(rec.shapes, rec.dtypes)]


def build_module(records: Sequence[OpRecord]) -> tuple:
    """One function `main`: the inputs of every record, in order, and all their outputs."""
    bb = relax.BlockBuilder()
    params, outs, exprs = (
        [],
        [],
        [],
    )  # NOTE: exprs keeps constants alive (BlockBuilder caches by id)
    with bb.function("main"):
        with bb.dataflow():
            for rec in records:
                args = [
                    relax.Var(f"{rec.name}_{i}", relax.TensorStructInfo(s, d))
                    for i, (s, d) in enumerate(zip(rec.shapes, rec.dtypes))
                ]
                params += args
                exprs.append(rec.build(*args))
                outs.append(bb.emit_output(exprs[-1]))
        items = []
        for out in outs:
            fields = (
                out.struct_info.fields if isinstance(out.struct_info, TupleStructInfo) else None
            )
            items.append([out[i] for i in range(len(fields))] if fields is not None else [out])
        bb.emit_func_output([v for group in items for v in group], params=params)
    return bb.get(), [len(group) for group in items]


def run_records(records: Sequence[OpRecord]) -> dict[str, tuple]:
    """{name: (outputs, references, inputs)} for `records`, built as one module."""
    mod, counts = build_module(records)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    inputs = [inputs_of(rec, seed) for seed, rec in enumerate(records)]
    got = vm["main"](*[a for arrays in inputs for a in arrays])
    got = list(got) if isinstance(got, tuple) else [got]
    results = {}
    for rec, n, arrays in zip(records, counts, inputs):
        outs, got = [g.numpy() for g in got[:n]], got[n:]
        want = rec.ref(*arrays)
        results[rec.name] = (outs, want if isinstance(want, list) else [want], arrays)
    return results


@functools.cache
def family_results(name: str):
    """The results of a family's shared build, or the exception that build raised."""
    try:
        return run_records([r for r in RECORDS if r.family == name and not r.xfail])
    except Exception as exc:  # noqa: BLE001 - each row then rebuilds alone, naming its op
        return exc


def describe(rec: OpRecord) -> str:
    return f"relax op '{rec.name}' on shapes {list(rec.shapes)} dtypes {rec.dtypes}"


def check_numeric(rec: OpRecord) -> None:
    results = None if rec.xfail else family_results(rec.family)
    if results is None or isinstance(results, Exception):
        try:
            results = run_records([rec])
        except Exception as exc:
            raise AssertionError(f"{describe(rec)}: {type(exc).__name__}: {exc}") from exc
    outs, wants, _ = results[rec.name]
    assert len(outs) == len(wants), f"{describe(rec)}: {len(outs)} outputs, expected {len(wants)}"
    for i, (got, want) in enumerate(zip(outs, wants)):
        want = np.asarray(want)
        if want.dtype == bool and got.dtype == np.int8 and set(np.unique(got)) <= {0, 1}:
            got = got.astype(bool)  # NOTE: bool tensors are bytes at the graph level
        assert got.shape == want.shape and got.dtype == want.dtype, (
            f"{describe(rec)}: output {i} is {got.dtype}{got.shape}, expected {want.dtype}{want.shape}"
        )
        np.testing.assert_allclose(
            got, want, rtol=rec.rtol, atol=rec.atol, err_msg=f"{describe(rec)}: output {i}"
        )


@pytest.mark.parametrize(
    "rec",
    [
        pytest.param(r, id=r.name, marks=[pytest.mark.xfail(reason=r.xfail)] if r.xfail else [])
        for r in RECORDS
    ],
)
def test_op(rec: OpRecord):
    check_numeric(rec)


# -- dynamic batch, pipeline behaviour -------------------------------------------------------
def test_mlp_symbolic_batch_runs_for_1_7_64():
    """The tutorial MLP compiled once with ("n", 784) runs for every batch size."""
    gen = np.random.default_rng(0)
    w1, b1 = gen.standard_normal((128, 784), "float32") * 0.05, gen.standard_normal(128, "float32")
    w2, b2 = gen.standard_normal((10, 128), "float32") * 0.05, gen.standard_normal(10, "float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(("n", 784), "float32"))
    weights = [relax.const(w) for w in (w1, b1, w2, b2)]  # NOTE: alive while building (id cache)
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(R.nn.relu(R.linear(x, weights[0], weights[1])))
            gv = bb.emit_output(R.linear(h, weights[2], weights[3]))
        bb.emit_func_output(gv)
    vm = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())
    for n in (1, 7, 64):
        data = gen.standard_normal((n, 784), "float32")
        want = np.maximum(data @ w1.T + b1, 0) @ w2.T + b2
        got = vm["main"](data).numpy()
        assert got.shape == (n, 10)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-4, err_msg=f"batch {n}")


def test_symbolic_shape_inference():
    x = relax.Var("x", relax.TensorStructInfo(("n", 1, 28, 28)))
    w = relax.Var("w", relax.TensorStructInfo((6, 1, 5, 5)))
    assert R.reshape(x, ("n", -1)).struct_info.shape == ("n", 784)
    assert R.flatten(x).struct_info.shape == ("n*784",)
    assert R.nn.conv2d(x, w).struct_info.shape == ("n", 6, 24, 24)
    assert R.concat([x, x], 0).struct_info.shape == ("n*2", 1, 28, 28)
    assert R.matmul(
        R.reshape(x, ("n", 784)), relax.Var("m", relax.TensorStructInfo((784, 128)))
    ).struct_info.shape == ("n", 128)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda a, b: R.add(a, b), ValueError, r"relax.add: shapes .* do not broadcast"),
        (
            lambda a, b: R.matmul(a, R.permute_dims(b, [0, 1, 3, 2])),
            ValueError,
            r"relax.matmul: shapes",
        ),
        (
            lambda a, b: R.matmul(a, R.reshape(b, (3, 2, 2, 8))),
            ValueError,
            r"relax.matmul: reduction dims differ",
        ),
        (
            lambda a, b: R.add(a, R.astype(b, "int32")),
            TypeError,
            r"relax.add: operands must have the same dtype",
        ),
        (lambda a, b: R.reshape(a, (5, 5)), ValueError, r"relax.reshape: cannot reshape"),
        (
            lambda a, b: R.nn.conv2d(a, b, data_layout="NHWC"),
            NotImplementedError,
            r"data_layout='NCHW'",
        ),
        (
            lambda a, b: R.exp(R.astype(a, "int64")),
            TypeError,
            r"relax.exp: expected a float tensor",
        ),
    ],
)
def test_inference_errors(make, error, match):
    a = relax.Var("a", relax.TensorStructInfo((2, 3, 4, 4)))
    b = relax.Var("b", relax.TensorStructInfo((3, 2, 4, 4)))
    with pytest.raises(error, match=match):
        make(a, b)
