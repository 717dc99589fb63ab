#!/usr/bin/env python
"""Benchmark relaxmlir against numpy, torch eager and torch.compile, side by side in one run.

    python scripts/bench.py                  # all workloads, 1 thread and all cores -> benchmarks/RESULTS.md
    python scripts/bench.py --only W1,W3 --threads 1 --repeat 20
    python scripts/bench.py --only W7,W8     # W7 selects both ResNet-18 batches (W7a, W7b)
    python scripts/bench.py --isa avx2       # every system on its AVX2 code path (see ISA_ENV)
    python scripts/bench.py --tuned DIR      # a tuned column: the records of a tuning work dir
    python scripts/bench.py --only S2,S7,S8  # symbolic builds (batch / sequence `n`) vs static ones
    python scripts/bench.py --only X7a,X11   # 1- and all-thread builds of a model timed in turns

Each thread count runs in a child process whose numpy/BLAS, torch and relaxmlir thread counts are
set to the same value before any import, and without the environment's OPENBLAS_CORETYPE /
OPENBLAS_L2_SIZE (they pin numpy's OpenBLAS to its AVX2 kernels); each child reports the BLAS kernels
numpy and torch actually run. Every system gets the same inputs; results are checked against numpy
(or torch eager where numpy has no such op) before timing. Times are medians. "% peak" is relative
to this machine's f32 FMA peak, measured first by scripts/peak.py at each thread count.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import gc
import importlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core_latency  # scripts/core_latency.py: how far apart the two CPUs are
import peak  # scripts/peak.py: the measured f32 FMA peak

ROOT = Path(__file__).resolve().parents[1]
# Forced by the environment onto every process (older OpenBLAS builds misbehave on some CPUs); they
# pin numpy's OpenBLAS to its AVX2 kernels, so the benchmark's children run without them.
BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# `--isa avx2` on an AVX-512 machine: what an AVX2-only CPU of the pool runs, every system on its
# AVX2 code path in the same process: numpy's OpenBLAS on its Haswell kernels, torch's ATen, MKL
# and oneDNN capped at AVX2, relaxmlir built for this CPU with its wider features off (8-lane
# tiles, NCHW8c; the CPU's own LLVM scheduling model stays, as an AVX2-only CPU's own model would,
# where a generic x86-64-v3 build loses LLVM's loop unrolling). The cache and core of the wider
# CPU stay, so this approximates such a machine; it does not replace one.
ISA_ENV = {
    "avx2": {
        "OPENBLAS_CORETYPE": "Haswell",
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "DNNL_MAX_CPU_ISA": "AVX2",
    }
}
# Feature-name prefixes each forced ISA turns off in the host's target (-mattr=-...).
ISA_DROP = {"avx2": ("avx512", "avxvnni", "amx")}


def isa_target_spec(isa: str) -> dict:
    """The host's target dict for `isa` ("native": the host as it is)."""
    from relaxmlir.target import Target

    spec = {"kind": "llvm"}
    if isa in ISA_DROP:
        host = Target("llvm")
        spec["mcpu"] = host.mcpu
        spec["mattr"] = sorted("-" + f for f in host.features if f.startswith(ISA_DROP[isa]))
    return spec


def _interleaved_ms(fns: dict, repeat: int, min_time: float = 0.2, settle: float = 0.0) -> dict:
    """The median ms of each call in `fns`, timed in rounds: in every round each call runs
    untimed (its caches warm again; for `settle` seconds at least, so that the thread pool of
    the system before it, which spins for a while after a call (OpenMP's blocktime, OpenBLAS),
    has gone idle), then once timed, in turn. On a shared machine a slow stretch (a neighbour, a
    stolen core) then slows every system alike instead of whichever one was being timed, so the
    ratios between them hold even when the absolute times move. At least `repeat` rounds, more
    until each call has had `min_time` seconds, at most 10 x `repeat`."""
    times = {key: [] for key in fns}
    for fn in fns.values():
        fn()  # warm up
    start = time.perf_counter()
    rounds = 0
    while rounds < repeat or (
        time.perf_counter() - start < min_time * len(fns) * (1 + settle) and rounds < 10 * repeat
    ):
        for key, fn in fns.items():
            until = time.perf_counter() + settle
            fn()
            while time.perf_counter() < until:
                fn()
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)
        rounds += 1
    return {key: statistics.median(t) * 1e3 for key, t in times.items()}


def _median_ms(fn, repeat: int, min_time: float = 0.2) -> float:
    fn()  # warm up
    times = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 10 * repeat:
            break
    return statistics.median(times) * 1e3


# --------------------------------------------------------------------------------------------
# Workloads: each returns (torch_model_or_fn, example inputs, flops, numpy_fn or None)
def _mlp(batch):
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    ).eval()
    w0, b0 = model[0].weight.detach().numpy(), model[0].bias.detach().numpy()
    w1, b1 = model[2].weight.detach().numpy(), model[2].bias.detach().numpy()
    w0t, w1t = np.ascontiguousarray(w0.T), np.ascontiguousarray(w1.T)

    def numpy_fn(x):
        return np.maximum(x @ w0t + b0, 0) @ w1t + b1

    x = np.random.default_rng(0).standard_normal((batch, 784), dtype=np.float32)
    return model, [x], 2 * batch * (784 * 128 + 128 * 10), numpy_fn


def _matmul(n):
    import numpy as np
    import torch

    class MatMul(torch.nn.Module):
        def forward(self, a, b):
            return torch.matmul(a, b)

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    return MatMul().eval(), [a, b], 2 * n**3, lambda a, b: a @ b


def _lenet(batch):
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(400, 120), torch.nn.ReLU(),
        torch.nn.Linear(120, 84), torch.nn.ReLU(), torch.nn.Linear(84, 10),
    ).eval()  # fmt: skip
    x = np.random.default_rng(0).standard_normal((batch, 1, 28, 28), dtype=np.float32)
    flops = 2 * batch * (6 * 28 * 28 * 25 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 84 * 10)
    return model, [x], flops, None


def _transformer(seq, d):
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(
        d, nhead=4, dim_feedforward=4 * d, batch_first=True, dropout=0.0
    ).eval()
    x = np.random.default_rng(0).standard_normal((1, seq, d), dtype=np.float32)
    flops = _encoder_flops(1, seq, d, 4 * d, 1)
    return model, [x], flops, None


def _encoder_flops(batch, seq, d, ffn, layers, weights=None):
    """Matmul FLOPs of `layers` transformer layers: QKV + output projections, the two FFN
    matmuls, and the two attention matmuls (QK^T, PV) over the full seq x seq score matrix.
    `weights`: the weight elements every token multiplies per layer, when not the 4 d x d
    projections and two d x ffn matmuls (grouped-query attention, a gated MLP)."""
    weights = 4 * d * d + 2 * d * ffn if weights is None else weights
    return layers * batch * (2 * seq * weights + 4 * seq * seq * d)


