"""`export_library`: a lowered module -> ONE shared library that runs without the compiler.

Route (MLIR_NOTES): the LLVM-dialect module the JIT would run -> LLVM IR -> the O3 pipeline and
code generation of `opt -O3` / `llc -O3 -relocation-model=pic`, run in this process through
libLLVM's C API (`llvm_codegen`; a large module is dealt into one piece per core, compiled on
threads: `_codegen`) -> linked by the system C compiler with a small generated glue module
(`glue_ir`, compiled the same way) that gives the library its plain C ABI:

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
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from mlir import ir
from mlir.dialects import llvm as llvm_d

from dialects import clone_module
from dialects.scratch import private_folder
from lowering import dense, llvm_codegen
from relaxmlir.runtime import libraries
from relaxmlir.runtime.library import METADATA_MAGIC
from relaxmlir.target import host_cores, host_cpu

RUNTIME_C = os.path.join(os.path.dirname(libraries.__file__), "native", "runtime.c")
# The mgpu* entry points of CUDA host code, over libcuda.so.1 opened lazily (cuda target only).
CUDA_RUNTIME_C = os.path.join(os.path.dirname(libraries.__file__), "native", "cuda_runtime.c")


class ExportError(RuntimeError):
    """The library could not be written: names the missing tool or the failing step."""


def c_compiler() -> str:
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise ExportError(
        "export_library needs a C compiler to link: none of $CC, cc, gcc, clang is on PATH"
    )


def linker_flags() -> list[str]:
    """gold where the system has it: it linked the MLP's library in 26 ms, ld.bfd in 37-40
    (medians of 21 links); the compiler's default linker otherwise, and where gold fails."""
    return ["-fuse-ld=gold"] if shutil.which("ld.gold") else []


def runtime_object(cc: str) -> str:
    """The native runtime (`runtime.c`) compiled by `cc`, once per machine and source: compiling
    it in every link took ~0.15 s of each export. Falls back to the source file (compiled by the
    link) when no private folder can be written."""
    with open(RUNTIME_C, "rb") as f:
        digest = hashlib.sha256(f.read() + b"\0" + cc.encode() + b"\0-fPIC -O2").hexdigest()
    try:
        folder = private_folder()
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


def _global(name: str) -> str:
    """An LLVM IR global name, quoted (any character but the quote and backslash, escaped)."""
    return '@"' + name.replace("\\", "\\5C").replace('"', "\\22") + '"'


def glue_ir(executable: Any) -> str:
    """The LLVM IR linked with the kernels: the entry points and packed-function forwarding
    (`relaxmlir_entry_<i>`, `_mlir_ciface_<packed symbol>`, `relaxmlir_bind_packed`), compiled in
    this process with the kernels (as C, a compiler process took 20-30 ms of each export)."""
    lines = ["; generated by relaxmlir export_library"]
    for i, info in enumerate(executable.infos.values()):
        n = len(info.params) + len(info.results)
        callee = _global(f"_mlir_ciface_{info.name}")
        lines += [f"declare void {callee}({', '.join(['ptr'] * n)})", ""]
        lines.append(f"define void @relaxmlir_entry_{i}(ptr %args) {{")
        for j in range(n):  # args[j] points at the pointer to the j-th descriptor
            lines += [
                f"  %p{j} = getelementptr ptr, ptr %args, i64 {j}",
                f"  %a{j} = load ptr, ptr %p{j}",
                f"  %d{j} = load ptr, ptr %a{j}",
            ]
        args = ", ".join(f"ptr %d{j}" for j in range(n))
        lines += [f"  call void {callee}({args})", "  ret void", "}", ""]
    packed = executable.packed
    for i, spec in enumerate(packed):
        n = len(spec.ranks)
        params = ", ".join(f"ptr %a{j}" for j in range(n))
        lines += [
            f"@packed_{i} = internal global ptr null",
            f"define void {_global(f'_mlir_ciface_{spec.symbol}')}({params}) {{",
            f"  %fn = load ptr, ptr @packed_{i}",
            f"  call void %fn({params})",
            "  ret void",
            "}",
            "",
        ]
    cases = " ".join(f"i32 {i}, label %set{i}" for i in range(len(packed)))
    lines += [
        "define void @relaxmlir_bind_packed(i32 %i, ptr %fn) {",
        f"  switch i32 %i, label %done [{cases}]",
    ]
    for i in range(len(packed)):
        lines += [f"set{i}:", f"  store ptr %fn, ptr @packed_{i}", "  br label %done"]
    lines += ["done:", "  ret void", "}", ""]
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
# BERT-base: ~0.9 MB; the 784-128-10 MLP: 54 kB, 69 kB with its OpenMP regions, whose code
# generation took 125 ms whole and 98 ms in two pieces, medians of 11 builds at 2 threads)
SPLIT_MIN_CHARS = 20_000


def codegen_jobs() -> int:
    """How many pieces one export compiles at once: the cores this process may use."""
    return host_cores()


