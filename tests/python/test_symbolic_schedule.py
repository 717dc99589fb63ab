"""Symbolic sizes get real schedules: matmul, conv2d and softmax built ONCE for a batch `n`, run
at n = 1, 7, 256, 1000 against numpy/torch (f32, fixed seeds, rtol=1e-4, atol=1e-4; sums of up
to 784 products).

Each case also checks which rule the schedule pass chose, so a silent fall back to naive loops
(what a symbolic size used to cause) fails here and not only in a benchmark.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scheduled_build import build_scheduled

import relaxmlir as rm
from lowering.pipelines import target_pipeline
from lowering.registry import run_pipeline
from relaxmlir import relax
from relaxmlir.relax.pipeline import get_pipeline
from relaxmlir.scope import scope

RTOL = ATOL = 1e-4
SIZES = (1, 7, 256, 1000)
TARGET = rm.target.Target({"kind": "llvm", "num-cores": 2})  # 2 threads: the parallel copies too


def _function(params, body):
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(body(*params))
        bb.emit_func_output(gv)
    return bb.get()


def _rules(lines: list[str]) -> list[str]:
    """The rules relax-schedule-cpu recorded in the signature lines of scheduled kernels."""
    return [s for line in lines
            for s in line.split("relax.schedule = [")[1].split("]")[0].replace('"', "").split(", ")]  # fmt: skip


def _scheduled_lines(module) -> list[str]:
    """The signature lines of a scheduled module's kernels, with their rules."""
    text = str(module.operation.get_asm(large_elements_limit=4))
    return [line for line in text.splitlines() if "relax.schedule = [" in line]


def _build(mod: rm.IRModule, target=TARGET):
    """(a VM of relax.build(mod, target), the rules relax-schedule-cpu recorded on its kernels in
    that build): one lowering for both."""
    ex, lines = build_scheduled(mod, target, _scheduled_lines)
    return relax.VirtualMachine(ex, rm.cpu()), _rules(lines)


def _run_sizes(vm, make_inputs, reference):
    for n in SIZES:
        inputs = make_inputs(n)
        got = vm["main"](*inputs).numpy()
        np.testing.assert_allclose(got, reference(*inputs), rtol=RTOL, atol=ATOL, err_msg=f"n={n}")


@pytest.mark.parametrize("weight", ["const", "param"])
def test_dense_relu_dense(weight):
    """The W2 MLP shape (784-128-10): constant weights are packed at compile time; as parameters
    they are packed per call. Rows run as peeled 8-row tiles plus a 1-row remainder."""
    rng = np.random.default_rng(0)
    w0 = (rng.standard_normal((128, 784)) * 0.05).astype(np.float32)
    w1 = (rng.standard_normal((10, 128)) * 0.05).astype(np.float32)
    x = relax.Var("x", relax.TensorStructInfo(("n", 784), "float32"))
    if weight == "const":
        params, ws = [x], [relax.const(w0), relax.const(w1)]
    else:
        ws = [relax.Var("w0", relax.TensorStructInfo((128, 784), "float32")),
              relax.Var("w1", relax.TensorStructInfo((10, 128), "float32"))]  # fmt: skip
        params = [x, *ws]

    def body(x, *_):
        h = relax.op.nn.relu(relax.op.matmul(x, relax.op.permute_dims(ws[0])))
        return relax.op.matmul(h, relax.op.permute_dims(ws[1]))

    mod = _function(params, body)
    vm, used = _build(mod)
    assert any(u.startswith("matmul-rows-") for u in used), used
    assert "fallback" not in " ".join(used), used

    def inputs(n):
        xs = np.random.default_rng(n).standard_normal((n, 784), dtype=np.float32)
        return [xs] if weight == "const" else [xs, w0, w1]

    _run_sizes(vm, inputs, lambda xs, *_: np.maximum(xs @ w0.T, 0) @ w1.T)


