"""Tuning where the device is another machine: candidates exported here
(`rm.meta_schedule.export_trials`), timed by the MLIR-free runner
(`python -m relaxmlir.runtime.trials`), read back (`import_trials`); and the knobs of the GPU
Matmul rule that make cuda kernels tunable at all.

Numerics of tuned builds against numpy, float32, rtol=1e-4, atol=1e-4 (fixed seeds).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mlp_models import mlp, params, reference
from test_runtime import BLOCK_MLIR

import relaxmlir as rm
from lowering.schedule.space import set_tuned_table
from relaxmlir import meta_schedule as ms
from relaxmlir import relax
from relaxmlir.meta_schedule.database import JSONDatabase
from relaxmlir.runtime import trials
from relaxmlir.runtime.library import _image_end
from relaxmlir.target import Target

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _matmul_f16(m=512, n=512, k=1024):
    a = relax.Var("a", relax.TensorStructInfo((m, k), "float16"))
    b = relax.Var("b", relax.TensorStructInfo((k, n), "float16"))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.relu(relax.op.matmul(a, b)))
        bb.emit_func_output(out)
    return bb.get()


def _runner(folder, env_extra: dict | None = None, blocker: Path | None = None, timeout=60):
    """`python -m relaxmlir.runtime.trials folder` in a child process; with `blocker`, a
    folder whose sitecustomize makes `import mlir` fail in it and in its own children."""
    env = dict(os.environ)
    paths = [str(blocker)] if blocker else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT)])
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "relaxmlir.runtime.trials", str(folder), "--timeout", str(timeout)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip


def test_neighbours_change_each_knob_once_before_any_twice():
    """The one-shot export's first candidates after the default (search.neighbours)."""
    import random
    from types import SimpleNamespace

    from lowering.schedule.space import Knob
    from relaxmlir.meta_schedule.search import neighbours

    task = SimpleNamespace(space={"a": Knob("a", (1, 2, 3), 1), "b": Knob("b", ("x", "y"), "x")})
    around = {"a": 1, "b": "x"}
    got = neighbours(task, around, random.Random(0))
    assert len(got) == 3 and all(sum(k[n] != around[n] for n in around) == 1 for k in got)
    assert [next(n for n in around if k[n] != around[n]) for k in got] == ["a", "b", "a"]
    assert {k["a"] for k in got if k["a"] != 1} == {2, 3}


def test_cuda_kernels_have_gpu_knobs_whose_default_is_the_default_schedule():
    """A cuda matmul task declares the Matmul rule's knobs (tile config, K splits, ring
    length); the default point builds the very kernel the rules choose alone, and another point
    changes the kernel as asked (the large tile, no split, a ring of 2)."""
    mod = _matmul_f16()
    target = Target("cuda")
    (task,) = ms.extract_tasks(mod, target)
    assert set(task.space) == {"gpu.matmul.tile", "gpu.matmul.splits", "gpu.matmul.stages"}
    tiles = task.space["gpu.matmul.tile"].values
    assert tiles[:3] == (
        "mma128x256/64x64",
        "mma128x128/64x32",
        "mma64x64/32x32",
    )  # the heuristic's
    assert "mma128x64/64x32" in tiles and "mma128x128/64x64" in tiles  # tuning only
    default = task.default_knobs()
    assert default == {
        "gpu.matmul.tile": "mma64x64/32x32",  # 64 blocks of 64x64 ...
        "gpu.matmul.splits": 4,  # ... split 4 ways over K = 1024 to fill the GPU
        "gpu.matmul.stages": 0,
    }
    assert task.key not in {t.key for t in ms.extract_tasks(mod, Target("cuda -arch=sm_80"))}

    def lowered(knobs: dict | None) -> str:
        tuned = mod.clone()
        if knobs is not None:
            set_tuned_table(tuned.module.operation, {task.key: knobs})
        text = str(relax.build(tuned, target).lowered)
        text = text.split("\n", 1)[1]  # less the module's attributes (the tuned table)
        return re.sub(r"\w+TimeInMs = \d+", "", text)  # and the compile times it records

    plain = lowered(None)
    assert lowered(default) == plain
    other = lowered({**default, "gpu.matmul.tile": "mma128x128/64x32", "gpu.matmul.splits": 1,
                     "gpu.matmul.stages": 2})  # fmt: skip
    # the ring's dynamic shared memory: 2 x (128x40 + 32x136) f16 = 37888 bytes against the
    # default's 4 x (64x40 + 32x72) = 38912
    assert "37888 : i32" in other and "38912 : i32" in plain
    assert other.count("gpu.launch_func") == 1 < plain.count("gpu.launch_func")  # no fold kernel


