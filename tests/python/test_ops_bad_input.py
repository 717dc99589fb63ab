"""Bad input never crashes or answers silently (issue 13, item 6): arrays of unsupported dtypes
raise TypeError, non-contiguous and negative-stride arrays and tensors are copied, and NaN/Inf
propagate through compiled ops as they do in torch/numpy."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from ops_check import check_ops

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_fx

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

UNSUPPORTED = {
    "object": np.array([1, "a"], dtype=object),
    "str": np.array(["ab", "c"]),
    "bytes": np.array([b"ab"]),
    "complex": np.array([1 + 2j]),
    "complex_torch": torch.tensor([1 + 2j]),
    "ragged": [[1, 2], [3]],
    "uint16_torch": torch.zeros(2, dtype=torch.uint16),
}


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_nd_array_rejects_unsupported_dtypes(name):
    with pytest.raises(TypeError, match="not supported|cannot make an array"):
        rm.nd.array(UNSUPPORTED[name])


def test_nd_array_copies_strided_inputs():
    """Views with negative or non-unit strides become C-contiguous copies with the same values."""
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = torch.arange(24.0).reshape(4, 6)
    for view in (base[:, ::-1], base[::2, 1::3], base.T, t.T, t.flip(0), t[:, ::2]):
        out = rm.nd.array(view).numpy()
        assert out.flags["C_CONTIGUOUS"]
        np.testing.assert_array_equal(out, np.asarray(view))
    a = base.copy()
    out = rm.nd.array(a[:, ::-1])
    a[:] = -1  # a copy: later writes to the source do not show
    assert out.numpy()[0, 0] == 5


class _Model(torch.nn.Module):
    def forward(self, x):
        return torch.exp(x) * 2 + x.relu()


def test_vm_takes_strided_inputs_and_rejects_bad_dtypes():
    vm = relax.VirtualMachine(relax.build(from_fx(_Model(), [(3, 4)]), "llvm"), rm.cpu())
    base = np.arange(30, dtype=np.float32).reshape(5, 6) / 10
    for view in (base[:3, ::-1][:, :4], base[::2, 1:5], torch.from_numpy(base).T[:3, :4]):
        want = _Model()(torch.as_tensor(np.array(view))).numpy()
        np.testing.assert_allclose(vm["main"](view).numpy(), want, rtol=1e-6)
    for bad in (np.zeros((3, 4), np.complex64), np.zeros((3, 4), object), np.zeros((3, 4))):
        with pytest.raises(TypeError, match=r"argument 0 \('x'\) has dtype"):
            vm["main"](bad)


def test_nan_and_inf_propagate_like_torch():
    """NaN and +-inf through elementwise ops, clamps, reductions, arg-reductions, softmax and
    matmul: the compiled results equal torch's, NaN for NaN (gelu only off the infinities,
    where torch's vectorized kernel returns NaN and numpy's formula gives +-inf)."""
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[nan, 1.0, -2.0, 0.5], [inf, -inf, 3.0, 0.0], [1.0, 2.0, -1.0, -0.5]])

    def ops(x):
        finite = x[2:]
        return (
            x.relu(), x.clamp(-1.0, 1.0), F.relu6(x), torch.tanh(x), torch.sigmoid(x), F.gelu(x[::2]),
            F.silu(x), torch.exp(x), x * 0, x - x, x / 0.0, x.sum(1), x.mean(1), x.amax(1),
            x.amin(1), F.softmax(x, 1), F.log_softmax(finite, 1), x @ x.T, torch.floor(x),
            torch.sign(x), F.elu(x), F.softplus(x), torch.where(x > 0, x, 0.0), x.max(1).values,
            torch.maximum(x, finite), torch.minimum(x, finite),
        )  # fmt: skip

    check_ops(ops, [x], "nan_inf")


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_division_by_zero_is_numpys_not_a_crash(dtype):
    """A zero divisor in integer data (and MIN // -1) made the hardware divide trap: SIGFPE
    ended the process. Every integer division and remainder is total now, with numpy's values:
    x // 0 == x % 0 == 0, MIN // -1 wraps to MIN, MIN % -1 == 0."""
    from relaxmlir.frontend import from_exported_program

    class Divide(torch.nn.Module):
        def forward(self, a, b):
            return (
                torch.floor_divide(a, b), torch.remainder(a, b), torch.fmod(a, b),
                torch.div(a, b, rounding_mode="trunc"),
            )  # fmt: skip

    low = np.iinfo(dtype).min
    if low:
        a, b = np.array([7, -7, 9, low, low, 0, 5], dtype), np.array([2, 2, 0, -1, 0, 0, -3], dtype)
    else:
        a, b = np.array([7, 200, 9, 255, 0, 5], dtype), np.array([2, 3, 0, 1, 0, 3], dtype)
    example = torch.from_numpy(a.copy()), torch.from_numpy(np.ones_like(b))
    ex = relax.build(from_exported_program(torch.export.export(Divide(), example)), "llvm")
    got = [r.numpy() for r in relax.VirtualMachine(ex, rm.cpu())["main"](a, b)]
    with np.errstate(divide="ignore", over="ignore"):
        floor, mod = np.floor_divide(a, b), np.remainder(a, b)
        fmod, trunc = np.fmod(a, b), np.trunc(a / np.where(b == 0, 1, b)).astype(dtype)
    trunc[b == 0] = 0
    if low:
        trunc[(a == low) & (b == -1)] = low  # wraps, as numpy's floor division does
    for g, want in zip(got, (floor, mod, fmod, trunc), strict=True):
        np.testing.assert_array_equal(g, want)