def test_matmul_k_major_weight():
    """x @ W with W [K, N] (not transposed) and N not a multiple of the panel width."""
    w = np.random.default_rng(1).standard_normal((96, 40), dtype=np.float32)
    x = relax.Var("x", relax.TensorStructInfo(("n", 96), "float32"))
    mod = _function([x], lambda x: relax.op.matmul(x, relax.const(w)))
    vm, used = _build(mod)
    assert any(u.startswith("matmul-rows-") for u in used), used
    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((n, 96), dtype=np.float32)],
        lambda xs: xs @ w,
    )


@pytest.mark.parametrize("out", [256, 1024])
def test_linear_over_a_unit_batch_without_epilogue(out):
    """x [1, n, 512] @ W^T, no bias: the row count of the run-time dispatch is read through the
    slice that drops the unit axis, so n = 1 runs the serial copy and larger n the parallel one
    (before, there was one copy, split across threads at every n). A [1024, 512] W (2 MB, past
    L2) is split by its panels across the threads in both copies, a [256, 512] one by rows in
    the parallel copy."""
    w = np.random.default_rng(2).standard_normal((out, 512), dtype=np.float32) * 0.05
    x = relax.Var("x", relax.TensorStructInfo((1, "n", 512), "float32"))
    mod = _function([x], lambda x: relax.op.matmul(x, relax.op.permute_dims(relax.const(w))))
    vm, used = _build(mod)
    assert sum(u.startswith("matmul-rows-") for u in used) == 2, used  # the two copies
    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((1, n, 512), dtype=np.float32)],
        lambda xs: xs @ w.T,
    )


def test_conv2d_symbolic_batch():
    """A padded conv over a symbolic batch: the padding is raised into a fill and a copy like
    a static one's (`pad.match_pad` takes a symbolic size on an axis without padding), not
    left as TE's guarded copy in naive loops (MobileNetV2 built for any batch: 1.62 -> 1.25x
    its static build at batch 1)."""
    w = (np.random.default_rng(2).standard_normal((8, 3, 3, 3)) * 0.2).astype(np.float32)
    x = relax.Var("x", relax.TensorStructInfo(("n", 3, 10, 10), "float32"))
    mod = _function([x], lambda x: relax.op.nn.conv2d(x, relax.const(w), padding=(1, 1)))
    vm, used = _build(mod)
    assert used[0] == "per-sample", used  # the static kernel of one sample, in a loop
    assert any(u.startswith("conv-") and u != "conv-fallback" for u in used), used
    assert "fallback" not in used, used

    def reference(xs):
        return F.conv2d(torch.from_numpy(xs), torch.from_numpy(w), padding=1).numpy()

    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((n, 3, 10, 10), dtype=np.float32)],
        reference,
    )


@pytest.mark.parametrize(("kernel", "stride", "pad"), [(3, 2, 1), (7, 2, 3), (1, 2, 0)])
def test_strided_conv2d_symbolic_batch(kernel, stride, pad):
    """A strided window over a symbolic batch is split by phase like a static one (each phase's
    view keeps the whole batch, its size a `tensor.dim`), so the conv rule takes every phase:
    with the split refused, ResNet-18's stem and its three 3x3 / 2 convolutions fell back to
    naive loops and the model built for any batch ran 8x slower than for a batch of 1 (266 vs
    33 ms, now 48)."""
    w = (np.random.default_rng(3).standard_normal((16, 8, kernel, kernel)) * 0.2).astype(np.float32)
    x = relax.Var("x", relax.TensorStructInfo(("n", 8, 15, 15), "float32"))
    mod = _function(
        [x],
        lambda x: relax.op.nn.conv2d(x, relax.const(w), strides=stride, padding=(pad, pad)),
    )
    vm, rules = _build(mod)
    used = [u for u in rules if u.startswith("conv")]
    assert used and "conv-fallback" not in used and "fallback" not in rules, rules

    def reference(xs):
        return F.conv2d(torch.from_numpy(xs), torch.from_numpy(w), stride=stride, padding=pad).numpy()

    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((n, 8, 15, 15), dtype=np.float32)],
        reference,
    )


