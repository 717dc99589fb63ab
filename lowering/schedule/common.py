"""Schedule table, linalg op classification and transform-script application for PrimFuncs.

A schedule rule (the role of a DLight rule in TVM) looks at one classified linalg op and writes
transform-dialect ops into a `Script`: pack, tile, vectorize, parallelize. The rules of one
primitive function go into one `transform.named_sequence`, followed by the shared vector cleanup
(`finalize`), and the sequence is applied to the function with the transform interpreter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import arith, linalg, tensor, vector
from mlir.dialects.transform import interpreter

from lowering.schedule.hoist import hoist_masked_accumulators, transfer_parts
from lowering.schedule.math_approx import approximate_math, contract_fma
from relaxmlir.runtime import libraries
from relaxmlir.target import Target

PRIM_FUNC_ATTR = "relax.prim_func"
SCHED_ID_ATTR = "relax_sched_id"  # temporary tag: lets the script match exactly one payload op
SCHEDULE_ATTR = "relax.schedule"  # left on each scheduled function: the rules that ran
# What a failing transform script raises: the interpreter's ValueError (with the diagnostics) or
# a parse/verification MLIRError.
SCRIPT_ERRORS = (ValueError, ir.MLIRError)
PREPACKED_ATTR = "relax.prepacked"  # on a linalg.unpack of an argument packed ahead of time
PATTERNS = ("matmul", "conv", "reduction", "elementwise", "gather", "fallback")
# 1: print every generated script to stderr; "failures": only those of ops left unscheduled
PRINT_SCRIPT_ENV = "RELAXMLIR_PRINT_SCHEDULE"
ROWS_VERSION_ATTR = "relax_rows_version"  # temporary: which copy of a row dispatch an op is in
INIT_FILL_ATTR = "relax_init_fill"  # temporary: the zero fill that starts a tagged op's accumulator
PAD_FILL_ATTR = "relax_pad_fill"  # temporary: the fill under a padded image, for its conv's rule
BORDER_FILL_ATTR = "relax_border_fill"  # temporary: a fill of one side of a padded buffer's border

TEMPORARY_ATTRS = (
    SCHED_ID_ATTR, ROWS_VERSION_ATTR, INIT_FILL_ATTR, PAD_FILL_ATTR, BORDER_FILL_ATTR,
)  # fmt: skip

VECTORS_PER_STEP = 4  # registers per step of a memory-bound elementwise loop (a fill, a copy)


@dataclass
class ScheduleOptions:
    """What every rule reads: the target (vector width, registers, cores) and the parallel runtime.

    `threads` defaults to the target's cores; the thresholds below which an op stays on one
    thread depend on what a parallel region costs with the runtime the code is compiled for.
    """

    target: Target = field(default_factory=lambda: Target.current() or Target("llvm"))
    threads: int = 0  # 0: the target's cores
    strict: bool = False  # raise instead of leaving a function unscheduled when its script fails
    runtime: str = field(default_factory=libraries.parallel_runtime)  # "openmp" | "async"
    knobs: dict = field(default_factory=dict)  # tuned knob values of this kernel (space.py)

    def __post_init__(self):
        if self.target.kind != "llvm":
            raise ValueError(f"CPU schedules need an llvm target, got ({self.target})")
        if not self.threads:
            self.threads = self.target.num_cores

    def knob(self, name: str, default):
        """The value of a tunable knob (`space.py` declares them): the tuned one, else `default`."""
        return self.knobs.get(name, default)

    @property
    def lanes(self) -> int:
        """f32 lanes of one vector register (16 on AVX-512, 8 on AVX2, 4 on SSE/NEON)."""
        return self.target.lanes("float32")

    @property
    def registers(self) -> int:
        return self.target.vector_registers

    # Below this much work (MACs / elements) a parallel region costs more than it saves: an
    # OpenMP region costs a few microseconds, an async-runtime one ~55 us (workers are woken).
    # The "threads" knob (space.py) overrides: 1 keeps the kernel on one thread (the pass sets
    # `threads`), more makes every loop that can split do so, whatever its size.
    @property
    def force_parallel(self) -> bool:
        return self.knobs.get("threads", 0) > 1

    @property
    def min_parallel_work(self) -> int:
        if self.force_parallel:
            return 0
        return 1 << 19 if self.runtime == "openmp" else 1 << 25

    # Elementwise ops and reductions: 32K elements (a layer norm at seq 128, d 256) split, so
    # that such an op does not run on one core between kernels split across all of them (its
    # inputs then come from every core's cache, and its outputs are written back to them).
    @property
    def min_parallel_elements(self) -> int:
        if self.force_parallel:
            return 0
        return 1 << 15 if self.runtime == "openmp" else 1 << 21

    @property
    def min_parallel_copy(self) -> int:
        """Elements a pack/unpack must move to get its own parallel loop (an async forall also
        costs ~0.15 s of LLVM time: coroutines)."""
        return 1 << 15 if self.runtime == "openmp" else 1 << 20


@dataclass
class OpInfo:
    """What a rule needs to know about one linalg op (static shapes; None marks a dynamic size).

    `op` is valid only until the first script runs (packing replaces ops): rules read the fields.
    """

    op: ir.Operation
    pattern: str
    ranges: list[int | None]
    iterators: list[str]  # "parallel" / "reduction" per loop
    operand_dims: list[list[int] | None]  # loop dim of each operand axis (None: not a permutation)
    element_type: str
    tag: int = -1  # the SCHED_ID_ATTR value that the scripts match
    num_results: int = 1
    traps: bool = False  # the payload has integer division/remainder (a zero lane traps)
    # matmul only: the loop dims playing each role
    batch: list[int] = field(default_factory=list)
    m: int | None = None
    n: int | None = None
    k: int | None = None
    b_prepacked: bool = False  # B is a linalg.unpack marked PREPACKED_ATTR (weights packed ahead)
    rows_version: str = ""  # "few" / "many": the copy of a run-time row dispatch (driver.py)
    c_view: bool = False  # rows route: the epilogue reads the packed C through a reshape
    gather_loop: int | None = None  # gather only: the loop along the sources' last axis
    # (handle, OpInfo) of the ops this op's rule schedules with it (`ScheduleRule.absorbs`):
    # a conv's earlier phases, then its elementwise epilogue, computed in its register tiles
    fused: list = field(default_factory=list)
    # The loop to split across threads, set by a related op's rule (`ScheduleRule.align`) so
    # that both split their tensors alike; None: the op's own rule chooses.
    thread_axis: int | None = None
    pad_fill_axis: int | None = None  # conv only: how `align` split the fill under its image

    @property
    def static(self) -> bool:
        return all(r is not None for r in self.ranges)

    def size(self, dim: int | None) -> int:
        return 1 if dim is None else self.ranges[dim]

    @property
    def work(self) -> int:
        """Iteration-space size (flops / 2 for a matmul)."""
        total = 1
        for r in self.ranges:
            total *= r or 1
        return total


def split_across_threads(info: OpInfo, opts: ScheduleOptions, threshold: int) -> bool:
    """Does this op get a parallel loop: a static one of at least `threshold` iterations, a
    symbolic one in the parallel copy of a run-time size dispatch (`driver.version_rows`)."""
    if opts.threads <= 1:
        return False
    return info.work >= threshold if info.static else info.rows_version == "many"


def innermost_loop(info: OpInfo) -> int:
    """The loop that walks the output's last axis (contiguous in memory)."""
    out_dims = info.operand_dims[-1]
    return out_dims[-1] if out_dims else len(info.ranges) - 1


