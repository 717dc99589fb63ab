"""Convolutions in both layouts against torch: NCHW, and the channel-blocked layout that
relax.build picks for constant weights (relax-alter-op-layout; NCHW16c on AVX-512, NCHW8c on
AVX2), over kernel sizes, strides, padding and channel counts, with batch norm folding, residual
adds and pooling after them (rtol = atol = 1e-4, fixed seeds)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from scheduled_build import build_scheduled

import relaxmlir as rm
from relaxmlir import relax, te
from relaxmlir.frontend import from_exported_program, from_fx

RTOL = ATOL = 1e-4

# (in channels, out channels, kernel, stride, padding, spatial size)
SHAPES = [
    (3, 16, 7, 2, 3, 23),  # a stem: 3 channels, 7x7 / 2
    (16, 32, 3, 1, 1, 9),
    (32, 32, 3, 2, 1, 9),  # strided 3x3: phase split
    (32, 64, 1, 2, 0, 10),  # strided 1x1 (a downsample)
    (16, 16, 1, 1, 0, 7),
    (8, 16, 3, 1, 0, 11),  # 8 input channels: one block of 8
    (32, 32, 5, 1, 2, 6),
    (24, 24, 3, 1, 1, 8),  # 24 channels: blocks of 8 (half a vector on AVX-512)
    (24, 48, 1, 1, 0, 7),  # NCHW8c in, NCHW16c out on AVX-512
    (48, 24, 3, 2, 1, 9),  # and back, strided
    (20, 20, 3, 1, 1, 6),  # 20 channels divide into neither: stays NCHW
]


def _model(cin, cout, k, stride, pad):
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(cin, cout, k, stride, pad, bias=False),
        torch.nn.BatchNorm2d(cout),
        torch.nn.ReLU(),
    ).eval()
    bn = m[1]
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    return m


# AVX-512's 16-lane blocks (NCHW16c; skipped where this machine cannot run them: the pool's
# Zen 3), and AVX2's 8-lane blocks forced on any x86-64 host that runs them (the code the AVX2
# machines of the pool get).
LAYOUTS = {"blocked": "llvm -mcpu=x86-64-v4", "blocked-avx2": "llvm -mcpu=x86-64-v3", "nchw": "llvm"}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "c{}o{}k{}s{}p{}h{}".format(*s))
def test_conv_layouts_match_torch(shape, layout, monkeypatch):
    cin, cout, k, stride, pad, size = shape
    target = _target_or_skip(layout)
    if layout == "nchw":
        monkeypatch.setenv("RELAXMLIR_ALTER_LAYOUT", "0")
    model = _model(cin, cout, k, stride, pad)
    x = torch.randn(2, cin, size, size)
    mod = from_fx(
        torch.fx.symbolic_trace(model), [(2, cin, size, size)], keep_params_as_input=False
    )
    if layout.startswith("blocked"):
        lanes = target.vector_bits // 32
        with target:
            altered = relax.transform.AlterOpLayout()(relax.transform.FoldBatchnormToConv2D()(mod))
        # the output in blocks of a whole vector, else of half of one (8 lanes), else NCHW
        block = next((b for b in (lanes, lanes // 2) if b >= 8 and cout % b == 0), None)
        if block is None:
            assert "relax.layout_transform" not in str(altered)
        else:
            assert f'dst_layout = "NCHW", src_layout = "NCHW{block}c"' in str(altered)
    vm = relax.VirtualMachine(relax.build(mod, target), rm.cpu())
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(vm["main"](x.numpy()).numpy(), want, rtol=RTOL, atol=ATOL)


STRIDED = [s for s in SHAPES if s[3] > 1]


@pytest.mark.parametrize("impl", ["conv2d_nchwc.phases", "conv2d_nchwc.phased"])
@pytest.mark.parametrize("layout", ["blocked", "blocked-avx2"])
@pytest.mark.parametrize("shape", STRIDED, ids=lambda s: "c{}o{}k{}s{}p{}h{}".format(*s))
def test_strided_conv_per_phase_matches_torch(shape, layout, impl, capfd, monkeypatch):
    """The phase-split tuning candidates, forced, against torch: `conv2d_nchwc.phases` (one
    convolution per input phase with only its taps, the constant weight sliced at compile time)
    and `conv2d_nchwc.phased` (the phases' taps zero-padded to one window). The default, the
    direct kernel split by phase in its schedule, is `test_conv_layouts_match_torch`."""
    from relaxmlir.relax.op import strategy

    cin, cout, k, stride, pad, size = shape
    target = _target_or_skip(layout)
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    model = _model(cin, cout, k, stride, pad)
    x = torch.randn(2, cin, size, size)
    mod = from_fx(
        torch.fx.symbolic_trace(model), [(2, cin, size, size)], keep_params_as_input=False
    )
    force = {strategy.FORCE_CONFIG: {"relax.nn.conv2d": impl}}
    with rm.transform.PassContext(config=force):
        vm = relax.VirtualMachine(relax.build(mod, target), rm.cpu())
    lanes = target.vector_bits // 32
    if cin % lanes == 0 and cout % lanes == 0:  # blocked, so the strategy applied
        assert (
            f"{impl} (plevel {19 if impl.endswith('phases') else 18}; forced"
            in capfd.readouterr().err
        )
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(vm["main"](x.numpy()).numpy(), want, rtol=RTOL, atol=ATOL)


def test_strided_conv_per_phase_with_a_weight_argument(capfd, monkeypatch):
    """The same with the blocked weight a function argument (its taps sliced by a kernel)."""
    from relaxmlir.relax.op import strategy

    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 9, 9, 16), dtype=np.float32)
    w = rng.standard_normal((2, 2, 3, 3, 16, 16), dtype=np.float32) / 20
    bb = relax.BlockBuilder()
    xv = relax.Var("x", relax.TensorStructInfo(x.shape, "float32"))
    wv = relax.Var("w", relax.TensorStructInfo(w.shape, "float32"))
    with bb.function("main", [xv, wv]):
        y = bb.emit(
            relax.op.nn.conv2d(
                xv, wv, strides=2, padding=1, data_layout="NCHW16c", kernel_layout="OIHW16i16o"
            )
        )
        bb.emit_func_output(y)
    force = {strategy.FORCE_CONFIG: {"relax.nn.conv2d": "conv2d_nchwc.phases"}}
    with rm.transform.PassContext(config=force):
        vm = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())
    # unblocked: x (N, C, H, W), w (O, I, KH, KW)
    xt = torch.from_numpy(x.transpose(0, 1, 4, 2, 3).reshape(1, 32, 9, 9))
    wt = torch.from_numpy(w.transpose(0, 5, 1, 4, 2, 3).reshape(32, 32, 3, 3))
    want = torch.nn.functional.conv2d(xt, wt, stride=2, padding=1).numpy()
    assert "conv2d_nchwc.phases (plevel 19; forced" in capfd.readouterr().err
    got = vm["main"](x, w).numpy()  # (1, 2, 5, 5, 16)
    got = got.transpose(0, 1, 4, 2, 3).reshape(1, 32, 5, 5)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


class _Block(torch.nn.Module):
    """conv -> bn -> relu -> max pool -> conv -> bn -> + identity -> relu -> global pool."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(16, 32, 3, 1, 1)
        self.b1 = torch.nn.BatchNorm2d(32)
        self.c2 = torch.nn.Conv2d(32, 32, 3, 1, 1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(32)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.b1(self.c1(x))), 3, 2, 1)
        y = torch.relu(self.b2(self.c2(y)) + y)
        return torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)


