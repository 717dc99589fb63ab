"""Library dispatch by pattern: `relax.dpl`, the pattern registry, `FuseOpsByPattern`,
`RunCodegen` and the `blas` backend.

Numerics against numpy in float32 (fixed seeds): rtol=1e-4, atol=1e-4 (scaled inputs keep the
accumulated sums near 1; BLAS and numpy sum in different orders).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from mlir import ir
from test_nn_module import MLPModel
from test_runtime import BLOCK_MLIR, run_python

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import nn
from relaxmlir.relax import dpl
from relaxmlir.relax.backend import blas as blas_backend
from relaxmlir.runtime import libraries

RTOL = ATOL = 1e-4
R = relax.op

needs_blas = pytest.mark.skipif(
    not blas_backend.is_available(), reason="no BLAS (pip install scipy-openblas32)"
)


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


# -- the pattern language -------------------------------------------------------------------


def _linear_module(act="relu", transposed=True, bias=True, shape=(4, 16), k_out=8, extra_use=False):
    """x @ w(.T) (+ b) (act): the module and its parameter names."""
    x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))
    k = shape[-1]
    w = relax.Var("w", relax.TensorStructInfo((k_out, k) if transposed else (k, k_out), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((k_out,), "float32"))
    bb = relax.BlockBuilder()
    params = [x, w] + ([b] if bias else [])
    with bb.function("main", params):
        with bb.dataflow():
            rhs = bb.emit(R.permute_dims(w, [1, 0])) if transposed else w
            y = bb.emit(R.matmul(x, rhs))
            if bias:
                y = bb.emit(R.add(y, b))
            if act:
                y = bb.emit(ACT_OPS[act](y))
            if extra_use:
                y = bb.emit(R.add(y, bb.emit(R.matmul(x, rhs))))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    return bb.get()


def _values(mod):
    """The relax ops of main, by op name (first result), in order."""
    out = []

    def walk(op):
        op = op.operation
        if op.name.startswith("relax."):
            out.append((op.name, op.results[0] if len(op.results) else None))
        return ir.WalkResult.ADVANCE

    mod["main"].op.walk(walk)
    return out


def test_dpl_matches_calls_operands_and_attributes():
    mod = _linear_module()
    values = dict(_values(mod))
    relu = values["relax.nn_relu"]
    lhs, rhs, bias = dpl.wildcard(), dpl.wildcard(), dpl.wildcard()
    mm = dpl.is_op("relax.matmul")(
        lhs, dpl.is_op("relax.permute_dims")(rhs).has_attr({"axes": [1, 0]})
    )
    pat = dpl.is_op("relax.nn.relu")(dpl.is_op("relax.add")(mm, bias))
    m = pat.match(relu)
    assert m is not None
    assert len(m.ops) == 4  # relu, add, matmul, permute_dims
    assert isinstance(m[lhs].owner, ir.Block) and isinstance(m[bias].owner, ir.Block)  # params
    # Wrong attribute, wrong op, wrong dtype, failing predicate: no match.
    bad_axes = dpl.is_op("relax.matmul")(
        dpl.wildcard(), dpl.is_op("relax.permute_dims")(rhs).has_attr({"axes": [0, 1]})
    )
    assert bad_axes.match(values["relax.matmul"]) is None
    assert dpl.is_op("relax.nn.gelu")(dpl.wildcard()).match(relu) is None
    assert dpl.wildcard().has_dtype("float16").match(relu) is None
    assert dpl.wildcard().has_dtype("float32").has_shape([4, 8]).match(relu) is not None
    assert dpl.wildcard().has_shape([4, -1]).match(relu) is not None
    assert dpl.wildcard().where(lambda v: False).match(relu) is None
    # Alternatives and conjunctions.
    either = dpl.is_op("relax.nn.gelu")(dpl.wildcard()) | dpl.is_op("relax.nn.relu")(dpl.wildcard())
    assert either.match(relu) is not None
    both = dpl.is_op("relax.nn.relu")(dpl.wildcard()) & dpl.wildcard().has_dtype("float32")
    assert both.match(relu) is not None
    # A repeated node must bind one value: add(x, x) does not match add(y, b).
    same = dpl.wildcard()
    assert dpl.is_op("relax.add")(same, same).match(values["relax.add"]) is None


def test_dpl_constants_vars_and_tuple_items():
    x = relax.Var("x", relax.TensorStructInfo((6, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            parts = bb.emit(R.split(x, 2, axis=0))
            y = bb.emit(R.add(parts[1], relax.const(np.ones((3, 4), np.float32))))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    values = dict(_values(bb.get()))
    add = values["relax.add"]
    split = dpl.is_op("relax.split")(dpl.is_var("x"))
    assert (
        dpl.is_op("relax.add")(dpl.is_tuple_get_item(split, 1), dpl.is_const()).match(add)
        is not None
    )
    assert (
        dpl.is_op("relax.add")(dpl.is_tuple_get_item(split, 0), dpl.is_const()).match(add) is None
    )
    assert dpl.is_op("relax.add")(dpl.wildcard(), dpl.is_var()).match(add) is None
    assert dpl.is_op("relax.split")(dpl.is_var("y")).match(values["relax.split"]) is None


def test_dpl_rejects_bad_patterns():
    with pytest.raises(ValueError, match="unknown relax op 'relax.nope'"):
        dpl.is_op("relax.nope")
    with pytest.raises(ValueError, match="relax op name"):
        dpl.is_op("matmul")
    with pytest.raises(TypeError, match="not a pattern"):
        dpl.is_op("relax.add")(dpl.wildcard(), 3)


# -- the registry ---------------------------------------------------------------------------


def test_registry_priority_and_lookup():
    names = [p.name for p in relax.backend.get_patterns_with_prefix("blas.matmul_transposed")]
    # latest registered first: activations before plain bias before the bare matmul
    assert names.index("blas.matmul_transposed_bias_relu") < names.index(
        "blas.matmul_transposed_bias"
    )
    assert names[-1] == "blas.matmul_transposed"
    assert relax.backend.get_pattern("blas.matmul_bias_gelu").name == "blas.matmul_bias_gelu"
    with pytest.raises(ValueError, match="no fusion pattern named 'blas.conv'"):
        relax.backend.get_pattern("blas.conv")
    # A user pattern registered later takes priority over the built-in ones.
    pat = dpl.is_op("relax.nn.relu")(dpl.wildcard())
    relax.backend.register_patterns([("mylib.relu", pat)])
    assert relax.backend.get_patterns_with_prefix("mylib")[0].name == "mylib.relu"
    relax.backend.register_patterns([("mylib.relu2", pat)])
    assert [p.name for p in relax.backend.get_patterns_with_prefix("mylib")] == [
        "mylib.relu2",
        "mylib.relu",
    ]
    with pytest.raises(TypeError, match="FusionPattern or"):
        relax.backend.register_patterns([("only-a-name",)])


# -- FuseOpsByPattern -----------------------------------------------------------------------


def test_fuse_ops_by_pattern_outlines_a_composite():
    mod = _linear_module()
    patterns = relax.backend.get_patterns_with_prefix("blas")
    out = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=True)(mod)
    text = out.script()
    assert (
        "func.call @fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_blas(%x, %w, %b)"
        in text
    )
    assert 'relax.codegen = "blas", relax.composite = "blas.matmul_transposed_bias_relu"' in text
    assert "relax.nn_relu" in text and '"relax.matmul"' in text  # in the composite's body
    assert '"relax.matmul"' in mod.script()  # the input is left alone
    # Without annotate_codegen: composite only, no codegen, no suffix.
    plain = relax.transform.FuseOpsByPattern(patterns)(mod).script()
    assert "@fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu(" in plain
    assert "relax.codegen" not in plain


def test_an_intermediate_used_elsewhere_is_not_fused():
    mod = _linear_module(act=None, bias=False, extra_use=True)
    out = relax.transform.FuseOpsByPattern([relax.backend.get_pattern("blas.matmul_transposed")])(
        mod
    )
    text = out.script()
    # both matmuls read the shared permute_dims: neither may take it into its composite
    assert "func.call" not in text


def test_checks_reject_what_the_kernel_cannot_do():
    x = relax.Var("x", relax.TensorStructInfo((4, 8), "int32"))
    w = relax.Var("w", relax.TensorStructInfo((8, 3), "int32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(R.matmul(x, w)))
        bb.emit_func_output(gv)
    out = relax.transform.FuseOpsByPattern(relax.backend.get_patterns_with_prefix("blas"))(bb.get())
    assert "func.call" not in out.script()  # int32: not an sgemm


# -- blas end to end ------------------------------------------------------------------------


def _run(mod, *args):
    ex = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(ex, rm.cpu())
    return ex, vm["main"](*args).numpy()


def _dispatch(mod, annotate=True):
    mod = relax.transform.FuseOpsByPattern(
        relax.backend.get_patterns_with_prefix("blas"), annotate_codegen=annotate
    )(mod)
    return relax.transform.RunCodegen()(mod)


@needs_blas
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
def test_blas_matches_numpy(shape, k_out, transposed, bias, act):
    rng = np.random.default_rng(len(shape) * 100 + k_out)
    k = shape[-1]
    x = (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(k)).astype(np.float32)
    w = rng.standard_normal((k_out, k) if transposed else (k, k_out), dtype=np.float32)
    b = rng.standard_normal((k_out,), dtype=np.float32)
    mod = _dispatch(_linear_module(act, transposed, bias, shape, k_out))
    assert '"relax.call_dps_packed"' in mod.script() and '"relax.matmul"' not in mod.script()
    args = [x, w] + ([b] if bias else [])
    ex, got = _run(mod, *args)
    want = ACT[act](x @ (w.T if transposed else w) + (b if bias else 0))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert ex.native_bindings and not ex.callbacks  # a C kernel, no Python trampoline


@needs_blas
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


@needs_blas
def test_symbolic_batch_and_bound_constants():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((10, 32), dtype=np.float32)
    b = rng.standard_normal((10,), dtype=np.float32)
    mod = _linear_module("relu", True, True, ("n", 32), 10)
    mod = relax.transform.BindParams("main", {"w": w, "b": b})(mod)
    mod = _dispatch(mod)
    text = mod.script()
    assert "relax.call_dps_packed" in text and "relax.constant" in text  # constants passed in
    ex = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(ex, rm.cpu())
    for n in (1, 9, 300):
        x = rng.standard_normal((n, 32), dtype=np.float32)
        np.testing.assert_allclose(
            vm["main"](x).numpy(), np.maximum(x @ w.T + b, 0), rtol=RTOL, atol=ATOL
        )


def test_composites_not_offloaded_compile_with_our_kernels():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 16), dtype=np.float32)
    w = rng.standard_normal((8, 16), dtype=np.float32)
    b = rng.standard_normal((8,), dtype=np.float32)
    for annotate in (False, True):
        mod = relax.transform.FuseOpsByPattern(
            relax.backend.get_patterns_with_prefix("blas"), annotate_codegen=annotate
        )(_linear_module())
        assert "func.call" in mod.script()
        ex, got = _run(mod, x, w, b)  # relax-inline-composites puts the ops back
        np.testing.assert_allclose(got, np.maximum(x @ w.T + b, 0), rtol=RTOL, atol=ATOL)
        assert not ex.native_bindings


@needs_blas
def test_dispatched_call_does_not_enter_python():
    mod = _dispatch(_linear_module())
    ex = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(ex, rm.cpu())
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(s, dtype=np.float32) for s in ((4, 16), (8, 16), (8,))]
    vm["main"](*args)  # warm
    seen = []

    def profile(frame, event, arg):
        if event == "call":
            seen.append(
                frame.f_code.co_qualname
                if hasattr(frame.f_code, "co_qualname")
                else frame.f_code.co_name
            )

    entry = vm["main"]
    sys.setprofile(profile)
    try:
        entry(*args)
    finally:
        sys.setprofile(None)
    assert not any("_Trampoline" in s for s in seen), seen
    assert not any("NativeFunc" in s for s in seen), seen


@needs_blas
def test_tutorial_dispatch_pass_export_and_load(tmp_path):
    """The customize-optimization tutorial with blas in place of cublas, deployed."""

    mod, param_spec = MLPModel().export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})

    @rm.transform.module_pass(opt_level=0, name="BlasDispatch")
    class BlasDispatch:
        def transform_module(self, mod, _ctx):
            if not rm.get_global_func("relax.ext.blas", True):
                raise RuntimeError("BLAS is not enabled.")
            patterns = [relax.backend.get_pattern("blas.matmul_transposed_bias_relu")]
            mod = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=True)(mod)
            return relax.transform.RunCodegen()(mod)

    mod = BlasDispatch()(mod)
    text = mod.script()
    assert (
        '"relax.call_dps_packed"(%x, %fc1_weight, %fc1_bias) '
        '{callee = "fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_blas"}' in text
    )
    assert text.count('"relax.matmul"') == 1  # fc2 is left to the default pipeline
    mod = rm.transform.Sequential([relax.get_pipeline("zero")])(mod)
    ex = relax.build(mod, target="llvm")
    rng = np.random.default_rng(5)
    data = rng.random((1, 784), dtype=np.float32)
    params = [rng.random(p.shape, dtype=np.float32) / 28 for _, p in param_spec]
    w1, b1, w2, b2 = params
    want = np.maximum(data @ w1.T + b1, 0) @ w2.T + b2
    got = relax.VirtualMachine(ex, rm.cpu())["forward"](data, *params).numpy()
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)

    lib = tmp_path / "mlp_blas.so"
    ex.export_library(str(lib))
    np.savez(tmp_path / "io.npz", *params, data=data, want=want)
    out = run_python(
        BLOCK_MLIR
        + f"""