class _ResidualBlock(torch.nn.Module):
    """A ResNet stem and downsampling block: 3x3 / 2 conv + BN + ReLU, max pool, 3x3 conv +
    BN, a 1x1 / 2 shortcut conv + BN, add, ReLU, global average pool and a linear head."""

    def __init__(self):
        super().__init__()
        nn = torch.nn

        def conv_bn(cin, cout, kernel, stride):
            conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False)
            return nn.Sequential(conv, nn.BatchNorm2d(cout))

        self.stem = nn.Sequential(conv_bn(3, 16, 3, 2), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.conv1 = nn.Sequential(conv_bn(16, 32, 3, 2), nn.ReLU())
        self.conv2 = conv_bn(32, 32, 3, 1)
        self.down = conv_bn(16, 32, 1, 2)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(self.stem(x))
        y = torch.relu(self.conv2(self.conv1(x)) + self.down(x))
        return self.head(y.mean(dim=(2, 3)))


def test_residual_block_for_any_batch():
    """A conv network exported for any batch (torch.export's Dim): each conv kernel (stem with
    its max pool, strided, shortcut, with the folded BN, residual add and ReLU) is the static
    kernel of one sample in a loop over the batch, the linear head keeps its symbolic rows
    (one per sample), and one build runs every batch size against torch eager (rtol/atol 1e-4:
    sums of up to 288 products)."""
    from relaxmlir.frontend import from_exported_program

    torch.manual_seed(0)
    block = _ResidualBlock().eval()
    for bn in (m for m in block.modules() if isinstance(m, torch.nn.BatchNorm2d)):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
    n = torch.export.Dim("n", min=1, max=1024)
    ep = torch.export.export(block, (torch.randn(2, 3, 64, 64),), dynamic_shapes=({0: n},))
    mod = from_exported_program(ep)
    ex, text = build_scheduled(mod, TARGET, _scheduled_lines)
    per_sample = [line for line in text if '"per-sample"' in line]
    assert len(per_sample) >= 4, text  # stem + pool, the block's two convs, the shortcut
    assert any("matmul-rows-" in line for line in text), text  # the head: rows of the batch

    def inputs(size):
        return [np.random.default_rng(size).standard_normal((size, 3, 64, 64), dtype=np.float32)]

    def reference(xs):
        with torch.no_grad():
            return block(torch.from_numpy(xs)).numpy()

    _run_sizes(relax.VirtualMachine(ex, rm.cpu()), inputs, reference)


def test_softmax_symbolic_rows():
    x = relax.Var("x", relax.TensorStructInfo(("n", 100), "float32"))
    mod = _function([x], lambda x: relax.op.nn.softmax(x, axis=-1))
    vm, used = _build(mod)
    assert any(u.startswith("reduction-inner") for u in used), used

    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((n, 100), dtype=np.float32) * 3],
        lambda xs: torch.softmax(torch.from_numpy(xs), dim=-1).numpy(),
    )


@pytest.mark.parametrize("seq", [5, 8, 12])
def test_symbolic_batch_static_rows(seq):
    """[n, seq, K] @ W: the batch is symbolic and the rows static, fewer than a tile (5), whole
    tiles (8) or tiles plus a remainder (12): each needs its own loop structure (peeling a loop
    that has no partial or no full iteration fails in MLIR)."""
    w = np.random.default_rng(seq).standard_normal((64, 96), dtype=np.float32)
    x = relax.Var("x", relax.TensorStructInfo(("n", seq, 64), "float32"))
    mod = _function([x], lambda x: relax.op.matmul(x, relax.const(w)))
    vm, used = _build(mod)
    assert used and all(u.startswith("matmul-rows-") for u in used), used
    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((n, seq, 64), dtype=np.float32)],
        lambda xs: xs @ w,
    )


