"""Buffers that a model updates in place become state that the VM keeps between calls.

Each model runs several calls against the torch module it was imported from (which updates its
own buffers as it goes): outputs within rtol / atol 1e-5, integer counters exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_exported_program

RTOL = ATOL = 1e-5


class Accumulator(nn.Module):
    """A running sum it also returns as is, and a step counter (0-d int64)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("total", torch.zeros(2, 4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        self.total.add_(self.lin(x))
        self.steps.add_(1)
        return self.total, self.steps * 10


class CachedAttention(nn.Module):
    """One decode step over a static KV cache, written at `pos` with `index_copy_` (as
    transformers' StaticCache does) and read back whole, masked past `pos`."""

    def __init__(self, length=16, dim=8):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.register_buffer("k_cache", torch.zeros(1, length, dim))
        self.register_buffer("v_cache", torch.zeros(1, length, dim))

    def forward(self, x, pos):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        self.k_cache.index_copy_(1, pos, k)
        self.v_cache[:, pos] = v
        scores = q @ self.k_cache.transpose(1, 2)
        seen = torch.arange(self.k_cache.shape[1]) <= pos
        scores = scores.masked_fill(~seen, float("-inf"))
        return scores.softmax(-1) @ self.v_cache


def _exported(model_type, *args):
    torch.manual_seed(0)
    model = model_type().eval()
    reference = model_type().eval()
    reference.load_state_dict(model.state_dict())
    return torch.export.export(model, args), reference


def _vm(mod, target="llvm"):
    return relax.VirtualMachine(relax.build(mod, target), rm.cpu())


def _check(vm, reference, inputs):
    for args in inputs:
        got = vm["main"](*[a.numpy() for a in args])
        with torch.no_grad():
            want = reference(*args)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=RTOL, atol=ATOL)


def test_running_sum_and_counter_persist_between_calls():
    rng = torch.Generator().manual_seed(1)
    ep, reference = _exported(Accumulator, torch.randn(2, 4))
    mod = from_exported_program(ep)
    info = _vm(mod).signature("main")
    assert info.state == ["total", "steps"] and info.state_init == "main_initial_state"
    vm = _vm(mod)
    _check(vm, reference, [(torch.randn(2, 4, generator=rng),) for _ in range(4)])
    state = vm.state()
    want = reference.total.numpy()
    np.testing.assert_allclose(state["total"].numpy(), want, rtol=RTOL, atol=ATOL)
    assert int(state["steps"].numpy()) == 4
    x = torch.randn(2, 4, generator=rng)
    total, _ = vm["main"](x.numpy())
    first = total.numpy().copy()
    vm["main"](x.numpy())  # the next call's new state is its own array: the result stays
    np.testing.assert_array_equal(total.numpy(), first)
    vm.reset_state()  # back to the buffers at export: zeros
    assert not vm.state()["total"].numpy().any() and int(vm.state()["steps"].numpy()) == 0
    total, steps = vm["main"](x.numpy())
    assert int(steps.numpy()) == 10


def test_static_kv_cache_decode_steps_match_torch():
    ep, reference = _exported(CachedAttention, torch.randn(1, 1, 8), torch.tensor([0]))
    vm = _vm(from_exported_program(ep))
    rng = torch.Generator().manual_seed(2)
    steps = [(torch.randn(1, 1, 8, generator=rng), torch.tensor([p])) for p in range(6)]
    _check(vm, reference, steps)
    np.testing.assert_allclose(vm.state()["v_cache"].numpy(), reference.v_cache.numpy(), rtol=RTOL)


def test_kv_cache_written_in_place(tmp_path):
    """relax-inplace-state: each cache's only reader is its index_copy, so the build writes the
    new row into the state's own array (no copy of the cache per call): main returns the
    output only, the VM passes the same arrays at every call, vm.profile leaves them as they
    were, a position outside the cache writes nothing (torch raises there; the kernel must not
    write out of bounds), -1 writes the last row. An exported library keeps the marking."""
    ep, reference = _exported(CachedAttention, torch.randn(1, 1, 8), torch.tensor([0]))
    vm = _vm(from_exported_program(ep))
    info = vm.signature("main")
    assert info.state_inplace == ["k_cache", "v_cache"] and len(info.results) == 1
    arrays = vm.state()
    rng = torch.Generator().manual_seed(5)
    steps = [(torch.randn(1, 1, 8, generator=rng), torch.tensor([p])) for p in (0, 1, 4, 2)]
    _check(vm, reference, steps)
    assert all(vm.state()[name] is array for name, array in arrays.items())
    for name in arrays:
        want = getattr(reference, name).numpy()
        np.testing.assert_allclose(arrays[name].numpy(), want, rtol=RTOL, atol=ATOL)
    x = torch.randn(1, 1, 8, generator=rng)
    before = {name: array.numpy() for name, array in arrays.items()}
    vm.profile("main", x.numpy(), np.array([7]))
    for pos in (16, -17, 1 << 40):
        vm["main"](x.numpy(), np.array([pos]))
    for name, array in arrays.items():
        np.testing.assert_array_equal(array.numpy(), before[name])
    vm["main"](x.numpy(), np.array([-1]))  # its output masks every row out: NaN, as torch's
    with torch.no_grad():
        reference(x, torch.tensor([15]))
    for name, array in arrays.items():
        want = getattr(reference, name).numpy()
        np.testing.assert_allclose(array.numpy(), want, rtol=RTOL, atol=ATOL)

    path = str(tmp_path / "cache.so")
    relax.build(from_exported_program(ep), "llvm").export_library(path)
    loaded = relax.VirtualMachine(rm.runtime.load_module(path), rm.cpu())
    assert loaded.signature("main").state_inplace == ["k_cache", "v_cache"]
    reference.k_cache.zero_()
    reference.v_cache.zero_()
    _check(loaded, reference, steps)


class _ReadsOldCache(nn.Module):
    """The cache read before its write too: its old value must outlive the write."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 6, 4))

    def forward(self, x, pos):
        old = self.cache.sum(1)
        self.cache.index_copy_(1, pos, x)
        return self.cache.sum(1) - old * 0.5


def test_cache_read_before_its_write_is_not_written_in_place():
    ep, reference = _exported(_ReadsOldCache, torch.randn(1, 1, 4), torch.tensor([0]))
    vm = _vm(from_exported_program(ep))
    assert vm.signature("main").state_inplace == []
    rng = torch.Generator().manual_seed(6)
    steps = [(torch.randn(1, 1, 4, generator=rng), torch.tensor([p])) for p in (0, 3, 3, 5)]
    _check(vm, reference, steps)


def test_state_with_weights_as_inputs_lifted_and_exported(tmp_path):
    """keep_params_as_input: the state parameters stay inputs (num_input counts them), so
    LiftTransformParams leaves them alone; an exported library keeps the state's description
    and a VM over the loaded library keeps the state as the built one does."""
    x = torch.randn(2, 4)
    ep, reference = _exported(Accumulator, x)
    mod, params = from_exported_program(ep, keep_params_as_input=True)
    assert sorted(params) == ["lin.bias", "lin.weight"]
    mod = relax.transform.LiftTransformParams()(mod)
    vm = _vm(mod)
    weights = vm["main_transform_params"](*params.values())
    weights = weights if isinstance(weights, tuple) else (weights,)
    rng = torch.Generator().manual_seed(3)
    for _ in range(3):
        x = torch.randn(2, 4, generator=rng)
        total, steps = vm["main"](x.numpy(), *weights)
        with torch.no_grad():
            want_total, want_steps = reference(x)
        np.testing.assert_allclose(total.numpy(), want_total.numpy(), rtol=RTOL, atol=ATOL)
        assert int(steps.numpy()) == int(want_steps)

    ep, reference = _exported(Accumulator, x)
    path = str(tmp_path / "acc.so")
    relax.build(from_exported_program(ep), "llvm").export_library(path)
    loaded = relax.VirtualMachine(rm.runtime.load_module(path), rm.cpu())
    assert loaded.signature("main").state == ["total", "steps"]
    _check(loaded, reference, [(torch.randn(2, 4, generator=rng),) for _ in range(3)])


def test_errors_name_the_state():
    ep, _ = _exported(Accumulator, torch.randn(2, 4))
    vm = _vm(from_exported_program(ep))
    match = r"main\(\) takes 1 argument\(s\), got 2 \(its state total, steps"
    with pytest.raises(TypeError, match=match):
        vm["main"](np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="'main_initial_state' keeps no state"):
        vm.state("main_initial_state")

    class Training(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x):
            with torch.no_grad():
                self.w.add_(x)
            return self.w * 2

    ep = torch.export.export(Training(), (torch.randn(3),))
    with pytest.raises(NotImplementedError, match="updates parameter 'w' in place"):
        from_exported_program(ep)


class _FxCache(nn.Module):
    """A cache written in place and read after the write: torch.fx records a get_attr node per
    read of the buffer (reads that do not mix with an input are evaluated at trace time)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 8, 4))

    def forward(self, x, pos):
        self.cache.index_copy_(1, pos, x)
        return (self.cache * x.sum()).sum(1)


