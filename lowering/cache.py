"""The persistent compile cache: `relax.build`'s code as exported libraries on disk.

A build's entry is the shared library that `export_library` writes (lowering/export.py), stored
under `RELAXMLIR_CACHE_DIR` (default `$XDG_CACHE_HOME/relaxmlir`, else `~/.cache/relaxmlir`) as
`<key>.so`; `RELAXMLIR_CACHE=0` turns the cache off. The key hashes what decides the code: the
input module (its text with large constants elided, plus the constants' bytes), the target, the
pass pipeline, the compiler's own sources and the packed functions the module calls by name. A
later build with the same key loads the library (`relaxmlir.runtime.load_module`) and runs no
pass at all.

On a miss the library is the code of the build as well: writing it (LLVM O3 + codegen, cc) costs
about what the JIT's lazy compilation costs on the first call, so nothing is compiled twice.
Entries are written to a temporary file and renamed into place, so readers never see half a file
and two processes building the same model both succeed (the last rename wins; both files are
equivalent). An entry that does not load (truncated, overwritten, built by another compiler
version under a colliding name) is ignored and rebuilt. A loaded entry stays mapped: replace an
entry by renaming a new file over it, never by rewriting it in place (a process that has it
loaded would lose its code, SIGBUS).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import tempfile
from collections import Counter
from functools import lru_cache
from typing import Any, Iterable, Optional

import xxhash
from mlir import ir

from dialects.scratch import wheel_stamp
from lowering import dense
from relaxmlir.runtime.library import LibraryCode, load_module, read_metadata, write_metadata

CACHE_ENV = "RELAXMLIR_CACHE"
CACHE_DIR_ENV = "RELAXMLIR_CACHE_DIR"
# Bump when the layout of an entry changes (key recipe, metadata fields).
ENTRY_FORMAT = "2"
# Constants above this many elements are hashed as bytes instead of printed as text.
ELIDE_ELEMENTS = 64

# What the cache did in this process (tests count compilations with it).
stats: Counter = Counter()


def enabled() -> bool:
    return os.environ.get(CACHE_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def cache_dir() -> str:
    """Where entries live: $RELAXMLIR_CACHE_DIR, else the user's cache folder."""
    folder = os.environ.get(CACHE_DIR_ENV, "")
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME", "") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(base, "relaxmlir")
    return folder


# The MLIR and LLVM wheels, by a file that each version ships: the bindings' C API and libLLVM.
_WHEEL_FILES = (("mlir", "_mlir_libs/libMLIRPythonCAPI.so"), ("llvm", "lib/libLLVM.so"))


