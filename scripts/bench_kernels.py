#!/usr/bin/env python
"""Kernel-level benchmark of relax-schedule-cpu against numpy, at 1 thread and all cores.

    python scripts/bench_kernels.py                 # 1 and all threads, default workloads
    python scripts/bench_kernels.py --threads 1 --repeat 5 --json out.json

Each thread count runs in its own subprocess with OMP/OPENBLAS/MKL_NUM_THREADS and
RELAXMLIR_NUM_THREADS set, so numpy and the compiled kernel use the same number of threads.
The parallel runtime is OpenMP when lowering.schedule.runtime finds one (e.g.
RELAXMLIR_OPENMP_LIB=/path/libiomp5.so), else the async runtime.
A workload is a TE-style PrimFunc (fill + linalg.generic) compiled through the CPU pipeline
(`lowering.schedule.testing.Kernel`); ours and numpy's run interleaved in rounds and the
medians are reported with GFLOP/s. numpy computes into a preallocated output (`out=`).
The machine may be shared: the busy share of the other CPUs during the run is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# name, (m, n, k), transposed B, prepacked B
WORKLOADS = [
    ("matmul 1024^3", (1024, 1024, 1024), False, False),
    ("matmul 256^3", (256, 256, 256), False, False),
    ("GEMV 1x784x128", (1, 128, 784), False, False),
    ("dense 1x784x128", (1, 128, 784), True, False),
    ("dense 1x784x128 prepacked", (1, 128, 784), True, True),
    ("dense 256x784x128 prepacked", (256, 128, 784), True, True),
]


def _cpu_busy() -> list[int]:
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    values = [int(v) for v in fields]
    return [sum(values) - values[3] - values[4], sum(values)]


def worker(threads: int, repeat: int, names: list[str]) -> list[dict]:
    import numpy as np
    from mlir import ir

    from lowering.schedule import pack_weight, use_prepacked_weight
    from lowering.schedule.runtime import PARALLEL_RUNTIME
    from lowering.schedule.testing import Kernel, matmul_text, median_seconds

    rng = np.random.default_rng(0)
    rows = []
    for name, (m, n, k), transposed, prepacked in WORKLOADS:
        if names and not any(sel in name for sel in names):
            continue
        text = matmul_text(m, n, k, transposed_b=transposed)
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((n, k) if transposed else (k, n), dtype=np.float32)
        bt = b.T if transposed else b
        arg_b = b
        if prepacked:
            arg_b, layout = pack_weight(b, transposed=transposed)
            with ir.Context():
                module = ir.Module.parse(text)
                use_prepacked_weight(module.body.operations[0].operation, 1, layout)
                text = str(module)
        kernel = Kernel.build(text, "mm", schedule=f"threads={threads}")
        c, c_np = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)
        kernel.bind(a, arg_b, c)
        kernel.run()
        np.matmul(a, bt, out=c_np)
        err = float(np.max(np.abs(c - c_np)))
        ours, theirs = [], []
        busy0 = _cpu_busy()
        for _ in range(repeat):  # interleave so both see the same machine state
            ours.append(median_seconds(kernel.run, min_time=0.2))
            time.sleep(0.3)  # idle gap: OpenMP and OpenBLAS workers spin a while after a call
            theirs.append(
                median_seconds(lambda a=a, bt=bt, c=c_np: np.matmul(a, bt, out=c), min_time=0.2)
            )
            time.sleep(0.3)
        busy1 = _cpu_busy()
        flops = 2.0 * m * n * k
        t_ours, t_np = float(np.median(ours)), float(np.median(theirs))
        rows.append(
            {
                "workload": name,
                "threads": threads,
                "ours_us": t_ours * 1e6,
                "numpy_us": t_np * 1e6,
                "ours_gflops": flops / t_ours / 1e9,
                "numpy_gflops": flops / t_np / 1e9,
                "ratio": t_np / t_ours,
                "compile_s": kernel.compile_s,
                "max_abs_err": err,
                "cpu_busy": (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]),
                "runtime": PARALLEL_RUNTIME,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--threads", type=int, nargs="*", help="thread counts (default: 1 and all cores)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds per workload")
    parser.add_argument("--only", nargs="*", default=[], help="substrings of workload names to run")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.repeat, args.only)))
        return
    cores = len(os.sched_getaffinity(0))
    counts = args.threads or sorted({1, cores})
    rows = []
    for threads in counts:
        env = dict(os.environ)
        for var in (
            "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "MKL_NUM_THREADS",
            "RELAXMLIR_NUM_THREADS",
        ):
            env[var] = str(threads)
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            str(threads),
            "--repeat",
            str(args.repeat),
            "--only",
            *args.only,
        ]
        start = time.time()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
        print(f"# {threads} thread(s): {time.time() - start:.0f} s", file=sys.stderr)
    print(f"# parallel runtime: {rows[0]['runtime'] if rows else '?'}")
    print(
        f"{'workload':30s} {'thr':>3s} {'ours us':>10s} {'numpy us':>10s} {'ours GF/s':>9s} {'np GF/s':>8s} "
        f"{'ratio':>6s} {'compile s':>9s} {'busy':>5s}"
    )
    for r in rows:
        print(
            f"{r['workload']:30s} {r['threads']:3d} {r['ours_us']:10.1f} {r['numpy_us']:10.1f} "
            f"{r['ours_gflops']:9.1f} {r['numpy_gflops']:8.1f} {r['ratio']:6.2f} {r['compile_s']:9.3f} "
            f"{r['cpu_busy']:5.0%}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
