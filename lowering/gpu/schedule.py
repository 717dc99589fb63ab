"""`relax-schedule-gpu`: default GPU schedules for PrimFuncs (DLight's rule set).

    relaxmlir-opt kernels.mlir '--relax-schedule-gpu{target="cuda -arch=sm_90"}'

Which rule applies (`pick_rule`): any matmul among the ops -> Matmul (GEMV when the rows are few),
a reduction root -> Reduction, an elementwise root fed by a reduction -> GeneralReduction
(softmax, layer norm), anything else -> Fallback. A function with a scalar result (a full
reduction) runs on a single thread ("serial").

The rules that carry the time are kernel templates: the schedule only tags the ops here and a
pass writes the kernel after bufferization (`contract.py`: contractions through shared memory;
`rows.py`: one block per row with cooperative reductions; `transpose.py`: transposing copies
through a shared tile). What no template takes is tiled with transform scripts: the root op (the
last linalg op) into an `scf.forall` mapped to blocks, its producers fused, tiled again into an
`scf.forall` mapped to threads; a rule row fixes the block tile and the threads per block (the
block size is recorded on the function for `relax-gpu-map`). When fusion fails, every op gets its
own Fallback kernel (launched in order on one stream).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from lowering.gpu import contract, emit, rows, transpose
from lowering.gpu import space as gpu_space
from lowering.registry import PassError, register_pass, target_option
from lowering.schedule.common import (
    PRIM_FUNC_ATTR,
    SCHED_ID_ATTR,
    SCHEDULE_ATTR,
    SCRIPT_ERRORS,
    OpInfo,
    Script,
    _untag,
    apply_script,
    classify,
    generalize,
)
from lowering.schedule.space import default_point, knobs_of
from relaxmlir.target import Target

BLOCK_DIMS_ATTR = "relax.gpu_block_dims"  # [x, y, z] threads per block, read by relax-gpu-map
MAX_BLOCK_AXES = 3  # grids are 3-D: outer axes beyond these stay loops inside each thread


@dataclass(frozen=True)
class GpuRule:
    """A default GPU schedule (the role of a `dl.gpu.*` rule): tile sizes for the root's last two
    parallel axes, per block and per thread (`thread_tile`: elements each thread computes)."""

    name: str
    block_tile: tuple[int, int]  # (rows, columns) of the root's output per block
    thread_tile: tuple[int, int]  # (rows, columns) per thread: a register tile
    row_per_block: bool = False  # one block per row, threads across the row (reductions)
    spread: bool = False  # rows share a block when the contiguous axis is shorter than it


# Rule name -> parameters. `dl.gpu.Matmul()` etc. select rows of this table.
RULES: dict[str, GpuRule] = {
    # 64x64 output tile per block, 4x4 register tile per thread: 256 threads.
    "matmul": GpuRule("matmul", (64, 64), (4, 4)),
    # few rows: one thread per output column, 128 columns per block.
    "gemv": GpuRule("gemv", (1, 128), (1, 1)),
    # one thread per output element, 256 outputs per block, each loops over the reduced axes.
    "reduction": GpuRule("reduction", (1, 256), (1, 1), spread=True),
    # one block per row, 256 threads across it.
    "general_reduction": GpuRule("general_reduction", (1, 256), (1, 1), row_per_block=True),
    # one thread per element, 256 per block, thread x along the contiguous axis (coalesced).
    "fallback": GpuRule("fallback", (1, 256), (1, 1), spread=True),
}
DEFAULT_RULES = ("matmul", "gemv", "reduction", "general_reduction", "fallback")
GEMV_MAX_ROWS = 4  # a matmul with at most this many rows is a GEMV


def linalg_ops(func_op: ir.Operation) -> list[ir.Operation]:
    """The top-level linalg ops of a PrimFunc, fills included (they fuse like any producer)."""
    out = []
    for block in func_op.regions[0].blocks:
        for op in block.operations:
            if op.operation.name.startswith("linalg."):
                out.append(op.operation)
    return out


def _matmul_rows(infos: list[OpInfo]) -> int | None:
    """Rows of the last matmul among `infos` (None: no matmul, or a dynamic row count)."""
    matmuls = [i for i in infos if i.pattern == "matmul"]
    if not matmuls or len(infos[-1].operand_dims[-1] or []) < 2:
        return None
    last = matmuls[-1]
    return last.size(last.m) if last.m is not None and last.ranges[last.m] is not None else -1


# Rule name -> does it apply to a PrimFunc whose classified ops are `infos` (the root last)?
APPLIES = {
    "matmul": lambda infos: (_matmul_rows(infos) or 0) > GEMV_MAX_ROWS or _matmul_rows(infos) == -1,
    "gemv": lambda infos: 0 < (_matmul_rows(infos) or 0) <= GEMV_MAX_ROWS,
    "reduction": lambda infos: infos[-1].pattern in ("reduction", "matmul"),
    "general_reduction": lambda infos: any(i.pattern == "reduction" for i in infos[:-1]),
    "fallback": lambda infos: True,
}


def _dot_rows(infos: list[OpInfo]) -> bool:
    """A GEMV whose matrix runs along K (x @ w.T with w [N, K]): each output is a dot product
    of two contiguous rows, which the row template (one block per output, warp shuffles)
    reads coalesced; one thread per output column would stride through w."""
    matmul = next((i for i in reversed(infos) if i.pattern == "matmul"), None)
    if matmul is None or matmul.k is None:
        return False
    b_dims = matmul.operand_dims[1] if len(matmul.operand_dims) > 1 else None
    return bool(b_dims) and b_dims[-1] == matmul.k


def pick_rule(infos: list[OpInfo], enabled: tuple[str, ...]) -> str | None:
    """The first rule of `enabled` (in its order, as DLight tries its rules) that applies."""
    return next((name for name in enabled if APPLIES[name](infos)), None)


def _parallel_axes(info: OpInfo) -> list[int]:
    """Loop dims of the root's result axes, outermost first."""
    return list(info.operand_dims[-1] or [])