def test_softmax_over_a_symbolic_axis():
    """Attention scores over a symbolic sequence: the reduction axis itself is `n`, streamed in
    vectors with a masked last one."""
    x = relax.Var("x", relax.TensorStructInfo((3, "n"), "float32"))
    mod = _function([x], lambda x: relax.op.nn.softmax(x, axis=-1))
    vm, used = _build(mod)
    assert sum(u.startswith("reduction-inner") for u in used) == 2, used  # max and sum
    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((3, n), dtype=np.float32) * 3],
        lambda xs: torch.softmax(torch.from_numpy(xs), dim=-1).numpy(),
    )


@pytest.mark.parametrize("head", [64, 40])
def test_attention_matmuls_over_a_symbolic_sequence(head):
    """Q @ K^T (K^T materialized: B is [head, n], a symbolic N) and scores @ V (a symbolic K):
    register tiles of MR symbolic rows (peeled: the remainder row by row) by NR columns (peeled
    when symbolic, or when NR does not divide the head size: a masked partial strip), heads
    split across threads; sums of up to 1000 products."""
    from lowering.schedule.matmul import micro_tile

    q = relax.Var("q", relax.TensorStructInfo((1, 4, "n", head), "float32"))
    kt = relax.Var("kt", relax.TensorStructInfo((1, 4, head, "n"), "float32"))
    v = relax.Var("v", relax.TensorStructInfo((1, 4, "n", head), "float32"))

    bb = relax.BlockBuilder()
    with bb.function("main", [q, kt, v]):
        with bb.dataflow():
            scores = bb.emit(relax.op.matmul(q, kt))
            gv = bb.emit_output(relax.op.matmul(scores, v))
        bb.emit_func_output(gv)
    mod = bb.get()
    vm, used = _build(mod)
    t = micro_tile(TARGET)
    assert {u for u in used if u.startswith("matmul")} == {f"matmul-tiles-{t.mr}x{t.nr}+1x{t.nr}"}

    def inputs(n):
        rng = np.random.default_rng(n)
        shapes = [(1, 4, n, head), (1, 4, head, n), (1, 4, n, head)]
        return [rng.standard_normal(s, dtype=np.float32) * 0.2 for s in shapes]

    _run_sizes(vm, inputs, lambda q, kt, v: (q @ kt) @ v)


def test_attention_over_a_symbolic_sequence_on_avx2():
    """softmax(Q @ K^T) @ V with K^T transposed in the graph, built once for 8-lane vectors
    (an AVX2 build): the transpose onto `n`, the masked strips whose sums stay in registers
    and the heads' run-time split all on the narrower target; n = 1, 7, 256, 1000."""
    target = rm.target.Target({"kind": "llvm", "mcpu": "x86-64-v3", "num-cores": 2})
    sinfo = relax.TensorStructInfo((1, 4, "n", 40), "float32")
    q, k, v = (relax.Var(name, sinfo) for name in "qkv")
    bb = relax.BlockBuilder()
    with bb.function("main", [q, k, v]):
        with bb.dataflow():
            kt = bb.emit(relax.op.permute_dims(k, [0, 1, 3, 2]))
            p = bb.emit(relax.op.nn.softmax(relax.op.matmul(q, kt), axis=-1))
            gv = bb.emit_output(relax.op.matmul(p, v))
        bb.emit_func_output(gv)
    vm = relax.VirtualMachine(relax.build(bb.get(), target), rm.cpu())
    for n in SIZES:
        rng = np.random.default_rng(n)
        a, b, c = (rng.standard_normal((1, 4, n, 40), dtype=np.float32) * 0.3 for _ in range(3))
        want = torch.softmax(torch.from_numpy(a @ np.swapaxes(b, 2, 3)), dim=-1).numpy() @ c
        got = vm["main"](a, b, c).numpy()
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"n={n}")


