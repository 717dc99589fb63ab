#!/usr/bin/env python
"""Benchmark the CUDA target against torch CUDA eager, in two steps on two machines.

    python scripts/bench_gpu.py export --out gpu_libs          # here: MLIR builds the libraries
    python scripts/bench_gpu.py run --libs gpu_libs             # on the GPU machine (no MLIR)
    python scripts/bench_gpu.py run --libs gpu_libs --only matmul_f16 --repeat 50

Tuning the workloads' kernels for the GPU, across the two machines (relaxmlir.meta_schedule.trials):

    python scripts/bench_gpu.py trials --out gpu_trials --work-dir gpu_tuning --trials 200
    python -m relaxmlir.runtime.trials gpu_trials gpu_trials/tf32    # on the GPU machine
    python scripts/bench_gpu.py export --out gpu_tuned --tuned gpu_tuning --import gpu_trials

`export` imports each workload's torch model (weights kept as inputs, so a library holds code and
PTX only and BERT-base's 440 MB of weights need not travel), builds it for `cuda -arch=sm_90`
and writes `<name>.so` plus `manifest.json` (parameter order). `run` needs only numpy, torch and
relaxmlir's runtime: it rebuilds each torch model from the same seed, hands its weights to the
library by DLPack (zero copy), checks the outputs against torch, then times both with CUDA events
in the same process (medians) and writes benchmarks/RESULTS_GPU.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# -- workloads: pure torch (the GPU machine has neither torchvision nor transformers) ------------


def _matmul(n: int, dtype: str):
    import torch

    class MatMul(torch.nn.Module):
        def forward(self, a, b):
            return a @ b

    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(n, n, generator=g).to(dt), torch.randn(n, n, generator=g).to(dt)]
    return MatMul().eval(), inputs, 2 * n**3, None


def _mlp(batch: int):
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )
    x = torch.randn(batch, 784, generator=torch.Generator().manual_seed(0))
    return model.eval(), [x], 2 * batch * (784 * 1024 + 1024 * 1024 + 1024 * 10), None


def _bert_base(seq: int = 128, batch: int = 1):
    """BERT-base's encoder in plain torch: token + position + type embeddings, LayerNorm, 12 post-
    norm layers (768 wide, 12 heads, GELU FFN 3072)."""
    import torch
    from torch import nn

    class Bert(nn.Module):
        def __init__(self, vocab=30522, d=768, heads=12, ffn=3072, layers=12, max_len=512):
            super().__init__()
            self.tok, self.pos, self.typ = (
                nn.Embedding(vocab, d),
                nn.Embedding(max_len, d),
                nn.Embedding(2, d),
            )
            self.norm = nn.LayerNorm(d, eps=1e-12)
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(
                    d,
                    heads,
                    ffn,
                    dropout=0.0,
                    activation="gelu",
                    batch_first=True,
                    layer_norm_eps=1e-12,
                )
                for _ in range(layers)
            )

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.norm(self.tok(ids) + self.pos(pos) + self.typ(torch.zeros_like(ids)))
            for layer in self.layers:
                x = layer(x)
            return x

    torch.manual_seed(0)
    ids = torch.randint(1, 30522, (batch, seq), generator=torch.Generator().manual_seed(0))
    d, ffn = 768, 3072
    flops = 12 * batch * (2 * seq * (4 * d * d + 2 * d * ffn) + 4 * seq * seq * d)
    return Bert().eval(), [ids], flops, None


def _resnet18(batch: int):
    import torch

    sys.path.insert(0, str(ROOT / "scripts"))
    from bench import _resnet18_module  # torchvision's layout, defined in torch only

    torch.manual_seed(0)
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    return _resnet18_module().eval(), [x], batch * 3_628_000_000, None  # 1.814 GMACs per image


def _elementwise(n: int):
    """gelu(x * y + z): reads three tensors, writes one; the figure is bytes, not FLOPs."""
    import torch

    class Fma(torch.nn.Module):
        def forward(self, x, y, z):
            return torch.nn.functional.gelu(x * y + z)

    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(n, generator=g) for _ in range(3)]
    return Fma().eval(), inputs, None, 4 * n * 4


def _rows(kind: str, rows: int, cols: int):
    """softmax / layer_norm over the last axis: one read and one write of the tensor."""
    import torch
    from torch import nn

    class Softmax(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)

    torch.manual_seed(0)
    model = Softmax() if kind == "softmax" else nn.LayerNorm(cols)
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(0))
    return model.eval(), [x], None, 2 * rows * cols * 4


WORKLOADS = {
    "elementwise": ("gelu(x * y + z), 2^24 f32", lambda: _elementwise(1 << 24)),
    "softmax": ("softmax 8192 x 4096 f32, last axis", lambda: _rows("softmax", 8192, 4096)),
    "layer_norm": ("layer_norm 16384 x 768 f32", lambda: _rows("layer_norm", 16384, 768)),
    "matmul_f32": ("matmul 4096^3 f32 (no TF32)", lambda: _matmul(4096, "float32")),
    "matmul_f16": ("matmul 4096^3 f16", lambda: _matmul(4096, "float16")),
    "matmul_f16_wgmma": ("matmul 4096^3 f16, sm_90a (wgmma)", lambda: _matmul(4096, "float16")),
    "matmul_tf32": ("matmul 4096^3 f32, TF32 allowed", lambda: _matmul(4096, "float32")),
    "mlp": ("MLP 784-1024-1024-10, batch 256", lambda: _mlp(256)),
    "bert_base": ("BERT-base encoder, seq 128, batch 1", lambda: _bert_base()),
    "resnet18_b1": ("ResNet-18, batch 1, 3x224x224", lambda: _resnet18(1)),
    "resnet18_b32": ("ResNet-18, batch 32, 3x224x224", lambda: _resnet18(32)),
}


# Workloads built and timed with TF32 allowed on both sides (the target's "allow-tf32", torch's
# allow_tf32); every other f32 row is plain f32.
TF32 = {"matmul_tf32"}


def _select(only: str | None) -> list[str]:
    names = list(WORKLOADS) if not only else [n.strip() for n in only.split(",")]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    return names


# -- export (needs MLIR) ---------------------------------------------------------------------------


def _imported(name: str):
    """A workload as relax (weights as inputs) and its parameter names."""
    import torch

    from relaxmlir.frontend import from_exported_program

    model, inputs, *_ = WORKLOADS[name][1]()
    with torch.no_grad():
        ep = torch.export.export(model, tuple(inputs))
    return from_exported_program(ep, keep_params_as_input=True), len(inputs)


# Workloads built for another arch than the target's: Hopper's own instructions (wgmma)
ARCH = {"matmul_f16_wgmma": "sm_90a"}


def _trials_folder(name: str) -> str | None:
    """The subfolder of the trials folder that holds a workload's candidates when it is built
    for another target (None: the folder itself)."""
    return "tf32" if name in TF32 else ARCH.get(name)


def _target(name: str, target: str) -> str:
    if name in ARCH:
        arch = f"-arch={ARCH[name]}"
        target = re.sub(r"-arch=\S+", arch, target) if "-arch=" in target else f"{target} {arch}"
    return target + (" -allow-tf32=1" if name in TF32 else "")


def trials(out: Path, work_dir: Path, names: list[str], target: str, budget: int) -> None:
    """The tuning tasks of the workloads, one per distinct kernel (calls summed over the
    workloads), their candidates exported for the GPU machine: into `out`, or `out/tf32` for
    the workloads built with TF32 allowed and `out/sm_90a` for those built for Hopper's own
    instructions (other targets, so other records)."""
    from relaxmlir import meta_schedule as ms
    from relaxmlir.target import Target

    groups: dict[str, list[str]] = {}
    folders: dict[str, Path] = {}
    for name in names:
        tstr = _target(name, target)
        groups.setdefault(tstr, []).append(name)
        sub = _trials_folder(name)
        folders.setdefault(tstr, out / sub if sub else out)
    tasks_of: dict[str, list] = {}
    for tstr, members in groups.items():
        tasks: dict[str, object] = {}
        for name in members:
            for t in ms.extract_tasks(_imported(name)[0][0], Target(tstr)):
                if t.key in tasks:
                    tasks[t.key].calls += t.calls
                else:
                    tasks[t.key] = t
        tasks_of[tstr] = sorted(tasks.values(), key=lambda t: -t.flops * t.calls)
    total = sum(len(tasks) for tasks in tasks_of.values()) or 1
    for tstr, tasks in tasks_of.items():
        folder = folders[tstr]
        share = max(1, budget * len(tasks) // total)
        ms.export_trials(None, Target(tstr), str(work_dir), str(folder), share, tasks=tasks)
        print(f"{folder}: {len(tasks)} kernels for {tstr}, {share} trials", flush=True)


def export(out: Path, names: list[str], target: str, tuned: Path | None = None) -> None:
    import time

    from lowering.gpu.codegen import assemble, find_ptxas, ptx_sources
    from relaxmlir import meta_schedule as ms
    from relaxmlir import relax

    ptxas = find_ptxas()

    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in names:
        start = time.perf_counter()
        (mod, params), n_inputs = _imported(name)
        if tuned is not None:  # the best records of the tuning database for this target
            mod = ms.apply_database(mod, str(tuned), _target(name, target))
        ex = relax.build(mod, target=_target(name, target))
        ex.export_library(str(out / f"{name}.so"))
        kernels = ptx_sources(ex.lowered)
        if ptxas is not None:  # every kernel must assemble for the target's arch
            for ptx in kernels.values():
                assemble(ptx, ex.target.arch, ptxas)
        manifest[name] = {"params": list(params), "inputs": n_inputs, "target": str(ex.target)}
        manifest_path.write_text(json.dumps(manifest, indent=1))
        checked = (
            f", ptxas -arch={ex.target.arch} accepts all"
            if ptxas
            else " (ptxas not found: unchecked)"
        )
        print(
            f"{name}: built for {_target(name, target)} in {time.perf_counter() - start:.1f} s, {len(kernels)} kernels{checked}",
            flush=True,
        )


# -- run (numpy, torch and relaxmlir.runtime only) ---------------------------------------------------


def _time_ms(fn, repeat: int, warmup: int = 3) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def run(
    libs: Path, names: list[str], repeat: int, timeout: float, profile: bool = False
) -> list[dict]:
    """Each workload in its own child process: a kernel that faults (or hangs) is reported
    against its workload, and the CUDA context of the next one starts clean."""
    import subprocess

    rows = []
    for name in names:
        argv = [sys.executable, __file__, "one", "--libs", str(libs), "--repeat", str(repeat), name]
        argv += ["--profile"] if profile else []
        try:
            child = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            print(f"{name}: no answer in {timeout:.0f} s", flush=True)
            rows.append({"name": name, "what": WORKLOADS[name][0], "failed": "timed out"})
            continue
        lines = child.stdout.strip().splitlines()
        for line in lines[:-1]:  # --profile's kernel table
            print(f"  {line}", flush=True)
        if child.returncode == 0 and lines:
            row = json.loads(lines[-1])
            rows.append(row)
            print(f"{name}: relaxmlir {row['ours_ms']:.3f} ms, torch {row['torch_ms']:.3f} ms, "
                  f"max |err| {row['max_err']:.2e}{'' if row['ok'] else ' (MISMATCH)'}", flush=True)  # fmt: skip
        else:
            tail = " | ".join((child.stdout + child.stderr).strip().splitlines()[-4:])
            print(f"{name}: FAILED (exit {child.returncode}): {tail}", flush=True)
            rows.append({"name": name, "what": WORKLOADS[name][0], "failed": tail[-300:]})
    return rows


def _profile(fn, top: int = 8) -> None:
    """Our kernels' GPU time in one call, most expensive first (CUPTI sees every launch in the
    process, the driver-API ones of the library included)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = sorted(
        (
            (e.key, e.device_time_total, e.count)
            for e in prof.key_averages()
            if e.device_time_total > 0
        ),
        key=lambda r: -r[1],
    )
    total = sum(r[1] for r in rows) or 1.0
    print(f"profile: {total / 1000:.3f} ms of kernels in {sum(r[2] for r in rows)} launches")
    for key, us, count in rows[:top]:
        print(f"{us / 1000:8.3f} ms {100 * us / total:5.1f}% x{count:<3d} {key[:90]}")


