#!/usr/bin/env python
"""Numeric checks of the cublas codegen on a GPU, in two steps on two machines.

    python scripts/cublas_gpu_check.py export --out cublas_libs   # here: MLIR builds the models
    python3 scripts/cublas_gpu_check.py run --libs cublas_libs    # on a GPU machine (no MLIR)

`export` builds each case (a relax module whose matmuls `FuseOpsByPattern` + `RunCodegen` hand to
cublas; the rest, if any, compiled by our CUDA pipeline) for `cuda -arch=sm_90`, writes
`<case>.so` with `export_library`, `<case>.npz` (inputs and numpy's answer, float64 reference
rounded to the output dtype) and `manifest.json` (tolerances, the cublas kernels each library
binds). `run` needs numpy and relaxmlir's runtime only (its `_cublas*.so` kernels, built at
install, and libcublasLt: the `nvidia-cublas` wheel, torch's, or RELAXMLIR_CUBLAS_LIB): it loads
each library, runs it on cuda(0) (one case also under a torch side stream when torch is there),
compares with numpy and prints one line per case, then checks that a missing libcublasLt is a
CudaError from the VM (a child process); the exit status is 1 if anything differs, 2 if the
kernels cannot run there (the reason is printed).

On this workplace's device machine (tests/python/test_backend_cublas.py says the same): export
here, then `run` there with `carry=["cublas_libs", "relaxmlir/runtime/native"]` (the model
libraries and the built kernels are ignored by git: they travel only when carried) and the command
`python3 scripts/cublas_gpu_check.py run --libs cublas_libs`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

F32_TOL = 1e-4  # inputs scaled by 1/sqrt(k): outputs ~1, f32 accumulation (no TF32)
F16_TOL = 1e-2  # f16 operands and output, f32 accumulation


# -- cases: (module, runs of (inputs, expected), tolerance); built with MLIR ---------------------


def _gelu_erf(x):
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


ACT = {
    None: lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    "gelu": _gelu_erf,
}


def _linear(shape, k_out, transposed, bias_shape, act, dtype="float32", seed=0, consts=False):
    """act(x @ w(.T) + b): the module and one run; `consts` binds w and b as constants."""
    from relaxmlir import relax

    R = relax.op
    rng = np.random.default_rng(seed)
    k = shape[-1]
    static = tuple(s if isinstance(s, int) else 5 for s in shape)
    x = (rng.standard_normal(static) / np.sqrt(k)).astype(dtype)
    w = rng.standard_normal((k_out, k) if transposed else (k, k_out)).astype(dtype)
    b = rng.standard_normal(bias_shape).astype(dtype) if bias_shape else None
    xv = relax.Var("x", relax.TensorStructInfo(shape, dtype))
    wv = relax.Var("w", relax.TensorStructInfo(w.shape, dtype))
    bv = relax.Var("b", relax.TensorStructInfo(bias_shape, dtype)) if bias_shape else None
    params = [xv, wv] + ([bv] if bias_shape else [])
    ops = {"relu": R.nn.relu, "gelu_tanh": R.nn.gelu_tanh, "gelu": R.nn.gelu}
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            rhs = bb.emit(R.permute_dims(wv, [1, 0])) if transposed else wv
            y = bb.emit(R.matmul(xv, rhs))
            if bias_shape:
                y = bb.emit(R.add(y, bv))
            if act:
                y = bb.emit(ops[act](y))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    mod = bb.get()
    weights = [w] + ([b] if bias_shape else [])
    if consts:
        bound = {"w": w, **({"b": b} if bias_shape else {})}
        mod = relax.transform.BindParams("main", bound)(mod)
        weights = []

    def reference(xs: np.ndarray) -> np.ndarray:  # in float64, rounded to the dtype
        y = xs.astype(np.float64) @ (w.T if transposed else w).astype(np.float64)
        return ACT[act](y + (b.astype(np.float64) if bias_shape else 0)).astype(dtype)

    return mod, reference, x, weights


def _case_linear(*args, runs_n=None, **kw):
    mod, ref, x, weights = _linear(*args, **kw)
    if runs_n is None:
        return mod, [([x, *weights], ref(x))]
    rng = np.random.default_rng(7)
    runs = []
    for n in runs_n:
        xs = (rng.standard_normal((n, *x.shape[1:])) / np.sqrt(x.shape[-1])).astype(x.dtype)
        runs.append(([xs, *weights], ref(xs)))
    return mod, runs


def _case_batched(a_shape, b_shape, dtype="float32", seed=1):
    from relaxmlir import relax

    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(a_shape) / np.sqrt(a_shape[-1])).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    av = relax.Var("a", relax.TensorStructInfo(a_shape, dtype))
    bv = relax.Var("b", relax.TensorStructInfo(b_shape, dtype))
    bb = relax.BlockBuilder()
    with bb.function("main", [av, bv]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(relax.op.matmul(av, bv)))
        bb.emit_func_output(gv)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(dtype)
    return bb.get(), [([a, b], want)]


def _case_mlp_tutorial():
    """The customize-optimization tutorial's model: fc1 + relu to cublas, fc2 our kernels."""
    from relaxmlir.frontend import nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.relu1, self.fc2 = nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)

        def forward(self, x):
            return self.fc2(self.relu1(self.fc1(x)))

    mod, spec = MLP().export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})
    rng = np.random.default_rng(5)
    x = rng.random((1, 784), dtype=np.float32)
    params = [((rng.random(p.shape) - 0.5) / 16).astype(np.float32) for _, p in spec]
    w1, b1, w2, b2 = (p.astype(np.float64) for p in params)
    want = (np.maximum(x @ w1.T + b1, 0) @ w2.T + b2).astype(np.float32)
    return mod, [([x, *params], want)], ["cublas.matmul_transposed_bias_relu"], "forward"