def test_bert_with_a_symbolic_sequence_length():
    """torch.export with a dynamic sequence length: the position ids are the static buffer sliced
    up to `seq` (torch bounds it by the buffer's 512), the mask and attention follow `seq`; one
    build runs every length, and no matmul falls back to naive loops."""
    transformers = pytest.importorskip("transformers")
    from test_models_transformers import LastHidden

    from relaxmlir.frontend import from_exported_program

    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        hidden_size=64,
        num_hidden_layers=1,  # a second layer repeats the first one's kernels (half the build)
        num_attention_heads=2,
        intermediate_size=128,
        vocab_size=100,
    )

    model = LastHidden(transformers.BertModel(cfg, add_pooling_layer=False).eval()).eval()
    seq = torch.export.Dim("seq", min=2, max=512)
    with torch.no_grad():
        ep = torch.export.export(
            model, (torch.randint(0, 100, (1, 16)),), dynamic_shapes={"ids": {1: seq}}
        )
    mod = from_exported_program(ep, keep_params_as_input=False)
    vm, used = _build(mod)
    assert not [u for u in used if u == "matmul-fallback"], used
    for n in (1, 7, 33, 130):
        ids = torch.randint(0, 100, (1, n))
        with torch.no_grad():
            want = model(ids).numpy()
        np.testing.assert_allclose(
            vm["main"](ids.numpy()).numpy(), want, rtol=1e-4, atol=1e-4, err_msg=f"seq={n}"
        )


def test_head_split_and_merge_reshapes_over_a_symbolic_sequence():
    """[1, n, 48] -> [1, n, 4, 12] -> heads first, and back: reshapes that only split or merge
    static dims next to the symbolic one index per group of dims (x[b, s, h * 12 + d]), with
    static strides and divisors only (the flat index over `n` ran BERT's head merge 11x slower:
    0.93 -> 0.08 ms at seq 256). The reshapes are raised to views: the symbolic axis passes
    through, the static ones are expanded or collapsed (`gather._SymbolicPlan`)."""
    x = relax.Var("x", relax.TensorStructInfo((1, "n", 48), "float32"))

    def body(x):
        heads = relax.op.permute_dims(relax.op.reshape(x, (1, "n", 4, 12)), [0, 2, 1, 3])
        scaled = relax.op.multiply(heads, relax.const(np.float32(2.0)))
        return relax.op.reshape(relax.op.permute_dims(scaled, [0, 2, 1, 3]), (1, "n", 48))

    mod = _function([x], body)
    vm, used = _build(mod)
    assert "elementwise-12" in used, used  # the permutes and the scale, vectorized
    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((1, n, 48), dtype=np.float32)],
        lambda xs: xs * 2,
    )


@pytest.mark.parametrize("head", [64, 40])
def test_transpose_onto_a_symbolic_axis(head):
    """K^T over a symbolic sequence ([1, 4, n, head] -> [1, 4, head, n], output rows along `n`):
    L x L transposed tiles while whole ones remain, the last partial row element by element
    (masked steps along `n` had read each lane on its own: 16 us for BERT's 768 elements at
    n = 1). A head of 40 takes 8-row tiles. Sizes 1, 7, 256, 1000 cover no whole tile, whole
    tiles and a remainder."""
    x = relax.Var("x", relax.TensorStructInfo((1, 4, "n", head), "float32"))
    one = relax.const(np.float32(1))
    mod = _function([x], lambda x: relax.op.permute_dims(relax.op.add(x, one), [0, 1, 3, 2]))
    lanes = TARGET.lanes("float32")
    block = max(d for d in range(1, lanes + 1) if head % d == 0)
    vm, used = _build(mod)
    assert f"transpose-{block}x{lanes}-peeled" in used, used
    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((1, 4, n, head), dtype=np.float32)],
        lambda xs: np.swapaxes(xs + 1, 2, 3),
    )


