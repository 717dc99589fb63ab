"""float16 / bfloat16 / int / bool end to end: NDArrays, VM signatures, every op family, astype.

Float ops are compared with torch eager in the same dtype at torch's own default tolerances for
that dtype (`torch.testing.assert_close`: float16 rtol=1e-3 atol=1e-5, bfloat16 rtol=1.6e-2
atol=1e-5); integer and bool results must be equal, dtype included. Many ops share one model
(one build per dtype) to keep the file fast.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_exported_program, from_fx
from relaxmlir.frontend.importer import to_torch
from relaxmlir.runtime.dtype import np_dtype

TOL = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5)}
HALF = [torch.float16, torch.bfloat16]
# Rows that chain several rounded ops: a one-ulp difference in an intermediate (f32 summation
# order in a mean) shows up amplified in the result; they get twice the tolerance.
CHAINED = {"rms_norm"}


class Ops(torch.nn.Module):
    """Applies each function of a table to the same inputs; returns all results."""

    def __init__(self, table: dict, nargs: int):
        super().__init__()
        self.table, self.nargs = table, nargs

    def forward(self, a, b=None, c=None, d=None):  # a fixed signature, so that fx traces it
        args = (a, b, c, d)[: self.nargs]
        return tuple(fn(*args) for fn in self.table.values())


def _build(model, inputs, frontend="ep"):
    if frontend == "fx":
        dtypes = [str(t.dtype).removeprefix("torch.") for t in inputs]
        mod = from_fx(model, [tuple(t.shape) for t in inputs], input_dtypes=dtypes)
    else:
        mod = from_exported_program(torch.export.export(model, tuple(inputs)))
    return relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())


def check_table(table: dict, inputs: list, frontend: str = "ep", tol=None) -> None:
    """Build all ops of `table` as one model, compare each output with torch (named on failure)."""
    model = Ops(table, len(inputs)).eval()
    out = _build(model, inputs, frontend)["main"](*inputs)
    got = [to_torch(o.numpy()) for o in (out if isinstance(out, (list, tuple)) else [out])]
    with torch.no_grad():
        want = model(*inputs)
    for name, g, w in zip(table, got, want):
        rtol, atol = tol or TOL.get(w.dtype, (0, 0))
        if name in CHAINED:
            rtol, atol = 2 * rtol, 2 * atol
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol, msg=lambda m: f"{name} ({frontend}): {m}")


# -- NDArrays and VM signatures -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_ndarray_roundtrip(dtype):
    ref = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4).astype(np_dtype(dtype))
    a = rm.nd.array(ref)
    assert a.dtype == dtype and a.numpy().dtype == ref.dtype
    np.testing.assert_array_equal(a.numpy().view(np.uint16), ref.view(np.uint16))  # same bits
    t = torch.from_dlpack(a)  # zero copy, bfloat16 included
    assert t.dtype == getattr(torch, dtype) and t.data_ptr() == a.view_numpy().ctypes.data
    b = rm.nd.array(t)  # from torch (bf16: numpy cannot convert it, the bits are copied)
    assert b.dtype == dtype
    np.testing.assert_array_equal(b.numpy().view(np.uint16), ref.view(np.uint16))
    assert rm.nd.array(ref.astype(np.float32), dtype=dtype).numpy().view(np.uint16).tolist() == (
        ref.view(np.uint16).tolist()
    )


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_vm_signature(dtype):
    """Arguments and results in 16 bits; the wrong dtype is refused with the signature."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2, 3), str(dtype).removeprefix("torch.")))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.add(x, x))
        bb.emit_func_output(out)
    vm = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())
    xt = torch.randn(2, 3).to(dtype)
    got = vm["main"](xt)
    assert got.dtype == str(dtype).removeprefix("torch.")
    torch.testing.assert_close(torch.from_dlpack(got), xt + xt)
    with pytest.raises(TypeError, match="dtype"):
        vm["main"](np.zeros((2, 3), np.float32))


# -- float16 / bfloat16 op families --------------------------------------------------------------

