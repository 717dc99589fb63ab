"""The 16-bit float conversions runtime.c gives JIT code (LLVM calls them where the CPU has no
instruction): each narrowing rounds once to nearest even, from the exact source value."""

import ctypes
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from relaxmlir.runtime import libraries

pytestmark = [
    pytest.mark.filterwarnings("ignore:overflow encountered in cast"),  # numpy's own inf results
    pytest.mark.skipif(
        not hasattr(ctypes.CDLL(libraries.find("relaxmlir")), "__truncdfhf2"),
        reason="the soft-float helpers are built on x86-64 only",
    ),
]


def _fn(name, arg):
    f = getattr(libraries.load("relaxmlir"), name)
    f.argtypes, f.restype = [arg], ctypes.c_float  # the 16 bits come back in xmm0's low half
    return f


def _bits(value: float) -> int:
    return int(np.array(value, np.float32).view(np.uint32)) & 0xFFFF


def _edge_doubles():
    rng = np.random.default_rng(0)
    half_max, bf_max = 65504.0, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    specials = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, half_max, 65519.99, 65520.0, 1e6,
                2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001, 2.0**-26, 6.1e-5, 5.96e-8,
                1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-40,  # ties and near-ties
                bf_max, 3.4e38, 1e-40, 2.0**-133, 1 + 2.0**-8, 1 + 3 * 2.0**-8]  # fmt: skip
    wide = rng.standard_normal(2000) * 10.0 ** rng.uniform(-9, 6, 2000)
    return np.concatenate([specials, wide, -np.array(specials)])


def _exact_bf16(d: float) -> int:
    """Round the exact value of `d` to bfloat16, to nearest even (no double rounding)."""
    if np.isnan(d) or np.isinf(d) or d == 0:
        return int(np.array(d, ml_dtypes.bfloat16).view(np.uint16))
    candidates = np.array([d], np.float32).view(np.uint32)[0] >> 16
    best = None
    for c in (candidates - 1, candidates, candidates + 1):
        value = np.array([c], np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)[0]
        if not np.isfinite(value):
            continue
        err = abs(Fraction(float(value)) - Fraction(d))
        if best is None or err < best[0] or (err == best[0] and c % 2 == 0):
            best = (err, int(c))
    if best is None or abs(d) >= 2.0**128 - 2.0**119:  # rounds past the largest finite value
        return 0x7F80 | (0x8000 if d < 0 else 0)
    return best[1]


def test_double_to_half_matches_numpy():
    f = _fn("__truncdfhf2", ctypes.c_double)
    for d in _edge_doubles():
        want = int(np.array(d, np.float64).astype(np.float16).view(np.uint16))
        assert _bits(f(float(d))) == want, d


def test_float_to_half_and_back_match_numpy():
    trunc, extend = _fn("__truncsfhf2", ctypes.c_float), _fn("__extendhfsf2", ctypes.c_float)
    for d in _edge_doubles().astype(np.float32):
        want = int(np.array(d, np.float32).astype(np.float16).view(np.uint16))
        assert _bits(trunc(float(d))) == want, d
    every_half = np.arange(1 << 16, dtype=np.uint32)
    want = every_half.astype(np.uint16).view(np.float16).astype(np.float32)
    as_xmm = every_half[::7].view(np.float32)
    got = np.array([extend(float(h)) for h in as_xmm], np.float32)
    np.testing.assert_array_equal(got, want[::7])


def test_float_and_double_to_bfloat16_round_once():
    from_float, from_double = _fn("__truncsfbf2", ctypes.c_float), _fn("__truncdfbf2", ctypes.c_double)
    for d in _edge_doubles():
        f32 = np.float32(d)
        want = int(np.array(f32, ml_dtypes.bfloat16).view(np.uint16))  # exact from float32
        assert _bits(from_float(float(f32))) == want, f32
        assert _bits(from_double(float(d))) == _exact_bf16(float(d)), d


def test_nan_stays_nan():
    for name, arg in (("__truncdfhf2", ctypes.c_double), ("__truncdfbf2", ctypes.c_double)):
        bits = _bits(_fn(name, arg)(float("nan")))
        exp_mask = 0x7C00 if "hf" in name else 0x7F80
        assert bits & exp_mask == exp_mask and bits & ~exp_mask & 0x7FFF, hex(bits)
