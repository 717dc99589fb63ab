"""Timing tuning candidates on the machine that runs them: the runner half of tuning, where
the compiler is not installed (a GPU machine without MLIR, or another CPU).

`relaxmlir.meta_schedule.export_trials` writes a folder: `trials.json` (the target, the
device, and per task its argument shapes and candidates, the default schedule first, each an
exported library and its knob values) and the libraries. Here, with numpy and this runtime
only, the candidates run in a measuring process of their own, replaced after any failure (a
library that does not load, a CUDA error, a crash, a hang past the timeout: a failed record,
never the end of the run). Each is called on random inputs (fixed seed), its
outputs checked against the default schedule's (rtol 1e-3), then timed; on a GPU, in batches
of calls with one device synchronization each. Then each task's fastest candidate is timed
against its default again, taking turns, and kept only when it wins by the margin the manifest
gives (as `tune_tasks` confirms). Results are appended to `results.jsonl` in the folder (a run
that stops resumes); `relaxmlir.meta_schedule.import_trials` reads them into the database.

    python -m relaxmlir.runtime.trials FOLDER [FOLDER ...] [--timeout S]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import select
import subprocess
import sys
import time

from relaxmlir.runtime import cuda_driver

MANIFEST = "trials.json"
START_TIMEOUT_S = 120.0  # for the measuring process's imports, before its first candidate
RESULTS = "results.jsonl"
VERSION = 1

# The measuring process: one spec per stdin line, one JSON result per stdout line. A candidate
# that raises (a library that does not load, a CUDA error, which leaves the context unusable)
# is answered {"error", "fatal": true} and the process ends; the parent starts a fresh one for
# the next candidate. A crash or a hang is the parent's to see. Its first line, once its imports
# are done, is {"ready": true}: a candidate's timeout counts from its hand-over.
_CHILD = r"""
import json, os, sys, time
import numpy as np
from relaxmlir import runtime
from relaxmlir.runtime.device import Device
from relaxmlir.runtime.dtype import np_dtype
from relaxmlir.runtime.trials import check_reference, random_inputs

def measure(spec):
    device = Device(spec["device"], 0)
    f = runtime.load_module(spec["lib"])[spec.get("entry", "kernel")]
    host = random_inputs(spec["args"])
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
    error = check_reference(fetch(), spec["ref"], may_write=spec["is_default"])
    if error:
        return {"error": error}
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

_out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # what a kernel or a library prints goes to stderr, not into the protocol
_out.write(json.dumps({"ready": True}) + "\n")
_out.flush()
for line in iter(sys.stdin.readline, ""):
    try:
        result = measure(json.loads(line))
    except BaseException as exc:
        _out.write(json.dumps({"error": f"run: {type(exc).__name__}: {str(exc)[:300]}", "fatal": True}) + "\n")
        _out.flush()
        sys.exit(3)
    _out.write(json.dumps(result) + "\n")
    _out.flush()