def _host_profile(fn, calls: int = 200, top: int = 12) -> None:
    """Host time per call (no synchronization: the launches queue up) and where it goes."""
    import cProfile
    import io
    import pstats
    import time

    import torch

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host_us = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print(f"host: {host_us:.1f} us per call")
    for line in out.getvalue().splitlines():
        if line.strip() and ("{" in line or "(" in line) and not line.startswith("   Ordered"):
            print(line[:150])


def run_one(libs: Path, name: str, repeat: int, profile: bool = False) -> dict:
    import numpy as np
    import torch

    import relaxmlir as rm
    from relaxmlir import runtime

    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu run: torch sees no CUDA device")
    tf32 = name in TF32  # else the f32 target is plain f32 (no TF32), on both sides
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    manifest = json.loads((libs / "manifest.json").read_text())
    dev = rm.cuda(0)
    if name not in manifest:
        raise SystemExit(f"{name}: no library in {libs} (run `bench_gpu.py export` first)")
    model, inputs, flops, nbytes = WORKLOADS[name][1]()
    model = model.cuda()
    inputs = [x.cuda() for x in inputs]
    state = dict(model.state_dict())
    weights = [state[key].contiguous() for key in manifest[name]["params"]]
    lib = runtime.load_module(str(libs / f"{name}.so"))
    vm = runtime.VirtualMachine(lib, dev)
    graph_vm = runtime.VirtualMachine(lib, dev, cuda_graph=True)
    args = [rm.nd.from_dlpack(t) for t in inputs + weights]  # zero copy

    def ours():
        return vm["main"](*args)

    def ours_graph():  # replayed from its third call (where a graph pays; cuda_graph.py)
        return graph_vm["main"](*args)

    def theirs():
        with torch.no_grad():
            return model(*inputs)

    got = ours()
    got = got[0] if isinstance(got, tuple) else got
    want = theirs()
    want = want[0] if isinstance(want, tuple) else want
    tol = 2e-2 if want.dtype == torch.float16 or name in TF32 else 2e-3
    err = float(np.max(np.abs(got.numpy().astype(np.float32) - want.float().cpu().numpy())))
    scale = float(want.float().abs().max().cpu()) or 1.0
    ok = err <= tol * max(scale, 1.0)
    for _ in range(3):  # the graph's results are the plain call's, bit for bit
        g = ours_graph()
        g = g[0] if isinstance(g, tuple) else g
        ok = ok and bool(np.array_equal(g.numpy(), got.numpy()))
    if profile:
        _profile(ours)
        _host_profile(ours)
    t_ours, t_torch = _time_ms(ours, repeat), _time_ms(theirs, repeat)
    t_graph = _time_ms(ours_graph, repeat)
    return {
        "name": name, "what": WORKLOADS[name][0], "ours_ms": t_ours, "torch_ms": t_torch,
        "graph_ms": t_graph,
        "rate": (flops or nbytes) / t_ours / 1e9, "torch_rate": (flops or nbytes) / t_torch / 1e9,
        "unit": "TFLOP/s" if flops else "TB/s",
        "max_err": err, "ok": ok,
    }  # fmt: skip