def test_trials_exported_timed_without_mlir_and_imported(tmp_path):
    """The whole route on this CPU: candidates built and exported, timed by the runner in
    processes that cannot import mlir (one library corrupted, one that hangs as it loads:
    failed records, the measuring process replaced, the rest go on), each task's fastest timed
    again against its default, read back into the database; the tuned build computes the
    MLP's result."""
    mod = relax.transform.BindParams("main", params())(mlp("tir", 64))
    target = Target("llvm")
    work, folder = tmp_path / "work", tmp_path / "trials"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")
    with pytest.raises(ValueError, match="holds files and no trials.json"):
        ms.export_trials(mod, target, str(work), str(tmp_path / "mine"), 6)
    path = ms.export_trials(mod, target, str(work), str(folder), 6, max_trials_per_task=3)
    manifest = json.loads(Path(path).read_text())
    assert manifest["device"] == "cpu" and manifest["target"] == str(target)
    assert [len(t["candidates"]) for t in manifest["tasks"]] == [3, 3]
    first = manifest["tasks"][0]
    default = ms.extract_tasks(mod, target)[0].default_knobs()
    assert first["candidates"][0]["knobs"] == default
    # then the default's neighbours: one knob changed each, no knob twice before all once
    changed = [
        [name for name, v in c["knobs"].items() if default[name] != v]
        for c in first["candidates"][1:]
    ]
    assert [len(c) for c in changed] == [1, 1] and changed[0] != changed[1]
    (folder / first["candidates"][2]["lib"]).write_bytes(b"not a library")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is not None:  # a library whose loading never ends
        hang = tmp_path / "hang.c"
        hang.write_text(
            "#include <unistd.h>\n__attribute__((constructor)) static void f(void) { sleep(600); }\n"
        )
        lib = folder / first["candidates"][1]["lib"]
        with open(lib, "rb") as f:  # the exported library's metadata trailer, kept
            trailer = f.read()[_image_end(f) :]
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(hang)], check=True)
        with open(lib, "ab") as f:
            f.write(trailer)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_MLIR)
    run = _runner(folder, blocker=blocker, timeout=3)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [json.loads(x) for x in (folder / trials.RESULTS).read_text().splitlines()]
    records = [r for r in lines if "decision" not in r]
    failed = {json.dumps(r["knobs"], sort_keys=True): r["error"] for r in records if "error" in r}
    assert len(records) == 6 and len(failed) == (2 if cc else 1), failed
    assert "run: " in failed[json.dumps(first["candidates"][2]["knobs"], sort_keys=True)]
    if cc:
        assert "timeout" in failed[json.dumps(first["candidates"][1]["knobs"], sort_keys=True)]
    assert sum("decision" in r for r in lines) == 2
    lost = next(r for r in records if "error" not in r)  # as if its line had not been written
    kept = [x for x in (folder / trials.RESULTS).read_text().splitlines() if json.loads(x) != lost]
    (folder / trials.RESULTS).write_text("\n".join(kept) + "\n")
    with open(folder / trials.RESULTS, "a") as f:
        f.write('{"key": "cut short by an interrupted ru')  # no newline: the run was killed
    again = _runner(folder, blocker=blocker)  # only the missing candidate runs again
    assert again.returncode == 0 and len(trials.read_results(str(folder))) == 8
    db = ms.import_trials(str(work), str(folder))
    assert len(db) == 6
    assert len(ms.import_trials(str(work), str(folder))) == 6  # importing twice adds nothing
    tuned = ms.apply_database(mod, str(work), target)
    x = np.random.default_rng(0).standard_normal((64, 784)).astype("float32")
    vm = relax.VirtualMachine(relax.build(tuned, target), rm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, params()), rtol=1e-4, atol=1e-4)


