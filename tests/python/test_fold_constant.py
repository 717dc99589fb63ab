"""FoldConstant's numpy evaluator (fold_constant_numpy) against the JIT-compiled kernel, bit for
bit, on TE kernels of the kinds constant folding meets: gathers through index arithmetic with
padding branches (weight re-layouts), integer division of negative values, casts, float math."""

import numpy as np
import pytest
from mlir import ir

from relaxmlir import te
from relaxmlir.relax.transform import fold_constant, fold_constant_numpy


def _phase_split():
    a = te.placeholder((7, 6), "float32", name="a")
    out = te.compute(
        (4, 12),
        lambda i, j: te.if_then_else(
            2 * i + te.floormod(j, 2) < 7, a[2 * i + te.floormod(j, 2), te.floordiv(j, 2)], 0.0
        ),
        name="phase",
    )
    return [a, out], [np.random.default_rng(0).standard_normal((7, 6)).astype("float32")]


def _integer_division():
    a = te.placeholder((5, 4), "int32", name="a")
    b = te.placeholder((4,), "int32", name="b")
    out = te.compute(
        (5, 4),
        lambda i, j: (
            te.truncdiv(a[i, j], b[j]) * 1000
            + te.truncmod(a[i, j], b[j]) * 100
            + te.floordiv(a[i, j], b[j]) * 10
            + te.floormod(a[i, j], b[j])
        ),
        name="div",
    )
    values = np.arange(-10, 10, dtype="int32").reshape(5, 4)
    return [a, b, out], [values, np.array([3, -4, 7, -2], dtype="int32")]


def _float_math():
    a = te.placeholder((3, 8), "float32", name="a")
    b = te.placeholder((8,), "float32", name="b")
    out = te.compute(
        (3, 8),
        lambda i, j: (
            te.if_then_else(a[i, j] > b[j], a[i, j] * b[j] + 1.5, (a[i, j] - b[j]) / (b[j] + 4.0))
            + te.cast(i * 8 - j, "float32")
        ),
        name="math",
    )
    rng = np.random.default_rng(1)
    return [a, b, out], [
        rng.standard_normal((3, 8)).astype("float32"),
        rng.standard_normal(8).astype("float32"),
    ]


@pytest.mark.parametrize("make", [_phase_split, _integer_division, _float_math])
def test_numpy_evaluator_matches_the_compiled_kernel(make, monkeypatch):
    tensors, inputs = make()
    prim_func = te.create_prim_func(tensors)  # holds the module
    callee = prim_func.func_op
    result_types = list(
        ir.FunctionType(ir.TypeAttr(callee.attributes["function_type"]).value).results
    )
    shapes = [(ir.RankedTensorType(t).shape, o.dtype) for t, o in zip(result_types, tensors[-1:])]
    outs = [np.zeros(shape, dtype) for shape, dtype in shapes]
    got = fold_constant_numpy.evaluate(callee, inputs, outs)
    assert got is not None, "the evaluator refused the kernel"
    monkeypatch.setattr(fold_constant_numpy, "evaluate", lambda *args: None)  # the JIT path
    want = fold_constant._Evaluator()(callee, inputs, result_types)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_reductions_are_left_to_the_jit():
    a = te.placeholder((4, 5), "float32", name="a")
    k = te.reduce_axis((0, 5), name="k")
    out = te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="rowsum")
    prim_func = te.create_prim_func([a, out])
    callee = prim_func.func_op
    x = np.ones((4, 5), "float32")
    assert fold_constant_numpy.evaluate(callee, [x], [np.zeros(4, "float32")]) is None


def test_16bit_weights_stay_16bit():
    """A bfloat16 model's weights are stored in 16 bits in the executable: FoldConstant does not
    fold the cast to f32 that LegalizeOps puts before their matmuls (it runs at each call);
    small constants (biases) still fold. Numerics at torch's bf16 tolerance."""
    import re

    import torch

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.frontend import from_fx

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
    m = m.to(torch.bfloat16).eval()
    mod = from_fx(torch.fx.symbolic_trace(m), [(4, 256)], input_dtypes=["bfloat16"])
    zero = relax.get_pipeline("zero")(mod.clone())  # keep the module alive while printing
    text = str(zero["main"].op.get_asm(large_elements_limit=4))
    constants = set(re.findall(r'relax.constant"\(\) \{value = [^}]*?: tensor<([^>]*)>', text))
    assert {"256x512xbf16", "512x256xbf16"} <= constants, constants
    assert not any(c.endswith("f32") and c.count("x") == 1 for c in constants), constants
    x = torch.randn(4, 256).to(torch.bfloat16)
    got = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())["main"](x)
    with torch.no_grad():
        want = m(x)
    torch.testing.assert_close(torch.from_dlpack(got), want, rtol=1.6e-2, atol=1e-2)


def test_weights_above_the_size_limit_still_fold_their_transpose(monkeypatch):
    """A result no larger than the constants it comes from folds whatever its size (VGG's first
    linear layer, 103M elements, transposed its weight at every call and read it unpacked); a
    broadcast that grows a constant past the limit stays a run-time kernel. The limit is made
    small here: 256 elements, below the 512-element weight, above the 32-element scale."""
    import re

    import relaxmlir as rm
    from relaxmlir import relax

    rng = np.random.default_rng(0)
    w = rng.standard_normal((32, 16)).astype("float32")
    scale = rng.standard_normal(32).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((32, 16), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            wt = bb.emit(relax.op.permute_dims(relax.const(w)))
            y = bb.emit(relax.op.matmul(x, wt))
            s = bb.emit(relax.op.broadcast_to(relax.const(scale), (32, 32)))  # 32 -> 1024
            out = bb.emit_output(relax.op.multiply(y, s))
        bb.emit_func_output(out)
    mod = bb.get()
    monkeypatch.setattr(fold_constant, "MAX_ELEMENTS", 256)
    zero = relax.get_pipeline("zero")(mod.clone())  # keep the module alive while printing
    callees = re.findall(r"callee = @(\w+)", str(zero["main"].op.get_asm(large_elements_limit=4)))
    assert callees == ["matmul", "broadcast_to", "multiply"], callees
    built = relax.build(mod, "llvm")
    xs = rng.standard_normal((32, 16)).astype("float32")
    got = relax.VirtualMachine(built, rm.cpu())["main"](xs).numpy()
    np.testing.assert_allclose(got, (xs @ w.T) * scale, rtol=1e-5, atol=1e-5)
