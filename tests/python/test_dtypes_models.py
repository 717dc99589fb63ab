"""Models whose weights are `.half()` / `.to(torch.bfloat16)`: transformers BERT and a Llama-style
decoder (2 layers, small configs, random weights, no downloads) and a float16 CNN block, through
`torch.export` + `from_exported_program`, against torch eager in the same dtype.

Tolerance: both sides round every op to 16 bits, but in different places (fused kernels, f32
summation order), so the outputs of a 2-layer model differ by a few ulps of the dtype, not by
torch.testing's single-op default. The check is relative to the size of the output: the largest
difference must stay below TOL x max|output| (float16 1e-2, bfloat16 5e-2), and below the
difference between torch's own 16-bit and float32 runs times 1.5 (we are no further from
the exact answer than torch's 16-bit run is, give or take).
"""

from __future__ import annotations

import pytest
import torch

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_exported_program
from relaxmlir.frontend.importer import to_torch

transformers = pytest.importorskip("transformers")

TOL = {torch.float16: 1e-2, torch.bfloat16: 5e-2}


class LastHidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids).last_hidden_state


def _bert():
    cfg = transformers.BertConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
        vocab_size=100, max_position_embeddings=64, pad_token_id=0,
    )  # fmt: skip
    return LastHidden(transformers.BertModel(cfg, add_pooling_layer=False))


def _llama():
    """RMSNorm, rotary embeddings, SiLU gating, grouped-query attention (4 heads, 2 kv heads)."""
    cfg = transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, vocab_size=100, max_position_embeddings=64, use_cache=False,
    )  # fmt: skip
    return LastHidden(transformers.LlamaModel(cfg))


def _cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(8, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1, groups=1),
        torch.nn.MaxPool2d(2),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 10),
    )


def _check(model: torch.nn.Module, dtype: torch.dtype, inputs: tuple) -> None:
    reference = model.float().eval()
    with torch.no_grad():
        exact = reference(*inputs).float()
    model = model.to(dtype).eval()
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    with torch.no_grad():
        want = model(*inputs)
    mod = from_exported_program(torch.export.export(model, inputs))
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    got = to_torch(vm["main"](*inputs).numpy())
    assert got.dtype == dtype and got.shape == want.shape
    ours = (got.float() - want.float()).abs().max().item()
    scale = want.float().abs().max().item()
    torch_error = (want.float() - exact).abs().max().item()
    assert ours <= TOL[dtype] * scale, f"{dtype}: max difference {ours} vs torch, output scale {scale}"
    ours_exact = (got.float() - exact).abs().max().item()
    assert ours_exact <= 1.5 * torch_error + 1e-6, (
        f"{dtype}: {ours_exact} from the float32 answer, torch's own {dtype} run {torch_error}"
    )


# Each model in one dtype by default and each dtype through one model; the other two pairs run
# with `-m slow`. The ops of both models in both dtypes: test_dtypes' test_half_ops.
@pytest.mark.parametrize(
    "make, dtype",
    [
        pytest.param(_bert, torch.float16, id="bert-2layer-torch.float16"),
        pytest.param(_bert, torch.bfloat16, id="bert-2layer-torch.bfloat16", marks=pytest.mark.slow),
        pytest.param(_llama, torch.float16, id="llama-2layer-torch.float16", marks=pytest.mark.slow),
        pytest.param(_llama, torch.bfloat16, id="llama-2layer-torch.bfloat16"),
    ],
)
def test_transformer_16bit(make, dtype):
    torch.manual_seed(0)
    _check(make(), dtype, (torch.randint(1, 100, (2, 16)),))


def test_cnn_block_float16():
    torch.manual_seed(0)
    model = _cnn()
    with torch.no_grad():  # non-trivial running statistics
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 1.5)
    _check(model, torch.float16, (torch.randn(2, 8, 12, 12),))