def write_results(rows: list[dict], path: Path) -> None:
    import torch

    lines = [
        "# relaxmlir on CUDA vs torch CUDA eager",
        "",
        (
            f"Run {datetime.datetime.now().isoformat(timespec='minutes')} on {torch.cuda.get_device_name(0)} "
            f"(torch {torch.__version__}, CUDA {torch.version.cuda}); medians of CUDA-event timings, "
            "same process, same inputs; TF32 off. Produced by `scripts/bench_gpu.py run`. The "
            "cuda_graph column: the same library under `VirtualMachine(..., cuda_graph=True)`, "
            "its results checked equal to the plain call's."
        ),
        "",
        "| workload | relaxmlir ms | relaxmlir + cuda_graph ms | torch ms | relaxmlir / torch speed | relaxmlir rate | torch rate | max abs err |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['what']} | failed: {r['failed']} | | | | | | |")
            continue
        graph = f"{r['graph_ms']:.3f}" if "graph_ms" in r else ""
        lines.append(
            f"| {r['what']} | {r['ours_ms']:.3f} | {graph} | {r['torch_ms']:.3f} | {r['torch_ms'] / r['ours_ms']:.2f}x | "
            f"{r['rate']:.2f} {r['unit']} | {r['torch_rate']:.2f} {r['unit']} | {r['max_err']:.1e}{'' if r['ok'] else ' MISMATCH'} |"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="build the libraries (needs MLIR)")
    ex.add_argument("--out", type=Path, default=ROOT / "gpu_libs")
    ex.add_argument("--only", help=f"comma-separated workloads ({', '.join(WORKLOADS)})")
    ex.add_argument("--target", default="cuda -arch=sm_90")
    ex.add_argument("--tuned", type=Path, help="a tuning work dir: build with its best records")
    ex.add_argument(
        "--import", dest="imported", type=Path, action="append", default=[],
        help="a trials folder timed on the GPU: read into --tuned's database first",
    )  # fmt: skip
    tr = sub.add_parser("trials", help="export tuning candidates of the workloads (needs MLIR)")
    tr.add_argument("--out", type=Path, default=ROOT / "gpu_trials")
    tr.add_argument("--work-dir", type=Path, default=ROOT / "gpu_tuning")
    tr.add_argument("--trials", type=int, default=200, help="candidates in all")
    tr.add_argument("--only", help=f"comma-separated workloads ({', '.join(WORKLOADS)})")
    tr.add_argument("--target", default="cuda -arch=sm_90")
    rn = sub.add_parser("run", help="time the libraries beside torch (needs a GPU, not MLIR)")
    rn.add_argument("--libs", type=Path, default=ROOT / "gpu_libs")
    rn.add_argument("--only")
    rn.add_argument("--repeat", type=int, default=20)
    rn.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "RESULTS_GPU.md")
    rn.add_argument("--timeout", type=float, default=240, help="seconds per workload")
    rn.add_argument("--profile", action="store_true", help="print each workload's top kernels")
    one = sub.add_parser("one", help="one workload, a JSON row on stdout (run's child process)")
    one.add_argument("--libs", type=Path, required=True)
    one.add_argument("--repeat", type=int, default=20)
    one.add_argument("--profile", action="store_true")
    one.add_argument("name")
    args = parser.parse_args(argv)
    if args.command == "one":
        print(json.dumps(run_one(args.libs, _select(args.name)[0], args.repeat, args.profile)))
        return
    names = _select(args.only)
    if args.command == "trials":
        trials(args.out, args.work_dir, names, args.target, args.trials)
    elif args.command == "export":
        if args.imported and args.tuned is None:
            raise SystemExit("--import needs --tuned (the database to read the results into)")
        from relaxmlir import meta_schedule as ms

        for folder in args.imported:
            subs = sorted({s for s in map(_trials_folder, WORKLOADS) if s})
            for sub_folder in [folder, *(folder / s for s in subs)]:
                if not (sub_folder / "trials.json").exists():
                    continue
                if not (sub_folder / "results.jsonl").exists():
                    print(f"{sub_folder}: not timed yet, skipped", flush=True)
                    continue
                ms.import_trials(str(args.tuned), str(sub_folder))
        export(args.out, names, args.target, args.tuned)
    else:
        write_results(run(args.libs, names, args.repeat, args.timeout, args.profile), args.results)


if __name__ == "__main__":
    main()