def _resnet18_module():
    """torchvision's resnet18 layout (BasicBlock, layers [2, 2, 2, 2], 64-128-256-512 channels,
    7x7 stride-2 stem, maxpool, avgpool, fc 1000) and init, defined here: torchvision is not a
    dependency. 11,689,512 parameters, like torchvision.models.resnet18()."""
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride=1):
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
            return self.relu(self.bn2(self.conv2(out)) + identity)

    class ResNet(nn.Module):
        def __init__(self, layers=(2, 2, 2, 2), num_classes=1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            cin, stages = 64, []
            for i, (width, blocks) in enumerate(zip((64, 128, 256, 512), layers)):
                stage = []
                for j in range(blocks):
                    stage.append(BasicBlock(cin, width, 2 if i > 0 and j == 0 else 1))
                    cin = width
                stages.append(nn.Sequential(*stage))
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    return ResNet()


def _mobilenet_v2_module():
    """torchvision's mobilenet_v2 layout (width 1.0: inverted residuals with ReLU6, depthwise 3x3
    convolutions, 24/40-style channel counts that do not divide into 16, a pooled classifier)
    and init, defined here. 3,504,872 parameters, like torchvision.models.mobilenet_v2()."""
    import torch
    from torch import nn

    def conv_bn(cin, cout, kernel=3, stride=1, groups=1):
        return nn.Sequential(
            nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU6(inplace=True),
        )

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = cin * expand
            layers = [conv_bn(cin, hidden, 1)] if expand != 1 else []
            layers += [
                conv_bn(hidden, hidden, 3, stride, hidden),
                nn.Conv2d(hidden, cout, 1, bias=False),
                nn.BatchNorm2d(cout),
            ]
            self.conv = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.conv(x) if self.residual else self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self, num_classes=1000):
            super().__init__()
            # (expansion, channels, blocks, stride of the first)
            config = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                      (6, 160, 3, 2), (6, 320, 1, 1)]  # fmt: skip
            features, cin = [conv_bn(3, 32, 3, 2)], 32
            for t, c, n, s in config:
                for i in range(n):
                    features.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                    cin = c
            features.append(conv_bn(cin, 1280, 1))
            self.features = nn.Sequential(*features)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out")
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.zeros_(m.bias)

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
            return self.classifier(torch.flatten(x, 1))

    return MobileNetV2()


def _mobilenet_v2(batch):
    return _vision_model(_mobilenet_v2_module, batch)


def _resnet18(batch):
    return _vision_model(_resnet18_module, batch)


def _vit_b16_module():
    """transformers' ViTModel at its default configuration (ViT-B/16: 224 x 224 images in 16 x 16
    patches, 196 tokens and the class token, 12 layers of d 768), random weights; the last
    hidden state. 197 rows leave 5 past the last 8-row register tile of every linear layer."""
    import transformers

    model = transformers.ViTModel(transformers.ViTConfig(), add_pooling_layer=False)
    return _last_hidden(model.eval(), "pixel_values")


def _last_hidden(model, key: str):
    """`model` (a transformers model) as a module returning its last hidden state for its input
    named `key` (token ids, or ViT's pixels): what the benchmarks time."""
    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, x):
            return self.model(**{key: x}).last_hidden_state

    return LastHidden(model).eval()


def _vision_model(make, batch):
    """An ImageNet model from `make()` (seeded), one random batch, its conv + fc FLOPs."""
    import numpy as np
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model = make().eval()
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224), dtype=np.float32)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:  # convolutions + fc
        model(torch.from_numpy(x))
    return model, [x], counter.get_total_flops(), None


def _llama_config(positions: int = 512):
    """GPT-2 small's width and depth in Llama's form: RMSNorm, rotary embeddings, SiLU-gated
    MLP, grouped-query attention (12 query heads share 4 key/value heads)."""
    import transformers

    return transformers.LlamaConfig(
        vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
        num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=positions,
    )  # fmt: skip


def _hf_model(kind, seq=128, batch=1):
    import numpy as np
    import torch
    import transformers

    torch.manual_seed(0)
    weights = None  # the default layer (BERT, GPT-2)
    if kind == "bert":
        cfg = transformers.BertConfig()
        model = transformers.BertModel(cfg, add_pooling_layer=False)
        d, ffn, layers, vocab = (
            cfg.hidden_size,
            cfg.intermediate_size,
            cfg.num_hidden_layers,
            cfg.vocab_size,
        )
    elif kind == "llama":
        cfg = _llama_config()
        model = transformers.LlamaModel(cfg)
        d, ffn, layers, vocab = (
            cfg.hidden_size,
            cfg.intermediate_size,
            cfg.num_hidden_layers,
            cfg.vocab_size,
        )
        kv = d * cfg.num_key_value_heads // cfg.num_attention_heads
        weights = 2 * d * d + 2 * d * kv + 3 * d * ffn  # Q, O; K, V; gate, up, down
    else:
        cfg = transformers.GPT2Config()
        model = transformers.GPT2Model(cfg)
        d, ffn, layers, vocab = cfg.n_embd, 4 * cfg.n_embd, cfg.n_layer, cfg.vocab_size
    ids = np.random.default_rng(0).integers(1, vocab, (batch, seq), dtype=np.int64)
    flops = _encoder_flops(batch, seq, d, ffn, layers, weights)
    return _last_hidden(model.eval(), "input_ids"), [ids], flops, None


WORKLOADS = {
    "W1": ("MLP 784-128-10, batch 1 (latency)", lambda: _mlp(1)),
    "W2": ("MLP 784-128-10, batch 256", lambda: _mlp(256)),
    "W3": ("matmul 1024^3 f32", lambda: _matmul(1024)),
    "W4": ("matmul 256^3 f32", lambda: _matmul(256)),
    "W5": ("LeNet-style CNN, batch 32", lambda: _lenet(32)),
    "W6": ("TransformerEncoderLayer, seq 128, d 256", lambda: _transformer(128, 256)),
    "W7a": ("ResNet-18, batch 1, 3x224x224", lambda: _resnet18(1)),
    "W7b": ("ResNet-18, batch 8, 3x224x224", lambda: _resnet18(8)),
    "W8": ("BERT-base encoder, seq 128, batch 1", lambda: _hf_model("bert")),
    "W9": ("GPT-2 small, seq 128, batch 1", lambda: _hf_model("gpt2")),
    "W10": ("Llama-style (GPT-2 small size, GQA), seq 128, batch 1", lambda: _hf_model("llama")),
    "W11": ("MobileNetV2, batch 1, 3x224x224", lambda: _mobilenet_v2(1)),
    "W12": ("ViT-B/16, batch 1, 3x224x224", lambda: _vision_model(_vit_b16_module, 1)),
}
# real models: no numpy reference, FLOPs of matmuls/convs only
MODELS = ("W7a", "W7b", "W8", "W9", "W10", "W11", "W12")
# Built once with a symbolic axis (torch.export's Dim), timed against a static build per size:
# id -> (title, the workload it reshapes, input axis made symbolic, its Dim's min, the sizes).
SYMBOLIC = {
    "S2": ("W2 MLP with batch n", "W2", 0, 1, (1, 32, 256)),
    "S7": ("W7a ResNet-18 with batch n", "W7a", 0, 1, (1, 8)),
    "S8": ("W8 BERT-base with sequence length n", "W8", 1, 2, (1, 32, 256)),
}


# Decoding with state: transformers' Llama over a StaticCache of this many rows
# (convert_and_export_with_cache), one token a call, the caches kept by the VM between calls:
# id -> (title, cache rows).
DECODE = {"D10": ("W10 Llama-style decode, one token over a 1024-row StaticCache", 1024)}


