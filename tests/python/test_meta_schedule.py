"""Tuning (`rm.meta_schedule`): database, knobs, the tuning loop, applying records.

Numerics of tuned builds against numpy, float32, rtol=1e-4, atol=1e-4 (fixed seeds).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from mlp_models import mlp, params, reference

import relaxmlir as rm
from lowering.schedule.space import TUNED_ATTR
from relaxmlir import meta_schedule as ms
from relaxmlir import relax
from relaxmlir.meta_schedule.database import RECORDS, JSONDatabase
from relaxmlir.meta_schedule.measure import run_candidate
from relaxmlir.meta_schedule.task import Task
from relaxmlir.target import Target

RTOL = ATOL = 1e-4


def _mlp(batch=64):
    return relax.transform.BindParams("main", params())(mlp("tir", batch))


def test_database_resumes_and_keeps_targets_apart(tmp_path):
    db = JSONDatabase(str(tmp_path))
    db.commit_workload("k1", "llvm -mcpu=a", name="mm", flops=10, knobs={})
    db.commit_record("k1", "llvm -mcpu=a", {"mr": 4}, [3.0, 1.0, 2.0], None)
    db.commit_record("k1", "llvm -mcpu=a", {"mr": 8}, [], "build: boom")
    db.commit_record("k1", "llvm -mcpu=b", {"mr": 6}, [0.5], None)
    with open(tmp_path / RECORDS, "a") as f:
        f.write('{"key": "k1", "target": "llvm -mcpu=a", "kno')  # an interrupted write
    again = JSONDatabase(str(tmp_path))
    assert len(again) == 3
    assert again.best("k1", "llvm -mcpu=a")["knobs"] == {"mr": 4}
    assert again.best("k1", "llvm -mcpu=a")["median_us"] == 2.0
    assert again.best_knobs("llvm -mcpu=a") == {"k1": {"mr": 4}}
    assert again.best_knobs("llvm -mcpu=c") == {}
    lines = (tmp_path / RECORDS).read_text().splitlines()
    assert json.loads(lines[1])["error"] == "build: boom"
    with pytest.raises(ValueError, match="work_dir"):
        JSONDatabase("")


class _FakeMeasurer:
    """compare() answers fixed medians: the default's, then the candidate's."""

    def __init__(self, default_us, candidate_us):
        self.us = (default_us, candidate_us)
        self.calls = 0

    def compare(self, task, candidates, target, rounds):
        self.calls += 1
        return [[{"knobs": k, "times_us": [us]}] * rounds for k, us in zip(candidates, self.us)]


def test_confirmation_keeps_a_candidate_only_when_it_beats_the_default(tmp_path):
    """The searched best is timed again against the default, in turns: within the margin the
    default is what the build applies; a later, faster record needs its own confirmation."""
    from relaxmlir.meta_schedule.tune import CONFIRM_MARGIN, confirm

    # nothing runs (the measurer is fake): AVX-512's space, whose register tile of 8 rows has
    # two other heights (4, 6) on every machine
    target = Target("llvm -mcpu=x86-64-v4")
    task = ms.extract_tasks(_mlp(16), target)[0]
    tstr = str(target)
    default = task.default_knobs()
    others = [v for v in task.space["matmul.mr"].values if v != default["matmul.mr"]]
    lucky, better = ({**default, "matmul.mr": v} for v in others[:2])
    db = JSONDatabase(str(tmp_path))
    db.commit_record(task.key, tstr, default, [100.0], None)
    db.commit_record(task.key, tstr, lucky, [80.0], None)  # the luckiest of the search
    assert db.best_knobs(tstr) == {task.key: lucky}  # unconfirmed: the fastest record
    within = 100.0 * (1 - CONFIRM_MARGIN / 2)
    decision = confirm(db, _FakeMeasurer(100.0, within), task, tstr)
    assert decision["knobs"] == default and decision["candidate"] == lucky
    assert JSONDatabase(str(tmp_path)).best_knobs(tstr) == {task.key: default}
    assert confirm(db, _FakeMeasurer(100.0, 1.0), task, tstr) is None  # confirmed already
    db.commit_record(task.key, tstr, better, [70.0], None)
    assert db.best_knobs(tstr) == {task.key: better}  # the decision was about another record
    decision = confirm(db, _FakeMeasurer(100.0, 90.0), task, tstr)
    assert decision["knobs"] == better and decision["candidate_us"] == 90.0
    assert JSONDatabase(str(tmp_path)).best_knobs(tstr) == {task.key: better}


def test_compare_takes_turns_with_cold_caches(tmp_path):
    """Measurer.compare builds each candidate once and times it once per round; with a cache
    flush (written from two threads before every timed call) the times stay valid."""
    from relaxmlir.meta_schedule.measure import Measurer

    task = ms.extract_tasks(_mlp(16), Target("llvm"))[1]
    knobs = task.default_knobs()
    with Measurer(str(tmp_path), 1, timeout_s=30, flush=(1 << 20, 2)) as m:
        rounds = m.compare(task, [knobs, knobs], str(Target("llvm")), rounds=2)
        assert m.count == 2  # two builds for four timings
    assert [len(r) for r in rounds] == [2, 2]
    assert all(len(r["times_us"]) >= 10 and r["knobs"] == knobs for rs in rounds for r in rs)


def test_candidates_are_timed_on_the_targets_cores(tmp_path, monkeypatch):
    """Our kernels are split for the target's cores at build time, but library kernels (the
    blas and dnnl strategies) would take every core of the machine: each candidate is timed
    with the parallel runtimes' team size set to the target's num-cores."""
    from relaxmlir.meta_schedule import measure

    specs = []
    real = measure.ForkRunner.run

    def spy(self, spec, timeout_s):
        specs.append(spec)
        return real(self, spec, timeout_s)

    monkeypatch.setattr(measure.ForkRunner, "run", spy)
    target = Target({"kind": "llvm", "num-cores": 1})
    task = ms.extract_tasks(_mlp(16), target)[1]
    with measure.Measurer(str(tmp_path), 1, timeout_s=30) as m:
        (result,) = m.measure(task, [task.default_knobs()], str(target))
    assert "times_us" in result and [s["threads"] for s in specs] == [1]
    assert "RELAXMLIR_NUM_THREADS" in measure._MEASURE  # what the runner sets from it
    assert measure._threads(str(Target({"kind": "llvm", "num-cores": 3}))) == 3
    assert measure._threads("cuda") == 0  # GPU candidates: the trials runner's business


def test_tasks_have_knobs_and_keys():
    tasks = ms.extract_tasks(_mlp(), Target("llvm"))
    assert len(tasks) == 2 and tasks[0].flops > tasks[1].flops
    assert {"matmul.mr", "matmul.cache_rows", "matmul.cache_cols"} <= set(tasks[0].space)
    # 64 x 128 outputs: whole 8 x 32 tiles, so C may also accumulate in place
    assert tasks[0].space["matmul.c_layout"].values == ("packed", "inplace")
    assert tasks[0].default_knobs()["matmul.mr"] == tasks[0].space["matmul.mr"].default
    other = ms.extract_tasks(_mlp(), Target("llvm -mcpu=x86-64-v3"))
    assert {t.key for t in tasks}.isdisjoint(t.key for t in other)  # keys carry the target
    gpu = ms.extract_tasks(_mlp(), Target("cuda"))  # the GPU rules' knobs (test_trials.py)
    assert gpu and all(set(t.space) >= {"gpu.matmul.tile", "gpu.matmul.splits"} for t in gpu)


def test_tune_apply_and_resume(tmp_path, capsys):
    mod = _mlp()
    target = Target("llvm")
    db = ms.tune_tir(mod, target, str(tmp_path), max_trials_global=5, max_trials_per_task=4)
    assert len(db) == 5
    assert all(r["error"] is None for recs in db.records.values() for r in recs)
    assert capsys.readouterr().err == ""  # no progress bar when stderr is not a terminal
    again = ms.tune_tir(mod, target, str(tmp_path), max_trials_global=5, max_trials_per_task=4)
    assert len(again) == 5  # everything was measured already: nothing new
    tuned = ms.apply_database(mod, str(tmp_path), target)
    from mlir import ir

    table = json.loads(ir.StringAttr(tuned.module.operation.attributes[TUNED_ATTR]).value)
    assert set(table) == {k for k, _ in db.records}
    x = np.random.default_rng(0).standard_normal((64, 784), dtype=np.float32)
    vm = relax.VirtualMachine(relax.build(tuned, target), rm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, params()), rtol=RTOL, atol=ATOL)


def test_failed_candidates_are_records(tmp_path):
    task = ms.extract_tasks(_mlp(), Target("llvm"))[1]
    bad = Task(task.key, task.name, task.func_text, dict(task.space), 1, task.flops)
    from lowering.schedule.space import Knob

    bad.space["matmul.mr"] = Knob(
        "matmul.mr", (task.space["matmul.mr"].default, 99), task.space["matmul.mr"].default
    )
    bad.space = {"matmul.mr": bad.space["matmul.mr"]}
    db = ms.tune_tasks([bad], Target("llvm"), str(tmp_path), max_trials_global=2)
    errors = [r["error"] for r in db.records_of(task.key, str(Target("llvm")))]
    assert errors[0] is None and "matmul.mr=99" in errors[1]
    assert (
        "crashed"
        in run_candidate(str(tmp_path / "missing.so"), {"args": [], "outs": []}, None, 30)["error"]
    )


def test_tuning_passes_under_a_target(tmp_path):
    target = Target("llvm")
    with target:
        mod = rm.transform.Sequential(
            [
                relax.get_pipeline("zero"),
                relax.transform.MetaScheduleTuneTIR(work_dir=str(tmp_path), max_trials_global=2),
                relax.transform.MetaScheduleApplyDatabase(work_dir=str(tmp_path)),
            ]
        )(_mlp(8))
    assert TUNED_ATTR in mod.module.operation.attributes
    x = np.random.default_rng(1).standard_normal((8, 784), dtype=np.float32)
    vm = relax.VirtualMachine(relax.build(mod, target), rm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, params()), rtol=RTOL, atol=ATOL)


def test_relaxmlir_tune_script(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    model = tmp_path / "mlp.mlir"
    model.write_text(_mlp(16).script())
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            sys.executable,
            str(root / "scripts" / "relaxmlir-tune"),
            str(model),
            "--trials",
            "2",
            "--work-dir",
            str(tmp_path / "wd"),
            "--cache-flush",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 kernel(s) to tune" in proc.stderr and "best" in proc.stdout
    assert len(JSONDatabase(str(tmp_path / "wd"))) == 2
    bad = subprocess.run(
        [
            sys.executable,
            str(root / "scripts" / "relaxmlir-tune"),
            str(model),
            "--trials",
            "0",
            "--work-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1 and "positive counts" in bad.stderr


def test_distributed_tuning_on_a_local_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        db = ms.tune_tir(
            _mlp(16),
            Target("llvm"),
            str(tmp_path),
            max_trials_global=3,
            distributed=cluster.scheduler_address,
        )
    records = [r for recs in db.records.values() for r in recs]
    assert len(records) == 3 and all(r["error"] is None for r in records), records
    assert list(tmp_path.glob("reference-*.npz"))  # the defaults' outputs came back as references


# -- the strategy choice as a knob -------------------------------------------------------------


def _conv_relu():
    """A stride-2 conv whose weight is a parameter (NCHW: the channel-blocked layout is for
    constant weights), so conv2d_nchw.direct, .im2col (and .dnnl when installed) all apply."""
    x = relax.Var("x", relax.TensorStructInfo((1, 8, 12, 12), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((16, 8, 3, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(relax.op.nn.conv2d(x, w, strides=2, padding=1))
            gv = bb.emit_output(bb.emit(relax.op.nn.relu(lv)))
        bb.emit_func_output(gv)
    return bb.get()


def _check_conv(mod, target):
    import torch

    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 8, 12, 12), dtype=np.float32)
    w = rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    got = relax.VirtualMachine(relax.build(mod, target), rm.cpu())["main"](x, w).numpy()
    want = torch.relu(
        torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=2, padding=1)
    )
    np.testing.assert_allclose(got, want.numpy(), rtol=RTOL, atol=ATOL)


def test_strategy_choice_is_tuned_and_applied(tmp_path, capfd, monkeypatch):
    from lowering.cache import module_digest
    from relaxmlir.meta_schedule.database import WORKLOADS
    from relaxmlir.relax.op import strategy

    target = Target("llvm")
    mod = _conv_relu()
    tasks = ms.extract_tasks(mod, target)
    assert sorted(t.kind for t in tasks) == ["kernel", "strategy"]
    task = next(t for t in tasks if t.kind == "strategy")
    knob = task.space["strategy"]
    assert knob.default == "conv2d_nchw.direct" and "conv2d_nchw.im2col" in knob.values
    assert "conv2d_nchw_1x1.contraction" not in knob.values  # its condition is false here
    db = ms.tune_tir(mod, target, str(tmp_path), max_trials_global=6, max_trials_per_task=3)
    records = db.records_of(task.key, str(target))
    assert {r["knobs"]["strategy"] for r in records} == set(knob.values), records
    assert all(r["error"] is None and r["median_us"] > 0 for r in records), records
    # What the build applies: the fastest record, once it beat the default again in turns
    # (tune.confirm), else the default implementation.
    fastest = min(records, key=lambda r: r["median_us"])["knobs"]["strategy"]
    decision = db.decision(task.key, str(target))
    assert (decision is None) == (fastest == knob.default), records
    if decision is not None:
        assert decision["candidate"] == {"strategy": fastest}
        fastest = decision["knobs"]["strategy"]
    assert db.best_strategies(str(target)) == {task.key: fastest}, records
    assert task.key not in db.best_knobs(str(target))  # the kernels' table stays the kernels'
    kinds = {w["kind"] for w in map(json.loads, (tmp_path / WORKLOADS).read_text().splitlines())}
    assert kinds == {"kernel", "strategy"}

    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    capfd.readouterr()
    tuned = ms.apply_database(mod, str(tmp_path), target)
    _check_conv(tuned, target)
    err = capfd.readouterr().err
    assert re.search(
        rf"{re.escape(fastest)} \(plevel \d+; tuned choice, workload {task.key};", err
    ), err

    # A record that makes another implementation the fastest, confirmed against the default:
    # the build takes it (and says so), under another compile-cache key (the table is a module
    # attribute, in the module's digest).
    other = next(n for n in ("conv2d_nchw.im2col", "conv2d_nchw.direct") if n != fastest)
    db.commit_record(task.key, str(target), {"strategy": other}, [1e-3], None)
    db.commit_decision(task.key, str(target), {"strategy": other}, {"strategy": other}, 2.0, 1.0)
    retuned = ms.apply_database(mod, str(tmp_path), target)
    assert module_digest(retuned.module) != module_digest(tuned.module)
    _check_conv(retuned, target)
    err = capfd.readouterr().err
    assert re.search(
        rf"{re.escape(other)} \(plevel \d+; tuned choice, workload {task.key};", err
    ), err

    # The user's forced choice wins over the tuned one.
    with rm.transform.PassContext(config={strategy.FORCE_CONFIG: {"relax.nn.conv2d": fastest}}):
        _check_conv(ms.apply_database(mod, str(tmp_path), target), target)
    err = capfd.readouterr().err
    assert re.search(rf"{re.escape(fastest)} \(plevel \d+; forced by PassContext config", err), err


def test_strategy_records_of_another_target_are_ignored(tmp_path, capfd, monkeypatch):
    from relaxmlir.relax.op import strategy

    host, other = Target("llvm"), Target("llvm -mcpu=x86-64-v3")
    mod = _conv_relu()
    key = next(t.key for t in ms.extract_tasks(mod, host) if t.kind == "strategy")
    db = JSONDatabase(str(tmp_path))
    db.commit_record(key, str(other), {"strategy": "conv2d_nchw.im2col"}, [1e-3], None)
    assert db.best_strategies(str(host)) == {}
    monkeypatch.setenv(strategy.PRINT_STRATEGY_ENV, "1")
    # Applied for the other target, the record's key (the host's workload) matches no call.
    with other:
        tuned = rm.transform.Sequential(
            [relax.transform.MetaScheduleApplyDatabase(work_dir=str(tmp_path))]
        )(mod)
    assert strategy.tuned_choices(tuned.module.operation) == {key: "conv2d_nchw.im2col"}
    relax.build(tuned, other)
    err = capfd.readouterr().err
    assert "conv2d_nchw.direct (plevel 10; condition NCHW data; others:" in err
    assert "tuned choice" not in err


def test_strategy_task_keeps_folded_weights_constant():
    """A Linear's weight reaches the matmul through a transpose of a constant, which the build
    folds: the candidate module has it as a constant (implementations such as dnnl prepare
    constant weights once), the activations as a parameter."""
    import torch

    from relaxmlir.frontend import from_fx
    from relaxmlir.relax.backend import blas

    if not blas.is_available():
        pytest.skip("one matmul implementation without BLAS: no choice to tune")
    torch.manual_seed(8)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32)).eval()
    mod = from_fx(torch.fx.symbolic_trace(model), [(4, 64)], keep_params_as_input=False)
    (task,) = [t for t in ms.extract_tasks(mod, Target("llvm")) if t.kind == "strategy"]
    assert task.space["strategy"].values[:2] == ("matmul.packed", "matmul.blas")
    assert '"relax.constant"() {value = dense<' in task.func_text
    assert "func.func @main(%arg0: tensor<4x64xf32>" in task.func_text
    assert "%arg1" not in task.func_text


def test_strategy_candidate_not_legalized_as_named_is_a_failed_record(tmp_path):
    """A candidate whose call LegalizeOps did not build with the named implementation (here a
    name no strategy offers) is a failed record, never a timing under the wrong name."""
    from lowering.schedule.space import Knob

    target = Target("llvm")
    task = next(t for t in ms.extract_tasks(_conv_relu(), target) if t.kind == "strategy")
    default = task.space["strategy"].default
    task.space = {"strategy": Knob("strategy", (default, "conv2d_nchw.nope"), default)}
    db = ms.tune_tasks([task], target, str(tmp_path), max_trials_global=2)
    errors = {r["knobs"]["strategy"]: r["error"] for r in db.records_of(task.key, str(target))}
    assert errors[default] is None
    assert (
        "legalized with ['conv2d_nchw.direct'], not conv2d_nchw.nope" in errors["conv2d_nchw.nope"]
    )
    assert db.best_strategies(str(target)) == {task.key: default}


# -- builders and runner: long-lived processes, faults isolated ------------------------------


def _faults(monkeypatch, plan: dict):
    """Inject `plan[(step, i)]` ("crash", "hang", "poison") into the i-th build or run."""
    from relaxmlir.meta_schedule import measure

    seen = {"build": 0, "run": 0}

    def hook(step, knobs):
        seen[step] += 1
        return plan.get((step, seen[step] - 1))

    monkeypatch.setattr(measure, "FAULT_HOOK", hook)


def test_builder_crash_and_hang_keep_the_rest_of_the_round(tmp_path, monkeypatch):
    from relaxmlir.meta_schedule.measure import Measurer

    task = ms.extract_tasks(_mlp(16), Target("llvm"))[1]
    _faults(monkeypatch, {("build", 1): "crash", ("build", 2): "hang"})
    with Measurer(str(tmp_path), 2, timeout_s=30, build_timeout_s=4) as m:
        results = m.measure(task, [task.default_knobs()] * 6, str(Target("llvm")))
        builders = [w.proc for w in m.builders.live]
        # The crashed and the hung builder were killed; a replacement starts when needed.
        assert m.builders.started >= 3 and len(builders) <= 2
    errors = [r.get("error") for r in results]
    assert errors[1].startswith("build: crashed (-6): Fatal Python error: Aborted"), errors
    assert errors[2] == "build: timeout after 4 s", errors
    assert errors[:1] + errors[3:] == [None] * 4, errors
    assert all(len(r["times_us"]) >= 10 for i, r in enumerate(results) if i not in (1, 2))
    assert builders and all(p.poll() is not None for p in builders)  # none outlives close()


def test_timeouts_count_from_the_hand_over_not_the_process_start(tmp_path, monkeypatch):
    """Builders and the fork server that take 2 s to start (a loaded machine) still build and
    run a candidate under a 1 s timeout: they say when they are ready."""
    from relaxmlir.meta_schedule.measure import Measurer

    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text("import time\ntime.sleep(2)\n")
    monkeypatch.setenv("PYTHONPATH", str(slow))
    task = ms.extract_tasks(_mlp(16), Target("llvm"))[1]
    with Measurer(str(tmp_path), 1, timeout_s=1, build_timeout_s=1) as m:
        results = m.measure(task, [task.default_knobs()] * 2, str(Target("llvm")))
    assert [r.get("error") for r in results] == [None, None], results


def test_builder_crash_caused_earlier_is_not_blamed_on_the_next_candidate(tmp_path, monkeypatch):
    """A build that leaves its builder broken (it aborts at its next build): the next candidate
    is rebuilt on a fresh builder and measured; no record carries the fault."""
    from relaxmlir.meta_schedule.measure import Measurer

    task = ms.extract_tasks(_mlp(16), Target("llvm"))[1]
    _faults(monkeypatch, {("build", 1): "poison"})
    with Measurer(str(tmp_path), 1, timeout_s=30) as m:
        results = m.measure(task, [task.default_knobs()] * 3, str(Target("llvm")))
        assert m.builders.started == 2
    assert [r.get("error") for r in results] == [None] * 3, results


def test_runner_child_hang_and_crash_are_records_and_the_next_runs(tmp_path, monkeypatch):
    from relaxmlir.meta_schedule.measure import Measurer

    task = ms.extract_tasks(_mlp(16), Target("llvm"))[1]
    _faults(monkeypatch, {("run", 1): "hang", ("run", 2): "crash"})
    with Measurer(str(tmp_path), 2, timeout_s=3) as m:
        results = m.measure(task, [task.default_knobs()] * 4, str(Target("llvm")))
        assert m.runner.started == 1  # one fork server served all four
        server = m.runner.worker.proc
    errors = [r.get("error") for r in results]
    assert errors[1] == "run: timeout after 3 s", errors
    assert errors[2].startswith("run: crashed (-6): Fatal Python error: Aborted"), errors
    assert errors[0] is None and errors[3] is None, errors
    assert server.poll() is not None


def test_closing_the_builders_mid_build_leaves_no_process(tmp_path):
    import time

    from relaxmlir.meta_schedule.measure import BuilderPool

    pool = BuilderPool(1, str(tmp_path))
    job = pool.submit({"fault": "hang"}, 600)
    while not pool.live:
        time.sleep(0.05)
    (worker,) = pool.live
    start = time.monotonic()
    pool.close()
    assert time.monotonic() - start < 30
    assert job.result()["error"].startswith("build: crashed (-9)"), job.result()
    assert worker.proc.poll() is not None and not pool.live
