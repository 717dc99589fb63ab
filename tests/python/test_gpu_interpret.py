"""The CUDA kernels, run without a GPU: each module is lowered through the CUDA pipeline's map
stage and its kernels are interpreted thread by thread (lowering/gpu/interpret.py), then
compared with numpy. Small shapes with ragged edges; tolerances: float32 1e-4 relative to the
result's scale, float16 outputs 2e-3 (their own rounding)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from lowering.gpu.interpret import InterpretError, run_function
from lowering.schedule.space import set_tuned_table
from relaxmlir import meta_schedule as ms
from relaxmlir import relax
from relaxmlir.target import Target
from relaxmlir.tools.gpu_interpret import interpret


def run_on_gpu_model(mod, *arrays, target="cuda"):
    """Lower `mod` for `target` through the map stage and interpret `main` on `arrays` (the
    last ones are the outputs, written in place)."""
    return interpret(mod, *arrays, target=target)


def function(params, body):
    """A relax function `main(params)` whose dataflow block is `body(bb, *vars)`."""
    names = "abcdefgh"
    vars_ = [relax.Var(names[i], relax.TensorStructInfo(s, d)) for i, (s, d) in enumerate(params)]
    bb = relax.BlockBuilder()
    with bb.function("main", vars_):
        with bb.dataflow():
            out = bb.emit_output(body(bb, *vars_))
        bb.emit_func_output(out)
    return bb.get()


def _matmul_f16(m: int, n: int, k: int, seed: int):
    """A float16 matmul module and random operands for it."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype("float16")
    b = rng.standard_normal((k, n)).astype("float16")
    mod = function(
        [((m, k), "float16"), ((k, n), "float16")], lambda bb, x, y: relax.op.matmul(x, y)
    )
    return mod, a, b


def close(got, want, rtol):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got.astype(np.float64), want, atol=rtol * scale, rtol=rtol)