HALF_OPS = {
    "add": lambda x, y, w, i: x + y,
    "mul_scalar": lambda x, y, w, i: x * 0.3 + 1.7,
    "div": lambda x, y, w, i: x / (y.abs() + 1),
    "exp": lambda x, y, w, i: torch.exp(x),
    "log": lambda x, y, w, i: torch.log(x.abs() + 1),
    "rsqrt": lambda x, y, w, i: torch.rsqrt(x.abs() + 1),
    "tanh": lambda x, y, w, i: torch.tanh(x),
    "sigmoid": lambda x, y, w, i: torch.sigmoid(x),
    "erf": lambda x, y, w, i: torch.erf(x),
    "gelu": lambda x, y, w, i: F.gelu(x),
    "gelu_tanh": lambda x, y, w, i: F.gelu(x, approximate="tanh"),
    "silu": lambda x, y, w, i: F.silu(x),
    "relu": lambda x, y, w, i: F.relu(x),
    "pow": lambda x, y, w, i: x.abs().pow(2.5),
    "clamp": lambda x, y, w, i: x.clamp(-0.5, 0.5),
    "round": lambda x, y, w, i: torch.round(x * 4),
    "maximum": lambda x, y, w, i: torch.maximum(x, y),
    "where": lambda x, y, w, i: torch.where(x > y, x, y),
    "masked_fill": lambda x, y, w, i: x.masked_fill(y > 0, -1e4),
    "softmax": lambda x, y, w, i: torch.softmax(x, -1),
    "log_softmax": lambda x, y, w, i: torch.log_softmax(x, -1),
    "layer_norm": lambda x, y, w, i: F.layer_norm(x, (x.shape[-1],), w[0], w[1]),
    "rms_norm": lambda x, y, w, i: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w[0],
    "sum": lambda x, y, w, i: x.sum(-1),
    "mean": lambda x, y, w, i: x.mean((0, 2)),
    "var": lambda x, y, w, i: x.var(-1),
    "amax": lambda x, y, w, i: x.amax(-1),
    "cumsum": lambda x, y, w, i: x.cumsum(-1),
    "matmul": lambda x, y, w, i: x @ y.transpose(-1, -2),
    "linear": lambda x, y, w, i: F.linear(x, w, w[0]),
    "embedding": lambda x, y, w, i: F.embedding(i, w),
    "transpose_cat": lambda x, y, w, i: torch.cat([x.transpose(0, 1), y.transpose(0, 1)], -1),
    "to_float32": lambda x, y, w, i: x.float(),
    "argmax": lambda x, y, w, i: x.argmax(-1),
    "less": lambda x, y, w, i: x < y,
}


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_ops(dtype):
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 32).to(dtype), torch.randn(4, 3, 32).to(dtype)
    w = torch.randn(32, 32).to(dtype)
    i = torch.randint(0, 32, (2, 5))
    check_table(HALF_OPS, [x, y, w, i])


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_cnn_ops(dtype):
    """conv2d, batch_norm, pooling and their f32 accumulation in 16 bits (fx importer)."""
    torch.manual_seed(0)
    x, k = torch.randn(2, 8, 10, 10).to(dtype), torch.randn(16, 8, 3, 3).to(dtype) * 0.2
    s = torch.rand(8).to(dtype) + 0.5
    table = {
        "conv2d": lambda x, k, s: F.conv2d(x, k, padding=1),
        "batch_norm": lambda x, k, s: F.batch_norm(x, s - 0.5, s, s, s, training=False),
        "max_pool": lambda x, k, s: F.max_pool2d(x, 2),
        "avg_pool": lambda x, k, s: F.avg_pool2d(x, 2),
        "adaptive_avg_pool": lambda x, k, s: F.adaptive_avg_pool2d(x, 1),
    }
    check_table(table, [x, k, s], frontend="fx")


def _schedules(mod) -> list[str]:
    from lowering.pipelines import target_pipeline
    from lowering.registry import run_pipeline
    from relaxmlir.relax.pipeline import get_pipeline
    from relaxmlir.scope import scope

    target = rm.target.Target({"kind": "llvm", "num-cores": 1})
    mod = get_pipeline("zero")(mod.clone())
    with scope(), target:
        stages = target_pipeline(target, ["graph", "layout", "schedule"])
        run_pipeline(mod.module, "builtin.module(" + ",".join(stages) + ")")
    return str(mod.module.operation.get_asm(large_elements_limit=4)).split("relax.schedule = [")[1:]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_matmul_reaches_f32_schedule(dtype):
    """A 16-bit matmul runs as f32 casts around the f32 matmul, whose register-tiled routes
    apply (rows here: K fits one K block)."""
    bb = relax.BlockBuilder()
    a = relax.Var("a", relax.TensorStructInfo((64, 64), dtype))
    b = relax.Var("b", relax.TensorStructInfo((64, 64), dtype))
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(a, b))
        bb.emit_func_output(out)
    found = _schedules(bb.get())
    assert any(s.startswith('"matmul-rows') for s in found), found


# -- integers and bools --------------------------------------------------------------------------