def can_split(info: OpInfo, loops: list[int], threads: int) -> bool:
    """Whether `split_threads` splits a symbolic op along one of `loops`: one is symbolic, or
    static with an equal share per thread."""
    return any(
        info.ranges[d] is None or (info.ranges[d] >= threads and info.ranges[d] % threads == 0)
        for d in loops
    )


def split_threads(
    s: Script, h: str, info: OpInfo, loops: list[int], threads: int
) -> tuple[str, int | None, int | None]:
    """`h` split across `threads` along one of `loops` (`thread_loop`): (the tiled op, the loop,
    its static share per thread or None). Beside symbolic sizes a static loop is split only by
    an exact share, given as a tile size (`num_threads` left the share dynamic, and a reduction
    over it then failed to vectorize), else a symbolic loop is split, else none."""
    d = thread_loop(info, loops, threads)
    split = [0] * len(info.ranges)
    r = info.ranges[d]
    if not info.static and r is not None:
        if r % threads == 0 and r >= threads:
            split[d] = r // threads
            return s.tile_forall(h, tile_sizes=split)[0], d, r // threads
        d = next((x for x in loops if info.ranges[x] is None), None)
        if d is None:
            return h, None, None
        split = [0] * len(info.ranges)
    split[d] = threads
    # A static loop that the threads share evenly has a static share too: a rule that tiles
    # each share further must know it (the reduction rule's 8-row tiles left 4 of each
    # thread's 220 rows to a dynamic tile, which failed to vectorize).
    share = r // threads if info.static and r is not None and r % threads == 0 else None
    return s.tile_forall(h, num_threads=split)[0], d, share


def thread_loop(info: OpInfo, loops: list[int], threads: int) -> int:
    """Which of `loops` (outermost first, not empty) to split across `threads`: the outermost
    static one that gives each thread as many iterations, else the longest with an iteration
    per thread, else the outermost.

    Even shares matter beyond balance: the ops of a model should split their tensors alike, so
    that a thread reads what it wrote (a store to a line another core has read waits for that
    copy's invalidation: 10x a plain store on one L3, 45x across two, Zen 4). Attention's [Q, K,
    V] x rows result split 2:1 by its first axis had the next kernels read half of it from the
    other core; split by rows like the matmul that wrote it, a transformer layer (W6) ran 12%
    faster with its two threads on two L3s."""
    sizes = {d: info.ranges[d] for d in loops if info.ranges[d] is not None}
    even = [d for d, r in sizes.items() if r >= threads and r % threads == 0]
    if even:
        return even[0]
    longest = max(sizes, key=lambda d: sizes[d], default=None)
    if longest is not None and sizes[longest] >= threads:
        return longest
    symbolic = [d for d in loops if info.ranges[d] is None]  # long enough when it was dispatched
    return symbolic[0] if symbolic else loops[0]