@pytest.mark.parametrize(
    "m, n, k, dtype",
    [
        (64, 64, 64, "float32"),  # whole tiles
        (37, 70, 50, "float32"),  # ragged edges in M, N and K
        (40, 72, 48, "float16"),  # 16-bit operands, float32 accumulation, one rounding at the end
        (24, 40, 256, "float32"),  # split-K (2): partial sums and the kernel that adds them
    ],
)
def test_matmul_kernel(m, n, k, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = np.full((m, n), np.nan, dtype)
    run_on_gpu_model(
        function([((m, k), dtype), ((k, n), dtype)], lambda bb, x, y: relax.op.matmul(x, y)),
        a,
        b,
        c,
    )
    close(c, a.astype(np.float64) @ b.astype(np.float64), 1e-4 if dtype == "float32" else 2e-3)


def test_float32_matmul_vector_staging(monkeypatch):
    """The FMA kernel's large tile (forced) stages float32 in 16-byte vectors: B [K, N] straight
    into its K rows, A [M, K] scattered from its vectors over four K rows; ragged M and N."""
    from lowering.gpu import contract

    monkeypatch.setattr(contract, "CONFIGS", contract.CONFIGS[:1])
    m, n, k = 66, 136, 20  # K: two steps of 8 and a partial one (4: one vector of A)
    rng = np.random.default_rng(6)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    c = np.full((m, n), np.nan, np.float32)
    mod = function(
        [((m, k), "float32"), ((k, n), "float32")], lambda bb, x, y: relax.op.matmul(x, y)
    )
    text = str(run_on_gpu_model(mod, a, b, c).module)
    loads = [line for line in text.splitlines() if "vector.load" in line]
    staged = [line for line in loads if "workgroup" not in line]  # global memory
    assert len(staged) == 4 and "memref<8x132xf32" in text  # 128 + 4: the big tile
    # the register tile reads its 8 + 8 values of a K row as four 4-wide shared loads
    assert len(loads) - len(staged) == 8 * 4
    close(c, a.astype(np.float64) @ b.astype(np.float64), 1e-4)


@pytest.mark.parametrize(
    "shape, many_blocks, block, dtype",
    [
        ((2, 40, 72, 48), None, 64, "float16"),  # batched, ragged M / N / K
        ((1, 120, 248, 40), 1, 128, "float16"),  # the large tile, forced (eight warps)
        ((1, 24, 40, 512), None, 64, "float16"),  # split-K (2) over tensor-core partial sums
        ((2, 40, 72, 48), None, 64, "bfloat16"),  # bf16: nvvm.mma.sync on packed registers
    ],
)
def test_16bit_matmul_on_tensor_cores(monkeypatch, shape, many_blocks, block, dtype):
    """float16 operands, float32 accumulators: fragments loaded by ldmatrix, warp-level
    mma.sync m16n8k16 (both as the PTX ISA defines them, interpreted), then the result rounded
    to float16 once."""
    from lowering.gpu import contract

    if many_blocks is not None:
        monkeypatch.setattr(contract, "MANY_BLOCKS", many_blocks)
    from relaxmlir.runtime.dtype import np_dtype

    batch, m, n, k = shape
    rng = np.random.default_rng(3)
    a = rng.standard_normal((batch, m, k)).astype(np_dtype(dtype))
    b = rng.standard_normal((batch, k, n)).astype(np_dtype(dtype))
    c = np.full((batch, m, n), np.nan, np_dtype(dtype))
    mod = function([(a.shape, dtype), (b.shape, dtype)], lambda bb, x, y: relax.op.matmul(x, y))
    lowered = run_on_gpu_model(mod, a, b, c)
    text = str(lowered.module)
    mma = "nvvm.mma.sync" if dtype == "bfloat16" else "nvgpu.mma.sync"
    assert 'relax.schedule = ["matmul"]' in text and mma in text
    split = k >= 512  # (the only shape with K past 48)
    assert text.count("gpu.launch") == (2 if split else 1)
    elem = "bf16" if dtype == "bfloat16" else "f16"
    # a ring of A tiles with K along rows in dynamic shared memory, filled by cp.async: up to
    # 4 tiles, no more than K has tiles + 1
    stages = min(4, -(-k // 32) + 1)
    assert f"memref<{stages}x{block}x40x{elem}, #gpu.address_space<workgroup>>" in text
    assert "nvgpu.device_async_copy" in text and "nvgpu.device_async_wait" in text
    assert "nvgpu.ldmatrix" in text  # fragments: an x4 per A fragment, per two B fragments
    # N even: each lane stores its two adjacent results of a row at once (the split-K kernel
    # into its float32 workspace)
    assert f"vector<2x{'f32' if split else elem}>" in text
    close(c, a.astype(np.float64) @ b.astype(np.float64), 2e-3 if dtype == "float16" else 8e-3)


@pytest.mark.parametrize("allow", [0, 1])
def test_float32_matmul_on_tf32_tensor_cores_when_allowed(allow):
    """`allow-tf32` (off by default, as torch's allow_tf32): float32 operands go to the tensor
    cores in TF32 (m16n8k8, 10-bit mantissas, float32 sums): within TF32's error of float64,
    and the default build stays exact float32 FMAs."""
    rng = np.random.default_rng(4)
    m, n, k = 40, 72, 44
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    c = np.full((m, n), np.nan, np.float32)
    mod = function(
        [((m, k), "float32"), ((k, n), "float32")], lambda bb, x, y: relax.op.matmul(x, y)
    )
    target = {"kind": "cuda", "arch": "sm_90", **({"allow-tf32": 1} if allow else {})}
    text = str(run_on_gpu_model(mod, a, b, c, target=target).module)
    assert ("tf32Enabled" in text) == bool(allow)
    # TF32 stages float32 by 16-byte cp.async copies: A in rows of M (K contiguous), B in K
    # rows (N contiguous, padded by 8 so a fragment's four K rows hit distinct banks)
    assert ("memref<3x64x36xf32" in text and "memref<3x32x72xf32" in text) == bool(allow)
    want = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c - want).max() / np.abs(want).max()
    assert err < (2e-3 if allow else 1e-6)
    assert allow == 0 or err > 1e-6  # TF32's truncation shows: the tensor cores ran


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_conv_with_bias_relu_epilogue(dtype):
    """An implicit-GEMM convolution (stride 2, padding 1) with its bias + relu epilogue, the
    padding folded into the image loads; in float16 on tensor cores (float32 accumulators)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9, 11)).astype(dtype)
    w = rng.standard_normal((5, 3, 3, 3)).astype(dtype)
    bias = rng.standard_normal((1, 5, 1, 1)).astype(dtype)

    def body(bb, xv, wv, bv):
        conv = bb.emit(relax.op.nn.conv2d(xv, wv, strides=2, padding=1))
        return relax.op.nn.relu(bb.emit(relax.op.add(conv, bv)))

    out = np.full((2, 5, 5, 6), np.nan, dtype)
    mod = function([(x.shape, dtype), (w.shape, dtype), (bias.shape, dtype)], body)
    text = str(run_on_gpu_model(mod, x, w, bias, out).module)
    assert ("nvgpu.mma.sync" in text) == (dtype == "float16")
    # the padding is read through (zeros outside the image): one kernel, no padded buffer
    assert text.count("gpu.launch") == 1 and "memref.alloc" not in text
    import torch

    x64, w64 = torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64))
    ref = torch.nn.functional.conv2d(x64, w64, stride=2, padding=1).numpy()
    close(out, np.maximum(ref + bias.astype(np.float64), 0), 1e-4 if dtype == "float32" else 2e-3)


@pytest.mark.parametrize(
    "x_shape, w_shape, stride, padding, dilation, groups, tile",
    [
        ((1, 16, 6, 7), (8, 16, 3, 3), 1, 1, 1, 1, None),  # K tiles of 2 windows; ragged M
        ((2, 12, 7, 5), (6, 12, 3, 3), 2, 1, 1, 1, None),  # K = 108: the last K tile is partial
        ((1, 32, 4, 4), (32, 32, 3, 3), 1, 1, 1, 1, None),  # split-K (2) over whole windows
        ((1, 16, 9, 9), (8, 16, 3, 3), 1, 2, 2, 1, None),  # dilated
        ((1, 8, 5, 6), (8, 8, 1, 3), 1, (0, 1), 1, 1, None),  # a 1x3 window
        ((2, 24, 6, 6), (16, 24, 1, 1), 2, 0, 1, 1, None),  # 1x1, strided: K is the channels only
        # a 7x7 stem on 256 threads: K tiles of one window, the threads' last share partial (49
        # x 32 elements over 256 threads; the default 64-thread tile would hold 49 each, too
        # many, and keeps K tiles of 8)
        ((1, 3, 12, 12), (8, 3, 7, 7), 2, 3, 1, 1, "32x32/2x2"),  # 36 pixels: 2 blocks
    ],
)
def test_conv_staging_by_strides(x_shape, w_shape, stride, padding, dilation, groups, tile):
    """The FMA kernel stages convolutions by strides (`_StridedStage`): K tiles of whole
    windows, each element's place and padding test computed once, one offset per tile."""
    import torch

    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype("float32")
    w = rng.standard_normal(w_shape).astype("float32")
    ref = torch.nn.functional.conv2d(
        torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64)),
        stride=stride, padding=padding, dilation=dilation, groups=groups,
    ).numpy()  # fmt: skip
    pad = padding if isinstance(padding, tuple) else (padding, padding)

    def body(bb, xv, wv):
        return relax.op.nn.conv2d(
            xv, wv, strides=stride, padding=pad, dilation=dilation, groups=groups
        )

    out = np.full(ref.shape, np.nan, np.float32)
    mod = function([(x.shape, "float32"), (w.shape, "float32")], body)
    if tile is not None:
        (task,) = [t for t in ms.extract_tasks(mod, Target("cuda")) if "gpu.matmul.tile" in t.space]
        set_tuned_table(
            mod.module.operation, {task.key: {**task.default_knobs(), "gpu.matmul.tile": tile}}
        )
    text = str(run_on_gpu_model(mod, x, w, out).module)
    assert "memref.collapse_shape" in text and "math.fma" in text
    close(out, ref, 1e-4)