def test_blocked_region_matches_torch_and_keeps_its_layout():
    torch.manual_seed(0)
    model = _Block().eval()
    x = torch.randn(1, 16, 12, 12)
    mod = from_fx(torch.fx.symbolic_trace(model), [(1, 16, 12, 12)], keep_params_as_input=False)
    with rm.target.Target("llvm -mcpu=x86-64-v4"):
        altered = relax.transform.AlterOpLayout()(relax.transform.FoldBatchnormToConv2D()(mod))
    text = str(altered)
    # in at the first convolution, out after the global pool: nothing in between
    assert text.count('"relax.layout_transform"') == 2
    assert "relax.nn_batch_norm" not in text and 'layout = "NCHW16c"' in text
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(vm["main"](x.numpy()).numpy(), want, rtol=RTOL, atol=ATOL)


def _runnable(target: rm.target.Target) -> rm.target.Target:
    """`target`, or a skip where this machine cannot run its code."""
    if target.runs_on_host():
        pytest.skip(f"this machine lacks {target.runs_on_host()}")
    return target


def _target_or_skip(layout: str) -> rm.target.Target:
    return _runnable(rm.target.Target(LAYOUTS[layout]))


def _avx512(threads: int) -> rm.target.Target:
    return rm.target.Target({"kind": "llvm", "mcpu": "x86-64-v4", "num-cores": threads})


def _altered(make, shape, target):
    """(model, input, module, the module after AlterOpLayout for `target` as text) of the
    seeded `make()` traced with an input of `shape`."""
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(shape)
    mod = from_fx(torch.fx.symbolic_trace(model), [shape], keep_params_as_input=False)
    with target:
        text = str(relax.transform.AlterOpLayout()(mod))
    return model, x, mod, text


def _check_against_torch(model, x, mod, target) -> None:
    vm = relax.VirtualMachine(relax.build(mod, target), rm.cpu())
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(vm["main"](x.numpy()).numpy(), want, rtol=RTOL, atol=ATOL)


# (channels, channel multiplier, kernel, stride, padding, spatial size): depthwise convolutions
DEPTHWISE = [
    (32, 1, 3, 1, 1, 9),  # MobileNet's 3x3
    (32, 1, 3, 2, 1, 10),  # strided: the schedule splits the window by phase
    (48, 1, 5, 2, 2, 11),  # 48 = 3 blocks of 16 (6 of 8 on AVX2)
    (16, 1, 3, 1, 0, 7),  # no padding
    (16, 2, 3, 1, 1, 8),  # two filters per channel: stays NCHW
]


class _Depthwise(torch.nn.Module):
    """MobileNetV2's inverted residual: 1x1 expand, depthwise 3x3, 1x1 project, ReLU6."""

    def __init__(self, c, mult, k, stride, pad):
        super().__init__()
        self.dw = torch.nn.Conv2d(c, c * mult, k, stride, pad, groups=c, bias=False)
        self.bn = torch.nn.BatchNorm2d(c * mult)
        self.pw = torch.nn.Conv2d(c * mult, 16, 1)

    def forward(self, x):
        return self.pw(torch.nn.functional.relu6(self.bn(self.dw(x))))


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("shape", DEPTHWISE, ids=lambda s: "c{}m{}k{}s{}p{}h{}".format(*s))
def test_depthwise_conv_layouts_match_torch(shape, layout, monkeypatch):
    """A depthwise convolution (groups = channels) takes the blocked data layout with an
    OIHW1i<b>o kernel, its batch norm folded and its bias and ReLU6 fused after it; two
    filters per channel stay in NCHW."""
    c, mult, k, stride, pad, size = shape
    target = _target_or_skip(layout)
    if layout == "nchw":
        monkeypatch.setenv("RELAXMLIR_ALTER_LAYOUT", "0")
    torch.manual_seed(0)
    model = _Depthwise(c, mult, k, stride, pad).eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
        model.bn.weight.uniform_(0.5, 1.5)
        model.bn.bias.uniform_(-1, 1)
    x = torch.randn(2, c, size, size)
    mod = from_fx(torch.fx.symbolic_trace(model), [(2, c, size, size)], keep_params_as_input=False)
    if layout.startswith("blocked"):
        lanes = target.vector_bits // 32
        with target:
            folded = relax.transform.FoldBatchnormToConv2D()(mod)
            text = str(relax.transform.AlterOpLayout()(folded))
        assert (f'kernel_layout = "OIHW1i{lanes}o"' in text) == (mult == 1)
    _check_against_torch(model, x, mod, target)


