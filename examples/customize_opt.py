"""TVM Unity's "customize the optimization" tutorial on relaxmlir: an nn.Module exported with a
spec, its first linear + relu dispatched to a library by a user-written module pass, the rest
lowered with the default pipeline and schedules, built, run, compared with numpy, then exported
and loaded back as a deployed model would be.

On the CPU (`--target llvm`, the default) the library is a BLAS (the `blas` codegen, in place of
cuBLAS); with `--target cuda` it is cuBLASLt (the `cublas` codegen), as in the tutorial. The cuda
build needs no GPU, running it does: without one (or without cuBLASLt) the example builds and
exports the model, then says what is missing and exits with status 1.

Run: python examples/customize_opt.py [--target cuda] [--all-patterns] [--export model.so]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import nn


class MLPModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        x = self.fc1(x)
        x = self.relu1(x)
        x = self.fc2(x)
        return x


INSTALL = {"blas": "pip install scipy-openblas32", "cublas": "pip install -e . (a C compiler)"}


def make_dispatch_pass(codegen: str, all_patterns: bool):
    """The tutorial's CublasDispatch pass, for `codegen` ("blas" or "cublas")."""

    @rm.transform.module_pass(opt_level=0, name=f"{codegen.capitalize()}Dispatch")
    class LibraryDispatch:
        def transform_module(self, mod, _ctx):
            if not rm.get_global_func(f"relax.ext.{codegen}", True):
                raise RuntimeError(f"{codegen} is not enabled: {INSTALL[codegen]}")
            if all_patterns:
                patterns = relax.backend.get_patterns_with_prefix(codegen)
            else:
                patterns = [relax.backend.get_pattern(f"{codegen}.matmul_transposed_bias_relu")]
            mod = relax.transform.FuseOpsByPattern(patterns, annotate_codegen=True)(mod)
            mod = relax.transform.RunCodegen()(mod)
            return mod

    return LibraryDispatch()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--all-patterns", action="store_true", help="dispatch every pattern of the codegen"
    )
    parser.add_argument("--export", default="", help="also write the compiled model to this .so")
    parser.add_argument(
        "--target",
        default="llvm",
        choices=["llvm", "cuda"],
        help="llvm: the CPU, with blas; cuda: an NVIDIA GPU, with cublas (cuBLASLt)",
    )
    args = parser.parse_args()
    codegen = "cublas" if args.target == "cuda" else "blas"

    mod, param_spec = MLPModel().export_tvm(
        spec={"forward": {"x": nn.spec.Tensor((1, 784), "float32")}}
    )
    mod.show()

    mod = make_dispatch_pass(codegen, args.all_patterns)(mod)
    mod.show()  # fc1 + relu is now a call_dps_packed of the library's kernel

    target = rm.target.Target(args.target)
    with target:
        mod = rm.ir.transform.Sequential([relax.get_pipeline("zero")])(mod)
    ex = relax.build(mod, target=target)
    path = args.export or os.path.join(tempfile.mkdtemp(), f"mlp_{codegen}.so")
    if args.target == "cuda":
        problem = rm.runtime.cublas.runtime_problem()
        if problem:
            ex.export_library(path)
            raise SystemExit(
                f"built for cuda and exported to {path}, but running it needs an NVIDIA GPU "
                f"with cuBLASLt: {problem}"
            )
    dev = rm.cuda(0) if args.target == "cuda" else rm.cpu()
    vm = relax.VirtualMachine(ex, dev)

    rng = np.random.default_rng(0)
    data = rng.random((1, 784), dtype=np.float32)
    params = [(rng.random(p.shape, dtype=np.float32) - 0.5) / 16 for _, p in param_spec]
    out = vm["forward"](rm.nd.array(data, dev), *[rm.nd.array(p, dev) for p in params]).numpy()
    w1, b1, w2, b2 = params
    ref = np.maximum(data @ w1.T + b1, 0) @ w2.T + b2
    np.set_printoptions(precision=4, suppress=True)
    print("relaxmlir:", out[0])
    print("numpy:    ", ref[0])
    print("max abs difference:", float(np.abs(out - ref).max()))
    print("native kernels bound:", sorted(f.symbol for f in ex.native_bindings.values()))

    ex.export_library(path)
    loaded = relax.VirtualMachine(rm.runtime.load_module(path), dev)
    again = loaded["forward"](*[rm.nd.array(a, dev) for a in [data, *params]]).numpy()
    print(
        f"exported to {path}; loaded module max abs difference:", float(np.abs(again - ref).max())
    )


if __name__ == "__main__":
    main()