import numpy as np
import relaxmlir as rm
from relaxmlir import runtime
io = np.load({str(tmp_path / "io.npz")!r})
ex = rm.load_module({str(lib)!r})
assert ex.native_bindings and not ex.callbacks
got = runtime.VirtualMachine(ex, rm.cpu())["forward"](io["data"], *[io[f"arr_{{i}}"] for i in range(4)]).numpy()
np.testing.assert_allclose(got, io["want"], rtol={RTOL}, atol={ATOL})
print("ok")
"""
    )
    assert out.strip() == "ok"


def test_missing_blas_library_is_a_clear_error():
    out = run_python(
        """
import os
from relaxmlir import relax
import relaxmlir as rm
assert rm.get_global_func("relax.ext.blas", allow_missing=True) is None
from relaxmlir.relax.backend import blas
try:
    blas.kernel_for("blas.matmul")
    raise SystemExit("no error")
except OSError as exc:
    assert "pip install scipy-openblas32" in str(exc), exc
x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
w = relax.Var("w", relax.TensorStructInfo((3, 4), "float32"))
bb = relax.BlockBuilder()
with bb.function("main", [x, w]):
    with bb.dataflow():
        gv = bb.emit_output(bb.emit(relax.op.matmul(x, w)))
    bb.emit_func_output(gv)