# Models whose weights are inputs (keep_params_as_input): LiftTransformParams' split against
# the bound build, and the same without the split (the weights' folds, re-layouts and packing
# at every call).
LIFTED = {
    "L7": ("W7a ResNet-18, weights as inputs", "W7a"),
    "L8": ("W8 BERT-base, weights as inputs", "W8"),
    "L11": ("W11 MobileNetV2, weights as inputs", "W11"),
}


# Scaling from 1 thread to all cores, measured in one process: the 1-thread and the all-thread
# build of a workload (and torch eager at both thread counts) timed in turns. The W rows of the
# two thread counts come from two child processes minutes apart, and this shared machine's speed
# drifts by 10-30% over minutes (ViT-B/16 at 1 thread: 410 ms in one run, 459 ms in the next), so
# their ratio measures the drift as much as the second core. The workloads whose 1-thread time
# is above 1 ms (issue 9's scaling target): id -> the workload.
SCALING = {"X" + w[1:]: w for w in ("W3", "W6", "W7a", "W7b", "W8", "W9", "W10", "W11", "W12")}


def _select(names: list[str]) -> list[str]:
    """Workload ids for `--only`: an exact id, or a family prefix (W7 -> W7a, W7b)."""
    selected = []
    for name in names:
        ids = (
            [name]
            if name in (*WORKLOADS, *SYMBOLIC, *LIFTED, *DECODE, *SCALING)
            else [w for w in WORKLOADS if re.fullmatch(re.escape(name) + "[a-z]", w)]
        )
        if not ids:
            raise KeyError(name)
        selected += [w for w in ids if w not in selected]
    return selected


def _target(threads: int):
    """The build target of this child: the host, or the CPU that `RELAXMLIR_BENCH_ISA` names."""
    import relaxmlir as rm

    spec = isa_target_spec(os.environ.get("RELAXMLIR_BENCH_ISA", "native"))
    return rm.target.Target({**spec, "num-cores": threads})


def _compile_tuned(model, inputs, threads: int, work_dir: str):
    """The tutorial's order: the "zero" pipeline, then MetaScheduleApplyDatabase(work_dir) and
    relax.build, inside `with target:` (records of another target, e.g. another num-cores, are
    never applied: such kernels keep their defaults)."""
    import torch

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program

    ep = torch.export.export(model, tuple(torch.from_numpy(x) for x in inputs))
    target = _target(threads)
    with target:
        mod = relax.get_pipeline("zero")(from_exported_program(ep))
        mod = relax.transform.MetaScheduleApplyDatabase(work_dir)(mod)
        ex = relax.build(mod, target=target)
    return relax.VirtualMachine(ex, rm.cpu())["main"]


def _compile_relaxmlir(model, inputs, threads: int):
    import torch

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program

    ep = torch.export.export(model, tuple(torch.from_numpy(x) for x in inputs))
    target = _target(threads)
    times = []
    # cold (the child's cache folder is empty), then again from the compile cache; the first
    # executable is dropped so that the second maps the entry itself, as a new process would.
    # The disk is synced first (untimed): the previous workloads' cache entries (BERT-base's
    # holds 434 MB) were still being written back, which made a cold ResNet-18 build of the
    # 2-thread child 0.5 s longer than the same build alone.
    for _ in range(2):
        ex = None
        gc.collect()
        os.sync()
        t0 = time.perf_counter()
        ex = relax.build(from_exported_program(ep), target=target)
        times.append(time.perf_counter() - t0)
    vm = relax.VirtualMachine(ex, rm.cpu())
    return vm["main"], times


def _sized_inputs(inputs: list, axis: int, n: int) -> list:
    """A workload's example `inputs` with `axis` of the first one resized to `n` (same seed)."""
    import numpy as np

    shape = list(inputs[0].shape)
    shape[axis] = n
    rng = np.random.default_rng(0)
    if inputs[0].dtype == np.int64:  # token ids
        return [rng.integers(1, int(inputs[0].max()) + 1, shape, dtype=np.int64)]
    return [rng.standard_normal(shape, dtype=np.float32)]


def run_symbolic(name: str, threads: int, repeat: int) -> list[dict]:
    """One build with a symbolic axis against one static build per size, timed in turns."""
    import numpy as np
    import torch

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program

    title, workload, axis, low, sizes = SYMBOLIC[name]
    model, base, _, _ = WORKLOADS[workload][1]()  # built once: BERT-base takes seconds
    target = _target(threads)
    example = _sized_inputs(base, axis, max(sizes))
    dim = torch.export.Dim("n", min=low, max=max(512, *sizes))
    shapes = tuple({axis: dim} if i == 0 else {} for i in range(len(example)))
    ep = torch.export.export(
        model, tuple(torch.from_numpy(x) for x in example), dynamic_shapes=shapes
    )
    t0 = time.perf_counter()
    symbolic = relax.VirtualMachine(relax.build(from_exported_program(ep), target), rm.cpu())
    build_s = time.perf_counter() - t0
    rows = []
    for n in sizes:
        inputs = _sized_inputs(base, axis, n)
        tin = tuple(torch.from_numpy(x) for x in inputs)
        with torch.no_grad():
            reference = model(*tin).numpy()
        static_ep = torch.export.export(model, tin)
        static = relax.VirtualMachine(
            relax.build(from_exported_program(static_ep), target), rm.cpu()
        )
        timed = {}
        for key, vm in (("static_ms", static), ("symbolic_ms", symbolic)):
            out = vm["main"](*inputs).numpy()
            np.testing.assert_allclose(out, reference, rtol=1e-3, atol=1e-3, err_msg=f"n={n}")
            timed[key] = lambda f=vm["main"], a=inputs: f(*a)
        row = {"id": name, "title": title, "threads": threads, "n": n, "build_s": build_s}
        row.update(_interleaved_ms(timed, repeat, settle=0.25 if threads > 1 else 0.0))
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        static = timed = None
        gc.collect()
    return rows