def test_blocked_conv_op_checks_its_groups_and_kernel():
    """`relax.nn.conv2d` in a blocked layout takes groups = 1, groups = channels with one
    filter per channel in an OIHW1i<b>o kernel, or groups of whole channel blocks, in and out,
    in an OIHW<b>i<bo>o kernel; anything else is refused by name."""
    x = relax.Var("x", relax.TensorStructInfo((1, 2, 8, 8, 16), "float32"))
    k = relax.Var("k", relax.TensorStructInfo((2, 1, 3, 3, 1, 16), "float32"))
    y = relax.op.nn.conv2d(
        x, k, padding=1, groups=32, data_layout="NCHW16c", kernel_layout="OIHW1i16o"
    )
    assert list(y.struct_info.shape) == [1, 2, 8, 8, 16]
    blocks = relax.Var("kb", relax.TensorStructInfo((2, 1, 3, 3, 16, 16), "float32"))
    y = relax.op.nn.conv2d(
        x, blocks, strides=2, padding=1, groups=2, data_layout="NCHW16c", kernel_layout="OIHW16i16o"
    )
    assert list(y.struct_info.shape) == [1, 2, 4, 4, 16]
    # ResNeXt's last stage: groups of 2 blocks in, 1 block out (an 8-block NCHW8c result)
    x4 = relax.Var("x4", relax.TensorStructInfo((1, 4, 8, 8, 16), "float32"))
    wide = relax.Var("kw", relax.TensorStructInfo((4, 2, 3, 3, 16, 8), "float32"))
    y = relax.op.nn.conv2d(x4, wide, padding=1, groups=2, data_layout="NCHW16c", kernel_layout="OIHW16i8o")
    assert list(y.struct_info.shape) == [1, 4, 8, 8, 8]
    with pytest.raises(NotImplementedError, match="groups must be 1, the channel count"):
        relax.op.nn.conv2d(x, k, groups=16, data_layout="NCHW16c", kernel_layout="OIHW1i16o")
    with pytest.raises(NotImplementedError, match="groups=32 does not divide the 2 input"):
        relax.op.nn.conv2d(x, blocks, groups=32, data_layout="NCHW16c", kernel_layout="OIHW16i16o")
    with pytest.raises(ValueError, match="groups=2 of the 4 channel blocks .* need a weight of 2"):
        relax.op.nn.conv2d(x4, blocks, groups=2, data_layout="NCHW16c", kernel_layout="OIHW16i16o")
    with pytest.raises(NotImplementedError, match="needs kernel_layout 'OIHW1i16o or OIHW16i<o>o'"):
        relax.op.nn.conv2d(x, k, groups=32, data_layout="NCHW16c", kernel_layout="OIHW8i16o")


class _SqueezeExcite(torch.nn.Module):
    """EfficientNet's squeeze-excite around a convolution, then a pooled head: a mean over H
    and W with and without keepdim, and a multiply by a per-channel [N, C, 1, 1] scale."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.reduce = torch.nn.Conv2d(32, 4, 1)
        self.expand = torch.nn.Conv2d(4, 32, 1)

    def forward(self, x):
        y = torch.nn.functional.silu(self.conv(x))
        s = y.mean((2, 3), keepdim=True)
        s = torch.sigmoid(self.expand(torch.nn.functional.silu(self.reduce(s))))
        return (y * s).mean((-2, -1))


@pytest.mark.parametrize("layout", ["blocked", "blocked-avx2"])
def test_squeeze_excite_stays_blocked(layout):
    """The spatial means and the excitation's multiply run on the blocked tensor: the only
    transforms back to NCHW are of [N, C, 1, 1] results (the excitation's 4-channel conv stays
    in NCHW), none of the [N, C, H, W] activations."""
    target = _target_or_skip(layout)
    model, x, mod, text = _altered(_SqueezeExcite, (2, 16, 9, 10), target)
    backs = [line for line in text.splitlines() if 'dst_layout = "NCHW", src_layout' in line]
    assert backs and all(line.endswith("x1x1xf32>") for line in backs), backs
    multiply = text.split('"relax.multiply"')[1].split("\n")[0]
    assert f"x9x10x{target.vector_bits // 32}xf32" in multiply, multiply  # blocked
    _check_against_torch(model, x, mod, target)


class _GroupedAndConv1d(torch.nn.Module):
    """wav2vec2's shapes, small: conv1d with stride 2 (a [1, 2] stride as a conv2d over H = 1),
    and a grouped conv1d with a long window (4 groups of 32 channels)."""

    def __init__(self):
        super().__init__()
        self.down = torch.nn.Conv1d(16, 128, 3, stride=2)
        self.grouped = torch.nn.Conv1d(128, 128, 16, padding=8, groups=4)
        self.grouped2d = torch.nn.Conv2d(128, 64, 3, padding=1, groups=2)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.down(x))
        y = y + torch.nn.functional.gelu(self.grouped(y))[:, :, :-1]
        return self.grouped2d(y.unsqueeze(2).expand(-1, -1, 3, -1))


@pytest.mark.parametrize("layout", ["blocked", "blocked-avx2", "nchw"])
def test_grouped_and_strided_conv1d_match_torch(layout, monkeypatch):
    """A grouped convolution whose groups divide into channel blocks runs as one blocked
    grouped convolution (not one per group, on a slice of the input's blocks each,
    concatenated); a conv1d with a stride is blocked too (unequal strides once it is a
    conv2d)."""
    target = _target_or_skip(layout)
    if layout == "nchw":
        monkeypatch.setenv("RELAXMLIR_ALTER_LAYOUT", "0")
    torch.manual_seed(0)
    model = _GroupedAndConv1d().eval()
    x = torch.randn(2, 16, 41)
    ep = torch.export.export(model, (x,))
    mod = from_exported_program(ep)
    if layout != "nchw":
        with target:
            text = str(relax.transform.AlterOpLayout()(mod))
        assert 'data_layout = "NCHW"' not in text  # every convolution blocked
        assert text.count('"relax.nn_conv2d"') == 3, text  # the groups in one each
        assert '"relax.concat"' not in text and "{axes = [1], begin = [" not in text
    _check_against_torch(model, x, mod, target)


class _Skip(torch.nn.Module):
    """A UNet-style skip connection: two convolutions' outputs concatenated along the channels
    (also at a negative axis) and fed to a third."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.b = torch.nn.Conv2d(8, 32, 1)
        self.fuse = torch.nn.Conv2d(48 + 16, 16, 3, padding=1)

    def forward(self, x):
        a = torch.relu(self.a(x))
        y = torch.cat([a, self.b(x)], dim=1)
        return self.fuse(torch.cat([y, a], dim=-3))


@pytest.mark.parametrize("layout", ["blocked", "blocked-avx2"])
def test_channel_concat_stays_blocked(layout):
    """A concat along the channels of blocked tensors concatenates their channel blocks: the
    graph enters the blocked layout once and leaves it once."""
    target = _target_or_skip(layout)
    model, x, mod, text = _altered(_Skip, (2, 8, 10, 9), target)
    assert text.count('"relax.layout_transform"') == 2, text
    assert text.count("relax.concat") == 2 and "axis = 1 : i64" in text
    _check_against_torch(model, x, mod, target)