mod = relax.transform.FuseOpsByPattern(relax.backend.get_patterns_with_prefix("blas"), annotate_codegen=True)(bb.get())
try:
    relax.transform.RunCodegen()(mod)
    raise SystemExit("no error")
except ValueError as exc:
    assert "no codegen 'blas' is registered (relax.ext.blas)" in str(exc), exc
print("ok")
""",
        env={**os.environ, "RELAXMLIR_BLAS_LIB": "/nonexistent/libopenblas.so"},
    )
    assert out.strip() == "ok"


@needs_blas
def test_native_func_callable_from_python():
    kernel = blas_backend.kernel_for("blas.matmul_bias_relu")
    rng = np.random.default_rng(6)
    a = rng.standard_normal((5, 3), dtype=np.float32)
    b = rng.standard_normal((3, 4), dtype=np.float32)
    bias = rng.standard_normal((4,), dtype=np.float32)
    out = np.empty((5, 4), np.float32)
    kernel(a, b, bias, out)
    np.testing.assert_allclose(out, np.maximum(a @ b + bias, 0), rtol=RTOL, atol=ATOL)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernel(a, b, bias, np.empty((4, 5), np.float32).T)
    assert libraries.is_loaded("blas")


@needs_blas
def test_customize_opt_example_runs(tmp_path):
    """examples/customize_opt.py end to end (its own numpy comparison is printed)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    lib = tmp_path / "model.so"
    proc = subprocess.run(
        [sys.executable, str(root / "examples" / "customize_opt.py"), "--export", str(lib)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=root,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
        },
    )
    assert proc.returncode == 0, proc.stderr
    diffs = [
        float(line.rsplit(":", 1)[1])
        for line in proc.stdout.splitlines()
        if "max abs difference" in line
    ]
    assert len(diffs) == 2 and max(diffs) < 1e-4, proc.stdout
    assert "relaxmlir_blas_matmul_transposed_bias_relu" in proc.stdout and lib.exists()


