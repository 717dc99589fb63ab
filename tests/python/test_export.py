"""Deployment: `ex.export_library(path)` then `rm.runtime.load_module(path)` in a process that
cannot import MLIR, against numpy (rtol=1e-4, atol=1e-4, f32, fixed seeds).

The child processes block `import mlir` (test_runtime.BLOCK_MLIR), so a pass proves that a
loaded model needs neither the bindings nor LLVM.
"""

from __future__ import annotations

import numpy as np
import pytest
from mlp_models import mlp, params, reference, register_torch_env
from test_runtime import BLOCK_MLIR, run_python

import relaxmlir as rm
from relaxmlir import relax, te
from relaxmlir import target as target_module
from relaxmlir.target import X86_FEATURES, Target, host_cpu

RTOL = ATOL = 1e-4


def _mlp(kind: str, batch) -> rm.IRModule:
    return relax.transform.BindParams("main", params())(mlp(kind, batch))


def _save_reference(tmp_path, x):
    np.savez(tmp_path / "ref.npz", x=x, want=reference(x, params()))


def test_mlp_runs_from_the_library_without_mlir(tmp_path):
    lib = tmp_path / "mlp.so"
    ex = relax.build(_mlp("tir", "n"), "llvm")
    assert ex.export_library(str(lib)) == str(lib)
    x = np.random.default_rng(0).standard_normal((7, 784), dtype=np.float32)
    _save_reference(tmp_path, x)
    out = run_python(
        BLOCK_MLIR
        + f"""
import sys
import numpy as np
import relaxmlir as rm
from relaxmlir import runtime
ref = np.load({str(tmp_path / "ref.npz")!r})
vm = runtime.VirtualMachine(rm.load_module({str(lib)!r}), rm.cpu())
np.testing.assert_allclose(vm["main"](ref["x"]).numpy(), ref["want"], rtol={RTOL}, atol={ATOL})
assert vm["main"](ref["x"][:1]).numpy().shape == (1, 10)  # symbolic batch
try:
    vm["main"](ref["x"][:, :100])
    raise SystemExit("wrong shape accepted")
except ValueError as exc:
    assert "expected signature main(x" in str(exc)
assert "mlir" not in sys.modules
print("ok")
"""
    )
    assert out.strip() == "ok"


def test_packed_functions_are_bound_at_load(tmp_path):
    register_torch_env()
    lib = tmp_path / "mixed.so"
    relax.build(_mlp("mixed", 4), "llvm").export_library(str(lib))
    x = np.random.default_rng(1).standard_normal((4, 784), dtype=np.float32)
    _save_reference(tmp_path, x)
    load = f"""
import numpy as np
import relaxmlir as rm
from relaxmlir import runtime
ref = np.load({str(tmp_path / "ref.npz")!r})
"""
    missing = run_python(
        BLOCK_MLIR
        + load
        + f"""
try:
    rm.load_module({str(lib)!r})
except ValueError as exc:
    print(exc)
"""
    )
    assert "not registered" in missing and "env.relu" in missing, missing
    out = run_python(
        BLOCK_MLIR
        + load
        + f"""
@rm.register_func("env.linear")
def linear(x, w, b, out):
    x, w, b = (np.from_dlpack(a) for a in (x, w, b))
    np.matmul(x, w.T, out=np.from_dlpack(out))
    np.from_dlpack(out)[...] += b

@rm.register_func("env.relu")
def relu(x, out):
    np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))

vm = runtime.VirtualMachine(rm.load_module({str(lib)!r}), rm.cpu())
np.testing.assert_allclose(vm["main"](ref["x"]).numpy(), ref["want"], rtol={RTOL}, atol={ATOL})
print("ok")
"""
    )
    assert out.strip() == "ok"


def test_parallel_kernel_from_the_library(tmp_path):
    n = 256
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    ex = relax.build(te.create_prim_func([A, B, C]), Target("llvm -num-cores=2"))
    lib = tmp_path / "mm.so"
    ex.export_library(str(lib))
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    np.savez(tmp_path / "ref.npz", a=a, b=b, want=a @ b)
    name = ex.function_names()[0]
    out = run_python(
        BLOCK_MLIR
        + f"""
import numpy as np
import relaxmlir as rm
ref = np.load({str(tmp_path / "ref.npz")!r})
lib = rm.load_module({str(lib)!r})
c = np.zeros(({n}, {n}), np.float32)
lib[{name!r}](ref["a"], ref["b"], c)
np.testing.assert_allclose(c, ref["want"], rtol=1e-3, atol=1e-3)
print("ok", sorted(lib.libraries))
"""
    )
    assert out.startswith("ok"), out


