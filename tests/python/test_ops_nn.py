"""Padding, resizing, normalization, convolution and pooling through both importers, against
torch (issue 13, item 2). Ops are grouped into few models (one build per importer each)."""

import pytest
import torch
import torch.nn.functional as F
from ops_check import Fn, check_ops
from torch import nn

from relaxmlir.frontend import from_fx

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _randn(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


def test_pad_modes():
    """constant (with a value and negative widths: crops), reflect, replicate, circular; 3-D/4-D."""

    def ops(x, y):
        return (
            F.pad(x, (1, 2)), F.pad(x, (1, 2, 0, 1), value=0.5), F.pad(x, (-1, 2, 1, -2)),
            F.pad(x, (1, 2, 2, 1), mode="reflect"), F.pad(x, (3, 0, 1, 2), mode="replicate"),
            F.pad(x, (1, 2, 2, 1), mode="circular"), F.pad(y, (2, 1), mode="reflect"),
            F.pad(y, (0, 3), mode="replicate"), torch.constant_pad_nd(y, (1, 1, 1, 1, 1, 1), -2.0),
        )  # fmt: skip

    check_ops(ops, [_randn(1, 2, 4, 5), _randn(2, 3, 4)], "pad")


def test_pad_modules_and_conv_padding_modes():
    model = nn.Sequential(
        nn.ReflectionPad2d((1, 0, 2, 1)), nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"),
        nn.ReplicationPad2d(1), nn.Conv2d(3, 3, 3, padding=(1, 2), padding_mode="circular"),
        nn.ZeroPad2d((0, 1, 1, 0)), nn.CircularPad2d(1),
        nn.Conv2d(3, 2, 2, padding=1, padding_mode="replicate"),
    )  # fmt: skip
    torch.manual_seed(0)
    check_ops(model, [_randn(1, 2, 5, 6)], "pad_modules", rtol=1e-4, atol=1e-5)


def test_norms():
    """group_norm/instance_norm by the input's statistics, with and without affine."""
    w, b = _randn(4), _randn(4)

    def ops(x, y):
        return (
            F.group_norm(x, 2, w, b), F.group_norm(x, 4), F.group_norm(y, 1, eps=1e-3),
            F.instance_norm(x, weight=w, bias=b), F.instance_norm(y),
        )  # fmt: skip

    check_ops(ops, [_randn(2, 4, 3, 5), _randn(3, 4, 6)], "norms", rtol=1e-4, atol=1e-5)


def test_norm_modules():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 1), nn.GroupNorm(2, 4), nn.InstanceNorm2d(4, affine=True),
        nn.GroupNorm(1, 4, affine=False), nn.InstanceNorm2d(4),
    )  # fmt: skip
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 1.5), model[2].bias.uniform_(-1, 1)
    check_ops(model, [_randn(2, 3, 4, 4)], "norm_modules", rtol=1e-4, atol=1e-5)


def test_conv_and_pool_unbatched_1d_divisor():
    """Unbatched (3-D) conv2d and pooling, conv1d (also unbatched), 1-D pooling, and
    avg_pool2d(divisor_override=) including ceil_mode windows past the padding."""

    def ops(x, w, s, w1):
        return (
            F.conv2d(x, w, padding=1), F.max_pool2d(x, 2), F.avg_pool2d(x, 3, 1, padding=1),
            F.adaptive_avg_pool2d(x, (2, 3)), F.conv1d(s, w1, stride=2), F.conv1d(s[0], w1),
            F.max_pool1d(s, 3, 2, padding=1), F.avg_pool1d(s, 2), F.max_pool1d(s[0], 2),
            F.adaptive_avg_pool1d(s, 3),
            F.avg_pool2d(x[None], 2, divisor_override=3),
            F.avg_pool2d(x[None], 3, 2, padding=1, ceil_mode=True, divisor_override=5),
        )  # fmt: skip

    inputs = [_randn(3, 6, 7), _randn(4, 3, 3, 3), _randn(2, 3, 9), _randn(5, 3, 3)]
    check_ops(ops, inputs, "conv_pool", rtol=1e-4, atol=1e-5)