# name -> (builder, tolerance); a builder returns (mod, runs[, patterns[, entry]])
CASES = {
    "linear_t_bias_relu_f32": (lambda: _case_linear((1, 784), 256, True, (256,), "relu"), F32_TOL),
    "linear_256x512x384_f32": (
        lambda: _case_linear((256, 512), 384, True, (384,), "relu"),
        F32_TOL,
    ),
    "odd_plain_f32": (lambda: _case_linear((7, 33), 5, False, None, None), F32_TOL),
    "rank3_t_bias_gelu_tanh_f32": (
        lambda: _case_linear((3, 5, 17), 9, True, (9,), "gelu_tanh"),
        F32_TOL,
    ),
    "n1_t_bias_relu_f32": (lambda: _case_linear((5, 31), 1, True, (1,), "relu"), F32_TOL),
    "bias_1xn_f32": (lambda: _case_linear((6, 10), 12, False, (1, 12), None), F32_TOL),
    "relu_no_bias_f32": (lambda: _case_linear((9, 40), 24, False, None, "relu"), F32_TOL),
    "erf_gelu_stays_ours_f32": (lambda: _case_linear((8, 64), 32, True, (32,), "gelu"), F32_TOL),
    "batched_broadcast_f32": (lambda: _case_batched((2, 3, 5, 7), (3, 7, 4)), F32_TOL),
    "batched_strided_f32": (lambda: _case_batched((4, 6, 8), (4, 8, 3)), F32_TOL),
    "batched_lhs_broadcast_f32": (lambda: _case_batched((5, 7), (3, 7, 4)), F32_TOL),
    "t_relu_f16": (lambda: _case_linear((64, 128), 96, True, None, "relu", "float16"), F16_TOL),
    "rank3_bias_gelu_tanh_f16": (
        lambda: _case_linear((2, 16, 64), 48, False, (48,), "gelu_tanh", "float16"),
        F16_TOL,
    ),
    "batched_strided_f16": (lambda: _case_batched((3, 32, 64), (3, 64, 16), "float16"), F16_TOL),
    "symbolic_batch_constants_f32": (
        lambda: _case_linear(("n", 32), 10, True, (10,), "relu", consts=True, runs_n=(1, 9, 300)),
        F32_TOL,
    ),
    "mlp_tutorial_f32": (_case_mlp_tutorial, F32_TOL),
}
STREAM_CASE = "mlp_tutorial_f32"  # also run under a torch side stream (when torch is there)