def test_not_a_model_library(tmp_path):
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF not really")
    with pytest.raises(ValueError, match="not a relaxmlir model library"):
        rm.load_module(str(bad))
    with pytest.raises(FileNotFoundError):
        rm.load_module(str(tmp_path / "missing.so"))


def test_library_for_a_cpu_this_machine_lacks(tmp_path, monkeypatch):
    if host_cpu()["arch"] != "x86_64":
        pytest.skip("x86 features")
    lacking = [f for f in X86_FEATURES if f not in host_cpu()["features"]]
    if not lacking:  # this machine has them all: let it pretend to lack the last one
        host = dict(host_cpu(), features=tuple(host_cpu()["features"][:-1]))
        lacking = [host_cpu()["features"][-1]]
        monkeypatch.setattr(target_module, "host_cpu", lambda: host)
    target = Target(f"llvm -mattr=+{lacking[0]}")
    ex = relax.build(_mlp("tir", 1), target)  # builds; running it here is what is refused
    with pytest.raises(RuntimeError, match=f"lacks: {lacking[0]}"):
        relax.VirtualMachine(ex, rm.cpu())["main"](np.zeros((1, 784), np.float32))
    lib = tmp_path / "other.so"
    ex.export_library(str(lib))
    with pytest.raises(RuntimeError, match=f"cannot run .*lacks: {lacking[0]}"):
        rm.load_module(str(lib))


def test_export_of_a_loaded_library_copies_it(tmp_path):
    first, second = tmp_path / "a.so", tmp_path / "b.so"
    relax.build(_mlp("tir", 1), "llvm").export_library(str(first))
    rm.load_module(str(first)).export_library(str(second))
    assert first.read_bytes() == second.read_bytes()


def test_weights_follow_the_image_and_are_mapped(tmp_path):
    """Large constants are not linked: their bytes follow the ELF image (export.detach_constants)
    and the loader points the code at its mapping of them."""
    from relaxmlir.runtime.library import read_metadata, write_metadata

    lib = tmp_path / "mlp.so"
    relax.build(_mlp("tir", "n"), "llvm").export_library(str(lib))
    meta = read_metadata(str(lib))
    records = meta["constants"]
    weight_bytes = sum(a.nbytes for a in params().values() if a.size * 4 >= 4096)
    assert sum(r["bytes"] for r in records) >= weight_bytes
    head = lib.read_bytes()[:64]  # the ELF image ends with its section headers
    shoff, shentsize, shnum = (
        int.from_bytes(head[a:b], "little") for a, b in ((40, 48), (58, 60), (60, 62))
    )
    image_end = shoff + shentsize * shnum
    assert image_end < weight_bytes  # the image itself holds no weights
    assert image_end <= min(r["offset"] for r in records)
    assert all(r["offset"] % 64 == 0 for r in records)
    x = np.random.default_rng(1).standard_normal((3, 784), dtype=np.float32)
    vm = relax.VirtualMachine(rm.load_module(str(lib)), rm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, params()), rtol=RTOL, atol=ATOL)
    # constants cut off (metadata kept): refused at load, not read past the end of the file
    cut = tmp_path / "cut.so"
    cut.write_bytes(lib.read_bytes())
    end = max(r["offset"] + r["bytes"] for r in records)
    write_metadata(str(cut), None)
    with open(cut, "r+b") as f:
        f.truncate(end - 1)
    write_metadata(str(cut), meta)
    with pytest.raises(OSError, match="constants lie past the end"):
        rm.load_module(str(cut))


def test_weights_copied_after_the_image_where_no_range_can_be_inserted(tmp_path, monkeypatch):
    """A file system without FALLOC_FL_INSERT_RANGE (tmpfs): the constants file is copied after
    the image instead of the image being put in front of it."""
    from lowering import export

    monkeypatch.setattr(export, "_insert_range", lambda fd, length: False)
    monkeypatch.setattr(export, "image_room", lambda chars: 0)
    lib = tmp_path / "mlp.so"
    relax.build(_mlp("tir", "n"), "llvm").export_library(str(lib))
    x = np.random.default_rng(2).standard_normal((5, 784), dtype=np.float32)
    vm = relax.VirtualMachine(rm.load_module(str(lib)), rm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, params()), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("room", [0, 4096])
