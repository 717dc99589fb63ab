"""LiftTransformParams: models that take their weights as inputs compute what reads only the
weights once, in `main_transform_params`, and `main` reads the results (matmul weights as the
packed panels the schedules read). Outputs against torch eager (rtol 1e-4, atol 1e-5)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hosts import runnable
from torch import nn

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_exported_program

RTOL, ATOL = 1e-4, 1e-5
# 16-lane panels where this machine runs them, else the widest level it does (an AVX2-only CPU)
TARGET = runnable({"kind": "llvm", "num-cores": 2, "mcpu": "x86-64-v4"})


class ConvNet(nn.Module):
    """Conv + batch norm + ReLU, global pooling, two linear layers (one [N, K] weight whose N is
    not a whole number of panels)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.fc1 = nn.Linear(16, 40)
        self.fc2 = nn.Linear(40, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        return self.fc2(torch.relu(self.fc1(y)))


def _model():
    torch.manual_seed(0)
    model = ConvNet().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 8, 8)
    return model, x


def _imported():
    model, x = _model()
    mod, params = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=True)
    return model, x, mod, params


def _run(mod, x, params):
    vm = relax.VirtualMachine(relax.build(mod, rm.target.Target(TARGET)), rm.cpu())
    weights = vm["main_transform_params"](*[rm.nd.array(p) for p in params.values()])
    weights = weights if isinstance(weights, (list, tuple)) else [weights]
    return vm["main"](rm.nd.array(x.numpy()), *weights).numpy(), weights


def test_importer_marks_the_inputs():
    _, _, mod, params = _imported()
    assert mod["main"].attrs["num_input"] == 1
    assert len(mod["main"].params) == 1 + len(params)


