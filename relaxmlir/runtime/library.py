"""`load_module`: an exported model library (`ex.export_library(path)`) as an Executable.

The library is plain C ABI (lowering/export.py): `relaxmlir_entry_<i>(void **args)` per
function, `relaxmlir_bind_packed(i, fn)` for the packed functions it calls, the large constants
after the ELF image (mapped here, their addresses written into the library's pointer globals),
and JSON metadata after them (signatures, packed functions, target, native libraries). Loading
needs numpy and ctypes only: the libraries it names are loaded first (privately), the target is
checked against this CPU, and the packed functions must be registered.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import shutil
import tempfile
import weakref
from typing import Any, Callable

import numpy as np

from relaxmlir.runtime import libraries
from relaxmlir.runtime.executable import Executable, FunctionInfo, PackedSpec
from relaxmlir.target import Target

METADATA_MAGIC = b"RELAXMLIR-METADATA-1"
_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def read_metadata(path: str) -> dict:
    """The metadata trailer of an exported library (ValueError if `path` is not one)."""
    tail = len(METADATA_MAGIC) + 8
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size < tail:
            raise ValueError(f"{path}: not a relaxmlir model library (too short)")
        f.seek(size - tail)
        trailer = f.read(tail)
        if trailer[8:] != METADATA_MAGIC:
            raise ValueError(f"{path}: not a relaxmlir model library (no metadata; was it made by export_library?)")
        length = int.from_bytes(trailer[:8], "little")
        if length > size - tail:
            raise ValueError(f"{path}: corrupt relaxmlir metadata")
        f.seek(size - tail - length)
        try:
            return json.loads(f.read(length))
        except ValueError as exc:
            raise ValueError(f"{path}: corrupt relaxmlir metadata ({exc})") from None


def _image_end(f) -> int:
    """The size of the open library `f` without its metadata trailer (if it has one)."""
    tail = len(METADATA_MAGIC) + 8
    size = f.seek(0, os.SEEK_END)
    if size >= tail:
        f.seek(size - tail)
        trailer = f.read(tail)
        if trailer[8:] == METADATA_MAGIC:
            size -= tail + int.from_bytes(trailer[:8], "little")
    return size


def write_metadata(path: str, meta: Any) -> int:
    """Replace the metadata trailer of library `path` by `meta` (none: just drop it); returns
    the size of the image (code, then constants) before the trailer."""
    with open(path, "r+b") as f:
        size = _image_end(f)
        f.truncate(size)
        if meta is not None:
            payload = json.dumps(meta, sort_keys=True).encode()
            f.seek(size)
            f.write(payload + len(payload).to_bytes(8, "little") + METADATA_MAGIC)
    return size


# dlopen returns the library it already mapped under a path (ctypes never unloads one), even
# after the file was replaced, and a library's packed-function pointers are global: a second
# live Executable of the same file would rebind the first one's calls. So a path is mapped
# again only while the file is the one mapped before and no live LibraryCode uses it; otherwise
# a private copy is mapped.
_MAPPED: dict[str, tuple[int, int]] = {}  # realpath -> (st_dev, st_ino) of the file mapped
_LIVE: "weakref.WeakValueDictionary[str, LibraryCode]" = weakref.WeakValueDictionary()


def _private_copy(path: str) -> str:
    fd, copy = tempfile.mkstemp(prefix="relaxmlir-model-", suffix=".so")
    os.close(fd)
    shutil.copyfile(path, copy)
    return copy


def _bind_constants(lib: ctypes.CDLL, path: str, records: list) -> Any:
    """Map the constants that follow the image of `path` (read-only, paged in on use) and set
    the pointer global of each (lowering/export.py `detach_constants`); returns the mapping,
    which must live as long as the code."""
    if not records:
        return None
    with open(path, "rb") as f:
        size = _image_end(f)
        if any(r["offset"] + r["bytes"] > size for r in records):
            raise OSError("its constants lie past the end of the file (truncated)")
        view = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
    base = view.ctypes.data
    for r in records:
        try:
            ctypes.c_void_p.in_dll(lib, r["symbol"]).value = base + r["offset"]
        except ValueError:
            raise OSError(f"no pointer global '{r['symbol']}' for a constant") from None
    return view


def _share_workspace_cache(lib: ctypes.CDLL) -> None:
    """Point the library's copy of the workspace allocator at the package's runtime (see
    `relaxmlir_workspace_forward` in runtime.c): one cache for every model of the process, which
    `rm.runtime.workspace_cache_info` reports and `release_workspace_cache` empties. A library
    exported before the allocator could forward keeps its own cache."""
    try:
        forward = lib.relaxmlir_workspace_forward
    except AttributeError:
        return
    try:
        runtime = libraries.load("relaxmlir")
    except libraries.LibraryNotFound:
        return  # the library's own copy serves it
    forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    forward(
        ctypes.cast(runtime.relaxmlir_workspace_alloc_at, ctypes.c_void_p),
        ctypes.cast(runtime._mlir_memref_to_llvm_free, ctypes.c_void_p),
    )


class LibraryCode:
    """`NativeCode` of an Executable loaded from an exported library."""

    def __init__(self, path: str, meta: dict):
        self.path, self.meta = path, meta
        for name in meta.get("libraries", []):
            if name != "relaxmlir":  # the workspace allocator is compiled into the library
                libraries.load(name)  # before the library: it is DT_NEEDED by soname
        key = os.path.realpath(path)
        st = os.stat(path)
        shared = _MAPPED.get(key, (st.st_dev, st.st_ino)) == (st.st_dev, st.st_ino) and key not in _LIVE
        mapped = path if shared else _private_copy(path)
        try:
            self.lib = ctypes.CDLL(mapped, mode=ctypes.RTLD_LOCAL)
            self.constants = _bind_constants(self.lib, mapped, meta.get("constants", []))
        except OSError as exc:
            raise OSError(f"cannot load model library {path}: {exc}") from None
        finally:
            if mapped != path:
                os.unlink(mapped)  # the mappings stay valid
        if shared:
            _MAPPED[key], _LIVE[key] = (st.st_dev, st.st_ino), self
        _share_workspace_cache(self.lib)
        self.entries = {name: i for i, name in enumerate(meta["entries"])}
        self.packed_index = {p["symbol"]: i for i, p in enumerate(meta.get("packed", []))}
        self._bound: list[Any] = []

    def lookup(self, name: str) -> Callable:
        if name not in self.entries:
            raise KeyError(f"no function '{name}' in {self.path}")
        address = ctypes.cast(getattr(self.lib, f"relaxmlir_entry_{self.entries[name]}"), ctypes.c_void_p)
        return _ENTRY(address.value)

    def bind_packed(self, symbol: str, cfunc: Any) -> None:
        if symbol not in self.packed_index:
            return
        bind = self.lib.relaxmlir_bind_packed
        bind.argtypes = [ctypes.c_int, ctypes.c_void_p]
        bind(self.packed_index[symbol], ctypes.cast(cfunc, ctypes.c_void_p))
        self._bound.append(cfunc)

    def source(self) -> str:
        return json.dumps(self.meta, indent=1, sort_keys=True)

    def export_library(self, path: str, executable: Any) -> None:
        if os.path.abspath(path) != os.path.abspath(self.path):
            shutil.copyfile(self.path, path)


def load_module(path: str, code_type: Callable[[str, dict], Any] = LibraryCode) -> Executable:
    """Load a library written by `Executable.export_library` (TVM's `tvm.runtime.load_module`);
    run it with `relax.VirtualMachine(lib, rm.cpu())`. `code_type(path, metadata)` makes the
    Executable's code (the compile cache passes a LibraryCode that remembers its origin)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_module: no such file: {path}")
    meta = read_metadata(path)
    target = Target(meta["target"])
    missing = target.runs_on_host()
    if missing:
        raise RuntimeError(
            f"{path} was built for '{target}', which this machine cannot run (it lacks: "
            f"{', '.join(missing)}); rebuild it for this CPU"
        )
    infos = {f["name"]: FunctionInfo.from_dict(f) for f in meta["functions"]}
    packed = [PackedSpec.from_dict(p) for p in meta.get("packed", [])]
    code = code_type(path, meta)  # Executable checks that its packed functions are registered
    return Executable(code, infos, packed, target, tuple(meta.get("libraries", [])))