def test_layout_transform_op_and_errors():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2, 32, 3, 5), "float32"))
    with bb.function("main", [x]):
        y = bb.emit(relax.op.layout_transform(x, "NCHW", "NCHW16c"))
        z = bb.emit(relax.op.layout_transform(y, "NCHW16c", "NCHW8c"))
        bb.emit_func_output(z)
    vm = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())
    a = np.random.default_rng(0).standard_normal((2, 32, 3, 5), dtype=np.float32)
    want = a.reshape(2, 4, 8, 3, 5).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(vm["main"](a).numpy(), want)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):  # and back to the larger block
        y = bb.emit(relax.op.layout_transform(x, "NCHW", "NCHW8c"))
        bb.emit_func_output(bb.emit(relax.op.layout_transform(y, "NCHW8c", "NCHW16c")))
    vm = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())
    want = a.reshape(2, 2, 16, 3, 5).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(vm["main"](a).numpy(), want)
    with pytest.raises(ValueError, match="do not divide into blocks of 16"):
        relax.op.layout_transform(
            relax.Var("w", relax.TensorStructInfo((1, 24, 2, 2), "float32")), "NCHW", "NCHW16c"
        )
    with pytest.raises(ValueError, match="unsupported data layout"):
        relax.op.layout_transform(x, "NHWC", "NCHW16c")
    with pytest.raises(ValueError, match="do not match"):  # NCHW8c data, a 16-block kernel
        relax.op.nn.conv2d(
            y, relax.Var("k", relax.TensorStructInfo((2, 2, 3, 3, 16, 16), "float32")), groups=2,
            data_layout="NCHW16c", kernel_layout="OIHW16i16o",
        )  # fmt: skip


@pytest.mark.parametrize(
    ("kernel", "stride", "pad", "dilation", "padded"),
    [
        (3, 2, 1, 1, False),  # ResNet's stem pool: taps past an edge read the edge
        (2, 1, 1, 1, False),
        (3, 1, 0, 1, False),
        (3, 2, 1, 2, True),  # dilated taps skip the edge: a -inf padded copy, as before
    ],
)
def test_blocked_max_pool_reads_the_edge_instead_of_a_padded_copy(
    kernel, stride, pad, dilation, padded
):
    """Max pooling in the channel-blocked layout clamps taps that fall past an edge to the edge
    (contiguous taps keep the edge in the window, so the maximum is unchanged) instead of
    copying its input into a -inf padded buffer (ResNet-18 b8 on Zen 5: 2 threads 72-76 ->
    66.5-67.4 ms); dilated windows keep the padded copy. Against torch on odd sizes."""
    from relaxmlir.topi.nn.blocked import pool2d_nchwc

    data = te.placeholder((2, 2, 11, 13, 16), "float32", name="data")
    out = pool2d_nchwc(
        data, (kernel, kernel), (stride, stride), (dilation, dilation), (pad,) * 4, "max"
    )
    func = te.create_prim_func([data, out])
    assert ("0xFF800000" in str(func)) == padded  # the -inf of a padded copy
    x = np.random.default_rng(0).standard_normal((2, 2, 11, 13, 16)).astype("float32")
    nchw = torch.from_numpy(x.transpose(0, 1, 4, 2, 3).reshape(2, 32, 11, 13))
    want = torch.nn.functional.max_pool2d(nchw, kernel, stride, pad, dilation).numpy()
    n, _, oh, ow = want.shape
    got = np.zeros((n, 2, oh, ow, 16), np.float32)
    rm.build(func, target="llvm")["main"](x, got)  # destination passing
    np.testing.assert_array_equal(got.transpose(0, 1, 4, 2, 3).reshape(want.shape), want)


def _pool_rules(func, target: str) -> list[str]:
    """The rules relax-schedule-cpu gives `func` (a te PrimFunc) for `target`, one thread."""
    from mlir import ir

    from lowering.schedule import ScheduleOptions
    from lowering.schedule.driver import schedule_function

    with ir.Context():
        module = ir.Module.parse(str(func))
        opts = ScheduleOptions(target=rm.target.Target(target), threads=1, strict=True)
        return schedule_function(module.body.operations[0].operation, opts)


@pytest.mark.parametrize(("target", "block"), [("llvm", 16), ("llvm -mcpu=x86-64-v3", 8)])
@pytest.mark.parametrize("to_nchw", [False, True])
def test_blocked_max_pool_is_vectorized_along_the_channel_block(target, block, to_nchw):
    """The clamped taps are extracts at computed rows and columns; the gather rule reads each
    as one vector along the channel block (on AVX2 LLVM had left the 8-lane loop scalar: 4.3
    -> 0.08 ms for ResNet-18's stem pool). Fused with the copy back to NCHW (LeNet's last pool,
    one channel block) the channel loop is moved innermost. NaNs propagate as in torch; the
    result is compared exactly."""
    from relaxmlir.topi.nn.blocked import pool2d_nchwc

    blocks = 1 if to_nchw else 2
    data = te.placeholder((2, blocks, 11, 13, block), "float32", name="data")
    out = pool2d_nchwc(data, (3, 3), (2, 2), (1, 1), (1,) * 4, "max")
    if to_nchw:  # as FuseTIR inlines the pool into the layout change: one op

        def tap(i, c, y, x, ty, tx):
            row = te.min(te.max(y * 2 + ty - 1, 0), 10)
            return data[i, 0, row, te.min(te.max(x * 2 + tx - 1, 0), 12), c]

        def body(i, c, y, x):
            value = tap(i, c, y, x, 0, 0)
            for ty, tx in [(ty, tx) for ty in range(3) for tx in range(3)][1:]:
                value = te.max(value, tap(i, c, y, x, ty, tx))
            return value

        out = te.compute((2, block, 6, 7), body, name="pool_to_nchw")
    func = te.create_prim_func([data, out])
    assert _pool_rules(func, target) == [f"gather-{block}"]
    x = np.random.default_rng(0).standard_normal((2, blocks, 11, 13, block)).astype("float32")
    x[0, 0, 4, 5, 3] = np.nan
    nchw = torch.from_numpy(x.transpose(0, 1, 4, 2, 3).reshape(2, blocks * block, 11, 13))
    want = torch.nn.functional.max_pool2d(nchw, 3, 2, 1).numpy()
    assert np.isnan(want).any()
    got = np.zeros(want.shape if to_nchw else (2, blocks, 6, 7, block), np.float32)
    rm.build(func, target=target)["main"](x, got)
    if not to_nchw:
        got = got.transpose(0, 1, 4, 2, 3).reshape(want.shape)
    np.testing.assert_array_equal(got, want)