@lru_cache(maxsize=1)
def source_version() -> str:
    """A hash of the compiler's sources (every .py and .c file of relaxmlir/, lowering/ and
    dialects/) and of the MLIR/LLVM wheels' binaries (path, size, modification time): any code
    change makes new keys, so no entry built by other code is ever loaded. (The wheels' versions
    by `importlib.metadata` took 6 ms of each process's first build: it scans every installed
    distribution.)"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256(ENTRY_FORMAT.encode())
    for package in ("relaxmlir", "lowering", "dialects"):
        for folder, dirs, files in os.walk(os.path.join(root, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".c")):
                    path = os.path.join(folder, name)
                    h.update(path[len(root) + 1 :].encode() + b"\0")  # relative to root
                    with open(path, "rb") as f:
                        h.update(f.read())
    for package, file in _WHEEL_FILES:
        h.update(wheel_stamp(package, file).encode())
    return h.hexdigest()


def _constants(module: ir.Module) -> list[tuple[str, Any]]:
    """(type, value) of every constant the elided text leaves out, in walk order: dense ones
    above ELIDE_ELEMENTS, and dense_resource ones (weights)."""
    found = []

    def visit(op):
        attrs = op.operation.attributes
        for i in range(len(attrs)):
            attr = attrs[i].attr
            if isinstance(attr, ir.DenseElementsAttr) and not attr.is_splat:
                if len(attr) > ELIDE_ELEMENTS:
                    found.append((str(attr.type), attr))
            elif dense.is_resource(attr):
                found.append((str(attr.type), attr))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def module_digest(module: ir.Module) -> str:
    """A structural hash of `module`: its text with large constants elided, then their bytes.
    Falls back to the full text when some elided constant is not a plain dense attribute.

    XXH3-128 rather than SHA-256: a warm build of BERT-base hashes its 440 MB of weights, which
    took 0.38 s with SHA-256 and takes ~0.05 s (the key guards against accidental collisions,
    not against crafted ones)."""
    text = dense.elided_text(module, large_elements_limit=ELIDE_ELEMENTS)
    constants = _constants(module)
    h = xxhash.xxh3_128()
    if text.count("__elided__") != len(constants):
        h.update(str(module).encode())
        return h.hexdigest()
    h.update(text.encode())
    for type_text, attr in constants:
        h.update(type_text.encode())
        if dense.is_resource(attr):
            h.update(dense.digest(attr).encode())  # taken when it was made
            continue
        try:
            h.update(memoryview(attr))  # no copy: the hasher reads the attribute's storage
        except (TypeError, ValueError, BufferError):
            h.update(dense.raw_bytes(attr))  # bf16 has no buffer protocol
    return h.hexdigest()


def build_key(module: ir.Module, target: Any, pipeline: str, packed_names: Iterable[str]) -> str:
    """The cache key of building `module` for `target` with `pipeline`."""
    h = hashlib.sha256()
    for part in (
        source_version(),
        str(target),
        pipeline,
        ",".join(sorted(packed_names)),
        module_digest(module),
    ):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:40]


def entry_path(key: str) -> str:
    return os.path.join(cache_dir(), f"{key}.so")


class CachedCode(LibraryCode):
    """Code loaded from a cache entry; `as_text` says where it came from (and shows the lowered
    module when this process built it)."""

    def __init__(self, path: str, meta: dict, lowered: Optional[ir.Module] = None):
        super().__init__(path, meta)
        self.lowered = lowered  # printed only when asked: it can hold hundreds of MB of weights

    def source(self) -> str:
        if self.lowered is not None:
            # its weights are the library's now: the ones the build made are given back
            # (`dense.build_scope`), and the text elides them
            text = dense.elided_text(self.lowered)
            return f"// stored in the relaxmlir compile cache: {self.path}\n{text}"
        return f"// loaded from the relaxmlir compile cache: {self.path}\n{super().source()}"


def _checksum(path: str, size: int) -> int:
    """XXH3-64 of the first `size` bytes of `path` (weights included: ~10x faster than crc32,
    which took 0.2 s of every warm BERT-base build)."""
    if size == 0:
        return 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as m:
        return xxhash.xxh3_64_intdigest(m)


def load(key: str, lowered: Optional[ir.Module] = None, verify: bool = True):
    """The Executable of entry `key`, or None when there is none or it is unusable."""
    path = entry_path(key)
    try:
        meta = read_metadata(path)
        cache = meta.get("cache", {})
        if cache.get("key") != key:
            raise ValueError("entry written for another key")
        if verify and _checksum(path, int(cache["image_bytes"])) != cache["xxh3"]:
            raise ValueError("checksum mismatch")
        return load_module(path, code_type=lambda p, m: CachedCode(p, m, lowered))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        stats["corrupt"] += 1
        return None


class _Unwritten:
    """Code of the Executable that describes an entry while it is being written (never run)."""

    def bind_packed(self, symbol: str, cfunc: Any) -> None:
        pass


def cacheable(target: Any, libraries: Iterable[str]) -> bool:
    """Entries are libraries this machine loads: code for this CPU that calls no native library
    other than the ones an exported model carries (external ones stay with the JIT)."""
    return not target.runs_on_host() and all(n in ("relaxmlir", "openmp") for n in libraries)


def store(key: str, module: ir.Module, infos: dict, packed: list, target: Any, libraries: list):
    """Write `module` (lowered to the LLVM dialect) as entry `key` and load it back: the
    Executable that the build returns."""
    from lowering.export import export_library
    from relaxmlir.runtime.executable import Executable

    describing = Executable(_Unwritten(), infos, packed, target, tuple(libraries))
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        export_library(module, describing, tmp)
        meta = read_metadata(tmp)
        image_bytes = write_metadata(tmp, None)  # drop export's trailer, keep the ELF image
        meta["cache"] = {"key": key, "image_bytes": image_bytes, "xxh3": _checksum(tmp, image_bytes)}
        write_metadata(tmp, meta)
        os.replace(tmp, entry_path(key))  # atomic: readers see no entry or a whole one
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    stats["stores"] += 1
    # Another process may have renamed its own (equivalent) entry over ours meanwhile: it loads
    # just the same; only a file that fails to load is an error here.
    loaded = load(key, lowered=module, verify=False)
    if loaded is None:
        raise OSError(f"compile cache entry {entry_path(key)} could not be read back")
    return loaded
