"""Weights: constants of `dense.RESOURCE_MIN_BYTES` or more are dense_resource blobs over numpy
arrays (no MLIR copy), built, folded, packed, exported, cached and printed like dense ones.

Models here have one weight above the threshold (784 x 512 f32, 1.6 MB) so that every stage
meets a resource; outputs are compared with torch eager (rtol 1e-4, atol 1e-4)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mlir import ir

import relaxmlir as rm
from dialects import get_context
from lowering import cache, dense
from relaxmlir import relax
from relaxmlir.frontend import from_exported_program


def _mlp() -> tuple[torch.nn.Module, np.ndarray]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    ).eval()
    x = np.random.default_rng(0).standard_normal((3, 784), dtype=np.float32)
    return model, x


def _import(model, x) -> rm.IRModule:
    return from_exported_program(torch.export.export(model, (torch.from_numpy(x),)))


def _run(ex, x) -> np.ndarray:
    return relax.VirtualMachine(ex, rm.cpu())["main"](x).numpy()


def test_large_arrays_are_resources_small_ones_and_splats_dense():
    rng = np.random.default_rng(0)
    with get_context(), ir.Location.unknown():
        big = rng.standard_normal((512, 1024), dtype=np.float32)
        attr = dense.elements(big)
        assert dense.is_resource(attr) and dense.is_elements(attr)
        assert str(attr).startswith("dense_resource<relaxmlir_")
        np.testing.assert_array_equal(dense.to_numpy(attr), big)
        assert dense.to_numpy(attr).ctypes.data % dense.ALIGN == 0  # a copy, aligned
        big[0, 0] = 7.0  # the attribute holds a copy of an array it was not given
        assert dense.to_numpy(attr)[0, 0] != 7.0
        assert dense.elements(big.copy()) == dense.elements(big.copy())  # equal contents: one
        assert not dense.is_resource(dense.elements(np.zeros((512, 1024), np.float32)))
        assert not dense.is_resource(dense.elements(big[:4]))
        assert not dense.is_resource(ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1))
        halves = rng.standard_normal((1 << 20,)).astype(np.float16)
        np.testing.assert_array_equal(dense.to_numpy(dense.elements(halves)), halves)


def test_views_and_owned_arrays_become_aligned_resources():
    """A transposed view (a weight laid out anew) is copied once into aligned memory of its own;
    an owned aligned array is kept as it is; a transposed splat stays a dense splat."""
    rng = np.random.default_rng(1)
    with get_context(), ir.Location.unknown():
        w = rng.standard_normal((256, 256, 3, 3), dtype=np.float32)
        view = w.reshape(32, 8, 32, 8, 3, 3).transpose(0, 2, 4, 5, 3, 1)
        attr = dense.elements(view)
        got = dense.to_numpy(attr)
        assert dense.is_resource(attr) and got.flags.c_contiguous
        np.testing.assert_array_equal(got, view)
        assert got.ctypes.data % dense.ALIGN == 0 and not np.shares_memory(got, w)
        for shape in (4, 5), (700, 1024):  # numpy's memory, then pages of its own
            fresh = dense.aligned_empty(shape, np.float32)
            assert fresh.shape == shape and fresh.flags.c_contiguous and fresh.flags.writeable
            assert fresh.ctypes.data % dense.ALIGN == 0
        owned = dense.aligned_empty((512, 1024), np.float32)
        owned[...] = rng.standard_normal((512, 1024), dtype=np.float32)
        assert dense.to_numpy(dense.elements(owned, owned=True)).ctypes.data == owned.ctypes.data
        ones = np.ones((1024, 512), np.float32).T
        assert not dense.is_resource(dense.elements(ones))


def test_parsed_blob_reads_and_a_missing_one_is_an_error():
    with get_context(), ir.Location.unknown():
        module = ir.Module.parse(
            "func.func @f() -> tensor<4xf32> {\n"
            '  %0 = arith.constant dense_resource<"a blob"> : tensor<4xf32>\n'
            "  return %0 : tensor<4xf32>\n}\n"
            '{-# dialect_resources: { builtin: { "a blob": '
            '"0x040000000000803F000000400000404000008040" } } #-}'
        )
        attr = module.body.operations[0].regions[0].blocks[0].operations[0].attributes["value"]
        np.testing.assert_array_equal(dense.to_numpy(attr), [1, 2, 3, 4])
        blobless = ir.Attribute.parse("dense_resource<nowhere> : tensor<4xf32>")
        with pytest.raises(ValueError, match="has no blob"):
            dense.to_numpy(blobless)


@pytest.mark.parametrize("path", ["jit", "cache", "export"])
def test_model_with_a_resource_weight_matches_torch(path, tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXMLIR_CACHE", "1" if path == "cache" else "0")
    monkeypatch.setenv("RELAXMLIR_CACHE_DIR", str(tmp_path / "cache"))
    model, x = _mlp()
    mod = _import(model, x)
    assert dense.has_resources(mod.module.operation)
    ex = relax.build(mod, "llvm")
    if path == "export":
        lib = str(tmp_path / "mlp.so")
        ex.export_library(lib)
        ex = rm.load_module(lib)
    want = model(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(_run(ex, x), want, rtol=1e-4, atol=1e-4)


def test_a_second_import_hits_the_cache(tmp_path, monkeypatch):
    """Resource names count up in a process: the cache key numbers them by appearance."""
    monkeypatch.setenv("RELAXMLIR_CACHE", "1")
    monkeypatch.setenv("RELAXMLIR_CACHE_DIR", str(tmp_path))
    model, x = _mlp()
    relax.build(_import(model, x), "llvm")
    hits = cache.stats["hits"]
    ex = relax.build(_import(model, x), "llvm")
    assert cache.stats["hits"] == hits + 1
    with torch.no_grad():
        model[0].weight[0, 0] += 1.0  # other weights: another entry
    relax.build(_import(model, x), "llvm")
    assert cache.stats["hits"] == hits + 1
    np.testing.assert_allclose(
        _run(ex, x), _mlp()[0](torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-4
    )


def test_show_elides_resources_like_dense_constants():
    model, x = _mlp()
    mod = _import(model, x)
    shown = mod.script(elide=True)
    assert "dense_resource<__elided__> : tensor<512x784xf32>" in shown
    assert "dialect_resources" not in shown and "relaxmlir_" not in shown
    assert len(shown) < 20_000
    full = str(mod)  # every blob, as hex: text that parses back
    assert "dialect_resources" in full and len(full) > 2 * 784 * 512 * 4


def test_imported_weights_are_borrowed_and_checked(monkeypatch):
    """The importer hands torch's memory over without a copy; a build after the model changed
    in place is refused, and JIT code keeps the weights it was built with."""
    monkeypatch.setenv("RELAXMLIR_CACHE", "0")
    model, x = _mlp()
    mod = _import(model, x)
    weights = []

    def visit(op):
        if "value" in op.operation.attributes and dense.is_resource(
            op.operation.attributes["value"]
        ):
            weights.append(op.operation.attributes["value"])
        return ir.WalkResult.ADVANCE

    mod.module.operation.walk(visit)
    assert [str(a.type) for a in weights] == ["tensor<512x784xf32>"] and dense.is_borrowed(
        weights[0]
    )
    assert np.shares_memory(dense.to_numpy(weights[0]), model[0].weight.detach().numpy())
    want = model(torch.from_numpy(x)).detach().numpy()
    ex = relax.build(mod, "llvm")
    with torch.no_grad():
        model[0].weight.mul_(2.0)
    np.testing.assert_allclose(_run(ex, x), want, rtol=1e-4, atol=1e-4)  # built before: unchanged
    with pytest.raises(ValueError, match="changed after it was imported"):
        relax.build(mod, "llvm")
    again = relax.build(_import(model, x), "llvm")  # imported again: the new weights
    np.testing.assert_allclose(
        _run(again, x), model(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-4
    )


def test_jit_code_of_changed_weights_is_not_exported(tmp_path, monkeypatch):
    """An embedding table reaches the code as imported (borrowed): the JIT runs a copy, and
    exporting after the model changed would write other weights than it runs: refused."""
    monkeypatch.setenv("RELAXMLIR_CACHE", "0")
    torch.manual_seed(0)
    model = torch.nn.Embedding(1024, 512).eval()  # 2 MB
    ids = np.array([[3, 1000, 7]], dtype=np.int64)
    ex = relax.build(_import(model, ids), "llvm")
    want = model(torch.from_numpy(ids)).detach().numpy()
    with torch.no_grad():
        model.weight.add_(1.0)
    np.testing.assert_array_equal(_run(ex, ids), want)
    with pytest.raises(ValueError, match="changed after it was imported"):
        ex.export_library(str(tmp_path / "stale.so"))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_what_a_build_makes_goes_with_its_executable(monkeypatch):
    """Two 1024 x 4096 f32 weights (2 x 16.8 MB), transposed by FoldConstant, then packed: the
    transposes are given back at the end of the build, the packed panels with the last
    executable that uses them (a second build of the same module shares them), and a module
    the user keeps, plain or run through the zero pipeline outside a build, still builds to
    the same result. Before, the process kept all of it for good (+67 MB a build)."""
    import gc

    monkeypatch.setenv("RELAXMLIR_CACHE", "0")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)
    ).eval()
    x = np.random.default_rng(0).standard_normal((2, 1024), dtype=np.float32)
    want = model(torch.from_numpy(x)).detach().numpy()
    weights = 2 * 1024 * 4096 * 4
    mod = _import(model, x)
    _run(relax.build(mod, "llvm"), x)  # the process's first build grows it for good (LLVM, MLIR)
    gc.collect()
    base, rss = dense.made_bytes(), _rss_mb()
    first = relax.build(mod, "llvm")
    assert weights <= dense.made_bytes() - base <= 1.05 * weights  # packed only, no transposes
    # what `hold` reads: the lowered module's constants are all on its top-level ops
    lowered = first.code.module
    assert sorted(dense.resources_of(lowered)) == sorted(dense.resources_of(lowered, True))
    second = relax.build(mod, "llvm")
    assert dense.made_bytes() - base <= 1.05 * weights  # the same panels
    np.testing.assert_allclose(_run(first, x), want, rtol=1e-4, atol=1e-4)
    del first
    gc.collect()
    np.testing.assert_allclose(_run(second, x), want, rtol=1e-4, atol=1e-4)
    del second
    gc.collect()
    assert dense.made_bytes() == base
    assert _rss_mb() - rss < 16, (rss, _rss_mb())  # (+67 MB when nothing was given back)
    zero = relax.get_pipeline("zero")(mod)  # its folded transposes are the user's to keep
    for kept in (mod, zero):
        np.testing.assert_allclose(_run(relax.build(kept, "llvm"), x), want, rtol=1e-4, atol=1e-4)
        gc.collect()
    np.testing.assert_allclose(_run(relax.build(zero, "llvm"), x), want, rtol=1e-4, atol=1e-4)
