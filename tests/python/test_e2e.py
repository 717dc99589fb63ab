"""End to end on the CPU: TE, BlockBuilder, call_tir, call_dps_packed, BindParams, build, VM.

Numeric checks against numpy, fixed seeds; float32 tolerances rtol 1e-5 / atol 1e-5 (1e-4 where a
784-long reduction is summed in a different order).
"""

import numpy as np
import pytest

import relaxmlir as rm
from relaxmlir import relax, te

from mlp_models import mlp, params, reference, register_torch_env, te_linear, te_relu


def run(mod, *args):
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), rm.cpu())
    return vm["main"](*args)


def test_te_matmul_relu_standalone(rng):
    A = te.placeholder((128, 128), name="A")
    B = te.placeholder((128, 128), name="B")
    k = te.reduce_axis((0, 128), name="k")
    Y = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((128, 128), lambda i, j: te.max(Y[i, j], te.const(0, "float32")), name="C")
    func = te.create_prim_func([A, B, C])
    ex = rm.build(func, target="llvm")
    a = rng.standard_normal((128, 128), dtype=np.float32)
    b = rng.standard_normal((128, 128), dtype=np.float32)
    c = np.zeros((128, 128), np.float32)
    ex["main"](a, b, c)  # destination passing: c is written in place
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_blockbuilder_emit_te_matmul_relu(rng):
    A = relax.Var("A", relax.TensorStructInfo((128, 128), "float32"))
    B = relax.Var("B", relax.TensorStructInfo((128, 128), "float32"))

    def te_matmul(A, B):
        k = te.reduce_axis((0, A.shape[1]), name="k")
        return te.compute((A.shape[0], B.shape[1]), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul")

    bb = relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            C = bb.emit_te(te_matmul, A, B)
            D = bb.emit_te(te_relu, C)
            R = bb.emit_output(D)
        bb.emit_func_output(R, params=[A, B])
    mod = bb.get()
    assert set(mod.functions) == {"main", "te_matmul", "te_relu"}
    a = rng.standard_normal((128, 128), dtype=np.float32)
    b = rng.standard_normal((128, 128), dtype=np.float32)
    np.testing.assert_allclose(run(mod, a, b).numpy(), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["tir", "packed", "mixed"])
def test_mlp_three_ways(kind, rng):
    register_torch_env()
    p = params()
    x = rng.standard_normal((1, 784), dtype=np.float32)
    out = run(mlp(kind), x, p["w0"], p["b0"], p["w1"], p["b1"])
    assert isinstance(out, rm.nd.NDArray) and out.shape == (1, 10)
    np.testing.assert_allclose(out.numpy(), reference(x, p), rtol=1e-4, atol=1e-4)


def test_mlp_accepts_ndarray_and_torch(rng):
    import torch

    p = params()
    x = rng.standard_normal((1, 784), dtype=np.float32)
    vm = relax.VirtualMachine(relax.build(mlp("tir")), rm.cpu())
    args = [rm.nd.array(x), torch.from_numpy(p["w0"]), p["b0"], rm.nd.array(p["w1"]), torch.from_numpy(p["b1"])]
    np.testing.assert_allclose(vm["main"](*args).numpy(), reference(x, p), rtol=1e-4, atol=1e-4)
    # results speak DLPack: torch views the same memory
    out = vm["main"](*args)
    t = torch.from_dlpack(out)
    t.add_(1.0)
    np.testing.assert_allclose(out.view_numpy(), t.numpy())


def test_packed_function_writes_in_place_without_copies():
    """The torch function's `out` is the very buffer the compiled code reads next."""
    seen = {}

    @rm.register_func("test.record_relu", override=True)
    def record(x, out):
        import torch

        seen["out_ptr"] = out.view_numpy().ctypes.data
        torch.clamp(torch.from_dlpack(x), min=0.0, out=torch.from_dlpack(out))

    @rm.register_func("test.record_identity", override=True)
    def ident(x, out):
        seen["in_ptr"] = x.view_numpy().ctypes.data
        out.view_numpy()[...] = x.view_numpy()

    s = relax.TensorStructInfo((4, 8), "float32")
    x = relax.Var("x", s)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.call_dps_packed("test.record_relu", [x], s))
            b = bb.emit_output(relax.call_dps_packed("test.record_identity", [a], s))
        bb.emit_func_output(b)
    data = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    out = run(bb.get(), data)
    assert seen["out_ptr"] == seen["in_ptr"]
    np.testing.assert_array_equal(out.numpy(), np.maximum(data, 0))


def test_bind_params_mlp(rng):
    p = params()
    mod = relax.transform.BindParams("main", p)(mlp("tir"))
    assert [name for name, _ in mod["main"].params] == ["x"]
    x = rng.standard_normal((1, 784), dtype=np.float32)
    np.testing.assert_allclose(run(mod, x).numpy(), reference(x, p), rtol=1e-4, atol=1e-4)


