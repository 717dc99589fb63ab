"""Builder and runner: candidates compiled in worker processes, measured in isolated ones.

A candidate is a task's kernel with knob values. The builder compiles it with those knobs and
exports a shared library; the runner loads the library in a process that imports no compiler
(the MLIR-free runtime), checks its result against the default schedule's, and times it. A
build error, a crash, a hang past the timeout or a wrong result becomes a failed record; it
never stops the tuner. Measurements run one at a time, after all builds of a round, so
candidates do not compete for the cores.

Locally both sides are long-lived processes (the imports, about a second each, are paid once
per tuning run, not per candidate): `BuilderPool` keeps `num_workers` builders that read build
specs line by line (a builder that crashes or hangs is killed and replaced, and only its
candidate is a failed record), and `ForkRunner` is a server that imported numpy and the runtime
once and forks a child per candidate: the child loads the library, checks and times it, so no
two candidates' code ever share a process. The Dask path (`build_and_run`) keeps one fresh
process per build and per run on the workers.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from relaxmlir.runtime.trials import JsonLines

# Test hook: `FAULT_HOOK(step, knobs)` ("build" or "run") may return "crash" (the process
# aborts), "hang" (it sleeps past any timeout) or, for a build, "poison" (the build succeeds
# but the builder aborts at its next build: a fault that shows up on the next candidate).
FAULT_HOOK = None

# How long a builder or the fork server may take to import what it needs and say it is ready:
# their timeouts count from a candidate's hand-over, not from the process start.
START_TIMEOUT_S = 120.0

_INJECT = r"""
import faulthandler
faulthandler.enable()  # a native crash's message says what it was
_POISONED = []

def _inject(fault):
    import os, time
    if _POISONED or fault == "crash":
        os.abort()
    if fault == "hang":
        time.sleep(3600)
    if fault == "poison":
        _POISONED.append(fault)
"""

# Times the exported library: the body of the runner (a fresh process, or a fork-server child).
_MEASURE = r"""
def measure(spec):
    import os, time
    if spec.get("threads"):  # the target's cores, for library kernels (BLAS, oneDNN) too
        os.environ["RELAXMLIR_NUM_THREADS"] = str(spec["threads"])
    import numpy as np
    from relaxmlir import runtime
    from relaxmlir.runtime.trials import check_reference, random_inputs
    ex = runtime.load_module(spec["lib"])
    _inject(spec.get("fault"))
    f = ex[spec.get("entry", "kernel")]
    args = random_inputs(spec["args"])
    outs = [np.zeros(shape, dtype) for shape, dtype in spec["outs"]]
    if spec.get("dps", True):
        call = lambda: f(*args, *outs)
        call()
    else:  # a relax function (strategy tasks): it returns its results
        call = lambda: f(*args)
        res = call()
        outs = [r.numpy() for r in (res if isinstance(res, (list, tuple)) else [res])]
    error = spec["ref"] and check_reference(outs, spec["ref"], may_write=True)
    if error:
        return {"error": error}
    # Warm-up: thread pools, page faults and caches settle before timing.
    start = time.perf_counter()
    for _ in range(spec["warmup"]):
        call()
        if time.perf_counter() - start > spec["min_s"]:
            break
    evict = _evictor(spec.get("flush_bytes", 0), spec.get("flush_threads", 1))
    times = []
    start = time.perf_counter()
    while len(times) < spec["repeats"] or (time.perf_counter() - start < spec["min_s"] and len(times) < 1000):
        evict()
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1e6)
    return {"times_us": times}