def run_lifted(name: str, threads: int, repeat: int) -> dict:
    """A model with its weights as inputs, lifted and not, against its bound build, in turns."""
    import numpy as np
    import torch

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program

    title, workload = LIFTED[name]
    model, inputs, _, _ = WORKLOADS[workload][1]()
    target = _target(threads)
    tin = tuple(torch.from_numpy(x) for x in inputs)
    with torch.no_grad():
        reference = model(*tin).numpy()
    ep = torch.export.export(model, tin)
    row = {"id": name, "title": title, "threads": threads}
    timed = {}
    # cold builds: a compile cache of their own (the W rows' cache holds the bound build)
    shared_cache = os.environ.get("RELAXMLIR_CACHE_DIR")
    os.environ["RELAXMLIR_CACHE_DIR"] = tempfile.mkdtemp(prefix="relaxmlir-bench-lifted-")
    for key in ("bound", "lifted", "per_call"):
        gc.collect()
        os.sync()
        t0 = time.perf_counter()
        if key == "bound":
            mod, weights = from_exported_program(ep), []
        else:
            mod, params = from_exported_program(ep, keep_params_as_input=True)
            weights = [rm.nd.array(p) for p in params.values()]
            if key == "lifted":
                mod = relax.transform.LiftTransformParams()(mod)
        vm = relax.VirtualMachine(relax.build(mod, target), rm.cpu())
        row[f"{key}_build_s"] = time.perf_counter() - t0
        if key == "lifted":
            t0 = time.perf_counter()
            weights = vm["main_transform_params"](*weights)
            row["transform_s"] = time.perf_counter() - t0
            weights = list(weights) if isinstance(weights, (list, tuple)) else [weights]
        args = [rm.nd.array(x) for x in inputs] + list(weights)
        out = vm["main"](*args).numpy()
        np.testing.assert_allclose(out, reference, rtol=1e-3, atol=1e-3, err_msg=key)
        timed[f"{key}_ms"] = lambda f=vm["main"], a=args: f(*a)
    shutil.rmtree(os.environ["RELAXMLIR_CACHE_DIR"], ignore_errors=True)
    if shared_cache is not None:
        os.environ["RELAXMLIR_CACHE_DIR"] = shared_cache
    row.update(_interleaved_ms(timed, repeat, settle=0.25 if threads > 1 else 0.0))
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def run_decode(name: str, threads: int, repeat: int) -> dict:
    """One decode step of transformers' Llama over a StaticCache, against the same torch module
    in eager (its own caches), checked for the first steps' logits, then timed in turns; each
    system's calls walk the positions of its cache (a step reads the whole cache, masked, at
    any position), starting over at the end."""
    import numpy as np
    import torch
    import transformers
    from transformers.integrations import executorch

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program

    title, rows = DECODE[name]
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(_llama_config(2 * rows)).eval()
    model.generation_config.cache_implementation = "static"
    model.generation_config.cache_config = {"batch_size": 1, "max_cache_len": rows, "device": "cpu"}
    ep = executorch.convert_and_export_with_cache(model)
    reference = executorch.TorchExportableModuleWithStaticCache(model)
    config = model.config
    # what a step reads from memory: every weight but the token embedding (one row of it) and
    # the whole key and value caches (masked past the position)
    weights = sum(
        p.numel() * p.element_size() for n, p in model.named_parameters() if "embed_tokens" not in n
    )
    head_dim = config.hidden_size // config.num_attention_heads
    caches = 2 * config.num_hidden_layers * config.num_key_value_heads * rows * head_dim * 4
    row = {"id": name, "title": title, "threads": threads, "step_mb": (weights + caches) / 1e6}
    gc.collect()
    os.sync()
    t0 = time.perf_counter()
    vm = relax.VirtualMachine(relax.build(from_exported_program(ep), _target(threads)), rm.cpu())
    row["build_s"] = time.perf_counter() - t0
    step = vm["main"]
    token = np.array([[5]])
    checked = 4
    for pos in range(checked):
        got = step(token, np.array([pos])).numpy()
        with torch.no_grad():
            want = reference(input_ids=torch.from_numpy(token), cache_position=torch.tensor([pos]))
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-3, atol=1e-3, err_msg=f"step {pos}")

    def walk(call):
        position = [checked]

        def next_step():
            call(position[0])
            position[0] = position[0] + 1 if position[0] + 1 < rows else checked

        return next_step

    ids = torch.from_numpy(token)
    timed = {
        "torch_ms": walk(lambda p: reference(input_ids=ids, cache_position=torch.tensor([p]))),
        "relaxmlir_ms": walk(lambda p: step(token, np.array([p]))),
    }
    memory = [_bandwidth_gbs(threads)]
    with torch.no_grad():
        row.update(_interleaved_ms(timed, repeat, settle=0.25 if threads > 1 else 0.0))
    row["bandwidth_gbs"] = [*memory, _bandwidth_gbs(threads)]
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def _bandwidth_gbs(threads: int) -> float | None:
    """This machine's memory read bandwidth on `threads` threads now (None: not measured)."""
    return peak.bandwidth([threads]).get("gbs", {}).get(threads)


def run_scaling(name: str, threads: int, repeat: int) -> dict:
    """The 1-thread and the `threads`-thread build of a workload, and torch eager at both
    thread counts, checked against torch eager and timed in turns in this process."""
    import numpy as np
    import torch

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program
    from relaxmlir.runtime import libraries

    workload = SCALING[name]
    title, make = WORKLOADS[workload]
    model, inputs, _, _ = make()
    tin = tuple(torch.from_numpy(x) for x in inputs)
    with torch.no_grad():
        reference = model(*tin).numpy()
    ep = torch.export.export(model, tin)
    # the thread count of each call is set before it (run time), beside its build's split
    openmp = libraries.parallel_runtime() == "openmp"
    timed = {}
    for t in (1, threads):
        vm = relax.VirtualMachine(relax.build(from_exported_program(ep), _target(t)), rm.cpu())
        np.testing.assert_allclose(vm["main"](*inputs).numpy(), reference, rtol=1e-3, atol=1e-3)

        def ours(f=vm["main"], t=t):
            if openmp:
                libraries.set_num_threads(t)
            f(*inputs)

        def eager(t=t):
            torch.set_num_threads(t)
            model(*tin)

        timed[f"ours_{t}_ms"], timed[f"torch_{t}_ms"] = ours, eager
    with torch.no_grad():
        times = _interleaved_ms(timed, repeat, settle=0.25)
    torch.set_num_threads(threads)
    if openmp:
        libraries.set_num_threads(threads)
    row = {"id": name, "title": title, "threads": threads, **times}
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


# Workloads that also run with library codegens (a column each beside our own kernels): blas
# takes matmuls, dnnl (oneDNN) convolutions and matmuls.
BLAS_WORKLOADS = ("W2", "W3", "W4", "W6", "W8", "W9", "W10")
DNNL_WORKLOADS = ("W3", "W4", "W7a", "W7b", "W11")
LIBRARY_HINTS = {
    "blas": "pip install scipy-openblas32",
    "dnnl": "pip install onednn-cpu-iomp==2023.2.0 intel-cmplr-lib-rt",
}


def _compile_blas_dispatch(model, inputs, threads: int, codegen: str = "blas"):
    """The same model with every pattern of `codegen` offloaded (FuseOpsByPattern + RunCodegen)."""
    import torch

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program

    ep = torch.export.export(model, tuple(torch.from_numpy(x) for x in inputs))
    # batch norms folded into the conv weights first (relax.build would do it after dispatch):
    # ResNet's conv + bn + add + relu then reaches dnnl as conv + bias + add + relu
    mod = relax.transform.FoldBatchnormToConv2D()(from_exported_program(ep))
    patterns = relax.backend.get_patterns_with_prefix(codegen)
    mod = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=True)(mod)
    mod = relax.transform.RunCodegen()(mod)
    target = _target(threads)
    ex = relax.build(mod, target=target)
    return relax.VirtualMachine(ex, rm.cpu())["main"], len(ex.native_bindings)