"""


def random_inputs(signature: list) -> list:
    """Arrays for [shape, dtype] pairs, from a fixed seed: floats standard normal, bools 0 / 1,
    integers 0 to 3 (small enough to be valid indices of most gathers)."""
    import numpy as np

    from relaxmlir.runtime.dtype import np_dtype

    rng = np.random.default_rng(0)
    out = []
    for shape, dtype in signature:
        if dtype.startswith(("float", "bfloat")):
            out.append(rng.standard_normal(shape).astype(np_dtype(dtype)))
        elif dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.integers(0, 4, shape).astype(dtype))
    return out


def check_reference(outs: list, path: str, may_write: bool) -> str | None:
    """Compare `outs` with the reference outputs saved at `path` (rtol 1e-3, atol 1e-4 of the
    largest finite reference value): the error, or None. NaN and infinity must sit where the
    reference has them (random batch-norm variances are negative, so whole channels are NaN).
    Without a reference, `outs` become it where `may_write` (the default schedule's run), else
    that is the error."""
    import numpy as np

    try:
        ref = np.load(path)
    except FileNotFoundError:
        if not may_write:
            return "no reference result (the default schedule failed)"
        np.savez(path, *outs)
        return None
    for i, o in enumerate(outs):
        want, o = ref[f"arr_{i}"].astype(np.float64), np.asarray(o).astype(np.float64)
        finite = np.isfinite(want)
        scale = float(np.abs(want[finite]).max()) if finite.any() else 0.0
        ok = np.isclose(o, want, rtol=1e-3, atol=1e-4 * max(scale, 1.0), equal_nan=True)
        if not ok.all():
            both = ~ok & finite & np.isfinite(o)
            diff = f", max abs diff {np.abs(o - want)[both].max():.3g}" if both.any() else ""
            return (
                f"wrong result (output {i}: {int((~ok).sum())} of {o.size} elements differ{diff})"
            )
    return None


def median(values: list[float]) -> float:
    """The upper median of `values` (of a record's times, and of the confirmation's rounds):
    the tuning database's, so that both sides rank candidates alike."""
    return sorted(values)[len(values) // 2]


def knobs_id(knobs: dict) -> str:
    """A canonical text of a knob assignment (what "no duplicate candidates" compares)."""
    return json.dumps(knobs, sort_keys=True)


class JsonLines:
    """The replies of a child process, one JSON object per line of its stdout, each awaited
    with a deadline (select on the pipe), so that a hung child costs its timeout, never a
    blocked read: the measuring process here and the tuner's builders (meta_schedule.measure)."""

    def __init__(self, stream):
        self.fd, self.buf = stream.fileno(), b""

    def next(self, timeout_s: float) -> dict | None:
        """The next reply; None after `timeout_s`; EOFError when the process closed its end."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


class _Runner:
    """The measuring process, started on first use and again after a candidate ends it (an
    exception, a crash, or a hang past the timeout, when it is killed): candidates share one
    process (and one CUDA context) while they behave, and a failing one never stops the run."""

    def __init__(self, log: str):
        self.log, self.proc = log, None

    def _start(self) -> dict | None:
        """A fresh process, ready (None), or the error record of one that did not start."""
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
            )
        self.replies = JsonLines(self.proc.stdout)
        hello = self._receive(START_TIMEOUT_S)
        if isinstance(hello, dict):
            return None
        if hello == "timeout":
            hello = f"run: the measuring process did not start in {START_TIMEOUT_S:g} s"
        return self._lost(hello)

    def _receive(self, timeout_s: float) -> dict | str:
        """The process's next line, or "timeout", or the message of its crash."""
        try:
            reply = self.replies.next(timeout_s)
        except EOFError:
            code = self.proc.wait()
            return f"run: crashed ({code}): {self._tail(code)}"
        return "timeout" if reply is None else reply

    def run(self, spec: dict, timeout_s: float) -> dict:
        """{"times_us": [...]} or {"error": ...} for one candidate."""
        if self.proc is None or self.proc.poll() is not None:
            failed = self._start()
            if failed is not None:
                return failed
        try:
            self.proc.stdin.write((json.dumps(spec) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            return self._lost("run: the measuring process ended")
        result = self._receive(timeout_s)
        if result == "timeout":
            return self._lost(f"run: timeout after {timeout_s:g} s")
        if isinstance(result, str):
            return self._lost(result)
        if result.pop("fatal", False):
            self.close()
        return result

    def _lost(self, message: str) -> dict:
        self.close()
        return {"error": message}

    def _tail(self, code: int) -> str:
        """What the crashed process's stderr says: its fatal error line, else its last line."""
        try:
            with open(self.log, errors="replace") as f:
                lines = f.read().strip().splitlines()
        except OSError:
            lines = []
        fatal = [line for line in lines if line.startswith("Fatal Python error")]
        return ((fatal or lines)[-1:] or [f"exit status {code}"])[0][:300]

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            self.proc = None


def read_manifest(folder: str) -> dict:
    """The folder's trials.json, checked: ValueError naming what is wrong."""
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the trials ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("version") != VERSION:
        version = manifest.get("version") if isinstance(manifest, dict) else None
        raise ValueError(f"{path}: trials of version {version!r}, this runtime reads {VERSION}")
    missing = [k for k in ("device", "confirm", "tasks") if k not in manifest]
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)} (not written by export_trials?)")
    return manifest


def read_results(folder: str) -> list[dict]:
    """The records and decisions in the folder's results file, in order (none yet: empty); a
    line an interrupted run cut short is left out."""
    out = []
    path = os.path.join(folder, RESULTS)
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(item, dict) and "key" in item and ("decision" in item or "knobs" in item):
                out.append(item)
    return out


def run_trials(
    folder: str, timeout_s: float = 60.0, repeats: int = 10, min_s: float = 0.05, log=None
) -> str:
    """Measure every candidate of the trials in `folder` not measured yet, then confirm each
    task's fastest against its default; returns the path of the results file."""
    manifest = read_manifest(folder)
    path = os.path.join(folder, RESULTS)
    # median time of every candidate measured, earlier runs included: (key, knobs id) -> us
    # (None: failed), and the tasks already confirmed
    medians: dict[tuple[str, str], float | None] = {}
    decided: set[str] = set()
    for r in read_results(folder):
        if "decision" in r:
            decided.add(r["key"])
        else:
            medians[(r["key"], knobs_id(r["knobs"]))] = _time(r)
    refs = os.path.join(folder, "references")
    os.makedirs(refs, exist_ok=True)
    rounds, margin = manifest["confirm"]["rounds"], manifest["confirm"]["margin"]
    runner = _Runner(os.path.join(folder, "runner.log"))
    with open(path, "a+") as out, contextlib.closing(runner):
        if out.tell():  # a line an interrupted run cut short ends here, not in the next record
            out.seek(out.tell() - 1)
            if out.read(1) != "\n":
                out.write("\n")

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
                if (key, knobs_id(c["knobs"])) in medians:
                    continue
                result = (
                    {"error": c["error"]}
                    if "error" in c
                    else runner.run(spec(c, i == 0), timeout_s)
                )
                write({"key": key, "knobs": c["knobs"], **result})
                medians[(key, knobs_id(c["knobs"]))] = _time(result)
                if log is not None:
                    best = (
                        f"{median(result['times_us']):.1f} us"
                        if "times_us" in result
                        else result["error"]
                    )
                    log(f"{task['name']} {c['knobs']}: {best}")
            if key in decided:
                continue
            timed = {k: t for (tk, k), t in medians.items() if tk == key and t is not None}
            write(_confirm(key, candidates, timed, spec, runner, timeout_s, rounds, margin))
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


def _time(result: dict) -> float | None:
    return median(result["times_us"]) if result.get("times_us") else None


def _confirm(key, candidates, medians, spec, runner, timeout_s, rounds, margin) -> dict:
    """The task's fastest candidate (`medians`: knobs id -> median us of the measured ones)
    against its default, `rounds` turns each: the decision."""
    default = candidates[0]
    measured = [c for c in candidates if knobs_id(c["knobs"]) in medians and "lib" in c]
    best = min(measured, key=lambda c: medians[knobs_id(c["knobs"])], default=None)
    decision = {
        "chosen": default["knobs"],
        "candidate": None,
        "default_us": None,
        "candidate_us": None,
    }
    if best is None or best is default or knobs_id(default["knobs"]) not in medians:
        return {"key": key, "decision": decision}
    turns: dict[str, list[float]] = {"default": [], "candidate": []}
    for _ in range(rounds):
        for name, c in (("default", default), ("candidate", best)):
            r = runner.run(spec(c, False), timeout_s)
            if "times_us" in r:
                turns[name].append(median(r["times_us"]))
    d_us = median(turns["default"]) if len(turns["default"]) == rounds else None
    c_us = median(turns["candidate"]) if len(turns["candidate"]) == rounds else None
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
        try:
            manifest = read_manifest(folder)
        except ValueError as exc:
            parser.error(str(exc))
        # without the device every candidate would fail, and the failures, kept as results,
        # would keep a later run on the right machine from measuring them
        if manifest["device"] == "cuda" and not cuda_driver.available():
            parser.error(f"{folder}: trials for cuda, and this machine has no usable CUDA device; nothing was run")
    for folder in args.folders:
        path = run_trials(folder, args.timeout, args.repeats, log=print)
        print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