def _inverted_residual(size: int):
    """MobileNetV2's inverted residual at `size` x `size`: 1x1 expansion 24 -> 96 + BN + ReLU6,
    depthwise 3x3 + BN + ReLU6, 1x1 projection 96 -> 24 + BN, the residual add; then a
    strided depthwise 3x3 / 2 (four phase convolutions) + BN + ReLU6."""
    torch.manual_seed(0)
    nn = torch.nn

    def conv_bn(cin, cout, k, stride=1, groups=1, act=True):
        layers = [
            nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        return nn.Sequential(*layers, *([nn.ReLU6()] if act else []))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                conv_bn(24, 96, 1), conv_bn(96, 96, 3, groups=96), conv_bn(96, 24, 1, act=False)
            )
            self.down = conv_bn(24, 24, 3, 2, groups=24)

        def forward(self, x):
            return self.down(x + self.body(x))

    model = Block().eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.bias.uniform_(-1, 1)
    return model


def _scheduled(mod, target) -> str:
    """`mod` (a from_fx module) through relax.build's stages up to the CPU schedules, as text."""
    from lowering.pipelines import target_pipeline
    from lowering.registry import run_pipeline
    from relaxmlir.scope import scope

    with target:
        mod = relax.get_pipeline("zero")(mod)
    with scope():
        stages = target_pipeline(target, ["graph", "layout", "schedule"])
        run_pipeline(mod.module, "builtin.module(" + ",".join(stages) + ")")
    return str(mod.module)


def _rules(scheduled: str) -> dict[str, list[str]]:
    """The CPU rules of each kernel in a scheduled module's text."""
    return {
        name: re.findall(r'"([^"]+)"', rules)
        for name, rules in re.findall(r"@(\w+)\(.*relax\.schedule = \[([^\]]*)\]", scheduled)
    }


def _built_rules(mod, target):
    """relax.build(mod, target) and the CPU rules each kernel got in that build."""
    ex, text = build_scheduled(mod, target, lambda m: m.operation.get_asm(large_elements_limit=4))
    return ex, _rules(text)


def _checked_rules(model, x, mod, target) -> dict[str, list[str]]:
    """The CPU rules each kernel of `mod` (a from_fx module) gets for `target`, from the build
    that is then checked against torch eager as `_check_against_torch` does (one lowering
    for both)."""
    ex, rules = _built_rules(mod, target)
    vm = relax.VirtualMachine(ex, rm.cpu())
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(vm["main"](x.numpy()).numpy(), want, rtol=RTOL, atol=ATOL)
    return rules


def _epilogue_check(model, shape, target):
    """Build `model` for `target`: its kernels' CPU rules, after checking it against torch
    eager (rtol = atol = 1e-4)."""
    mod = from_fx(torch.fx.symbolic_trace(model), [shape], keep_params_as_input=False)
    rules = _checked_rules(model, torch.randn(shape), mod, target)
    return {name: r for name, r in rules.items() if "conv" in name}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", [14, 7])
def test_conv_epilogues_run_on_the_register_tiles(size, threads):
    """Each blocked conv computes its elementwise epilogue (folded batch norm, ReLU6, the residual
    add) and its earlier stride phases on its own register tiles (`ConvSchedule.absorbs`): the
    epilogue is "fused-into-<conv>", the conv "+epilogue". The last conv's epilogue is the
    transform back to NCHW, a transpose: that one stays an op of its own."""
    target = _runnable(_avx512(threads))
    convs = _epilogue_check(_inverted_residual(size), (1, 24, size, size), target)
    assert len(convs) == 4, convs
    for rules in convs.values():
        if any(r.startswith("transpose") for r in rules):  # the stride-2 depthwise conv: 4 phases
            assert sum(r.startswith("conv-") for r in rules) == 4, rules
            continue
        assert sum(r.endswith("+epilogue") for r in rules) == 1, rules
        assert sum(r.startswith("fused-into-") for r in rules) == 1, rules


def _wide_7x7():
    """160 -> 160 channels 1x1 + BN + ReLU at 7 x 7; the second conv keeps its result blocked."""
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(160, 160, 1, bias=False), nn.BatchNorm2d(160), nn.ReLU(), nn.Conv2d(160, 16, 1)
    ).eval()


@pytest.mark.parametrize("threads", [1, 2])
def test_conv_epilogue_group_falls_apart_on_an_uneven_thread_split(threads):
    """160 -> 160 channels 1x1 at 7 x 7 on two threads: 10 blocks of 16 filters in register tiles
    of 2 and 7 rows split 4 + 3 (the weights outweigh the image, so the filters are tried first:
    5 tiles do not split evenly either). The fused group would zero and tile a dynamic share of
    rows, which does not vectorize: the conv and its epilogue get their own rules."""
    target = _runnable(_avx512(threads))
    convs = _epilogue_check(_wide_7x7(), (1, 160, 7, 7), target)
    rules = next(r for r in convs.values() if len(r) == 2 and "transpose" not in r[-1])
    if threads == 1:
        assert rules == ["conv-2x7x16+epilogue", "fused-into-0"], convs
    else:
        assert rules == ["conv-2x7x16", "elementwise-16"], convs


def test_failed_fused_group_is_scheduled_op_by_op(monkeypatch, recwarn):
    """A fused group whose script fails (here: forced onto the uneven split above) does not
    leave the kernel unscheduled: the driver schedules it again with each op by its own rule,
    without a warning. Numerics against torch eager as before."""
    from lowering.schedule.matmul import ConvPlan

    target = _runnable(_avx512(2))
    monkeypatch.setattr(ConvPlan, "static_tiles", lambda self, info: True)
    monkeypatch.setenv("RELAXMLIR_CACHE", "0")
    convs = _epilogue_check(_wide_7x7(), (1, 160, 7, 7), target)
    assert ["conv-2x7x16", "elementwise-16"] in convs.values(), convs
    assert not [w for w in recwarn if "unscheduled" in str(w.message)]


def test_depthwise_padding_is_written_by_the_producer():
    """A blocked depthwise conv's padding is a call of its own (`emit_depthwise_conv2d_nchwc`),
    which fusion puts at the end of the kernel that makes the image: the expansion conv's
    epilogue writes into the padded buffer's interior and only the border is filled there
    (`pad.raise_pads` on a computed source), so the depthwise kernel reads its padded input as
    it is: no fill and no copy of the image in it. Numerics: the other tests of this file."""
    import re

    target = _avx512(2)
    mod = from_fx(
        torch.fx.symbolic_trace(_inverted_residual(28)),
        [(1, 24, 28, 28)],
        keep_params_as_input=False,
    )
    text = _scheduled(mod, target)
    names = re.findall(r"func.func private @(\w+)\(", text)
    assert "fused_conv2d_add_clip_pad" in names, names  # 1x1 expansion + BN + ReLU6 + padding
    for name in [n for n in names if n.startswith("fused_depthwise")]:
        (body,) = re.findall(rf"func.func private @{name}\(.*?\n  \}}", text, re.DOTALL)
        assert "linalg.copy" not in body, name
    # the stride-1 one (96 channels at 28 x 28) takes its input padded to 30 x 30
    assert re.search(
        r"@fused_depthwise_conv2d_nchwc_add_clip\(%arg0: tensor<1x6x30x30x16xf32>", text
    )