def test_symbolic_reshape_kernel_is_a_view_between_kernels():
    """A reshape kernel over a symbolic sequence ([1, n, 48] -> [1, n, 4, 12], its own kernel
    before a matmul, which takes no prologue) is a view of its input's buffer between the
    kernels (relax-graph-to-memref), not a call that copies it into a fresh buffer. (Followed by
    a permute, the two fuse into one kernel.)"""
    w = np.random.default_rng(3).standard_normal((12, 5), dtype=np.float32)
    x = relax.Var("x", relax.TensorStructInfo((1, "n", 48), "float32"))
    mod = _function(
        [x], lambda x: relax.op.matmul(relax.op.reshape(x, (1, "n", 4, 12)), relax.const(w))
    )
    lowered = get_pipeline("zero")(mod.clone())
    with scope(), TARGET:
        passes = target_pipeline(TARGET, ["graph", "layout", "schedule"])
        pipeline = ",".join(passes + ["relax-graph-to-memref"])
        run_pipeline(lowered.module, f"builtin.module({pipeline})")
    main = next(op for op in lowered.module.body.operations if "relax.function" in op.attributes)
    calls = [line for line in str(main).splitlines() if " call @" in line]
    assert len(calls) == 1 and "memref.expand_shape" in str(main), str(main)
    vm = relax.VirtualMachine(relax.build(mod, TARGET), rm.cpu())
    for n in SIZES:
        a = np.random.default_rng(n).standard_normal((1, n, 48), dtype=np.float32)
        np.testing.assert_allclose(
            vm["main"](a).numpy(), a.reshape(1, n, 4, 12) @ w, rtol=RTOL, atol=ATOL
        )


@pytest.mark.parametrize(
    "src, dst",
    [(("n", 3, 4), ("n", 12)), (("n", 12), ("n", 2, 6, 1)), ((6, "n"), (2, 3, "n")),
     ((1, "n", 1), ("n",)), ((2, "n", 6), (2, "n", 3, 2))],
)  # fmt: skip
def test_grouped_reshapes_with_a_symbolic_dim(src, dst):
    x = relax.Var("x", relax.TensorStructInfo(src, "float32"))
    mod = _function(
        [x], lambda x: relax.op.multiply(relax.op.reshape(x, dst), relax.const(np.float32(1.5)))
    )
    shape = lambda dims, n: [n if d == "n" else d for d in dims]
    vm = relax.VirtualMachine(relax.build(mod, TARGET), rm.cpu())
    for n in SIZES:
        a = np.random.default_rng(n).standard_normal(shape(src, n), dtype=np.float32)
        np.testing.assert_array_equal(vm["main"](a).numpy(), a.reshape(shape(dst, n)) * 1.5)


def test_attention_softmax_over_symbolic_rows_and_axis():
    """Scores [heads, n, n]: the row loop next to the reduction is symbolic too, so the static
    heads loop is the one blocked for side-by-side partial sums (1 row at a time ran BERT's
    softmax at seq 256 2.5x slower than the static build)."""
    x = relax.Var("x", relax.TensorStructInfo((4, "n", "n"), "float32"))
    mod = _function([x], lambda x: relax.op.nn.softmax(x, axis=-1))
    vm, used = _build(mod)
    lanes = TARGET.lanes("float32")  # the host's: 16 on AVX-512, 8 on AVX2
    assert used.count(f"reduction-inner-4x{lanes}") == 2, used  # max and sum, 4 heads side by side
    _run_sizes(
        vm,
        lambda n: [np.random.default_rng(n).standard_normal((4, n, n), dtype=np.float32) * 3],
        lambda xs: torch.softmax(torch.from_numpy(xs), dim=-1).numpy(),
    )


