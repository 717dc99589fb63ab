"""Builder and runner: candidates compiled in worker processes, measured in isolated ones.

A candidate is a task's kernel with knob values. The builder (a pool of spawned processes)
compiles it with those knobs and exports a shared library; the runner loads the library in a
fresh process that imports no compiler (the MLIR-free runtime), checks its result against the
default schedule's, and times it. A build error, a crash, a hang past the timeout or a wrong
result becomes a failed record; it never stops the tuner. Measurements run one at a time, so
candidates do not compete for the cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

RUNNER = r"""
import json, sys, time
import numpy as np
from relaxmlir import runtime
spec = json.loads(sys.stdin.read())
ex = runtime.load_module(spec["lib"])
f = ex[spec.get("entry", "kernel")]
rng = np.random.default_rng(0)
args = []
for shape, dtype in spec["args"]:
    if dtype.startswith("float"):
        args.append(rng.standard_normal(shape).astype(dtype))
    elif dtype == "bool":
        args.append(rng.integers(0, 2, shape).astype(bool))
    else:
        args.append(rng.integers(0, 4, shape).astype(dtype))
outs = [np.zeros(shape, dtype) for shape, dtype in spec["outs"]]
if spec.get("dps", True):
    call = lambda: f(*args, *outs)
    call()
else:  # a relax function (strategy tasks): it returns its results
    call = lambda: f(*args)
    res = call()
    outs = [r.numpy() for r in (res if isinstance(res, (list, tuple)) else [res])]
if spec["ref"]:
    try:
        ref = np.load(spec["ref"])
    except FileNotFoundError:
        np.savez(spec["ref"], *outs)
    else:
        for i, o in enumerate(outs):
            want = ref[f"arr_{i}"]
            scale = float(np.abs(want).max()) if want.size else 0.0
            if not np.allclose(o, want, rtol=1e-3, atol=1e-4 * max(scale, 1.0), equal_nan=True):
                print(json.dumps({"error": f"wrong result (output {i}, max abs diff "
                                  f"{float(np.abs(o - want).max()):.3g})"}))
                sys.exit(0)
# Warm-up: thread pools, page faults and caches settle before timing.
start = time.perf_counter()
for _ in range(spec["warmup"]):
    call()
    if time.perf_counter() - start > spec["min_s"]:
        break
times = []
start = time.perf_counter()
while len(times) < spec["repeats"] or (time.perf_counter() - start < spec["min_s"] and len(times) < 1000):
    t = time.perf_counter()
    call()
    times.append((time.perf_counter() - t) * 1e6)
print(json.dumps({"times_us": times}))
"""


def _quiet_env() -> dict:
    env = dict(os.environ)
    env["RELAXMLIR_CACHE"] = "0"  # candidates must not fill the user's compile cache
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def run_candidate(
    lib: str,
    signature: dict,
    ref: str | None,
    timeout_s: float,
    repeats: int = 10,
    min_s: float = 0.05,
) -> dict:
    """Time the exported kernel in a fresh process: {"times_us": [...]} or {"error": ...}."""
    spec = {"lib": lib, "ref": ref, "repeats": repeats, "min_s": min_s, "warmup": 5, **signature}
    return _child(RUNNER, json.dumps(spec), timeout_s, "run")


def _child(program: str, spec: str, timeout_s: float, step: str) -> dict:
    """Run `program` (its spec on stdin) in a fresh process; its last stdout line is a JSON
    result. A timeout, a crash or no result is an {"error": ...} naming `step`."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", program],
            input=spec,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=_quiet_env(),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"{step}: timeout after {timeout_s:g} s"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return {"error": f"{step}: crashed ({proc.returncode}): {tail[0][:300]}"}


# The builder program (a separate process, so a compiler crash or hang is only a record):
# compile the kernel with its knobs, export it, print its signature or the error.
BUILDER = r"""
import json, sys
spec = json.loads(sys.stdin.read())
try:
    from lowering.schedule.space import set_knobs
    from relaxmlir import relax
    from relaxmlir.ir import parse
    from relaxmlir.target import Target

    mod = parse(spec["func"])
    set_knobs(mod["kernel"].op, spec["knobs"])
    ex = relax.build(mod, Target(spec["target"]))
    info = ex.infos["kernel"]
    if not info.destination_passing:
        raise ValueError("the kernel is not destination-passing")
    ex.export_library(spec["out"])
    result = {
        "args": [[list(s.shape), s.dtype] for s in info.params],
        "outs": [[list(s.shape), s.dtype] for s in info.results],
    }
except Exception as exc:
    result = {"error": f"build: {type(exc).__name__}: {str(exc)[:500]}"}
print(json.dumps(result))
"""


# A strategy task's candidate: the module of one op call, built with the implementation its
# knob names as the module's tuned choice for that workload; the choice LegalizeOps actually
# made is checked (a call legalized otherwise would be timed under a wrong name).
STRATEGY_BUILDER = r"""
import json, sys
spec = json.loads(sys.stdin.read())
try:
    from relaxmlir import relax
    from relaxmlir.ir import parse
    from relaxmlir.relax.op import strategy
    from relaxmlir.target import Target

    mod = parse(spec["func"])
    want = spec["knobs"]["strategy"]
    strategy.set_tuned_choices(mod.module.operation, {spec["workload"]: want})
    with strategy.record_choices() as seen:
        ex = relax.build(mod, Target(spec["target"]))
    got = [c.chosen for c in seen if c.key == spec["workload"]]
    if got != [want]:
        raise ValueError(f"the call was legalized with {got or 'no strategy'}, not {want}")
    info = ex.infos["main"]
    ex.export_library(spec["out"])
    result = {
        "args": [[list(s.shape), s.dtype] for s in info.params],
        "outs": [[list(s.shape), s.dtype] for s in info.results],
        "dps": False,
        "entry": "main",
    }
except Exception as exc:
    result = {"error": f"build: {type(exc).__name__}: {str(exc)[:500]}"}
print(json.dumps(result))
"""


