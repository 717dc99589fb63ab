"""conv2d over a sweep of shapes, strides, padding, groups and dilation, against torch.

Weights are compile-time constants (the case models hit: BindParams + FoldConstant re-lay them
out, e.g. the space-to-depth taps of strided convolutions) or run-time parameters; both go
through relax.build and the VM. f32, fixed seeds, rtol=1e-4 and atol=1e-4 (sums of up to
64*7*7 products).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import relaxmlir as rm
from relaxmlir import relax

RTOL = ATOL = 1e-4

# (n, cin, h, w, cout, k, stride, padding, groups, dilation)
CASES = [
    (1, 3, 32, 32, 16, 7, 2, 3, 1, 1),  # ResNet stem (scaled)
    (1, 8, 15, 13, 16, 3, 2, 1, 1, 1),  # odd sizes, stride 2
    (2, 8, 14, 14, 12, 3, 1, 1, 1, 1),
    (1, 8, 16, 16, 16, 1, 2, 0, 1, 1),  # 1x1 stride 2 (downsample)
    (1, 4, 17, 17, 8, 5, 2, 2, 1, 1),
    (1, 4, 20, 20, 8, 3, 3, 0, 1, 1),  # stride 3
    (1, 4, 13, 13, 8, 2, 3, 1, 1, 1),  # window shorter than the stride: a phase with no tap
    (1, 4, 15, 15, 8, 3, 2, 1, 1, 2),  # strided and dilated
    (1, 4, 12, 12, 8, 4, 2, 1, 1, 1),  # even kernel, stride 2
    (1, 8, 14, 14, 8, 3, 1, 1, 8, 1),  # depthwise
    (1, 8, 14, 14, 16, 3, 2, 1, 2, 1),  # grouped, stride 2
    (1, 4, 16, 16, 8, 3, 1, 2, 1, 2),  # dilated
    (1, 16, 28, 28, 32, 3, 2, 1, 1, 1),  # ResNet downsampling 3x3 (scaled)
]


def _module(x_shape, w, stride, padding, groups, dilation, weight_as_param):
    x = relax.Var("x", relax.TensorStructInfo(x_shape, "float32"))
    params = [x]
    if weight_as_param:
        wv = relax.Var("w", relax.TensorStructInfo(w.shape, "float32"))
        params.append(wv)
    else:
        wv = relax.const(w)
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = relax.op.nn.conv2d(
                x, wv, strides=stride, padding=padding, dilation=dilation, groups=groups
            )
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


@pytest.mark.parametrize("weight_as_param", [False, True], ids=["const", "param"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_conv2d_matches_torch(case, weight_as_param):
    n, cin, h, w_, cout, k, stride, padding, groups, dilation = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, cin, h, w_), dtype=np.float32)
    w = rng.standard_normal((cout, cin // groups, k, k), dtype=np.float32) * 0.1
    mod = _module(x.shape, w, stride, padding, groups, dilation, weight_as_param)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    got = vm["main"](x, w).numpy() if weight_as_param else vm["main"](x).numpy()
    want = F.conv2d(
        torch.from_numpy(x), torch.from_numpy(w), stride=stride, padding=padding,
        dilation=dilation, groups=groups,
    ).numpy()  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