def _tiles(
    info: OpInfo, rule: GpuRule
) -> tuple[list[int], list[int], list[str], list[str], list[int]]:
    """Block tile sizes, thread counts (per loop of the root), their mappings and the block size."""
    loops = len(info.iterators)
    axes = _parallel_axes(info)
    block = [0] * loops
    threads = [0] * loops
    inner = axes[-2:]  # the two axes a block tiles
    outer = (
        axes[: len(axes) - len(inner)][-(MAX_BLOCK_AXES - len(inner)) :] if len(axes) > 2 else []
    )
    for d in outer:
        block[d] = 1
    rows, cols = rule.block_tile
    trows, tcols = rule.thread_tile
    if (
        rule.spread
        and len(inner) == 2
        and None not in (info.ranges[inner[0]], info.ranges[inner[1]])
    ):
        # a short contiguous axis: rows of it share the block (a 58-wide pad gets 4 rows per
        # block of 232 threads instead of 58 threads)
        last = info.ranges[inner[1]]
        if last < cols:
            rows = max(1, min(info.ranges[inner[0]], cols // last))
    sizes = [rows, cols][-len(inner) :] if inner else []
    per_thread = [trows, tcols][-len(inner) :] if inner else []
    for d, size, t in zip(inner, sizes, per_thread):
        extent = info.ranges[d]
        if rule.row_per_block and d == inner[-1]:
            size = extent if extent is not None else cols  # the whole row in one block
        elif extent is not None:
            size = min(size, extent)
        size = max(size, 1)  # an empty axis: tiles of 1 (no iteration; the launch is skipped)
        block[d] = size
        threads[d] = max(1, -(-min(size, cols if rule.row_per_block else size) // t))
    if rule.row_per_block and inner:
        threads[inner[-1]] = min(threads[inner[-1]], rule.block_tile[1])
        if len(inner) == 2:
            block[inner[0]], threads[inner[0]] = 1, 0
    names = "xyz"
    tiled_block = [d for d in range(loops) if block[d]]
    block_map = [f"#gpu.block<{names[len(tiled_block) - 1 - i]}>" for i in range(len(tiled_block))]
    tiled_thr = [d for d in range(loops) if threads[d]]
    thread_map = [f"#gpu.thread<{names[len(tiled_thr) - 1 - i]}>" for i in range(len(tiled_thr))]
    dims = [threads[d] for d in reversed(tiled_thr)] + [1] * (3 - len(tiled_thr))
    return block, threads, block_map, thread_map, dims


def _tile_forall(s: Script, h: str, spec: str, mapping: list[str]) -> tuple[str, str]:
    tiled, loop = s.fresh("t"), s.fresh("forall")
    s.emit(
        f"{tiled}, {loop} = transform.structured.tile_using_forall {h} {spec} "
        f"(mapping = [{', '.join(mapping)}]) : ({s.ANY}) -> ({s.ANY}, {s.ANY})"
    )
    return tiled, loop


def _fuse(s: Script, producers: list[str], loop: str) -> list[str]:
    fused = []
    for h in producers:
        f, loop2 = s.fresh("fused"), s.fresh("forall")
        s.emit(
            f"{f}, {loop2} = transform.structured.fuse_into_containing_op {h} into {loop} "
            f": ({s.ANY}, {s.ANY}) -> ({s.ANY}, {s.ANY})"
        )
        fused.append(f)
        loop = loop2
    return fused


def emit_rule(s: Script, root: str, producers: list[str], info: OpInfo, rule: GpuRule) -> list[int]:
    """Tile `root` to blocks then threads, fusing `producers` (reverse program order) each time;
    returns the block size [x, y, z]."""
    block, threads, block_map, thread_map, dims = _tiles(info, rule)
    if not block_map or not thread_map:
        raise ValueError(f"{rule.name}: the root has no parallel axis to map (a scalar result)")
    tiled, loop = _tile_forall(s, root, f"tile_sizes {block}", block_map)
    fused = _fuse(s, producers, loop)
    _, tloop = _tile_forall(s, tiled, f"num_threads {threads}", thread_map)
    if fused:
        # One merged handle: the op fuses whichever producer it finds next, so the order does
        # not have to be right when tiling moved ops (dynamic shapes).
        merged = s.fresh("producers")
        s.emit(f"{merged} = transform.merge_handles {', '.join(fused)} : {s.ANY}")
        _fuse(s, [merged], tloop)
    return dims


def schedule_function(
    func_op: ir.Operation, target: Target, enabled: tuple[str, ...], knobs: dict | None = None
) -> str:
    """Schedule one PrimFunc in place (on a clone first); returns the rule's name. `knobs`:
    tuned values of the rules' knobs (lowering/gpu/space.py)."""
    ops = linalg_ops(func_op)
    if not ops:
        return ""
    scratch = ir.Module.create(loc=func_op.location)
    trial = func_op.clone(ip=ir.InsertionPoint(scratch.body))
    try:
        name, dims = _apply(trial, target, enabled, fuse=True, knobs=knobs)
    except SCRIPT_ERRORS:
        trial.erase()
        trial = func_op.clone(ip=ir.InsertionPoint(scratch.body))
        name, dims = _apply(trial, target, enabled, fuse=False)  # one kernel per op
    if not name:  # no enabled rule applies: left for a later schedule (or relax-gpu-map's error)
        return ""
    with trial.context:
        trial.attributes[SCHEDULE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(name)])
        trial.attributes[BLOCK_DIMS_ATTR] = ir.DenseI64ArrayAttr.get(dims)
    trial.detach_from_parent()
    ir.InsertionPoint(func_op).insert(trial)
    func_op.erase()
    return name


def _apply(
    func_op: ir.Operation, target: Target, enabled, fuse: bool, knobs: dict | None = None
) -> tuple[str, list[int]]:
    """Tag, pick, script, apply: ("", []) when no enabled rule applies (func_op untouched but
    generalized)."""
    generalize(func_op)
    ops = linalg_ops(func_op)
    infos = [classify(op) for op in ops]
    i64 = ir.IntegerType.get_signless(64, func_op.context)
    for tag, op in enumerate(ops):
        op.attributes[SCHED_ID_ATTR] = ir.IntegerAttr.get(i64, tag)
    scalar = any(not (i.operand_dims[-1] if i.operand_dims else []) for i in infos)
    empty = any(0 in emit.loop_ranges(op) for op in ops if op.name == "linalg.generic")
    if scalar or empty:
        # A scalar result (a full reduction) has no parallel axis to spread, and MLIR's tiling
        # asserts on a loop of trip count 0 (an op over an empty axis: its result is its init):
        # the whole function runs as one thread (relax-gpu-map wraps it in a 1x1x1 launch).
        # Correct, not fast.
        _untag(func_op)
        return ("serial", [1, 1, 1]) if "fallback" in enabled else ("", [])
    s = Script()
    handles = [s.match_tagged(tag) for tag in range(len(ops))]
    tf32 = bool(target.get("allow-tf32", 0))
    wgmma = contract.has_wgmma(target)
    plan = contract.plan(ops, tf32, knobs, wgmma) if fuse and "matmul" in enabled else None
    if plan is not None:
        # The Matmul rule's kernel template (contract.py) writes the contraction, its fill and
        # epilogue after bufferization; any other op gets a Fallback kernel of its own.
        members = contract.tag(ops, plan)
        name, dims = "matmul", [1, 1, 1]
        for i, (h, info) in enumerate(zip(handles, infos)):
            if i not in members:
                op_dims = emit_rule(s, h, [], info, RULES["fallback"])
                dims = [max(a, b) for a, b in zip(dims, op_dims)]
    elif fuse:
        name = pick_rule(infos, enabled)
        if name is None:
            return "", []
        row_plan = (
            rows.plan(ops)
            if name in ("general_reduction", "reduction") or (name == "gemv" and _dot_rows(infos))
            else None
        )
        flip = transpose.plan(ops) if name == "fallback" else None
        if row_plan is not None:
            # One block per row (rows.py): tagged here, written after bufferization.
            rows.tag(ops, row_plan)
            dims = [rows.threads(row_plan.full, row_plan.rows), 1, 1]
        elif flip is not None:
            # A transposing copy: through a shared-memory tile (transpose.py).
            transpose.tag(ops[0], flip)
            dims = [transpose.TILE * transpose.ROWS, 1, 1]
        else:
            dims = emit_rule(s, handles[-1], list(reversed(handles[:-1])), infos[-1], RULES[name])
    elif "fallback" not in enabled:
        return "", []
    else:
        # Unfused: every op that writes a non-scalar gets its own Fallback kernel; all kernels of
        # a function share one block size, so each uses the Fallback's.
        name, dims = "fallback-unfused", [1, 1, 1]
        for h, info in zip(handles, infos):
            op_dims = emit_rule(s, h, [], info, RULES["fallback"])
            dims = [max(a, b) for a, b in zip(dims, op_dims)]  # smaller foralls are predicated
    if max(dims[0] * dims[1] * dims[2], 1) > target.get("max-threads-per-block", 1024):
        raise ValueError(f"{name}: block of {dims} threads exceeds the target's limit")
    apply_script(func_op, s)
    _cleanup(func_op)
    if fuse and _untiled(func_op):
        # A producer with a second use outside the root (a value read directly and through a
        # reshape) was fused for one use and kept for the other: the caller schedules every op
        # on its own instead.
        raise ValueError("a fused producer is still used outside the root's kernel")
    _untag(func_op)
    return name, dims


TEMPLATE_ATTRS = (
    contract.CONTRACT_ATTR,
    contract.INIT_ATTR,
    contract.EPILOGUE_ATTR,
    contract.PAD_ATTR,
    rows.ROWS_ATTR,
    transpose.TRANSPOSE_ATTR,
)


def taken_by_template(op: ir.Operation) -> bool:
    """A linalg op a kernel template's pass replaces after bufferization (not tiled here)."""
    return any(a in op.attributes for a in TEMPLATE_ATTRS)


def _untiled(func_op: ir.Operation) -> bool:
    """Top-level linalg ops that neither a transform script tiled nor a kernel template took."""
    return any(
        op.operation.name.startswith("linalg.") and not taken_by_template(op.operation)
        for op in func_op.regions[0].blocks[0].operations
    )


def _cleanup(func_op: ir.Operation) -> None:
    """Drop what tiling left behind (the untiled originals, now unused), with no handle alive:
    on buffers they would run as host code."""
    s = Script()
    s.patterns("canonicalization")
    s.emit(f"transform.apply_cse to {s.func} : {s.ANY}")
    apply_script(func_op, s)


def prim_funcs(module_op: ir.Operation) -> list[ir.Operation]:
    return [
        op.operation
        for op in module_op.regions[0].blocks[0].operations
        if op.operation.name == "func.func"
        and PRIM_FUNC_ATTR in op.operation.attributes
        and len(op.operation.regions[0].blocks)
    ]


def schedule_module(module_op: ir.Operation, target: Target, enabled=DEFAULT_RULES) -> None:
    for func_op in prim_funcs(module_op):
        if BLOCK_DIMS_ATTR in func_op.attributes:
            continue  # already scheduled (a dlight pass ran before relax.build)
        knobs = knobs_of(
            func_op,
            module_op,
            target,
            lambda f=func_op: default_point(gpu_space.space_for(f, target)),
        )
        try:
            schedule_function(func_op, target, tuple(enabled), knobs)
        except PassError as exc:  # a tuned knob this kernel cannot take
            name = ir.StringAttr(func_op.attributes["sym_name"]).value
            raise PassError(f"relax-schedule-gpu: @{name}: {exc}", func_op) from exc
        except SCRIPT_ERRORS as exc:
            raise PassError(f"relax-schedule-gpu: {exc}", func_op) from exc


@register_pass(
    "relax-schedule-gpu",
    "map PrimFuncs to GPU blocks and threads (scf.forall via the transform dialect)",
    {
        "target": "cuda target string (default: the target in scope, else cuda)",
        "rules": "comma-separated rules to use (default: all of matmul, gemv, reduction, "
        "general_reduction, fallback)",
    },
)
def schedule_gpu(target: str = "", rules: str = ""):
    tgt = (
        target_option(target, "relax-schedule-gpu")
        if target
        else (Target.current() or Target("cuda"))
    )
    if tgt.kind != "cuda":
        raise PassError(f"relax-schedule-gpu: expected a cuda target, got ({tgt})")
    enabled = tuple(r.strip() for r in rules.split(",") if r.strip()) or DEFAULT_RULES
    unknown = [r for r in enabled if r not in RULES]
    if unknown:
        raise PassError(f"relax-schedule-gpu: unknown rule(s) {unknown}; rules: {', '.join(RULES)}")

    def run(module_op: ir.Operation) -> None:
        schedule_module(module_op, tgt, enabled)

    return run
