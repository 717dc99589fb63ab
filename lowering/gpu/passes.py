"""GPU passes on buffers: thread-private temporaries, forall -> gpu.launch, device memory on the host
side, device copies of constants. In pipeline order (`lowering/pipelines.py`, row "cuda").
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, linalg, llvm, memref, scf

from lowering.gpu.emit import MIN_BLOCKS_ATTR
from lowering.gpu.schedule import BLOCK_DIMS_ATTR, prim_funcs, taken_by_template
from lowering.registry import PassError, register_pass
from lowering.schedule.common import SCHEDULE_ATTR, SCRIPT_ERRORS, Script, apply_script

CONSTANT_FN = "relaxmlir_cuda_constant"  # cuda_runtime.c: host pointer -> device copy (cached)
CONSTANTS_ATTR = "relax.gpu_constants"  # on the module: constant global -> bytes


def _walk(root: ir.Operation, names: tuple[str, ...]) -> list[ir.Operation]:
    found = []

    def visit(op):
        if op.operation.name in names:
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def _inside(op: ir.Operation, names: tuple[str, ...]) -> bool:
    parent = op.parent
    while parent is not None and parent.name not in ("func.func", "builtin.module"):
        if parent.name in names:
            return True
        parent = parent.parent
    return False


@register_pass(
    "relax-gpu-private-buffers",
    "temporaries allocated inside a mapped scf.forall -> thread-private memref.alloca",
)
def private_buffers():
    """Fusion leaves each thread a small temporary (a matmul tile feeding its epilogue); on the
    GPU it lives in registers/local memory, not in a device allocation. Runs before the
    deallocation pipeline so that no dealloc is ever made for it."""

    def run(module_op: ir.Operation) -> None:
        for alloc in _walk(module_op, ("memref.alloc",)):
            if not _inside(alloc, ("scf.forall",)):
                continue
            mtype = ir.MemRefType(alloc.results[0].type)
            # A partial tile's temporary has a dynamic size, bounded by the thread tile: a
            # dynamic alloca (PTX alloca) holds it.
            with alloc.location:
                new = memref.AllocaOp(mtype, list(alloc.operands), [], ip=ir.InsertionPoint(alloc))
            alloc.results[0].replace_all_uses_with(new.result)
            alloc.erase()

    return run


def _threads_script(dims: list[int]) -> Script:
    s = Script()
    launch = s.fresh("launch")
    s.emit(
        f'{launch} = transform.structured.match ops{{["gpu.launch"]}} in {s.func} : ({s.ANY}) -> {s.ANY}'
    )
    s.emit(
        f"transform.gpu.map_nested_forall_to_threads {launch} block_dims = {list(dims)} : ({s.ANY}) -> {s.ANY}"
    )
    return s


_BLOCK_AXIS = {"#gpu.block<x>": 0, "#gpu.block<y>": 1, "#gpu.block<z>": 2}


def launch_for_blocks(forall: ir.Operation, dims: list[int]) -> None:
    """A top-level scf.forall mapped to blocks -> gpu.launch whose grid is its trip counts (dynamic
    ones included: upstream's map_forall_to_blocks wants static sizes) and whose block ids replace
    its induction variables."""
    op = forall.opview if hasattr(forall, "opview") else forall
    mapping = [str(a) for a in ir.ArrayAttr(forall.attributes["mapping"])]
    axes = [_BLOCK_AXIS.get(m) for m in mapping]
    if None in axes or len(set(axes)) != len(axes):
        raise PassError(
            f"relax-gpu-map: expected a forall mapped to distinct block axes, got {mapping}", forall
        )
    if len(op.results):
        raise PassError(
            "relax-gpu-map: a block forall still returns tensors (not bufferized)", forall
        )
    static_lb, static_ub = list(op.staticLowerBound), list(op.staticUpperBound)
    static_step = list(op.staticStep)
    if any(v != 0 for v in static_lb) or any(v != 1 for v in static_step):
        raise PassError("relax-gpu-map: expected a normalized forall (from 0, step 1)", forall)
    dynamic_ub = list(op.dynamicUpperBound)
    with forall.location, ir.InsertionPoint(forall):
        index = ir.IndexType.get()
        one = arith.ConstantOp(index, 1).result
        uppers, k = [], 0
        for v in static_ub:
            if v == ir.ShapedType.get_dynamic_size():
                uppers.append(dynamic_ub[k])
                k += 1
            else:
                uppers.append(arith.ConstantOp(index, v).result)
        grid = [one, one, one]
        for axis, upper in zip(axes, uppers):
            grid[axis] = upper
        block = [arith.ConstantOp(index, d).result for d in dims]
        launch = gpu.LaunchOp(tuple(grid), tuple(block))
        body = launch.regions[0].blocks[0]
        with ir.InsertionPoint(body):
            gpu.TerminatorOp()
    src = forall.regions[0].blocks[0]
    for iv, axis in zip(list(src.arguments), axes):
        iv.replace_all_uses_with(body.arguments[axis])  # block ids: args 0..2
    terminator = body.operations[len(body.operations) - 1]
    for inner in list(src.operations):
        if inner.operation.name == "scf.forall.in_parallel":
            continue
        inner.operation.move_before(terminator)
    forall.erase()


def _copies_to_linalg(func_op: ir.Operation) -> None:
    """Copies inside kernels (bufferized inserts, pads) become loops with the linalg ops (a
    memref.copy would call the host's memrefCopy)."""
    for copy in _walk(func_op, ("memref.copy",)):
        if _inside(copy, ("gpu.launch",)):
            with copy.location, ir.InsertionPoint(copy):
                linalg.copy(copy.operands[0], outs=[copy.operands[1]])
            copy.erase()


def _is_serial(func_op: ir.Operation) -> bool:
    if SCHEDULE_ATTR not in func_op.attributes:
        return False
    names = [ir.StringAttr(a).value for a in ir.ArrayAttr(func_op.attributes[SCHEDULE_ATTR])]
    return names == ["serial"]


def _launch_serial(func_op: ir.Operation) -> None:
    """The whole body of a "serial" kernel in one 1x1x1 gpu.launch; its buffers become the
    thread's own (allocas: one thread uses them)."""
    block = func_op.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    terminator = ops[-1]
    if len(terminator.operands):
        raise PassError("relax-gpu-map: a serial kernel still returns values", func_op)
    with func_op.location, ir.InsertionPoint(terminator):
        index = ir.IndexType.get()
        one = arith.ConstantOp(index, 1).result
        launch = gpu.LaunchOp((one, one, one), (one, one, one))
        with ir.InsertionPoint(launch.regions[0].blocks[0]):
            end = gpu.TerminatorOp()
    for op in ops[:-1]:
        op.move_before(end)
    for alloc in _walk(launch, ("memref.alloc",)):
        with alloc.location:
            new = memref.AllocaOp(
                ir.MemRefType(alloc.results[0].type),
                list(alloc.operands),
                [],
                ip=ir.InsertionPoint(alloc),
            )
        alloc.results[0].replace_all_uses_with(new.result)
        alloc.erase()
    for dealloc in _walk(launch, ("memref.dealloc",)):
        dealloc.erase()


def _top_level_foralls(func_op: ir.Operation) -> list[ir.Operation]:
    return [
        op.operation
        for op in func_op.regions[0].blocks[0].operations
        if op.operation.name == "scf.forall"
    ]


@register_pass(
    "relax-gpu-map",
    "scf.forall mapped to blocks/threads -> gpu.launch (one per forall), with the block size "
    "that relax-schedule-gpu recorded",
)
def map_to_gpu():
    def run(module_op: ir.Operation) -> None:
        for func_op in prim_funcs(module_op):
            if BLOCK_DIMS_ATTR not in func_op.attributes:
                if _walk(func_op, ("linalg.generic", "linalg.fill", "linalg.copy", "scf.for")):
                    raise PassError(
                        "relax-gpu-map: kernel was not scheduled for the GPU (run relax-schedule-gpu)",
                        func_op,
                    )
                continue
            dims = list(ir.DenseI64ArrayAttr(func_op.attributes[BLOCK_DIMS_ATTR]))
            if _is_serial(func_op):
                _launch_serial(func_op)
                _copies_to_linalg(func_op)
                continue
            # Each top-level forall becomes its own launch (unfused kernels: one per op).
            for forall in _top_level_foralls(func_op):
                launch_for_blocks(forall, dims)
            try:
                apply_script(func_op, _threads_script(dims))
            except SCRIPT_ERRORS as exc:
                raise PassError(f"relax-gpu-map: {exc}", func_op) from exc
            _copies_to_linalg(func_op)
            leftover = [
                op.operation.name
                for op in func_op.regions[0].blocks[0].operations
                if op.operation.name.startswith(("linalg.", "scf.", "memref.load", "memref.store"))
                and not taken_by_template(op.operation)  # the template passes run next
            ]
            if leftover:
                raise PassError(
                    f"relax-gpu-map: ops outside any kernel would run on the host: {sorted(set(leftover))}",
                    func_op,
                )

    return run


def _host_ops(module_op: ir.Operation, names: tuple[str, ...]) -> list[ir.Operation]:
    return [
        op
        for op in _walk(module_op, names)
        if not _inside(op, ("gpu.module", "gpu.launch", "gpu.func"))
    ]


def _contiguous(mtype: ir.MemRefType) -> bool:
    layout = mtype.layout
    if isinstance(layout, ir.AffineMapAttr):
        return layout.value == ir.AffineMap.get_identity(mtype.rank)
    strides, _ = mtype.get_strides_and_offset()
    expected = 1
    for size, stride in reversed(list(zip(mtype.shape, strides))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _identity_layout(mtype: ir.MemRefType) -> bool:
    """What gpu.memcpy lowers: an identity layout (a strided one, even of a single element, is
    left as an unrealized cast that the LLVM translation cannot handle)."""
    layout = mtype.layout
    return isinstance(layout, ir.AffineMapAttr) and layout.value == ir.AffineMap.get_identity(
        mtype.rank
    )


def _copy_kernel(copy: ir.Operation) -> None:
    """A host-side memref.copy between strided views as a device kernel: one thread per element
    (both buffers live on the device; no driver copy takes a strided view)."""
    src, dst = copy.operands[0], copy.operands[1]
    mtype = ir.MemRefType(src.type)
    index = ir.IndexType.get()
    threads = 256
    with copy.location, ir.InsertionPoint(copy):
        sizes = []
        for axis, size in enumerate(mtype.shape):
            if size == ir.ShapedType.get_dynamic_size():
                sizes.append(memref.DimOp(src, arith.ConstantOp(index, axis).result).result)
            else:
                sizes.append(arith.ConstantOp(index, size).result)
        total = arith.ConstantOp(index, 1).result
        for size in sizes:
            total = arith.MulIOp(total, size).result
        per = arith.ConstantOp(index, threads).result
        one = arith.ConstantOp(index, 1).result
        blocks = arith.CeilDivUIOp(total, per).result
        launch = gpu.LaunchOp((blocks, one, one), (per, one, one))
        body = launch.regions[0].blocks[0]
        with ir.InsertionPoint(body):
            lin = arith.AddIOp(
                arith.MulIOp(body.arguments[0], per).result, body.arguments[3]
            ).result
            inside = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, lin, total).result)
            with ir.InsertionPoint(inside.then_block):
                idx, rest = [], lin
                for size in reversed(sizes):
                    idx.append(arith.RemUIOp(rest, size).result)
                    rest = arith.DivUIOp(rest, size).result
                idx.reverse()
                memref.StoreOp(memref.LoadOp(src, idx).result, dst, idx)
                scf.YieldOp([])
            gpu.TerminatorOp()
    copy.erase()


@register_pass(
    "relax-gpu-host-copies",
    "host-side memref.copy between strided views -> a device copy kernel (before outlining)",
)
def host_copies():
    def run(module_op: ir.Operation) -> None:
        for copy in _host_ops(module_op, ("memref.copy",)):
            types = [ir.MemRefType(v.type) for v in copy.operands]
            if not all(_identity_layout(t) for t in types):
                _copy_kernel(copy)

    return run


_LAUNCH_BOUNDS_ATTR = "relax.gpu_launch_min_blocks"  # on a func: the above, per launch in order


@register_pass(
    "relax-gpu-note-min-blocks",
    "before outlining: each function notes, per gpu.launch in order, the blocks per SM it asks for",
)
def note_min_blocks():
    """Outlining drops a launch's attributes, so the request (MIN_BLOCKS_ATTR, which a kernel
    template sets) rides on the enclosing function until `relax-gpu-min-blocks` turns it into
    the outlined kernel's register cap; outlining turns each launch into one launch_func in
    place, in order."""

    def run(module_op: ir.Operation) -> None:
        for func in _walk(module_op, ("func.func",)):
            launches = _walk(func, ("gpu.launch",))
            wanted = [
                ir.IntegerAttr(op.attributes[MIN_BLOCKS_ATTR]).value
                if MIN_BLOCKS_ATTR in op.attributes
                else 0
                for op in launches
            ]
            if any(wanted):
                func.attributes[_LAUNCH_BOUNDS_ATTR] = ir.DenseI32ArrayAttr.get(wanted)

    return run


REGISTERS_PER_SM = 65536  # sm_80, sm_89 and sm_90 alike
MAX_REGISTERS = 255  # per thread


@register_pass(
    "relax-gpu-min-blocks",
    "after outlining: kernels get nvvm.maxnreg (PTX .maxnreg) from relax-gpu-note-min-blocks",
)
def min_blocks():
    """ptxas then keeps a kernel's registers low enough for that many blocks per SM. Left
    free, it spends them on scheduling: the FMA contraction kernel with whole-window K tiles
    took 150 registers (one 256-thread block per SM, every barrier idling the SM); capped for
    two blocks, 128 registers and no spills. A cap (.maxnreg) rather than a minimum of blocks
    (.minnctapersm), which would let ptxas grow a lean kernel's registers up to that cap."""

    def run(module_op: ir.Operation) -> None:
        kernels = {}
        for mod in _walk(module_op, ("gpu.module",)):
            mod_name = ir.StringAttr(mod.attributes["sym_name"]).value
            for fn in _walk(mod, ("gpu.func",)):
                kernels[(mod_name, ir.StringAttr(fn.attributes["sym_name"]).value)] = fn
        for func in _walk(module_op, ("func.func",)):
            if _LAUNCH_BOUNDS_ATTR not in func.attributes:
                continue
            wanted = list(ir.DenseI32ArrayAttr(func.attributes[_LAUNCH_BOUNDS_ATTR]))
            del func.attributes[_LAUNCH_BOUNDS_ATTR]
            launches = _walk(func, ("gpu.launch_func",))
            if len(launches) != len(wanted):
                raise PassError(
                    f"relax-gpu-min-blocks: {len(wanted)} launches noted, {len(launches)} outlined",
                    func,
                )
            i32 = ir.IntegerType.get_signless(32)
            for launch, n in zip(launches, wanted):
                if n:
                    fn = kernels[tuple(ir.SymbolRefAttr(launch.attributes["kernel"]).value)]
                    threads = 1
                    for size in ir.DenseI32ArrayAttr(fn.attributes["known_block_size"]):
                        threads *= size
                    cap = REGISTERS_PER_SM // (threads * n) // 8 * 8
                    if cap < MAX_REGISTERS:  # else any allocation leaves room
                        fn.attributes["nvvm.maxnreg"] = ir.IntegerAttr.get(i32, cap)

    return run


SHARED_VECTOR_BYTES = 16  # the widest shared-memory access of our kernels (ld/st.shared.v4)


@register_pass(
    "relax-gpu-align-shared",
    "after outlining: each kernel's static shared buffers aligned for 16-byte vector accesses",
)
def align_shared():
    """The kernels read and write their shared tiles in 16-byte vectors (the register tile's
    K rows, staged vectors); NVVM lowering declares a workgroup buffer with its element's
    alignment (`.shared .align 4`) unless the attribution says otherwise, which leaves a
    vector access aligned only by where ptxas happens to place the buffer."""

    def run(module_op: ir.Operation) -> None:
        i64 = ir.IntegerType.get_signless(64)
        for fn in _walk(module_op, ("gpu.func",)):
            if "workgroup_attributions" not in fn.attributes:
                continue
            n = ir.IntegerAttr(fn.attributes["workgroup_attributions"]).value
            if not n:
                continue
            align = ir.DictAttr.get({"llvm.align": ir.IntegerAttr.get(i64, SHARED_VECTOR_BYTES)})
            fn.attributes["workgroup_attrib_attrs"] = ir.ArrayAttr.get([align] * n)

    return run


# libdevice's C fmod by float width (16-bit floats go through f32: fmod is exact there)
_LIBDEVICE_FMOD = {32: "__nv_fmodf", 64: "__nv_fmod"}


@register_pass(
    "relax-gpu-fmod",
    "after outlining: arith.remf in device code -> a call of libdevice's fmod",
)
def libdevice_fmod():
    """`relax.mod` (torch.fmod) is `arith.remf`. NVVM lowering maps remf to `__nv_fmodf` only
    while it is still arith, but the module-wide arith-to-llvm runs first and leaves an
    `llvm.frem`, which NVVM lowering refuses: the call is made here, as it would make it."""

    def run(module_op: ir.Operation) -> None:
        f32 = ir.F32Type.get(module_op.context)
        for gpu_module in _walk(module_op, ("gpu.module",)):
            body = gpu_module.regions[0].blocks[0]
            declared = {
                ir.StringAttr(op.attributes["sym_name"]).value
                for op in body.operations
                if op.operation.name == "llvm.func"
            }
            for op in _walk(gpu_module, ("arith.remf",)):
                t = op.results[0].type
                if not isinstance(t, ir.FloatType):
                    raise PassError("relax-gpu-fmod: a vector arith.remf in device code", op)
                wide = t if t.width in _LIBDEVICE_FMOD else f32
                name = _LIBDEVICE_FMOD[wide.width]
                if name not in declared:
                    decl = ir.Operation.parse(
                        f"llvm.func @{name}({wide}, {wide}) -> {wide}", context=module_op.context
                    )
                    ir.InsertionPoint.at_block_begin(body).insert(decl)
                    declared.add(name)
                with op.location, ir.InsertionPoint(op):
                    a, b = op.operands[0], op.operands[1]
                    if wide != t:
                        a, b = arith.extf(wide, a), arith.extf(wide, b)
                    out = llvm.call(wide, [a, b], [], [], callee=name)
                    if wide != t:
                        out = arith.truncf(t, out)
                op.results[0].replace_all_uses_with(out)
                op.erase()

    return run


@register_pass(
    "relax-gpu-host-memory",
    "host-side buffers -> device memory: memref.alloc/dealloc/copy -> gpu.alloc/dealloc/memcpy",
)
def host_memory():
    """Every buffer the host code handles lives on the device. Allocations are asynchronous
    (stream-ordered on the caller's stream by the runtime, which makes the waits free)."""

    def run(module_op: ir.Operation) -> None:
        token = gpu.AsyncTokenType.get(module_op.context)
        for op in _host_ops(module_op, ("memref.alloc", "memref.dealloc", "memref.copy")):
            with op.location, ir.InsertionPoint(op):
                start = gpu.WaitOp(token, []).results[0]
                if op.name == "memref.alloc":
                    new = gpu.AllocOp(op.results[0].type, token, [start], list(op.operands), [])
                    op.results[0].replace_all_uses_with(new.results[0])
                    done = new.results[1]
                elif op.name == "memref.dealloc":
                    done = gpu.DeallocOp(token, [start], op.operands[0]).result
                else:
                    src, dst = op.operands[0], op.operands[1]
                    for v in (src, dst):
                        if not _contiguous(ir.MemRefType(v.type)):
                            raise PassError(
                                "relax-gpu-host-memory: a strided host copy has no device form", op
                            )
                    done = gpu.MemcpyOp(token, [start], dst, src).result
                gpu.WaitOp(None, [done])
            op.erase()

    return run


@register_pass(
    "relax-gpu-record-constants",
    "note the size of each constant global the host code uses (for relax-gpu-device-constants)",
)
def record_constants():
    def run(module_op: ir.Operation) -> None:
        sizes = {}
        for op in _walk(module_op, ("memref.global",)):
            mtype = ir.MemRefType(ir.TypeAttr(op.attributes["type"]).value)
            elem = mtype.element_type
            if isinstance(elem, (ir.IntegerType, ir.FloatType)):
                bits = elem.width
            else:
                raise PassError(f"relax-gpu-record-constants: unsupported element type {elem}", op)
            count = 1
            for s in mtype.shape:
                count *= s
            name = ir.StringAttr(op.attributes["sym_name"]).value
            sizes[name] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), (count * bits + 7) // 8
            )
        if sizes:
            module_op.attributes[CONSTANTS_ATTR] = ir.DictAttr.get(sizes)

    return run


