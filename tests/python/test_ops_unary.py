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


# domain edges of the inverse functions (asin/acos/atanh at +-1 and just past, acosh at 1),
# signed zeros, a subnormal-free tiny value and magnitudes where naive formulas overflow
EDGES = torch.tensor(
    [-1.0, 1.0, -1.0000001, 1.0000001, 0.99999994, -0.99999994, 0.0, -0.0, 1e-30, -1e-30, 1e-5,
     0.5, -0.5, 2.0, 1e20, -1e20, 3e38, float("nan"), float("inf"), -float("inf")]
)  # fmt: skip


def test_trig_and_hyperbolic():
    """tan, the inverse trig functions, the hyperbolic ones and their inverses, exp2, through
    each spelling torch has (functions, aliases, Tensor methods)."""

    def ops(s, e, y):
        return (
            torch.tan(s), torch.tan(y), torch.asin(e), torch.arcsin(y / 10), e.acos(),
            (y / 10).arccos(), torch.atan(s), torch.arctan(e), torch.sinh(s), y.sinh(),
            torch.cosh(s), torch.cosh(e), torch.asinh(s), torch.arcsinh(e), torch.acosh(e),
            torch.arccosh(y.abs() + 1), torch.atanh(e), (y / 10).arctanh(), torch.exp2(s),
            torch.special.exp2(y), e.exp2(),
        )  # fmt: skip

    check_ops(ops, [SPECIAL, EDGES, _random(3, 5)], "trig", rtol=2e-6, atol=1e-30)


def test_float_binary_ops():
    """atan2 (every quadrant, signed zeros, infinities), hypot (no overflow of the squares,
    inf beats NaN), copysign (Tensor and Scalar overloads, -0.0 as a sign), fmod (the sign of
    the dividend, unlike remainder) with broadcasting operands."""
    a = torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 1e30, 5.5])
    a = a[:, None]  # (9, 1) against (9,): every pair
    b = torch.tensor([0.0, -0.0, 2.0, -2.0, float("inf"), -float("inf"), float("nan"), 1e30, 1.5])

    def ops(a, b, y):
        return (
            torch.atan2(a, b), torch.arctan2(y, y.flip(0)), torch.hypot(a, b), y.hypot(y * 3),
            torch.copysign(a, b), torch.copysign(y, -2.0), y.copysign(0.0), torch.fmod(a, b),
            torch.fmod(y, 1.5), y.fmod(-2), torch.remainder(y, 1.5), torch.fmod(y, y.flip(1)),
        )  # fmt: skip

    check_ops(ops, [a, b, _random(4, 6)], "float_binary", rtol=2e-6, atol=1e-30)


def test_integer_operands():
    """fmod stays integral (truncated, the sign of the dividend); atan2 and copysign compute in
    float32; a float scalar makes fmod float; unary float ops of integers are float32."""
    i = torch.tensor([[7, -7, 0, 5], [-3, 9, -8, 1]])
    j = torch.tensor([3, 3, -4, -2])

    def ops(i, j):
        return (
            torch.fmod(i, j), torch.fmod(i, 3), torch.fmod(i, 2.5), torch.atan2(i, j),
            torch.copysign(i, j), torch.copysign(i, -1), torch.hypot(i.float(), j.float()),
            torch.tan(i), torch.asinh(i), torch.exp2(i),
        )  # fmt: skip

    check_ops(ops, [i, j], "int_operands", rtol=2e-6)


def test_float_predicates():
    """isnan/isinf/isfinite/isposinf/isneginf give bool tensors; integers are never NaN or
    infinite; logical_xor takes the truth of any dtype; where() of two python scalars has
    torch's dtype (float32, int64)."""
    i = torch.tensor([0, 3, -5])

    def ops(s, i, y):
        return (
            torch.isnan(s), torch.isinf(s), torch.isfinite(s), torch.isposinf(s), s.isneginf(),
            torch.isnan(i), torch.isinf(i), i.isfinite(), torch.isposinf(i), torch.isneginf(i),
            torch.logical_xor(s, y[:1]), torch.logical_xor(i, i > 0), (s > 0).logical_xor(s < 1),
            torch.isnan(y.log()), torch.where(torch.isnan(s), 0.0, 1.0),
            torch.where(torch.isinf(s), 1, 0),
        )  # fmt: skip

    check_ops(ops, [SPECIAL, i, _random(3, 22)], "predicates")


def test_float16_math():
    """16-bit inputs: the transcendentals run in float32 and round once, as in torch."""
    x = (torch.tensor([-0.9, -0.3, 0.0, 0.2, 0.7, 0.99, 1.0, -1.0]) * 1).half()
    y = torch.tensor([0.5, -2.0, 3.0, -0.0, 1e4, 6e4, float("inf"), float("nan")]).half()

    def ops(x, y):
        return (
            torch.tan(x), torch.asin(x), torch.acosh(y), torch.atanh(x), torch.exp2(x * 8),
            torch.atan2(x, y), torch.hypot(y, y), torch.copysign(x, y), torch.fmod(y, x),
            torch.isnan(y), torch.isinf(y), torch.isfinite(y),
        )  # fmt: skip

    check_ops(ops, [x, y], "float16_math", rtol=1e-3, atol=1e-6)


def test_nan_handling_ops():
    """torch.nan_to_num, nansum, xlogy and heaviside decompose into isnan (torch.export)."""
    s = SPECIAL[None, :]
    y = _random(3, 22).abs()

    def ops(s, y):
        return (
            torch.nan_to_num(s), torch.nan_to_num(s, nan=1.0, posinf=2.0, neginf=-3.0),
            torch.nansum(s * y, dim=1), torch.xlogy(s.abs(), y), torch.xlogy(y, s),
            torch.heaviside(s, y[:1]),
        )  # fmt: skip

    check_ops(ops, [s, y], "nan_ops", rtol=2e-6, atol=1e-6, frontends=("ep",))


def test_integer_clamps_rrelu_and_empty():
    """clamp of an integer tensor with one bound (an infinity stood in for the other: an
    OverflowError), or a float bound (the result is float); rrelu outside training (the mean
    slope); empty / empty_like as torch.export keeps them (their contents are written after)."""
    i = torch.tensor([[-7, 0, 3, 12], [5, -2, 9, 1]])

    def ops(x, i):
        return (
            i.clamp(min=0), i.clamp(max=4), i.clamp_min(-3), torch.clamp(i, max=2.5),
            F.rrelu(x), F.rrelu(x, 0.1, 0.5),
        )  # fmt: skip

    def written(x, i):  # in-place writes of a fresh tensor: torch.export's form only
        return torch.empty_like(x).fill_(2.0) * x, torch.empty(2, 4).zero_() + i

    check_ops(ops, [_random(2, 4), i], "int_clamps")
    check_ops(written, [_random(2, 4), i], "empty", frontends=("ep",))