# --------------------------------------------------------------------------------------------
# Which BLAS kernels numpy and torch run in this process
def _openblas_probe(path: str) -> dict | None:
    """OpenBLAS's own report (config string, core name, threads) from a loaded library, whatever
    its symbol prefix/suffix (scipy-openblas64 exports scipy_openblas_get_corename64_)."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for prefix in ("scipy_openblas_", "openblas_"):
        for suffix in ("64_", ""):
            try:
                corename = getattr(lib, f"{prefix}get_corename{suffix}")
                config = getattr(lib, f"{prefix}get_config{suffix}")
            except AttributeError:
                continue
            corename.restype = config.restype = ctypes.c_char_p
            info = {"config": config().decode(), "architecture": corename().decode()}
            threads = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
            if threads is not None:
                threads.restype = ctypes.c_int
                info["num_threads"] = threads()
            m = re.match(r"OpenBLAS\s+(\S+)", info["config"])
            info["version"] = m.group(1) if m else "?"
            return info
    return None


def _numpy_blas() -> str:
    import numpy as np

    numpy_dir = str(Path(np.__file__).resolve().parent)
    try:  # the documented way
        from threadpoolctl import threadpool_info

        infos = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        infos.sort(
            key=lambda i: not str(Path(i["filepath"]).resolve()).startswith(numpy_dir)
        )  # numpy's first
        if infos:
            i = infos[0]
            return (
                f"{i['internal_api']} {i.get('version')}, {i.get('architecture', '?')} kernels, "
                f"threads={i.get('num_threads')} (threadpoolctl)"
            )
    except ImportError:
        pass
    try:  # without threadpoolctl: ask the OpenBLAS that this process has loaded
        paths = []
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1]
            if "openblas" in Path(path).name.lower() and path not in paths:
                paths.append(path)
        paths.sort(key=lambda p: "numpy" not in p)
        for path in paths:
            info = _openblas_probe(path)
            if info is not None:
                return (
                    f"OpenBLAS {info['version']}, {info['architecture']} kernels, "
                    f"threads={info.get('num_threads', '?')}"
                )
    except OSError:
        pass
    try:  # at least what numpy was built against
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas.get('version', '?')}, kernels unknown"
    except (AttributeError, KeyError, TypeError):
        return "unknown"


class _MKLVersion(ctypes.Structure):  # MKLVersion of mkl_types.h
    _fields_ = [
        ("Major", ctypes.c_int),
        ("Minor", ctypes.c_int),
        ("Update", ctypes.c_int),
        ("ProductStatus", ctypes.c_char_p),
        ("Build", ctypes.c_char_p),
        ("Processor", ctypes.c_char_p),
        ("Platform", ctypes.c_char_p),
    ]


def _torch_blas() -> str:
    import torch

    config = torch.__config__.show()
    parts = []
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    blas_name = blas.group(1) if blas else "unknown BLAS"
    if blas_name == "mkl":
        text = "MKL"
        m = re.search(r"Math Kernel Library Version ([\d.]+)", config)
        if m:
            text += f" {m.group(1)}"
        try:  # MKL is linked into libtorch_cpu; its version record names the code path it dispatched to
            lib = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
            version = _MKLVersion()
            lib.mkl_serv_get_version(ctypes.byref(version))
            processor = (version.Processor or b"").decode()
            isa = next((k for k in ("AVX-512", "AVX2", "AVX", "SSE") if k in processor), "?")
            text += f" ({isa}{' + AMX' if 'AMX' in processor else ''} code path)"
        except (OSError, AttributeError, ValueError):
            text += " (code path unknown)"
        parts.append(text)
    else:
        parts.append(blas_name)
    m = re.search(r"(?:MKL-DNN|oneDNN) (v[\d.]+)", config)
    if m and torch.backends.mkldnn.is_available():
        parts.append(f"oneDNN {m.group(1)}")
    try:
        parts.append(f"ATen CPU capability {torch.backends.cpu.get_cpu_capability()}")
    except AttributeError:
        pass
    return (
        f"torch {torch.__version__.split('+')[0]}: "
        + ", ".join(parts)
        + f", threads={torch.get_num_threads()}"
    )


def blas_kernels() -> dict:
    """{"numpy": ..., "torch": ...}: library, version and the kernels this process runs."""
    return {"numpy": _numpy_blas(), "torch": _torch_blas()}


def run_child(names: list[str], threads: int, repeat: int, torch_compile: bool) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    blas = blas_kernels()
    print(
        f"[{threads} thread(s)] numpy: {blas['numpy']}; {blas['torch']}",
        file=sys.stderr,
        flush=True,
    )
    rows = []
    probe = None
    if threads > 1 and core_latency.default_cpus() is not None:
        try:
            probe = core_latency.Probe()
        except (RuntimeError, OSError) as exc:
            print(f"core-to-core round trip not measured: {exc}", file=sys.stderr)
    symbolic, lifted, scaling, decode = [], [], [], []
    for name in names:
        if name in DECODE:
            decode.append(run_decode(name, threads, repeat))
            continue
        if name in SCALING:
            if threads > 1:  # in the child of the most threads (main)
                scaling.append(run_scaling(name, threads, repeat))
            continue
        if name in SYMBOLIC:
            symbolic += run_symbolic(name, threads, repeat)
            continue
        if name in LIFTED:
            lifted.append(run_lifted(name, threads, repeat))
            continue
        title, make = WORKLOADS[name]
        model, inputs, flops, numpy_fn = make()
        tin = [torch.from_numpy(x) for x in inputs]
        row = {"id": name, "title": title, "threads": threads, "flops": flops}
        timed = {}  # row key -> the call to time; all timed together, in turns (_interleaved_ms)
        with torch.no_grad():
            reference = model(*tin).numpy()
        timed["torch_ms"] = lambda m=model, t=tin: m(*t)
        if numpy_fn is not None:
            np.testing.assert_allclose(numpy_fn(*inputs), reference, rtol=1e-3, atol=1e-3)
            timed["numpy_ms"] = lambda f=numpy_fn, a=inputs: f(*a)
        try:
            fn, (compile_s, cached_s) = _compile_relaxmlir(model, inputs, threads)
            t0 = time.perf_counter()
            out = fn(*inputs).numpy()
            row["first_call_s"] = time.perf_counter() - t0
            np.testing.assert_allclose(out, reference, rtol=1e-3, atol=1e-3)
            timed["relaxmlir_ms"] = lambda f=fn, a=inputs: f(*a)
            row["compile_s"], row["cached_s"] = compile_s, cached_s
        except Exception as exc:  # noqa: BLE001  (reported in the table, not fatal)
            row["relaxmlir_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        tuned = os.environ.get("RELAXMLIR_BENCH_TUNED")
        if tuned and name in MODELS:
            try:
                fn = _compile_tuned(model, inputs, threads, tuned)
                np.testing.assert_allclose(fn(*inputs).numpy(), reference, rtol=1e-3, atol=1e-3)
                timed["tuned_ms"] = lambda f=fn, a=inputs: f(*a)
            except Exception as exc:  # noqa: BLE001  (reported in the table, not fatal)
                row["tuned_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
        for lib in [
            c for c, ws in (("blas", BLAS_WORKLOADS), ("dnnl", DNNL_WORKLOADS)) if name in ws
        ]:
            try:
                backend = importlib.import_module(f"relaxmlir.relax.backend.{lib}")
                if not backend.is_available():
                    raise RuntimeError(f"no {lib} library ({LIBRARY_HINTS[lib]})")
                fn, row[f"{lib}_kernels"] = _compile_blas_dispatch(model, inputs, threads, lib)
                np.testing.assert_allclose(fn(*inputs).numpy(), reference, rtol=1e-3, atol=1e-3)
                timed[f"{lib}_ms"] = lambda f=fn, a=inputs: f(*a)
            except Exception as exc:  # noqa: BLE001  (reported in the table, not fatal)
                row[f"{lib}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
        roundtrips = [_roundtrip(probe)]
        with torch.no_grad():  # thread pools spin ~0.2 s after a call (KMP_BLOCKTIME's default)
            row.update(_interleaved_ms(timed, repeat, settle=0.25 if threads > 1 else 0.0))
        roundtrips.append(_roundtrip(probe))
        if probe is not None:
            row["roundtrip_ns"] = roundtrips
        fn = timed = None
        # torch.compile last: its worker threads and caches must not disturb the other timings
        if torch_compile:
            try:
                with torch.no_grad():
                    compiled = torch.compile(model)
                    compiled(*tin)
                    row["torch_compile_ms"] = _median_ms(lambda c=compiled, t=tin: c(*t), repeat)
            except Exception as exc:  # noqa: BLE001  (reported, not fatal: torch.compile needs a toolchain)
                row["torch_compile_error"] = f"{type(exc).__name__}"
            compiled = None
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        model = tin = inputs = reference = None  # the big models one at a time
        gc.collect()
    if probe is not None:
        probe.close()
    return {
        "rows": rows, "symbolic": symbolic, "lifted": lifted, "scaling": scaling,
        "decode": decode, "blas": blas,
    }  # fmt: skip


def _roundtrip(probe) -> float | None:
    """The core-to-core round trip now (scripts/core_latency.py), None when not measured."""
    if probe is None:
        return None
    try:
        return probe.roundtrip_ns()
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        return None


def _blas_text(r: dict, lib: str = "blas") -> str:
    if r.get(f"{lib}_ms"):
        return f"{_fmt(r[f'{lib}_ms'])} ({r.get(f'{lib}_kernels', 0)} calls)"
    return f"error: {r[f'{lib}_error']}" if r.get(f"{lib}_error") else ""


def _tuned_text(r: dict) -> str:
    if r.get("tuned_ms"):
        ratio = f" ({r['tuned_ms'] / r['relaxmlir_ms']:.2f}x)" if r.get("relaxmlir_ms") else ""
        return f"{_fmt(r['tuned_ms'])}{ratio}"
    return f"error: {r['tuned_error']}" if r.get("tuned_error") else ""


def _roundtrip_text(r: dict) -> str:
    trips = r.get("roundtrip_ns")
    return "" if not trips else " / ".join(_fmt(t, 0) for t in trips)


def _fmt(v, digits=3):
    return "n/a" if v is None else f"{v:.{digits}f}"


def _peak_text(peak_info: dict) -> str:
    if "error" in peak_info:
        return f"not measured ({peak_info['error']}); % peak left blank"
    per_thread = ", ".join(
        f"{g:.0f} GFLOP/s on {t} thread{'s' if t > 1 else ''} ({g / t:.0f} per core)"
        for t, g in peak_info["gflops"].items()
    )
    return (
        f"{per_thread}; {peak_info['accumulators']} independent FMA chains of {peak_info['kernel']} "
        f"(scripts/peak.py, cc -O2 {' '.join(peak.ISA_FLAGS[peak_info.get('isa', 'native')])}, "
        "best of 5 x 0.2 s, per thread CPU time, threads unpinned)"
    )


def _host_mcpu() -> str:
    """The CPU model the host target detected (its -mcpu): the name lscpu gives is often just
    "AMD EPYC", which does not say Zen 4 from Zen 5."""
    from relaxmlir.target import Target

    return str(Target("llvm").get("mcpu"))


def render(
    rows: list[dict],
    command: str,
    peak_info: dict,
    blas: dict[int, dict],
    unset: list[str],
    isa: str = "native",
    tuned_note: str = "",
) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    blas_lines = []
    for text in dict.fromkeys(f"numpy: {b['numpy']}; {b['torch']}" for b in blas.values()):
        counts = ", ".join(
            str(t) for t, b in blas.items() if f"numpy: {b['numpy']}; {b['torch']}" == text
        )
        blas_lines.append(f"- BLAS ({counts} thread(s)): {text}")
    env_note = (
        f"{', '.join(unset)} unset in the benchmark processes"
        if unset
        else f"{' / '.join(BLAS_OVERRIDES)} not set"
    )
    if isa in ISA_ENV:
        spec = isa_target_spec(isa)
        forced = ", ".join(f"{k}={v}" for k, v in ISA_ENV[isa].items())
        env_note = (
            f"every system on its {isa.upper()} code path on this wider CPU ({forced}; relaxmlir "
            f"built for -mcpu={spec['mcpu']} -mattr={','.join(spec['mattr'])}; the peak from "
            f"{isa.upper()} FMAs): an approximation "
            f"of an {isa.upper()}-only machine, with this CPU's caches and cores"
        )
    peaks = peak_info.get("gflops", {})
    lines = [
        "# relaxmlir benchmarks",
        "",
        f"- Command: `{command}`",
        f"- Date: {date}",
        (
            f"- CPU: {peak.cpu_model()} (relaxmlir's host target: -mcpu={_host_mcpu()}), "
            f"{os.cpu_count()} cores, {peak.vector_isa()}"
        ),
        f"- Measured f32 peak: {_peak_text(peak_info)}",
        *blas_lines,
        (
            f"- Environment: {env_note}; OMP/OpenBLAS/MKL/RELAXMLIR threads = torch.set_num_threads = "
            "the target's num-cores = the row's thread count, one process per thread count."
        ),
        "",
        (
            "Medians; outputs checked against numpy or torch eager (rtol 1e-3, atol 1e-3) before timing. "
            "The systems of a row are timed in turns (each round: every system untimed, for 0.25 s when "
            "threads > 1 so the previous system's spinning thread pool has gone idle, then once timed), "
            "so a slow stretch of this shared machine slows them alike; torch.compile is timed after them."
        ),
        "",
        "| workload | threads | numpy ms | torch ms | torch.compile ms | relaxmlir ms | relaxmlir tuned ms | relaxmlir + blas ms | relaxmlir + dnnl ms | build s | cached build s | x numpy | x torch | GFLOP/s | % peak | core round trip ns |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rm_ms = r.get("relaxmlir_ms")
        gflops = r["flops"] / (rm_ms * 1e6) if rm_ms else None
        top = peaks.get(r["threads"])
        pct = 100 * gflops / top if gflops and top else None
        vs_np = r["numpy_ms"] / rm_ms if rm_ms and r.get("numpy_ms") else None
        vs_t = r["torch_ms"] / rm_ms if rm_ms else None
        tc = r.get("torch_compile_ms")
        tc_text = _fmt(tc) if tc else r.get("torch_compile_error", "n/a")
        rm_text = _fmt(rm_ms) if rm_ms else f"error: {r.get('relaxmlir_error', '?')}"
        mark = "\\*" if r["id"] in MODELS else ""
        lines.append(
            f"| {r['id']} {r['title']}{mark} | {r['threads']} | {_fmt(r.get('numpy_ms'))} | {_fmt(r['torch_ms'])} | "
            f"{tc_text} | {rm_text} | {_tuned_text(r)} | {_blas_text(r)} | {_blas_text(r, 'dnnl')} | {_fmt(r.get('compile_s'), 2)} | {_fmt(r.get('cached_s'), 2)} | "
            f"{_fmt(vs_np, 2)} | {_fmt(vs_t, 2)} | "
            f"{_fmt(gflops, 1)} | {'' if pct is None else f'{pct:.1f}'} | {_roundtrip_text(r)} |"
        )
    lines += [
        "",
        (
            "`x numpy` / `x torch`: peer median / relaxmlir median (above 1 means relaxmlir is "
            "faster). `build s`: relaxmlir's cold build (from_exported_program + relax.build; "
            "torch.export not included), the first build of that workload in its process, with "
            "an empty compile cache (it includes writing the cache entry, which is also the code: "
            "no compilation is left for the first call; the disk is synced before it, so that it "
            "does not pay for writing back the entries of the workloads before it). `cached build s`: the same build again, "
            "served by the compile cache (RELAXMLIR_CACHE_DIR, a fresh folder per run). "
            "`GFLOP/s`, `% peak`: relaxmlir's, against the measured peak at the row's thread count. "
            "`relaxmlir + blas ms`: the same model with its matmuls (and their bias/activation "
            "epilogues) offloaded to OpenBLAS by the blas codegen (FuseOpsByPattern + RunCodegen), "
            "the number of library call sites in parentheses. `relaxmlir + dnnl ms`: the same "
            "with its convolutions and matmuls (and their bias/residual/activation epilogues) "
            "offloaded to oneDNN 3.2 by the dnnl codegen (ResNet-18: its 20 convolutions with their "
            "folded batch norms, residual adds and relus as oneDNN post-ops, and the classifier; "
            "pooling stays ours; MobileNetV2: the same for its dense convolutions, its depthwise "
            "ones stay ours). `core round trip ns`: a cache line passed between the first two "
            "CPUs and back (scripts/core_latency.py), before / after the row's timings: about 60 "
            "ns where the two vCPUs of this machine share an L3, about 350 ns where the hypervisor "
            "has placed them on two CCDs, which it changes from minute to minute; small "
            "multi-threaded workloads (W6) run up to 1.5x slower in the second placement, torch's "
            "and ours alike." + (f" `relaxmlir tuned ms`: {tuned_note}" if tuned_note else "")
        ),
        "",
        (
            "\\* Real models (random weights, no numpy reference): their FLOPs count only "
            "convolutions and matmuls (ResNet-18, MobileNetV2, ViT-B/16: torch.utils.flop_counter, "
            "which counts ViT's attention products too; "
            "BERT/GPT-2/Llama: "
            "QKV/output projections, FFN (Llama: its three gated-MLP matmuls) and the full seq x seq "
            "attention matmuls, analytically); elementwise "
            "ops, norms, softmax and pooling are left out, so `% peak` slightly understates the work "
            "(MobileNetV2's depthwise convolutions, 7% of its FLOPs, read and write as much memory "
            "as its dense ones: its `% peak` is bound by memory traffic, not FMAs)."
        ),
        "",
    ]
    return "\n".join(lines)


def _section(title: str, text: str, header: str, rows: list[str]) -> str:
    """A section of RESULTS.md: its title, what it measures, and its table."""
    columns = header.count("|") - 1
    return "\n".join([f"## {title}", "", text, "", header, "|" + "---|" * columns, *rows, ""])


def render_symbolic(rows: list[dict]) -> str:
    """The symbolic builds' table (empty without such rows)."""
    if not rows:
        return ""
    lines = [
        f"| {r['id']} {r['title']} | {r['threads']} | {r['n']} | {_fmt(r['static_ms'])} | "
        f"{_fmt(r['symbolic_ms'])} | {r['symbolic_ms'] / r['static_ms']:.2f} | "
        f"{_fmt(r['build_s'], 2)} |"
        for r in rows
    ]
    return _section(
        "Symbolic shapes",
        "One build with a symbolic axis (torch.export with a `Dim`) serves every size; each "
        "size also gets its own static build. Both are checked against torch eager (rtol "
        "1e-3, atol 1e-3), then timed in turns (medians). `symbolic / static` above 1 means "
        "the symbolic build is slower (issue 9's target: at most 1.2).",
        "| workload | threads | n | static ms | symbolic ms | symbolic / static | symbolic build s |",
        lines,
    )