def test_row_kernels_and_transpose():
    """softmax, then layer norm (one block per row, warp shuffles), then a transposing copy
    (a 32x33 shared tile), over rows of 100: neither a multiple of 32 nor of the block."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((37, 100)).astype("float32")
    g = rng.standard_normal(100).astype("float32")

    def body(bb, xv, gv):
        s = bb.emit(relax.op.nn.softmax(xv))
        norm = bb.emit(relax.op.nn.layer_norm(s, gv, gv, axes=[-1]))
        return relax.op.permute_dims(norm, [1, 0])

    out = np.full((100, 37), np.nan, np.float32)
    run_on_gpu_model(function([(x.shape, "float32"), (g.shape, "float32")], body), x, g, out)
    e = np.exp(x - x.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    ln = (sm - sm.mean(1, keepdims=True)) / np.sqrt(sm.var(1, keepdims=True) + 1e-5) * g + g
    close(out, ln.T, 1e-4)


def test_interpreter_reports_out_of_bounds_and_divergent_barriers():
    """A kernel bug is an error, not a wrong number."""
    from mlir import ir

    import dialects

    oob = """
    func.func @main(%m: memref<4xf32>) {
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
                 threads(%tx, %ty, %tz) in (%a = %c8, %b = %c1, %c = %c1) {
        %v = memref.load %m[%tx] : memref<4xf32>
        gpu.terminator
      }
      return
    }"""
    divergent = """
    func.func @main(%m: memref<64xf32>) {
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %c32 = arith.constant 32 : index
      gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
                 threads(%tx, %ty, %tz) in (%a = %c64, %b = %c1, %c = %c1) {
        %low = arith.cmpi ult, %tx, %c32 : index
        scf.if %low {
          gpu.barrier
        }
        %f = arith.constant 1.0 : f32
        %s, %ok = gpu.shuffle xor %f, %c1_i32, %c32_i32 : f32
        gpu.terminator
      }
      return
    }""".replace("%c1_i32", "%o").replace("%c32_i32", "%w")
    divergent = divergent.replace(
        "%low = arith.cmpi",
        "%o = arith.constant 1 : i32\n        %w = arith.constant 32 : i32\n        %low = arith.cmpi",
    )
    with dialects.get_context():
        module = ir.Module.parse(oob)
        with pytest.raises(
            InterpretError, match=r"memref.load at \[4\] outside a memref of shape \[4\]"
        ):
            run_function(module.operation, "main", np.zeros(4, np.float32))
        module = ir.Module.parse(divergent)
        with pytest.raises(
            InterpretError, match="a barrier that not every thread of the block reaches"
        ):
            run_function(module.operation, "main", np.zeros(64, np.float32))


def test_interpreter_catches_cp_async_hazards():
    """The cp.async pipeline's three orderings, each removed from a float16 matmul kernel (a
    ring of 3 tiles, 2 requests in flight): waiting for one group too few reads tiles before
    they land, dropping the barrier lets a warp read another's copies before they land (the
    interpreter runs warps ahead of each other), dropping the last wait leaves copies in flight
    at the block's end. The first two read NaN, the third is an error; intact, it matches."""
    from mlir import ir

    import dialects

    m, n, k = 40, 72, 48
    mod, a, b = _matmul_f16(m, n, k, seed=7)
    text = str(run_on_gpu_model(mod, a, b, np.full((m, n), np.nan, "float16")).module)
    waits = re.findall(r".*nvgpu.device_async_wait .*\n", text)
    assert len(waits) == 2 and "numGroups = 1 " in waits[0] and "numGroups = 0 " in waits[1]
    barrier = re.search(r"(nvgpu.device_async_wait .*\n)(\s*gpu.barrier\n)", text)
    variants = {
        "intact": text,
        "early": text.replace(waits[0], waits[0].replace("numGroups = 1 ", "numGroups = 2 ")),
        "unordered": text.replace(barrier.group(0), barrier.group(1)),
        "in flight": text.replace(waits[1], ""),
    }
    want = a.astype(np.float64) @ b.astype(np.float64)
    for name, variant in variants.items():
        assert (variant == text) == (name == "intact"), name
        c = np.full((m, n), np.nan, "float16")
        with dialects.get_context():
            module = ir.Module.parse(variant)
            if name == "in flight":
                with pytest.raises(InterpretError, match="cp.async copies not waited for"):
                    run_function(module.operation, "main", a, b, c)
                continue
            run_function(module.operation, "main", a, b, c)
        if name == "intact":
            close(c, want, 2e-3)
        else:
            assert np.isnan(c).any(), name