def test_two_dataflow_blocks_and_an_allocation(rng):
    """block 1 -> alloc_tensor + side-effecting packed call filling it -> block 2 reads it."""

    @rm.register_func("test.fill_scaled", override=True)
    def fill_scaled(x, dst):
        dst.view_numpy()[...] = 2.0 * x.view_numpy()

    s = relax.TensorStructInfo((8, 16), "float32")
    x = relax.Var("x", s)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit_output(bb.emit_te(te_relu, x))
        buf = bb.emit(relax.op.builtin.alloc_tensor((8, 16), "float32"))
        bb.emit(relax.call_packed("test.fill_scaled", lv0, buf))
        with bb.dataflow():
            lv1 = bb.emit_te(lambda a, b: te.compute(a.shape, lambda i, j: a[i, j] + b[i, j]), buf, x)
            gv = bb.emit_output(lv1)
        bb.emit_func_output(gv)
    mod = bb.get()
    text = str(mod)
    assert text.count("relax.dataflow") == 2 and "relax.builtin_alloc_tensor" in text
    data = rng.standard_normal((8, 16), dtype=np.float32)
    np.testing.assert_allclose(run(mod, data).numpy(), 2 * np.maximum(data, 0) + data, rtol=1e-6)


def test_alloc_inside_dataflow_is_rejected():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    with pytest.raises(ValueError, match="not allowed inside a dataflow block"):
        with bb.function("main", [x]):
            with bb.dataflow():
                bb.emit(relax.op.builtin.alloc_tensor((2,), "float32"))


def test_symbolic_batch_te_mlp(rng):
    p = params()
    mod = relax.transform.BindParams("main", p)(mlp("tir", batch="n"))
    vm = relax.VirtualMachine(relax.build(mod), rm.cpu())
    for n in (1, 7, 64):
        x = rng.standard_normal((n, 784), dtype=np.float32)
        np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, p), rtol=1e-4, atol=1e-4)


def test_show_parse_roundtrip_builds(rng):
    p = params()
    mod = relax.transform.BindParams("main", p)(mlp("tir"))
    again = rm.parse(str(mod))
    assert str(rm.parse(str(again))) == str(again)
    x = rng.standard_normal((1, 784), dtype=np.float32)
    np.testing.assert_allclose(run(again, x).numpy(), reference(x, p), rtol=1e-4, atol=1e-4)


def test_show_elides_large_constants(capsys):
    mod = relax.transform.BindParams("main", params())(mlp("tir"))
    mod.show()
    shown = capsys.readouterr().out
    assert "dense_resource<__elided__>" in shown
    assert len(shown) < 20_000 < len(str(mod))


def test_temporary_constants_are_not_confused(rng):
    """Constants freed after emission must not alias later ones (ids are reused by Python)."""
    x = relax.Var("x", relax.TensorStructInfo((3,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for i in range(1, 6):
                y = bb.emit(relax.op.add(y, relax.const(np.full((3,), float(i), "float32"))))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    np.testing.assert_array_equal(run(bb.get(), np.zeros(3, np.float32)).numpy(), np.full(3, 15.0))


def test_emit_output_of_a_tuple_element(rng):
    x = relax.Var("x", relax.TensorStructInfo((4, 6), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            parts = bb.emit(relax.op.split(x, 2, axis=1))
            gv = bb.emit_output(parts[1])
        bb.emit_func_output(gv)
    data = rng.standard_normal((4, 6), dtype=np.float32)
    np.testing.assert_array_equal(run(bb.get(), data).numpy(), data[:, 3:])


def test_clone_keeps_module_attributes():
    from mlir import ir

    mod = rm.parse('module attributes {relax.note = "kept"} {}')
    copy = mod.clone()
    assert ir.StringAttr(copy.module.operation.attributes["relax.note"]).value == "kept"
    assert copy.module.operation is not mod.module.operation


def test_build_lowers_per_function_passes_with_threading_on(rng, monkeypatch):
    """relax.build lowers in two runs: the stages up to the schedule with the context's
    threading off (their passes run pipelines and transform scripts of their own), then
    bufferization and code generation with it on, whose per-function nests (canonicalize,
    convert-linalg-to-loops, ...) MLIR runs on several functions at once. Threading is off
    again after the build; the model's numbers as before."""
    from dialects import get_context
    from relaxmlir.relax import vm_build

    runs = []
    real = vm_build.run_pipeline

    def spy(module, pipeline, *args, threaded=False, **kwargs):
        runs.append((threaded, pipeline))
        return real(module, pipeline, *args, threaded=threaded, **kwargs)

    monkeypatch.setattr(vm_build, "run_pipeline", spy)
    monkeypatch.setenv("RELAXMLIR_CACHE", "0")
    ex = relax.build(relax.transform.BindParams("main", params())(mlp("tir", "n")), "llvm")
    assert [t for t, _ in runs] == [False, True]
    assert "relax-schedule-cpu" in runs[0][1] and "func.func(" not in runs[0][1]
    assert "func.func(canonicalize,cse,canonicalize)" in runs[1][1]
    assert "func.func(convert-linalg-to-loops," in runs[1][1]
    assert get_context().get_num_threads() == 1
    x = rng.standard_normal((5, 784)).astype("float32")
    out = relax.VirtualMachine(ex, rm.cpu())["main"](x).numpy()
    np.testing.assert_allclose(out, reference(x, params()), rtol=1e-4, atol=1e-4)
