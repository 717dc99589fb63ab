"""Data movement and indexing through both importers, against torch (issue 13, item 2):
advanced indexing with several index tensors, narrow with a tensor start, flip/roll/repeat/
tile, chunk/unbind/stack, einsum, tril/triu/masked_fill, scaled_dot_product_attention masks,
ranks 0 and 1 in transpose/squeeze/softmax, and size-0 dims."""

import pytest
import torch
import torch.nn.functional as F
from ops_check import Fn, check_ops

from relaxmlir.frontend import from_fx

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _randn(*shape, seed: int = 0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_advanced_indexing():
    """`x[[0, 1], [2, 3]]`, index tensors on adjacent and non-adjacent axes (the result axes
    go first then), broadcasting index tensors, negative indices, ints mixed in."""
    x = _randn(3, 4, 5)
    i = torch.tensor([[0, 2], [1, -1]])
    j = torch.tensor([3, -4])

    def ops(x, i, j):
        return (
            x[[0, 1], [2, 3]], x[[0, -1], :, [4, 0]], x[:, i, j], x[i, j], x[1, j], x[i, :, j],
            x[..., j][:, [1, 2]], x[i[0]], x[:, [0, 0, 3]],
        )  # fmt: skip

    check_ops(ops, [x, i, j], "advanced_indexing")


class _Writes(torch.nn.Module):
    """Writes through index tensors as torch.export decomposes them into index_put: item
    assignment on adjacent, non-adjacent and broadcast index tensors (negative ones too),
    boolean masks with one value for every selected element, index_copy / index_add (repeated
    indices add up) / index_fill, index_put(accumulate=True), F.fold and max_unpool."""

    def forward(self, x, i, j):
        a = x.clone()
        a[:, i] = 0.5
        b = x.clone()
        b[j, i[:3]] = x[0, 0, :1] * 7
        c = x.clone()
        c[j[:2], :, i[:2]] = -2.0
        d = x.clone()
        d[x > 0.5] = 0.0
        d[x[:, 0, 0] > 0] = torch.arange(4.0)  # a row value for every selected row
        e = x.clone()
        e[torch.tensor([4, 1])] = x[:2] * 10
        pooled, where = F.max_pool1d(x, 2, return_indices=True)
        return (
            a, b, c, d, e, torch.zeros(8, 5, 4).index_copy(0, torch.tensor([7, 0, 2, 3, 1, 5]), x),
            torch.ones(3, 5, 4).index_add(0, torch.tensor([0, 2, 2, 1, 0, 2]), x),
            torch.zeros(6, 2, 4).index_add(1, torch.tensor([1, 0, 1, 1, 0]), x, alpha=2.0),
            x.index_fill(1, i[:2], -1.0),
            torch.zeros(6, 5, 4).index_put((j,), x[:3], accumulate=True),
            F.fold(x.reshape(1, 8, 15), (4, 6), 2), F.max_unpool1d(pooled, where, 2),
        )  # fmt: skip


class _SliceWrites(torch.nn.Module):
    """Slice and item assignment as torch.export decomposes them (slice_scatter,
    select_scatter, copy): a middle axis, steps, negative bounds, an int row, `+=` on the last
    column, a broadcast value, an integer source into floats; the ops called directly too."""

    def forward(self, x, r):
        b = x.clone()
        b[:, 1:3] = x[:, :2] * 2
        b[0] = 5.0
        b[..., -1] += 1.0
        b[1:, :, ::2] = r
        b[-2:, -3:-1] = torch.arange(2).reshape(2, 1, 1)
        c = torch.zeros(6, 5, 4)
        c[:, 2].copy_(x[:, 0])
        return (
            b, c, torch.slice_scatter(x, x[:, :2] * 0, 1, 3, 5),
            torch.select_scatter(x, x[:, 0, :] - 1, 1, -1),
        )  # fmt: skip


def test_slice_assignment():
    check_ops(_SliceWrites(), [_randn(6, 5, 4), _randn(5, 2, seed=1)], "slices", frontends=("ep",))


class _PerElementMask(torch.nn.Module):
    def forward(self, x, values):
        y = x.clone()
        y[x[:, 0] > 0] = values  # as many rows as the mask selects
        return y


def test_writes_through_index_tensors():
    x = _randn(6, 5, 4)
    i, j = torch.tensor([1, 3, -1, 0]), torch.tensor([0, 5, -1])
    check_ops(_Writes(), [x, i, j], "index_put", frontends=("ep",))
    from relaxmlir.frontend import from_exported_program

    ep = torch.export.export(_PerElementMask(), (_randn(6, 4), _randn(3, 4)))
    with pytest.raises(NotImplementedError, match="a value per selected element"):
        from_exported_program(ep)


def test_narrow_with_tensor_start_and_movement():
    x = _randn(3, 6, 4)

    def ops(x):
        return (
            x.narrow(1, torch.tensor(2), 3), torch.narrow(x, -1, -3, 2),
            torch.flip(x, [0, 2]), x.flip(-1), torch.fliplr(x[0]), torch.roll(x, 2, 1),
            torch.roll(x, (-1, 5), (0, 2)), torch.roll(x, 3), x.repeat(2, 1, 3),
            x[0].repeat(2, 1, 1), torch.tile(x, (2,)), torch.tile(x[0], (2, 1, 2)),
            x.chunk(4, 1)[2], torch.unbind(x, -1)[3], torch.stack([x, x * 2], 1),
            torch.tril(x, -1), torch.triu(x[0], 2), x.masked_fill(x > 0.5, -3.0),
        )  # fmt: skip

    check_ops(ops, [x], "movement")
    # a start computed in the graph (torch.export cannot trace a data-dependent start)
    def narrow(x, start):
        return x.narrow(1, start, 2)

    check_ops(narrow, [x, torch.tensor(3)], "narrow_graph_start", frontends=("fx",))


def test_einsum():
    a, b, c, d = _randn(2, 3, 4), _randn(2, 4, 5, seed=1), _randn(3, 4, seed=2), _randn(6, 4)

    def ops(a, b, c, d):
        return (
            torch.einsum("bij,bjk->bik", a, b), torch.einsum("ij,kj->ik", c, d),
            torch.einsum("ij->ji", c), torch.einsum("ij->", c), torch.einsum("i,j->ij", d[0], c[0]),
            torch.einsum("...ij,...jk", a, b), torch.einsum("ij,ij->i", c, c),
            torch.einsum("bij,bjk,kl->bil", a, b, d[:5, :2]), torch.einsum("bij->j", a),
        )  # fmt: skip

    check_ops(ops, [a, b, c, d], "einsum", rtol=1e-5, atol=1e-5)


def test_attention_masks():
    q, k, v = _randn(1, 2, 5, 4), _randn(1, 2, 6, 4, seed=1), _randn(1, 2, 6, 4, seed=2)
    mask = torch.ones(5, 6).tril().bool()

    def ops(q, k, v, m):
        return (
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
            F.scaled_dot_product_attention(q, k, v, attn_mask=m),
            F.scaled_dot_product_attention(q, k[:, :, :5], v[:, :, :5], is_causal=True),
            F.scaled_dot_product_attention(q, k, v, scale=0.3),
        )  # fmt: skip

    check_ops(ops, [q, k, v, _randn(5, 6, seed=3)], "sdpa", rtol=1e-5, atol=1e-5)


def test_small_ranks_and_empty_dims():
    """0-d: transpose/t/squeeze(0)/permute/softmax; softmax over a dim of size 0; reductions
    and elementwise ops on size-0 tensors (no kernel runs, shapes still match)."""
    s, e = torch.tensor(1.5), torch.zeros(3, 0)

    def ops(s, e):
        return (
            s.t(), s.transpose(0, -1), s.squeeze(0), s.squeeze(), s.unsqueeze(0).squeeze(-1),
            s.permute(()), F.softmax(s, 0), F.softmax(e, -1), F.softmax(e, 0), e.sum(-1),
            e.relu(), e.transpose(0, 1), e.sum(0) + 1,
        )  # fmt: skip

    check_ops(ops, [s, e], "small_ranks")


def test_bad_dims_and_masks_raise_clear_errors():
    x = (3, 4)
    with pytest.raises(ValueError, match="dim 2 is out of range for a tensor of rank 2"):
        from_fx(Fn(lambda x: x.transpose(0, 2), 1), [x])
    with pytest.raises(NotImplementedError, match="boolean mask"):
        from_fx(Fn(lambda x: x[x > 0], 1), [x])
    with pytest.raises(NotImplementedError, match="repeated label"):
        from_fx(Fn(lambda x: torch.einsum("ii->i", x), 1), [(3, 3)])