def test_an_image_larger_than_its_room_gets_more_by_insertion(tmp_path, monkeypatch, room):
    """The constants are written after room for the image (`export.image_room`) while code is
    generated; an image that outgrows it (none measured has) gets the rest inserted in front."""
    from lowering import export

    inserted = []
    insert_range = export._insert_range

    def spy(fd, length):
        inserted.append(length)
        return insert_range(fd, length)

    monkeypatch.setattr(export, "image_room", lambda chars: room)
    monkeypatch.setattr(export, "_insert_range", spy)
    lib = tmp_path / "mlp.so"
    relax.build(_mlp("tir", "n"), "llvm").export_library(str(lib))
    assert len(inserted) == 1 and inserted[0] > 0 and inserted[0] % 4096 == 0
    x = np.random.default_rng(2).standard_normal((5, 784), dtype=np.float32)
    vm = relax.VirtualMachine(rm.load_module(str(lib)), rm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, params()), rtol=RTOL, atol=ATOL)


def test_code_generation_split_into_pieces_on_threads(tmp_path, monkeypatch):
    """Code generation of a large module is split into pieces, each optimized and compiled in
    its own LLVM context on its own thread; the objects link into the same model."""
    from lowering import export, llvm_codegen

    pieces = []
    compile_objects = llvm_codegen.compile_objects

    def spy(text, triple, cpu, dealt):
        pieces.append(dealt)
        return compile_objects(text, triple, cpu, dealt)

    monkeypatch.setattr(export, "SPLIT_MIN_CHARS", 0)
    monkeypatch.setattr(export, "codegen_jobs", lambda: 3)
    monkeypatch.setattr(llvm_codegen, "compile_objects", spy)
    lib = tmp_path / "mlp.so"
    relax.build(_mlp("tir", "n"), "llvm").export_library(str(lib))
    assert len(pieces) == 1 and len(pieces[0]) == 3
    x = np.random.default_rng(3).standard_normal((4, 784), dtype=np.float32)
    vm = relax.VirtualMachine(rm.load_module(str(lib)), rm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, params()), rtol=RTOL, atol=ATOL)


def test_codegen_pieces_keep_local_functions_with_their_callers():
    """OpenMP's outlined regions are local functions: each goes into the piece of the function
    that references it; a name the dealer does not parse leaves the module whole."""
    from lowering.export import _deal

    text = (
        "define void @a() {\n  call void @a..omp_par()\n  ret void\n}\n"
        "define internal void @a..omp_par() {\n  ret void\n}\n"
        "define void @b() {\n  ret void\n}\n"
    )
    assert sorted(map(sorted, _deal(text, 2))) == [["a", "a..omp_par"], ["b"]]
    assert _deal(text, 1) == [["a", "a..omp_par", "b"]]
    assert _deal('define void @"odd name"() {\n  ret void\n}\n', 2) == []


def test_jit_binds_weights_by_address_and_export_keeps_them(tmp_path):
    """The JIT compiles the code only: each large constant (here the 784x128 and 128x10 weights)
    is read through a pointer slot bound to a 64-byte aligned buffer, as an exported library
    reads its mapped weights; the executable's own module keeps the constants, so exporting it
    afterwards still carries them."""
    ex = relax.build(_mlp("tir", 4), "llvm")
    constants = ex.code._constants
    assert len(constants.addresses) == 2
    assert all(b.ctypes.data % 64 == 0 for b in constants.buffers)
    assert max(b.nbytes for b in constants.buffers) == 784 * 128 * 4  # packed in 32-wide panels
    x = np.random.default_rng(1).standard_normal((4, 784), dtype=np.float32)
    want = reference(x, params())
    vm = relax.VirtualMachine(ex, rm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), want, rtol=RTOL, atol=ATOL)
    lib = tmp_path / "mlp.so"
    ex.export_library(str(lib))
    loaded = relax.VirtualMachine(rm.load_module(str(lib)), rm.cpu())
    np.testing.assert_allclose(loaded["main"](x).numpy(), want, rtol=RTOL, atol=ATOL)


def test_a_linker_that_fails_falls_back_to_the_compilers_default(tmp_path, monkeypatch):
    """gold is used where the system has it; a link that fails with it is retried with the
    compiler's default linker (here: a linker that no compiler has)."""
    from lowering import export

    monkeypatch.setattr(export, "linker_flags", lambda: ["-fuse-ld=no-such-linker"])
    lib = tmp_path / "mlp.so"
    relax.build(_mlp("tir", "n"), "llvm").export_library(str(lib))
    x = np.random.default_rng(4).standard_normal((3, 784), dtype=np.float32)
    vm = relax.VirtualMachine(rm.load_module(str(lib)), rm.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), reference(x, params()), rtol=RTOL, atol=ATOL)