def test_from_fx_buffer_written_in_place_is_state():
    from relaxmlir.frontend import from_fx

    model, reference = _FxCache(), _FxCache()
    graph = torch.fx.symbolic_trace(model)
    mod = from_fx(graph, [(1, 1, 4), (1,)], input_dtypes=["float32", "int64"])
    vm = _vm(mod)
    assert vm.signature("main").state == ["cache"]
    rng = torch.Generator().manual_seed(4)
    steps = [(torch.randn(1, 1, 4, generator=rng), torch.tensor([p])) for p in (0, 3, 5)]
    _check(vm, reference, steps)
    np.testing.assert_allclose(vm.state()["cache"].numpy(), reference.cache.numpy(), rtol=RTOL)


def test_inputs_written_in_place_are_written_back():
    """`x.add_(y)` on an argument: the caller's array (numpy, or a torch tensor shared without
    a copy) holds the new value after the call, as torch writes the caller's tensor; the
    output reads the written value."""

    class Writes(nn.Module):
        def forward(self, x, y):
            x.add_(y)
            return x * 2

    ep = torch.export.export(Writes(), (torch.ones(3), torch.ones(3)))
    vm = _vm(from_exported_program(ep))
    assert vm.signature("main").input_updates == ["x"]
    x, y = np.arange(3, dtype=np.float32), np.full(3, 0.5, np.float32)
    np.testing.assert_array_equal(vm["main"](x, y).numpy(), [1, 3, 5])
    np.testing.assert_array_equal(x, [0.5, 1.5, 2.5])
    t = torch.zeros(3)
    vm["main"](t, y)
    torch.testing.assert_close(t, torch.full((3,), 0.5))
    with pytest.raises(ValueError, match="keeps no state"):
        vm.state()
