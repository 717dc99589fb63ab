#!/usr/bin/env python
"""Benchmark relaxmlir against numpy, torch eager and torch.compile, side by side in one run.

    python scripts/bench.py                  # all workloads, 1 thread and all cores -> benchmarks/RESULTS.md
    python scripts/bench.py --only W1,W3 --threads 1 --repeat 20

Each thread count runs in a child process whose numpy/BLAS, torch and relaxmlir thread counts are
set to the same value before any import. Every system gets the same inputs; results are checked
against numpy (or torch eager where numpy has no such op) before timing. Times are medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEAK_GFLOPS_PER_CORE = 2.8 * 2 * 16 * 2  # 2.8 GHz x 2 FMA units x 16 f32 lanes x 2 flops


def _median_ms(fn, repeat: int, min_time: float = 0.2) -> float:
    fn()  # warm up
    times = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 10 * repeat:
            break
    return statistics.median(times) * 1e3


# --------------------------------------------------------------------------------------------
# Workloads: each returns (torch_model_or_fn, example inputs, flops, numpy_fn or None)
def _mlp(batch):
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
    w0, b0 = model[0].weight.detach().numpy(), model[0].bias.detach().numpy()
    w1, b1 = model[2].weight.detach().numpy(), model[2].bias.detach().numpy()
    w0t, w1t = np.ascontiguousarray(w0.T), np.ascontiguousarray(w1.T)

    def numpy_fn(x):
        return np.maximum(x @ w0t + b0, 0) @ w1t + b1

    x = np.random.default_rng(0).standard_normal((batch, 784), dtype=np.float32)
    return model, [x], 2 * batch * (784 * 128 + 128 * 10), numpy_fn


def _matmul(n):
    import numpy as np
    import torch

    class MatMul(torch.nn.Module):
        def forward(self, a, b):
            return torch.matmul(a, b)

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    return MatMul().eval(), [a, b], 2 * n**3, lambda a, b: a @ b


def _lenet(batch):
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(400, 120), torch.nn.ReLU(),
        torch.nn.Linear(120, 84), torch.nn.ReLU(), torch.nn.Linear(84, 10),
    ).eval()
    x = np.random.default_rng(0).standard_normal((batch, 1, 28, 28), dtype=np.float32)
    flops = 2 * batch * (6 * 28 * 28 * 25 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 84 * 10)
    return model, [x], flops, None


def _transformer(seq, d):
    import numpy as np
    import torch

    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=4 * d, batch_first=True, dropout=0.0).eval()
    x = np.random.default_rng(0).standard_normal((1, seq, d), dtype=np.float32)
    flops = 2 * seq * (4 * d * d + 2 * d * 4 * d) + 4 * seq * seq * d
    return model, [x], flops, None


WORKLOADS = {
    "W1": ("MLP 784-128-10, batch 1 (latency)", lambda: _mlp(1)),
    "W2": ("MLP 784-128-10, batch 256", lambda: _mlp(256)),
    "W3": ("matmul 1024^3 f32", lambda: _matmul(1024)),
    "W4": ("matmul 256^3 f32", lambda: _matmul(256)),
    "W5": ("LeNet-style CNN, batch 32", lambda: _lenet(32)),
    "W6": ("TransformerEncoderLayer, seq 128, d 256", lambda: _transformer(128, 256)),
}


def _compile_relaxmlir(model, inputs, threads: int):
    import torch

    from relaxmlir import relax
    from relaxmlir.frontend import from_exported_program

    import relaxmlir as rm

    ep = torch.export.export(model, tuple(torch.from_numpy(x) for x in inputs))
    t0 = time.perf_counter()
    mod = from_exported_program(ep)
    ex = relax.build(mod, target=rm.target.Target({"kind": "llvm", "num-cores": threads}))
    compile_s = time.perf_counter() - t0
    vm = relax.VirtualMachine(ex, rm.cpu())
    return vm["main"], compile_s


def run_child(names: list[str], threads: int, repeat: int, torch_compile: bool) -> list[dict]:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    rows = []
    for name in names:
        title, make = WORKLOADS[name]
        model, inputs, flops, numpy_fn = make()
        tin = [torch.from_numpy(x) for x in inputs]
        row = {"id": name, "title": title, "threads": threads, "flops": flops}
        with torch.no_grad():
            reference = model(*tin).numpy()
            row["torch_ms"] = _median_ms(lambda: model(*tin), repeat)
            if numpy_fn is not None:
                np.testing.assert_allclose(numpy_fn(*inputs), reference, rtol=1e-3, atol=1e-3)
                row["numpy_ms"] = _median_ms(lambda: numpy_fn(*inputs), repeat)
        try:
            fn, compile_s = _compile_relaxmlir(model, inputs, threads)
            out = fn(*inputs).numpy()
            np.testing.assert_allclose(out, reference, rtol=1e-3, atol=1e-3)
            row["relaxmlir_ms"] = _median_ms(lambda: fn(*inputs), repeat)
            row["compile_s"] = compile_s
        except Exception as exc:
            row["relaxmlir_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        # torch.compile last: its worker threads and caches must not disturb the other timings
        if torch_compile:
            try:
                with torch.no_grad():
                    compiled = torch.compile(model)
                    compiled(*tin)
                    row["torch_compile_ms"] = _median_ms(lambda: compiled(*tin), repeat)
            except Exception as exc:  # reported, not fatal: torch.compile needs a toolchain
                row["torch_compile_error"] = f"{type(exc).__name__}"
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _fmt(v, digits=3):
    return "n/a" if v is None else f"{v:.{digits}f}"


def render(rows: list[dict], command: str) -> str:
    lines = [
        "# relaxmlir benchmarks",
        "",
        f"Command: `{command}` (medians; each thread count in its own process, numpy/BLAS, torch and",
        "relaxmlir set to the same number of threads; outputs checked against numpy or torch eager).",
        f"Machine: {_cpu_model()}, {os.cpu_count()} cores (the brief's reference peak: "
        f"{PEAK_GFLOPS_PER_CORE:.0f} f32 GFLOP/s per core at 2.8 GHz).",
        "",
        "| workload | threads | numpy ms | torch ms | torch.compile ms | relaxmlir ms | relaxmlir GFLOP/s | x numpy | x torch | compile s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rm_ms = r.get("relaxmlir_ms")
        gflops = r["flops"] / (rm_ms * 1e6) if rm_ms else None
        vs_np = r["numpy_ms"] / rm_ms if rm_ms and r.get("numpy_ms") else None
        vs_t = r["torch_ms"] / rm_ms if rm_ms else None
        tc = r.get("torch_compile_ms")
        tc_text = _fmt(tc) if tc else r.get("torch_compile_error", "n/a")
        rm_text = _fmt(rm_ms) if rm_ms else f"error: {r.get('relaxmlir_error', '?')}"
        lines.append(
            f"| {r['id']} {r['title']} | {r['threads']} | {_fmt(r.get('numpy_ms'))} | {_fmt(r['torch_ms'])} | "
            f"{tc_text} | {rm_text} | {_fmt(gflops, 1)} | {_fmt(vs_np, 2)} | {_fmt(vs_t, 2)} | {_fmt(r.get('compile_s'), 2)} |"
        )
    lines += ["", "`x numpy` / `x torch`: peer median / relaxmlir median (above 1 means relaxmlir is faster).", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workload ids")
    parser.add_argument("--threads", default=f"1,{os.cpu_count()}", help="comma-separated thread counts")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    if args.child is not None:
        rows = run_child(names, args.child, args.repeat, not args.no_torch_compile)
        print(json.dumps(rows))
        return 0
    rows = []
    for threads in sorted({int(t) for t in args.threads.split(",")}):
        env = dict(os.environ)
        for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[key] = str(threads)
        cmd = [sys.executable, __file__, "--child", str(threads), "--only", ",".join(names), "--repeat", str(args.repeat)]
        if args.no_torch_compile:
            cmd.append("--no-torch-compile")
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        if proc.returncode != 0:
            print(f"benchmark child for {threads} thread(s) failed (rc={proc.returncode})", file=sys.stderr)
            return 1
        rows += json.loads(proc.stdout.strip().splitlines()[-1])
    command = "python scripts/bench.py " + " ".join(a for a in (argv or sys.argv[1:]))
    text = render(rows, command.strip())
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