def render_decode(rows: list[dict]) -> str:
    """The decoding-with-state table (empty without such rows)."""
    if not rows:
        return ""
    lines = []
    for r in rows:
        rate = r["step_mb"] / r["relaxmlir_ms"]  # MB / ms = GB/s
        memory = [g for g in r.get("bandwidth_gbs", []) if g]
        lines.append(
            f"| {r['id']} {r['title']} | {r['threads']} | {_fmt(r['torch_ms'])} | "
            f"{_fmt(r['relaxmlir_ms'])} | {r['torch_ms'] / r['relaxmlir_ms']:.2f} | "
            f"{r['step_mb']:.0f} | {rate:.1f} | {' / '.join(f'{g:.1f}' for g in memory) or 'n/a'} | "
            f"{_fmt(100 * rate / max(memory) if memory else None, 0)} | {_fmt(r['build_s'], 2)} |"
        )
    return _section(
        "Decoding with state",
        "transformers' `convert_and_export_with_cache` (Llama over a StaticCache written in "
        "place at `cache_position`): the caches are state that the VM keeps between calls. "
        "The first steps' logits are checked against the same torch module in eager (rtol "
        "1e-3, atol 1e-3), then both are timed in turns (medians), each walking its cache's "
        "positions. `MB a step`: what one step must read from memory (every weight but the "
        "token embedding, and the whole key and value caches); `GB/s`: that over relaxmlir's "
        "time; `memory GB/s`: the read bandwidth the row's threads get from memory, measured "
        "before / after its timings (scripts/peak.py: each thread sums its share of a 256 MB "
        "buffer as 4 streams, best of 5, wall time; it moves with the hypervisor's placement "
        "of the vCPUs); `% bandwidth`: `GB/s` against the higher of the two. A step is bound "
        "by memory bandwidth, not by FMAs: where a second core adds little bandwidth, it adds "
        "little speed. `build s`: import and build, cold.",
        "| workload | threads | torch ms | relaxmlir ms | x torch | MB a step | GB/s | "
        "memory GB/s | % bandwidth | build s |",
        lines,
    )


