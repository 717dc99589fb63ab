#!/usr/bin/env python
"""Kernel-level benchmark of relax-schedule-cpu against numpy, at 1 thread and all cores.

    python scripts/bench_kernels.py                 # 1 and all threads, default workloads
    python scripts/bench_kernels.py --threads 1 --repeat 5 --json out.json
    python scripts/bench_kernels.py --model W6      # per-kernel profile of a bench.py workload
    python scripts/bench_kernels.py --isa avx2 --model W7a   # as bench.py --isa avx2 builds it

Each thread count runs in its own subprocess with OMP/OPENBLAS/MKL_NUM_THREADS set and the
kernel scheduled for that many threads, so numpy and the compiled kernel use the same number.
The parallel runtime is OpenMP when relaxmlir.runtime.libraries finds one (e.g.
RELAXMLIR_OPENMP_LIB=/path/libiomp5.so), else the async runtime.
A workload is a TE-style PrimFunc (fill + linalg.generic) compiled through the CPU pipeline
(`lowering.schedule.testing.Kernel`); ours and numpy's run interleaved in rounds and the
medians are reported with GFLOP/s. numpy computes into a preallocated output (`out=`).
The machine may be shared: the busy share of the other CPUs during the run is printed.

`--model W<n>` profiles a workload of scripts/bench.py instead: the module after LegalizeOps,
FuseOps, FuseTIR and the packing of constant weights (as relax.build runs them), each PrimFunc
compiled standalone (scheduled, and with `--naive` also unscheduled) and timed on random inputs
(best of three medians), with its call count and the schedule rules it got; the rows sum to the
kernel time of one call (no graph overhead).
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
sys.path.insert(0, str(ROOT / "scripts"))
from bench import ISA_ENV, isa_target_spec  # noqa: E402  (scripts/bench.py: one table of forced ISAs)

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


def _target():
    """The host, or the host with `--isa`'s wider features off (bench.py), for every build here."""
    from relaxmlir.target import Target

    return Target(isa_target_spec(os.environ.get("RELAXMLIR_BENCH_ISA", "native")))


def worker(threads: int, repeat: int, names: list[str]) -> list[dict]:
    import numpy as np
    from mlir import ir

    from lowering.schedule import pack_weight, use_prepacked_weight
    from lowering.schedule.matmul import micro_tile
    from relaxmlir.runtime.libraries import parallel_runtime
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
            arg_b, layout = pack_weight(b, transposed=transposed, nr=micro_tile(_target()).nr)
            with ir.Context():
                module = ir.Module.parse(text)
                use_prepacked_weight(module.body.operations[0].operation, 1, layout)
                text = str(module)
        kernel = Kernel.build(text, "mm", schedule=f"threads={threads}", target=_target())
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
                "runtime": parallel_runtime(),
            }
        )
    return rows