def test_padded_conv_splits_its_image_like_its_rows():
    """On two threads a 3x3 conv over a computed image splits its output rows; the fill under
    its padded image and the copy into the interior split the image's rows too
    (`ConvSchedule.align`), so each thread reads what it wrote (the copy had split channel
    blocks and the fill had run on one thread: a 14x14x384 depthwise layer ran 3x slower on 2
    threads than on 1, before its padding moved to the producer)."""
    import re

    target = _avx512(2)
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(  # the last 1x1 conv keeps the 3x3 conv's result blocked
        nn.Conv2d(32, 64, 1),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(64, 16, 1),
    ).eval()
    mod = from_fx(torch.fx.symbolic_trace(model), [(1, 32, 28, 28)], keep_params_as_input=False)
    text = _scheduled(mod, target)
    body = re.search(r"func.func private @fused_conv2d1_\w*\(.*?\n  \}", text, re.DOTALL).group(0)
    assert "linalg.fill" not in body  # vectorized inside its forall
    splits = re.findall(r"tensor.parallel_insert_slice %\w+ into %\w+\[([^\]]*)\]", body)
    assert len(splits) == 3, splits  # the fill, the copy, the conv with its epilogue
    for offsets in splits:
        assert [o.startswith("%") for o in offsets.split(", ")] == [
            False,
            False,
            True,
            False,
            False,
        ]


class _DenseBlock(torch.nn.Module):
    """DenseNet's block: each layer reads the concat of every feature map before it, through a
    pre-activation batch norm and relu (no convolution before that batch norm to fold into)."""

    def __init__(self, layers: int, cin: int = 16, growth: int = 16):
        super().__init__()
        widths = [cin + growth * i for i in range(layers)]
        self.norms = torch.nn.ModuleList(torch.nn.BatchNorm2d(c) for c in widths)
        self.convs = torch.nn.ModuleList(
            torch.nn.Conv2d(c, growth, 3, padding=1, bias=False) for c in widths
        )
        for bn in self.norms:
            torch.nn.init.uniform_(bn.weight, 0.5, 1.5)
            torch.nn.init.uniform_(bn.bias, -0.5, 0.5)
            torch.nn.init.uniform_(bn.running_mean, -0.5, 0.5)
            torch.nn.init.uniform_(bn.running_var, 0.5, 2.0)

    def forward(self, x):
        features = [x]
        for bn, conv in zip(self.norms, self.convs):
            features.append(conv(torch.relu(bn(torch.cat(features, 1)))))
        return torch.cat(features, 1)


@pytest.mark.parametrize("layout", ["blocked", "blocked-avx2"])
def test_dense_block_concat_and_preactivation_stay_blocked(layout):
    """The pre-activation batch norms become per-channel multiply-adds that the blocked layout
    carries, so the graph changes layout only at its boundaries; every concat (the last of 18
    inputs) is split into one vectorized part per input, none left to loops over branches."""
    target = _target_or_skip(layout)
    model, x, mod, _ = _altered(lambda: _DenseBlock(17), (1, 16, 6, 5), target)
    with target:
        text = str(relax.transform.AlterOpLayout()(relax.transform.FoldBatchnormToConv2D()(mod)))
    assert "relax.nn_batch_norm" not in text, text
    # into the blocked layout only from the input (its first layer's read and its concat's),
    # back only for the result
    into = re.findall(r'"relax.layout_transform"\(%(\w+)\) \{dst_layout = "NCHW\d+c"', text)
    back = re.findall(r'"relax.layout_transform"\(%\w+\) \{dst_layout = "NCHW"', text)
    assert len(back) == 1 and len(into) == 2 and "x" in into, text
    rules = _checked_rules(model, x, mod, target)
    last = max((name for name in rules if "concat" in name), key=lambda n: len(rules[n]))
    # the last concat writes the NCHW result: each part a transposing copy
    assert len([r for r in rules[last] if r.startswith(("elementwise", "transpose"))]) >= 18
    assert "fallback" not in {r for name in rules for r in rules[name]}, rules


class _CeilPools(torch.nn.Module):
    """GoogLeNet's pools: a strided stem pool and an inception branch's 3x3 / 1 pool, both with
    ceil_mode, between convolutions."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(8, 16, 3)
        self.down = torch.nn.MaxPool2d(3, 2, ceil_mode=True)
        self.branch = torch.nn.MaxPool2d(3, 1, 1, ceil_mode=True)
        self.head = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x):
        return self.head(self.branch(self.down(torch.relu(self.stem(x)))))


@pytest.mark.parametrize("layout", ["blocked", "blocked-avx2"])
@pytest.mark.parametrize("size", [14, 15])  # the last strided window past the edge, or not
def test_ceil_mode_max_pool_stays_blocked(layout, size):
    """A ceil_mode max pool with static shapes takes the blocked layout as a floor-mode pool
    whose bottom and right padding cover the last windows (a maximum never picks padding):
    GoogLeNet's pools ran in NCHW between layout transforms on the fallback rule (24 -> 13 ms
    for the model). Exact against torch's windows."""
    target = _target_or_skip(layout)
    model, x, mod, text = _altered(_CeilPools, (1, 8, size, size), target)
    assert text.count('"relax.layout_transform"') == 2, text
    assert "ceil_mode = true" not in text
    _check_against_torch(model, x, mod, target)



@pytest.mark.parametrize(
    ("kernel", "stride", "pad", "include_pad"),
    [
        (3, 1, 1, True),  # Inception-v3's branch pool: the padding counted, one divisor
        (3, 2, 1, False),  # the divisor counts the taps inside the input: per output position
        (2, 2, 0, True),  # DenseNet's transition
    ],
)
def test_blocked_avg_pool_matches_torch(kernel, stride, pad, include_pad):
    """Average pooling in the channel-blocked layout sums the window's taps (a padded copy reads
    zeros past an edge) and divides as torch does: by the window, or with count_include_pad off
    by the part of it inside the input. Odd sizes, against torch."""
    from relaxmlir.topi.nn.blocked import pool2d_nchwc

    data = te.placeholder((2, 2, 11, 13, 16), "float32", name="data")
    out = pool2d_nchwc(
        data, (kernel, kernel), (stride, stride), (1, 1), (pad,) * 4, "avg", include_pad
    )
    func = te.create_prim_func([data, out])
    x = np.random.default_rng(0).standard_normal((2, 2, 11, 13, 16)).astype("float32")
    nchw = torch.from_numpy(x.transpose(0, 1, 4, 2, 3).reshape(2, 32, 11, 13))
    want = torch.nn.functional.avg_pool2d(
        nchw, kernel, stride, pad, count_include_pad=include_pad
    ).numpy()
    n, _, oh, ow = want.shape
    got = np.zeros((n, 2, oh, ow, 16), np.float32)
    rm.build(func, target="llvm")["main"](x, got)  # destination passing
    np.testing.assert_allclose(
        got.transpose(0, 1, 4, 2, 3).reshape(want.shape), want, rtol=1e-6, atol=1e-6
    )


