"""`vm.profile(name, *args)`: every kernel call of a compiled CPU entry point timed, by name.

The hooks are compiled into every CPU build (lowering/profile_hooks.py; the lit test
tests/lit/lowering/relax-profile-hooks.mlir shows them); these tests run them from the JIT, from
an exported library and through packed functions, and check the report against the call."""

from __future__ import annotations

import json

import numpy as np
import pytest
from mlp_models import mlp, params, reference, register_torch_env

import relaxmlir as rm
from relaxmlir import relax, runtime


def _x(batch: int = 4) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((batch, 784), dtype=np.float32)


def test_profile_names_every_kernel_and_adds_up():
    ex = relax.build(relax.transform.BindParams("main", params())(mlp("tir", 4)), target="llvm")
    vm = relax.VirtualMachine(ex, rm.cpu())
    report = vm.profile("main", _x())
    names = [r.name for r in report.rows]
    # the MLP's kernels after fusion: linear + relu in one, then the second linear
    assert len(names) == 2 and all(r.calls == 1 for r in report.rows), report
    assert any("relu" in n for n in names), names
    assert 0 < report.kernels_us <= report.total_us
    assert report.rows[0].total_us >= report.rows[1].total_us  # slowest first
    # the profiled entry still computes the model
    np.testing.assert_allclose(vm["main"](_x()).numpy(), reference(_x(), params()), rtol=1e-4, atol=1e-4)
    table = report.table()
    assert table.splitlines()[0].split() == ["Name", "Count", "Duration", "(us)", "Mean", "(us)", "Percent"]
    assert "(other)" in table and "(total)" in table and str(report) == table
    csv = report.csv().splitlines()
    assert csv[0] == "name,count,duration_us,mean_us,percent" and len(csv) == 2 + 2 + 1
    data = json.loads(report.json())
    assert data["function"] == "main" and [k["name"] for k in data["kernels"]] == names


def test_profile_counts_repeated_kernels_and_packed_functions(tmp_path):
    """A kernel called twice is one row with count 2; a packed function is named by its
    registered name; an exported library keeps its own timers."""
    register_torch_env()
    ex = relax.build(mlp("packed", 4), target="llvm")
    vm = relax.VirtualMachine(ex, rm.cpu())
    p = params()
    args = [_x(), p["w0"], p["b0"], p["w1"], p["b1"]]
    report = vm.profile("main", *args)
    rows = {r.name: r.calls for r in report.rows}
    assert rows == {"env.linear": 2, "env.relu": 1}, rows

    lib = tmp_path / "mlp.so"
    tir = relax.build(relax.transform.BindParams("main", params())(mlp("tir", 4)), target="llvm")
    tir.export_library(str(lib))
    loaded = relax.VirtualMachine(runtime.load_module(str(lib)), rm.cpu())
    exported = loaded.profile("main", _x())
    jit = relax.VirtualMachine(tir, rm.cpu()).profile("main", _x())
    assert sorted(r.name for r in exported.rows) == sorted(r.name for r in jit.rows)


def test_profile_errors_are_clear():
    ex = relax.build(relax.transform.BindParams("main", params())(mlp("tir", 4)), target="llvm")
    vm = relax.VirtualMachine(ex, rm.cpu(), profile=True)  # TVM's spelling, accepted
    with pytest.raises(TypeError, match="profile: expected True or False"):
        relax.VirtualMachine(ex, rm.cpu(), profile="yes")
    with pytest.raises(KeyError, match="no function 'nope'"):
        vm.profile("nope", _x())
    with pytest.raises(ValueError, match="shape"):
        vm.profile("main", _x(5))
