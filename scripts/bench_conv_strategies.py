#!/usr/bin/env python
"""conv2d implementations of the strategy table side by side, on ResNet-18's convolutions.

    python scripts/bench_conv_strategies.py                   # all shapes, all implementations
    python scripts/bench_conv_strategies.py --impl conv2d_nchw.direct conv2d_nchw.im2col

Each row builds one `relax.nn.conv2d` with a constant weight (batch 1, float32), forcing each
implementation through the PassContext config `relax.strategy.force` (NCHW implementations with
the channel-blocked layout off, RELAXMLIR_ALTER_LAYOUT=0), checks it against torch and reports
the median time of a call of the compiled function ("default" is relax.build's own choice,
channel-blocked layout included). The machine may be shared: compare columns of one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# name, (C, H, W), (O, KH, KW), stride, padding
SHAPES = [
    ("stem 7x7/2", (3, 224, 224), (64, 7, 7), 2, 3),
    ("3x3 64", (64, 56, 56), (64, 3, 3), 1, 1),
    ("3x3/2 64->128", (64, 56, 56), (128, 3, 3), 2, 1),
    ("3x3 128", (128, 28, 28), (128, 3, 3), 1, 1),
    ("3x3 256", (256, 14, 14), (256, 3, 3), 1, 1),
    ("3x3 512", (512, 7, 7), (512, 3, 3), 1, 1),
    ("1x1/2 256->512", (256, 14, 14), (512, 1, 1), 2, 0),
]
IMPLS = ["default", "conv2d_nchw.direct", "conv2d_nchw.im2col", "conv2d_nchw.dnnl"]


def _module(shape, weight, stride, padding):
    from relaxmlir import relax

    x = relax.Var("x", relax.TensorStructInfo((1, *shape), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = relax.op.nn.conv2d(
                x, relax.const(weight), strides=stride, padding=padding
            )
            gv = bb.emit_output(bb.emit(conv))
        bb.emit_func_output(gv)
    return bb.get()


def _time(fn, repeat: int) -> float:
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < 0.5:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", nargs="+", default=IMPLS)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()

    import numpy as np
    import torch

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.relax.op import strategy

    rng = np.random.default_rng(0)
    print(f"{'conv':18}" + "".join(f"{name:>22}" for name in args.impl) + "   (ms per call)")
    for label, shape, (o, kh, kw), stride, padding in SHAPES:
        x = rng.standard_normal((1, *shape), dtype=np.float32)
        w = rng.standard_normal((o, shape[0], kh, kw), dtype=np.float32) / (shape[0] * kh * kw)
        want = torch.nn.functional.conv2d(
            torch.from_numpy(x), torch.from_numpy(w), stride=stride, padding=padding
        ).numpy()
        row = f"{label:18}"
        for impl in args.impl:
            config = {} if impl == "default" else {strategy.FORCE_CONFIG: {"relax.nn.conv2d": impl}}
            os.environ["RELAXMLIR_ALTER_LAYOUT"] = "1" if impl == "default" else "0"
            try:
                with rm.transform.PassContext(config=config):
                    ex = relax.build(_module(shape, w, stride, padding), "llvm")
            except ValueError as exc:  # e.g. dnnl not installed
                row += f"{'n/a':>22}"
                print(f"  {impl}: {exc}", file=sys.stderr)
                continue
            f = relax.VirtualMachine(ex, rm.cpu())["main"]
            np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-3, atol=1e-3)
            row += f"{_time(lambda: f(x), args.repeat):>22.3f}"
        print(row, flush=True)


if __name__ == "__main__":
    main()
