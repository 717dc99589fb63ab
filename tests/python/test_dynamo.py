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


def test_unsupported_symbolic_slice_falls_back_with_its_reason():
    """BERT with a dynamic sequence length slices its 512 position ids by a symbolic bound: not
    supported yet, so the graph runs in torch and the warning says why."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(3)
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=50
    )
    m = transformers.BertModel(config).eval()
    compiled = torch.compile(m, backend="relaxmlir", dynamic=True)
    ids = torch.randint(0, 50, (2, 9))
    with torch.no_grad(), pytest.warns(UserWarning, match="with a symbolic bound"):
        got = compiled(input_ids=ids).last_hidden_state
    torch.testing.assert_close(got, m(input_ids=ids).last_hidden_state)
    assert dynamo.STATS["fallbacks"] == 1
