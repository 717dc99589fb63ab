"""FuseOps + FuseTIR: chains become one PrimFunc, numerically unchanged, with no intermediates.

Numeric checks against numpy / torch with rtol 1e-4, atol 1e-4 (float32, reductions reordered).
"""

import re

import numpy as np
import pytest
from mlp_models import mlp, params, reference

import relaxmlir as rm
from lowering.pipelines import target_pipeline
from lowering.registry import run_pipeline
from relaxmlir import relax
from relaxmlir.scope import scope


def _fused(mod):
    mod = relax.transform.LegalizeOps()(mod)
    return relax.transform.FuseTIR()(relax.transform.FuseOps()(mod))


def _prim_funcs(mod):
    return sorted(name for name, f in mod.functions.items() if f.is_prim_func)


def _allocs_per_function(mod) -> dict[str, int]:
    """Bufferize like relax.build does and count memref.alloc in each function.

    Schedules and weight packing are left out: their workspaces (packed panels) are not
    intermediates of a fused chain, which is what these counts are about.
    """
    mod = mod.clone()
    stages = target_pipeline(rm.target.Target("llvm"), ["graph", "bufferize"])
    with scope():
        run_pipeline(mod.module, "builtin.module(" + ",".join(stages) + ")")
    return {name: str(f.op).count("memref.alloc") for name, f in mod.functions.items()}


def _run(mod, *args):
    return relax.VirtualMachine(relax.build(mod), rm.cpu())["main"](*args).numpy()


def test_mlp_linear_relu_fuses(rng):
    p = params()
    mod = _fused(relax.transform.BindParams("main", p)(mlp("tir")))
    funcs = _prim_funcs(mod)
    assert "fused_te_linear_te_relu" in funcs and "te_relu" not in funcs, funcs
    x = rng.standard_normal((1, 784), dtype=np.float32)
    np.testing.assert_allclose(_run(mod, x), reference(x, p), rtol=1e-4, atol=1e-4)
    allocs = _allocs_per_function(mod)
    assert allocs["fused_te_linear_te_relu"] == 0, allocs


def _conv_bn_relu_module(params_np):
    x = relax.Var("x", relax.TensorStructInfo((2, 3, 10, 10), "float32"))
    bb = relax.BlockBuilder()
    c = {k: relax.const(v) for k, v in params_np.items()}
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, c["w"], padding=(1, 1)))
            y = bb.emit(relax.op.nn.batch_norm(y, c["gamma"], c["beta"], c["mean"], c["var"], epsilon=1e-5))
            y = bb.emit(relax.op.nn.relu(y))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    return bb.get()


def test_conv_batchnorm_relu_fuses_into_one_kernel(rng):
    torch = pytest.importorskip("torch")
    p = {
        "w": rng.standard_normal((4, 3, 3, 3), dtype=np.float32),
        "gamma": rng.standard_normal(4, dtype=np.float32),
        "beta": rng.standard_normal(4, dtype=np.float32),
        "mean": rng.standard_normal(4, dtype=np.float32),
        "var": rng.uniform(0.5, 2.0, 4).astype(np.float32),
    }
    mod = _fused(_conv_bn_relu_module(p))
    main_calls = str(mod["main"]).count("relax.call_tir")
    assert main_calls == 1, mod["main"]
    x = rng.standard_normal((2, 3, 10, 10), dtype=np.float32)
    t = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(p["w"]), padding=1)
    t = torch.nn.functional.batch_norm(t, torch.from_numpy(p["mean"]), torch.from_numpy(p["var"]),
                                       torch.from_numpy(p["gamma"]), torch.from_numpy(p["beta"]), eps=1e-5)
    np.testing.assert_allclose(_run(mod, x), torch.relu(t).numpy(), rtol=1e-4, atol=1e-4)