class ScheduleRule:
    """One table entry. `prepare` runs first (layout changes such as packing) and must leave the
    op to schedule tagged again (`Script.tag`); `schedule` then tiles, vectorizes and
    parallelizes it and returns a short name of what it chose (recorded on the function)."""

    def prepare(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> None:
        pass

    def schedule(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> str:
        raise NotImplementedError

    def absorbs(self, info: OpInfo, infos: list[OpInfo], opts: ScheduleOptions) -> list[int]:
        """Tags of other ops (in `infos`, all still unscheduled) that this rule schedules
        together with `info`'s op, which then get no rule of their own: e.g. a conv's
        elementwise epilogue, computed on the conv's register tiles instead of in a pass of
        its own over the whole output. Read before any script runs (`info.op` is live)."""
        return []

    def align(self, info: OpInfo, infos: list[OpInfo], opts: ScheduleOptions) -> None:
        """Set `thread_axis` on ops (in `infos`, unscheduled) whose tensors this op reads or
        writes, so that a thread works on the part it, or the thread that made it, touched
        (a copy split by channels feeding a conv split by rows: each thread read half its
        input from the other core's cache). Read before any script runs."""

    def after_prepare(self, func_op: ir.Operation) -> None:
        """Rewrites between the two scripts that the transform dialect has no op for."""

    def after_schedule(self, func_op: ir.Operation) -> None:
        """Rewrites of the scheduled (vectorized, still tensor) function, after the scripts."""


SCHEDULES: dict[tuple[str, str], ScheduleRule] = {}


def register_schedule(pattern: str, target: str = "llvm"):
    """Class decorator: an instance of the class is the rule for `pattern` on `target`."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown schedule pattern '{pattern}'; known: {', '.join(PATTERNS)}")

    def wrap(cls: type) -> type:
        SCHEDULES[(target, pattern)] = cls()
        return cls

    return wrap


def get_schedule(target: str, pattern: str) -> ScheduleRule:
    key = (target, pattern)
    if key not in SCHEDULES:
        known = ", ".join(f"{t}/{p}" for t, p in sorted(SCHEDULES))
        raise NotImplementedError(
            f"no schedule for pattern '{pattern}' on target '{target}'; known: {known}"
        )
    return SCHEDULES[key]


# ----------------------------------------------------------------------------------------------
# Classification


# Payload ops that make an op irregular (gathers at computed indices, control flow): TE's
# reshapes, transposes, concats and inlined pads. They keep their generic (naive loops).
IRREGULAR_OPS = {"tensor.extract", "linalg.index", "scf.if", "scf.for"}
# Integer division traps on a zero divisor, which masked-off vector lanes supply.
TRAPPING_OPS = {
    "arith.divsi",
    "arith.divui",
    "arith.remsi",
    "arith.remui",
    "arith.floordivsi",
    "arith.ceildivsi",
    "arith.ceildivui",
}


def _body_ops(op: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in op.regions[0].blocks[0].operations]


def constant_index(value: ir.Value) -> int | None:
    """The value of an `index`-typed `arith.constant`; None for anything else."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    if not isinstance(value.type, ir.IndexType):
        return None
    return ir.IntegerAttr(owner.operation.attributes["value"]).value


def dim_of(value: ir.Value) -> tuple[ir.Value, int] | None:
    """(tensor, axis) where `value` is `tensor.dim` of that tensor at a constant index."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "tensor.dim":
        return None
    source, index = owner.operation.operands
    axis = constant_index(index)
    return None if axis is None else (source, axis)


def slice_sizes(op: ir.Operation) -> list[ir.Value]:
    """The dynamic size operands of a `tensor.extract_slice` or `tensor.insert_slice`, in the
    order of the `?` entries of its static sizes."""
    *_, n_sizes, n_strides = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
    end = len(op.operands) - n_strides
    return list(op.operands)[end - n_sizes : end]


def is_mul_add(op: ir.Operation) -> bool:
    """Body `out + a * b` (either operand order), the contraction body TE and linalg emit."""
    body = _body_ops(op)
    names = [o.name for o in body]
    if names == ["arith.mulf", "arith.addf", "linalg.yield"] or names == [
        "arith.muli",
        "arith.addi",
        "linalg.yield",
    ]:
        args = list(op.regions[0].blocks[0].arguments)
        mul, add = body[0], body[1]
        mul_ins = {a for a in mul.operands}
        add_ins = list(add.operands)
        return (
            len(args) == 3
            and set(args[:2]) == mul_ins
            and (add_ins == [args[2], mul.results[0]] or add_ins == [mul.results[0], args[2]])
        )
    return False


def dims_of(expr: ir.AffineExpr) -> set[int]:
    """The loop dims an affine expression reads (`d2 + d6` -> {2, 6})."""
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position}
    if isinstance(expr, ir.AffineBinaryExpr):
        return dims_of(expr.lhs) | dims_of(expr.rhs)
    return set()


def iterator_types(op: ir.Operation) -> list[str]:
    """A linalg.generic's iterators as "parallel" / "reduction"."""
    return [
        str(a).split("<")[-1].rstrip(">") for a in ir.ArrayAttr(op.attributes["iterator_types"])
    ]


def _operand_dims(maps: list[ir.AffineMap]) -> list[list[int] | None]:
    out = []
    for amap in maps:
        dims = []
        for expr in amap.results:
            if not isinstance(expr, ir.AffineDimExpr):
                dims = None
                break
            dims.append(expr.position)
        out.append(dims)
    return out


def classify(op: ir.Operation) -> OpInfo:
    """Sort a linalg op into one of PATTERNS by its iterators, indexing maps and body."""
    op = op.operation
    if op.name == "linalg.copy":  # raised pads (schedule/pad.py): an elementwise copy
        rank = ir.RankedTensorType(op.results[0].type).rank if len(op.results) else 0
        iterators = ["parallel"] * rank
        maps = [ir.AffineMap.get_identity(rank)] * 2
    elif op.name == "linalg.generic":
        iterators = iterator_types(op)
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    else:
        return OpInfo(op, "fallback", [], [], [], "")
    operand_dims = _operand_dims(maps)
    ranges: list[int | None] = [None] * len(iterators)
    for value, dims in zip(op.operands, operand_dims):
        if dims is None or not isinstance(value.type, ir.RankedTensorType):
            continue
        for axis, dim in enumerate(dims):
            size = ir.RankedTensorType(value.type).shape[axis]
            if size != ir.ShapedType.get_dynamic_size() and ranges[dim] is None:
                ranges[dim] = size
    results = op.results
    elem = str(ir.RankedTensorType(results[0].type).element_type) if len(results) else ""
    info = OpInfo(op, "fallback", ranges, iterators, operand_dims, elem, num_results=len(results))
    if ROWS_VERSION_ATTR in op.attributes:
        info.rows_version = ir.StringAttr(op.attributes[ROWS_VERSION_ATTR]).value
    if op.name == "linalg.copy":
        info.pattern = "elementwise" if rank else "fallback"
        return info
    body = _body_ops(op)
    info.traps = any(o.name in TRAPPING_OPS for o in body)
    if any(o.name in IRREGULAR_OPS or len(o.regions) for o in body):
        info.gather_loop = _row_gather(op, body, iterators, operand_dims)
        if info.gather_loop is not None:
            info.pattern = "gather"  # reads at computed indices, contiguous along one loop
        return info  # other computed indices, control flow: naive loops
    if len(results) == 1 and _is_conv(op, maps, operand_dims, iterators):
        info.pattern = "conv"
        return info
    if len(results) != 1 or any(d is None for d in operand_dims):
        return info
    out_dims = operand_dims[-1]
    if sorted(out_dims) != [i for i, t in enumerate(iterators) if t == "parallel"]:
        return info  # outputs must be indexed by exactly the parallel loops
    reductions = [i for i, t in enumerate(iterators) if t == "reduction"]
    if not reductions:
        info.pattern = "elementwise"
    elif len(reductions) == 1 and len(op.operands) == 3 and is_mul_add(op):
        _classify_contraction(info, reductions[0])
    else:
        info.pattern = "reduction"
    return info


def _row_gather(op: ir.Operation, body: list[ir.Operation], iterators, operand_dims) -> int | None:
    """The loop along which an all-parallel op's element reads (`tensor.extract` at computed
    indices) all walk their sources' last axis, while their other indices do not depend on
    it; else None. A vector along that loop then reads one contiguous vector per extract
    (MLIR's vectorizer turns such extracts into transfer reads). TE writes clamped windows
    this way (the blocked max pool's taps)."""
    if len(op.results) != 1 or any(t != "parallel" for t in iterators) or not operand_dims[-1]:
        return None
    if any(d is None for d in operand_dims) or any(len(o.regions) for o in body):
        return None

    def index_dim(value: ir.Value) -> int | None:
        owner = value.owner
        if isinstance(owner, ir.Block) or owner.operation.name != "linalg.index":
            return None
        return ir.IntegerAttr(owner.operation.attributes["dim"]).value

    block = op.regions[0].blocks[0]
    memo: dict = {}

    def uses_inner(value: ir.Value) -> bool:
        owner = value.owner
        if isinstance(owner, ir.Block):  # an operand's element: varies with the loops it reads by
            arg = ir.BlockArgument(value)
            return owner == block and inner in (operand_dims[arg.arg_number] or [])
        if value in memo:
            return memo[value]
        o = owner.operation
        memo[value] = index_dim(value) == inner or any(uses_inner(v) for v in o.operands)
        return memo[value]

    extracts = [o for o in body if o.name == "tensor.extract"]
    if not extracts or not extracts[0].operands[1:]:
        return None
    inner = index_dim(extracts[0].operands[-1])
    if inner is None or inner not in operand_dims[-1]:
        return None
    for ex in extracts:
        source, *indices = ex.operands
        if not indices or index_dim(indices[-1]) != inner:
            return None
        if any(uses_inner(v) for v in indices[:-1]):
            return None
        if ir.RankedTensorType(source.type).shape[-1] < 0:
            return None
    return inner


def _is_conv(op: ir.Operation, maps, operand_dims, iterators) -> bool:
    """Direct convolution: out += x[.., p + r, ..] * w[..], unit strides and dilations, where the
    image operand indexes some axes by a sum of a parallel and a reduction loop."""
    if len(op.operands) != 3 or not is_mul_add(op) or operand_dims[2] is None:
        return False
    sums = [i for i, dims in enumerate(operand_dims[:2]) if dims is None]
    if len(sums) != 1 or operand_dims[1 - sums[0]] is None:
        return False
    for expr in maps[sums[0]].results:
        if isinstance(expr, ir.AffineDimExpr):
            continue
        if not isinstance(expr, ir.AffineAddExpr):
            return False
        lhs, rhs = expr.lhs, expr.rhs
        if not (isinstance(lhs, ir.AffineDimExpr) and isinstance(rhs, ir.AffineDimExpr)):
            return False
        kinds = {iterators[lhs.position], iterators[rhs.position]}
        if kinds != {"parallel", "reduction"}:
            return False
    return True


def _classify_contraction(info: OpInfo, k: int) -> None:
    """A: (.., m, .., k), B: (.., k, .., n), C: (.., m, n): assign roles, else a plain reduction."""
    a_dims, b_dims, c_dims = info.operand_dims
    info.pattern = "reduction"
    if k not in a_dims or k not in b_dims or k in c_dims:
        return
    m_dims = [d for d in c_dims if d in a_dims and d not in b_dims]
    n_dims = [d for d in c_dims if d in b_dims and d not in a_dims]
    batch = [d for d in c_dims if d in a_dims and d in b_dims]
    if (
        not m_dims
        or not n_dims
        or len(n_dims) != 1
        or len(m_dims) + len(n_dims) + len(batch) != len(c_dims)
    ):
        return
    # The innermost M dim is the one packed; outer M dims (e.g. a 3-D activation) act as batch.
    info.pattern = "matmul"
    info.m, info.n, info.k = m_dims[-1], n_dims[0], k
    info.batch = batch + m_dims[:-1]
    owner = info.op.operands[1].owner
    info.b_prepacked = (
        isinstance(owner, (ir.Operation, ir.OpView))
        and owner.name == "linalg.unpack"
        and PREPACKED_ATTR in owner.operation.attributes
    )


def reassociation(groups: list[list[int]]) -> ir.ArrayAttr:
    """The `reassociation` attribute of tensor.expand_shape / collapse_shape: which axes of the
    larger-rank shape make each axis of the smaller."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get(
        [ir.ArrayAttr.get([ir.IntegerAttr.get(i64, i) for i in g]) for g in groups]
    )


def rebuild_generic(
    op: ir.Operation,
    result_type: ir.Type,
    inputs: list[ir.Value],
    outputs: list[ir.Value],
    maps: list[ir.Attribute],
    arg_types: list[ir.Type],
    moved: list[int | None] | None = None,
) -> ir.Operation:
    """A generic like `op` (its iterators, other attributes and body) over new operands and
    indexing maps, its block taking `arg_types`: `op`'s block argument i becomes the new one's
    argument `moved[i]` (i by default; None for an argument the body does not read, which is
    dropped). Built before `op`; the caller rewires and erases `op`."""
    with ir.InsertionPoint(op), op.location:
        new = linalg.GenericOp(
            [result_type], inputs, outputs, ir.ArrayAttr.get(maps), op.attributes["iterator_types"]
        ).operation
        for name in list(op.attributes):
            if name not in ("indexing_maps", "iterator_types", "operandSegmentSizes"):
                new.attributes[name] = op.attributes[name]
        block = new.regions[0].blocks.append(*arg_types)
    old = op.regions[0].blocks[0]
    for i, arg in enumerate(old.arguments):
        target = moved[i] if moved else i
        if target is None:
            if list(arg.uses):
                raise AssertionError(f"rebuild_generic: dropped argument {i} is read")
            continue
        arg.replace_all_uses_with(block.arguments[target])
    for inner in [o.operation for o in old.operations]:
        inner.detach_from_parent()
        ir.InsertionPoint(block).insert(inner)
    return new


def erase_dead_index_code(body: ir.Block) -> None:
    """Erase the arith ops and `linalg.index` values of a generic's `body` that nothing uses
    any more (the index arithmetic of a read or a branch that was rewritten away): a body that
    still asks for its indices is no elementwise op to the rules."""
    changed = True
    while changed:
        changed = False
        for op in reversed([o.operation for o in body.operations]):
            pure = op.name.startswith("arith.") or op.name == "linalg.index"
            if pure and op.results and not any(list(r.uses) for r in op.results):
                op.erase()
                changed = True


def is_permuting_copy(op: ir.Operation) -> bool:
    """A generic that only copies its one input with its axes permuted (TE's permute_dims; the
    identity permutation included): all-parallel, the input read through a permutation, the
    output written in order, the body yielding the input."""
    if op.name != "linalg.generic" or len(op.operands) != 2:
        return False
    body = op.regions[0].blocks[0]
    inner = [o.operation for o in body.operations]
    if len(inner) != 1 or inner[0].operands[0] != body.arguments[0]:
        return False
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    return (
        all("parallel" in t for t in iterators)
        and maps[1] == ir.AffineMap.get_identity(maps[1].n_dims)
        and maps[0].is_permutation
    )


def matching_generics(func_op: ir.Operation, match) -> list[tuple[ir.Operation, object]]:
    """`(op, match(op))` for each `linalg.generic` of `func_op` that `match` does not answer
    None for, without entering their bodies. Collected before the caller rewrites any: a rewrite
    during the walk would invalidate it."""
    found = []

    def visit(op):
        op = op.operation
        if op.name != "linalg.generic":
            return ir.WalkResult.ADVANCE
        m = match(op)
        if m is not None:
            found.append((op, m))
        return ir.WalkResult.SKIP

    func_op.walk(visit)
    return found


def dynamic_sizes(shape: list[int], like: ir.Value) -> list[ir.Value]:
    """`tensor.dim` of `like` for each dynamic size of `shape`, in order: the SSA sizes of a
    slice or an empty tensor whose symbolic axes (a batch) are those of `like`."""
    return [
        tensor.DimOp(like, arith.ConstantOp(ir.IndexType.get(), axis).result).result
        for axis, size in enumerate(shape)
        if ir.ShapedType.is_dynamic_size(size)
    ]


def strided_slice(value: ir.Value, cuts: dict[int, tuple]) -> ir.Value:
    """`value` sliced along each axis in `cuts` ({axis: (offset, size, stride)}; an offset or a
    size may be an index Value: a concat's part at a symbolic split); an axis not cut keeps its
    size, also a dynamic one (a symbolic batch: its `tensor.dim`)."""
    t = ir.RankedTensorType(value.type)
    offsets, sizes, strides = [0] * t.rank, list(t.shape), [1] * t.rank
    for axis, (offset, size, stride) in cuts.items():
        offsets[axis], sizes[axis], strides[axis] = offset, size, stride
    return _slice_op(value, offsets, sizes, strides)


def _slice_op(value: ir.Value, offsets: list, sizes: list, strides: list) -> ir.Value:
    """tensor.extract_slice with mixed offsets and sizes (ints or index Values); an int size
    that is dynamic is the axis of `value` kept whole."""
    t = ir.RankedTensorType(value.type)
    sizes = [
        _dim(value, axis) if isinstance(n, int) and ir.ShapedType.is_dynamic_size(n) else n
        for axis, n in enumerate(sizes)
    ]
    static_offsets, dyn_offsets = _mixed(offsets, ir.ShapedType.get_dynamic_stride_or_offset())
    static_sizes, dyn_sizes = _mixed(sizes, ir.ShapedType.get_dynamic_size())
    result = ir.RankedTensorType.get(static_sizes, t.element_type)
    return tensor.ExtractSliceOp(
        result, value, dyn_offsets, dyn_sizes, [], static_offsets, static_sizes, strides
    ).result


def insert_slice(part: ir.Value, dest: ir.Value, offsets: list) -> ir.Value:
    """`part` inserted into `dest` at `offsets` (ints or index Values), unit strides."""
    static_offsets, dyn_offsets = _mixed(offsets, ir.ShapedType.get_dynamic_stride_or_offset())
    static_sizes, dyn_sizes = _mixed(mixed_shape(part), ir.ShapedType.get_dynamic_size())
    return tensor.InsertSliceOp(
        part, dest, dyn_offsets, dyn_sizes, [], static_offsets, static_sizes, [1] * len(offsets)
    ).result


def mixed_shape(value: ir.Value) -> list:
    """`value`'s sizes: ints, and the `tensor.dim` of each dynamic one."""
    shape = ir.RankedTensorType(value.type).shape
    return [_dim(value, a) if ir.ShapedType.is_dynamic_size(n) else n for a, n in enumerate(shape)]


def _dim(value: ir.Value, axis: int) -> ir.Value:
    return tensor.DimOp(value, arith.ConstantOp(ir.IndexType.get(), axis).result).result


def _mixed(values: list, marker: int) -> tuple[list, list]:
    """An op's static list (`marker` where an index Value stands) and its Values, in order."""
    static = [marker if isinstance(v, ir.Value) else v for v in values]
    return static, [v for v in values if isinstance(v, ir.Value)]


def remap_operands(op: ir.Operation, mapping: dict) -> None:
    """Replace, in `op` and the ops nested in it, every operand that `mapping` has a key for:
    a clone of ops into another block made to read that block's values."""

    def visit(inner):
        inner = inner.operation
        for i, value in enumerate(inner.operands):
            if value in mapping:
                inner.operands[i] = mapping[value]
        return ir.WalkResult.ADVANCE

    op.walk(visit)


def linalg_ops(func_op: ir.Operation) -> list[ir.Operation]:
    """The linalg ops of a PrimFunc body, in order. Fills fold into the schedules of their users;
    a prepacked weight's unpack folds into its matmul (or is decomposed by `finalize`)."""
    out = []

    def scan(region) -> None:
        for block in region.blocks:
            for op in block.operations:
                op = op.operation
                if op.name == "scf.if":  # the copies of a run-time dispatch (driver.py)
                    for inner in op.regions:
                        scan(inner)
                elif (
                    op.name.startswith("linalg.")
                    and op.name != "linalg.fill"
                    and PREPACKED_ATTR not in op.attributes
                ):
                    out.append(op)

    scan(func_op.regions[0])
    return out


# ----------------------------------------------------------------------------------------------
# Transform scripts


# The scf.for attribute that SCFToControlFlow hands on to the loop's latch branch, and the
# annotation `keep_rolled` puts. Under this name (not `llvm.loop_annotation`) convert-to-llvm
# copies it into the LLVM branch's own `loop_annotation`, which the translation to LLVM IR
# makes !llvm.loop metadata; the dialect-prefixed name stayed a discardable attribute there and
# needed a Python walk over the whole module to move (65 ms of ResNet-18's build).
LOOP_ANNOTATION_ATTR = "loop_annotation"
KEEP_ROLLED = "#llvm.loop_annotation<unroll = <disable = true>>"


class Script:
    """Builds the text of one `transform.named_sequence`; each helper returns fresh handle names."""

    ANY = "!transform.any_op"

    def __init__(self, func: str = "%func"):
        self.func = func
        self.lines: list[str] = []
        self._count = 0

    def fresh(self, base: str = "h") -> str:
        self._count += 1
        return f"%{base}{self._count}"

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def _results(self, n: int, base: str) -> list[str]:
        return [self.fresh(base) for _ in range(n)]

    # -- matching ---------------------------------------------------------------------------------
    def match_attribute(
        self, name: str, value: int, base: str = "op", inside: str | None = None
    ) -> str:
        """A handle to the payload ops carrying integer attribute `name` = `value` (empty if none),
        in the function or in the payload of handle `inside` (a loop)."""
        h = self.fresh(base)
        self.emit(
            f"{h} = transform.structured.match attributes{{{name} = {value} : i64}} "
            f"in {inside or self.func} : ({self.ANY}) -> {self.ANY}"
        )
        return h

    def match_tagged(self, tag: int) -> str:
        return self.match_attribute(SCHED_ID_ATTR, tag)

    def tag(self, h: str, tag: int) -> None:
        p = self.fresh("tag")
        self.emit(f"{p} = transform.param.constant {tag} : i64 -> !transform.param<i64>")
        self.emit(
            f'transform.annotate {h} "{SCHED_ID_ATTR}" = {p} : {self.ANY}, !transform.param<i64>'
        )

    def producer(self, h: str, operand: int) -> str:
        p = self.fresh("prod")
        self.emit(
            f"{p} = transform.get_producer_of_operand {h}[{operand}] : ({self.ANY}) -> {self.ANY}"
        )
        return p

    def consumer(self, h: str, result: int = 0) -> str:
        c = self.fresh("cons")
        self.emit(
            f"{c} = transform.get_consumers_of_result {h}[{result}] : ({self.ANY}) -> {self.ANY}"
        )
        return c

    # -- structured ops ----------------------------------------------------------------------------
    def tile_for(
        self, h: str, sizes: list[int], interchange: list[int] | None = None
    ) -> tuple[str, list[str]]:
        nloops = sum(1 for s in sizes if s)
        tiled, *loops = self._results(1 + nloops, "t")
        inter = f" interchange = {interchange}" if interchange else ""
        types = ", ".join([self.ANY] * (1 + nloops))
        lhs = ", ".join([tiled] + loops)
        self.emit(
            f"{lhs} = transform.structured.tile_using_for {h} tile_sizes {sizes}{inter} : ({self.ANY}) -> ({types})"
        )
        return tiled, loops

    def peel(self, loop: str) -> tuple[str, str]:
        """`loop` (an scf.for) split into its whole tiles (static size once canonicalized) and
        the partial one."""
        cast, main, rest = self.fresh("cast"), self.fresh("main"), self.fresh("rest")
        self.emit(f'{cast} = transform.cast {loop} : {self.ANY} to !transform.op<"scf.for">')
        self.emit(
            f"{main}, {rest} = transform.loop.peel {cast} : "
            f'(!transform.op<"scf.for">) -> ({self.ANY}, {self.ANY})'
        )
        self.patterns("canonicalization", target=main)
        return main, rest

    def split(self, h: str, dim: int, at: int) -> tuple[str, str]:
        """`h` split along its loop `dim` into two ops: the iterations below `at` and the rest.
        Unlike `peel`, both keep static sizes where `h` has them (no loop to canonicalize)."""
        low, high = self._split(h, f"{dim}", f"{at}", self.ANY, 2)
        return low, high

    def split_continuous(self, h: str, dim: int, target: int) -> tuple[list[int], list[str]]:
        """`h` split along its loop `dim` into parts that are multiples of `target`, then of
        each power of two below it (8: 8, 4, 2, 1; 6: 6, 4, 2, 1), and an empty rest
        (transform.structured.continuous_tile_sizes: the part sizes are computed where `h` is,
        so its size may be a thread's share of a dynamic one). Returns those tile sizes and the
        len(sizes) + 1 parts."""
        sizes, power = [target], 1 << (target.bit_length() - 1)
        power = power // 2 if power == target else power
        while power:
            sizes.append(power)
            power //= 2
        tiles, chunks = self.fresh("tiles"), self.fresh("chunks")
        self.emit(
            f"{tiles}, {chunks} = transform.structured.continuous_tile_sizes {h} "
            f"{{dimension = {dim}, target_size = {target}}} : ({self.ANY}) -> {self.ANY}"
        )
        return sizes, self._split(
            h, f"{dim}, multiway", chunks, f"{self.ANY}, {self.ANY}", len(sizes) + 1
        )

    def _split(self, h: str, attrs: str, after: str, types: str, count: int) -> list[str]:
        """transform.structured.split of `h` after `after` ({dimension = `attrs`}), its parts
        as `count` handles."""
        parts = self.fresh("parts")
        self.emit(
            f"{parts} = transform.structured.split {h} after {after} "
            f"{{dimension = {attrs}}} : {types}"
        )
        handles = [self.fresh("part") for _ in range(count)]
        results = ", ".join([self.ANY] * count)
        self.emit(
            f"{', '.join(handles)} = transform.split_handle {parts} : ({self.ANY}) -> ({results})"
        )
        return handles

    def match_generic(self, inside: str) -> str:
        """The linalg.generic ops inside `inside` (a loop after tiling or peeling)."""
        h = self.fresh("in")
        self.emit(
            f'{h} = transform.structured.match ops{{["linalg.generic"]}} in {inside} : '
            f"({self.ANY}) -> {self.ANY}"
        )
        return h

    def keep_rolled(self, loops: list[str]) -> None:
        """Ask LLVM not to unroll `loops` (`llvm.loop.unroll.disable` on their latches:
        LOOP_ANNOTATION_ATTR): loops whose body is already a full step of work."""
        if not loops:
            return
        param = self.fresh("rolled")
        self.emit(
            f"{param} = transform.param.constant {KEEP_ROLLED} -> !transform.any_param"
        )
        for loop in loops:
            self.emit(
                f'transform.annotate {loop} "{LOOP_ANNOTATION_ATTR}" = {param} '
                f": {self.ANY}, !transform.any_param"
            )

    def interchange(self, h: str, order: list[int]) -> str:
        """Reorder a generic's loops: loop i of the result is loop `order[i]` of `h`."""
        out = self.fresh("perm")
        self.emit(
            f"{out} = transform.structured.interchange {h} iterator_interchange = {order} "
            f": ({self.ANY}) -> {self.ANY}"
        )
        return out

    def tile_forall(
        self,
        h: str,
        *,
        tile_sizes: list[int] | None = None,
        num_threads: list[int] | None = None,
    ) -> tuple[str, str]:
        tiled, loop = self._results(2, "par")
        spec = (
            f"num_threads {num_threads}" if num_threads is not None else f"tile_sizes {tile_sizes}"
        )
        self.emit(
            f"{tiled}, {loop} = transform.structured.tile_using_forall {h} {spec} : ({self.ANY}) -> ({self.ANY}, {self.ANY})"
        )
        return tiled, loop

    def match_init_fill(self, tag: int) -> str:
        """A handle to the zero fill tagged for op `tag` (`tag_init_fills`); empty without one."""
        return self.match_attribute(INIT_FILL_ATTR, tag, "fill")

    def match_pad_fill(self, tag: int) -> str:
        """A handle to the fill under the padded image of conv `tag` (`ConvSchedule.align`)."""
        return self.match_attribute(PAD_FILL_ATTR, tag, "pad")

    def fuse_init_fill(self, tag: int, loop: str) -> None:
        """Fuse the zero fill tagged for op `tag` (`tag_init_fills`) into `loop`, a thread
        forall: each thread zeroes its own slice of the accumulator where it then computes,
        instead of one thread zeroing all of it before the parallel region. No-op without one."""
        self.fuse_into(self.match_init_fill(tag), loop)

    def fuse_into(self, producer: str, loop: str) -> tuple[str, str]:
        """Move `producer` into `loop` (each iteration computes the slice it reads); returns the
        fused op and the loop, whose old handle is consumed."""
        fused, new_loop = self.fresh("fused"), self.fresh("loop")
        self.emit(
            f"{fused}, {new_loop} = transform.structured.fuse_into_containing_op {producer} into "
            f"{loop} : ({self.ANY}, {self.ANY}) -> ({self.ANY}, {self.ANY})"
        )
        return fused, new_loop

    def vectorize(
        self, h: str, vector_sizes: list[int] | None = None, extracts: bool = False
    ) -> None:
        """`extracts`: vectorize `tensor.extract` in the payload too (contiguous ones become
        transfer reads, others gathers); without it such an op is not vectorized."""
        sizes = f" vector_sizes {vector_sizes}" if vector_sizes else ""
        flag = " {vectorize_nd_extract}" if extracts else ""
        self.emit(f"transform.structured.vectorize {h}{sizes}{flag} : {self.ANY}")

    def patterns(self, *names: str, target: str | None = None) -> None:
        body = " ".join(f"transform.apply_patterns.{n}" for n in names)
        self.emit(f"transform.apply_patterns to {target or self.func} {{ {body} }} : {self.ANY}")

    def text(self) -> str:
        body = "\n".join(self.lines)
        return (
            "module attributes {transform.with_named_sequence} {\n"
            f"  transform.named_sequence @__transform_main({self.func}: {self.ANY} {{transform.readonly}}) {{\n"
            f"{body}\n    transform.yield\n  }}\n}}\n"
        )


def lower_leftover_packs(s: Script) -> None:
    """Decompose pack/unpack ops no rule consumed (e.g. a prepacked weight feeding a matmul that
    fell back): one-shot bufferization has no rule for them."""
    results = {
        "linalg.unpack": (
            "tensor.empty",
            "linalg.transpose",
            "tensor.collapse_shape",
            "tensor.extract_slice",
        ),
        "linalg.pack": ("tensor.pad", "tensor.expand_shape", "linalg.transpose"),
    }
    for name, outs in results.items():
        kind = name.split(".")[1]
        found, each, typed = s.fresh("left"), s.fresh("one"), s.fresh("typed")
        types = ", ".join(f'!transform.op<"{o}">' for o in outs)
        s.emit(
            f'{found} = transform.structured.match ops{{["{name}"]}} in {s.func} : ({s.ANY}) -> {s.ANY}'
        )
        s.emit(f"transform.foreach {found} : {s.ANY} {{")
        s.emit(f"^bb0({each}: {s.ANY}):")
        s.emit(f'  {typed} = transform.cast {each} : {s.ANY} to !transform.op<"{name}">')
        s.emit(
            f'  transform.structured.lower_{kind} {typed} : (!transform.op<"{name}">) -> ({types})'
        )
        s.emit("}")


def finalize(s: Script) -> None:
    """Shared vector cleanup after the rules: contract formation, hoisting, lowering to 1-D FMAs.

    Order matters: hoist loop-invariant subsets *before* folding tensor subsets into transfers,
    else the accumulators are not hoisted out of the reduction loop (MLIR_NOTES). Lowerings that
    fight canonicalization (shape_cast, broadcast + outerproduct) are left to convert-vector-to-llvm.
    """
    lower_leftover_packs(s)
    s.patterns("vector.reduction_to_contract", "vector.transfer_permutation_patterns")
    loops = s.fresh("loops")
    s.emit(
        f"{loops} = transform.structured.match interface{{LoopLikeInterface}} in {s.func} : ({s.ANY}) -> {s.ANY}"
    )
    s.emit(f"transform.apply_licm to {loops} : {s.ANY}")
    s.emit(f"transform.loop.hoist_loop_invariant_subsets {loops} : {s.ANY}")
    # Unit dims inside a tile's vectors go too (8x1x32 accumulators of row tiles over C laid
    # out [M, N/NR, NR]): LLVM allocated the 3-D form worse, spilling an accumulator per step.
    s.patterns(
        "vector.reduction_to_contract",
        "vector.cast_away_vector_leading_one_dim",
        "vector.drop_unit_dims_with_shape_cast",
        "canonicalization",
    )
    s.patterns("tensor.fold_tensor_subset_ops_into_vector_transfers")
    s.patterns('vector.lower_contraction lowering_strategy = "outerproduct"')
    s.patterns(
        'vector.lower_transpose lowering_strategy = "shuffle_1d"',
        'vector.lower_multi_reduction lowering_strategy = "innerreduction"',
        "vector.lower_masked_transfers",
    )


def apply_script(func_op: ir.Operation, script: Script, quiet: bool = False) -> None:
    text = script.text()
    if os.environ.get(PRINT_SCRIPT_ENV, "") not in ("", "0", "failures") and not quiet:
        import sys

        print(f"// payload\n{func_op}\n// schedule\n{text}", file=sys.stderr)
    tmod = ir.Module.parse(text, func_op.context)
    seq = next(
        op
        for op in tmod.body.operations
        if ir.StringAttr(op.attributes["sym_name"]).value == "__transform_main"
    )
    interpreter.apply_named_sequence(func_op, seq, tmod)


def generalize(func_op: ir.Operation) -> None:
    """Named ops (fill, matmul, transpose...) -> linalg.generic, so that `classify` reads every
    op's loops and maps (the GPU rules read generics only)."""
    s = Script()
    ops = s.fresh("named")
    s.emit(
        f"{ops} = transform.structured.match interface{{LinalgOp}} in {s.func} : ({s.ANY}) -> {s.ANY}"
    )
    s.emit(f"transform.structured.generalize {ops} : ({s.ANY}) -> {s.ANY}")
    apply_script(func_op, s)


def legalize_function(func_op: ir.Operation) -> None:
    """What must run even with schedule=off: decompose pack/unpack ops (prepacked weights)."""
    has_packs = []

    def visit(op):
        if op.operation.name in ("linalg.pack", "linalg.unpack"):
            has_packs.append(op)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    if has_packs:
        s = Script()
        lower_leftover_packs(s)
        apply_script(func_op, s)


def apply_rules(
    func_op: ir.Operation, opts: ScheduleOptions, chosen: set[int] | None, fuse: bool = True
) -> list[str]:
    """Run the rules of the ops in `chosen` (all when None) on `func_op` in place; raises on a
    script failure, leaving `func_op` partly transformed (callers work on a clone). `fuse`:
    let rules schedule other ops with theirs (`ScheduleRule.absorbs`)."""
    infos = [classify(op) for op in linalg_ops(func_op)]
    for tag, info in enumerate(infos):
        info.tag = tag
        info.op.attributes[SCHED_ID_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), tag)
    picked = [(tag, info) for tag, info in enumerate(infos) if chosen is None or tag in chosen]
    rules = {tag: get_schedule(opts.target.kind, info.pattern) for tag, info in picked}
    groups, absorbed = {}, {}
    for tag, info in picked if fuse else []:
        members = [t for t in rules[tag].absorbs(info, infos, opts) if t in rules and t != tag]
        if members and not any(t in absorbed or t in groups for t in [tag, *members]):
            groups[tag] = members
            absorbed.update((t, tag) for t in members)
    distinct = list({id(r): r for r in rules.values()}.values())
    pre = Script()
    handles = {tag: pre.match_tagged(tag) for tag, _ in picked}
    for tag, info in picked:
        if tag not in absorbed:
            rules[tag].align(info, infos, opts)
    for tag, info in picked:
        if tag not in absorbed:
            rules[tag].prepare(pre, handles[tag], info, opts)
    if len(pre.lines) > len(handles):
        apply_script(func_op, pre)
        fold_prepacked(func_op)
        for rule in distinct:
            rule.after_prepare(func_op)
    tag_init_fills(func_op)
    border = tag_border_fills(func_op)
    main = Script()
    # Match every op first: handles then follow ops that a later rule's patterns rewrite.
    handles = {tag: main.match_tagged(tag) for tag, _ in picked}
    for index, shape in enumerate(border):
        schedule_border_fill(main, index, shape, VECTORS_PER_STEP * opts.lanes)
    used = []
    for tag, info in picked:
        if tag in absorbed:
            used.append(f"fused-into-{absorbed[tag]}")
            continue
        info.fused = [(handles[t], infos[t]) for t in groups.get(tag, [])]
        used.append(rules[tag].schedule(main, handles[tag], info, opts))
    finalize(main)
    apply_script(func_op, main)
    hoist_masked_accumulators(func_op)
    for rule in distinct:
        rule.after_schedule(func_op)
    _untag(func_op)
    approximate_math(func_op)
    contract_fma(func_op)
    return used


def forward_tile_writes(func_op: ir.Operation) -> int:
    """`transfer_read(transfer_write(v, t, idx), idx)` -> `v` on tensors where the two move the
    same elements and differ only in unit vector dims (a fused conv tile: its zero start is
    written as 2x1x8x16 and read as 2x8x16 through a permutation map; the epilogue reads the
    sums written the other way round). Upstream's fold wants identical types and maps. Writes
    left without readers are erased, so the tile never needs a buffer of its own (one-shot
    bufferization had given each tile a heap copy: the epilogue writes the tile's place while
    the sums, in the same place, are still to be read). Returns the number of reads replaced."""
    reads = []

    def visit(op):
        op = op.operation
        source = op.operands[0].owner if op.name == "vector.transfer_read" else None
        if isinstance(source, ir.OpView) and source.operation.name == "vector.transfer_write":
            reads.append(op)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    done = 0
    for read in reads:
        write = read.operands[0].owner.operation
        r_idx, w_idx = _transfer_indices(read), _transfer_indices(write)
        if r_idx is None or w_idx is None or len(r_idx) != len(w_idx):
            continue  # masked
        if any(a != b for a, b in zip(r_idx, w_idx)):
            continue  # another start
        r_acc, w_acc = (
            _accessed(read, read.results[0].type),
            _accessed(write, write.operands[0].type),
        )
        if r_acc is None or r_acc != w_acc:
            continue
        value = write.operands[0]
        with ir.InsertionPoint(read), read.location:
            if value.type != read.results[0].type:
                value = vector.ShapeCastOp(read.results[0].type, value).result
        read.results[0].replace_all_uses_with(value)
        read.erase()
        done += 1
    _erase_dead_writes(func_op)
    return done


def _transfer_indices(op: ir.Operation) -> list[ir.Value] | None:
    """The start indices of an unmasked transfer_read or transfer_write; None for a masked one."""
    indices, mask = transfer_parts(op)
    return None if mask is not None else indices


def _accessed(op: ir.Operation, vtype: ir.Type) -> list[tuple[int, int]] | None:
    """(tensor dim, extent) of each non-unit vector dim of an in-bounds transfer; None when it
    broadcasts (a constant in its map) or may run out of bounds."""
    in_bounds = op.attributes.get("in_bounds")
    if in_bounds is None or not all(ir.BoolAttr(b).value for b in ir.ArrayAttr(in_bounds)):
        return None
    pmap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    shape = ir.VectorType(vtype).shape
    out = []
    for e, size in zip(pmap.results, shape):
        if not isinstance(e, ir.AffineDimExpr):
            return None
        if size != 1:
            out.append((e.position, size))
    return out


def _erase_dead_writes(func_op: ir.Operation) -> None:
    """Erase tensor transfer_writes whose result is unused, then the writes they wrote into."""
    while True:
        dead = []

        def visit(op, dead=dead):
            op = op.operation
            writes_tensor = op.name == "vector.transfer_write" and len(op.results) == 1
            if writes_tensor and not list(op.results[0].uses):
                dead.append(op)
            return ir.WalkResult.ADVANCE

        func_op.walk(visit)
        if not dead:
            return
        for op in dead:
            op.erase()


def tag_init_fills(func_op: ir.Operation) -> None:
    """Mark each `linalg.fill` that only starts the accumulator of a tagged op (after the
    prepare script: e.g. the packed C of a packed matmul) with that op's tag, for
    `Script.fuse_init_fill`."""
    found = []

    def visit(op):
        op = op.operation
        if SCHED_ID_ATTR in op.attributes and op.name.startswith("linalg.") and op.results:
            init = op.operands[len(op.operands) - 1].owner
            if isinstance(init, ir.Block) or init.name != "linalg.fill":
                return ir.WalkResult.ADVANCE
            if len(list(init.results[0].uses)) == 1:
                found.append((init.operation, op.attributes[SCHED_ID_ATTR]))
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    for fill, tag in found:
        fill.attributes[INIT_FILL_ATTR] = tag


def tag_border_fills(func_op: ir.Operation) -> list[tuple[int, ...]]:
    """Mark each `linalg.fill` of one side of a padded buffer's border (`pad._border`: a fill of
    a slice, or of an empty tensor once the slice of an empty one folds, whose result only goes
    into the buffer by `insert_slice`) with its index; returns their shapes. No rule schedules
    them: as scalar loops they became one 64-byte memset per image row of a blocked layout's
    left and right columns, which LLVM unrolled in full (MobileNetV2: 1044 in one block, whose
    instruction scheduling took llc 0.58 s)."""
    found = []

    def visit(op):
        op = op.operation
        tagged = INIT_FILL_ATTR in op.attributes or PAD_FILL_ATTR in op.attributes
        if op.name != "linalg.fill" or tagged:
            return ir.WalkResult.ADVANCE
        out = op.operands[1].owner
        uses = list(op.results[0].uses)
        kind = ir.RankedTensorType(op.results[0].type)
        if (
            not isinstance(out, ir.Block)
            and out.name in ("tensor.extract_slice", "tensor.empty")
            and len(uses) == 1
            and uses[0].owner.name == "tensor.insert_slice"
            and kind.has_static_shape
            and 0 not in kind.shape
        ):
            found.append((op, tuple(kind.shape)))
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    i64 = ir.IntegerType.get_signless(64)
    for index, (fill, _) in enumerate(found):
        fill.attributes[BORDER_FILL_ATTR] = ir.IntegerAttr.get(i64, index)
    return [shape for _, shape in found]


def schedule_border_fill(s: Script, index: int, shape: tuple[int, ...], width: int) -> None:
    """Border fill `index` of `shape`: a vector of up to `width` along its last axis per step
    (masked past its end), in loops kept rolled."""
    h = s.match_attribute(BORDER_FILL_ATTR, index, "border")
    step = min(shape[-1], width)
    h, loops = s.tile_for(h, [1] * (len(shape) - 1) + [step if step < shape[-1] else 0])
    s.keep_rolled(loops)
    s.vectorize(h, [1] * (len(shape) - 1) + [step])


def fold_prepacked(func_op: ir.Operation) -> None:
    """`linalg.pack(linalg.unpack(x))` -> `x` when the unpack is marked prepacked and both use the
    same tiling. Upstream's fold refuses padded packs (it cannot know the padding of `x`); a
    prepacked argument is zero-padded by construction (`matmul.pack_weight`)."""
    keys = ("inner_dims_pos", "static_inner_tiles", "outer_dims_perm")

    def same_tiling(a: ir.Operation, b: ir.Operation) -> bool:
        for key in keys:
            in_a, in_b = key in a.attributes, key in b.attributes
            if in_a != in_b or (in_a and str(a.attributes[key]) != str(b.attributes[key])):
                return False
        return True

    packs = []

    def visit(op):
        if op.operation.name == "linalg.pack":
            packs.append(op.operation)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    for pack in packs:
        src = pack.operands[0]
        unpack = src.owner
        if not isinstance(unpack, (ir.Operation, ir.OpView)) or unpack.name != "linalg.unpack":
            continue
        unpack = unpack.operation
        if PREPACKED_ATTR not in unpack.attributes or not same_tiling(pack, unpack):
            continue
        if unpack.operands[0].type != pack.results[0].type:
            continue
        pack.results[0].replace_all_uses_with(unpack.operands[0])
        pack.erase()


def _untag(root: ir.Operation) -> None:
    def visit(op):
        op = op.operation
        for name in TEMPORARY_ATTRS:
            if name in op.attributes:
                del op.attributes[name]
        return ir.WalkResult.ADVANCE

    root.walk(visit)