def model_worker(threads: int, name: str, naive: bool) -> list[dict]:
    """Per-PrimFunc profile of bench.py workload `name` (see the module docstring)."""
    import re
    import warnings

    import numpy as np
    import torch
    from mlir import ir

    import bench

    from lowering.pipelines import llvm_stages
    from lowering.registry import run_pipeline
    from lowering.schedule.common import SCHEDULE_ATTR
    from lowering.schedule.testing import Kernel, median_seconds
    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program
    from relaxmlir.scope import scope
    from relaxmlir.target import Target

    model, inputs, _, _ = bench.WORKLOADS[name][1]()
    ep = torch.export.export(model, tuple(torch.from_numpy(x) for x in inputs))
    target = _target()
    with target:  # as in relax.build: target-dependent graph passes (conv layouts) run
        mod = relax.get_pipeline("zero")(from_exported_program(ep)).clone()
    # The stages of relax.build up to the schedule: constant weights reach their kernels packed.
    stages = dict(llvm_stages(target))
    with scope():
        run_pipeline(
            mod.module, "builtin.module(" + ",".join(stages["graph"] + stages["layout"]) + ")"
        )
    calls: dict[str, int] = {}
    for m in re.finditer(r"callee = @(\w+)", str(mod["main"].op)):
        calls[m.group(1)] = calls.get(m.group(1), 0) + 1
    dtypes = {"f32": np.float32, "i64": np.int64, "i32": np.int32, "i8": np.int8, "i1": np.bool_}
    rng = np.random.default_rng(0)
    rows = []
    for fname, f in mod.functions.items():
        if not f.is_prim_func or fname not in calls:
            continue
        ftype = ir.FunctionType(ir.TypeAttr(f.op.attributes["function_type"]).value)
        args = []
        for t in ftype.inputs:
            t = ir.RankedTensorType(t)
            dt = dtypes[str(t.element_type)]
            arr = rng.standard_normal(t.shape) * 0.1 if dt == np.float32 else np.zeros(t.shape)
            args.append(arr.astype(dt))
        row = {"kernel": fname, "calls": calls[fname], "threads": threads}
        variants = [("us", f"threads={threads}")] + (
            [("naive_us", "schedule=off")] if naive else []
        )
        for key, sched in variants:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    kernel = Kernel.build(str(f.op), fname, schedule=sched, target=target)
            except RuntimeError as exc:  # e.g. a pure reshape: a view in the graph, no kernel
                row[key], row["rules"] = 0.0, [f"not built standalone: {str(exc)[:60]}"]
                continue
            kernel.bind(*args)
            row[key] = min(median_seconds(kernel.run, min_time=0.1) for _ in range(3)) * 1e6
            for op in kernel.module.body.operations:
                if SCHEDULE_ATTR in op.attributes and key == "us":
                    row["rules"] = [ir.StringAttr(a).value for a in op.attributes[SCHEDULE_ATTR]]
        rows.append(row)
    return rows


def print_model(rows: list[dict]) -> None:
    for threads in sorted({r["threads"] for r in rows}):
        sel = [r for r in rows if r["threads"] == threads]
        total = sum(r["us"] * r["calls"] for r in sel)
        print(f"# {threads} thread(s): {total:.1f} us of kernels per call")
        print(f"{'kernel':64s} {'calls':>5s} {'us':>9s} {'share':>6s} {'naive us':>9s}  rules")
        for r in sorted(sel, key=lambda r: -r["us"] * r["calls"]):
            naive = f"{r['naive_us']:9.1f}" if "naive_us" in r else f"{'':9s}"
            share = r["us"] * r["calls"] / total
            rules = ", ".join(dict.fromkeys(r.get("rules", [])))
            print(
                f"{r['kernel'][:64]:64s} {r['calls']:5d} {r['us']:9.1f} {share:6.1%} {naive}  {rules}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--threads", type=int, nargs="*", help="thread counts (default: 1 and all cores)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds per workload")
    parser.add_argument("--only", nargs="*", default=[], help="substrings of workload names to run")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--model", help="profile the kernels of a bench.py workload (W1..W6)")
    parser.add_argument("--naive", action="store_true", help="with --model: also unscheduled")
    parser.add_argument(
        "--isa", choices=["native", *ISA_ENV], default="native",
        help="build for and run every peer on this ISA's code path (as bench.py --isa)",
    )
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.model:
            rows = model_worker(args.worker, args.model, args.naive)
        else:
            rows = worker(args.worker, args.repeat, args.only)
        print(json.dumps(rows))
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
        ):
            env[var] = str(threads)
        env.update(ISA_ENV.get(args.isa, {}))
        env["RELAXMLIR_BENCH_ISA"] = args.isa
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
        if args.model:
            cmd[2:2] = ["--model", args.model] + (["--naive"] if args.naive else [])
        start = time.time()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
        print(f"# {threads} thread(s): {time.time() - start:.0f} s", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.model:
        print_model(rows)
        return
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


if __name__ == "__main__":
    main()
