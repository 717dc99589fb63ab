"""Operator strategies (`relax.op.strategy`): implementations by priority and condition.

Numerics against numpy / torch in float32 (fixed seeds), rtol=1e-4, atol=1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_fx
from relaxmlir.relax.backend import blas
from relaxmlir.relax.op import strategy

RTOL = ATOL = 1e-4
R = relax.op


@pytest.fixture
def restore_strategies():
    saved = {k: list(v) for k, v in strategy.STRATEGIES.items()}
    yield
    strategy.STRATEGIES.clear()
    strategy.STRATEGIES.update(saved)


def _matmul_module():
    x = relax.Var("x", relax.TensorStructInfo(("n", 16), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((16, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(R.matmul(x, w)))
        bb.emit_func_output(gv)
    return bb.get()


def _run(mod, *args):
    ex = relax.build(mod, "llvm")
    return ex, relax.VirtualMachine(ex, rm.cpu())["main"](*args).numpy()


def test_conv_routes_by_condition_and_matches_torch(capfd, monkeypatch):
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    monkeypatch.setenv("RELAXMLIR_ALTER_LAYOUT", "0")  # the NCHW implementations
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(8, 16, 1), torch.nn.ReLU(), torch.nn.Conv2d(16, 4, 3, padding=1)
    ).eval()
    x = torch.randn(2, 8, 9, 9)
    _, got = _run(from_fx(torch.fx.symbolic_trace(model), [(2, 8, 9, 9)]), x.numpy())
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=RTOL, atol=ATOL)
    err = capfd.readouterr().err
    assert "on llvm: conv2d_nchw_1x1.contraction (plevel 15; condition 1x1 kernel" in err
    assert "on llvm: conv2d_nchw.direct (plevel 10; condition NCHW data; others: " in err
    assert "conv2d_nchw_1x1.contraction (plevel 15, condition false)" in err


def test_blocked_conv_strategies(capfd, monkeypatch):
    """relax.build puts constant-weight convolutions in the channel-blocked layout and takes the
    blocked direct kernel for every window, strided ones included (the schedule splits those by
    phase, `lowering/schedule/phases.py`); the phase-split kernels stay tuning candidates."""
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 1, stride=2),
    ).eval()  # fmt: skip
    x = torch.randn(2, 3, 17, 17)
    mod = from_fx(torch.fx.symbolic_trace(model), [(2, 3, 17, 17)], keep_params_as_input=False)
    _, got = _run(mod, x.numpy())
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=RTOL, atol=ATOL)
    err = capfd.readouterr().err
    assert err.count("on llvm: conv2d_nchwc.direct (plevel 20;") == 3
    assert err.count("conv2d_nchwc.phased (plevel 18)") == 2


def test_user_strategy_at_a_higher_level_wins(restore_strategies, capfd, monkeypatch):
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 16), dtype=np.float32)
    b = rng.standard_normal((16, 8), dtype=np.float32)
    ex, got = _run(_matmul_module(), a, b)
    assert "matmul.packed (plevel 10" in capfd.readouterr().err and not ex.native_bindings

    calls = []

    @strategy.register_strategy("relax.matmul", "llvm", level=20)
    def scaled(call, target):
        s = strategy.OpStrategy()
        calls.append(target.kind)
        s.add_implementation(
            lambda x, w, out_dtype=None: R_twice(x, w), name="user.twice", plevel=1
        )
        return s

    def R_twice(x, w):
        from relaxmlir import te

        k = te.reduce_axis((0, x.shape[1]), name="k")
        return te.compute(
            (x.shape[0], w.shape[1]), lambda i, j: te.sum(2 * x[i, k] * w[k, j], axis=k)
        )

    _, got = _run(_matmul_module(), a, b)
    np.testing.assert_allclose(got, 2 * (a @ b), rtol=RTOL, atol=ATOL)
    assert calls == ["llvm"] and "user.twice (plevel 1; others: none)" in capfd.readouterr().err


@pytest.mark.skipif(not blas.is_available(), reason="no BLAS (pip install scipy-openblas32)")
def test_library_implementation_chosen_by_priority(restore_strategies):
    @strategy.register_strategy("relax.matmul", "llvm", level=20)
    def prefer_blas(call, target):
        s = strategy._matmul_llvm(call, target)
        for impl in s.implementations:
            if impl.name == "matmul.blas":
                impl.plevel = 30
        return s

    rng = np.random.default_rng(2)
    for n in (1, 7, 300):
        a = rng.standard_normal((n, 16), dtype=np.float32)
        b = rng.standard_normal((16, 8), dtype=np.float32)
        ex, got = _run(_matmul_module(), a, b)
        np.testing.assert_allclose(got, a @ b, rtol=RTOL, atol=ATOL)
        assert [f.symbol for f in ex.native_bindings.values()] == ["relaxmlir_blas_matmul"]


def test_custom_legalize_rule_beats_the_strategy():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 16), dtype=np.float32)
    b = rng.standard_normal((16, 8), dtype=np.float32)

    def rule(bb, call):
        from relaxmlir import topi

        return bb.call_te(lambda x, w: topi.multiply(topi.matmul(x, w), 3.0), *call.args)

    mod = relax.transform.LegalizeOps({"relax.matmul": rule})(_matmul_module())
    _, got = _run(mod, a, b)
    np.testing.assert_allclose(got, 3 * (a @ b), rtol=RTOL, atol=ATOL)


def test_bad_strategies_are_clear_errors(restore_strategies):
    s = strategy.OpStrategy()
    with pytest.raises(ValueError, match="exactly one of compute= or emit="):
        s.add_implementation(name="nothing")
    with pytest.raises(TypeError, match="plevel must be an int"):
        s.add_implementation(lambda x: x, plevel="high")
    with pytest.raises(TypeError, match="is not callable"):
        strategy.register_strategy("relax.matmul", "llvm", 42)

    @strategy.register_strategy("relax.matmul", "llvm", level=50)
    def never(call, target):
        s = strategy.OpStrategy()
        s.add_implementation(
            lambda x, w, out_dtype=None: x, name="never", condition=lambda call: False
        )
        return s

    with pytest.raises(ValueError, match="no implementation of 'relax.matmul' on llvm applies"):
        relax.transform.LegalizeOps()(_matmul_module())


def test_registering_a_strategy_changes_the_cache_key(restore_strategies):
    before = strategy.fingerprint()
    strategy.register_strategy(
        "relax.matmul", "llvm", lambda call, target: strategy.OpStrategy(), level=99
    )
    assert strategy.fingerprint() != before


# -- conv2d as im2col + GEMM, and forcing an implementation by name ---------------------------

IM2COL = {strategy.FORCE_CONFIG: {"relax.nn.conv2d": "conv2d_nchw.im2col"}}


def _conv_module(data_shape, weight_shape, **attrs):
    x = relax.Var("x", relax.TensorStructInfo(data_shape, "float32"))
    w = relax.Var("w", relax.TensorStructInfo(weight_shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(R.nn.conv2d(x, w, **attrs)))
        bb.emit_func_output(gv)
    return bb.get()


def _torch_conv(x, w, strides=1, padding=0, dilation=1, groups=1):
    """torch's conv2d with relax's (top, left, bottom, right) padding."""
    pad = (padding,) * 4 if isinstance(padding, int) else tuple(padding)
    pad = pad * 2 if len(pad) == 2 else pad
    t = torch.nn.functional.pad(torch.from_numpy(x), (pad[1], pad[3], pad[0], pad[2]))
    return torch.nn.functional.conv2d(
        t, torch.from_numpy(w), stride=strides, dilation=dilation, groups=groups
    ).numpy()


def _check_im2col(data_shape, weight_shape, capfd, **attrs):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(data_shape, dtype=np.float32)
    w = rng.standard_normal(weight_shape, dtype=np.float32)
    with rm.transform.PassContext(config=IM2COL):
        _, got = _run(_conv_module(data_shape, weight_shape, **attrs), x, w)
    np.testing.assert_allclose(got, _torch_conv(x, w, **attrs), rtol=RTOL, atol=ATOL)
    err = capfd.readouterr().err
    assert "on llvm: conv2d_nchw.im2col (plevel 8; forced by PassContext config" in err, err
    assert "relax.matmul at" in err  # the GEMM went through the matmul strategy


IM2COL_CASES = [
    ((1, 3, 9, 11), (5, 3, 3, 3), dict(strides=2, padding=1)),
    ((2, 8, 10, 7), (4, 8, 3, 2), dict(strides=(1, 2), padding=(1, 0, 2, 1), dilation=(2, 1))),
    ((3, 4, 6, 5), (6, 4, 1, 1), {}),
    ((1, 16, 13, 13), (8, 16, 5, 5), dict(padding=2, dilation=2)),
    ((2, 5, 8, 9), (7, 5, 7, 7), dict(strides=3, padding=3)),
]


@pytest.mark.parametrize("data_shape, weight_shape, attrs", IM2COL_CASES)
def test_im2col_conv_matches_torch(data_shape, weight_shape, attrs, capfd, monkeypatch):
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    _check_im2col(data_shape, weight_shape, capfd, **attrs)


@pytest.mark.slow
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("kernel", [1, 3, 4])
@pytest.mark.parametrize("padding", [0, 1, (2, 0, 1, 3)])
@pytest.mark.parametrize("dilation", [1, 2])
def test_im2col_conv_sweep(stride, kernel, padding, dilation, capfd, monkeypatch):
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    _check_im2col(
        (2, 6, 11, 10), (5, 6, kernel, kernel), capfd,
        strides=stride, padding=padding, dilation=dilation,
    )  # fmt: skip


def test_im2col_in_a_model_with_constant_weights(capfd, monkeypatch):
    """Weights bound as constants (their reshape folded at compile time), the GEMM followed by
    bias and relu (fused after the reshape back to NCHW)."""
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    monkeypatch.setenv("RELAXMLIR_ALTER_LAYOUT", "0")  # the NCHW implementations
    torch.manual_seed(5)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 3)
    ).eval()
    x = torch.randn(2, 3, 15, 15)
    mod = from_fx(torch.fx.symbolic_trace(model), [(2, 3, 15, 15)], keep_params_as_input=False)
    with rm.transform.PassContext(config=IM2COL):
        _, got = _run(mod, x.numpy())
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=RTOL, atol=ATOL)
    assert capfd.readouterr().err.count("on llvm: conv2d_nchw.im2col (plevel 8; forced") == 2


class _Patches(torch.nn.Module):
    """Non-overlapping windows: a ViT patch embedding, and 3x3 windows 4 pixels apart."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Conv2d(3, 32, 4, stride=4)
        self.sparse = torch.nn.Conv2d(3, 8, 3, stride=4, padding=1)

    def forward(self, x):
        return self.embed(x).flatten(1).sum(1, keepdim=True) + self.sparse(x).flatten(1)


