"""`torch.compile(model, backend="relaxmlir")` against torch eager, float32, fixed seeds,
rtol=1e-4, atol=1e-5."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

from relaxmlir.frontend import dynamo

RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    dynamo.STATS.update(builds=0, fallbacks=0)
    yield
    torch._dynamo.reset()


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)

    def forward(self, x):
        return torch.softmax(self.b(torch.relu(self.a(x))), -1)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


def test_the_backend_is_found_by_name():
    names = [e.name for e in importlib.metadata.entry_points(group="torch_dynamo_backends")]
    assert "relaxmlir" in names, (
        "reinstall: pip install -e . (the entry point is in pyproject.toml)"
    )
    assert "relaxmlir" in torch._dynamo.list_backends(exclude_tags=())


@pytest.mark.parametrize("model,shape", [(MLP, (2, 16)), (SmallCNN, (2, 3, 12, 12))])
def test_models_match_eager_and_new_sizes_do_not_rebuild(model, shape):
    torch.manual_seed(0)
    m = model().eval()
    compiled = torch.compile(m, backend="relaxmlir")
    with torch.no_grad():
        for batch in (shape[0], 3, 5, 7):
            x = torch.randn(batch, *shape[1:])
            torch.testing.assert_close(compiled(x), m(x), rtol=RTOL, atol=ATOL)
    # the first size static, then one symbolic build serves every later size
    assert dynamo.STATS == {"builds": 2, "fallbacks": 0}


def test_dynamic_from_the_start_builds_once():
    torch.manual_seed(1)
    m = MLP().eval()
    compiled = torch.compile(m, backend="relaxmlir", dynamic=True)
    with torch.no_grad():
        for batch in (2, 4, 9):  # (dynamo specializes a size of 1)
            x = torch.randn(batch, 16)
            torch.testing.assert_close(compiled(x), m(x), rtol=RTOL, atol=ATOL)
    assert dynamo.STATS["builds"] == 1


def test_an_unsupported_graph_runs_in_torch():
    def f(x):
        return torch.special.bessel_j0(x) + 1

    compiled = torch.compile(f, backend="relaxmlir")
    x = torch.randn(4, 3)
    with pytest.warns(UserWarning, match="running this graph in torch"):
        out = compiled(x)
    torch.testing.assert_close(out, f(x))
    assert dynamo.STATS["fallbacks"] == 1


@pytest.mark.slow  # BERT's default-run check is test_dynamic_batch_and_sequence_length[bert-2layer]
def test_bert_matches_eager_across_batch_sizes():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(2)
    config = transformers.BertConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=50,
    )
    m = transformers.BertModel(config).eval()
    compiled = torch.compile(m, backend="relaxmlir")
    with torch.no_grad():
        for batch in (2, 3, 5):
            ids = torch.randint(0, 50, (batch, 8))
            got = compiled(input_ids=ids).last_hidden_state
            torch.testing.assert_close(
                got, m(input_ids=ids).last_hidden_state, rtol=RTOL, atol=1e-4
            )
    assert dynamo.STATS == {"builds": 2, "fallbacks": 0}


def _transformer(name: str):
    from test_models_transformers import MODELS, LastHidden, example_input

    make, key = MODELS[name]
    # One layer (the names keep test_models_transformers' keys): a second repeats the first's
    # graph and kernels, twice the tracing and the build for nothing that dynamo checks here.
    model = LastHidden(make(layers=1).eval(), key)
    return model, lambda batch, length=8: example_input(key, batch, length)


def _cnn(name: str):
    from test_models import MODELS

    make, inputs = MODELS[name]
    (example,) = inputs()
    return make().eval(), lambda batch: torch.randn(batch, *example.shape[1:])


MODELS = {
    **{n: _transformer for n in ("gpt2-2layer", "bert-2layer", "vit-2layer", "t5-encoder-2layer",
                                 "llama-2layer-gqa")},
    **{n: _cnn for n in ("mobilenet_v2_block", "mobilenet_v3_block", "unet_block")},
}  # fmt: skip


# The default run keeps one model of each kind; the others run with `-m slow` (the suite's
# time on CI's 2 cores stays under 10 minutes).
SLOW_MODELS = {
    "vit-2layer",
    "t5-encoder-2layer",
    "llama-2layer-gqa",
    "mobilenet_v3_block",
    "unet_block",
}


@pytest.mark.parametrize(
    "name",
    # BERT's default-run check is the dynamic test's below
    [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_MODELS | {"bert-2layer"} else n
     for n in MODELS],
)
def test_model_matches_eager_and_a_new_batch_size_does_not_rebuild(name):
    """Each model is one graph (no break, no fallback): built static for the first batch size,
    then once with a symbolic batch that serves every later size."""
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    model, make_input = MODELS[name](name)
    compiled = torch.compile(model, backend="relaxmlir")
    with torch.no_grad():
        for batch in (2, 3, 5):
            x = make_input(batch)
            torch.testing.assert_close(compiled(x), model(x), rtol=RTOL, atol=1e-4)
    assert dynamo.STATS == {"builds": 2, "fallbacks": 0}


@pytest.mark.parametrize(
    "name",  # GPT-2's default-run check is test_model_matches_eager's above
    [pytest.param(n, marks=pytest.mark.slow) for n in ("gpt2-2layer", "llama-2layer-gqa")]
    + ["bert-2layer"],
)
def test_dynamic_batch_and_sequence_length_build_once(name):
    """`dynamic=True`: symbolic batch and sequence length through torch.arange (position ids),
    slices of the static position buffers up to the length (BERT), the causal mask (GPT-2,
    Llama) and the 0-d scalar inputs dynamo passes for eps/p (baked in): one build, no
    graph break."""
    pytest.importorskip("transformers")
    torch.manual_seed(3)
    model, make_input = _transformer(name)
    compiled = torch.compile(model, backend="relaxmlir", dynamic=True)
    with torch.no_grad():
        for batch, length in ((2, 9), (3, 9), (2, 12), (4, 5)):
            ids = make_input(batch, length)
            torch.testing.assert_close(compiled(ids), model(ids), rtol=RTOL, atol=1e-4)
    assert dynamo.STATS == {"builds": 1, "fallbacks": 0}


def test_a_changed_baked_scalar_runs_the_graph_in_torch():
    """A 0-d input read only by `.item()` is built in as a constant; another value at run time
    must not reuse that build."""
    graph = torch.fx.Graph()
    x, eps = graph.placeholder("x"), graph.placeholder("eps")
    value = graph.call_method("item", (eps,))
    graph.output(graph.call_function(torch.nn.functional.layer_norm, (x, (4,), None, None, value)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    x = torch.randn(3, 4)
    run = dynamo.relaxmlir_backend(gm, [x, torch.tensor(0.5)])
    assert dynamo.STATS == {"builds": 1, "fallbacks": 0}
    for eps in (0.5, 2.0):
        want = torch.nn.functional.layer_norm(x, (4,), eps=eps)
        (got,) = run(x, torch.tensor(eps))
        torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)


def test_a_symbolic_slice_of_a_static_dim_needs_torch_bound():
    """Without dynamo's fake sizes nothing says the symbolic end stays within the static size
    (torch would clamp it): from_fx rejects it, naming the slice."""
    from relaxmlir.frontend import from_fx

    class Positions(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = torch.nn.Parameter(torch.arange(16.0))  # fx proxies parameters

        def forward(self, x):
            return x + self.pos[: x.shape[0]]

    with pytest.raises(NotImplementedError, match="static size 16 with a symbolic bound"):
        from_fx(Positions(), [("n",)])


def test_symbolic_arange_matches_numpy():
    """`relax.arange` up to a symbolic end, as the symbolic position ids above build it."""
    import numpy as np

    import relaxmlir as rm
    from relaxmlir import relax

    x = relax.Var("x", relax.TensorStructInfo(("n",), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            ranges = [relax.op.arange(0, "n"), relax.op.arange(2, "n", 3, "float32")]
            outs = [bb.emit_output(bb.emit(r)) for r in ranges]
        bb.emit_func_output(outs)
    main = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())["main"]
    for n in (2, 3, 8):
        got = main(np.zeros(n, "float32"))
        np.testing.assert_array_equal(got[0].numpy(), np.arange(n))
        np.testing.assert_array_equal(got[1].numpy(), np.arange(2, n, 3, dtype="float32"))


class _Cached(torch.nn.Module):
    """A running count and a cache written at a position, in place: dynamo passes both buffers
    to the backend as inputs that the graph writes."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("cache", torch.zeros(1, 6, 4))

    def forward(self, x, pos):
        self.steps.add_(1)
        self.cache.index_copy_(1, pos, x)
        return self.cache.sum(1) * self.steps


def test_buffers_written_in_place_are_written_back():
    """The compiled graph computes the buffers' new values, reads them after the write (the
    product sees this call's count and row) and writes them into the module's buffers, as
    eager torch does; a second call starts from the first one's buffers."""
    torch.manual_seed(0)
    model, eager = _Cached(), _Cached()
    compiled = torch.compile(model, backend="relaxmlir")
    for p in (0, 3, 3, 5):
        x, pos = torch.randn(1, 1, 4), torch.tensor([p])
        torch.testing.assert_close(compiled(x, pos), eager(x, pos), rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(model.cache, eager.cache)
    assert int(model.steps) == 4
    assert dynamo.STATS == {"builds": 1, "fallbacks": 0}
