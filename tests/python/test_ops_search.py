"""Sorting, scans and element-wise gather/scatter through both importers, against torch
(issue 13, item 2): cumsum, cumprod, cummax, cummin, logcumsumexp, sort/argsort/topk,
argmax/argmin, gather/scatter, index_select."""

import pytest
import torch
from ops_check import check_ops

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_cumsum():
    """Float and integer (int64 result) running sums, along every kind of axis, and a dtype."""

    def ops(x, i):
        return (
            torch.cumsum(x, 0), x.cumsum(-1), torch.cumsum(x, 1, dtype=torch.float64),
            torch.cumsum(i, 1), (i > 2).cumsum(0), torch.cumsum(x[0, 0, 0], 0),
        )  # fmt: skip

    x, i = torch.randn(3, 4, 5, generator=_gen(0)), torch.randint(-5, 5, (2, 6), generator=_gen(1))
    check_ops(ops, [x, i], "cumsum", rtol=1e-5, atol=1e-5)


def test_cumprod_cummax_cummin_logcumsumexp():
    """Running products (integers in int64, a dtype), maxima and minima with their indices
    (torch's: the last tie, the last NaN; NaN propagates; integers), logcumsumexp where an
    early element sits far below a later maximum (one shift by the global maximum gave -inf);
    every axis kind; 0-d inputs."""

    def ops(x, i):
        far = torch.tensor([-1000.0, 0.0, -2000.0, 5.0, 1.0]) + x[0, 0]
        return (
            torch.cumprod(x, 1), x.cumprod(-1, dtype=torch.float64), torch.cumprod(i, 0),
            torch.cummax(x, 0)[0], x.cummin(-1).values, torch.cummax(i, 1)[0],
            torch.logcumsumexp(x, 1), torch.logcumsumexp(far, 0), torch.cumprod(x[0, 0, 0], 0),
            torch.cummax(x, 2)[1], torch.cummin(x.round(), 1).indices, torch.cummax(i, 1)[1],
        )  # fmt: skip

    x = torch.randn(3, 4, 5, generator=_gen(2))
    x[1, 2, 3] = float("nan")
    i = torch.randint(-3, 4, (2, 6), generator=_gen(3))
    check_ops(ops, [x, i], "cumulative", rtol=1e-5, atol=1e-5)


def test_sort_argsort_topk_with_ties_and_nan():
    """Stable sort (ties in input order), NaN last ascending and first descending, as torch."""
    x = torch.randn(4, 7, generator=_gen(2))
    ties = torch.tensor([[3.0, 1.0, 3.0, float("nan"), 1.0, -2.0, float("nan"), 0.0]])

    def both(r):
        return r.values, r.indices

    def ops(x, t):
        return (
            *both(torch.sort(x)), *both(torch.sort(x, 0, descending=True)),
            *both(torch.sort(t, stable=True)), *both(torch.sort(t, descending=True, stable=True)),
            torch.argsort(x, dim=0), torch.argsort(t, descending=True, stable=True),
            *both(torch.topk(x, 3)), *both(torch.topk(x, 2, dim=0, largest=False)), x.argmax(1),
            x.argmin(0), torch.sort(x[0, 0]).values,
        )  # fmt: skip

    check_ops(ops, [x, ties], "sort")


def test_gather_scatter_index_select():
    x = torch.randn(3, 4, 5, generator=_gen(3))
    idx = torch.randint(0, 9, (3, 2, 5), generator=_gen(4))
    row = torch.tensor([[0, 2, 1, 0]])  # repeated targets: scatter keeps the last, scatter_add sums
    src = torch.randn(3, 4, 5, generator=_gen(5))

    def ops(x, idx, row, src):
        return (
            torch.gather(x, 1, idx.abs() % 4), x.gather(-1, idx.abs() % 5), torch.take_along_dim(x, idx.abs() % 4, 1),
            torch.scatter(x, 1, idx.abs() % 4, src[:, :2]),
            torch.scatter(x[0], 1, row.expand(4, 4), 7.5), torch.scatter_add(x[0], 0, row, src[0, :1, :4]),
            torch.index_select(x, 2, row[0]), torch.index_select(x, 0, row[0, 1:3]), torch.take(x, row),
        )  # fmt: skip

    check_ops(ops, [x, idx, row, src], "gather_scatter")


def test_scatter_duplicates_keep_the_last_write():
    """With repeated indices torch's CPU scatter writes in order: the last update wins."""
    x = torch.zeros(2, 4)
    index = torch.tensor([[1, 1, 3], [0, 0, 0]])
    src = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    check_ops(lambda x, i, s: torch.scatter(x, 1, i, s), [x, index, src], "scatter_dup")
