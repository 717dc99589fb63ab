"""The relax dialect's IRDL definition is cached as bytecode in the user's private folder: a
later process parses that instead of generating and parsing 342 kB of text. A corrupt or
unreachable cache falls back to the text; the dialect verifies the same either way."""

from __future__ import annotations

import glob
import os

import pytest
from mlir import ir

from dialects import irdl_dsl, scratch
from dialects.relax import RELAX


def _loaded_context() -> ir.Context:
    ctx = ir.Context()
    RELAX.load(ctx)
    return ctx


def _check_dialect(ctx: ir.Context) -> None:
    assert ctx.is_registered_operation("relax.call_tir")
    bad = 'func.func @g(%a: tensor<2xf32>) {\n "relax.call_tir"(%a) : (tensor<2xf32>) -> tensor<2xf32>\n return\n}'
    with ctx, ir.Location.unknown(), pytest.raises(ir.MLIRError):  # IRDL: no callee attribute
        ir.Module.parse(bad)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(irdl_dsl, "private_folder", lambda: str(tmp_path))
    return tmp_path


def test_second_load_reads_the_bytecode(folder, monkeypatch):
    _check_dialect(_loaded_context())
    cached = glob.glob(str(folder / "relax.irdl-*.mlirbc"))
    assert len(cached) == 1

    def no_text(self):
        raise AssertionError("the cached bytecode was not used")

    monkeypatch.setattr(irdl_dsl.Dialect, "irdl_text", no_text)
    _check_dialect(_loaded_context())


def test_corrupt_cache_is_rebuilt(folder):
    _loaded_context()
    (path,) = glob.glob(str(folder / "relax.irdl-*.mlirbc"))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    _check_dialect(_loaded_context())
    assert os.path.getsize(path) > 1000
    with open(path, "wb") as f:
        f.write(b"not bytecode at all")
    _check_dialect(_loaded_context())
    with open(path, "rb") as f:
        assert f.read(4) == b"ML\xefR"  # MLIR bytecode's magic, written again


def test_other_op_definitions_get_another_key_and_replace_the_old_file(folder, monkeypatch):
    _loaded_context()
    (old,) = glob.glob(str(folder / "relax.irdl-*.mlirbc"))
    call_tir = RELAX.ops["relax.call_tir"]
    monkeypatch.setattr(call_tir, "extra", irdl_dsl.Attr("string"), raising=False)
    _check_dialect(_loaded_context())
    (new,) = glob.glob(str(folder / "relax.irdl-*.mlirbc"))
    assert new != old


def test_without_a_private_folder_the_text_is_parsed(monkeypatch):
    def refused():
        raise OSError("not private")

    monkeypatch.setattr(irdl_dsl, "private_folder", refused)
    _check_dialect(_loaded_context())


def test_private_folder_is_this_users_alone():
    path = scratch.private_folder()
    st = os.stat(path)
    assert st.st_uid == os.getuid() and st.st_mode & 0o077 == 0
