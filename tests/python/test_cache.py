"""The persistent compile cache (lowering/cache.py): hits, misses, bad entries, concurrency.

Every test points RELAXMLIR_CACHE_DIR at its own temporary folder (the session keeps the cache
off, tests/conftest.py). Compilations are counted by wrapping the pass pipeline of relax.build;
results are checked against numpy (rtol=1e-4, atol=1e-4, f32, fixed seeds).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from mlp_models import mlp, params, reference
from test_runtime import ROOT

import relaxmlir as rm
from lowering import cache
from relaxmlir import relax
from relaxmlir.relax import vm_build

RTOL = ATOL = 1e-4


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, "1")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(folder))
    return folder


@pytest.fixture
def compilations(monkeypatch):
    """How many times relax.build ran its target pipeline (its code generation stage, the last
    of the runs it lowers a module in)."""
    count = {"n": 0}
    run = vm_build.run_pipeline

    def counting(module, pipeline, *args, **kwargs):
        count["n"] += "convert-to-llvm" in pipeline
        return run(module, pipeline, *args, **kwargs)

    monkeypatch.setattr(vm_build, "run_pipeline", counting)
    return count


def _model(batch="n") -> rm.IRModule:
    return relax.transform.BindParams("main", params())(mlp("tir", batch))


def _check(ex, batch=5, seed=0):
    x = np.random.default_rng(seed).standard_normal((batch, 784), dtype=np.float32)
    out = relax.VirtualMachine(ex, rm.cpu())["main"](x).numpy()
    np.testing.assert_allclose(out, reference(x, params()), rtol=RTOL, atol=ATOL)


def _entries(folder) -> list[str]:
    return sorted(os.listdir(folder)) if folder.exists() else []


def test_second_build_hits(cache_dir, compilations):
    first = relax.build(_model(), "llvm")
    assert compilations["n"] == 1
    assert len(_entries(cache_dir)) == 1 and _entries(cache_dir)[0].endswith(".so")
    second = relax.build(_model(), "llvm")
    assert compilations["n"] == 1, "the second build compiled again"
    assert "loaded from the relaxmlir compile cache" in second.as_text()
    assert "stored in the relaxmlir compile cache" in first.as_text()
    _check(first, batch=3)
    _check(second, batch=7)  # symbolic batch; both executables live, each with its own copy
    _check(first, batch=1)


def test_cached_models_share_the_workspace_cache(cache_dir):
    """A model served from the compile cache is a library with its own copy of the native
    runtime (so that it also runs without the package). Loaded here, it hands its workspace
    blocks to the process's one cache, which `workspace_cache_info` reports and
    `release_workspace_cache` empties, instead of keeping up to a limit of its own for good."""
    from relaxmlir.runtime import libraries

    relax.build(_model(), "llvm")
    ex = relax.build(_model(), "llvm")
    assert "loaded from the relaxmlir compile cache" in ex.as_text()
    f = relax.VirtualMachine(ex, rm.cpu())["main"]
    x = np.random.default_rng(0).standard_normal((256, 784), dtype=np.float32)
    libraries.release_workspace_cache()
    before = libraries.workspace_cache_info()
    for _ in range(3):
        out = f(x).numpy()
    np.testing.assert_allclose(out, reference(x, params()), rtol=RTOL, atol=ATOL)
    after = libraries.workspace_cache_info()
    assert after["hits"] > before["hits"] and after["bytes"] > 0, (before, after)
    assert after["limit"] > 0
    libraries.release_workspace_cache()
    assert libraries.workspace_cache_info()["bytes"] == 0


def test_disabled_by_env(cache_dir, compilations, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, "0")
    _check(relax.build(_model(), "llvm"))
    _check(relax.build(_model(), "llvm"))
    assert compilations["n"] == 2
    assert _entries(cache_dir) == []


# "garbage" (a file too short for a library) fails read_metadata as "truncate" does (no trailer)
# and is rebuilt the same way; test_export's test_not_a_model_library covers the short file
@pytest.mark.parametrize(
    "damage", ["truncate", "flip", pytest.param("garbage", marks=pytest.mark.slow)]
)
def test_corrupt_entry_is_rebuilt(cache_dir, compilations, damage):
    relax.build(_model(), "llvm")
    (entry,) = _entries(cache_dir)
    path = cache_dir / entry
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[len(data) // 3] ^= 0xFF  # inside the code: only the checksum sees it
    else:
        data = bytearray(b"not a library")
    # A new file renamed over the entry, as damage that reaches the cache from outside would: the
    # first build's library is still mapped from the old file, and rewriting a mapped file in
    # place would pull its code from under this process (SIGBUS at exit, when its destructors
    # run). The cache itself only ever renames finished files into place.
    damaged = cache_dir / "damaged.tmp"
    damaged.write_bytes(bytes(data))
    os.replace(damaged, path)
    corrupt = cache.stats["corrupt"]
    ex = relax.build(_model(), "llvm")
    assert cache.stats["corrupt"] == corrupt + 1
    assert compilations["n"] == 2
    _check(ex)
    relax.build(_model(), "llvm")  # the rebuilt entry is whole again
    assert compilations["n"] == 2


def test_key_covers_target_model_and_compiler(cache_dir, compilations, monkeypatch):
    relax.build(_model(), "llvm")
    relax.build(_model(), "llvm -mcpu=x86-64-v3")  # another target (this CPU runs both)
    assert compilations["n"] == 2
    other = relax.transform.BindParams("main", params(seed=1))(mlp("tir", "n"))
    relax.build(other, "llvm")  # same graph, other weights
    assert compilations["n"] == 3
    monkeypatch.setattr(cache, "source_version", lambda: "edited compiler")
    relax.build(_model(), "llvm")
    assert compilations["n"] == 4
    assert len(_entries(cache_dir)) == 4


def test_packed_functions_are_bound_on_a_hit(cache_dir, compilations):
    calls = []

    @rm.register_func("test.cache.relu", override=True)
    def relu(x, out):
        calls.append(x.shape)
        np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))

    def model():
        x = relax.Var("x", relax.TensorStructInfo((4, 8), "float32"))
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                y = bb.emit(relax.call_dps_packed("test.cache.relu", (x,), x.struct_info))
                gv = bb.emit_output(bb.emit(relax.op.add(y, y)))
            bb.emit_func_output(gv)
        return bb.get()

    x = np.random.default_rng(0).standard_normal((4, 8), dtype=np.float32)
    for _ in range(2):
        out = relax.VirtualMachine(relax.build(model(), "llvm"), rm.cpu())["main"](x).numpy()
        np.testing.assert_allclose(out, 2 * np.maximum(x, 0), rtol=RTOL, atol=ATOL)
    assert compilations["n"] == 1 and len(calls) == 2

    @rm.register_func("test.cache.relu", override=True)
    def failing(x, out):
        raise RuntimeError("packed function failed")

    with pytest.raises(RuntimeError, match="packed function failed"):
        relax.VirtualMachine(relax.build(model(), "llvm"), rm.cpu())["main"](x)


CHILD = """
import numpy as np
import sys
sys.path.insert(0, {tests!r})
from mlp_models import mlp, params, reference
import relaxmlir as rm
from relaxmlir import relax
ex = relax.build(relax.transform.BindParams("main", params())(mlp("tir", "n")), "llvm")
x = np.random.default_rng(0).standard_normal((6, 784), dtype=np.float32)
np.testing.assert_allclose(
    relax.VirtualMachine(ex, rm.cpu())["main"](x).numpy(), reference(x, params()), rtol=1e-4, atol=1e-4
)
from lowering import cache
print("ok", cache.stats["hits"])
"""


def test_two_processes_build_at_once(cache_dir):
    env = dict(os.environ, RELAXMLIR_CACHE="1", RELAXMLIR_CACHE_DIR=str(cache_dir))
    code = textwrap.dedent(CHILD.format(tests=str(ROOT / "tests" / "python")))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.split()[0] == "ok", err
    entries = _entries(cache_dir)
    assert len(entries) == 1 and entries[0].endswith(".so"), entries  # no temporary file left
    # A third process finds the entry: the key is the same in every process (no addresses, no
    # per-process hash seeds in it).
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.split() == ["ok", "1"], proc.stdout + proc.stderr


def test_cache_dir_default(monkeypatch, tmp_path):
    monkeypatch.delenv(cache.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == str(tmp_path / "relaxmlir")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "relaxmlir")