def test_linear_bias_relu_over_symbolic_rows():
    """x [n, 64] @ W^T + b, ReLU: the epilogue reads C's panels through a reshape in both copies
    of the run-time dispatch, and no fill zeroes them (`view_accumulators`, the zero start).
    With 16K MACs per row the serial copy runs up to 31 rows: n = 7 (remainder rows only) and
    20 (two 8-row tiles and 4 more) take it, 256 and 1000 the parallel one."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((256, 64)) * 0.1).astype(np.float32)
    b = rng.standard_normal(256).astype(np.float32)
    x = relax.Var("x", relax.TensorStructInfo(("n", 64), "float32"))

    def body(x):
        y = relax.op.add(relax.op.matmul(x, relax.op.permute_dims(relax.const(w))), relax.const(b))
        return relax.op.nn.relu(y)

    mod = _function([x], body)
    vm, used = _build(mod)
    assert sum(u.startswith("matmul-rows-") for u in used) == 2, used  # the two copies
    for n in (1, 7, 20, 256, 1000):
        for seed in (n, n + 1):  # twice: a tile that read a stale accumulator would show
            xs = np.random.default_rng(seed).standard_normal((n, 64), dtype=np.float32)
            got = vm["main"](xs).numpy()
            want = np.maximum(xs @ w.T + b, 0)
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"n={n}")


def test_each_threads_share_of_rows_in_parts():
    """The parallel copy splits symbolic rows across the 2 threads, and each thread runs its
    share past the MR-row tiles in parts of 4, 2 and 1 rows whose sizes are computed in the
    thread (they ran one row at a time). With 128K MACs per row the parallel copy runs from
    4 rows: every share from 2 to 20 rows, odd totals (shares that differ) included."""
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((256, 512)) * 0.05).astype(np.float32)
    x = relax.Var("x", relax.TensorStructInfo(("n", 512), "float32"))
    mod = _function([x], lambda x: relax.op.matmul(x, relax.op.permute_dims(relax.const(w))))
    vm, used = _build(mod)
    used = [u for u in used if u.startswith("matmul-rows-")]
    assert len(used) == 2 and all("+4x" in u and "+2x" in u for u in used), used
    for n in range(4, 41):
        xs = np.random.default_rng(n).standard_normal((n, 512), dtype=np.float32)
        np.testing.assert_allclose(
            vm["main"](xs).numpy(), xs @ w.T, rtol=RTOL, atol=ATOL, err_msg=f"n={n}"
        )


def test_one_row_of_symbolic_rows_runs_four_panels_through_a_long_k():
    """B's panels past a quarter of L2 (K = 3072: 196 KB each at NR = 16) go in column blocks
    of one panel for the row tiles; the copy that a batch of 1 runs keeps blocks of whole
    groups, so its last row runs the 1 x 4*NR GEMV tile (four streams of B), not 1 x NR (BERT-
    base's 3072 -> 768 projection built for a symbolic sequence: 1.22x the static build at n = 1,
    then 0.93x). The parallel copy keeps its blocks. Exact for every size against numpy."""
    target = rm.target.Target({"kind": "llvm", "num-cores": 2, "l2-cache": 512 * 1024})
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((256, 3072)) * 0.02).astype(np.float32)
    x = relax.Var("x", relax.TensorStructInfo(("n", 3072), "float32"))
    mod = _function([x], lambda x: relax.op.matmul(x, relax.op.permute_dims(relax.const(w))))
    vm, used = _build(mod, target)
    used = [u for u in used if u.startswith("matmul-rows-")]
    nr = int(used[0].split("+")[0].split("x")[1])
    panels = sorted(int(u.rsplit("+1x", 1)[1]) // nr for u in used)  # of the 1-row tiles
    assert panels == [1, 4], used  # the parallel copy, the serial copy
    for n in SIZES:
        xs = np.random.default_rng(n).standard_normal((n, 3072), dtype=np.float32)
        np.testing.assert_allclose(
            vm["main"](xs).numpy(), xs @ w.T, rtol=1e-3, atol=1e-3, err_msg=f"n={n}"
        )


def test_kv_cache_update_over_a_symbolic_length():
    """A decode step's cache update: the new keys (a linear, split into heads) appended to a
    cache of symbolic length n, all one kernel. TE's concat branches on `d2 < n`; it is split at
    n into two copies (no naive loops over a branch: 1.6 -> 0.06 ms for a 12-head cache of 1024
    rows), exact at n = 1, 7, 256 and 1000 against numpy."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64), dtype=np.float32) * 0.1
    cache = relax.Var("cache", relax.TensorStructInfo((1, 4, "n", 16), "float32"))
    x = relax.Var("x", relax.TensorStructInfo((1, 1, 64), "float32"))

    def body(cache, x):
        heads = relax.op.reshape(relax.op.matmul(x, relax.const(w)), (1, 1, 4, 16))
        return relax.op.concat([cache, relax.op.permute_dims(heads, [0, 2, 1, 3])], axis=2)

    mod = _function([cache, x], body)
    vm, used = _build(mod)
    assert "fallback" not in used and any(u.startswith("matmul") for u in used), used
    for n in SIZES:
        c = np.random.default_rng(n).standard_normal((1, 4, n, 16), dtype=np.float32)
        xs = np.random.default_rng(n + 1).standard_normal((1, 1, 64), dtype=np.float32)
        new = (xs @ w).reshape(1, 1, 4, 16).transpose(0, 2, 1, 3)
        got = vm["main"](c, xs).numpy()
        np.testing.assert_array_equal(got[:, :, :n], c, err_msg=f"n={n}")
        np.testing.assert_allclose(got[:, :, n:], new, rtol=RTOL, atol=ATOL, err_msg=f"n={n}")