# Writes `nbytes` of scratch memory from `threads` threads (numpy drops the GIL in the loop),
# evicting the kernel's data from every core's caches before a timed call: in a model, a layer
# finds its weights evicted by the layers between its calls.
def _evictor(nbytes, threads):
    import numpy as np
    if not nbytes:
        return lambda: None
    parts = [np.zeros(nbytes // 4 // threads, np.float32) for _ in range(threads)]
    if threads == 1:
        return lambda: np.add(parts[0], 1.0, out=parts[0])
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(threads)
    return lambda: list(pool.map(lambda p: np.add(p, 1.0, out=p), parts))
"""

RUNNER = (
    _INJECT
    + _MEASURE
    + r"""
import json, sys
print(json.dumps(measure(json.loads(sys.stdin.read()))))
"""
)

# Shared by the two servers: the protocol goes to a private copy of stdout, and whatever the
# compiler or a kernel prints goes to stderr (the worker's log file, which the worker
# empties before each candidate so that a crash's last line is that candidate's).
_SERVER_IO = r"""
import json, os, sys
_proto = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

def _reply(result):
    _proto.write(json.dumps(result) + "\n")
    _proto.flush()

def _requests():
    for line in iter(sys.stdin.readline, ""):
        try:
            os.ftruncate(2, 0)
        except OSError:
            pass
        yield json.loads(line)
"""

# The fork server: numpy and the runtime imported once, with no thread started (numpy's
# OpenBLAS is loaded single-threaded; the runtime loads nothing at import), so forking is safe.
# Each candidate runs in a forked child the server kills on a hang; a child that dies without a
# result is a crash, its log's last line the message. The first reply is {"threads": n}.
RUNNER_SERVER = (
    _INJECT
    + _MEASURE
    + _SERVER_IO
    + r"""
import ctypes, select, signal, time, traceback
_blas = os.environ.get("OPENBLAS_NUM_THREADS")
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import numpy
from relaxmlir import runtime
import relaxmlir.runtime.trials  # measure's inputs and reference check
if _blas is None:
    del os.environ["OPENBLAS_NUM_THREADS"]  # the candidates' own BLAS keeps its threads
else:
    os.environ["OPENBLAS_NUM_THREADS"] = _blas
_reply({"threads": len(os.listdir("/proc/self/task"))})

def _tail(code):
    try:
        with open(sys.argv[1], "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        lines = []
    fatal = [l for l in lines if l.startswith("Fatal Python error")]
    return ((fatal or lines)[-1:] or [f"exit status {code}"])[0][:300]

for spec in _requests():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG: dies with the server
        except (OSError, AttributeError):
            pass
        try:
            out = json.dumps(measure(spec)).encode()
            while out:
                out = out[os.write(w, out):]
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
    os.close(w)
    data, result = b"", None
    deadline = time.monotonic() + spec["timeout_s"]
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([r], [], [], left)[0]:
            os.kill(pid, signal.SIGKILL)
            result = {"error": f"run: timeout after {spec['timeout_s']:g} s"}
            break
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if result is None:
        try:
            result = json.loads(data)
        except ValueError:
            code = os.waitstatus_to_exitcode(status)
            result = {"error": f"run: crashed ({code}): {_tail(code)}"}
    _reply(result)
"""
)

# Builds one candidate: compile the kernel with its knobs (or, for a strategy task, the module
# of one op call with the knob's implementation as its tuned choice for that workload, checked
# to be the choice LegalizeOps made: a call legalized otherwise would be timed under a wrong
# name), export it, return its signature or the error.
_BUILD = r"""
def build(spec):
    try:
        _inject(spec.get("fault"))
        from relaxmlir import relax
        from relaxmlir.ir import parse
        from relaxmlir.target import Target

        mod = parse(spec["func"])
        if spec.get("workload"):
            from relaxmlir.relax.op import strategy

            want = spec["knobs"]["strategy"]
            strategy.set_tuned_choices(mod.module.operation, {spec["workload"]: want})
            with strategy.record_choices() as seen:
                ex = relax.build(mod, Target(spec["target"]))
            got = [c.chosen for c in seen if c.key == spec["workload"]]
            if got != [want]:
                raise ValueError(f"the call was legalized with {got or 'no strategy'}, not {want}")
            info, extra = ex.infos["main"], {"dps": False, "entry": "main"}
        else:
            from lowering.schedule.space import set_knobs

            set_knobs(mod["kernel"].op, spec["knobs"])
            ex = relax.build(mod, Target(spec["target"]))
            info, extra = ex.infos["kernel"], {}
            if not info.destination_passing:
                raise ValueError("the kernel is not destination-passing")
        ex.export_library(spec["out"])
        return {
            "args": [[list(s.shape), s.dtype] for s in info.params],
            "outs": [[list(s.shape), s.dtype] for s in info.results],
            **extra,
        }
    except Exception as exc:
        return {"error": f"build: {type(exc).__name__}: {str(exc)[:500]}"}
"""

BUILDER = (
    _INJECT
    + _BUILD
    + r"""
import json, sys
print(json.dumps(build(json.loads(sys.stdin.read()))))
"""
)

# A long-lived builder: the compiler imported once, then one build per line of stdin.
BUILDER_SERVER = (
    _INJECT
    + _BUILD
    + _SERVER_IO
    + r"""
try:
    import lowering.schedule.space, relaxmlir.ir, relaxmlir.relax, relaxmlir.target  # noqa
    import relaxmlir.relax.op.strategy  # noqa
except Exception:
    pass  # each build reports it
_reply({"ready": True})
for spec in _requests():
    _reply(build(spec))
"""
)


def _quiet_env() -> dict:
    env = dict(os.environ)
    env["RELAXMLIR_CACHE"] = "0"  # candidates must not fill the user's compile cache
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def _fault(step: str, knobs: dict) -> str | None:
    return FAULT_HOOK(step, knobs) if FAULT_HOOK is not None else None


def run_candidate(
    lib: str,
    signature: dict,
    ref: str | None,
    timeout_s: float,
    repeats: int = 10,
    min_s: float = 0.05,
    fault: str | None = None,
    flush: tuple[int, int] = (0, 1),
    threads: int = 0,
) -> dict:
    """Time the exported kernel in a fresh process: {"times_us": [...]} or {"error": ...}."""
    spec = _run_spec(lib, signature, ref, repeats, min_s, fault, flush, threads)
    return _child(RUNNER, json.dumps(spec), timeout_s, "run")


def _run_spec(
    lib, signature, ref, repeats=10, min_s=0.05, fault=None, flush=(0, 1), threads=0
) -> dict:
    """`flush`: (bytes, threads) written before each timed call (0: caches stay warm);
    `threads`: the target's cores, the team size of every parallel runtime the candidate loads
    (0: their defaults)."""
    return {
        "lib": lib,
        "ref": ref,
        "repeats": repeats,
        "min_s": min_s,
        "warmup": 5,
        "fault": fault,
        "flush_bytes": flush[0],
        "flush_threads": flush[1],
        "threads": threads,
        **signature,
    }


def _threads(target: str) -> int:
    """The cores a CPU target's kernels are timed on: its num-cores. Our kernels are split for
    them at build time, but library kernels (the blas and dnnl strategies) would take every
    core of the machine and look faster than they will run."""
    from relaxmlir.target import Target

    t = Target(target)
    return t.num_cores if t.kind == "llvm" else 0


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
        tail = _last_line(proc.stderr.strip().splitlines(), proc.returncode)
        return {"error": f"{step}: crashed ({proc.returncode}): {tail}"}


def _last_line(lines: list[str], code: int) -> str:
    """What a crashed process's stderr says: the fatal error line of a native crash, else the
    last line (an exception's message)."""
    fatal = [line for line in lines if line.startswith("Fatal Python error")]
    return ((fatal or lines)[-1:] or [f"exit status {code}"])[0][:300]


def build_in_process(
    func_text: str,
    knobs: dict,
    target: str,
    out_path: str,
    timeout_s: float,
    workload: str = "",
    fault: str | None = None,
) -> dict:
    """Build a candidate in a fresh process (a crash or hang of the compiler is a record).
    `workload`: the key of a strategy task (`func_text` is then a relax module of its call)."""
    spec = _build_spec(func_text, knobs, target, out_path, workload, fault)
    return _child(BUILDER, json.dumps(spec), timeout_s, "build")


def _build_spec(func_text, knobs, target, out_path, workload="", fault=None) -> dict:
    return {
        "func": func_text,
        "knobs": knobs,
        "target": target,
        "out": out_path,
        "workload": workload,
        "fault": fault,
    }


class _Worker:
    """A long-lived process that answers JSON lines on stdin with JSON lines on stdout; its
    stderr goes to `log` (the last line of a crash's message)."""

    def __init__(self, program: str, log: str):
        self.log = log
        with open(log, "ab") as err:  # O_APPEND: the worker empties it before each request
            self.proc = subprocess.Popen(
                [sys.executable, "-c", program, log],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=_quiet_env(),
            )
        self.replies = JsonLines(self.proc.stdout)
        self.served = 0

    def send(self, request: dict) -> None:
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()

    def receive(self, timeout_s: float) -> dict | None:
        """The next reply; None after `timeout_s`; EOFError when the process ended."""
        return self.replies.next(timeout_s)

    def crash(self, step: str) -> str:
        code = self.proc.wait()
        try:
            with open(self.log, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 4096))
                lines = f.read().decode(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        return f"{step}: crashed ({code}): {_last_line(lines, code)}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()

    def close(self) -> None:
        """End it: EOF on its stdin (it exits between requests), killed if it does not."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class BuilderPool:
    """`size` long-lived builders (MLIR and relaxmlir imported once each), one candidate at a
    time each. A builder that crashes is replaced and only its candidate is a failed record: if
    it had built others before, the candidate is first rebuilt once on a fresh builder (the
    crash may be an earlier candidate's doing), so a record never carries another's fault. A
    build past its timeout kills its builder. Builders are replaced after `max_builds` builds,
    which bounds what a process can accumulate."""

    def __init__(self, size: int, folder: str, max_builds: int = 100):
        self.folder, self.max_builds, self.started = folder, max_builds, 0
        self.idle: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(size):
            self.idle.put(None)  # started on first use
        self.live: set[_Worker] = set()
        self.lock, self.closed = threading.Lock(), False
        self.threads = ThreadPoolExecutor(size)

    def submit(self, spec: dict, timeout_s: float):
        return self.threads.submit(self._build, spec, timeout_s)

    def _start(self) -> _Worker:
        with self.lock:
            if self.closed:  # close() came during a build: no new process
                raise OSError("the builder pool is closed")
            self.started += 1
            log = os.path.join(self.folder, f"builder-{self.started}.log")
            worker = _Worker(BUILDER_SERVER, log)
            self.live.add(worker)
            return worker

    def _retire(self, worker: _Worker, kill: bool) -> None:
        with self.lock:
            self.live.discard(worker)
        worker.kill() if kill else worker.close()

    def _wait_ready(self, worker: _Worker) -> dict | None:
        """Wait for a new builder's hello (its imports done), so that a build's timeout counts
        the build alone, not an interpreter starting on a loaded machine. None when it is
        ready; else the error record, the builder retired."""
        try:
            hello = worker.receive(START_TIMEOUT_S)
        except EOFError:
            message = worker.crash("build")
            self._retire(worker, kill=True)
            return {"error": message}
        if hello is None:
            self._retire(worker, kill=True)
            return {"error": f"build: the builder did not start in {START_TIMEOUT_S:g} s"}
        return None

    def _build(self, spec: dict, timeout_s: float) -> dict:
        worker = self.idle.get()
        try:
            for _ in range(3):
                if worker is not None and worker.served >= self.max_builds:
                    self._retire(worker, kill=False)
                    worker = None
                if worker is None:
                    try:
                        worker = self._start()
                    except OSError as exc:
                        return {"error": f"build: {exc}"}
                    started = self._wait_ready(worker)
                    if started is not None:
                        worker = None
                        return started
                fresh = worker.served == 0
                try:
                    worker.send(spec)
                except OSError:  # it died idle: the candidate never reached it
                    self._retire(worker, kill=True)
                    worker = None
                    continue
                try:
                    out = worker.receive(timeout_s)
                except EOFError:
                    message = worker.crash("build")
                    self._retire(worker, kill=True)
                    worker = None
                    if fresh:
                        return {"error": message}
                    continue
                if out is None:
                    self._retire(worker, kill=True)
                    worker = None
                    return {"error": f"build: timeout after {timeout_s:g} s"}
                worker.served += 1
                return out
            return {"error": "build: the builder process could not take the candidate"}
        finally:
            self.idle.put(worker)

    def close(self) -> None:
        """Kill every builder (a build in flight is abandoned) and stop the threads."""
        with self.lock:
            self.closed = True
            workers = list(self.live)
        self.threads.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            if worker.proc.poll() is None:
                worker.proc.kill()  # a build in flight ends; its thread retires the worker
        self.threads.shutdown(wait=True)
        while not self.idle.empty():
            worker = self.idle.get()
            if worker is not None:
                self._retire(worker, kill=True)


class ForkRunner:
    """The fork server (`RUNNER_SERVER`), started ahead of its first measurement. Should it not
    come up single-threaded (forking would be unsafe), candidates run in fresh processes."""

    def __init__(self, folder: str):
        self.folder, self.worker, self.ready, self.started = folder, None, False, 0

    def start(self) -> None:
        if self.worker is None:
            self.started += 1
            log = os.path.join(self.folder, f"runner-{self.started}.log")
            self.worker, self.ready = _Worker(RUNNER_SERVER, log), False

    def _usable(self) -> bool:
        self.start()
        if not self.ready:
            try:
                hello = self.worker.receive(START_TIMEOUT_S)
            except EOFError:
                hello = None
            if not hello or hello.get("threads") != 1:
                self.worker.kill()
                self.worker = None
                return False
            self.ready = True
        return True

    def run(self, spec: dict, timeout_s: float) -> dict:
        for attempt in range(2):
            if not self._usable():
                return _child(RUNNER, json.dumps(spec), timeout_s, "run")
            try:
                self.worker.send({**spec, "timeout_s": timeout_s})
                out = self.worker.receive(timeout_s + 60)  # the server times its child itself
            except (OSError, EOFError):
                out = None
            if out is not None:
                return out
            # The server died or stalled (never a candidate's doing: those run in its children).
            self.close()
        return {"error": "run: the runner process stopped twice"}

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def _workload(task) -> str:
    return task.key if getattr(task, "kind", "kernel") == "strategy" else ""


def build_and_run(
    func_text: str,
    knobs: dict,
    target: str,
    ref_npz: bytes | None,
    timeout_s: float,
    workload: str = "",
    flush: tuple[int, int] = (0, 1),
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
        out = run_candidate(lib, built, ref, timeout_s, flush=flush, threads=_threads(target))
        if ref_npz is None and "times_us" in out:
            with open(ref, "rb") as f:
                out["reference"] = f.read()
        return out


@dataclass
class Measurer:
    """The builders (`num_workers` long-lived processes) and the fork-server runner for one
    tuning run, or a Dask client; `close()` (also at exit) ends every process it started."""

    work_dir: str
    num_workers: int = 2
    timeout_s: float = 60.0
    distributed: str = ""  # a Dask scheduler address: builds and runs go to its workers
    build_timeout_s: float | None = None  # default: 4 x timeout_s
    # (bytes, threads) of scratch memory written before each timed call, so kernels run with
    # cold caches as the layers of a large model do (TVM's enable_cpu_cache_flush); 0: warm.
    flush: tuple[int, int] = (0, 1)

    def __post_init__(self):
        self.scratch = tempfile.mkdtemp(prefix="candidates-", dir=self.work_dir)
        self.count = 0
        self.client = self.builders = self.runner = None
        if self.distributed:
            try:
                from distributed import Client
            except ImportError as exc:
                raise ImportError("--distributed needs Dask: pip install distributed") from exc
            self.client = Client(self.distributed)
        else:
            self.builders = BuilderPool(max(1, self.num_workers), self.scratch)
            self.runner = ForkRunner(self.scratch)
        atexit.register(self.close)

    def __enter__(self) -> Measurer:  # noqa: PYI034 (typing.Self needs python 3.11)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def measure(self, task, candidates: list[dict], target: str) -> list[dict]:
        """[{"knobs", "times_us" | "error"}] for each candidate of `task`, in order."""
        return [rounds[0] for rounds in self.compare(task, candidates, target, rounds=1)]

    def compare(self, task, candidates: list[dict], target: str, rounds: int) -> list[list[dict]]:
        """Each candidate built once and timed `rounds` times, the candidates taking turns
        (a, b, a, b, ...) so that a change of machine state falls on all of them alike:
        for each candidate, its `rounds` results ({"knobs", "times_us" | "error"})."""
        ref = os.path.join(self.work_dir, f"reference-{task.key}.npz")
        if self.client is not None:
            per_round = [
                self._measure_distributed(task, candidates, target, ref) for _ in range(rounds)
            ]
            return [list(r) for r in zip(*per_round)]
        self.runner.start()  # its imports overlap the builds
        build_timeout = self.build_timeout_s or self.timeout_s * 4
        jobs = []
        for knobs in candidates:
            self.count += 1
            lib = os.path.join(self.scratch, f"c{self.count}.so")
            spec = _build_spec(
                task.func_text, knobs, target, lib, _workload(task), _fault("build", knobs)
            )
            jobs.append((knobs, lib, self.builders.submit(spec, build_timeout)))
        # All builds finish before the first measurement: a build running beside a measurement
        # would take the cores it is timed on.
        built_all = [job.result() for _, _, job in jobs]
        results: list[list[dict]] = [[] for _ in candidates]
        threads = _threads(target)
        for _ in range(rounds):
            for i, ((knobs, lib, _), built) in enumerate(zip(jobs, built_all)):
                if "error" in built:
                    results[i].append({"knobs": knobs, "error": built["error"]})
                    continue
                # The default schedule writes the reference the others are checked against.
                is_default = knobs == task.default_knobs()
                if not is_default and not os.path.exists(ref):
                    error = "no reference result (the default schedule failed)"
                    results[i].append({"knobs": knobs, "error": error})
                    continue
                spec = _run_spec(
                    lib, built, ref, fault=_fault("run", knobs), flush=self.flush, threads=threads
                )
                results[i].append({"knobs": knobs, **self.runner.run(spec, self.timeout_s)})
        for _, lib, _ in jobs:
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
                tuple(self.flush),
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
        atexit.unregister(self.close)
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.builders is not None:
            self.builders.close()
            self.runner.close()
            self.builders = self.runner = None
        shutil.rmtree(self.scratch, ignore_errors=True)
