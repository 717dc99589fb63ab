"""Targets as data: parsing, and builds for CPUs other than the host's that still run here.

An AVX2 build on an AVX-512 machine (and an SSE2-only build on any x86-64 machine) must use the
narrower vectors from the schedule down to the machine code and give the same numbers
(rtol=1e-4, atol=1e-4 against numpy, f32, fixed seed).
"""

from __future__ import annotations

import numpy as np
import pytest
from mlp_models import mlp, params, reference

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.target import Target, host_cpu

X86 = host_cpu()["arch"] == "x86_64"


def test_parse_forms_round_trip():
    t = Target("llvm -mcpu=x86-64-v3 -num-cores=2")
    assert t.kind == "llvm" and t.mcpu == "x86-64-v3" and t.num_cores == 2
    assert Target(str(t)) == t
    assert Target({"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 2}) == t
    assert t.vector_bits == 256 and t.vector_registers == 16 and t.lanes() == 8
    v4 = Target("llvm -mcpu=x86-64-v4")
    assert v4.vector_bits == 512 and v4.vector_registers == 32 and v4.lanes() == 16
    assert Target("llvm -mcpu=x86-64").vector_bits == 128
    assert Target("llvm -mcpu=neoverse-n1").vector_registers == 32
    assert not Target("llvm -mcpu=x86-64-v4 -mattr=-avx512f").has("avx512f")
    cuda = Target({"kind": "cuda", "arch": "sm_80"})
    assert cuda.ptx_version == 70 and cuda.host.kind == "llvm"
    assert Target("cuda").get("arch") == "sm_90"


def test_only_the_hosts_own_cpu_takes_its_cache_sizes():
    """A build for a generic level or another CPU model has the same schedules on every
    machine (the lit tests' `-mcpu=x86-64-v4` rows had followed the host's L2); the host's
    CPU keeps its caches, and sizes given stay. A host known only by its level (an Intel Xeon
    whose VM hides features of its model: x86-64-v4) keeps them when the target names no CPU;
    naming the level is the generic build, as on any other machine."""
    host = host_cpu()
    assert Target("llvm -mcpu=x86-64-v4").get("l2-cache") is None
    assert Target("llvm -mcpu=x86-64-v3").get("l2-cache") is None
    assert Target("llvm -mcpu=x86-64-v4 -l2-cache=524288").get("l2-cache") == 524288
    named = not host["mcpu"].startswith("x86-64") and host["mcpu"] != "generic"
    for key, size in host["caches"].items():
        assert Target("llvm").get(key) == size
        assert Target(str(Target("llvm"))).get(key) == size  # its text keeps them
        assert Target({"kind": "llvm", "mcpu": host["mcpu"]}).get(key) == (size if named else None)


@pytest.mark.parametrize(
    "spec,message",
    [
        ("rocm", "unknown target kind 'rocm'"),
        ("llvm -mcpu=pentium", "unknown CPU 'pentium'"),
        ("llvm -mattr=avx2", r"-mattr: \(avx2\) is not \+feature or -feature"),
        ("llvm -num-cores=0", "expects a positive int"),
        ("llvm -vector-width=3", "target kind 'llvm' has no attribute 'vector-width'"),
        ({"kind": "cuda", "arch": "sm_30"}, "unknown CUDA arch 'sm_30'"),
        ("llvm mcpu", "is not of the form -key=value"),
        ("llvm -mtriple=x86_64-pc-windows-msvc", "expected an x86_64 or aarch64 Linux triple"),
        ("llvm -mtriple=riscv64-unknown-linux-gnu", "expected an x86_64 or aarch64 Linux triple"),
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=znver3", "znver3 is an x86_64 CPU, but -mtriple"),
    ],
)
def test_bad_targets_raise_value_error(spec, message):
    with pytest.raises(ValueError, match=message):
        Target(spec)


def test_target_in_scope():
    assert Target.current() is None
    with Target("llvm -mcpu=x86-64-v3") as t:
        assert Target.current() is t
    assert Target.current() is None


def _mlp_module(batch=1):
    return relax.transform.BindParams("main", params())(mlp("tir", batch))


@pytest.mark.skipif(not X86, reason="x86-64 CPU names")
@pytest.mark.parametrize("mcpu", ["x86-64-v3", "x86-64"])
def test_narrower_cpu_builds_run_here(mcpu):
    target = Target(f"llvm -mcpu={mcpu}")
    if target.runs_on_host():
        pytest.skip(f"this machine lacks {target.runs_on_host()}")
    ex = relax.build(_mlp_module(64), target)  # batch 64: the packed matmul route
    text = ex.as_text()
    assert f'target_cpu = "{mcpu}"' in text
    assert "-avx512f" in text
    x = np.random.default_rng(0).standard_normal((64, 784), dtype=np.float32)
    got = relax.VirtualMachine(ex, rm.cpu())["main"](x).numpy()
    np.testing.assert_allclose(got, reference(x, params()), rtol=1e-4, atol=1e-4)


def test_a_triple_of_another_architecture_is_built_for_that_architecture(monkeypatch):
    """`-mtriple` alone names the architecture: its baseline CPU, not the host's (an aarch64
    triple had taken the host's znver3 and its features; the build ran x86 code here as if
    it were the aarch64 one). Such code cannot run here, and links only with a cross compiler."""
    from lowering.export import ExportError

    foreign = "aarch64" if host_cpu()["arch"] == "x86_64" else "x86_64"
    target = Target(f"llvm -mtriple={foreign}-unknown-linux-gnu")
    assert target.arch == foreign and target.mcpu == {"aarch64": "generic"}.get(foreign, "x86-64")
    assert target.get("l2-cache") is None and target.get("mattr") is None
    assert target.runs_on_host() == [f"architecture {foreign}"]
    ex = relax.build(_mlp_module(), target)
    with pytest.raises(RuntimeError, match=f"cannot run on this machine .*architecture {foreign}"):
        relax.VirtualMachine(ex, rm.cpu())["main"](np.zeros((1, 784), np.float32))
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(ExportError, match=rf"code is for {foreign} .* set \$CC to a C cross compiler"):
        ex.export_library("unused.so")


def test_build_options_are_validated():
    with pytest.raises(ValueError, match="exec_mode: unsupported value .*supported: compiled"):
        relax.build(_mlp_module(), "llvm", exec_mode="bytecode")
    with pytest.raises(ValueError, match="unknown target kind"):
        relax.build(_mlp_module(), "vulkan")


def test_as_text_is_the_lowered_module():
    text = relax.build(_mlp_module(), "llvm").as_text()
    assert "llvm.func @main" in text and "target_cpu" in text


def test_pipeline_rows_follow_the_target():
    from lowering.pipelines import target_pipeline

    avx2 = target_pipeline(Target("llvm -mcpu=x86-64-v3"))
    assert avx2[-1].startswith('relax-llvm-target{target="llvm ') and "-mcpu=x86-64-v3" in avx2[-1]
    # (the vector lowering runs nested on each function: func.func(convert-vector-to-llvm...))
    assert any("convert-vector-to-llvm{enable-x86vector}" in p for p in avx2)
    assert any(p.startswith("relax-schedule-cpu{target=") for p in avx2)
    arm = target_pipeline(Target("llvm -mcpu=neoverse-n1"))
    assert any("convert-vector-to-llvm," in p for p in arm)
    assert not any("enable-x86vector" in p for p in arm)
    with pytest.raises(ValueError, match="unknown stage"):
        target_pipeline(Target("llvm"), ["graph", "vectorize"])
    cuda = target_pipeline(Target("cuda -arch=sm_80"))
    assert "nvvm-attach-target{chip=sm_80 features=+ptx70 O=3}" in cuda
    assert not any(p.startswith("relax-schedule-cpu") for p in cuda)


def test_unknown_pass_in_a_pipeline_is_an_error():
    from lowering.pipelines import check
    from lowering.registry import PipelineError

    check(["relax-legalize-ops", "canonicalize"])
    with pytest.raises(PipelineError, match="'relax-legalise-ops' is not a known pass"):
        check(["relax-legalise-ops"])
    with pytest.raises(ValueError, match="unknown pipeline 'fast'; known pipelines: "):
        relax.get_pipeline("fast")
