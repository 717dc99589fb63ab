"""Timing tuning candidates on the machine that runs them: the runner half of tuning, where
the compiler is not installed (a GPU machine without MLIR, or another CPU).

`relaxmlir.meta_schedule.export_trials` writes a folder: `trials.json` (the target, the
device, and per task its argument shapes and candidates, the default schedule first, each an
exported library and its knob values) and the libraries. Here, with numpy and this runtime
only, every candidate runs in a process of its own (a crash or a hang past the timeout is a
failed record, never the end of the run): it is called on random inputs (fixed seed), its
outputs checked against the default schedule's (rtol 1e-3), then timed; on a GPU, in batches
of calls with one device synchronization each. Then each task's fastest candidate is timed
against its default again, taking turns, and kept only when it wins by the margin the manifest
gives (as `tune_tasks` confirms). Results are appended to `results.jsonl` in the folder (a run
that stops resumes); `relaxmlir.meta_schedule.import_trials` reads them into the database.

    python -m relaxmlir.runtime.trials FOLDER [FOLDER ...] [--timeout S]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys

MANIFEST = "trials.json"
RESULTS = "results.jsonl"
VERSION = 1

# One candidate, in a fresh process: its spec on stdin, a JSON result on its last stdout line.
_CHILD = r"""
import json, sys, time
import numpy as np
from relaxmlir import runtime
from relaxmlir.runtime.device import Device
from relaxmlir.runtime.dtype import np_dtype

def measure(spec):
    device = Device(spec["device"], 0)
    f = runtime.load_module(spec["lib"])[spec.get("entry", "kernel")]
    rng = np.random.default_rng(0)
    host = []
    for shape, dtype in spec["args"]:
        if dtype.startswith(("float", "bfloat")):
            host.append(rng.standard_normal(shape).astype(np.float32).astype(np_dtype(dtype)))
        elif dtype == "bool":
            host.append(rng.integers(0, 2, shape).astype(bool))
        else:
            host.append(rng.integers(0, 4, shape).astype(dtype))
    zeros = [np.zeros(shape, np_dtype(dtype)) for shape, dtype in spec["outs"]]
    if device.device_type == "cuda":
        from relaxmlir.runtime import cuda_driver
        args = [runtime.array(a, device) for a in host]
        outs = [runtime.array(z, device) for z in zeros]
        stream = cuda_driver.current_stream(device)
        sync = lambda: cuda_driver.driver().synchronize(stream)
        fetch = lambda: [o.numpy() for o in outs]
    else:
        args, outs = host, zeros
        sync = lambda: None
        fetch = lambda: outs
    call = lambda: f(*args, *outs)
    call()
    sync()
    got = fetch()
    try:
        ref = np.load(spec["ref"])
    except FileNotFoundError:
        if not spec["is_default"]:
            return {"error": "no reference result (the default schedule failed)"}
        np.savez(spec["ref"], *got)
    else:
        for i, o in enumerate(got):
            want, o = ref[f"arr_{i}"].astype(np.float64), o.astype(np.float64)
            scale = float(np.abs(want).max()) if want.size else 0.0
            if not np.allclose(o, want, rtol=1e-3, atol=1e-4 * max(scale, 1.0), equal_nan=True):
                return {"error": f"wrong result (output {i}, max abs diff "
                                 f"{float(np.abs(o - want).max()):.3g})"}
    # batches of calls, one synchronization each, about a millisecond long: a launch's host
    # cost overlaps the kernel before it, as in a model
    t = time.perf_counter()
    for _ in range(3):
        call()
    sync()
    one = (time.perf_counter() - t) / 3
    inner = max(1, min(100, int(1e-3 / max(one, 1e-7))))
    times, start = [], time.perf_counter()
    while len(times) < spec["repeats"] or (time.perf_counter() - start < spec["min_s"] and len(times) < 1000):
        t = time.perf_counter()
        for _ in range(inner):
            call()
        sync()
        times.append((time.perf_counter() - t) / inner * 1e6)
    return {"times_us": times}

print(json.dumps(measure(json.loads(sys.stdin.read()))))
"""


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _knobs_id(knobs: dict) -> str:
    return json.dumps(knobs, sort_keys=True)


def _measure(spec: dict, timeout_s: float) -> dict:
    """Run one candidate in a fresh process: {"times_us": [...]} or {"error": ...}."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"run: timeout after {timeout_s:g} s"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        lines = proc.stderr.strip().splitlines()
        fatal = [line for line in lines if line.startswith("Fatal Python error")]
        tail = ((fatal or lines)[-1:] or [f"exit status {proc.returncode}"])[0][:300]
        return {"error": f"run: crashed ({proc.returncode}): {tail}"}