def test_concat_of_two_symbolic_lengths():
    """cat([a (n rows), b (m rows), 2 * c (3 rows)]): the second split, at n + m in the part
    shifted by n, is at m; the scaled part is an elementwise op. Exact against numpy."""
    a = relax.Var("a", relax.TensorStructInfo((2, "n", 8), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((2, "m", 8), "float32"))
    c = relax.Var("c", relax.TensorStructInfo((2, 3, 8), "float32"))
    mod = _function(
        [a, b, c],
        lambda a, b, c: relax.op.concat([a, b, relax.op.multiply(c, relax.const(2.0))], axis=1),
    )
    vm, used = _build(mod)
    assert used == ["elementwise-8"], used
    for n, m in ((1, 1), (7, 300), (256, 2)):
        rng = np.random.default_rng(n * m)
        xs = [rng.standard_normal((2, k, 8), dtype=np.float32) for k in (n, m, 3)]
        got = vm["main"](*xs).numpy()
        np.testing.assert_array_equal(got, np.concatenate([xs[0], xs[1], 2 * xs[2]], axis=1))


@pytest.mark.parametrize("rows", [1, 8, 12])
def test_scores_over_a_kv_cache_read_in_place(rows):
    """q @ K^T over a cache of n keys: with one query row (a decode step) the transpose joins
    the product, which reads K's rows in place as dot products (one kernel, no K^T written:
    0.6 -> 0.08 ms per GPT-2-sized layer at n = 1024); with 8 or more rows the transpose stays
    a kernel of its own and the product runs MR x NR register tiles over the static rows (the
    columns symbolic, a partial strip masked; 12 rows: a peeled remainder row by row), not
    1-row strips (12 heads x 64 rows x 1024 keys: 4.0 -> 1.3 ms). Against numpy at n = 1, 7,
    256, 1000 (sums of 16 products)."""
    q = relax.Var("q", relax.TensorStructInfo((1, 4, rows, 16), "float32"))
    k = relax.Var("k", relax.TensorStructInfo((1, 4, "n", 16), "float32"))
    scores = lambda q, k: relax.op.matmul(q, relax.op.permute_dims(k, [0, 1, 3, 2]))
    mod = _function([q, k], scores)
    vm, used = _build(mod)
    if rows == 1:
        assert all(u.startswith("matmul-dot") for u in used), used
    else:
        assert any(u.startswith("transpose") for u in used), used
        assert any(u.startswith("matmul-tiles") for u in used), used
    for n in SIZES:
        rng = np.random.default_rng(n)
        qs = rng.standard_normal((1, 4, rows, 16), dtype=np.float32)
        ks = rng.standard_normal((1, 4, n, 16), dtype=np.float32)
        got = vm["main"](qs, ks).numpy()
        np.testing.assert_allclose(got, qs @ ks.transpose(0, 1, 3, 2), rtol=RTOL, atol=ATOL)