def test_measuring_process_start_is_not_a_candidates_timeout(tmp_path, monkeypatch):
    """A measuring process that takes 2 s to start: a 1 s timeout still reaches the candidate
    (here a library that is not there: its own error, not a timeout)."""
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text("import time\ntime.sleep(2)\n")
    monkeypatch.setenv("PYTHONPATH", str(slow))
    runner = trials._Runner(str(tmp_path / "runner.log"))
    try:
        spec = {"device": "cpu", "lib": str(tmp_path / "missing.so"), "args": [], "outs": []}
        out = runner.run(spec, 1.0)
    finally:
        runner.close()
    assert out["error"].startswith("run: ") and "timeout" not in out["error"], out
    assert "missing.so" in out["error"], out


def test_cuda_trials_over_a_stand_in_driver(tmp_path):
    """cuda candidates exported here run through the runner's GPU path (device arrays,
    batches of launches, a synchronization each) over the stand-in libcuda of
    test_cuda_host (launches are counted, not run: the times mean nothing); the records come
    back under the cuda target. Tuning for cuda in one call needs a GPU here: without one it
    says how to take this route instead."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the stand-in libcuda")
    fake = tmp_path / "fake"
    fake.mkdir()
    subprocess.run(
        [cc, "-O1", "-shared", "-fPIC", "-o", str(fake / "libcuda.so.1"),
         str(HERE / "fake_libcuda.c")],
        check=True,
    )  # fmt: skip
    mod, target = _matmul_f16(), Target("cuda")
    work, folder = tmp_path / "work", tmp_path / "trials"
    ms.export_trials(mod, target, str(work), str(folder), 3)
    if not rm.runtime.cuda_driver.available():  # run here: refused, no failures recorded
        refused = _runner(folder)
        assert refused.returncode == 2 and "no usable CUDA device" in refused.stderr, refused.stderr
        assert not (folder / "results.jsonl").exists()
    run = _runner(folder, {"LD_LIBRARY_PATH": str(fake)})
    assert run.returncode == 0, run.stdout + run.stderr
    db = ms.import_trials(str(work), str(folder))
    ((key, _),) = db.workloads
    records = db.records_of(key, str(target))
    assert len(records) == 3 and all(r["error"] is None for r in records)
    assert db.records_of(key, str(Target("llvm"))) == []
    if not rm.runtime.cuda_driver.available():
        with pytest.raises(RuntimeError, match="export_trials"):
            ms.tune_tir(mod, target, str(tmp_path / "w2"), max_trials_global=2)
    # where the driver answers, tune_tir takes the route in one call
    child = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from test_trials import _matmul_f16
from relaxmlir import meta_schedule as ms
db = ms.tune_tir(_matmul_f16(), "cuda", {str(tmp_path / "w3")!r}, max_trials_global=2)
print(len(db))
"""
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake), "PYTHONPATH": str(ROOT)}
    one = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert one.returncode == 0 and one.stdout.split()[-1] == "2", one.stdout + one.stderr


def test_relaxmlir_tune_exports_and_imports_trials(tmp_path):
    model = tmp_path / "mlp.mlir"
    model.write_text(relax.transform.BindParams("main", params())(mlp("tir", 16)).script())
    tool = [sys.executable, str(ROOT / "scripts" / "relaxmlir-tune")]
    work, folder = tmp_path / "wd", tmp_path / "t"

    def tune(*args):
        return subprocess.run(
            [*tool, *args], capture_output=True, text=True, timeout=300, check=False
        )

    out = tune(str(model), "--trials", "2", "--work-dir", str(work), "--export-trials", str(folder))
    assert out.returncode == 0, out.stderr
    assert "python -m relaxmlir.runtime.trials" in out.stdout
    early = tune("--work-dir", str(work), "--import-trials", str(folder))
    assert early.returncode == 1 and "no results yet" in early.stderr
    assert _runner(folder).returncode == 0
    done = tune("--work-dir", str(work), "--import-trials", str(folder))
    # the budget of 2 goes to the heavier kernel: its default and one other point
    assert done.returncode == 0 and "2 trials, best" in done.stdout, done.stdout + done.stderr
    assert len(JSONDatabase(str(work))) == 2


