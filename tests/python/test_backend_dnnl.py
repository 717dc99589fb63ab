"""The `dnnl` backend: conv2d and matmul patterns offloaded to oneDNN, the kernels' caches and
threads, the strategy entries, and the error when oneDNN is missing.

Numerics against torch (convolutions) and numpy (matmuls) in float32, fixed seeds:
rtol=1e-4, atol=1e-4 on inputs scaled to keep the sums near 1 (oneDNN sums in other orders and
may use Winograd-free direct or GEMM kernels; no reduced precision is allowed by default).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch
from test_runtime import BLOCK_MLIR, PARALLEL_MATMUL, run_python

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.relax.backend import dnnl as dnnl_backend
from relaxmlir.relax.op import strategy
from relaxmlir.runtime import dnnl as dnnl_runtime

RTOL = ATOL = 1e-4
R = relax.op

pytestmark = pytest.mark.skipif(
    not dnnl_backend.is_available(),
    reason="no oneDNN (pip install onednn-cpu-iomp==2023.2.0 intel-cmplr-lib-rt)",
)


def _dispatch(mod):
    mod = relax.transform.FuseOpsByPattern(
        relax.backend.get_patterns_with_prefix("dnnl"), annotate_codegen=True
    )(mod)
    return relax.transform.RunCodegen()(mod)


def _run(mod, *args):
    ex = relax.build(mod, "llvm")
    return ex, relax.VirtualMachine(ex, rm.cpu())["main"](*args).numpy()


# -- conv2d ---------------------------------------------------------------------------------


def _conv_module(x_shape, w_shape, stride, pad, dilation, groups, bias, residual, relu):
    """conv2d(x, w) (+ b) (+ residual, on the side `residual` names) (relu)."""
    out_shape = _conv_out_shape(x_shape, w_shape, stride, pad, dilation)
    x = relax.Var("x", relax.TensorStructInfo(x_shape, "float32"))
    w = relax.Var("w", relax.TensorStructInfo(w_shape, "float32"))
    b = relax.Var("b", relax.TensorStructInfo((1, w_shape[0], 1, 1), "float32"))
    r = relax.Var("r", relax.TensorStructInfo(out_shape, "float32"))
    params = [x, w] + ([b] if bias else []) + ([r] if residual else [])
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            y = bb.emit(R.nn.conv2d(x, w, stride, pad, dilation, groups))
            if bias:
                y = bb.emit(R.add(y, b))
            if residual == "right":
                y = bb.emit(R.add(y, r))
            elif residual == "left":
                y = bb.emit(R.add(r, y))
            if relu:
                y = bb.emit(R.nn.relu(y))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    return bb.get()


def _conv_out_shape(x_shape, w_shape, stride, pad, dilation):
    n, _, h, w = x_shape
    kh, kw = w_shape[2:]
    oh = (h + pad[0] + pad[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + pad[1] + pad[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    return (n, w_shape[0], oh, ow)


def _torch_conv(x, w, b, r, stride, pad, dilation, groups, relu):
    xt = torch.nn.functional.pad(torch.from_numpy(x), (pad[1], pad[3], pad[0], pad[2]))
    y = torch.nn.functional.conv2d(xt, torch.from_numpy(w), None, stride, 0, dilation, groups)
    y = y.numpy()
    if b is not None:
        y = y + b
    if r is not None:
        y = y + r
    return np.maximum(y, 0) if relu else y


CONV_CASES = [
    # x shape, w shape, stride, padding (t, l, b, r), dilation, groups, bias, residual, relu
    ((1, 3, 17, 19), (8, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, False, None, False),
    ((2, 8, 15, 13), (12, 4, 3, 3), (2, 1), (1, 2, 0, 1), (1, 2), 2, True, None, True),
    ((1, 16, 14, 14), (16, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 16, True, "right", True),
    ((3, 5, 9, 11), (7, 5, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, False, "left", False),
    ((2, 6, 10, 10), (6, 6, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1, True, None, False),
    ((1, 4, 23, 23), (9, 4, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1, False, None, True),
    ((2, 8, 12, 12), (8, 8, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1, True, "left", True),
    ((1, 32, 8, 8), (32, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, False, "right", True),
]


@pytest.mark.parametrize("bind", [False, True], ids=["weights-as-args", "constant-weights"])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}x{c[1]}s{c[2]}g{c[5]}")
def test_conv2d_matches_torch(case, bind):
    x_shape, w_shape, stride, pad, dil, groups, bias, residual, relu = case
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    fan_in = w_shape[1] * w_shape[2] * w_shape[3]
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = (rng.standard_normal(w_shape, dtype=np.float32) / np.sqrt(fan_in)).astype(np.float32)
    b = rng.standard_normal((1, w_shape[0], 1, 1), dtype=np.float32) if bias else None
    out_shape = _conv_out_shape(x_shape, w_shape, stride, pad, dil)
    r = rng.standard_normal(out_shape, dtype=np.float32) if residual else None
    mod = _conv_module(x_shape, w_shape, stride, pad, dil, groups, bias, residual, relu)
    args = [x, w] + ([b] if bias else []) + ([r] if residual else [])
    if bind:
        mod = relax.transform.BindParams("main", {"w": w})(mod)
        args.pop(1)
    mod = _dispatch(mod)
    text = mod.script()
    assert "relax.nn_conv2d" not in text and '"relax.add"' not in text
    assert "relax.nn_relu" not in text
    ex, got = _run(mod, *args)
    want = _torch_conv(x, w, b, r, stride, pad, dil, groups, relu)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert ex.native_bindings and not ex.callbacks  # a C kernel, no Python trampoline


def test_conv2d_pattern_names_and_parameters():
    mod = _conv_module((1, 4, 8, 8), (4, 4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True, "left", True)
    fused = relax.transform.FuseOpsByPattern(
        relax.backend.get_patterns_with_prefix("dnnl"), annotate_codegen=True
    )(mod)
    assert 'relax.composite = "dnnl.conv2d_bias_add_relu"' in fused.script()
    text = _dispatch(mod).script()
    # src, weight, bias, residual in the kernel's order, then the parameter tensor
    assert '"relax.call_dps_packed"(%r, %x, %w, %b, ' in text
    assert "dense<[1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]> : tensor<12xi64>" in text  # residual first


def test_checks_leave_what_the_kernels_cannot_take():
    def conv(x_shape, w_shape, dtype="float32", bias_shape=None):
        x = relax.Var("x", relax.TensorStructInfo(x_shape, dtype))
        w = relax.Var("w", relax.TensorStructInfo(w_shape, dtype))
        params = [x, w]
        bb = relax.BlockBuilder()
        if bias_shape is not None:
            params.append(relax.Var("b", relax.TensorStructInfo(bias_shape, dtype)))
        with bb.function("main", params):
            with bb.dataflow():
                y = bb.emit(R.nn.conv2d(x, w, (1, 1), (0, 0, 0, 0), (1, 1), 1))
                if bias_shape is not None:
                    y = bb.emit(R.add(y, params[2]))
                gv = bb.emit_output(y)
            bb.emit_func_output(gv)
        return relax.transform.FuseOpsByPattern(
            relax.backend.get_patterns_with_prefix("dnnl"), annotate_codegen=True
        )(bb.get()).script()

    assert "dnnl.conv2d\"" in conv((1, 4, 5, 5), (2, 4, 1, 1))
    assert "relax.composite" not in conv((1, 4, 5, 5), (2, 4, 1, 1), "float16")
    # a bias along W (shape (3,)) is not one value per channel: the add stays outside
    assert 'relax.composite = "dnnl.conv2d"' in conv((1, 4, 5, 3), (3, 4, 1, 1), bias_shape=(3,))
    assert "dnnl.conv2d_bias" in conv((1, 4, 5, 3), (3, 4, 1, 1), bias_shape=(3, 1, 1))


# -- matmul ---------------------------------------------------------------------------------


def _erf(x):
    from math import erf

    return np.vectorize(erf, otypes=[np.float32])(x)


ACT = {
    None: lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3))),
    "silu": lambda x: x / (1 + np.exp(-x)),
}
ACT_OPS = {"relu": R.nn.relu, "gelu": R.nn.gelu, "gelu_tanh": R.nn.gelu_tanh, "silu": R.nn.silu}


def _linear_module(act, transposed, bias, shape, k_out):
    x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))
    k = shape[-1]
    w = relax.Var("w", relax.TensorStructInfo((k_out, k) if transposed else (k, k_out), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((k_out,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w] + ([b] if bias else [])):
        with bb.dataflow():
            rhs = bb.emit(R.permute_dims(w, [1, 0])) if transposed else w
            y = bb.emit(R.matmul(x, rhs))
            if bias:
                y = bb.emit(R.add(y, b))
            if act:
                y = bb.emit(ACT_OPS[act](y))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    return bb.get()


@pytest.mark.parametrize("bind", [False, True], ids=["weights-as-args", "constant-weights"])
@pytest.mark.parametrize(
    "shape,k_out,transposed,bias,act",
    [
        ((1, 784), 256, True, True, "relu"),
        ((7, 33), 5, True, True, "gelu"),
        ((3, 5, 17), 9, True, True, "gelu_tanh"),
        ((2, 3, 4, 10), 6, False, True, "silu"),
        ((13, 1), 3, False, False, None),
        ((5, 31), 1, True, False, "relu"),
        ((64, 64), 64, False, True, None),
    ],
)
def test_matmul_matches_numpy(shape, k_out, transposed, bias, act, bind):
    rng = np.random.default_rng(len(shape) * 100 + k_out)
    k = shape[-1]
    x = (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(k)).astype(np.float32)
    w = rng.standard_normal((k_out, k) if transposed else (k, k_out), dtype=np.float32)
    b = rng.standard_normal((k_out,), dtype=np.float32)
    mod = _linear_module(act, transposed, bias, shape, k_out)
    args = [x, w] + ([b] if bias else [])
    if bind:
        mod = relax.transform.BindParams("main", {"w": w})(mod)
        args.pop(1)
    mod = _dispatch(mod)
    assert '"relax.matmul"' not in mod.script()
    ex, got = _run(mod, *args)
    want = ACT[act](x @ (w.T if transposed else w) + (b if bias else 0))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert ex.native_bindings and not ex.callbacks


def test_batched_matmul_with_broadcast_batch():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 5, 7), dtype=np.float32)
    b = rng.standard_normal((3, 7, 4), dtype=np.float32)
    x = relax.Var("a", relax.TensorStructInfo(a.shape, "float32"))
    y = relax.Var("b", relax.TensorStructInfo(b.shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(R.matmul(x, y)))
        bb.emit_func_output(gv)
    mod = _dispatch(bb.get())
    assert '"relax.matmul"' not in mod.script()
    _, got = _run(mod, a, b)
    np.testing.assert_allclose(got, a @ b, rtol=RTOL, atol=ATOL)


def test_symbolic_batch_reuses_the_executable():
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((6, 3, 3, 3), dtype=np.float32) / 5).astype(np.float32)
    x = relax.Var("x", relax.TensorStructInfo(("n", 3, 9, 9), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w), (1, 1), (1, 1, 1, 1)))))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    mod = _dispatch(bb.get())
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    for n in (1, 4, 2):
        data = rng.standard_normal((n, 3, 9, 9), dtype=np.float32)
        want = _torch_conv(data, w, None, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, True)
        np.testing.assert_allclose(vm["main"](data).numpy(), want, rtol=RTOL, atol=ATOL)


# -- the kernels: caches, errors, threads, no Python -----------------------------------------


def _conv_kernel_call(kernel, x, w, params):
    out_shape = _conv_out_shape(x.shape, w.shape, params[3:5], params[5:9], params[9:11])
    out = np.empty(out_shape, np.float32)
    kernel(x, w, params, out)
    return out


def test_constant_weights_are_reordered_once_and_keyed_by_contents():
    """Two weights at the same address with different contents (a freed executable's memory
    reused by the next) must not share a reordered copy: the digest is part of the key."""
    kernel = dnnl_backend.kernel_for("dnnl.conv2d")
    dnnl_runtime.clear_cache()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 16, 12, 12), dtype=np.float32)
    w = rng.standard_normal((32, 16, 3, 3), dtype=np.float32) / 12
    attrs = {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1}
    params = dnnl_backend.conv2d_params(attrs, digest=12345)
    want = _torch_conv(x, w, None, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, False)
    np.testing.assert_allclose(_conv_kernel_call(kernel, x, w, params), want, rtol=RTOL, atol=ATOL)
    before = dnnl_runtime.cache_info()
    np.testing.assert_allclose(_conv_kernel_call(kernel, x, w, params), want, rtol=RTOL, atol=ATOL)
    after = dnnl_runtime.cache_info()
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"]
    assert after["weight_bytes"] >= w.nbytes  # kept in the primitive's own (blocked) layout
    # new contents in the same buffer, under a new digest: a new entry, the right answer
    w[...] = rng.standard_normal(w.shape, dtype=np.float32) / 12
    params2 = dnnl_backend.conv2d_params(attrs, digest=67890)
    want2 = _torch_conv(x, w, None, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, False)
    np.testing.assert_allclose(_conv_kernel_call(kernel, x, w, params2), want2, rtol=RTOL, atol=ATOL)
    assert dnnl_runtime.cache_info()["misses"] == after["misses"] + 1
    # digest 0: the weight may change between calls and is reordered at every call
    params0 = dnnl_backend.conv2d_params(attrs, digest=0)
    np.testing.assert_allclose(_conv_kernel_call(kernel, x, w, params0), want2, rtol=RTOL, atol=ATOL)
    w[...] = 0
    assert not _conv_kernel_call(kernel, x, w, params0).any()
    dnnl_runtime.clear_cache()
    assert dnnl_runtime.cache_info()["entries"] == 0


def test_two_executables_with_equal_shapes_and_different_constants():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 8, 10, 10), dtype=np.float32)
    for seed in range(3):  # each build's constants may land where the last one's were
        w = np.random.default_rng(seed).standard_normal((8, 8, 3, 3), dtype=np.float32) / 9
        mod = _conv_module((1, 8, 10, 10), w.shape, (1, 1), (1, 1, 1, 1), (1, 1), 1, False, None, True)
        mod = _dispatch(relax.transform.BindParams("main", {"w": w})(mod))
        _, got = _run(mod, x)
        want = _torch_conv(x, w, None, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, True)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_empty_reductions_give_the_epilogue():
    matmul = dnnl_backend.kernel_for("dnnl.matmul_bias_relu")
    bias = np.array([-1.0, 0.0, 1.0, 2.0], np.float32)
    out = np.full((3, 4), 7.0, np.float32)
    matmul(np.ones((3, 0), np.float32), np.ones((0, 4), np.float32), bias, dnnl_backend.matmul_params(), out)
    np.testing.assert_array_equal(out, np.broadcast_to(np.maximum(bias, 0), (3, 4)))


def test_a_malformed_parameter_tensor_is_reported_and_gives_nan():
    kernel = dnnl_backend.kernel_for("dnnl.conv2d")
    out = np.zeros((1, 2, 3, 3), np.float32)
    kernel(np.ones((1, 2, 3, 3), np.float32), np.ones((2, 2, 1, 1), np.float32), np.zeros(5, np.int64), out)
    assert np.isnan(out).all()
    assert "malformed parameter tensor" in dnnl_runtime.last_error()


def test_dispatched_call_does_not_enter_python():
    mod = _conv_module((1, 4, 8, 8), (4, 4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True, "right", True)
    ex = relax.build(_dispatch(mod), "llvm")
    vm = relax.VirtualMachine(ex, rm.cpu())
    rng = np.random.default_rng(5)
    shapes = ((1, 4, 8, 8), (4, 4, 3, 3), (1, 4, 1, 1), (1, 4, 8, 8))
    args = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    entry = vm["main"]
    entry(*args)  # warm
    seen = []

    def profile(frame, event, arg):
        if event == "call":
            seen.append(getattr(frame.f_code, "co_qualname", frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        entry(*args)
    finally:
        sys.setprofile(None)
    assert not any("_Trampoline" in s or "NativeFunc" in s for s in seen), seen


# A child's first dnnl call (a 3x3 conv of 32 channels), with `tasks()` counting its threads
# before (`before`) and after it.
DNNL_CONV_CALL = """
import os
import numpy as np
from relaxmlir.relax.backend import dnnl
def tasks():
    return len(os.listdir("/proc/self/task"))