@pytest.mark.parametrize("when", ["after the zero pipeline", "on the imported module"])
def test_lifted_model_matches_torch(when):
    model, x, mod, params = _imported()
    if when == "after the zero pipeline":
        with rm.target.Target(TARGET):
            mod = relax.get_pipeline("zero")(mod)
    mod = relax.transform.LiftTransformParams()(mod)
    assert "main_transform_params" in mod
    assert mod["main"].attrs["transform_params"] is not None
    assert mod["main"].attrs["num_input"] == 1
    names = [name for name, _ in mod["main"].params]
    assert names[0] == "x" and "fc1.weight" not in names  # read transposed: lifted
    out, weights = _run(mod, x, params)
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=RTOL, atol=ATOL)
    # the linear weights come back as NR-wide panels [ceil(N/NR), K, NR] (relax.build packed
    # them in main_transform_params), which main reads: NR = 2 vectors, 32 on AVX-512, 16 on AVX2
    nr = 2 * rm.target.Target(TARGET).lanes("float32")
    shapes = [tuple(w.shape) for w in weights]
    assert (-(-40 // nr), 16, nr) in shapes and (-(-10 // nr), 40, nr) in shapes


def test_transform_runs_once_per_weights():
    """New weights give new results through the same executable."""
    model, x, mod, params = _imported()
    mod = relax.transform.LiftTransformParams()(mod)
    vm = relax.VirtualMachine(relax.build(mod, rm.target.Target(TARGET)), rm.cpu())
    for scale in (1.0, -0.5):
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(scale)
        state = model.state_dict()
        arrays = [rm.nd.array(state[name].numpy().copy()) for name in params]
        weights = vm["main_transform_params"](*arrays)
        out = vm["main"](rm.nd.array(x.numpy()), *weights).numpy()
        np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=RTOL, atol=ATOL)


def test_functions_without_num_input_are_left_alone():
    model, x = _model()
    mod = from_exported_program(torch.export.export(model, (x,)))
    before = str(mod)
    assert str(relax.transform.LiftTransformParams()(mod)) == before


def test_nothing_to_lift_yet():
    """Weights read as they are: main_transform_params returns them, and main is marked, so
    what relax.build later adds on the weights (here: nothing) would move there too."""
    from relaxmlir.ir import parse

    mod = parse(
        """
func.func @main(%x: tensor<2x3xf32> {relax.name = "x"}, %w: tensor<2x3xf32> {relax.name = "w"}) -> tensor<2x3xf32> attributes {relax.function, relax.num_input = 1 : i64} {
  %a = "relax.add"(%x, %w) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %a : tensor<2x3xf32>
}
"""
    )
    out = relax.transform.LiftTransformParams()(mod)
    assert [name for name, _ in out["main_transform_params"].params] == ["w"]
    assert [name for name, _ in out["main"].params] == ["x", "w"]
    again = relax.transform.LiftTransformParams()(out)
    assert str(again) == str(out)
    vm = relax.VirtualMachine(relax.build(out, "llvm"), rm.cpu())
    x, w = np.ones((2, 3), np.float32), np.full((2, 3), 2.0, np.float32)
    (w2,) = [vm["main_transform_params"](rm.nd.array(w))]
    np.testing.assert_array_equal(vm["main"](rm.nd.array(x), w2).numpy(), x + w)


def test_a_taken_name_is_an_error():
    from relaxmlir.ir import parse

    mod = parse(
        """
func.func @main_transform_params(%w: tensor<2x3xf32>) -> tensor<2x3xf32> attributes {relax.function} {
  return %w : tensor<2x3xf32>
}
func.func @main(%x: tensor<2x3xf32> {relax.name = "x"}, %w: tensor<2x3xf32> {relax.name = "w"}) -> tensor<2x3xf32> attributes {relax.function, relax.num_input = 1 : i64} {
  %a = "relax.add"(%x, %w) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %a : tensor<2x3xf32>
}
"""
    )
    with pytest.raises(ValueError, match="already has a function named 'main_transform_params'"):
        relax.transform.LiftTransformParams()(mod)


class Deep(nn.Module):
    """40 linear layers: 80 weights, with the input over the 64 buffers from which graph
    functions take descriptor pointers (`relax-descriptor-arguments`)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(12, 12) for _ in range(40))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


@pytest.mark.parametrize("lift", [True, False])
def test_many_weights_take_descriptor_pointers(lift, tmp_path):
    """`main` (and `main_transform_params`) with 81 buffers: each a descriptor pointer read
    before its use, in the JIT and in an exported library alike."""
    torch.manual_seed(0)
    model, x = Deep().eval(), torch.randn(3, 12)
    mod, params = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=True)
    if lift:
        mod = relax.transform.LiftTransformParams()(mod)
    ex = relax.build(mod, rm.target.Target(TARGET))
    main = re.search(r"llvm\.func @main\((.*?)\)", ex.as_text()).group(1)
    assert main.count("!llvm.ptr") > 64 and "i64" not in main, main  # no unpacked fields
    want = model(x).detach().numpy()
    library = str(tmp_path / "deep.so")
    ex.export_library(library)
    for lib in (ex, rm.load_module(library)):  # JIT and exported
        vm = relax.VirtualMachine(lib, rm.cpu())
        weights = [rm.nd.array(p) for p in params.values()]
        if lift:
            weights = list(vm["main_transform_params"](*weights))
        got = vm["main"](rm.nd.array(x.numpy()), *weights).numpy()
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


class Norms(nn.Module):
    """Batch norms that follow no convolution: a BatchNorm1d after a linear layer, and a
    BatchNorm2d (without affine weights) after a ReLU."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn2d = nn.BatchNorm2d(8, affine=False)
        self.fc = nn.Linear(8, 24)
        self.bn1d = nn.BatchNorm1d(24)

    def forward(self, x):
        y = self.bn2d(torch.relu(self.conv(x))).mean((2, 3))
        return torch.relu(self.bn1d(self.fc(y)))


def test_batch_norms_with_parameter_statistics_are_lifted():
    """Their per-channel `s = gamma / sqrt(var + eps)` and shift are computed once in
    main_transform_params; `main` multiplies and adds (no batch norm kernel, no square root)."""
    torch.manual_seed(0)
    model = Norms().eval()
    with torch.no_grad():
        for bn in (model.bn2d, model.bn1d):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 6, 6)
    mod, params = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=True)
    with rm.target.Target(TARGET):
        lowered = relax.get_pipeline("zero")(relax.transform.LiftTransformParams()(mod))
    main, transform = str(lowered["main"]), str(lowered["main_transform_params"])
    assert "batch_norm" not in main and "rsqrt" not in main, main
    assert transform.count("@rsqrt") >= 2, transform
    out, _ = _run(relax.transform.LiftTransformParams()(mod), x, params)
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=RTOL, atol=ATOL)