@pytest.mark.parametrize(
    "dtype, tile", [("float32", "128x64/8x4"), ("float32", "64x128/4x8"),
                    ("float32", "32x32/2x2"),
                    ("float16", "mma128x64/64x32"), ("float16", "mma128x128/64x64"),
                    ("float16", "mma128x128/64x32 k64")],
)  # fmt: skip
def test_tuning_only_tiles_compute_the_matmul(dtype, tile):
    """Tiles the default heuristic never picks but tuning may (rectangular, for N or M of 64;
    the 2x2 register tile on 256 threads; 64x64 warp tiles on 4 warps; K steps of 64), applied through the
    tuned table and interpreted on a ragged matmul against numpy (float32 1e-4, float16 2e-3
    relative to the result's scale)."""
    from test_gpu_interpret import close, function

    from relaxmlir.tools.gpu_interpret import interpret

    m, n, k = 136, 72, 136 if "k64" in tile else 40  # K steps of 64: two, and a partial one
    if tile == "32x32/2x2":
        m, n = 40, 40  # ragged too, in 2 x 2 blocks (136 x 72 took 15 of them to interpret)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    mod = function([(a.shape, dtype), (b.shape, dtype)], lambda bb, x, y: relax.op.matmul(x, y))
    (task,) = ms.extract_tasks(mod, Target("cuda"))
    assert (
        tile in task.space["gpu.matmul.tile"].values
        and task.default_knobs()["gpu.matmul.tile"] != tile
    )
    tuned = mod.clone()
    knobs = {**task.default_knobs(), "gpu.matmul.tile": tile, "gpu.matmul.splits": 1}
    set_tuned_table(tuned.module.operation, {task.key: knobs})
    c = np.full((m, n), np.nan, dtype)
    text = str(interpret(tuned, a, b, c).module)
    threads = re.search(r"threads\([^)]*\) in \(%\w+ = %c(\d+)", text).group(1)
    warps = {"mma128x64/64x32": 4, "mma128x128/64x64": 4}
    assert int(threads) == 32 * warps.get(tile, 8)  # 16x16 threads, or the tile's warps
    close(c, a.astype(np.float64) @ b.astype(np.float64), 1e-4 if dtype == "float32" else 2e-3)


@pytest.mark.parametrize(
    "knobs, bk",
    [
        ({"gpu.matmul.tile": "128x128/8x8"}, 18),  # K tiles of 2 windows
        ({"gpu.matmul.tile": "128x64/8x4"}, 36),
        ({"gpu.matmul.tile": "32x32/4x4"}, 18),  # on 64 threads
        ({"gpu.matmul.tile": "64x64/4x4", "gpu.matmul.splits": 2}, 36),  # split-K
        ({"gpu.matmul.window_k": 0, "gpu.matmul.min_blocks": 1}, 8),  # the config's BK
    ],
)
def test_conv_kernel_knobs_compute_the_convolution(knobs, bk):
    """A padded 3x3 convolution under tuned knobs (tiles the heuristic does not pick here, a
    split, the whole-window K tiles off), interpreted against torch (float32, 1e-4 relative to
    the result's scale)."""
    import torch
    from test_gpu_interpret import close, function

    from relaxmlir.tools.gpu_interpret import interpret

    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 9, 10)).astype("float32")
    w = rng.standard_normal((20, 8, 3, 3)).astype("float32")
    mod = function(
        [(x.shape, "float32"), (w.shape, "float32")],
        lambda bb, xv, wv: relax.op.nn.conv2d(xv, wv, padding=1),
    )
    (task,) = [t for t in ms.extract_tasks(mod, Target("cuda")) if "gpu.matmul.tile" in t.space]
    tuned = mod.clone()
    set_tuned_table(tuned.module.operation, {task.key: {**task.default_knobs(), **knobs}})
    out = np.full((1, 20, 9, 10), np.nan, np.float32)
    text = str(interpret(tuned, x, w, out).module)
    assert re.search(r"workgroup\(%\w+ : memref<(\d+)x", text).group(1) == str(bk)
    ref = torch.nn.functional.conv2d(
        torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64)), padding=1
    ).numpy()
    close(out, ref, 1e-4)