def test_elementwise_sequence_is_one_generic(rng):
    x = relax.Var("x", relax.TensorStructInfo((16, 32), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((32,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            a = bb.emit(relax.op.exp(x))
            b = bb.emit(relax.op.add(a, y))
            c = bb.emit(relax.op.nn.relu(b))
            d = bb.emit(relax.op.multiply(c, c))
            gv = bb.emit_output(d)
        bb.emit_func_output(gv)
    mod = _fused(bb.get())
    (name,) = _prim_funcs(mod)
    assert str(mod[name]).count("linalg.generic") == 1, mod[name]
    xs = rng.standard_normal((16, 32), dtype=np.float32)
    ys = rng.standard_normal(32, dtype=np.float32)
    expect = np.maximum(np.exp(xs) + ys, 0) ** 2
    np.testing.assert_allclose(_run(mod, xs, ys), expect, rtol=1e-5, atol=1e-5)


def test_build_fuses_by_default(rng):
    """relax.build's llvm pipeline runs FuseOps/FuseTIR: same numbers, fused kernels, no temporaries."""
    p = params()
    mod = relax.transform.BindParams("main", p)(mlp("tir"))
    allocs = _allocs_per_function(mod)  # the build pipeline up to buffer deallocation
    fused = [name for name in allocs if name.startswith("fused_")]
    assert fused and all(allocs[name] == 0 for name in fused), allocs
    x = rng.standard_normal((1, 784), dtype=np.float32)
    np.testing.assert_allclose(_run(mod, x), reference(x, p), rtol=1e-4, atol=1e-4)


def test_symbolic_batch_chain_fuses(rng):
    """A dynamic intermediate takes its sizes from the group output: the n-batch MLP fuses too."""
    p = params()
    mod = relax.transform.BindParams("main", p)(mlp("tir", batch="n"))
    assert "fused_te_linear_te_relu" in _prim_funcs(_fused(mod))
    vm = relax.VirtualMachine(relax.build(mod), rm.cpu())
    for n in (1, 5, 64):
        x = rng.standard_normal((n, 784), dtype=np.float32)
        np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, p), rtol=1e-4, atol=1e-4)



_KERNELS = """
#id = affine_map<(d0) -> (d0)>
func.func private @relu_a(%x: tensor<8xf32>, %out: tensor<8xf32>) -> tensor<8xf32> {
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%out : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @relu_b(%y: tensor<8xf32>, %res: tensor<8xf32>) -> tensor<8xf32> {
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%res : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func @main() -> tensor<8xf32> {
  %w = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  %0 = tensor.empty() : tensor<8xf32>
  %1 = func.call @relu_b(%w, %0) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}
"""


def test_body_key_is_the_functions_text():
    """dedupe.body_key prints each function in local scope (not through the whole module, which
    made deduplication quadratic); the text, and so every key derived from it, is unchanged."""
    from mlir import ir

    import dialects
    from lowering.dedupe import body_key

    with dialects.get_context():
        module = ir.Module.parse(_KERNELS)
    funcs = [op.operation for op in module.body.operations]
    for f in funcs:
        assert body_key(f) == str(f).partition("(")[2]
    assert body_key(funcs[0]) == body_key(funcs[1]) != body_key(funcs[2])


def test_reshape_epilogue_keeps_the_matmul_a_matmul(rng):
    """A reshape that splits the product's N ([64, 49] -> [1, 64, 7, 7], as im2col convs do)
    fuses after the matmul but is not pushed into it (upstream fusion by expansion made a
    4-loop contraction that no matmul rule takes: naive loops, 15x slower)."""
    w = rng.standard_normal((64, 288), dtype=np.float32)
    x = relax.Var("x", relax.TensorStructInfo((288, 49), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.matmul(relax.const(w), x))
            gv = bb.emit_output(relax.op.reshape(y, (1, 64, 7, 7)))
        bb.emit_func_output(gv)
    mod = _fused(bb.get())
    (name,) = _prim_funcs(mod)
    text = str(mod[name].op)
    # the contraction keeps its three loops (m, n, k)
    assert '"parallel", "parallel", "reduction"]' in text and "tensor<64x7x7xf32>" not in text
    xs = rng.standard_normal((288, 49), dtype=np.float32)
    np.testing.assert_allclose(_run(bb.get(), xs), (w @ xs).reshape(1, 64, 7, 7), rtol=1e-4, atol=1e-4)


def test_equal_groups_are_fused_once(rng, monkeypatch):
    """FuseTIR fuses a group equal to an earlier one (a transformer's repeated layers) by copying
    that result: one elementwise fusion per distinct group, the copies' bodies the same."""
    from lowering import fuse_tir
    from lowering.dedupe import body_key

    calls = []
    fuse = fuse_tir._fuse_elementwise

    def counting(func_op, views):
        calls.append(func_op)
        return fuse(func_op, views)

    monkeypatch.setattr(fuse_tir, "_fuse_elementwise", counting)
    w = [rng.standard_normal((16, 16), dtype=np.float32) for _ in range(3)]
    b = [rng.standard_normal((16,), dtype=np.float32) for _ in range(3)]
    x = relax.Var("x", relax.TensorStructInfo((4, 16), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for wi, bi in zip(w, b):  # three layers: matmul + bias + relu each
                y = bb.emit(relax.op.matmul(y, relax.const(wi)))
                y = bb.emit(relax.op.nn.relu(relax.op.add(y, relax.const(bi))))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    mod = _fused(bb.get())
    fused = [f for name, f in mod.functions.items() if name.startswith("fused_")]
    assert len(fused) == 3 and len(calls) == 1, ([f.name for f in fused], len(calls))
    assert len({body_key(f.op.operation) for f in fused}) == 1
    data = rng.standard_normal((4, 16), dtype=np.float32)
    want = data
    for wi, bi in zip(w, b):
        want = np.maximum(want @ wi + bi, 0)
    np.testing.assert_allclose(_run(mod, data), want, rtol=1e-4, atol=1e-4)


def _schedules(mod, threads: int) -> dict[str, list[str]]:
    """The CPU rules each kernel of `mod` got (the `relax.schedule` attribute), for `threads`."""
    mod = _fused(mod.clone())
    target = rm.target.Target({"kind": "llvm", "num-cores": threads})
    stages = target_pipeline(target, ["graph", "layout", "schedule"])
    with scope():
        run_pipeline(mod.module, "builtin.module(" + ",".join(stages) + ")")
    text = str(mod.module)
    return {
        name: re.findall(r'"([^"]+)"', rules)
        for name, rules in re.findall(r"@(\w+)\(.*relax\.schedule = \[([^\]]*)\]", text)
    }


@pytest.mark.parametrize("threads", [1, 2])
def test_rotary_embedding_epilogue_is_vectorized(rng, threads):
    """Llama's q * cos + rotate_half(q) * sin after the Q projection: rotate_half's concat,
    fused after the matmul, is a branch on the output index; it is split into one elementwise
    op per branch (`branches.split_branches`), not left to naive loops. Numerics against torch
    eager (rtol 1e-4, atol 1e-4) at 1 and 2 threads."""
    import torch

    from relaxmlir.frontend import from_exported_program

    class Rope(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(128, 128, bias=False)

        def forward(self, x, cos, sin):
            q = self.q(x).view(1, 16, 4, 32).transpose(1, 2)
            q1, q2 = q[..., :16], q[..., 16:]
            return q * cos + torch.cat((-q2, q1), dim=-1) * sin

    torch.manual_seed(0)
    model = Rope().eval()
    shapes = ((1, 16, 128), (1, 1, 16, 32), (1, 1, 16, 32))
    args = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    mod = from_exported_program(torch.export.export(model, tuple(map(torch.from_numpy, args))))
    rules = _schedules(mod, threads)
    assert rules and not any("fallback" in r for r in rules.values()), rules
    target = rm.target.Target({"kind": "llvm", "num-cores": threads})
    vm = relax.VirtualMachine(relax.build(mod, target), rm.cpu())
    with torch.no_grad():
        want = model(*map(torch.from_numpy, args)).numpy()
    np.testing.assert_allclose(vm["main"](*args).numpy(), want, rtol=1e-4, atol=1e-4)


def _graph_main(mod) -> str:
    """The graph function as relax.build bufferizes it (after fusion and schedules), as text."""
    mod = mod.clone()
    stages = target_pipeline(rm.target.Target("llvm"), ["graph", "layout", "schedule", "bufferize"])
    with scope():
        run_pipeline(mod.module, "builtin.module(" + ",".join(stages) + ")")
    return str(mod.functions["main"].op)


def test_reshape_kernels_become_views(rng):
    """A kernel that only reshapes (a permute of a unit axis, then a reshape, fused into one) is
    a view of its input's buffer in the graph: no call, no allocation, no copy. Numbers against
    numpy (rtol 1e-4, atol 1e-4)."""
    R = relax.op
    w = rng.standard_normal((16, 4), dtype=np.float32)
    x = relax.Var("x", relax.TensorStructInfo((1, 8, 16), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            t = bb.emit(R.permute_dims(x, [1, 0, 2]))  # [8, 1, 16]: only the unit axis moves
            r = bb.emit(R.reshape(t, (8, 16)))
            gv = bb.emit_output(R.matmul(r, relax.const(w)))
        bb.emit_func_output(gv)
    mod = relax.transform.LegalizeOps()(bb.get())
    main = _graph_main(mod)
    calls = [c for c in re.findall(r"call @(\w+)\(", main) if not c.startswith("relaxmlir_profile_")]
    assert calls == ["matmul_prepacked"], calls  # the reshape kernel is gone (timers aside)
    assert "memref.collapse_shape" in main and "memref.alloc" not in main, main
    data = rng.standard_normal((1, 8, 16), dtype=np.float32)
    np.testing.assert_allclose(_run(mod, data), data.reshape(8, 16) @ w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("gate", ["sigmoid", "hardsigmoid"])
def test_squeeze_excite_gate_is_computed_once_per_channel(rng, gate):
    """A squeeze-excite block multiplies the image by a gate of [1, C, 1, 1]. Fused with the
    multiply, a sigmoid's exp stays a generic of its own over the C gate values instead of being
    inlined into the multiply and evaluated for each of the C x H x W elements (RegNetY-1.6GF:
    73 us per block); a hard sigmoid (a clip and a division) still fuses into the multiply,
    which measured better. Against numpy."""
    c, h, w = 16, 6, 5
    x = relax.Var("x", relax.TensorStructInfo((1, c, h, w), "float32"))
    s = relax.Var("s", relax.TensorStructInfo((1, c, 1, 1), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, s]):
        with bb.dataflow():
            if gate == "sigmoid":
                g = bb.emit(relax.op.sigmoid(s))
            else:
                clipped = relax.op.clip(relax.op.add(s, relax.const(3.0)), 0.0, 6.0)
                g = bb.emit(relax.op.divide(clipped, relax.const(6.0)))
            out = bb.emit_output(relax.op.multiply(x, g))
        bb.emit_func_output(out)
    mod = _fused(bb.get())
    (name,) = [n for n in _prim_funcs(mod) if n.startswith("fused_")]
    text = str(mod[name].op)
    generics = text.split("linalg.generic")[1:]
    writes = [re.search(r"outs\([^)]*\)", g).group(0) for g in generics]
    (multiply,) = [g for g, o in zip(generics, writes) if f"tensor<1x{c}x{h}x{w}xf32>" in o]
    if gate == "sigmoid":
        assert "math.exp" in text and "math.exp" not in multiply, text
    else:
        assert len(generics) == 1, text  # the gate fused into the multiply
    xs = rng.standard_normal((1, c, h, w), dtype=np.float32)
    ss = rng.standard_normal((1, c, 1, 1), dtype=np.float32)
    g = 1 / (1 + np.exp(-ss)) if gate == "sigmoid" else np.clip(ss + 3, 0, 6) / 6
    np.testing.assert_allclose(_run(mod, xs, ss), xs * g, rtol=1e-5, atol=1e-6)


def test_cache_write_does_not_recompute_the_new_row(rng):
    """A KV cache written at one position (`index_copy`: each of its 64 rows takes the new row
    or keeps its own; not state here, so not written in place) reads the new row at computed
    indices: its producer (x * 2 + 1 here, a rotary embedding in a decode step) stays a kernel
    of its own instead of running once per cache element, while
    a pad (a gather barely larger than its input) still takes its producer."""
    import torch

    from relaxmlir.frontend import from_exported_program

    class Write(torch.nn.Module):
        def forward(self, cache, row, pos):
            return cache.index_copy(1, pos, row * 2 + 1), torch.nn.functional.pad(row + 1, (1, 1))

    cache, row = torch.randn(1, 64, 8), torch.randn(1, 1, 8)
    pos = torch.tensor([5])
    mod = from_exported_program(torch.export.export(Write(), (cache, row, pos)))
    names = _prim_funcs(_fused(mod))
    writes = [n for n in names if "index_copy" in n]  # the write: each row taken or kept
    assert len(writes) == 1 and "multiply" not in writes[0], names
    assert "fused_multiply_add" in names, names
    assert any(n.startswith("fused_") and n.endswith("pad") for n in names), names
    got = relax.VirtualMachine(relax.build(mod), rm.cpu())["main"](cache, row, pos)
    for g, w in zip(got, Write()(cache, row, pos)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