def test_blas_loads_with_a_short_thread_timeout_and_leaves_the_environment():
    out = run_python(
        """
import os
from relaxmlir.runtime import libraries
assert "OPENBLAS_THREAD_TIMEOUT" not in os.environ
info = libraries.LIBRARIES["blas"]
assert info.load_env == {"OPENBLAS_THREAD_TIMEOUT": "4"}
if libraries.available("blas"):
    libraries.load("blas")
assert "OPENBLAS_THREAD_TIMEOUT" not in os.environ
print("ok")
""",
        env={k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"},
    )
    assert out.strip() == "ok"


@pytest.mark.skipif(not blas_backend.is_available(), reason="no BLAS library")
def test_codegen_refuses_a_user_pattern_of_another_arity():
    """A user pattern registered under a library's name whose composite takes other inputs than
    the kernel it names (here a plain matmul called `blas.matmul_transposed_bias`): RunCodegen
    says so instead of calling the kernel with missing operands."""
    mod = _linear_module()
    lhs, rhs = dpl.wildcard(), dpl.wildcard()
    pattern = dpl.is_op("relax.matmul")(lhs, dpl.is_op("relax.permute_dims")(rhs))
    fake = relax.backend.FusionPattern(
        "blas.matmul_transposed_bias", pattern, {"lhs": lhs, "rhs": rhs}
    )
    fused = relax.transform.FuseOpsByPattern([fake], annotate_codegen=True)(mod)
    with pytest.raises(ValueError, match=r"has 2 inputs, the kernel takes 3"):
        relax.transform.RunCodegen()(fused)