@register_pass(
    "relax-gpu-device-constants",
    "on the LLVM dialect: host code reads constants through their device copies "
    "(relaxmlir_cuda_constant, uploaded once per context)",
)
def device_constants():
    def run(module_op: ir.Operation) -> None:
        if CONSTANTS_ATTR not in module_op.attributes:
            return
        sizes = {
            a.name: ir.IntegerAttr(a.attr).value
            for a in ir.DictAttr(module_op.attributes[CONSTANTS_ATTR])
        }
        del module_op.attributes[CONSTANTS_ATTR]
        uses = [
            op
            for op in _host_ops(module_op, ("llvm.mlir.addressof",))
            if ir.FlatSymbolRefAttr(op.attributes["global_name"]).value in sizes
        ]
        if not uses:
            return
        ptr = llvm.PointerType.get()
        i64 = ir.IntegerType.get_signless(64)
        body = module_op.regions[0].blocks[0]
        decl = ir.Operation.parse(
            f"llvm.func @{CONSTANT_FN}(!llvm.ptr, i64) -> !llvm.ptr", context=module_op.context
        )
        body.append(decl)
        for op in uses:
            name = ir.FlatSymbolRefAttr(op.attributes["global_name"]).value
            with op.location, ir.InsertionPoint(op):
                host = llvm.AddressOfOp(ptr, name).result
                size = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, sizes[name])).result
                dev = llvm.call(ptr, [host, size], [], [], callee=CONSTANT_FN)
            op.results[0].replace_all_uses_with(dev)
            op.erase()

    return run
