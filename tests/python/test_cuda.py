"""The CUDA target without a GPU: the pipeline row, PTX per kernel, ptxas on every kernel of the
model tests, and the errors a user can cause (bad arch, packed functions)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from test_frontend_fx import import_model
from test_models import MODELS

import relaxmlir as rm
from lowering.gpu.codegen import assemble, find_ptxas, ptx_sources
from lowering.pipelines import target_pipeline
from relaxmlir import relax, te

PTXAS = find_ptxas()
needs_ptxas = pytest.mark.skipif(
    PTXAS is None,
    reason="ptxas not found (PATH, $CUDA_HOME, /usr/local/cuda or pip install relaxmlir[cuda])",
)


def mlp(batch: int = 4) -> rm.IRModule:
    from mlp_models import mlp as make
    from mlp_models import params

    return relax.transform.BindParams("main", params())(make("tir", batch))


def elementwise(shape=(64, 1000)) -> rm.IRModule:
    """exp(x) + tanh(x) + erf(x): libdevice math in one elementwise kernel."""
    x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))

    def act(a):
        return te.compute(
            a.shape, lambda *i: te.exp(a(*i)) + te.tanh(a(*i)) + te.erf(a(*i)), name="act"
        )

    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit_te(act, x))
        bb.emit_func_output(out)
    return bb.get()


def _shared_bytes(ptx: str) -> list[int]:
    """The sizes of a kernel's static shared buffers, in declaration order."""
    return [int(b) for b in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", ptx)]


def _ptxas_info(ptx: str, arch: str, tmp_path) -> str:
    """ptxas -v's report on `ptx` (registers, spills), which must assemble for `arch`."""
    import subprocess

    src = tmp_path / "kernel.ptx"
    src.write_text(ptx)
    proc = subprocess.run(
        [PTXAS, f"-arch={arch}", "-v", str(src), "-o", str(tmp_path / "kernel.cubin")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc.stderr


def schedules(ex) -> set[str]:
    return set(re.findall(r'relax.schedule = \["([^"]*)"\]', str(ex.lowered)))


def check_ptx(ex, arch: str = "sm_90", version: str = "8.0") -> dict[str, str]:
    """Every gpu.module of `ex` has PTX for `arch` with one .entry, and ptxas accepts it."""
    sources = ptx_sources(ex.lowered)
    assert sources, "no gpu.binary in the lowered module"
    for name, ptx in sources.items():
        assert f".target {arch}" in ptx and f".version {version}" in ptx, name
        assert len(re.findall(r"\.visible \.entry ", ptx)) == 1, name
        if PTXAS is not None:
            assemble(ptx, arch, PTXAS)
    return sources


@pytest.mark.parametrize(
    ("arch", "ptx"), [("sm_80", 70), ("sm_89", 78), ("sm_90", 80), ("sm_90a", 80)]
)
def test_pipeline_always_sets_the_ptx_version(arch: str, ptx: int):
    passes = target_pipeline(rm.target.Target({"kind": "cuda", "arch": arch}))
    assert f"nvvm-attach-target{{chip={arch} features=+ptx{ptx} O=3}}" in passes
    assert passes[-1] == "gpu-module-to-binary{format=isa}"


@pytest.mark.parametrize("target", ["cuda -arch=sm_61", {"kind": "cuda", "arch": "sm_100x"}])
def test_unknown_arch_is_a_value_error_before_llvm(target):
    with pytest.raises(ValueError, match="unknown CUDA arch"):
        relax.build(elementwise(), target=target)


def test_mlp_kernels_are_ptx_for_sm90():
    ex = relax.build(mlp(), target="cuda")
    sources = check_ptx(ex)
    assert len(sources) == 2  # fused linear+relu, linear
    assert schedules(ex) == {"gemv"}
    assert ex.target.kind == "cuda" and ex.function_names() == ["main"]


def test_math_through_libdevice_for_sm80():
    ex = relax.build(elementwise(), target={"kind": "cuda", "arch": "sm_80"})
    (ptx,) = check_ptx(ex, "sm_80", "7.0").values()
    assert "ex2.approx" in ptx  # __nv_expf, linked from libdevice
    assert schedules(ex) == {"fallback"}


@pytest.mark.parametrize(
    ("m", "n", "k", "tile", "splits"),
    [
        (256, 384, 512, (8, 36), 2),  # 96 blocks of 32x32: K split in two (split-K)
        (2048, 2048, 512, (8, 68), 1),
        (4096, 4096, 64, (8, 132), 1),
        (50, 40, 30, (8, 36), 1),  # K too short to split
    ],
)
def test_matmul_rule_stages_tiles_through_shared_memory(m, n, k, tile, splits):
    """The Matmul rule's kernel (lowering/gpu/contract.py): A and B tiles in shared memory (BK x
    block + 4 padding), barriers after staging and after the register-tile FMAs; the tile
    shrinks when the large one would leave the GPU's multiprocessors idle, and when even the
    smallest does, K is split over more blocks and a second kernel adds the partial sums."""
    a = relax.Var("a", relax.TensorStructInfo((m, k), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((k, n), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(a, b))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), target="cuda")
    kernels = list(check_ptx(ex).values())
    assert schedules(ex) == {"matmul"}
    assert len(kernels) == (2 if splits > 1 else 1)  # + the partial sums' fold
    (ptx,) = [k for k in kernels if ".shared" in k]
    assert sorted(_shared_bytes(ptx)) == [tile[0] * tile[1] * 4] * 2
    assert ptx.count("bar.sync") >= 2 and ptx.count("bar.sync") % 2 == 0
    assert "fma.rn.f32" in ptx and "ld.shared.v" in ptx


@needs_ptxas
def test_busy_fma_kernels_keep_two_blocks_per_sm(tmp_path):
    """A 3x3 convolution (64x64 tile) stages 18 elements a thread per K tile of four whole
    windows: its kernel is capped at 128 registers (.maxnreg: two 256-thread blocks per SM),
    which ptxas meets without spilling; the tuning knob gpu.matmul.min_blocks = 1 lifts the
    cap, and gpu.matmul.window_k = 0 keeps K tiles of 8. A lean kernel (a small matmul's
    32x32 tile on 64 threads) stays uncapped."""

    from lowering.schedule.space import set_tuned_table
    from relaxmlir import meta_schedule as ms
    from relaxmlir.target import Target

    x = relax.Var("x", relax.TensorStructInfo((32, 64, 28, 28), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((64, 64, 3, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.conv2d(x, w, padding=1))
        bb.emit_func_output(out)
    mod = bb.get()
    task = next(
        t for t in ms.extract_tasks(mod, Target("cuda")) if "gpu.matmul.min_blocks" in t.space
    )
    assert task.space["gpu.matmul.min_blocks"].values == (0, 1, 2)

    def fma_kernel(knobs: dict | None = None) -> str:
        """The conv's PTX, with `knobs` over the default point."""
        tuned = mod.clone()
        if knobs:
            set_tuned_table(tuned.module.operation, {task.key: {**task.default_knobs(), **knobs}})
        (ptx,) = [k for k in check_ptx(relax.build(tuned, target="cuda")).values() if "fma" in k]
        return ptx

    ptx = fma_kernel()
    assert ".maxnreg 128" in ptx and _shared_bytes(ptx) == [36 * 68 * 4] * 2
    assert ".maxnreg" not in fma_kernel({"gpu.matmul.min_blocks": 1})
    # gpu.matmul.window_k = 0: K tiles of the config's 8 instead of 4 windows of 9
    assert _shared_bytes(fma_kernel({"gpu.matmul.window_k": 0})) == [8 * 68 * 4] * 2
    info = _ptxas_info(ptx, "sm_90", tmp_path)
    registers = int(re.search(r"Used (\d+) registers", info).group(1))
    assert registers <= 128 and " 0 bytes spill stores" in info

    a = relax.Var("a", relax.TensorStructInfo((50, 30), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((30, 40), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(a, b))
        bb.emit_func_output(out)
    (ptx,) = [k for k in check_ptx(relax.build(bb.get(), target="cuda")).values() if "fma" in k]
    assert ".maxnreg" not in ptx


@pytest.mark.parametrize(
    ("m", "n", "k", "tile", "splits"),
    [
        # ResNet-18 b1's 7x7 stem (K = 3 x 7 x 7): the 64-thread tile cannot stage whole
        # windows, the 64x64 one can (18.3 us against 28.1 on the H200)
        (112 * 112, 64, (3, 7, 7), "64x64/4x4", 1),
        # b1's layer-3 3x3 conv: 56 blocks of 64 threads, K 2304 split 16 ways (22.3 us; 5
        # splits: 29)
        (14 * 14, 256, (256, 3, 3), "32x32/4x4", 16),
        # b32's layer 4: the 64x64 tile in 2 splits of K 2304 (350 us; 32x32/4x4: 388)
        (32 * 7 * 7, 512, (512, 3, 3), "64x64/4x4", 2),
        (4096, 4096, (4096,), "128x128/8x8", 1),  # fills the GPU as it is
        (128, 768, (3072,), "32x32/4x4", 11),  # BERT's FFN down: 96 blocks of 64 threads
    ],
)
def test_matmul_rule_fills_the_gpu_with_threads(m, n, k, tile, splits):
    """The Matmul rule's tile and K splits (contract.choose) count a block by its threads (a
    64-thread block hides a quarter of the latency of a 256-thread one), split K down to 128
    steps on FMA tiles, and keep convolution windows whole in K tiles."""
    from lowering.gpu import contract

    ranges = [m, n, *k]
    r = contract.Roles(ranges, [], [0], [1], list(range(2, 2 + len(k))))
    cfg, chosen = contract.choose(r)
    assert (cfg.name, chosen) == (tile, splits)


def _matmul_f16(m: int, k: int, n: int, b_by_columns: bool = False) -> rm.IRModule:
    """A float16 matmul (float16 result); B given as [n, k] and transposed when `b_by_columns`."""
    a = relax.Var("a", relax.TensorStructInfo((m, k), "float16"))
    b = relax.Var("b", relax.TensorStructInfo((n, k) if b_by_columns else (k, n), "float16"))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            rhs = relax.op.permute_dims(b) if b_by_columns else b
            out = bb.emit_output(relax.op.matmul(a, rhs))
        bb.emit_func_output(out)
    return bb.get()


def test_f16_matmul_takes_warpgroup_mma_on_sm90a(tmp_path):
    """For sm_90a, a float16 matmul that 128x128 tiles spread over the GPU (2160 x 200 @ 200
    x 2120: 17 x 17 blocks, every edge ragged) runs on wgmma: m64n128k16 steps, one warpgroup
    per block, the cp.async ring fenced for the async proxy; ptxas accepts it without
    spilling. For sm_90 the same matmul keeps mma.sync, and so does a B with K contiguous on
    sm_90a (wgmma reads B by K rows)."""

    mod = _matmul_f16(2160, 200, 2120)
    (ptx,) = check_ptx(relax.build(mod, target="cuda -arch=sm_90a"), arch="sm_90a").values()
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert ".maxntid 128, 1, 1" in ptx and "fence.proxy.async.shared::cta" in ptx
    assert "mma.sync" not in ptx
    if PTXAS is not None:
        info = _ptxas_info(ptx, "sm_90a", tmp_path)
        assert " 0 bytes spill stores" in info, info
    for target, m in (
        ("cuda -arch=sm_90", mod),
        ("cuda -arch=sm_90a", _matmul_f16(2160, 200, 2120, True)),
    ):
        ptxs = "".join(
            check_ptx(relax.build(m, target=target), arch=target[-6:].strip("=")).values()
        )
        assert "wgmma" not in ptxs and "mma.sync.aligned.m16n8k16" in ptxs, target


def test_scalar_result_is_one_thread_kernel():
    x = relax.Var("x", relax.TensorStructInfo((30, 40), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.sum(x))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), target="cuda")
    assert schedules(ex) == {"serial"}
    check_ptx(ex)


def test_fmod_and_inverse_functions_through_libdevice():
    """relax.mod (torch.fmod) is arith.remf, which NVVM lowering refused once arith-to-llvm had
    made it an llvm.frem ("explicitly marked illegal"): relax-gpu-fmod calls libdevice's fmod.
    atan2, hypot, copysign and the inverse trig and hyperbolic functions are libdevice calls
    too. The kernels, interpreted, give numpy's answers."""
    from relaxmlir.tools.gpu_interpret import interpret

    op = relax.op
    x, y = (relax.Var(n, relax.TensorStructInfo((8, 33), "float32")) for n in "xy")
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            terms = [
                op.mod(x, y), op.atan2(x, y), op.hypot(x, y), op.copysign(x, y), op.asinh(x),
                op.atan(op.tan(y)), op.acos(op.multiply(op.sin(x), 0.5)), op.atanh(op.cos(y)),
            ]  # fmt: skip
            total = terms[0]
            for t in terms[1:]:
                total = bb.emit(op.add(total, t))
            out = bb.emit_output(total)
        bb.emit_func_output(out)
    mod = bb.get()
    check_ptx(relax.build(mod, target="cuda"))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((8, 33)).astype("float32") * 3 for _ in range(2))
    got = np.zeros_like(a)
    interpret(mod, a, b, got, target="cuda")
    want = (
        np.fmod(a, b) + np.arctan2(a, b) + np.hypot(a, b) + np.copysign(a, b) + np.arcsinh(a)
        + np.arctan(np.tan(b)) + np.arccos(np.sin(a) * 0.5) + np.arctanh(np.cos(b))
    )  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_packed_functions_are_refused():
    from mlp_models import mlp as make

    # Python functions take host memory; CUDA host code passes device memory (cublas kernels only)
    with pytest.raises(ValueError, match="is a Python function, which cannot take the cuda memory"):
        rm.register_func("env.linear", lambda *a: None, override=True)
        rm.register_func("env.relu", lambda *a: None, override=True)
        relax.build(make("packed"), target="cuda")


@pytest.mark.parametrize("name", list(MODELS))
def test_model_kernels_assemble(name: str):
    """Every kernel of the model tests' networks lowers to PTX that ptxas accepts for sm_90."""
    torch.manual_seed(0)
    make, inputs = MODELS[name]
    ex = relax.build(import_model(make().eval(), inputs(), "ep"), target="cuda")
    check_ptx(ex)


@needs_ptxas
def test_ptxas_rejects_bad_ptx():
    from lowering.gpu.codegen import PtxasError

    with pytest.raises(PtxasError, match="ptxas -arch=sm_90 failed"):
        assemble(
            ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus; }\n",
            "sm_90",
        )


def test_constants_are_read_through_device_copies():
    ex = relax.build(mlp(), target="cuda")
    text = str(ex.lowered)
    assert text.count("llvm.call @relaxmlir_cuda_constant") == 4  # w0, b0, w1, b1
    assert "memref.global" not in text


def test_find_ptxas_search_order(tmp_path, monkeypatch):
    """$RELAXMLIR_PTXAS first; else PATH, $CUDA_HOME, /usr/local/cuda, then the nvidia-cuda-nvcc
    wheel's nvidia/<cuXX>/bin/ptxas on sys.path; None when there is none."""
    import os
    import sys

    from lowering.gpu import codegen

    def fake(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return str(path)

    explicit = fake(tmp_path / "explicit" / "ptxas")
    monkeypatch.setenv("RELAXMLIR_PTXAS", explicit)
    assert codegen.find_ptxas() == explicit
    monkeypatch.delenv("RELAXMLIR_PTXAS")
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    real_isfile = os.path.isfile
    monkeypatch.setattr(
        os.path, "isfile", lambda p: not p.startswith("/usr/local/cuda") and real_isfile(p)
    )
    wheel = fake(tmp_path / "site" / "nvidia" / "cu13" / "bin" / "ptxas")
    monkeypatch.setattr(
        sys, "path", [str(tmp_path / "site"), *[p for p in sys.path if "nvidia" not in p]]
    )
    for name in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
        monkeypatch.delitem(sys.modules, name)
    assert codegen.find_ptxas() == wheel
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path / "site")])
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    home = fake(tmp_path / "cuda" / "bin" / "ptxas")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert codegen.find_ptxas() == home


def test_transposing_copy_goes_through_a_shared_tile():
    """A copy whose input and output run along different axes (a weight's permute_dims): the
    Fallback rule's transpose kernel (lowering/gpu/transpose.py), coalesced both ways; a copy
    that keeps the contiguous axis stays one thread per element."""
    x = relax.Var("x", relax.TensorStructInfo((3, 50, 70), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            flipped = bb.emit(relax.op.permute_dims(x, [0, 2, 1]))
            kept = bb.emit(relax.op.permute_dims(x, [1, 0, 2]))
            out = bb.emit_output(relax.Tuple([flipped, kept]))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), target="cuda")
    kernels = check_ptx(ex)
    shared = [name for name, ptx in kernels.items() if ".shared" in ptx]
    assert len(kernels) == 2 and len(shared) == 1
    assert "bar.sync" in kernels[shared[0]]


def test_producer_read_twice_gets_its_own_kernel():
    """square(x) read directly and through a reshape by one broadcast compare: the Fallback
    rule fused the producer into the root for one use and kept it for the other, which left a
    linalg op outside any kernel (a build error). Such a function now gets one kernel per op."""
    x = relax.Var("x", relax.TensorStructInfo((3, 1), "int32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            sq = bb.emit(relax.op.multiply(x, x))
            flat = bb.emit(relax.op.reshape(sq, (3,)))
            cmp = bb.emit(relax.op.less_equal(flat, sq))
            out = bb.emit_output(relax.op.expand_dims(cmp, -2))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), target="cuda")
    check_ptx(ex)
    assert schedules(ex) == {"fallback-unfused"}


def test_empty_axis_builds():
    """Ops over an empty axis (a 0 x n operand, a matvec reducing over 0 elements): MLIR's
    tiling asserts on loops of trip count 0 (the process aborted). Such functions now run as
    one thread (their results are their inits), and a launch whose grid is empty at run time is
    skipped (test_cuda_host.py). Found by building fuzz graphs for cuda."""
    x = relax.Var("x", relax.TensorStructInfo((0, "n"), "float16"))
    y = relax.Var("y", relax.TensorStructInfo((), "float16"))
    a = relax.Var("a", relax.TensorStructInfo(("m", 0), "float32"))
    v = relax.Var("v", relax.TensorStructInfo((0,), "float32"))
    p = relax.Var("p", relax.TensorStructInfo((1, 4, 0), "int64"))
    q = relax.Var("q", relax.TensorStructInfo((1, 0, 1), "int64"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y, a, v, p, q]):
        with bb.dataflow():
            div = bb.emit(relax.op.floor_divide(x, y))
            mv = bb.emit(relax.op.matmul(a, v))
            bmm = bb.emit(relax.op.matmul(p, q))  # K = 0, read through constant-0 batch maps
            out = bb.emit_output(relax.Tuple([div, mv, bmm]))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), target="cuda")
    if find_ptxas():
        for ptx in ptx_sources(ex.lowered).values():
            assemble(ptx, "sm_90")
    assert "serial" in schedules(ex)


@pytest.mark.parametrize(
    "graph",
    [
        # a one-element strided slice of a kernel's result, copied into the output
        "Graph(inputs=[Input(shape=(3,), dtype='int32', lo=-4, hi=1), Input(shape=(), dtype='int32', lo=-3, hi=-1), Input(shape=(1,), dtype='int32', lo=-2, hi=2)], nodes=[Node(op='floor_mod', args=(0, 1), attrs={}), Node(op='strided_slice', args=(3,), attrs={'axis': 0, 'begin': -3, 'end': -1, 'stride': 3}), Node(op='cumsum', args=(4,), attrs={'axis': -1}), Node(op='less_equal', args=(5, 2), attrs={})], outputs=[6], symbols={}, seed=129)",
        # a strided slice (every other column) copied into the output
        "Graph(inputs=[Input(shape=(1, 4), dtype='bfloat16', lo=-2.0, hi=2.0)], nodes=[Node(op='max', args=(0,), attrs={'axis': None, 'keepdims': True}), Node(op='concat', args=(0, 0), attrs={'axis': 0}), Node(op='equal', args=(2, 1), attrs={}), Node(op='strided_slice', args=(3,), attrs={'axis': 1, 'begin': 2, 'end': 2147483647, 'stride': 2})], outputs=[4], symbols={}, seed=453)",
    ],
)
def test_strided_host_copies_become_device_kernels(graph):
    """A host-side copy out of a strided view: gpu.memcpy takes identity layouts only (a strided
    one, even of a single element, reached the LLVM translation as an unrealized cast and the
    process crashed; a longer one was refused). Such copies are now a small device kernel
    (relax-gpu-host-copies). Found by building fuzz graphs for cuda."""
    from fuzz_builders import to_relax
    from fuzz_graphs import Graph, Input, Node  # noqa: F401  (the graph's repr names them)

    ex = relax.build(to_relax(eval(graph)), target="cuda")  # crashed or raised before
    check_ptx(ex)


@pytest.mark.parametrize(
    "op, dtype", [("matmul", "float16"), ("conv2d", "float16"), ("matmul", "bfloat16")]
)
def test_16bit_contraction_runs_on_tensor_cores(op, dtype):
    """A float16 matmul (or convolution, as an implicit GEMM) is one kernel: 16-bit operands
    staged in shared memory, warp-level mma.sync m16n8k16 with float32 accumulators, the result
    rounded to float16 in the epilogue (numerics: test_gpu_interpret.py)."""
    shapes = {"matmul": ((256, 96), (96, 200)), "conv2d": ((4, 16, 20, 20), (32, 16, 3, 3))}[op]
    a = relax.Var("a", relax.TensorStructInfo(shapes[0], dtype))
    b = relax.Var("b", relax.TensorStructInfo(shapes[1], dtype))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            if op == "matmul":
                out = bb.emit_output(relax.op.matmul(a, b))
            else:
                out = bb.emit_output(relax.op.nn.conv2d(a, b, padding=1))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), target="cuda")
    kernels = check_ptx(ex)
    assert "matmul" in schedules(ex)
    ptx = next(p for p in kernels.values() if "mma.sync" in p)
    t = "bf16" if dtype == "bfloat16" else "f16"
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32" in ptx
    assert re.search(rf"cvt\.rn\.{t}(x2)?\.f32", ptx)  # the one rounding (two at a time)
    assert not re.search(r"ld\.global(\.nc)?\.f32", ptx)  # operands are read as 16 bits