kernel = dnnl.kernel_for("dnnl.conv2d")
params = dnnl.conv2d_params({"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1})
x, w = np.ones((1, 32, 32, 32), np.float32), np.ones((32, 32, 3, 3), np.float32)
before = tasks()
kernel(x, w, params, np.empty((1, 32, 32, 32), np.float32))
"""


def test_threads_follow_relaxmlir_num_threads():
    """oneDNN's OpenMP team is as large as ours: RELAXMLIR_NUM_THREADS=3 starts two
    workers, set_num_threads(1) then runs oneDNN on the calling thread alone."""
    out = run_python(
        DNNL_CONV_CALL
        + """
import relaxmlir as rm
from relaxmlir.runtime import dnnl as dnnl_runtime
print(tasks() - before)
rm.runtime.set_num_threads(1)
kernel(x, w, params, np.empty((1, 32, 32, 32), np.float32))
print(dnnl_runtime.team_size())
""",
        env={**os.environ, "RELAXMLIR_NUM_THREADS": "3"},
    )
    assert out.split() == ["2", "1"], out


def _intel_openmp_build() -> bool:
    return "libiomp5.so" in dnnl_runtime.needed_libraries(dnnl_runtime.find_dnnl() or "")


@pytest.mark.skipif(not _intel_openmp_build(), reason="oneDNN is not the Intel-OpenMP build")
def test_dnnl_and_our_kernels_share_one_openmp_runtime():
    """The Intel-OpenMP oneDNN runs on our libiomp5: after a dnnl call the process maps one
    libiomp5 (ours) and no libgomp, and our parallel kernel then starts no thread of its own
    (a second runtime would start its own worker)."""
    out = run_python(
        "n = 96\n"
        + PARALLEL_MATMUL
        + DNNL_CONV_CALL
        + """
from relaxmlir.runtime import libraries
after_dnnl = tasks()
f(a, b, np.empty((n, n), np.float32))
after_ours = tasks()
maps = {line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith(".so") or ".so." in line}
iomp = sorted(m for m in maps if "libiomp5" in m)
print(after_dnnl - before, after_ours - after_dnnl)
print(iomp == [os.path.realpath(libraries.find("openmp"))], iomp)
print([m for m in maps if "libgomp" in m])
""",
        env={**os.environ, "RELAXMLIR_NUM_THREADS": "2"},
    )
    lines = out.strip().splitlines()
    assert lines[0].split() == ["1", "0"], out
    assert lines[1].startswith("True"), out
    assert lines[2] == "[]", out


@pytest.mark.skipif(not _intel_openmp_build(), reason="oneDNN is not the Intel-OpenMP build")
def test_missing_compiler_runtime_is_a_clear_error():
    """Without Intel's compiler runtime (intel-cmplr-lib-rt) the Intel-OpenMP libdnnl cannot be
    opened: the error names the library and the wheel."""
    out = run_python(
        """
from relaxmlir.runtime import dnnl as dnnl_runtime
dnnl_runtime._runtime_folders = lambda dnnl: ["/nonexistent"]
from relaxmlir.relax.backend import dnnl
try:
    dnnl.kernel_for("dnnl.conv2d")
    raise SystemExit("no error")
except OSError as exc:
    print(exc)
"""
    )
    assert "needs libintlc.so.5, found in none of /nonexistent" in out, out
    assert "pip install intel-cmplr-lib-rt" in out, out


# -- the strategy entries -------------------------------------------------------------------


@pytest.fixture
def restore_strategies():
    saved = {k: list(v) for k, v in strategy.STRATEGIES.items()}
    yield
    strategy.STRATEGIES.clear()
    strategy.STRATEGIES.update(saved)


def test_strategy_lists_dnnl_below_our_kernels_and_a_user_can_prefer_it(
    restore_strategies, capfd, monkeypatch
):
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 4, 9, 9), dtype=np.float32)
    w = rng.standard_normal((6, 4, 3, 3), dtype=np.float32) / 6
    mod = _conv_module(x.shape, w.shape, (2, 2), (1, 1, 1, 1), (1, 1), 1, False, None, False)
    want = _torch_conv(x, w, None, None, (2, 2), (1, 1, 1, 1), (1, 1), 1, False)
    ex, got = _run(mod, x, w)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    err = capfd.readouterr().err
    assert f"conv2d_nchw.dnnl (plevel {strategy.DNNL_PLEVEL})" in err and not ex.native_bindings

    @strategy.register_strategy("relax.nn.conv2d", "llvm", level=20)
    def prefer_dnnl(call, target):
        s = strategy.OpStrategy()
        s.add_implementation(emit=dnnl_backend.emit_conv2d, name="user.dnnl", plevel=1)
        return s

    ex, got = _run(mod, x, w)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert "user.dnnl (plevel 1" in capfd.readouterr().err
    assert any("relaxmlir_dnnl_conv2d" in str(f) for f in ex.native_bindings.values())


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=x86-64-v3"], ids=["host", "avx2"])
def test_blocked_conv_can_run_in_dnnl(target, capfd, monkeypatch):
    """A convolution relax-alter-op-layout put in NCHW<b>c (16 or 8 lanes) is still a dnnl
    candidate (`conv2d_nchwc.dnnl`: layout changes around the NCHW kernel, the weight unblocked
    at compile time), so tuning can choose oneDNN per convolution; forced here, it matches
    torch for a unit-stride and a strided convolution."""
    from relaxmlir.frontend import from_fx

    target = rm.target.Target(target)
    if target.runs_on_host():
        pytest.skip(f"this machine lacks {target.runs_on_host()}")
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(32, 64, 3, 1, 1), torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3, 2, 1)
    ).eval()
    x = torch.randn(2, 32, 10, 10)
    mod = from_fx(torch.fx.symbolic_trace(model), [(2, 32, 10, 10)], keep_params_as_input=False)
    force = {strategy.FORCE_CONFIG: {"relax.nn.conv2d": "conv2d_nchwc.dnnl"}}
    with rm.transform.PassContext(config=force):
        ex = relax.build(mod, target)
    err = capfd.readouterr().err
    assert err.count("conv2d_nchwc.dnnl (plevel") == 2, err
    assert any("relaxmlir_dnnl_conv2d" in str(f) for f in ex.native_bindings.values())
    with torch.no_grad():
        want = model(x).numpy()
    got = relax.VirtualMachine(ex, rm.cpu())["main"](x.numpy()).numpy()
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_matmul_strategy_lists_dnnl(capfd, monkeypatch):
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((5, 16), dtype=np.float32), rng.standard_normal((16, 8), dtype=np.float32)
    _, got = _run(_linear_module(None, False, False, (5, 16), 8), a, b)
    np.testing.assert_allclose(got, a @ b, rtol=RTOL, atol=ATOL)
    assert "matmul.dnnl (plevel" in capfd.readouterr().err


# -- deployment and the missing library ------------------------------------------------------


def test_exported_library_runs_in_a_fresh_process(tmp_path):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 3, 12, 12), dtype=np.float32)
    w = rng.standard_normal((5, 3, 3, 3), dtype=np.float32) / 5
    mod = _conv_module(x.shape, w.shape, (1, 1), (1, 1, 1, 1), (1, 1), 1, False, None, True)
    mod = _dispatch(relax.transform.BindParams("main", {"w": w})(mod))
    ex = relax.build(mod, "llvm")
    lib = tmp_path / "conv_dnnl.so"
    ex.export_library(str(lib))
    want = _torch_conv(x, w, None, None, (1, 1), (1, 1, 1, 1), (1, 1), 1, True)
    np.savez(tmp_path / "io.npz", x=x, want=want)
    out = run_python(
        BLOCK_MLIR
        + f"""
import numpy as np
import relaxmlir as rm
from relaxmlir import runtime
io = np.load({str(tmp_path / "io.npz")!r})
ex = rm.load_module({str(lib)!r})
got = runtime.VirtualMachine(ex, rm.cpu())["main"](io["x"]).numpy()
np.testing.assert_allclose(got, io["want"], rtol={RTOL}, atol={ATOL})
print("ok")
"""
    )
    assert out.strip() == "ok"


@pytest.mark.parametrize("lib", ["/nonexistent/libdnnl.so.3", "libm"])
def test_missing_or_unusable_library_is_a_clear_error(lib):
    if lib == "libm":
        import ctypes.util

        lib = "/lib/x86_64-linux-gnu/libm.so.6"
        if not os.path.exists(lib):
            lib = ctypes.util.find_library("m")
    out = run_python(
        """
import os
from relaxmlir import relax
import relaxmlir as rm
from relaxmlir.relax.backend import dnnl
missing = not os.path.exists(os.environ["RELAXMLIR_DNNL_LIB"])
assert (rm.get_global_func("relax.ext.dnnl", allow_missing=True) is None) == missing
try:
    dnnl.kernel_for("dnnl.conv2d")
    raise SystemExit("no error")
except OSError as exc:
    assert "pip install onednn-cpu-iomp==2023.2.0 intel-cmplr-lib-rt" in str(exc), exc
    if missing:
        assert "RELAXMLIR_DNNL_LIB=/nonexistent/libdnnl.so.3 does not exist" in str(exc), exc
    else:
        assert "is unusable" in str(exc) and "dnnl_engine_create" in str(exc), exc
if missing:
    x = relax.Var("x", relax.TensorStructInfo((1, 2, 4, 4), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((3, 2, 1, 1), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(relax.op.nn.conv2d(x, w)))
        bb.emit_func_output(gv)
    patterns = relax.backend.get_patterns_with_prefix("dnnl")
    mod = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=True)(bb.get())
    try:
        relax.transform.RunCodegen()(mod)
        raise SystemExit("no error")
    except ValueError as exc:
        assert "no codegen 'dnnl' is registered (relax.ext.dnnl)" in str(exc), exc
print("ok")
""",
        env={**os.environ, "RELAXMLIR_DNNL_LIB": lib},
    )
    assert out.strip() == "ok"