def render_lifted(rows: list[dict]) -> str:
    """The weights-as-inputs table (empty without such rows)."""
    if not rows:
        return ""
    lines = [
        f"| {r['id']} {r['title']} | {r['threads']} | {_fmt(r['bound_ms'])} | "
        f"{_fmt(r['lifted_ms'])} | {r['lifted_ms'] / r['bound_ms']:.2f} | "
        f"{_fmt(r['per_call_ms'])} | {_fmt(r['bound_build_s'], 2)} | "
        f"{_fmt(r['lifted_build_s'], 2)} | {_fmt(r['per_call_build_s'], 2)} | "
        f"{_fmt(r['transform_s'], 2)} |"
        for r in rows
    ]
    return _section(
        "Weights as inputs",
        "The same model imported with `keep_params_as_input=True`: `lifted` is "
        "`LiftTransformParams` (what reads only the weights, e.g. batch norms folded into "
        "the conv weights, their blocked layout, the matmul weights' packing, runs once in "
        "`main_transform_params`, its time in `transform s`), `per call` keeps it all in "
        "`main`. All three are checked against torch eager (rtol 1e-3, atol 1e-3) and timed "
        "in turns (medians); builds cold, in one process, each after the one before.",
        "| workload | threads | bound ms | lifted ms | lifted / bound | per call ms "
        "| bound build s | lifted build s | per call build s | transform s |",
        lines,
    )