def _select(only: str | None) -> list[str]:
    names = list(CASES) if not only else [n.strip() for n in only.split(",")]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    return names


# -- export (needs MLIR) -------------------------------------------------------------------------


def dispatch(mod, patterns=None):
    """Offload to cublas: FuseOpsByPattern (all cublas patterns, or those named), RunCodegen."""
    from relaxmlir import relax

    if patterns is None:
        fps = relax.backend.get_patterns_with_prefix("cublas")
    else:
        fps = [relax.backend.get_pattern(p) for p in patterns]
    mod = relax.transform.FuseOpsByPattern(fps, annotate_codegen=True)(mod)
    return relax.transform.RunCodegen()(mod)


def export(out: Path, names: list[str], target: str = "cuda -arch=sm_90") -> dict:
    from relaxmlir import relax

    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in names:
        builder, tol = CASES[name]
        built = builder()
        mod, runs = built[0], built[1]
        patterns = built[2] if len(built) > 2 else None
        entry = built[3] if len(built) > 3 else "main"
        ex = relax.build(dispatch(mod, patterns), target=target)
        kernels = sorted(f.symbol for f in ex.native_bindings.values())
        if not kernels or ex.callbacks:
            raise SystemExit(f"{name}: nothing was offloaded to cublas ({kernels})")
        ex.export_library(str(out / f"{name}.so"))
        arrays = {}
        for i, (inputs, want) in enumerate(runs):
            arrays.update({f"run{i}_in{j}": a for j, a in enumerate(inputs)})
            arrays[f"run{i}_want"] = want
        np.savez(out / f"{name}.npz", **arrays)
        manifest[name] = {
            "runs": len(runs),
            "inputs": len(runs[0][0]),
            "tol": tol,
            "kernels": kernels,
            "entry": entry,
        }
        manifest_path.write_text(json.dumps(manifest, indent=1))
        print(f"{name}: built for {target}, cublas kernels {', '.join(kernels)}", flush=True)
    return manifest


# -- run (numpy and relaxmlir.runtime only) -------------------------------------------------------


def run(libs: Path, names: list[str] | None = None) -> list[dict]:
    import relaxmlir as rm
    from relaxmlir import runtime
    from relaxmlir.runtime import cublas

    problem = cublas.runtime_problem()
    if problem:
        print(f"the cublas kernels cannot run here: {problem}", flush=True)
        raise SystemExit(2)
    manifest = json.loads((libs / "manifest.json").read_text())
    dev = rm.cuda(0)
    rows = []
    for name in names or list(manifest):
        info = manifest[name]
        ex = runtime.load_module(str(libs / f"{name}.so"))
        bound = sorted(f.symbol for f in ex.native_bindings.values())
        vm = runtime.VirtualMachine(ex, dev)
        data = np.load(libs / f"{name}.npz")
        worst, ok = 0.0, bound == info["kernels"]
        for i in range(info["runs"]):
            inputs = [data[f"run{i}_in{j}"] for j in range(info["inputs"])]
            want = data[f"run{i}_want"].astype(np.float64)
            got = vm[info["entry"]](*[rm.nd.array(a, dev) for a in inputs]).numpy()
            err = np.abs(got.astype(np.float64) - want)
            worst = max(worst, float(err.max()))
            ok = ok and bool(np.all(err <= info["tol"] * (1 + np.abs(want))))
            if name == STREAM_CASE and i == 0:
                ok = ok and _under_torch_stream(vm, info["entry"], inputs, want, info["tol"])
        graphed = _through_graphs(ex, info, data)
        ok = ok and graphed in ("captured, equal", "skipped (does not pay), equal")
        rows.append({"name": name, "ok": ok, "max_err": worst, "kernels": bound})
        print(f"{name}: {'ok' if ok else 'MISMATCH'}, max |err| {worst:.2e}, kernels {bound}, "
              f"cuda_graph: {graphed}", flush=True)  # fmt: skip
    if "linear_t_bias_relu_f32" in manifest and names is None:
        rows.append(missing_library_error(libs))
    return rows