def test_conv3d_and_pool3d():
    """conv3d as one conv2d per depth tap (stride, padding incl. "same", dilation, groups,
    unbatched); max_pool3d (padding, dilation, ceil_mode, its indices) and avg_pool3d (padding
    counted)."""

    def ops(x, w, wg, u):
        return (
            F.conv3d(x, w, padding=1), F.conv3d(x, w, stride=(2, 1, 2), padding=(1, 0, 1)),
            F.conv3d(x, w, padding="same", dilation=(2, 1, 1)), F.conv3d(x, wg, groups=2),
            F.conv3d(u, w, padding=1), F.max_pool3d(x, 2), F.max_pool3d(x, 3, 2, padding=1),
            F.max_pool3d(x, (3, 2, 2), 2, ceil_mode=True),
            F.max_pool3d(x, 2, 1, dilation=(2, 1, 1)),
            F.avg_pool3d(x, 2), F.avg_pool3d(x, 3, (2, 1, 2), padding=1), F.max_pool3d(u, 2),
            F.max_pool3d(x, 3, 2, padding=1, return_indices=True)[1],
            F.max_pool3d(u, (1, 2, 3), dilation=(1, 2, 1), ceil_mode=True, return_indices=True)[1],
        )  # fmt: skip

    x, u = _randn(2, 4, 5, 6, 7), _randn(4, 5, 6, 7)
    inputs = [x, _randn(3, 4, 3, 3, 3), _randn(2, 2, 1, 2, 3), u]
    # one importer for the functions (both share the rules); the modules below take both
    check_ops(ops, inputs, "conv_pool_3d", rtol=1e-4, atol=1e-5, frontends=("ep",))
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv3d(2, 4, 3, padding=1, bias=False), nn.BatchNorm3d(4), nn.ReLU(),
        nn.MaxPool3d((1, 2, 2)), nn.Conv3d(4, 4, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0)),
        nn.AvgPool3d(2, padding=1), nn.Conv3d(4, 2, 1, padding_mode="replicate"),
    ).eval()  # fmt: skip
    check_ops(model, [_randn(1, 2, 6, 8, 8)], "Conv3d", rtol=1e-4, atol=1e-5)


def test_adaptive_max_pool():
    """Windows that do not divide the input (overlapping ones too), a kept axis (None), a
    global max, unbatched and 1-D inputs; the indices only where asked for (fx: none)."""

    def ops(x, s):
        return (
            F.adaptive_max_pool2d(x, (2, 3)), F.adaptive_max_pool2d(x, (4, None)),
            F.adaptive_max_pool2d(x, 1), F.adaptive_max_pool2d(x[0], (5, 4)),
            F.adaptive_max_pool1d(s, 4), F.adaptive_max_pool1d(s, 9),
        )  # fmt: skip

    check_ops(ops, [_randn(2, 3, 6, 7), _randn(2, 3, 9)], "adaptive_max_pool")
    check_ops(nn.AdaptiveMaxPool2d((3, 2)), [_randn(1, 2, 7, 5)], "AdaptiveMaxPool2d")


def test_embedding_bag():
    """sum / mean / max bags from offsets (an empty bag gives zeros), fixed-length bags of a
    2-D input, per-sample weights, padding_idx left out of the mean, include_last_offset, and
    the module (fx inlines its forward)."""
    w = _randn(10, 4)

    def ops(idx, off, rows, psw):
        return (
            F.embedding_bag(idx, w, off, mode="sum"), F.embedding_bag(idx, w, off),
            F.embedding_bag(idx, w, off, mode="max"), F.embedding_bag(rows, w, mode="max"),
            F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=psw),
            F.embedding_bag(idx, w, off, padding_idx=2),
            F.embedding_bag(idx, w, torch.cat([off, torch.tensor([8])]), include_last_offset=True),
        )  # fmt: skip

    idx, off = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 2, 2, 5])
    rows, psw = torch.tensor([[1, 2, 3], [4, 2, 9]]), _randn(8)
    check_ops(ops, [idx, off, rows, psw], "embedding_bag")
    torch.manual_seed(0)
    check_ops(nn.EmbeddingBag(10, 3, mode="sum").eval(), [rows], "EmbeddingBag")