def render_scaling(rows: list[dict]) -> str:
    """The 1 vs all threads table (empty without such rows)."""
    if not rows:
        return ""
    n = rows[0]["threads"]
    lines = [
        f"| {r['id']} {r['title']} | {_fmt(r['ours_1_ms'])} | {_fmt(r[f'ours_{n}_ms'])} | "
        f"{r['ours_1_ms'] / r[f'ours_{n}_ms']:.2f} | {_fmt(r['torch_1_ms'])} | "
        f"{_fmt(r[f'torch_{n}_ms'])} | {r['torch_1_ms'] / r[f'torch_{n}_ms']:.2f} |"
        for r in rows
    ]
    return _section(
        "Scaling, in turns",
        f"The 1-thread and the {n}-thread build of each workload whose 1-thread time is above "
        f"1 ms, and torch eager at 1 and {n} threads (`torch.set_num_threads`), checked "
        "against torch eager (rtol 1e-3, atol 1e-3) and timed in turns in one process "
        "(medians): the W rows above come from one child process per thread count, minutes "
        "apart, and the speed of this shared machine drifts between them. Issue 9's target: "
        f"relaxmlir at {n} threads at least 1.6x its 1-thread speed.",
        f"| workload | relaxmlir 1 thread ms | relaxmlir {n} threads ms | relaxmlir x | "
        f"torch 1 thread ms | torch {n} threads ms | torch x |",
        lines,
    )


def _tuned_note(work_dir: str) -> str:
    """What the tuned column holds: the work dir's size and the targets its records are for."""
    if not work_dir:
        return ""
    records = os.path.join(work_dir, "database_tuning_record.json")
    workloads = os.path.join(work_dir, "database_workload.json")
    try:
        with open(records) as f:
            n_records = sum(1 for _ in f)
        with open(workloads) as f:
            targets = sorted({json.loads(line).get("target", "?") for line in f if line.strip()})
    except OSError as exc:
        return f"no tuning database in {work_dir} ({exc.strerror})"
    size = sum(os.path.getsize(os.path.join(work_dir, n)) for n in os.listdir(work_dir))
    return (
        f"the same build with MetaScheduleApplyDatabase({work_dir}) after the zero pipeline "
        f"({n_records} records, {size / 1e6:.1f} MB in the work dir; records for "
        f"{'; '.join(targets)}: rows of another target keep their defaults), the ratio to the "
        "default schedules in parentheses."
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        default=",".join([*WORKLOADS, *SYMBOLIC, *LIFTED, *DECODE, *SCALING]),
        help="comma-separated workload ids (W7 = W7a,W7b; S2, S8: symbolic builds; L7, L8, "
        "L11: weights as inputs; X3, X7a, ...: 1 vs all threads in turns)",
    )
    parser.add_argument(
        "--threads", default=f"1,{os.cpu_count()}", help="comma-separated thread counts"
    )
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument(
        "--isa", choices=["native", *ISA_ENV], default="native",
        help="avx2: every system on its AVX2 code path (an AVX2-only CPU, approximated)",
    )  # fmt: skip
    parser.add_argument(
        "--tuned", default="",
        help="a tuning work dir: a tuned column for the real models (its records' targets apply)",
    )  # fmt: skip
    parser.add_argument("--output", default=None)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        names = _select([n.strip() for n in args.only.split(",") if n.strip()])
    except KeyError as exc:
        parser.error(
            f"unknown workload {exc}; known: "
            f"{', '.join([*WORKLOADS, *SYMBOLIC, *LIFTED, *DECODE, *SCALING])} "
            "(W7 selects W7a and W7b)"
        )
    if args.child is not None:
        print(json.dumps(run_child(names, args.child, args.repeat, not args.no_torch_compile)))
        return 0
    thread_counts = sorted({int(t) for t in args.threads.split(",")})
    # the peak first, on an otherwise idle machine; 1 thread too, for the per-core figure
    peak_info = peak.measure(sorted({1, *thread_counts}), runs=5, isa=args.isa)
    if args.output is None:
        name = "RESULTS.md" if args.isa == "native" else f"RESULTS_{args.isa.upper()}.md"
        args.output = str(ROOT / "benchmarks" / name)
    print(f"measured f32 peak: {_peak_text(peak_info)}", file=sys.stderr, flush=True)
    unset = [key for key in BLAS_OVERRIDES if key in os.environ]
    rows, symbolic, lifted, scaling, decode, blas = [], [], [], [], [], {}
    cache_dir = tempfile.mkdtemp(prefix="relaxmlir-bench-cache-")
    if any(n in SCALING for n in names) and max(thread_counts) == 1:
        print("the X (scaling) rows need a thread count above 1: skipped", file=sys.stderr)
    for threads in thread_counts:
        # the scaling rows run once, in the child of the most threads
        child_names = [n for n in names if n not in SCALING or (threads == max(thread_counts) > 1)]
        if not child_names:
            continue
        env = dict(os.environ)
        for key in BLAS_OVERRIDES:
            env.pop(key, None)
        env["RELAXMLIR_CACHE"] = "1"
        env["RELAXMLIR_CACHE_DIR"] = cache_dir  # cold builds are cold; the user's cache untouched
        env.update(ISA_ENV.get(args.isa, {}))
        env["RELAXMLIR_BENCH_ISA"] = args.isa
        if args.tuned:
            env["RELAXMLIR_BENCH_TUNED"] = os.path.abspath(args.tuned)
        for key in (
            "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "MKL_NUM_THREADS",
            "RELAXMLIR_NUM_THREADS",
        ):
            env[key] = str(threads)
        cmd = [
            sys.executable,
            __file__,
            "--child",
            str(threads),
            "--only",
            ",".join(child_names),
            "--repeat",
            str(args.repeat),
        ]
        if args.no_torch_compile:
            cmd.append("--no-torch-compile")
        proc = subprocess.run(
            cmd, check=False, env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        if proc.returncode != 0:
            print(
                f"benchmark child for {threads} thread(s) failed (rc={proc.returncode})",
                file=sys.stderr,
            )
            shutil.rmtree(cache_dir, ignore_errors=True)
            return 1
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        rows += result["rows"]
        symbolic += result["symbolic"]
        lifted += result["lifted"]
        scaling += result["scaling"]
        decode += result["decode"]
        blas[threads] = result["blas"]
    shutil.rmtree(cache_dir, ignore_errors=True)
    command = "python scripts/bench.py " + " ".join(a for a in (argv or sys.argv[1:]))
    text = render(rows, command.strip(), peak_info, blas, unset, args.isa, _tuned_note(args.tuned))
    text += render_symbolic(symbolic)
    text += render_lifted(lifted)
    text += render_decode(decode)
    text += render_scaling(scaling)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
