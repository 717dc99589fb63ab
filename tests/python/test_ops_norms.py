"""Norms, var_mean/std_mean, diagonals and bool-vs-scalar promotion through both importers,
against torch eager.

The norms, diagonal, trace and var_mean are composed of relax reductions and `take` in the
frontend rules (relaxmlir/frontend/rules/linalg.py, reduction.py); the bool cases check that a
python scalar beside a bool tensor follows torch's promotion (`(a > 0) == 2` compares numbers,
`(a > 0) + 1` is int64) and that bool/uint8 constants keep their dtype through the build.
Tolerances: float32 rtol=1e-5, atol=1e-6 unless stated.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from ops_check import check_ops
from test_frontend_fx import import_model, run

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_exported_program, from_fx

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

INF = math.inf


def _random(*shape, seed: int = 0):
    torch.manual_seed(seed)
    return torch.randn(*shape)


def _with_zeros(*shape):
    """Random values with exact zeros (ord 0 counts them, negative orders see |0|^p = inf)."""
    x = _random(*shape)
    x[x.abs() < 0.4] = 0.0
    return x


# -- vector norms -------------------------------------------------------------------------------
@pytest.mark.parametrize("ord", [2, 1, INF, -INF, 0, 3, 0.5, -1.5])
def test_vector_norm_ords(ord):
    """Each ord over all dims, one dim, several dims with keepdim, the last dim with keepdim."""

    def ops(x):
        return (
            torch.linalg.vector_norm(x, ord),
            torch.linalg.vector_norm(x, ord, 1),
            torch.linalg.vector_norm(x, ord, (0, 2), True),
            torch.linalg.vector_norm(x, ord, dim=-1, keepdim=True),
            torch.linalg.vector_norm(x, ord, keepdim=True),
        )

    check_ops(ops, [_with_zeros(3, 4, 5)], f"vector_norm ord={ord}", rtol=1e-5, atol=1e-6)


def test_norm_spellings():
    """torch.norm / Tensor.norm ("fro" default, number p, dim int/tuple) and torch.linalg.norm
    (flattened, vector over a dim, 1-D with an ord, the matrix norms without singular values;
    those of an empty matrix are 0, as in torch)."""

    def ops(x, m, v, e):
        return (
            torch.norm(x), torch.norm(x, dim=1), torch.norm(x, p=3, dim=1, keepdim=True),
            x.norm(), x.norm(1, dim=(0, 1)), x.norm(p="fro", dim=(1, 2)), x.norm(float("inf")),
            torch.linalg.norm(x), torch.linalg.norm(x, dim=-1), torch.linalg.norm(v, 3),
            torch.linalg.norm(m, INF), torch.linalg.norm(m, -INF), torch.linalg.norm(m, 1),
            torch.linalg.norm(m, -1), torch.linalg.norm(m, "fro"),
            torch.linalg.norm(x, 1, dim=(0, 2), keepdim=True),
            torch.linalg.norm(x, -INF, dim=(2, 1)), torch.linalg.norm(e, INF),
            torch.linalg.norm(e.T, 1, keepdim=True),
        )  # fmt: skip

    inputs = [_random(3, 4, 5), _random(4, 6, seed=1), _random(7, seed=2), torch.zeros(0, 5)]
    check_ops(ops, inputs, "norms")


def test_vector_norm_dtype_and_half():
    """dtype= casts the input first; float16 is computed in float32 and cast back (as torch
    accumulates it); a 0-d input is its own |x|."""
    x, h, s = _random(4, 8), _random(4, 8, seed=1).half(), torch.tensor(-2.5)
    check_ops(
        lambda x, s: (
            torch.linalg.vector_norm(x, dtype=torch.float64),
            torch.linalg.vector_norm(x, 2.5, -1, dtype=torch.float64),
            torch.linalg.vector_norm(s),
            torch.linalg.vector_norm(s, 0),
            torch.linalg.vector_norm(s, 3, keepdim=True),
            torch.norm(s, INF),
        ),
        [x, s],
        "norm dtype",
    )
    check_ops(
        lambda h: (
            torch.linalg.vector_norm(h),
            torch.linalg.vector_norm(h, 3, 1),
            torch.linalg.vector_norm(h, 1, dtype=torch.float32),
            F.normalize(h),
        ),
        [h],
        "norm half",
        rtol=1e-3,
        atol=1e-3,
    )


def test_norm_refuses_integers():
    """torch refuses an integer input (and an integer or narrowing dtype=); so does from_fx
    (torch.export fails on them itself: nothing reaches from_exported_program)."""
    i = torch.arange(6).reshape(2, 3)
    with pytest.raises(RuntimeError, match="floating point"):
        torch.linalg.vector_norm(i)
    cases = {
        "expected a floating point tensor": (lambda i: torch.linalg.vector_norm(i), i),
        "dtype= must be a floating point": (
            lambda x: torch.linalg.vector_norm(x, dtype=torch.int64), i.float()),
        "would narrow": (lambda x: torch.linalg.vector_norm(x, dtype=torch.float16), i.float()),
        "cosine_similarity: expected floating point": (
            lambda i: F.cosine_similarity(i, i + 1), i),
    }  # fmt: skip
    for message, (fn, x) in cases.items():
        with pytest.raises(TypeError, match=message):
            from_fx(_Fn(fn), [tuple(x.shape)], input_dtypes=[x.dtype])


def test_matrix_norm_with_singular_values_is_refused():
    with pytest.raises(ValueError, match=r"linalg.norm: matrix norm ord='nuc'"):
        from_fx(_Fn(lambda m: torch.linalg.norm(m, "nuc")), [(3, 3)])
    with pytest.raises(ValueError, match=r"norm: p='nuc'"):
        from_fx(_Fn(lambda m: torch.norm(m, "nuc")), [(3, 3)])


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


# -- what torch builds of norms -----------------------------------------------------------------
def test_normalize_cosine_pairwise():
    """F.normalize (a zero row meets the eps clamp), cosine_similarity with broadcasting and
    a float64 input, pairwise_distance."""
    x = _random(4, 16)
    x[1] = 0.0
    y, i = _random(1, 16, seed=1), torch.arange(-6.0, 6.0, dtype=torch.float64).reshape(3, 4)

    def ops(x, y, i):
        return (
            F.normalize(x), F.normalize(x, dim=-1), F.normalize(x, p=1, dim=0),
            F.normalize(x, p=INF, dim=1, eps=0.5),
            F.cosine_similarity(x, y), F.cosine_similarity(x, y, dim=-1),
            F.cosine_similarity(i, i.flip(1), dim=0), torch.cosine_similarity(x[2:], x[:2]),
            F.pairwise_distance(x, y), F.pairwise_distance(x, y, p=1, keepdim=True),
        )  # fmt: skip

    check_ops(ops, [x, y, i], "normalize/cosine/pairwise")


@pytest.mark.parametrize("p", [2.0, 1.0, INF, 0.0, 3.0])
def test_cdist(p):
    """Batched cdist (P, R <= 25: torch's exact difference form, which the import computes)."""
    a, b = _random(2, 5, 3), _random(2, 7, 3, seed=1)
    b[0, 0] = a[0, 0]  # a zero distance
    check_ops(lambda a, b: torch.cdist(a, b, p=p), [a, b], f"cdist p={p}")


def test_normalize_symbolic_batch():
    """One build of F.normalize over a `torch.export.Dim` batch runs two batch sizes."""
    batch = torch.export.Dim("batch", min=1, max=64)
    model = _Fn(lambda x: F.normalize(x, dim=-1) * torch.linalg.vector_norm(x, 3, 0))
    ep = torch.export.export(model, (_random(4, 16),), dynamic_shapes=({0: batch},))
    mod = from_exported_program(ep)
    assert "tensor<?x16xf32>" in str(mod)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    for n in (3, 9):
        x = _random(n, 16, seed=n)
        want = model(x).numpy()
        np.testing.assert_allclose(vm["main"](x).numpy(), want, rtol=1e-5, atol=1e-6)


# -- var_mean / std_mean ------------------------------------------------------------------------
def _pairs(*results) -> tuple:
    """The outputs of (var, mean) pairs, indexed (an fx proxy cannot be unpacked)."""
    return tuple(r[i] for r in results for i in (0, 1))


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_mean_std_mean(correction):
    """(var, mean) and (std, mean) over all dims, one dim, a list of dims, with keepdim."""
    c = correction

    def ops(x):
        return _pairs(
            torch.var_mean(x, correction=c), torch.std_mean(x, 1, correction=c),
            torch.var_mean(x, [0, 2], correction=c, keepdim=True),
            torch.std_mean(x, dim=-1, keepdim=True, correction=c),
        )  # fmt: skip

    check_ops(ops, [_random(3, 4, 5) * 2 + 1], f"var_mean correction={c}")


def test_var_mean_unbiased_spellings():
    check_ops(
        lambda x: _pairs(
            torch.var_mean(x, False),
            torch.std_mean(x, 0, True, True),
            torch.var_mean(x, 1, unbiased=False),
            torch.std_mean(x, unbiased=True),
        ),
        [_random(4, 6)],
        "var_mean unbiased",
    )


# -- diagonal / diag / trace --------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,offsets,dims",
    [
        ((4, 6), (0, 2, 5, -1, -3), (0, 1)),  # wide, offsets to the last column and below
        ((6, 4), (0, 3, -2, -5), (1, 0)),  # tall, the dims swapped
        ((2, 3, 5), (0, 1, -2), (1, 2)),  # batched over dim 0
        ((3, 4, 5), (0, 2, -1), (-1, 0)),  # the diagonal between the last and first dims
        ((4, 6), (7, -4, -9), (0, 1)),  # off the edge: empty, as in torch
    ],
)
def test_diagonal(shape, offsets, dims):
    d1, d2 = dims
    check_ops(
        lambda x: (
            tuple(torch.diagonal(x, k, d1, d2) for k in offsets)
            + (x.diagonal(offsets[-1], dim1=d1, dim2=d2),)
        ),
        [_random(*shape)],
        f"diagonal {shape} {offsets} {dims}",
    )