@pytest.mark.parametrize(
    "knob, match",
    [
        ({"gpu.matmul.tile": "huge"}, "gpu.matmul.tile = 'huge': this op takes mma128x256"),
        ({"gpu.matmul.splits": 0}, "gpu.matmul.splits = 0: expected an int from 1 to 16"),
        ({"gpu.matmul.stages": 7}, "gpu.matmul.stages = 7: expected 0"),
        ({"gpu.matmul.min_blocks": 3}, "gpu.matmul.min_blocks = 3: expected 0"),
        ({"gpu.matmul.window_k": 2}, "gpu.matmul.window_k = 2: expected 1"),
    ],
)
def test_a_knob_value_the_kernel_cannot_take_is_a_clear_build_error(knob, match):
    """A hand-edited database or table: the build names the kernel, the knob and what it
    takes, instead of quietly falling back to another schedule."""
    mod, target = _matmul_f16(), Target("cuda")
    (task,) = ms.extract_tasks(mod, target)
    tuned = mod.clone()
    set_tuned_table(tuned.module.operation, {task.key: {**task.default_knobs(), **knob}})
    with pytest.raises(Exception, match=re.escape(match)) as err:
        relax.build(tuned, target)
    assert "@fused_matmul_astype_relu" in str(err.value)


def test_reference_check_compares_around_nan_channels(tmp_path):
    """A batch norm with a random (negative) variance makes whole channels NaN. The check then
    compares the finite values at the finite values' scale: a candidate that sums in another
    order passes, a wrong value or a NaN out of place fails and says how many differ."""
    from relaxmlir.runtime.trials import check_reference

    rng = np.random.default_rng(0)
    ref = rng.standard_normal((2, 4, 8)).astype(np.float32)
    ref[:, 1] = np.nan
    path = str(tmp_path / "ref.npz")
    assert check_reference([ref], path, may_write=True) is None
    reordered = ref + np.float32(1e-6) * rng.standard_normal(ref.shape).astype(np.float32)
    assert check_reference([reordered], path, may_write=False) is None
    wrong = ref.copy()
    wrong[0, 0, 3] += 0.5
    assert check_reference([wrong], path, may_write=False) == (
        "wrong result (output 0: 1 of 64 elements differ, max abs diff 0.5)"
    )
    misplaced = ref.copy()
    misplaced[1, 2, 0] = np.nan
    assert check_reference([misplaced], path, may_write=False) == (
        "wrong result (output 0: 1 of 64 elements differ)"
    )


def test_a_record_applies_only_over_the_default_it_beat(tmp_path):
    """The build applies a tuned record only where the kernel's current default point was
    measured no faster than it (a record tuned against an older default proves nothing
    against a new one): the f16 matmul takes its faster measured tile while its default was
    among the points measured, and keeps the default when the database never measured it."""
    mod, target = _matmul_f16(), Target("cuda")
    (task,) = ms.extract_tasks(mod, target)
    tstr = str(target)
    default = task.default_knobs()
    other = {**default, "gpu.matmul.tile": "mma128x128/64x32", "gpu.matmul.splits": 1}
    third = {**other, "gpu.matmul.stages": 2}

    def kernel(work: Path) -> str:
        text = str(relax.build(ms.apply_database(mod, str(work), target), target).lowered)
        return re.sub(r"\w+TimeInMs = \d+", "", text.split("\n", 1)[1])

    plain = re.sub(
        r"\w+TimeInMs = \d+", "", str(relax.build(mod, target).lowered).split("\n", 1)[1]
    )
    beat = tmp_path / "beat"
    db = JSONDatabase(str(beat))
    db.commit_record(task.key, tstr, default, [100.0], None)
    db.commit_record(task.key, tstr, other, [80.0], None)
    assert db.guarded_knobs(tstr) == {task.key: {"knobs": other, "over": [default, other]}}
    assert kernel(beat) != plain
    stale = tmp_path / "stale"  # measured against another default: this one never ran
    db = JSONDatabase(str(stale))
    db.commit_record(task.key, tstr, third, [100.0], None)
    db.commit_record(task.key, tstr, other, [80.0], None)
    assert kernel(stale) == plain