INT_BOOL_OPS = {
    "less": lambda x, i, m: i > 2,
    "equal": lambda x, i, m: i == 3,
    "not": lambda x, i, m: ~m,
    "and": lambda x, i, m: m & (x > 0),
    "or": lambda x, i, m: m | (x > 0),
    "bool_add": lambda x, i, m: m + (x > 0),
    "bool_mul": lambda x, i, m: m * (x > 0),
    "any": lambda x, i, m: m.any(-1),
    "all": lambda x, i, m: m.all(-1),
    "bool_sum": lambda x, i, m: m.sum(-1),
    "where": lambda x, i, m: torch.where(m, x, -x),
    "masked_fill": lambda x, i, m: x.masked_fill(m, float("-inf")),
    "int_mask": lambda x, i, m: i * m,
    "iadd": lambda x, i, m: i + 7,
    "floordiv": lambda x, i, m: torch.div(i - 5, 2, rounding_mode="floor"),
    "truncdiv": lambda x, i, m: torch.div(i - 5, 2, rounding_mode="trunc"),
    "true_div": lambda x, i, m: (i - 5) / 2,
    "remainder": lambda x, i, m: torch.remainder(i - 5, 3),
    "iabs_neg": lambda x, i, m: -(i - 4).abs(),
    "clamp": lambda x, i, m: i.clamp(1, 3),
    "sign": lambda x, i, m: torch.sign(i - 3),
    "argmax": lambda x, i, m: x.argmax(-1),
    "argmin": lambda x, i, m: x.argmin(0),
    "cumsum_i64": lambda x, i, m: i.cumsum(-1),
    "cumsum_i32": lambda x, i, m: i.to(torch.int32).cumsum(-1),
    "sum_i64": lambda x, i, m: i.sum(-1),
    "amax_i64": lambda x, i, m: i.amax(-1),
    "index_i64": lambda x, i, m: x[:, i[0, :3]],
    "index_select_i32": lambda x, i, m: torch.index_select(x, 1, i[0, :3].to(torch.int32)),
    "gather": lambda x, i, m: torch.gather(x, 1, i),
    "embedding": lambda x, i, m: F.embedding(i, x),
    "int_plus_float": lambda x, i, m: i + x,
    "bool_plus_float": lambda x, i, m: m + x,
}


@pytest.mark.parametrize("frontend", ["ep", "fx"])
def test_int_bool_ops(frontend):
    torch.manual_seed(0)
    x, i, m = torch.randn(6, 6), torch.randint(0, 6, (6, 6)), torch.rand(6, 6) > 0.5
    check_table(INT_BOOL_OPS, [x, i, m], frontend, tol=(1.3e-6, 1e-5))


CAST_DTYPES = [torch.bool, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32]


def test_astype_all_directions():
    """Every pair of CAST_DTYPES: float -> int truncates toward zero, x -> bool is `x != 0`,
    bool -> number is 0/1, float narrowing rounds to nearest even (torch's rules)."""
    values = torch.tensor([-2.75, -1.5, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.75, 100.4, 3e4])
    table = {}
    for src in CAST_DTYPES:
        for dst in CAST_DTYPES:
            if src != dst:
                table[f"{src}->{dst}"] = lambda v, s=src, d=dst: v.to(s).to(d)
    check_table(table, [values], tol=(0, 0))


def test_bool_io_keeps_dtype():
    """Bool parameters and results are bool arrays at the VM (stored as bytes inside)."""
    bb = relax.BlockBuilder()
    m = relax.Var("m", relax.TensorStructInfo((4,), "bool"))
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [m, x]):
        with bb.dataflow():
            lt = bb.emit(relax.op.less(x, relax.const(np.zeros((4,), np.float32))))
            out = bb.emit_output(relax.op.logical_and(m, lt))
        bb.emit_func_output(out)
    vm = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())
    got = vm["main"](np.array([1, 1, 0, 0], bool), np.array([-1, 1, -1, 1], np.float32)).numpy()
    assert got.dtype == np.bool_ and got.tolist() == [True, False, False, False]


def test_from_dlpack_bfloat16_views_torch_memory():
    """rm.nd.from_dlpack of a torch bfloat16 tensor (numpy's DLPack import has no bfloat16: it
    raised RuntimeError) views the same memory, and converts back to torch without a copy."""
    t = torch.randn(2, 3).to(torch.bfloat16)
    a = rm.nd.from_dlpack(t)
    assert a.dtype == "bfloat16" and a.shape == (2, 3)
    t[0, 0] = 7.0
    assert float(a.numpy()[0, 0]) == 7.0
    back = torch.from_dlpack(a)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)