def _through_graphs(ex, info: dict, data) -> str:
    """The first run's inputs through a `cuda_graph=True` VM, four calls (as usual, captured,
    replayed twice), against a plain call: whether it captured and the results are equal."""
    import warnings

    import relaxmlir as rm
    from relaxmlir import runtime
    from relaxmlir.runtime.cuda_graph import SKIP

    dev = rm.cuda(0)
    args = [rm.nd.array(data[f"run0_in{j}"], dev) for j in range(info["inputs"])]
    plain = runtime.VirtualMachine(ex, dev)[info["entry"]](*args).numpy()
    entry = runtime.VirtualMachine(ex, dev, cuda_graph=True)[info["entry"]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [entry(*args).numpy() for _ in range(4)]
    if caught:
        return f"not captured ({caught[0].message})"
    kept = [g for g in entry._graphs.graphs.values() if g is not SKIP]
    equal = all(np.array_equal(o, plain) for o in outs)
    return f"{'captured' if kept else 'skipped (does not pay)'}, {'equal' if equal else 'DIFFERENT'}"


MISSING_LIBRARY_CHILD = """
import sys
import numpy as np
import relaxmlir as rm
from relaxmlir import runtime
lib, shapes = sys.argv[1], eval(sys.argv[2])
vm = runtime.VirtualMachine(runtime.load_module(lib), rm.cuda(0))
args = [rm.nd.array(np.ones(s, "float32"), rm.cuda(0)) for s in shapes]
for attempt in range(2):  # reported each time, the first failure not left behind
    try:
        vm["main"](*args)
        raise SystemExit("no error")
    except runtime.CudaError as exc:
        assert "cuBLASLt (libcublasLt) not found" in str(exc), exc
print("ok")
"""


def missing_library_error(libs: Path) -> dict:
    """A model whose cuBLASLt is missing raises CudaError from the VM (a child process with
    RELAXMLIR_CUBLAS_LIB pointing nowhere), on every call."""
    import os
    import subprocess

    name = "linear_t_bias_relu_f32"
    shapes = repr([(1, 784), (256, 784), (256,)])
    env = {**os.environ, "RELAXMLIR_CUBLAS_LIB": "/nonexistent/libcublasLt.so"}
    proc = subprocess.run(
        [sys.executable, "-c", MISSING_LIBRARY_CHILD, str(libs / f"{name}.so"), shapes],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    ok = proc.returncode == 0 and proc.stdout.strip() == "ok"
    detail = "" if ok else f" ({(proc.stdout + proc.stderr).strip()[-300:]})"
    print(f"missing_library_error: {'ok' if ok else 'MISMATCH'}{detail}", flush=True)
    return {"name": "missing_library_error", "ok": ok, "max_err": 0.0, "kernels": []}


def _under_torch_stream(vm, entry, inputs, want, tol) -> bool:
    """The same call on a torch side stream, inputs made on it: the cublas kernels must run on
    the model's (the caller's) stream, after the copies."""
    try:
        import torch
    except ImportError:
        return True
    if not torch.cuda.is_available():
        return True
    from relaxmlir import runtime

    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        args = [torch.from_numpy(a).cuda(non_blocking=True) for a in inputs]
        got = vm[entry](*[runtime.from_dlpack(t) for t in args]).numpy()  # waits for `side`
    err = np.abs(got.astype(np.float64) - want)
    print(f"  under a torch side stream: max |err| {float(err.max()):.2e}", flush=True)
    return bool(np.all(err <= tol * (1 + np.abs(want))))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="build the case libraries (needs MLIR)")
    ex.add_argument("--out", type=Path, default=ROOT / "cublas_libs")
    ex.add_argument("--only", help=f"comma-separated cases ({', '.join(CASES)})")
    ex.add_argument("--target", default="cuda -arch=sm_90")
    rn = sub.add_parser("run", help="run them on cuda(0) against numpy (needs a GPU, not MLIR)")
    rn.add_argument("--libs", type=Path, default=ROOT / "cublas_libs")
    rn.add_argument("--only")
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.out, _select(args.only), args.target)
    else:
        rows = run(args.libs, _select(args.only) if args.only else None)
        bad = [r["name"] for r in rows if not r["ok"]]
        print(
            f"{len(rows) - len(bad)}/{len(rows)} cases match numpy",
            f"; differ: {bad}" if bad else "",
        )
        raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