def test_diagonal_symbolic_batch():
    """A symbolic batch dim rides along (one build, two sizes); symbolic diagonal dims are refused
    with the op and the dims named."""
    model = _Fn(lambda x: torch.diagonal(x, 1, 1, 2) + torch.diagonal(x, -1, 2, 1))
    vm = relax.VirtualMachine(relax.build(from_fx(model, [("b", 3, 4)]), "llvm"), rm.cpu())
    for n in (1, 5):
        x = _random(n, 3, 4, seed=n)
        np.testing.assert_array_equal(vm["main"](x).numpy(), model(x).numpy())
    with pytest.raises(ValueError, match=r"diagonal: dim1=0, dim2=1 must have static sizes"):
        from_fx(_Fn(torch.diagonal), [("n", "n")])


def test_diag_and_trace():
    """torch.diag of a matrix (its diagonal k) and of a vector (the matrix with it on diagonal k);
    torch.trace of floats and of int32 (summed in int64, as torch does)."""
    m, v, i = _random(4, 5), _random(3, seed=1), torch.arange(12, dtype=torch.int32).reshape(3, 4)

    def ops(m, v, i):
        return (
            torch.diag(m), torch.diag(m, 2), m.diag(-1), torch.diag(v), torch.diag(v, 2),
            v.diag(-1), torch.trace(m), m.trace(), torch.trace(i), torch.diag(i, 1),
        )  # fmt: skip

    check_ops(ops, [m, v, i], "diag/trace")