def build_in_process(
    func_text: str,
    knobs: dict,
    target: str,
    out_path: str,
    timeout_s: float,
    workload: str = "",
) -> dict:
    """Build a candidate in a fresh process (a crash or hang of the compiler is a record).
    `workload`: the key of a strategy task (`func_text` is then a relax module of its call)."""
    spec = json.dumps(
        {"func": func_text, "knobs": knobs, "target": target, "out": out_path, "workload": workload}
    )
    return _child(STRATEGY_BUILDER if workload else BUILDER, spec, timeout_s, "build")


def _workload(task) -> str:
    return task.key if getattr(task, "kind", "kernel") == "strategy" else ""


def build_and_run(
    func_text: str,
    knobs: dict,
    target: str,
    ref_npz: bytes | None,
    timeout_s: float,
    workload: str = "",
) -> dict:
    """Build and time one candidate in a scratch folder of this machine (the unit of work sent
    to a Dask worker). Without `ref_npz` the result carries the outputs as `reference` (npz
    bytes), for the candidates that follow."""
    with tempfile.TemporaryDirectory(prefix="relaxmlir-candidate-") as folder:
        lib, ref = os.path.join(folder, "c.so"), os.path.join(folder, "ref.npz")
        built = build_in_process(func_text, knobs, target, lib, timeout_s * 4, workload)
        if "error" in built:
            return built
        if ref_npz is not None:
            with open(ref, "wb") as f:
                f.write(ref_npz)
        out = run_candidate(lib, built, ref, timeout_s)
        if ref_npz is None and "times_us" in out:
            with open(ref, "rb") as f:
                out["reference"] = f.read()
        return out


@dataclass
class Measurer:
    """Parallel builders (one process per candidate, `num_workers` at a time) and the serial
    runner, for one tuning run."""

    work_dir: str
    num_workers: int = 2
    timeout_s: float = 60.0
    distributed: str = ""  # a Dask scheduler address: builds and runs go to its workers

    def __post_init__(self):
        self.scratch = tempfile.mkdtemp(prefix="candidates-", dir=self.work_dir)
        self.pool = ThreadPoolExecutor(max(1, self.num_workers))
        self.count = 0
        self.client = None
        if self.distributed:
            try:
                from distributed import Client
            except ImportError as exc:
                raise ImportError("--distributed needs Dask: pip install distributed") from exc
            self.client = Client(self.distributed)

    def measure(self, task, candidates: list[dict], target: str) -> list[dict]:
        """[{"knobs", "times_us" | "error"}] for each candidate of `task`, in order."""
        ref = os.path.join(self.work_dir, f"reference-{task.key}.npz")
        if self.client is not None:
            return self._measure_distributed(task, candidates, target, ref)
        jobs = []
        for knobs in candidates:
            self.count += 1
            lib = os.path.join(self.scratch, f"c{self.count}.so")
            job = self.pool.submit(
                build_in_process,
                task.func_text,
                knobs,
                target,
                lib,
                self.timeout_s * 4,
                _workload(task),
            )
            jobs.append((knobs, lib, job))
        # All builds finish before the first measurement: a build running beside a measurement
        # would take the cores it is timed on.
        built_all = [job.result() for _, _, job in jobs]
        results = []
        for (knobs, lib, _), built in zip(jobs, built_all):
            if "error" in built:
                results.append({"knobs": knobs, "error": built["error"]})
                continue
            # The default schedule writes the reference the others are checked against.
            is_default = knobs == task.default_knobs()
            if not is_default and not os.path.exists(ref):
                results.append(
                    {"knobs": knobs, "error": "no reference result (the default schedule failed)"}
                )
                continue
            out = run_candidate(lib, built, ref, self.timeout_s)
            results.append({"knobs": knobs, **out})
            try:
                os.remove(lib)
            except OSError:
                pass
        return results

    def _measure_distributed(
        self, task, candidates: list[dict], target: str, ref: str
    ) -> list[dict]:
        """Each candidate built and timed on a Dask worker (one measurement per worker thread:
        start workers with one thread each for quiet timings). The default schedule's outputs
        come back as the reference the other candidates are checked against."""
        ref_npz = None
        if os.path.exists(ref):
            with open(ref, "rb") as f:
                ref_npz = f.read()
        default = task.default_knobs()
        results = []
        futures = []
        for knobs in candidates:
            if ref_npz is None and knobs != default:
                results.append(
                    (knobs, {"error": "no reference result (the default schedule failed)"})
                )
                continue
            job = self.client.submit(
                build_and_run,
                task.func_text,
                knobs,
                target,
                ref_npz,
                self.timeout_s,
                _workload(task),
                pure=False,
            )
            futures.append((knobs, job))
        for knobs, job in futures:
            try:
                out = job.result(timeout=self.timeout_s * 6)
            except Exception as exc:  # noqa: BLE001  (a lost worker is a failed candidate)
                out = {"error": f"distributed: {type(exc).__name__}: {exc}"}
            reference = out.pop("reference", None)
            if reference is not None and not os.path.exists(ref):
                with open(ref, "wb") as f:
                    f.write(reference)
            results.append((knobs, out))
        order = {id(k): i for i, k in enumerate(candidates)}
        return [{"knobs": k, **o} for k, o in sorted(results, key=lambda p: order[id(p[0])])]

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.pool.shutdown(wait=True, cancel_futures=True)
        for name in os.listdir(self.scratch):
            os.remove(os.path.join(self.scratch, name))
        os.rmdir(self.scratch)