def test_patch_embedding_is_im2col_and_matches_torch(capfd, monkeypatch):
    """Windows that do not overlap (strides >= kernel) go to im2col + matmul by default, in
    NCHW (relax-alter-op-layout leaves them): the product's K is C x KH x KW instead of one
    phase kernel per tap with K = C (ViT-B/16's 16x16 patches built for 16 s)."""
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    torch.manual_seed(6)
    model = _Patches().eval()
    x = torch.randn(2, 3, 16, 17)
    mod = from_fx(torch.fx.symbolic_trace(model), [(2, 3, 16, 17)], keep_params_as_input=False)
    with rm.target.Target("llvm"):
        altered = relax.transform.AlterOpLayout()(mod)
    assert "relax.layout_transform" not in str(altered)
    _, got = _run(mod, x.numpy())
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=RTOL, atol=ATOL)
    err = capfd.readouterr().err
    assert err.count("on llvm: conv2d_nchw.patches (plevel 17; condition NCHW data, one group") == 2


def test_forced_choices_and_their_errors(capfd, monkeypatch):
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 4, 6, 6), dtype=np.float32)
    w = rng.standard_normal((4, 2, 3, 3), dtype=np.float32)
    # A grouped conv: im2col's condition is false, the usual choice stands (and says why).
    with rm.transform.PassContext(config=IM2COL):
        _, got = _run(_conv_module(x.shape, w.shape, groups=2), x, w)
    np.testing.assert_allclose(got, _torch_conv(x, w, groups=2), rtol=RTOL, atol=ATOL)
    err = capfd.readouterr().err
    assert "direct (plevel 10; forced conv2d_nchw.im2col: condition false; condition NCHW" in err
    mod = _conv_module(x.shape, (4, 4, 3, 3))
    bad = {strategy.FORCE_CONFIG: {"relax.nn.conv2d": "conv2d_nchw.fft"}}
    with rm.transform.PassContext(config=bad), pytest.raises(ValueError, match="no such impl"):
        relax.transform.LegalizeOps()(mod)
    with rm.transform.PassContext(config={strategy.FORCE_CONFIG: ["im2col"]}):
        with pytest.raises(TypeError, match="must map op names to implementation names"):
            relax.transform.LegalizeOps()(mod)


def test_forcing_changes_the_cache_key():
    before = strategy.fingerprint()
    with rm.transform.PassContext(config=IM2COL):
        assert strategy.fingerprint() != before
    assert strategy.fingerprint() == before
