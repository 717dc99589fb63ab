"""`relaxmlir.dlight`: default schedules as a module pass under `with target:` (GPU and CPU rules)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from mlp_models import mlp, params, reference
from test_cuda import check_ptx

import relaxmlir as rm
from relaxmlir import dlight as dl
from relaxmlir import relax
from relaxmlir.relax.pipeline import get_pipeline

ALL_GPU = (
    dl.gpu.Matmul(),
    dl.gpu.GEMV(),
    dl.gpu.Reduction(),
    dl.gpu.GeneralReduction(),
    dl.gpu.Fallback(),
)


def _schedules(module_text: str) -> list[str]:
    return re.findall(r'relax.schedule = \["([^"]*)"\]', module_text)


@pytest.fixture(scope="module")
def fused_mlp() -> rm.IRModule:
    """The MLP after legalization and fusion, as TVM runs DLight after `relax.get_pipeline()`."""
    return get_pipeline("default")(relax.transform.BindParams("main", params())(mlp("tir", 4)))


def test_gpu_rules_schedule_every_prim_func(fused_mlp):
    with rm.target.Target("cuda"):
        scheduled = dl.ApplyDefaultSchedule(*ALL_GPU)(fused_mlp)
    assert sorted(_schedules(str(scheduled.module))) == ["gemv", "gemv"]
    # te_linear's weight is [N, K]: the GEMV rule gives it the row template (tagged here)
    assert "relax.gpu_rows" in str(scheduled.module)
    assert _schedules(str(fused_mlp.module)) == []  # the input module is left as it was
    ex = relax.build(scheduled, "cuda")  # build keeps the schedules and lowers them
    assert sorted(_schedules(str(ex.lowered))) == ["gemv", "gemv"]
    check_ptx(ex)


def test_rules_are_tried_in_the_order_given(fused_mlp):
    with rm.target.Target("cuda"):
        first_fallback = dl.ApplyDefaultSchedule(dl.gpu.Fallback(), dl.gpu.GEMV())(fused_mlp)
    assert _schedules(str(first_fallback.module)) == ["fallback", "fallback"]


def test_functions_no_rule_covers_are_left_to_build(fused_mlp):
    """Reduction applies to reduction roots; the MLP's kernels end in bias epilogues, so none is
    scheduled, and relax.build schedules them with the full table."""
    with rm.target.Target("cuda"):
        only_reduction = dl.ApplyDefaultSchedule(dl.gpu.Reduction())(fused_mlp)
    assert _schedules(str(only_reduction.module)) == []
    assert sorted(_schedules(str(relax.build(only_reduction, "cuda").lowered))) == ["gemv", "gemv"]


def test_cpu_rules_run_and_match_numpy(fused_mlp):
    with rm.target.Target("llvm"):
        scheduled = dl.ApplyDefaultSchedule(
            dl.cpu.Matmul(), dl.cpu.Elementwise(), dl.cpu.Fallback()
        )(fused_mlp)
    assert all(s.startswith("matmul") for s in _schedules(str(scheduled.module)))
    vm = relax.VirtualMachine(relax.build(scheduled, "llvm"), rm.cpu())
    x = np.random.default_rng(0).standard_normal((4, 784), dtype=np.float32)
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, params()), rtol=1e-4, atol=1e-4)


def test_composes_with_sequential(fused_mlp):
    seq = rm.transform.Sequential([dl.ApplyDefaultSchedule(dl.gpu.Fallback())])
    with rm.target.Target({"kind": "cuda", "arch": "sm_80"}):
        out = seq(fused_mlp)
    assert _schedules(str(out.module)) == ["fallback", "fallback"]


def test_errors(fused_mlp):
    with pytest.raises(ValueError, match="no target in scope"):
        dl.ApplyDefaultSchedule(dl.gpu.Fallback())(fused_mlp)
    with (
        rm.target.Target("cuda"),
        pytest.raises(ValueError, match=r"dl.cpu.Matmul\(\)\] do not schedule for target 'cuda'"),
    ):
        dl.ApplyDefaultSchedule(dl.cpu.Matmul())(fused_mlp)
    with pytest.raises(TypeError, match="expected dl.gpu/dl.cpu rules"):
        dl.ApplyDefaultSchedule("matmul")
    with pytest.raises(ValueError, match="at least one rule"):
        dl.ApplyDefaultSchedule()