class _AvgPools(torch.nn.Module):
    """Inception-v3's branch pool (3x3 / 1, padding counted) into a 1x1 convolution, then a
    DenseNet transition (1x1 convolution, 2x2 / 2 average pool) and a ceil_mode pool."""

    def __init__(self, ceil_mode: bool, pad: int):
        super().__init__()
        self.stem = torch.nn.Conv2d(8, 16, 3)
        self.branch = torch.nn.AvgPool2d(3, 1, 1)
        self.head = torch.nn.Conv2d(16, 16, 1)
        self.down = torch.nn.AvgPool2d(2, 2, pad, ceil_mode=ceil_mode, count_include_pad=False)
        self.tail = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x):
        y = self.head(self.branch(torch.relu(self.stem(x))))
        return self.tail(self.down(torch.relu(y)))


@pytest.mark.parametrize("layout", ["blocked", "blocked-avx2"])
@pytest.mark.parametrize(
    ("size", "ceil_mode", "pad", "blocked_pools"),
    [
        (14, False, 0, 2),
        (14, True, 0, 2),  # ceil_mode adds no window (12 rows)
        (15, True, 0, 1),  # ceil_mode adds a window (13 rows): its divisor is 2, not 4
        (14, False, 1, 1),  # padding not counted: a divisor per position
    ],
)
def test_avg_pools_stay_blocked(layout, size, ceil_mode, pad, blocked_pools):
    """An average pool between convolutions keeps the blocked layout when it has one divisor,
    the window's (floor-mode windows, padding counted or absent): Inception-v3's branch pools
    and DenseNet's transitions ran in NCHW between two layout transforms, as scalar loops (3.3
    of Inception-v3's 64 ms). Pools with a divisor per position stay in NCHW. Against torch."""
    target = _target_or_skip(layout)
    model, x, mod, text = _altered(lambda: _AvgPools(ceil_mode, pad), (1, 8, size, size), target)
    blocked = re.findall(r'"relax.nn_avg_pool2d"[^\n]*layout = "NCHW\d+c"', text)
    assert len(blocked) == blocked_pools, text
    assert text.count('"relax.layout_transform"') == (2 if blocked_pools == 2 else 4), text
    _check_against_torch(model, x, mod, target)

class _GroupedBlock(torch.nn.Module):
    """RegNet's bottleneck middle: a 3x3 convolution in groups of `width` channels between
    1x1 convolutions, with batch norm and relu."""

    def __init__(self, channels: int, width: int, stride: int):
        super().__init__()
        self.expand = torch.nn.Conv2d(channels, channels, 1)
        self.grouped = torch.nn.Conv2d(
            channels, channels, 3, stride, 1, groups=channels // width, bias=False
        )
        self.bn = torch.nn.BatchNorm2d(channels)
        self.project = torch.nn.Conv2d(channels, 16, 1)

    def forward(self, x):
        return self.project(torch.relu(self.bn(self.grouped(torch.relu(self.expand(x))))))


@pytest.mark.parametrize("layout", ["blocked", "blocked-avx2"])
@pytest.mark.parametrize(
    ("channels", "width", "stride", "size"),
    [(48, 8, 1, 9), (48, 8, 2, 10), (64, 16, 2, 9), (64, 32, 1, 7), (96, 48, 2, 9)],
)
def test_grouped_conv_of_whole_blocks_per_group_is_one_kernel(
    layout, channels, width, stride, size, recwarn
):
    """Groups of whole channel blocks stay one blocked grouped convolution, which the conv rule
    schedules like a dense one (strided: by phase): one block each (a width the layout's block
    equals: 8, or 16 on AVX-512) or several (ResNeXt-50's last stage: 32 channels, 2 blocks of
    16 or 4 of 8, a [N, G, KO, H, W, b] result read as [N, G*KO, H, W, b]; on 2 threads the
    fill under its padded image splits like the image, one axis fewer than the result), instead
    of a convolution per group joined by a concat. Against torch."""
    target = _runnable(rm.target.Target(f"{LAYOUTS[layout]} -num-cores=2"))
    model, x, mod, text = _altered(
        lambda: _GroupedBlock(channels, width, stride), (1, channels, size, size), target
    )
    lanes = 16 if layout == "blocked" else 8
    assert text.count('"relax.nn_conv2d"') == 3, text
    if width < lanes:
        # NCHW8c between NCHW16c convolutions: one transform each way, not through NCHW
        with target:
            folded = relax.transform.FoldBatchnormToConv2D()(mod)
            text = str(relax.transform.AlterOpLayout()(folded))
        assert '{dst_layout = "NCHW16c", src_layout = "NCHW8c"}' in text, text
        assert '{dst_layout = "NCHW8c", src_layout = "NCHW16c"}' in text, text
        assert text.count('dst_layout = "NCHW",') == 1, text  # the result only
    assert "relax.concat" not in text
    rules = _checked_rules(model, x, mod, target)
    grouped = [r for name, r in rules.items() if "grouped_conv2d_nchwc" in name]
    assert len(grouped) == 1 and any(r.startswith("conv-") for r in grouped[0]), rules
    assert not [w for w in recwarn if "unscheduled" in str(w.message)]


class _PreactDepthwise(torch.nn.Module):
    """ShuffleNetV2's branch: the bias and ReLU of the 1x1 conv before it, then the depthwise
    3x3 (fused as one kernel: the add and ReLU are its prologue)."""

    def __init__(self, c, stride):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(1, c, 1, 1))
        self.dw = torch.nn.Conv2d(c, c, 3, stride, 1, groups=c, bias=False)

    def forward(self, x):
        return self.dw(torch.relu(x + self.bias))


