"""from_exported_program: dynamic shapes, parameters kept as inputs, decomposition and errors
(the operator table runs through torch.export in test_frontend_fx.py's test_op, which imports
each row with both importers)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_frontend_fx import ATOL, MLP, RTOL, Fn, run
from torch import nn

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_exported_program
from relaxmlir.frontend.exported_program import decomposition_table

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def test_dynamic_batch():
    """`torch.export.Dim` becomes a symbolic dimension: one build runs every batch size."""
    torch.manual_seed(0)
    model = MLP().eval()
    batch = torch.export.Dim("batch", min=1, max=1024)
    ep = torch.export.export(model, (torch.randn(4, 784),), dynamic_shapes={"x": {0: batch}})
    mod = from_exported_program(ep)
    assert "tensor<?x784xf32>" in str(mod)
    from relaxmlir import cpu

    vm = relax.VirtualMachine(relax.build(mod, "llvm"), cpu())
    for n in (1, 7, 64):
        x = torch.randn(n, 784)
        np.testing.assert_allclose(
            vm["main"](x).numpy(),
            model(x).detach().numpy(),
            rtol=RTOL,
            atol=ATOL,
            err_msg=f"batch {n}",
        )


def test_keep_params_as_input():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU()).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
    x = torch.randn(3, 4)
    mod, params = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=True)
    assert {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"} <= set(
        params
    )
    want = model(x).detach().numpy()
    np.testing.assert_allclose(run(mod, x, *params.values())[0], want, rtol=RTOL, atol=ATOL)
    bound = relax.transform.BindParams("main", params)(mod)
    np.testing.assert_allclose(run(bound, x)[0], want, rtol=RTOL, atol=ATOL)


def test_directly_translated_ops_are_not_decomposed():
    table = decomposition_table()
    aten = torch.ops.aten
    for op in (
        aten.linear.default,
        aten.layer_norm.default,
        aten.scaled_dot_product_attention.default,
    ):
        assert op not in table, op
    assert aten.addcdiv.default in table  # no direct rule: core ATen decomposes it


class _Positions(nn.Module):
    """`arange` of a constant size (position ids, as in BERT and GPT-2), folded at import."""

    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(16, 8)

    def forward(self, x):
        positions = torch.arange(x.shape[1]).unsqueeze(0)
        return x + self.table(positions).detach_()


class _InPlace(nn.Module):
    """In place on a fresh tensor nothing else reads (ResNet's ReLU(inplace=True))."""

    def forward(self, x):
        return (x * 2).relu_() + x


class _InPlaceRead(nn.Module):
    """In place on a tensor read again afterwards (torch.export reads the op's result there)."""

    def forward(self, x):
        y = x * 2
        y.relu_()
        return y + x


class _InPlaceInput(nn.Module):
    """In place on an input."""

    def forward(self, x):
        x.relu_()
        return x * 3


class _InPlaceView(nn.Module):
    """In place on a view: another view of the same base reads the new values."""

    def forward(self, x):
        y = x.view(2, 40)
        y.relu_()
        return y * x.view(2, 40)


@pytest.mark.parametrize(
    "model, decomposed",
    [
        (_Positions(), False),
        (_InPlace(), False),
        (_InPlaceRead(), False),
        (_InPlaceInput(), True),
        (_InPlaceView(), True),
    ],
)
def test_decomposition_only_for_what_the_importer_cannot_take(model, decomposed, monkeypatch):
    """Ops without a rule whose inputs are all known (arange of a constant size) are folded at
    import and need no decomposition of the whole graph, nor in-place ops whose write nobody
    sees (they import as their functional twin); other in-place ops still do."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    ep = torch.export.export(model.eval(), (x.clone(),))
    calls = []
    run_decompositions = torch.export.ExportedProgram.run_decompositions

    def counting(self, *args, **kwargs):
        calls.append(1)
        return run_decompositions(self, *args, **kwargs)

    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", counting)
    mod = from_exported_program(ep)
    assert len(calls) == int(decomposed)
    want = model(x.clone()).detach().numpy()
    np.testing.assert_allclose(run(mod, x.clone())[0], want, rtol=RTOL, atol=ATOL)


def test_multiple_outputs():
    model = Fn(lambda x, y: (x + y, x.sum(0)), 2)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    got = run(from_exported_program(torch.export.export(model, (x, y))), x, y)
    np.testing.assert_allclose(got[0], (x + y).numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got[1], x.sum(0).numpy(), rtol=RTOL, atol=ATOL)


class _RunningTotal(nn.Module):
    """Updates a buffer in place: each call sees the sum of every earlier input."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x):
        self.total.add_(x)
        return self.total * 2


@pytest.mark.parametrize("keep_params_as_input", [False, True])
def test_buffer_updated_in_place_is_state(keep_params_as_input):
    """torch's second call returns 4s where a compiled function of the imported weights would
    return 2s again: the buffer is state that the VM keeps between calls (test_state.py)."""
    ep = torch.export.export(_RunningTotal(), (torch.ones(4),))
    mod = from_exported_program(ep, keep_params_as_input=keep_params_as_input)
    mod = mod[0] if keep_params_as_input else mod
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    for times in (2, 4, 6):
        np.testing.assert_array_equal(vm["main"](np.ones(4, np.float32)).numpy(), [times] * 4)


def test_unsupported_op_raises():
    ep = torch.export.export(Fn(torch.special.bessel_j0, 1), (torch.randn(2, 3),))
    match = r"unsupported torch op 'aten\.special_bessel_j0\.default' at node 'special_bessel_j0' \(from_exported_program\)"
    with pytest.raises(NotImplementedError, match=match):
        from_exported_program(ep)


class _CoreOps(nn.Module):
    """Many ops in one graph, to exercise the core-ATen rules in one build."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.ln = nn.LayerNorm(4)
        self.emb = nn.Embedding(6, 4)
        self.fc = nn.Linear(4, 4)

    def forward(self, x, idx):
        y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)  # 2x4x3x3
        y = F.avg_pool2d(y, 2, 1, padding=1) + F.adaptive_avg_pool2d(y, 1)
        y = y.flatten(2).transpose(1, 2)  # 2x16x4
        y = self.ln(F.gelu(self.fc(y))) + self.emb(idx)[:, :1]
        q, k = y.split(2, dim=-1)
        y = F.scaled_dot_product_attention(
            q.unsqueeze(1), k.unsqueeze(1), q.unsqueeze(1), is_causal=True
        )
        return F.log_softmax(y.squeeze(1), -1) + y.var(-1, keepdim=True).squeeze(1)


def test_core_aten_ops():
    """A program fully decomposed to core ATen (convolution, _native_batch_norm_legit_no_training,
    max_pool2d_with_indices, native_layer_norm, addmm, bmm, _softmax, any, where, ...)."""
    torch.manual_seed(0)
    model = _CoreOps().eval()
    with torch.no_grad():
        model.bn.running_var.uniform_(0.5, 2)
    args = (torch.randn(2, 3, 6, 6), torch.randint(0, 6, (2, 3)))
    ep = torch.export.export(model, args).run_decompositions()
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"aten.convolution.default", "aten.max_pool2d_with_indices.default"} <= targets
    got = run(from_exported_program(ep), *args)[0]
    np.testing.assert_allclose(got, model(*args).detach().numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("scale", [1.0, 0.5, None])
def test_sdpa_scale(scale):
    """An explicit scale, the default 1/sqrt(head size), and scale 1 (a query scaled before, as
    transformers' Whisper does), which multiplies nothing: no pass over the scores."""
    torch.manual_seed(0)

    class Attention(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, scale=scale)

    args = tuple(torch.randn(1, 2, 5, 8) for _ in range(3))
    mod = from_exported_program(torch.export.export(Attention(), args))
    assert ("relax.multiply" in str(mod.module)) == (scale != 1.0)
    got = run(mod, *args)[0]
    np.testing.assert_allclose(got, Attention()(*args).numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "mask",
    ["none", "causal", "bool rows", "float rows", "padding", "per head"],
)
def test_sdpa_grouped_query_heads(mask):
    """enable_gqa (6 query heads over 2 key/value heads, 5 queries, 7 keys, batch 2): the query
    heads of a group are rows of one product against K and V in place, with the mask tiled
    over the group's rows; a mask that differs between heads repeats K and V instead."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 6, 5, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 4)
    masks = {
        "bool rows": torch.rand(1, 1, 5, 7) > 0.3,
        "float rows": torch.randn(2, 1, 5, 7),
        "padding": torch.randn(2, 1, 1, 7),
        "per head": torch.randn(2, 6, 5, 7),
    }

    class Attention(nn.Module):
        def forward(self, q, k, v, *m):
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=m[0] if m else None, is_causal=mask == "causal", enable_gqa=True
            )

    args = (q, k, v, *([masks[mask]] if mask in masks else []))
    mod = from_exported_program(torch.export.export(Attention(), args))
    repeated = "tensor<2x2x3x7x8xf32>" in str(mod.module)  # K repeated for each query head
    assert repeated == (mask == "per head")
    got = run(mod, *args)[0]
    np.testing.assert_allclose(got, Attention()(*args).numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("decomposed", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_after_repeat_kv(causal, decomposed):
    """transformers' repeat_kv before sdpa (`x[:, :, None].expand(..).reshape(..)`, Llama's
    and Qwen2's attention): grouped as with enable_gqa, the repeats left unused and removed;
    also decomposed to core ATen (as a program with a StaticCache is), where the reshape of
    the expanded view is a clone and a view."""
    torch.manual_seed(0)

    class Attention(nn.Module):
        def forward(self, q, k, v):
            def repeat(x):
                b, kv, n, d = x.shape
                return x[:, :, None, :, :].expand(b, kv, 3, n, d).reshape(b, kv * 3, n, d)

            return F.scaled_dot_product_attention(q, repeat(k), repeat(v), is_causal=causal)

    args = (torch.randn(2, 6, 5, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8))
    ep = torch.export.export(Attention(), args)
    if decomposed:
        ep = ep.run_decompositions(decomposition_table())
        assert "aten.clone" in str(ep.graph)
    mod = from_exported_program(ep)
    with rm.target.Target("llvm"):
        text = str(relax.get_pipeline("zero")(mod).module)
    assert "x6x7x8xf32>" not in text  # no repeated K or V
    got = run(mod, *args)[0]
    np.testing.assert_allclose(got, Attention()(*args).numpy(), rtol=RTOL, atol=ATOL)


def test_symbolic_size_as_a_tensor_value():
    """A symbolic size in tensor arithmetic (`arange(3) + x.shape[1]`: the positions after a
    cache of n rows) is a 0-d tensor of its value, and the last row of a symbolic axis
    (`x[:, -1:]`, TE's extent `((n - (n + -1)) + 0) // 1`) has the static size 1."""

    class Positions(nn.Module):
        def forward(self, x):
            return torch.arange(3) + x.shape[1], x[:, -1:] * 2

    n = torch.export.Dim("n", min=1, max=512)
    ep = torch.export.export(Positions(), (torch.randn(2, 5),), dynamic_shapes=({1: n},))
    vm = relax.VirtualMachine(relax.build(from_exported_program(ep), "llvm"), rm.cpu())
    for size in (1, 7, 300):
        x = torch.randn(2, size)
        positions, last = vm["main"](x.numpy())
        np.testing.assert_array_equal(positions.numpy(), np.arange(3) + size)
        np.testing.assert_array_equal(last.numpy(), x[:, -1:].numpy() * 2)


def test_select_from_the_end_of_a_symbolic_axis():
    """`x[:, -1]` and `x[:, -2]` over a symbolic axis (the last token's logits of a prompt of
    any length, then its argmax): the index counts from the runtime end. Exact against torch."""

    class Last(nn.Module):
        def forward(self, x):
            return x[:, -1].argmax(-1), x[:, -2] * 2

    n = torch.export.Dim("n", min=2, max=512)
    ep = torch.export.export(Last(), (torch.randn(2, 5, 4),), dynamic_shapes=({1: n},))
    vm = relax.VirtualMachine(relax.build(from_exported_program(ep), "llvm"), rm.cpu())
    for size in (2, 9, 100):
        x = torch.randn(2, size, 4)
        for got, want in zip(vm["main"](x.numpy()), Last()(x)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_advanced_index_over_a_symbolic_axis():
    """Two index tensors over a batch and a symbolic axis (a padding mask read at batch and key
    positions, as transformers builds it over a cache of n rows): the merged axis and its
    strides are symbolic. Exact against torch at n = 1, 5, 64."""

    class Index(nn.Module):
        def forward(self, x):
            n = x.shape[1]
            rows = torch.arange(2)[:, None]
            cols = n - 1 - torch.arange(n)[None, :]
            return x[rows, cols]

    n = torch.export.Dim("n", min=1, max=512)
    ep = torch.export.export(Index(), (torch.randn(2, 5),), dynamic_shapes=({1: n},))
    vm = relax.VirtualMachine(relax.build(from_exported_program(ep), "llvm"), rm.cpu())
    for size in (1, 5, 64):
        x = torch.randn(2, size)
        np.testing.assert_array_equal(vm["main"](x.numpy()).numpy(), Index()(x).numpy())


class _Recurrent(nn.Module):
    def __init__(self, cell, **kwargs):
        super().__init__()
        self.rnn = cell(8, 16, **kwargs)

    def forward(self, x):
        out, state = self.rnn(x)
        return (out, *state) if isinstance(state, tuple) else (out, state)


_RECURRENT_CONFIGS = {
    "plain": {},
    "2-layers-batch-first": {"num_layers": 2, "batch_first": True},
    "bidirectional": {"bidirectional": True},
    "2-bidirectional-no-bias": {
        "num_layers": 2, "bidirectional": True, "bias": False, "batch_first": True
    },
}  # fmt: skip


def _recurrent_params() -> list:
    """Every cell with and without biases (the other configurations too), and LSTM (the cell
    with a second state) in every configuration by default. The layers, directions and
    batch_first are handled once for the four cells (rules/recurrent.py's `_recurrent`): the
    other cells' middle configurations run with `-m slow`."""
    middle = ("2-layers-batch-first", "bidirectional")
    return [
        pytest.param(
            cell, _RECURRENT_CONFIGS[config], id=f"{cell}-{config}",
            marks=[pytest.mark.slow] if cell != "LSTM" and config in middle else [],
        )
        for cell in ("LSTM", "GRU", "RNN", "RNN-relu")
        for config in _RECURRENT_CONFIGS
    ]  # fmt: skip


@pytest.mark.parametrize("cell, kwargs", _recurrent_params())
def test_recurrent_layers(cell, kwargs):
    """aten.lstm / gru / rnn_tanh / rnn_relu translated directly (no run_decompositions: torch's
    unrolling of a 64-step LSTM took 2.8 s of its import): the output and the last states
    (h_n, and c_n for an LSTM) against torch eager."""
    from relaxmlir.frontend.exported_program import _untranslated

    torch.manual_seed(0)
    kind = getattr(nn, cell.split("-")[0])
    extra = {"nonlinearity": "relu"} if cell == "RNN-relu" else {}
    model = _Recurrent(kind, **kwargs, **extra).eval()
    x = torch.randn(2, 5, 8) if kwargs.get("batch_first") else torch.randn(5, 2, 8)
    ep = torch.export.export(model, (x,))
    assert not _untranslated(ep)
    got = run(from_exported_program(ep), x)
    want = model(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_recurrent_projection_rejected():
    """An LSTM with proj_size has a weight more per layer: named, not mistranslated."""
    model = _Recurrent(nn.LSTM, proj_size=4).eval()
    ep = torch.export.export(model, (torch.randn(5, 2, 8),))
    with pytest.raises(NotImplementedError, match="proj_size"):
        from_exported_program(ep)
