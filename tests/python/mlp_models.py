"""The tutorial's MLP written three ways (TE call_tir, packed torch functions, a mixture)."""

from __future__ import annotations

import numpy as np

import relaxmlir as rm
from relaxmlir import relax, te


def te_linear(X, W, B):
    r = te.reduce_axis((0, X.shape[1]), name="k")
    Y = te.compute((X.shape[0], W.shape[0]), lambda i, j: te.sum(X[i, r] * W[j, r], axis=r), name="matmul")
    return te.compute(Y.shape, lambda i, j: Y[i, j] + B[j], name="add")


def te_relu(A):
    return te.compute(A.shape, lambda *i: te.max(A(*i), te.const(0, A.dtype)), name="relu")


def register_torch_env() -> None:
    """`env.linear` / `env.relu` as torch functions writing into the compiled code's buffers."""
    import torch

    @rm.register_func("env.linear", override=True)
    def linear(x, w, b, out):
        torch.addmm(torch.from_dlpack(b), torch.from_dlpack(x), torch.from_dlpack(w).T, out=torch.from_dlpack(out))

    @rm.register_func("env.relu", override=True)
    def relu(x, out):
        torch.maximum(torch.from_dlpack(x), torch.tensor(0.0), out=torch.from_dlpack(out))


def params(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w0": (rng.standard_normal((128, 784)) * 0.05).astype(np.float32),
        "b0": rng.standard_normal((128,)).astype(np.float32),
        "w1": (rng.standard_normal((10, 128)) * 0.05).astype(np.float32),
        "b1": rng.standard_normal((10,)).astype(np.float32),
    }


def reference(x: np.ndarray, p: dict) -> np.ndarray:
    return np.maximum(x @ p["w0"].T + p["b0"], 0) @ p["w1"].T + p["b1"]


def mlp(kind: str, batch=1) -> rm.IRModule:
    """kind: 'tir' (all call_tir), 'packed' (all call_dps_packed), 'mixed'."""
    x = relax.Var("x", relax.TensorStructInfo((batch, 784), "float32"))
    w0 = relax.Var("w0", relax.TensorStructInfo((128, 784), "float32"))
    b0 = relax.Var("b0", relax.TensorStructInfo((128,), "float32"))
    w1 = relax.Var("w1", relax.TensorStructInfo((10, 128), "float32"))
    b1 = relax.Var("b1", relax.TensorStructInfo((10,), "float32"))
    hidden = relax.TensorStructInfo((batch, 128), "float32")
    out = relax.TensorStructInfo((batch, 10), "float32")
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            if kind == "packed":
                lv0 = bb.emit(relax.call_dps_packed("env.linear", (x, w0, b0), hidden))
            else:
                lv0 = bb.emit_te(te_linear, x, w0, b0)
            if kind == "tir":
                lv1 = bb.emit_te(te_relu, lv0)
            else:
                lv1 = bb.emit(relax.call_dps_packed("env.relu", (lv0,), hidden))
            if kind == "packed":
                lv2 = bb.emit(relax.call_dps_packed("env.linear", (lv1, w1, b1), out))
            else:
                lv2 = bb.emit_te(te_linear, lv1, w1, b1)
            gv = bb.emit_output(lv2)
        bb.emit_func_output(gv)
    return bb.get()