@pytest.mark.parametrize(
    ("channels", "stride", "prologue"),
    [(20, 1, False), (20, 2, False), (116, 1, False), (58, 2, True), (116, 1, True)],
)
def test_nchw_depthwise_conv_reads_its_window_as_an_operand(channels, stride, prologue):
    """A depthwise convolution whose channels divide into no block (ShuffleNetV2's 116) stays
    NCHW; TE reads its image at a computed channel, which `raise_window_reads` turns into an
    operand with the window's indexing map, so the conv rule (strided: by phase) schedules it
    instead of scalar loops on one thread (ShuffleNetV2 at 1 thread 3.81 -> 3.43 ms). With a
    prologue the raised window also reads the batch at a constant 0, which the phase split
    took for something other than a window (ShuffleNetV2's two 3x3 / 2 ones fell back).
    Against torch."""
    target = _avx512(2)
    _runnable(target)
    make = (lambda: _PreactDepthwise(channels, stride)) if prologue else (
        lambda: _Depthwise(channels, 1, 3, stride, 1)
    )
    model, x, mod, _ = _altered(make, (1, channels, 14, 14), target)
    rules = _checked_rules(model, x, mod, target)
    depthwise = [r for name, r in rules.items() if "conv2d" in name and "fallback" in r]
    assert not depthwise, rules


class _ShuffleUnit(torch.nn.Module):
    """ShuffleNetV2's stride-1 unit, reduced: half the channels pass, the other half go through
    a 1x1 conv + batch norm + ReLU, then the two are concatenated and shuffled."""

    def __init__(self, c):
        super().__init__()
        self.pw = torch.nn.Conv2d(c // 2, c // 2, 1)
        self.bn = torch.nn.BatchNorm2d(c // 2)

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        out = torch.cat((a, torch.relu(self.bn(self.pw(b)))), dim=1)
        n, c, h, w = out.shape
        return out.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


@pytest.mark.parametrize("channels", [32, 464])
def test_shuffle_unit_transforms_its_passing_half_beside_the_conv(channels):
    """The passing half enters the fused kernel in NCHW and is transformed to the conv's
    channel blocks there (a read at `16 * f + v`): split into a [blocks, 16] view beside the
    pointwise conv (whose unit window stays), it runs on the transpose rule instead of naive
    loops. Against torch."""
    target = _avx512(2)
    _runnable(target)
    model, x, mod, _ = _altered(lambda: _ShuffleUnit(channels), (1, channels, 7, 7), target)
    rules = _checked_rules(model, x, mod, target)
    assert not [r for rs in rules.values() for r in rs if "fallback" in r], rules


@pytest.mark.parametrize(
    ("channels", "groups", "stride", "size"),
    [(128, 32, 1, 14), (48, 16, 1, 9), (24, 8, 1, 7), (32, 8, 2, 10)],
)
def test_grouped_conv_of_a_few_channels_per_group(channels, groups, stride, size):
    """Groups of fewer channels than a block (ResNeXt-50's 4, ShuffleNetV1's 3) stay NCHW: the
    filter loop is split into (group, filter in group) loops and the conv rule schedules them
    (a stride along the rows keeps the old loops, whose phases would read every other element);
    against torch, with a bias and ReLU after."""
    target = _avx512(2)
    _runnable(target)

    def make():
        return torch.nn.Sequential(
            torch.nn.Conv2d(channels, channels, 3, stride, 1, groups=groups), torch.nn.ReLU()
        )

    model, x, mod, _ = _altered(make, (1, channels, size, size), target)
    rules = _checked_rules(model, x, mod, target)
    convs = [r for name, r in rules.items() if "conv2d" in name]
    assert convs, rules
    if stride == 1:
        assert all(any(x.startswith("conv-") for x in r) for r in convs), rules


class _SymbolicBatchCNN(torch.nn.Module):
    """ResNet's pieces for a batch of any size: a strided stem with batch norm, max pool, a
    residual block, a grouped convolution of two blocks per group, a global average pool."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 5, 2, 2, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU()
        )
        self.pool = torch.nn.MaxPool2d(3, 2, 1)
        self.conv = torch.nn.Conv2d(32, 32, 3, 1, 1, bias=False)
        self.bn = torch.nn.BatchNorm2d(32)
        self.down = torch.nn.Conv2d(32, 64, 3, 2, 1)
        self.wide = torch.nn.Conv2d(64, 64, 3, 1, 1, groups=2)
        for m in self.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                torch.nn.init.uniform_(m.weight, 0.5, 1.5)
                torch.nn.init.uniform_(m.bias, -0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = torch.relu(self.bn(self.conv(x)) + x)
        x = self.wide(torch.relu(self.down(x)))
        return x.mean((2, 3))


@pytest.mark.parametrize("layout", ["blocked", "blocked-avx2"])
def test_symbolic_batch_keeps_the_blocked_layout(layout, recwarn):
    """Built for any batch (torch.export with a Dim), a CNN takes the blocked layout as a
    static one does: only the batch is symbolic, and every op the layout pass and the batch
    norm folding make declares the batch's symbol (without it legalization gave a fresh one
    that the ops after, declared with the old one, refused; in NCHW with unfolded batch norms
    ResNet-18 built for any batch ran at 1.5x its static latency, now 1.0x). Every
    convolution gets a conv rule (the padding of an image with a symbolic batch stays TE's
    guarded copy: `pad.match_pad` wants static shapes); against torch at batch 1 and 3."""
    target = _runnable(rm.target.Target(f"{LAYOUTS[layout]} -num-cores=2"))
    torch.manual_seed(0)
    model = _SymbolicBatchCNN().eval()
    batch = {0: torch.export.Dim("n", min=1, max=64)}
    ep = torch.export.export(model, (torch.randn(2, 3, 20, 20),), dynamic_shapes=[batch])
    mod = from_exported_program(ep)
    with target:
        folded = relax.transform.FoldBatchnormToConv2D()(mod)
        text = str(relax.transform.AlterOpLayout()(folded))
    assert 'data_layout = "NCHW",' not in text and "relax.nn_batch_norm" not in text, text
    lanes = 16 if layout == "blocked" else 8
    assert 'relax.shape = [["s' in text and f"x{lanes}xf32>" in text, text
    ex, rules = _built_rules(mod, target)
    convs = [r for name, r in rules.items() if "conv2d" in name]
    assert convs and all(any(x.startswith("conv-") for x in r) for r in convs), rules
    assert not [w for w in recwarn if "unscheduled" in str(w.message)]
    vm = relax.VirtualMachine(ex, rm.cpu())
    for n in (1, 3):
        x = torch.randn(n, 3, 20, 20)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(vm["main"](x.numpy()).numpy(), want, rtol=RTOL, atol=ATOL)