@pytest.mark.parametrize(
    "name", [pytest.param("resnet", marks=pytest.mark.slow), "gpt_block", "mobilenet_v2_block_s2"]
)
def test_model_networks(name):
    """Networks of test_models.py (the ones gpu_models_check.py runs on a GPU) on the
    interpreted kernels: padded convolutions read through their padding, batch norm, residual
    adds, depthwise stride-2 convolutions, attention, softmax, layer norm, GELU."""
    import torch
    from test_models import MODELS

    from relaxmlir.frontend import from_exported_program

    make, inputs = MODELS[name]
    torch.manual_seed(0)
    model, args = make().eval(), inputs()
    mod = from_exported_program(torch.export.export(model, tuple(args)))
    with torch.no_grad():
        want = model(*args).numpy()
    got = np.full(want.shape, np.nan, want.dtype)
    run_on_gpu_model(mod, *[a.numpy() for a in args], got)
    close(got, want.astype(np.float64), 1e-4)


def test_vector_staging_assumes_aligned_buffers():
    """16-bit operands are staged by 16-byte copies (cp.async, ldmatrix .trans for a [K, N]
    B): the kernel takes 16-byte aligned buffers (the runtime copies an unaligned input first),
    and the interpreter holds it to that."""
    m, n, k = 40, 72, 48
    mod, a, b = _matmul_f16(m, n, k, seed=5)
    c = np.full((m, n), np.nan, "float16")
    text = str(run_on_gpu_model(mod, a, b, c).module)
    assert "nvgpu.device_async_copy" in text and "transpose = true" in text
    close(c, a.astype(np.float64) @ b.astype(np.float64), 2e-3)
    raw = np.empty(m * k + 1, "float16")
    odd = raw[1:].reshape(m, k)  # starts 2 bytes past an aligned address
    odd[...] = a
    with pytest.raises(InterpretError, match="not 16-byte aligned"):
        run_on_gpu_model(mod, odd, b, c)