def run_trials(
    folder: str, timeout_s: float = 60.0, repeats: int = 10, min_s: float = 0.05, log=None
) -> str:
    """Measure every candidate of the trials in `folder` not measured yet, then confirm each
    task's fastest against its default; returns the path of the results file."""
    with open(os.path.join(folder, MANIFEST)) as f:
        manifest = json.load(f)
    if manifest.get("version") != VERSION:
        raise ValueError(
            f"{folder}: trials of version {manifest.get('version')}, expected {VERSION}"
        )
    path = os.path.join(folder, RESULTS)
    done: set[tuple[str, str]] = set()
    decided: set[str] = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by an interrupted run
                if "decision" in r:
                    decided.add(r["key"])
                else:
                    done.add((r["key"], _knobs_id(r["knobs"])))
    refs = os.path.join(folder, "references")
    os.makedirs(refs, exist_ok=True)
    rounds, margin = manifest["confirm"]["rounds"], manifest["confirm"]["margin"]
    with open(path, "a") as out:

        def write(item: dict) -> None:
            out.write(json.dumps(item) + "\n")
            out.flush()

        for task in manifest["tasks"]:
            key = task["key"]
            spec = functools.partial(
                _spec, folder, manifest["device"], task, refs, repeats=repeats, min_s=min_s
            )
            candidates = task["candidates"]
            for i, c in enumerate(candidates):
                if (key, _knobs_id(c["knobs"])) in done:
                    continue
                result = (
                    {"error": c["error"]} if "error" in c else _measure(spec(c, i == 0), timeout_s)
                )
                write({"key": key, "knobs": c["knobs"], **result})
                if log is not None:
                    best = (
                        f"{_median(result['times_us']):.1f} us"
                        if "times_us" in result
                        else result["error"]
                    )
                    log(f"{task['name']} {c['knobs']}: {best}")
            if key in decided:
                continue
            write(_confirm(key, candidates, path, spec, timeout_s, rounds, margin))
    return path


def _spec(folder, device, task, refs, candidate, is_default, repeats, min_s) -> dict:
    """What the child process measures: a candidate's library, inputs and reference."""
    return {
        "lib": os.path.join(folder, candidate["lib"]),
        "device": device,
        "args": task["args"],
        "outs": task["outs"],
        "ref": os.path.join(refs, f"{task['key']}.npz"),
        "is_default": is_default,
        "repeats": repeats,
        "min_s": min_s,
    }


def _confirm(key, candidates, path, spec, timeout_s, rounds, margin) -> dict:
    """The task's fastest candidate against its default, `rounds` turns each: the decision."""
    medians: dict[str, float] = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("key") == key and r.get("times_us"):
                medians[_knobs_id(r["knobs"])] = _median(r["times_us"])
    default = candidates[0]
    measured = [c for c in candidates if _knobs_id(c["knobs"]) in medians and "lib" in c]
    best = min(measured, key=lambda c: medians[_knobs_id(c["knobs"])], default=None)
    decision = {
        "chosen": default["knobs"],
        "candidate": None,
        "default_us": None,
        "candidate_us": None,
    }
    if best is None or best is default or _knobs_id(default["knobs"]) not in medians:
        return {"key": key, "decision": decision}
    turns: dict[str, list[float]] = {"default": [], "candidate": []}
    for _ in range(rounds):
        for name, c in (("default", default), ("candidate", best)):
            r = _measure(spec(c, False), timeout_s)
            if "times_us" in r:
                turns[name].append(_median(r["times_us"]))
    d_us = _median(turns["default"]) if len(turns["default"]) == rounds else None
    c_us = _median(turns["candidate"]) if len(turns["candidate"]) == rounds else None
    wins = d_us is not None and c_us is not None and c_us <= (1 - margin) * d_us
    decision.update(
        chosen=best["knobs"] if wins else default["knobs"],
        candidate=best["knobs"],
        default_us=d_us,
        candidate_us=c_us,
    )
    return {"key": key, "decision": decision}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m relaxmlir.runtime.trials",
        description="Measure exported tuning candidates here (no compiler needed).",
    )
    parser.add_argument(
        "folders",
        nargs="+",
        help="folders written by export_trials / relaxmlir-tune --export-trials",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate run")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    for folder in args.folders:
        if not os.path.exists(os.path.join(folder, MANIFEST)):
            parser.error(f"{folder} holds no {MANIFEST}")
    for folder in args.folders:
        path = run_trials(folder, args.timeout, args.repeats, log=print)
        print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
