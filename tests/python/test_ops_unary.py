"""Elementwise math and activations through both importers, against torch (issue 13, item 2).

Each test groups ops into one model (one build per importer). Inputs hold the edge cases:
NaN, +-inf, signed zeros, halves (round half to even), values near 0 (log1p/expm1 keep their
digits there), large magnitudes (softplus thresholds, exp overflow).
"""

import pytest
import torch
import torch.nn.functional as F
from ops_check import check_ops
from torch import nn

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

SPECIAL = torch.tensor(
    [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-7, -1e-7, 1e-3, -1e-3, 0.5, 1.5,
     2.5, -2.5, -0.5, 3.0, -3.0, 7.9, -7.9, 25.0, -25.0, 90.0, -90.0]
)  # fmt: skip


def _random(*shape):
    torch.manual_seed(0)
    return torch.randn(*shape) * 3


def test_rounding_and_sign():
    """floor/ceil/round/trunc/sign/reciprocal, on specials, a 3-D tensor and integers."""

    def ops(x, y, i):
        return (
            torch.floor(x), torch.ceil(x), torch.round(x), torch.trunc(x), torch.sign(x),
            torch.reciprocal(x), y.floor() + y.ceil(), torch.round(y, decimals=2), y.trunc(),
            torch.fix(y), torch.sgn(y), torch.square(y), torch.floor(i), torch.sign(i),
            torch.reciprocal(i),
        )  # fmt: skip

    check_ops(ops, [SPECIAL, _random(2, 3, 4), torch.tensor([-3, 0, 2, 5])], "rounding")


def test_log_exp_family():
    """log1p/expm1 near 0 (where log(1+x)/exp(x)-1 lose the digits), log2/log10/rsqrt."""
    tiny = torch.tensor([1e-10, -1e-10, 1e-6, -1e-6, 3e-4, -3e-4, 0.1, -0.1, 0.0, 5.0, -5.0])

    def ops(s, t, y):
        pos = y.abs() + 0.1
        return (
            torch.log1p(t), torch.expm1(t), torch.log1p(s), torch.expm1(s), torch.log2(s),
            torch.log10(s), torch.rsqrt(s), torch.log2(pos), torch.log10(pos),
            torch.special.expm1(y), torch.special.log1p(pos),
        )  # fmt: skip

    check_ops(ops, [SPECIAL, tiny, _random(3, 4)], "log_exp", rtol=2e-6, atol=1e-30)


def test_integer_inputs_promote_to_float():
    """torch computes float math of integer tensors in float32."""
    i = torch.tensor([[1, 2, 3], [4, 5, 6]])
    check_ops(
        lambda i: (torch.log1p(i), torch.expm1(i), torch.log2(i), F.elu(i.float()), i.exp()),
        [i],
        "int_promote",
        rtol=2e-6,
    )


ACTIVATIONS = {
    "elu": lambda x: F.elu(x),
    "elu_alpha": lambda x: F.elu(x, alpha=0.3),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=1.7),
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "mish": F.mish,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "hardtanh": lambda x: F.hardtanh(x, -2.0, 3.0),
    "relu6": F.relu6,
    "softsign": F.softsign,
    "logsigmoid": F.logsigmoid,
    "silu": F.silu,
}


def test_activations():
    """Every activation on the specials and on a random tensor, in one model per importer."""

    def ops(s, y):
        return tuple(f(t) for f in ACTIVATIONS.values() for t in (s, y))

    check_ops(ops, [SPECIAL, _random(2, 3, 5)], "activations", rtol=2e-6, atol=1e-6)


def test_activation_modules():
    """The nn modules (fx sees them as leaves: their forward is traced and inlined)."""
    model = nn.Sequential(
        nn.Linear(5, 6), nn.ELU(0.5), nn.Hardswish(), nn.Linear(6, 6), nn.SELU(), nn.Mish(),
        nn.Softplus(beta=0.5), nn.CELU(), nn.Hardsigmoid(), nn.LogSigmoid(), nn.Softsign(),
    )  # fmt: skip
    torch.manual_seed(0)
    model = model.eval()
    check_ops(model, [_random(4, 5)], "activation_modules", rtol=1e-5, atol=1e-6)


def test_empty_and_scalar_tensors():
    """0-d and size-0 tensors keep their shapes."""
    s = torch.tensor(0.7)
    e = torch.zeros(2, 0)
    check_ops(
        lambda s, e: (torch.floor(s), F.elu(s), torch.expm1(s), torch.floor(e), F.mish(e)),
        [s, e],
        "empty_scalar",
    )