_DEFINE = re.compile(r"^define ([^@]*)@([\w.$-]+)\(", re.M)
# a global variable that each object would get its own copy of: local and written to
_LOCAL_VARIABLE = re.compile(
    r"^@([\w.$-]+) = (?:private|internal)(?: (?!global\b|constant\b)[\w()]+)* global\b",
    re.MULTILINE,
)


def _deal(text: str, parts: int) -> list[list[str]]:
    """The functions defined by LLVM IR `text`, dealt into up to `parts` lists of about equal
    code generation cost (`_codegen_cost`; largest first, to the least loaded). A local function
    (OpenMP's outlined regions) goes with the functions that reference it, and the functions that
    use a local variable go together (each piece defines the local globals it uses, which is
    right for constants only). [] where the text is not understood."""
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
    for variable in _LOCAL_VARIABLE.findall(text):
        users = [name for name, body in bodies.items() if f"@{variable}" in body]
        for name in users[1:]:
            group[find(name)] = find(users[0])
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


def _codegen(text: str, host: Any, parts: int, stem: str) -> list[str]:
    """The object files (`stem`.k.o) of LLVM IR `text` after `opt -O3` and `llc -O3`
    (`llvm_codegen`, in this process), in up to `parts` pieces compiled at once.

    The module is dealt into pieces (`_deal`: about equal costs, each OpenMP region with the
    function that forks it). Kernels are external functions that no graph function inlines
    (`relax-llvm-target`), so a piece compiles them as the whole module does; only the graph
    functions lose what the optimizer would infer about the kernels they call, and they run for
    microseconds. Each piece keeps the constants it reads, so the code folds the same loads."""
    dealt = _deal(text, parts) if parts > 1 else []
    try:
        blobs = llvm_codegen.compile_objects(text, host.triple, host.mcpu, dealt)
    except llvm_codegen.CodegenError as exc:
        raise ExportError(f"code generation failed: {exc}") from None
    objects = []
    for k, blob in enumerate(blobs):
        objects.append(f"{stem}.{k}.o")
        with open(objects[-1], "wb") as f:
            f.write(blob)
    return objects


def export_library(module: ir.Module, executable: Any, path: str) -> None:
    """Write `module` (lowered to the LLVM dialect, target-stamped) and `executable`'s metadata
    to the shared library `path`."""
    target = executable.target
    cuda = target.kind == "cuda"
    host = target.host if cuda else target  # host code of a CUDA model runs on its host CPU
    here = host_cpu()["arch"]
    if host.arch != here and not os.environ.get("CC"):
        raise ExportError(
            f"export_library: the code is for {host.arch} ({host}), this machine is {here}: set "
            f"$CC to a C cross compiler for {host.triple} (e.g. {host.arch}-linux-gnu-gcc) to link it"
        )
    cc = c_compiler()
    unknown = [n for n in executable.libraries if n not in ("relaxmlir", "openmp")]
    if unknown:
        raise ExportError(
            f"export_library: the code calls native libraries that do not travel with a model: "
            f"{', '.join(unknown)}"
        )
    with tempfile.TemporaryDirectory(prefix="relaxmlir-export-") as tmp:
        stem, glue_o, consts, blob = (
            os.path.join(tmp, n) for n in ("model", "glue.o", "constants.s", "constants.bin")
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
        parts = codegen_jobs() if len(text) >= SPLIT_MIN_CHARS and not cuda else 1
        room = image_room(len(text))
        # The weights are written while the code is generated (BERT-base: 440 MB, ~1 s) and put
        # after the image once it is linked; the glue and the runtime (once per machine) too.
        with ThreadPoolExecutor(1) as pool:
            job = pool.submit(_codegen, text, host, parts, stem)
            records = write_constants(blob, detached, room) if detached else []
            runtime = [runtime_object(cc)]
            try:
                glue = llvm_codegen.compile_object(glue_ir(executable), host.triple, host.mcpu)
            except llvm_codegen.CodegenError as exc:
                raise ExportError(f"compiling the entry points failed: {exc}") from None
            with open(glue_o, "wb") as f:
                f.write(glue)
            objects += job.result()
        out = os.path.join(tmp, "model.so")
        cmd = [cc, "-shared", "-fPIC", "-O2", "-o", out, *objects, glue_o, *runtime]
        cmd += [CUDA_RUNTIME_C, "-ldl"] if cuda else []
        cmd += ["-Wl,-Bsymbolic", "-Wl,-z,noexecstack"]
        if "openmp" in executable.libraries:
            omp = libraries.find("openmp")
            cmd += [f"-L{os.path.dirname(omp)}", f"-l:{os.path.basename(omp)}"]
        cmd += ["-lm", "-lpthread"]
        flags = linker_flags()
        try:
            _run([cmd[0], *flags, *cmd[1:]], "linking")
        except ExportError:
            if not flags:
                raise
            _run(cmd, "linking")
        meta = dict(executable.metadata())
        meta["entries"] = list(executable.infos)
        if detached:
            meta["constants"] = attach_constants(out, blob, records, out, room)
        payload = json.dumps(meta, sort_keys=True).encode()
        with open(out, "ab") as f:
            f.write(payload + len(payload).to_bytes(8, "little") + METADATA_MAGIC)
        shutil.move(out, path)
