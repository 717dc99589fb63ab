"""Real model code from `transformers` (small configs, random weights, no downloads), through
`torch.export` + `from_exported_program`, numeric against torch eager (rtol=1e-4, atol=1e-5 on
f32 hidden states; fixed seeds)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_exported_program

transformers = pytest.importorskip("transformers")

RTOL, ATOL = 1e-4, 1e-5


class LastHidden(torch.nn.Module):
    """The encoder/decoder's last hidden state for token ids (what the benchmarks time)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids).last_hidden_state


def _gpt2():
    cfg = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=100, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    return transformers.GPT2Model(cfg)  # use_cache on: its cache starts as an empty 1-D cat


def _bert():
    cfg = transformers.BertConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
        vocab_size=100, max_position_embeddings=64, pad_token_id=0,
    )  # fmt: skip
    return transformers.BertModel(cfg, add_pooling_layer=False)


@pytest.mark.parametrize("make", [_gpt2, _bert], ids=["gpt2-2layer", "bert-2layer"])
def test_transformers_model(make):
    torch.manual_seed(0)
    model = LastHidden(make().eval())
    ids = torch.randint(1, 100, (2, 16))
    mod = from_exported_program(torch.export.export(model, (ids,)))
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    with torch.no_grad():
        want = model(ids).numpy()
    np.testing.assert_allclose(vm["main"](ids.numpy()).numpy(), want, rtol=RTOL, atol=ATOL)
