"""The MLC tutorial's 2-layer MLP (784 -> 128 -> relu -> 10) built with TE + BlockBuilder, run by relaxmlir.

Run: python examples/mlp.py
"""

import numpy as np

import relaxmlir as rm
from relaxmlir import relax, te


def te_linear(X, W, B):
    """Y = X @ W.T + B, as in the tutorial's `te_linear`."""
    n, k = X.shape[0], X.shape[1]
    m = W.shape[0]
    r = te.reduce_axis((0, k), name="k")
    Y = te.compute((n, m), lambda i, j: te.sum(X[i, r] * W[j, r], axis=r), name="matmul")
    return te.compute((n, m), lambda i, j: Y[i, j] + B[j], name="linear")


def te_relu(A):
    return te.compute(A.shape, lambda *i: te.max(A(*i), te.const(0, A.dtype)), name="relu")


def build_mlp(batch=1):
    x = relax.Var("x", relax.TensorStructInfo((batch, 784), "float32"))
    w0 = relax.Var("w0", relax.TensorStructInfo((128, 784), "float32"))
    b0 = relax.Var("b0", relax.TensorStructInfo((128,), "float32"))
    w1 = relax.Var("w1", relax.TensorStructInfo((10, 128), "float32"))
    b1 = relax.Var("b1", relax.TensorStructInfo((10,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit_te(te_linear, x, w0, b0)
            lv1 = bb.emit_te(te_relu, lv0)
            gv = bb.emit_output(bb.emit_te(te_linear, lv1, w1, b1))
        bb.emit_func_output(gv)
    return bb.get()


def main():
    rng = np.random.default_rng(0)
    params = {
        "w0": rng.standard_normal((128, 784), dtype=np.float32) * 0.05,
        "b0": rng.standard_normal((128,), dtype=np.float32),
        "w1": rng.standard_normal((10, 128), dtype=np.float32) * 0.05,
        "b1": rng.standard_normal((10,), dtype=np.float32),
    }
    mod = relax.transform.BindParams("main", params)(build_mlp())
    mod.show()
    ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, rm.cpu())
    x = rng.standard_normal((1, 784), dtype=np.float32)
    out = vm["main"](x).numpy()
    ref = np.maximum(x @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]
    np.set_printoptions(precision=4, suppress=True)
    print("relaxmlir:", out[0])
    print("numpy:    ", ref[0])
    print("max abs difference:", float(np.abs(out - ref).max()))
    print(vm.time_evaluator("main", rm.cpu(), number=100, repeat=5)(x))  # TVM's timer
    print(vm.profile("main", x))  # each kernel's time in one call, slowest first


if __name__ == "__main__":
    main()
