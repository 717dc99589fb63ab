"""Tuning (`rm.meta_schedule`): database, knobs, the tuning loop, applying records.

Numerics of tuned builds against numpy, float32, rtol=1e-4, atol=1e-4 (fixed seeds).
"""

from __future__ import annotations

import json

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


def test_tasks_have_knobs_and_keys():
    tasks = ms.extract_tasks(_mlp(), Target("llvm"))
    assert len(tasks) == 2 and tasks[0].flops > tasks[1].flops
    assert {"matmul.mr", "matmul.cache_rows", "matmul.cache_cols"} <= set(tasks[0].space)
    assert tasks[0].default_knobs()["matmul.mr"] == tasks[0].space["matmul.mr"].default
    other = ms.extract_tasks(_mlp(), Target("llvm -mcpu=x86-64-v3"))
    assert {t.key for t in tasks}.isdisjoint(t.key for t in other)  # keys carry the target
    with pytest.raises(ValueError, match="only llvm targets"):
        ms.extract_tasks(_mlp(), Target("cuda"))


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