@pytest.mark.parametrize(
    "dtype, batch, transpose", [("float32", (), "b"), ("float16", (2,), "b"), ("float32", (), "a")]
)
def test_matmul_reads_a_transposed_operand_in_place(dtype, batch, transpose):
    """x @ w.T with a weight passed at run time (permute_dims of an argument, as nn.Linear
    imports with keep_params_as_input): the contraction reads w through its map, so the
    transposed copy and its kernel are gone (one kernel); 16-bit operands stay on tensor cores."""
    from relaxmlir.runtime.dtype import np_dtype

    m, n, k = 40, 72, 48
    rng = np.random.default_rng(7)
    a_shape = (*batch, k, m) if transpose == "a" else (*batch, m, k)
    b_shape = (*batch, n, k) if transpose == "b" else (*batch, k, n)
    a = rng.standard_normal(a_shape).astype(np_dtype(dtype))
    b = rng.standard_normal(b_shape).astype(np_dtype(dtype))
    rank = len(batch) + 2
    swap = [*range(rank - 2), rank - 1, rank - 2]

    def body(bb, x, y):
        if transpose == "a":
            return relax.op.matmul(bb.emit(relax.op.permute_dims(x, swap)), y)
        return relax.op.matmul(x, bb.emit(relax.op.permute_dims(y, swap)))

    c = np.full((*batch, m, n), np.nan, np_dtype(dtype))
    text = str(
        run_on_gpu_model(function([(a_shape, dtype), (b_shape, dtype)], body), a, b, c).module
    )
    assert text.count("gpu.launch") == 1  # no transpose kernel
    assert ("nvgpu.mma.sync" in text) == (dtype == "float16")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = (np.swapaxes(a64, -1, -2) @ b64) if transpose == "a" else a64 @ np.swapaxes(b64, -1, -2)
    close(c, want, 1e-4 if dtype == "float32" else 2e-3)