# -- bool tensors beside python scalars ---------------------------------------------------------
def test_bool_scalar_promotion_and_count_nonzero():
    """A python int beside a bool tensor promotes it to int64 (a comparison compares numbers:
    `== 2` is never true), a float to float32, a bool stays bool; uint8 constants stay uint8."""
    a, u = _random(3, 5), torch.arange(0, 250, 17, dtype=torch.uint8).reshape(3, 5)

    def ops(a, u):
        m = a > 0
        return (
            torch.count_nonzero(m, 1), torch.count_nonzero(a), torch.count_nonzero(m, (0, 1)),
            m.count_nonzero(0), m != 0, m == 1, m == 2, m == True, m != False, m > 0,
            m + 1, m * 2.5, m * 2, m.sum(), m.sum(1), u + 1, u > 100, u * 2, m | True,
        )  # fmt: skip

    check_ops(ops, [a, u], "bool vs scalar")


@pytest.mark.parametrize("frontend", ["fx", "ep"])
def test_count_nonzero_of_comparison(frontend):
    """The reported case: `torch.count_nonzero(a > 0, 1)` (export decomposes it to `ne` + `sum`)."""
    a = _random(4, 7)
    model = _Fn(lambda a: torch.count_nonzero(a > 0, 1))
    got = run(import_model(model, [a], frontend), a)[0]
    np.testing.assert_array_equal(got, model(a).numpy())
    assert got.dtype == np.int64
