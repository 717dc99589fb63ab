#!/usr/bin/env python
"""The model tests (tests/python/test_models.py's MODELS, the 2-layer transformers of
test_models_transformers.py) and kernel edge cases on a GPU, in two steps on two machines.

    python scripts/gpu_models_check.py export --out gpu_models     # here: MLIR builds the models
    python3 scripts/gpu_models_check.py run --libs gpu_models      # on the GPU machine (no MLIR)
    python scripts/gpu_models_check.py interpret [names]           # here: kernels interpreted

`export` imports each model (and the kernel cases below) through `from_exported_program` (weights bound as constants: the
models are small), builds it for `cuda -arch=sm_90`, and writes `<name>.so` and `<name>.npz`
(the inputs and torch eager's outputs on the CPU). `run` needs numpy and relaxmlir's runtime only:
it loads each library, runs it on cuda(0) and compares with the stored outputs (the tolerances
of the CPU model tests); one line per model, exit status 1 if any differs. Each model runs in its
own child process, so a kernel that faults is reported against its model and the others still run.
`run --cuda-graph` calls each three times through CUDA graphs (as usual, captured, replayed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RTOL = ATOL = 1e-3  # test_models.py's tolerances (f32 throughout)
# Cases too large to interpret in minutes (~10^8 multiply-adds): `interpret` runs them only
# when named.
TOO_LARGE_TO_INTERPRET = {
    "k_linear_large",
    "k_matmul_f16_mma_large",
    "k_matmul_f16_wgmma",
    "k_matmul_f16_wgmma_bias_relu",
}
# Cases built for another target than --target's: Hopper's wgmma kernels (sm_90a)
TARGETS = {
    "k_matmul_f16_wgmma": "cuda -arch=sm_90a",
    "k_matmul_f16_wgmma_bias_relu": "cuda -arch=sm_90a",
}
HALF_TOL = 1e-2  # float16 outputs: their own rounding (2^-11) plus a different summation order


def kernel_cases() -> dict:
    """Shapes that exercise the GPU kernel templates' edges: tiles cut by the problem's edges,
    batched and transposed operands, strided and pointwise convolutions as implicit GEMMs."""
    import torch
    from torch import nn

    class Bmm(nn.Module):
        def forward(self, a, b):
            return torch.bmm(a, b)

    class MatmulT(nn.Module):
        def forward(self, a, b):
            return torch.relu(a @ b.transpose(-1, -2))

    def seq(*layers):
        return lambda: nn.Sequential(*layers)

    class MatmulBiasRelu(nn.Module):
        def forward(self, a, b, bias):
            return torch.relu(a @ b + bias)

    class Softmax(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)

    class RmsNorm(nn.Module):
        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    class RowSum(nn.Module):
        def forward(self, x):
            return x.sum(-1) + x.amax(-1)

    class Transpose(nn.Module):
        def forward(self, x):
            return x.permute(0, 2, 1).contiguous() * 2.0

    return {
        "k_transpose_odd": (Transpose, lambda: [torch.randn(3, 50, 70)]),
        "k_softmax_odd": (Softmax, lambda: [torch.randn(3, 7, 300)]),
        "k_layer_norm_odd": (lambda: nn.LayerNorm(77), lambda: [torch.randn(5, 77)]),
        "k_rms_norm": (RmsNorm, lambda: [torch.randn(2, 9, 1000)]),
        "k_row_sum_max": (RowSum, lambda: [torch.randn(6, 513)]),
        "k_linear_gelu_odd": (seq(nn.Linear(30, 40), nn.GELU()), lambda: [torch.randn(50, 30)]),
        "k_bmm_odd": (Bmm, lambda: [torch.randn(3, 37, 45), torch.randn(3, 45, 29)]),
        "k_matmul_transposed": (MatmulT, lambda: [torch.randn(2, 70, 64), torch.randn(2, 90, 64)]),
        "k_linear_large": (seq(nn.Linear(512, 384)), lambda: [torch.randn(2, 300, 512)]),
        "k_conv_s2": (
            seq(nn.Conv2d(5, 12, 3, stride=2, padding=1), nn.ReLU()),
            lambda: [torch.randn(2, 5, 17, 17)],
        ),
        "k_conv_1x1": (seq(nn.Conv2d(16, 32, 1)), lambda: [torch.randn(2, 16, 9, 9)]),
        # float16 on tensor cores (mma.sync): ragged tiles, batched, and split-K
        "k_bmm_f16_mma": (
            Bmm,
            lambda: [torch.randn(3, 70, 45).half(), torch.randn(3, 45, 90).half()],
        ),
        "k_matmul_f16_mma_large": (
            Bmm,
            lambda: [torch.randn(1, 1000, 512).half(), torch.randn(1, 512, 1200).half()],
        ),
        "k_matmul_f16_mma_split_k": (
            Bmm,
            lambda: [torch.randn(1, 24, 2048).half(), torch.randn(1, 2048, 40).half()],
        ),
        # float16 on Hopper's wgmma (TARGETS): 17 x 17 blocks of 128x128, every edge ragged
        # (2160, 2120, and K = 200 = 3 tiles of 64 + 8), then a bias + ReLU epilogue
        "k_matmul_f16_wgmma": (
            Bmm,
            lambda: [torch.randn(1, 2160, 200).half(), torch.randn(1, 200, 2120).half()],
        ),
        "k_matmul_f16_wgmma_bias_relu": (
            MatmulBiasRelu,
            lambda: [
                torch.randn(2176, 256).half(),
                torch.randn(256, 2304).half(),
                torch.randn(2304).half(),
            ],
        ),
    }


def transformer_cases() -> dict:
    """The 2-layer transformers models of test_models_transformers.py (GPT-2, BERT, ViT, T5
    encoder, Llama with grouped-query attention), where transformers is installed."""
    try:
        from test_models_transformers import MODELS as TRANSFORMERS
        from test_models_transformers import LastHidden, example_input
    except ImportError:
        return {}

    def case(make, key):
        return (lambda: LastHidden(make(), key), lambda: [example_input(key)])

    return {f"t_{name}": case(make, key) for name, (make, key) in TRANSFORMERS.items()}


def all_cases() -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from test_models import MODELS

    return {**MODELS, **kernel_cases(), **transformer_cases()}


def export(out: Path, target: str) -> None:
    import torch

    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program

    out.mkdir(parents=True, exist_ok=True)
    for name, (make, inputs) in all_cases().items():
        torch.manual_seed(0)
        model, args = make().eval(), inputs()
        mod = from_exported_program(torch.export.export(model, tuple(args)))
        built_for = TARGETS.get(name, target)
        relax.build(mod, target=built_for).export_library(str(out / f"{name}.so"))
        with torch.no_grad():
            want = model(*args)
        want = want if isinstance(want, tuple) else (want,)
        arrays = {f"in{i}": a.numpy() for i, a in enumerate(args)}
        arrays.update({f"out{i}": w.numpy() for i, w in enumerate(want)})
        np.savez_compressed(out / f"{name}.npz", **arrays)  # (what travels is capped)
        print(f"{name}: built for {built_for}", flush=True)


def run_one(libs: Path, name: str, cuda_graph: bool = False) -> str:
    """Run one model on cuda(0); returns '' when it matches, else what differs. With
    `cuda_graph`, three calls (as usual, captured and replayed, replayed), each compared."""
    import relaxmlir as rm
    from relaxmlir import runtime

    data = np.load(libs / f"{name}.npz")
    ins = [
        data[k] for k in sorted((k for k in data if k.startswith("in")), key=lambda k: int(k[2:]))
    ]
    outs = [
        data[k] for k in sorted((k for k in data if k.startswith("out")), key=lambda k: int(k[3:]))
    ]
    dev = rm.cuda(0)
    lib = runtime.load_module(str(libs / f"{name}.so"))
    vm = runtime.VirtualMachine(lib, dev, cuda_graph=cuda_graph)
    args = [rm.nd.array(x, dev) for x in ins]
    problems = []
    for call in range(3 if cuda_graph else 1):
        got = vm["main"](*args)
        got = got if isinstance(got, (tuple, list)) else (got,)
        for i, g in enumerate(got):
            assert g.device == dev, f"output {i} is on {g.device}"
        problem = compare([g.numpy() for g in got], outs)
        if problem:
            problems.append(f"call {call + 1}: {problem}" if cuda_graph else problem)
    return "; ".join(problems)


def compare(got: list, want: list) -> str:
    """'' when every output matches its expected value, else what differs."""
    problems = []
    for i, (g, w) in enumerate(zip(got, want)):
        if w.dtype == np.float16:  # relative to the output's scale
            rtol = HALF_TOL
            atol = HALF_TOL * max(1.0, float(np.abs(w.astype(np.float32)).max(initial=0)))
        else:
            rtol, atol = RTOL, ATOL
        same = g.shape == w.shape
        if not same or not np.allclose(
            g.astype(np.float32), w.astype(np.float32), rtol=rtol, atol=atol
        ):
            err = np.max(np.abs(g - w)) if same else f"shape {g.shape} vs {w.shape}"
            problems.append(f"output {i}: max |err| {err}")
    return "; ".join(problems)


def interpret(target: str, only: list[str]) -> int:
    """The same networks and cases, their kernels interpreted on this CPU (no GPU): a check
    of the GPU code before a device session."""
    import torch

    from relaxmlir.frontend import from_exported_program
    from relaxmlir.tools.gpu_interpret import interpret as run_interpreted
    from relaxmlir.tools.gpu_interpret import outputs_like

    failed = 0
    cases = all_cases()
    names = [n for n in cases if n in only or (not only and n not in TOO_LARGE_TO_INTERPRET)]
    for name in names:
        make, inputs = cases[name]
        torch.manual_seed(0)
        model, args = make().eval(), inputs()
        mod = from_exported_program(torch.export.export(model, tuple(args)))
        with torch.no_grad():
            want = model(*args)
        want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
        got = outputs_like(want)
        try:
            run_interpreted(mod, *[a.numpy() for a in args], *got, target=target)
            problem = compare(got, want)
        except Exception as exc:  # noqa: BLE001  (reported against its case; the rest still run)
            problem = f"{type(exc).__name__}: {str(exc)[:300]}"
        failed += bool(problem)
        print(f"{name}: {'FAILED ' + problem if problem else 'ok'}", flush=True)
    print(f"{len(names) - failed} of {len(names)} models match torch (interpreted kernels)")
    return 1 if failed else 0


def run(libs: Path, cuda_graph: bool = False) -> int:
    names = sorted(p.stem for p in libs.glob("*.so"))
    failed = 0
    for name in names:
        child = subprocess.run(
            [sys.executable, __file__, "one", "--libs", str(libs), name]
            + (["--cuda-graph"] if cuda_graph else []),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if child.returncode == 0:
            print(f"{name}: ok", flush=True)
        else:
            failed += 1
            tail = (child.stdout + child.stderr).strip().splitlines()[-3:]
            print(f"{name}: FAILED ({child.returncode}) " + " | ".join(tail), flush=True)
    print(f"{len(names) - failed} of {len(names)} models match torch")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="build the libraries (needs MLIR)")
    ex.add_argument("--out", type=Path, default=ROOT / "gpu_models")
    ex.add_argument("--target", default="cuda -arch=sm_90")
    rn = sub.add_parser("run", help="run them on cuda(0) (needs a GPU, not MLIR)")
    rn.add_argument("--libs", type=Path, default=ROOT / "gpu_models")
    rn.add_argument(
        "--cuda-graph", action="store_true", help="VMs with cuda_graph=True, three calls each"
    )
    it = sub.add_parser("interpret", help="interpret the kernels on this CPU (needs MLIR, no GPU)")
    it.add_argument("--target", default="cuda -arch=sm_90")
    it.add_argument("names", nargs="*", help="only these models / cases")
    one = sub.add_parser("one", help="one model (the child process of `run`)")
    one.add_argument("--libs", type=Path, required=True)
    one.add_argument("--cuda-graph", action="store_true")
    one.add_argument("name")
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.out, args.target)
        return 0
    if args.command == "run":
        return run(args.libs, args.cuda_graph)
    if args.command == "interpret":
        return interpret(args.target, args.names)
    problem = run_one(args.libs, args.name, args.cuda_graph)
    if problem:
        print(problem)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