@pytest.mark.parametrize(
    "m, k, dtype, transposed, rows_kernel",
    [
        (1, 200, "float32", True, True),  # x @ w.T, w [N, K]: dot products of contiguous rows
        (3, 300, "float16", True, True),  # a few rows, 16-bit operands (float32 sums)
        (1, 200, "float32", False, False),  # w [K, N]: one thread per output column (coalesced)
        (2, 20, "float32", True, False),  # rows shorter than a warp's worth: per-output loops
    ],
)
def test_gemv_kernels(m, k, dtype, transposed, rows_kernel):
    """GEMVs (at most 4 rows) by the layout of their matrix: with K contiguous, one block per
    output and warp shuffles (the row template), reading w [N, K] in place; else one thread
    per output column."""
    from relaxmlir.runtime.dtype import np_dtype

    n = 96
    rng = np.random.default_rng(8)
    x = rng.standard_normal((m, k)).astype(np_dtype(dtype))
    w_shape = (n, k) if transposed else (k, n)
    w = rng.standard_normal(w_shape).astype(np_dtype(dtype))

    def body(bb, a, b):
        return relax.op.matmul(a, bb.emit(relax.op.permute_dims(b, [1, 0])) if transposed else b)

    c = np.full((m, n), np.nan, np_dtype(dtype))
    text = str(
        run_on_gpu_model(function([((m, k), dtype), (w_shape, dtype)], body), x, w, c).module
    )
    # (a 16-bit GEMV's float32 payload with its rounding epilogue is classified as a row
    # reduction: the same row kernel)
    assert re.search(r'relax.schedule = \["(gemv|general_reduction)"\]', text)
    assert text.count("gpu.launch") == 1 and ("gpu.shuffle" in text) == rows_kernel
    w64 = w.astype(np.float64)
    close(
        c,
        x.astype(np.float64) @ (w64.T if transposed else w64),
        1e-4 if dtype == "float32" else 2e-3,
    )


def test_wgmma_kernels_are_refused_by_name():
    """sm_90a's warpgroup MMA reads shared memory through descriptors the interpreter does not
    model: interpreting such a build is a clear error that says so (a 64x64x16 f16 matmul,
    tuned onto the wgmma tile)."""
    mod = function(
        [((64, 16), "float16"), ((16, 64), "float16")], lambda bb, x, y: relax.op.matmul(x, y)
    )
    target = Target("cuda -arch=sm_90a")
    (task,) = ms.extract_tasks(mod, target)
    set_tuned_table(
        mod.module.operation,
        {task.key: {**task.default_knobs(), "gpu.matmul.tile": "wgmma128x128"}},
    )
    a, b = np.ones((64, 16), np.float16), np.ones((16, 64), np.float16)
    with pytest.raises(InterpretError, match="wgmma kernels .* are not interpreted"):
        interpret(mod, a, b, np.zeros((64, 64), np.float16), target=target)
