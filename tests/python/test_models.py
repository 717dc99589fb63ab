"""Model-level acceptance: whole PyTorch models through both importers, numeric vs torch eager
(float32, fixed seeds, rtol=1e-4, atol=1e-5)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from ops_check import check_ops
from test_frontend_fx import ATOL, MLP, RTOL, check_numeric, run
from torch import nn

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_exported_program, from_fx


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def _randomize_batch_norms(model: nn.Module) -> nn.Module:
    """Non-trivial running statistics and affine parameters, so that BatchNorm is no identity."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, num_classes)
        _randomize_batch_norms(self)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class GPTBlock(nn.Module):
    """A tiny GPT: token + position embeddings, one pre-norm decoder block with causal masked
    self-attention and a GELU MLP, final layer norm and LM head."""

    def __init__(self, vocab: int = 50, d: int = 32, heads: int = 4, block: int = 8):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU()
        self.out = nn.Linear(4 * d, d)
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        B, T = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(T))
        C = x.size(-1)
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.triu(torch.ones((T, T), dtype=torch.bool), diagonal=1)
        att = att.masked_fill(causal, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        x = x + self.out(self.gelu(self.fc(self.ln2(x))))
        return self.head(self.ln_f(x))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion, 3x3 depthwise, linear 1x1 projection (ReLU6, BN),
    with the residual when the shapes agree."""

    def __init__(self, cin: int = 8, cout: int = 8, stride: int = 1, expand: int = 4):
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        _randomize_batch_norms(self)

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, reduction: int = 4):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, channels // reduction, 1)
        self.fc2 = nn.Conv2d(channels // reduction, channels, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class MobileNetV3Block(nn.Module):
    """MobileNetV3's bneck: 1x1 expansion, 5x5 depthwise with stride 2 (hardswish),
    squeeze-excite gated by hardsigmoid, linear 1x1 projection."""

    def __init__(self, cin: int = 8, cout: int = 16, kernel: int = 5, expand: int = 3):
        super().__init__()
        hidden = cin * expand
        self.expand = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.Hardswish()
        )
        self.depthwise = nn.Sequential(
            nn.Conv2d(hidden, hidden, kernel, 2, kernel // 2, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.Hardswish(),
        )
        self.se = SqueezeExcite(hidden)
        self.project = nn.Sequential(nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))
        _randomize_batch_norms(self)

    def forward(self, x):
        return self.project(self.se(self.depthwise(self.expand(x))))


class UNetBlock(nn.Module):
    """One UNet level: conv, max-pool down, conv, up again (a stride-2 conv_transpose2d, or
    bilinear upsampling + 1x1 conv), concatenated with the skip connection, fused by convs."""

    def __init__(self, c: int = 4, up: str = "transpose"):
        super().__init__()
        self.down1 = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.ReLU())
        self.down2 = nn.Sequential(nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU())
        if up == "transpose":
            self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        else:
            self.up = nn.Sequential(
                nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                nn.Conv2d(2 * c, c, 1),
            )
        self.fuse = nn.Sequential(nn.Conv2d(2 * c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, 1, 1))

    def forward(self, x):
        skip = self.down1(x)
        y = self.up(self.down2(F.max_pool2d(skip, 2)))
        return self.fuse(torch.cat([y, skip], dim=1))


def _transformer_layer():
    return nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0
    )


MODELS = {
    "mlp": (MLP, lambda: [torch.randn(4, 784)]),
    "lenet": (LeNet, lambda: [torch.randn(2, 1, 28, 28)]),
    "resnet": (ResNet, lambda: [torch.randn(2, 3, 16, 16)]),
    "transformer_encoder_layer": (_transformer_layer, lambda: [torch.randn(2, 5, 32)]),
    "gpt_block": (GPTBlock, lambda: [torch.randint(0, 50, (2, 8))]),
    "mobilenet_v2_block": (InvertedResidual, lambda: [torch.randn(2, 8, 10, 10)]),
    "mobilenet_v2_block_s2": (lambda: InvertedResidual(8, 12, 2), lambda: [torch.randn(2, 8, 9, 9)]),
    "mobilenet_v3_block": (MobileNetV3Block, lambda: [torch.randn(2, 8, 12, 12)]),
    "unet_block": (UNetBlock, lambda: [torch.randn(2, 3, 16, 16)]),
    "unet_block_upsample": (lambda: UNetBlock(up="upsample"), lambda: [torch.randn(2, 3, 16, 16)]),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_model(name: str):
    """Through both importers (ops_check: a module both make alike, as most of these, is built
    and run once)."""
    torch.manual_seed(0)
    make, inputs = MODELS[name]
    check_ops(make().eval(), inputs(), name, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            n, marks=[] if n in ("transformer_encoder_layer", "gpt_block") else [pytest.mark.slow]
        )
        for n in MODELS
    ],
)
def test_model_core_aten(name: str):
    """The exported program fully decomposed to core ATen first (bmm, addmm, native_layer_norm,
    the safe-softmax pattern of scaled_dot_product_attention, ...)."""
    torch.manual_seed(0)
    make, inputs = MODELS[name]
    model, args = make().eval(), inputs()
    ep = torch.export.export(model, tuple(args)).run_decompositions()
    got = run(from_exported_program(ep), *args)[0]
    np.testing.assert_allclose(
        got, model(*args).detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=name
    )


@pytest.mark.parametrize(
    ("name", "frontend"),
    [
        ("transformer_encoder_layer", "fx"),
        ("lenet", "ep"),
        # ResNet's pieces for any batch through torch.export run by default in test_conv_layout's
        # test_symbolic_batch_keeps_the_blocked_layout and test_symbolic_schedule's
        # test_residual_block_for_any_batch (their build is 4x the static one's)
        pytest.param("resnet", "ep", marks=pytest.mark.slow),
        ("resnet", "fx"),
        ("mobilenet_v2_block", "ep"),
    ],
)
def test_model_symbolic_batch(name: str, frontend: str):
    """A symbolic batch through reshapes, attention and convolutions: one build, any batch.
    The batch norms (a multiply-add with their constant statistics, unless folded into a
    convolution) keep the batch's symbol: with a fresh one the ops after them failed to
    legalize."""
    torch.manual_seed(0)
    make, inputs = MODELS[name]
    model, (example,) = make().eval(), inputs()
    if frontend == "fx":
        mod = from_fx(model, [("b", *example.shape[1:])])
    else:
        batch = {0: torch.export.Dim("b", max=64)}
        ep = torch.export.export(model, (example,), dynamic_shapes=[batch])
        mod = from_exported_program(ep)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    for n in (1, 3):
        x = torch.randn(n, *example.shape[1:])
        want = model(x).detach().numpy()
        np.testing.assert_allclose(
            vm["main"](x).numpy(), want, rtol=RTOL, atol=ATOL, err_msg=f"{name} batch {n}"
        )


def _weights_as_inputs_params() -> list:
    """Every network lifted; per call (the same weight transforms, run inside main) by default
    for resnet (convolutions with folded batch norms, blocked) and gpt_block (linear layers),
    the other networks with `-m slow` (test_conv's "param" cases transform depthwise, grouped
    and strided convolutions' weights per call, test_ops_nn's conv_transpose flips its
    weights in the graph)."""
    names = ["resnet", "mobilenet_v2_block", "mobilenet_v3_block", "unet_block", "gpt_block"]
    return [
        pytest.param(
            name, lifted, id=f"{name}-{'lifted' if lifted else 'per-call'}",
            marks=[] if lifted or name in ("resnet", "gpt_block") else [pytest.mark.slow],
        )
        for lifted in (True, False)
        for name in names
    ]  # fmt: skip


@pytest.mark.parametrize("name, lifted", _weights_as_inputs_params())
def test_model_weights_as_inputs(name: str, lifted: bool):
    """Weights kept as inputs: batch norms fold and convolutions take the blocked layout as
    relax ops on the weights, which LiftTransformParams computes once (`lifted`: checked to
    return the blocked 6-D conv weights) or every call runs."""
    torch.manual_seed(0)
    make, inputs = MODELS[name]
    model, (x,) = make().eval(), inputs()
    ep = torch.export.export(model, (x,))
    mod, params = from_exported_program(ep, keep_params_as_input=True)
    if lifted:
        mod = relax.transform.LiftTransformParams()(mod)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    weights = [rm.nd.array(p) for p in params.values()]
    if lifted:
        weights = vm["main_transform_params"](*weights)
        weights = list(weights) if isinstance(weights, (list, tuple)) else [weights]
        if name != "gpt_block":
            assert any(len(w.shape) == 6 for w in weights), [w.shape for w in weights]
    got = vm["main"](rm.nd.array(x.numpy()), *weights).numpy()
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=name)


class Recurrent(nn.Module):
    """A two-layer recurrent network (torch's LSTM, GRU or Elman RNN) and a classifier on its
    last step: torch.export unrolls the cells over the sequence."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(8, 16, 2, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU, nn.RNN], ids=lambda c: c.__name__)
def test_recurrent_model(cell):
    """Unrolled recurrent cells against torch eager, and their recurrent weights folded once:
    each step transposes the same weight, and one folded copy per step (nine per layer here)
    would each be packed and stored (an LSTM of 64 steps ran 2.8x slower streaming them). The
    steps' slices of the inputs' projection are one split (`relax-combine-slices`), so the
    steps' kernels are equal."""
    torch.manual_seed(0)
    model, x = Recurrent(cell).eval(), torch.randn(2, 9, 8)
    check_numeric(model, [x], "ep", cell.__name__)
    mod = from_exported_program(torch.export.export(model, (x,)))
    with rm.target.Target("llvm"):
        text = str(relax.get_pipeline("zero")(mod).module)
    gates = {nn.LSTM: 4, nn.GRU: 3, nn.RNN: 1}[cell] * 16
    # the recurrent weights [gates, 16] transposed, one per layer (layer 1's input weight too)
    assert text.count(f"-> tensor<16x{gates}xf32>") == 3, text.count(f"-> tensor<16x{gates}xf32>")
    assert "callee = @split" in text


class DecodeStep(nn.Module):
    """One decoder step with explicit KV caches (Llama-style: RMSNorm, SiLU-gated MLP): the new
    token's keys and values appended to caches of any length, attention over them."""

    def __init__(self, d=64, heads=4, layers=2, vocab=50):
        super().__init__()
        self.heads, self.d = heads, d
        self.emb = nn.Embedding(vocab, d)
        self.qkvo = nn.ModuleList(nn.Linear(d, 4 * d, bias=False) for _ in range(layers))
        self.out = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(layers))
        self.up = nn.ModuleList(nn.Linear(d, 4 * d, bias=False) for _ in range(layers))
        self.down = nn.ModuleList(nn.Linear(2 * d, d, bias=False) for _ in range(layers))
        self.head = nn.Linear(d, vocab, bias=False)

    @staticmethod
    def _norm(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def forward(self, ids, k_caches, v_caches):
        x = self.emb(ids)  # [1, 1, d]
        h, dh = self.heads, self.d // self.heads
        new_k, new_v = [], []
        for i, (kc, vc) in enumerate(zip(k_caches, v_caches)):
            q, k, v, _ = self.qkvo[i](self._norm(x)).split(self.d, dim=-1)
            k = torch.cat([kc, k.view(1, 1, h, dh).transpose(1, 2)], 2)
            v = torch.cat([vc, v.view(1, 1, h, dh).transpose(1, 2)], 2)
            a = F.scaled_dot_product_attention(q.view(1, 1, h, dh).transpose(1, 2), k, v)
            x = x + self.out[i](a.transpose(1, 2).reshape(1, 1, self.d))
            g, u = self.up[i](self._norm(x)).chunk(2, dim=-1)
            x = x + self.down[i](F.silu(g) * u)
            new_k.append(k)
            new_v.append(v)
        return self.head(self._norm(x)), new_k, new_v


def test_decode_step_with_kv_caches():
    """A decode step built once for a symbolic cache length, against torch eager at lengths 1,
    5 and 40 (logits and every updated cache), then three steps with the outputs fed back as
    the next step's caches (each result a block of the workspace cache once large enough)."""
    torch.manual_seed(0)
    model = DecodeStep().eval()
    n = torch.export.Dim("n", min=1, max=1024)

    def caches(length, seed):
        g = torch.Generator().manual_seed(seed)
        return [[torch.randn(1, 4, length, 16, generator=g) for _ in range(2)] for _ in range(2)]

    ids = torch.tensor([[3]])
    ep = torch.export.export(
        model, (ids, *caches(4, 0)), dynamic_shapes=(None, [{2: n}] * 2, [{2: n}] * 2)
    )
    vm = relax.VirtualMachine(relax.build(from_exported_program(ep), "llvm"), rm.cpu())

    def check(got, want, what):
        for g, w in zip(got, [want[0], *want[1], *want[2]]):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=RTOL, atol=ATOL, err_msg=what)

    for length in (1, 5, 40):
        kc, vc = caches(length, length)
        with torch.no_grad():
            want = model(ids, kc, vc)
        check(vm["main"](ids.numpy(), *kc, *vc), want, f"length {length}")
    kc, vc = caches(7, 1)
    state = [t.numpy() for t in kc + vc]
    for step in range(3):
        tok = torch.tensor([[step + 1]])
        with torch.no_grad():
            want = model(tok, kc, vc)
        got = vm["main"](tok.numpy(), *state)
        check(got, want, f"step {step}")
        kc, vc = want[1], want[2]
        state = [g.view_numpy() for g in got[1:]]
