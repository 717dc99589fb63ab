"""The GPU schedules, numerically, without a GPU: the cuda row up to bufferization (GPU rules,
fusion into block and thread tiles, thread-private temporaries), then the CPU's codegen, where
each mapped scf.forall runs as a parallel loop. A wrong tile, fusion or temporary gives wrong
numbers here just as it would on a device; only the final mapping to gpu.launch (upstream's) and
PTX are not exercised (those have lit tests and ptxas)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mlp_models import mlp, params, reference
from test_frontend_fx import import_model
from test_models import MODELS

import relaxmlir as rm
from dialects import relax as rx
from lowering.jit import JitCode
from lowering.pipelines import GRAPH_LOWERING, cpu_codegen, cuda_stages
from lowering.registry import run_pipeline
from relaxmlir import relax, te
from relaxmlir.relax.pipeline import get_pipeline
from relaxmlir.relax.vm_build import _function_infos
from relaxmlir.runtime.executable import Executable
from relaxmlir.scope import scope
from relaxmlir.target import Target


def build_gpu_schedule_on_cpu(mod: rm.IRModule, arch: str = "sm_90") -> tuple[Executable, str]:
    """Executable of `mod` scheduled by the cuda row, run on the host; and the schedules used."""
    cuda = Target({"kind": "cuda", "arch": arch})
    stages = dict(cuda_stages(cuda))
    host = cuda.host
    with scope(), cuda:
        if rx.high_level_ops(mod.module.operation):
            mod = get_pipeline("zero")(mod)
        mod = mod.clone()
        infos = _function_infos(mod)
        run_pipeline(
            mod.module,
            "builtin.module("
            + ",".join([*GRAPH_LOWERING, *stages["schedule"], *stages["bufferize"]])
            + ")",
        )
        scheduled = str(mod.module)
        with host:
            run_pipeline(mod.module, "builtin.module(" + ",".join(cpu_codegen(host)) + ")")
        code = JitCode(mod.module, host)
    return Executable(code, infos, [], host), scheduled


def _run(mod, *args):
    ex, scheduled = build_gpu_schedule_on_cpu(mod)
    out = relax.VirtualMachine(ex, rm.cpu())["main"](*args)
    return (out if isinstance(out, tuple) else (out,)), scheduled


def _one_op(shapes: list[tuple], fn, dtype="float32") -> rm.IRModule:
    xs = [relax.Var(f"x{i}", relax.TensorStructInfo(s, dtype)) for i, s in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", xs):
        with bb.dataflow():
            out = bb.emit_output(fn(bb, *xs))
        bb.emit_func_output(out)
    return get_pipeline("default")(bb.get())


def test_mlp_gemv_and_fused_epilogue():
    p = params()
    mod = relax.transform.BindParams("main", p)(mlp("tir", 3))
    x = np.random.default_rng(0).standard_normal((3, 784), dtype=np.float32)
    (out,), scheduled = _run(mod, x)
    assert '["gemv"]' in scheduled
    np.testing.assert_allclose(out.numpy(), reference(x, p), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("m", "n", "k"), [(256, 384, 512), (100, 70, 50), (65, 129, 33)])
def test_matmul_register_tiles_including_partial_blocks(m, n, k):
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((m, k), dtype=np.float32),
        rng.standard_normal((k, n), dtype=np.float32),
    )
    bias = rng.standard_normal((n,), dtype=np.float32)
    mod = _one_op(
        [(m, k), (k, n), (n,)],
        lambda bb, x, y, z: relax.op.nn.relu(relax.op.add(relax.op.matmul(x, y), z)),
    )
    (out,), scheduled = _run(mod, a, b, bias)
    assert '["matmul"]' in scheduled
    np.testing.assert_allclose(out.numpy(), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(33, 100), (4, 7, 1000)])
def test_softmax_one_block_per_row(shape):
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    mod = _one_op([shape], lambda bb, v: relax.op.nn.softmax(v, axis=-1))
    (out,), scheduled = _run(mod, x)
    assert "general_reduction" in scheduled or "reduction" in scheduled
    want = torch.softmax(torch.from_numpy(x), -1).numpy()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


def test_layer_norm_and_row_sum():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 300), dtype=np.float32)
    g, b = rng.standard_normal(300, dtype=np.float32), rng.standard_normal(300, dtype=np.float32)
    mod = _one_op(
        [(20, 300), (300,), (300,)], lambda bb, v, w, c: relax.op.nn.layer_norm(v, w, c, axes=[-1])
    )
    (out,), _ = _run(mod, x, g, b)
    want = torch.nn.functional.layer_norm(
        torch.from_numpy(x), (300,), torch.from_numpy(g), torch.from_numpy(b)
    ).numpy()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
    (total,), scheduled = _run(_one_op([(20, 300)], lambda bb, v: relax.op.sum(v, axis=[1])), x)
    assert '["reduction"]' in scheduled
    np.testing.assert_allclose(total.numpy(), x.sum(1), rtol=1e-4, atol=1e-4)


def test_math_and_odd_shapes_fallback():
    x = np.random.default_rng(0).standard_normal((3, 5, 77), dtype=np.float32)

    def act(a):
        return te.compute(
            a.shape, lambda *i: te.exp(a(*i)) * te.tanh(a(*i)) + te.erf(a(*i)), name="act"
        )

    (out,), scheduled = _run(_one_op([(3, 5, 77)], lambda bb, v: bb.emit_te(act, v)), x)
    assert '["fallback"]' in scheduled
    t = torch.from_numpy(x)
    np.testing.assert_allclose(
        out.numpy(), (t.exp() * t.tanh() + torch.erf(t)).numpy(), rtol=1e-5, atol=1e-5
    )


def test_full_reduction_runs_on_one_thread():
    x = np.random.default_rng(0).standard_normal((30, 40), dtype=np.float32)
    (out,), scheduled = _run(_one_op([(30, 40)], lambda bb, v: relax.op.mean(v)), x)
    assert '["serial"]' in scheduled
    np.testing.assert_allclose(out.numpy(), x.mean(), rtol=1e-5)


def test_symbolic_batch_runs_unfused_kernels():
    p = params()
    mod = relax.transform.BindParams("main", p)(mlp("tir", "n"))
    x = np.random.default_rng(1).standard_normal((5, 784), dtype=np.float32)
    (out,), scheduled = _run(mod, x)
    assert "fallback-unfused" in scheduled  # dynamic tiles do not fuse: one kernel per op
    np.testing.assert_allclose(out.numpy(), reference(x, p), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", list(MODELS))
def test_models_match_torch(name: str):
    torch.manual_seed(0)
    make, inputs = MODELS[name]
    model, args = make().eval(), inputs()
    got, scheduled = _run(import_model(model, args, "ep"), *[a.numpy() for a in args])
    mapped = "#gpu.block<x>" in scheduled and "#gpu.thread<x>" in scheduled
    assert mapped or "relax.gpu_" in scheduled  # mapped foralls, or ops a kernel template takes
    with torch.no_grad():
        want = model(*args)
    np.testing.assert_allclose(got[0].numpy(), want.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)