def test_conv_transpose():
    """conv_transpose2d/1d with stride, padding, output_padding, groups and dilation; weights as
    graph inputs here (the kernel is flipped in the graph) and as module constants below. A
    kernel equal to its stride is a 1x1 convolution + depth-to-space (both frontends)."""

    def ops(x, w, s, w1):
        return (
            F.conv_transpose2d(x, w), F.conv_transpose2d(x, w, stride=2, padding=1),
            F.conv_transpose2d(x, w, stride=(2, 3), padding=(0, 2), output_padding=(1, 2)),
            F.conv_transpose2d(x, w, dilation=2, padding=2), F.conv_transpose1d(s, w1, stride=2),
            F.conv_transpose2d(x[0], w, stride=2), F.conv_transpose2d(x, w, stride=3),
            F.conv_transpose1d(s, w1, stride=4),
        )  # fmt: skip

    inputs = [_randn(2, 4, 5, 4), _randn(4, 3, 3, 3), _randn(1, 3, 6), _randn(3, 2, 4)]
    check_ops(ops, inputs, "conv_transpose", rtol=1e-4, atol=1e-5)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
        nn.ReLU(), nn.ConvTranspose2d(6, 2, (2, 3), bias=False), nn.ConvTranspose2d(2, 3, 2, 2),
    )  # fmt: skip
    check_ops(model, [_randn(1, 4, 5, 5)], "ConvTranspose2d", rtol=1e-4, atol=1e-5)


def test_interpolate():
    """nearest (integer and fractional scales), nearest-exact, (bi)linear with and without
    align_corners, area, and the Upsample module."""

    def ops(x, s):
        return (
            F.interpolate(x, scale_factor=2), F.interpolate(x, size=(5, 7)),
            F.interpolate(x, scale_factor=1.7, mode="nearest-exact"),
            F.interpolate(x, size=(2, 9), mode="bilinear"),
            F.interpolate(x, scale_factor=(1.5, 2.5), mode="bilinear", align_corners=True),
            F.interpolate(x, size=(1, 1), mode="bilinear", align_corners=True),
            F.interpolate(x, scale_factor=0.5, mode="bilinear"),
            F.interpolate(s, size=11, mode="linear"), F.interpolate(s, scale_factor=3),
            F.interpolate(x, size=(2, 2), mode="area"),
            nn.functional.upsample(x, scale_factor=2, mode="bilinear", align_corners=False),
        )  # fmt: skip

    check_ops(ops, [_randn(1, 2, 4, 5), _randn(2, 3, 6)], "interpolate", rtol=1e-5, atol=1e-6)
    model = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear"), nn.Upsample(size=(3, 4)))
    check_ops(model, [_randn(1, 2, 4, 5)], "Upsample")


def test_unsupported_modes_name_themselves():
    x = torch.randn(1, 2, 4, 4)
    bicubic = nn.Upsample(scale_factor=2, mode="bicubic")
    with pytest.raises(NotImplementedError, match="interpolate mode 'bicubic'"):
        from_fx(bicubic, [x.shape])
    antialias = Fn(lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True), 1)
    with pytest.raises(NotImplementedError, match="antialias"):
        from_fx(antialias, [x.shape])
    with pytest.raises(NotImplementedError, match="conv_transpose3d"):
        from_fx(nn.ConvTranspose3d(2, 2, 2), [(1, 2, 3, 3, 3)])
    with pytest.raises(NotImplementedError, match="AvgPool3d with ceil_mode"):
        from_fx(nn.AvgPool3d(2, ceil_mode=True), [(1, 2, 3, 3, 3)])
    too_wide = nn.ReflectionPad2d(4)
    with pytest.raises(ValueError, match=r"relax.nn.pad: reflect padding \(4, 4\) of an axis"):
        from_fx(too_wide, [x.shape])
