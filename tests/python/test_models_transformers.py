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
    """The encoder/decoder's last hidden state for token ids (what the benchmarks time), or for
    the input named `key` (ViT's pixel_values)."""

    def __init__(self, model, key: str = "input_ids"):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, ids):
        return self.model(**{self.key: ids}).last_hidden_state


def _gpt2(layers: int = 2):
    cfg = transformers.GPT2Config(
        n_layer=layers, n_embd=64, n_head=4, n_positions=64, vocab_size=100, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    return transformers.GPT2Model(cfg)  # use_cache on: its cache starts as an empty 1-D cat


def _bert(layers: int = 2):
    cfg = transformers.BertConfig(
        num_hidden_layers=layers, hidden_size=64, num_attention_heads=4, intermediate_size=128,
        vocab_size=100, max_position_embeddings=64, pad_token_id=0,
    )  # fmt: skip
    return transformers.BertModel(cfg, add_pooling_layer=False)


def _vit(layers: int = 2):
    cfg = transformers.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=layers,
        num_attention_heads=4, intermediate_size=64,
    )  # fmt: skip
    return transformers.ViTModel(cfg, add_pooling_layer=False)


def _t5_encoder(layers: int = 2):
    """Relative position buckets (log-spaced, computed from arange in the graph), RMS-style
    T5LayerNorm, ReLU feed-forward."""
    cfg = transformers.T5Config(
        vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=layers, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=16,
    )  # fmt: skip
    return transformers.T5EncoderModel(cfg)


def _llama(layers: int = 2):
    """RMSNorm, rotary embeddings, SiLU-gated MLP, grouped-query attention (4 query heads
    share 2 key/value heads), causal mask."""
    cfg = transformers.LlamaConfig(
        vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    return transformers.LlamaModel(cfg)


MODELS = {
    "gpt2-2layer": (_gpt2, "input_ids"),
    "bert-2layer": (_bert, "input_ids"),
    "vit-2layer": (_vit, "pixel_values"),
    "t5-encoder-2layer": (_t5_encoder, "input_ids"),
    "llama-2layer-gqa": (_llama, "input_ids"),
}


def example_input(key: str, batch: int = 2, length: int = 16) -> torch.Tensor:
    if key == "pixel_values":
        return torch.randn(batch, 3, 16, 16)
    return torch.randint(1, 100, (batch, length))


@pytest.mark.parametrize("name", list(MODELS))
def test_transformers_model(name):
    torch.manual_seed(0)
    make, key = MODELS[name]
    model = LastHidden(make().eval(), key)
    ids = example_input(key)
    mod = from_exported_program(torch.export.export(model, (ids,)))
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    with torch.no_grad():
        want = model(ids).numpy()
    np.testing.assert_allclose(vm["main"](ids.numpy()).numpy(), want, rtol=RTOL, atol=ATOL)


class _DecodeStep(torch.nn.Module):
    """One decode step of a transformers model over its cache (a DynamicCache rebuilt from the
    per-layer key/value tensors), with or without an attention mask over cache + new token:
    the new hidden state and every layer's grown cache."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, keys, values, *mask):
        cache = transformers.DynamicCache()
        for i, (k, v) in enumerate(zip(keys, values)):
            cache.update(k, v, i)
        mask = mask[0] if mask else None
        out = self.model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True)
        grown = out.past_key_values
        layers = [(layer.keys, layer.values) for layer in grown.layers]
        return out.last_hidden_state, [k for k, _ in layers], [v for _, v in layers]


@pytest.mark.parametrize("batch", [1, 2], ids=["batch1", "batch2-padded"])
def test_gpt2_decode_step_over_a_cache(batch):
    """GPT-2's step over a cache of symbolic length n (built once): its position ids are
    `arange(1) + n`, a symbolic size used as a tensor value; with batch 2, a padding mask over
    the n + 1 positions (the second sequence's first two masked), which transformers reads at
    batch and key indices (advanced indexing over a symbolic axis). Against torch eager at
    n = 3, 6 and 40: the hidden state and each layer's grown keys and values."""
    if not hasattr(transformers.DynamicCache(), "layers"):
        pytest.skip("this transformers' DynamicCache keeps no per-layer objects")
    torch.manual_seed(0)
    step = _DecodeStep(_gpt2().eval()).eval()

    def inputs(n):
        g = torch.Generator().manual_seed(n)
        keys, values = ([torch.randn(batch, 4, n, 16, generator=g) for _ in range(2)] for _ in "kv")
        if batch == 1:
            return keys, values, []
        mask = torch.ones(batch, n + 1, dtype=torch.long)
        mask[1, :2] = 0
        return keys, values, [mask]

    ids = torch.tensor([[5], [7]][:batch])
    n = torch.export.Dim("n", min=2, max=60)
    keys, values, mask = inputs(6)
    dynamic = (None, [{2: n}] * 2, [{2: n}] * 2) + (({1: n + 1},),) * len(mask)  # *mask
    ep = torch.export.export(step, (ids, keys, values, *mask), dynamic_shapes=dynamic)
    vm = relax.VirtualMachine(relax.build(from_exported_program(ep), "llvm"), rm.cpu())
    for length in (3, 6, 40):
        keys, values, mask = inputs(length)
        with torch.no_grad():
            hidden, k_out, v_out = step(ids, keys, values, *mask)
        got = vm["main"](ids.numpy(), *[t.numpy() for t in keys + values + mask])
        for g, w in zip(got, [hidden, *k_out, *v_out]):
            np.testing.assert_allclose(
                g.numpy(), w.numpy(), rtol=RTOL, atol=ATOL, err_msg=f"n={length}"
            )


def test_llama_static_cache_decodes_token_by_token():
    """transformers' own export route for on-device decoding (`convert_and_export_with_cache`:
    Llama over a StaticCache, written in place with `index_copy_` at `cache_position`): the
    caches are state that the VM keeps between calls. Eight greedy steps against the same torch
    module run eagerly on its own caches: the logits at each step and the tokens chosen."""
    executorch = pytest.importorskip("transformers.integrations.executorch")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=100, max_position_embeddings=64,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config).eval()
    model.generation_config.cache_implementation = "static"
    model.generation_config.cache_config = {"batch_size": 1, "max_cache_len": 16, "device": "cpu"}
    ep = executorch.convert_and_export_with_cache(model)
    vm = relax.VirtualMachine(relax.build(from_exported_program(ep), "llvm"), rm.cpu())
    assert len(vm.signature("main").state) >= 4  # a key and a value cache per layer
    reference = executorch.TorchExportableModuleWithStaticCache(model)
    ids, tokens, want_tokens = torch.tensor([[5]]), [], []
    for pos in range(8):
        position = torch.tensor([pos])
        got = vm["main"](ids.numpy(), position.numpy()).numpy()
        with torch.no_grad():
            want = reference(input_ids=ids, cache_position=position).numpy()
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"step {pos}")
        tokens.append(int(got[0, -1].argmax()))
        want_tokens.append(int(want[0, -1].argmax()))
        ids = torch.tensor([[want_tokens[-1]]])
    assert tokens == want_tokens
