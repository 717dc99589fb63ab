"""Scheduling one PrimFunc: normalize, classify, apply the table's rules, fall back per op.

The driver above the rule machinery of `common.py` and the rewrites of `normalize.py` (which
builds on `common.py`), so that neither has to import the other's caller.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import replace

from mlir import ir
from mlir.dialects import arith, scf, tensor

from lowering.schedule.batch import (
    PER_SAMPLE,
    batched_arguments,
    loop_over_samples,
    sample_function,
)
from lowering.schedule.common import (
    PRINT_SCRIPT_ENV,
    ROWS_VERSION_ATTR,
    SCHEDULE_ATTR,
    SCRIPT_ERRORS,
    ScheduleOptions,
    apply_rules,
    can_split,
    classify,
    dim_of,
    innermost_loop,
    legalize_function,
    linalg_ops,
    remap_operands,
    slice_sizes,
)
from lowering.schedule.matmul import micro_tile, rows_dispatch, symbolic_batch_split
from lowering.schedule.normalize import normalize_function


def schedule_function(func_op: ir.Operation, opts: ScheduleOptions) -> list[str]:
    """Apply the table's rules to every linalg op of `func_op`; returns the names they report.

    The scheduled function replaces `func_op` (which is erased) and carries SCHEDULE_ATTR.

    Two scripts run: every rule's `prepare` (packing), then `fold_prepacked`, then every rule's
    `schedule` and the shared `finalize`. If that fails, again with every op scheduled by its own
    rule (no fused groups), then each op is tried alone on a copy and the function is scheduled
    with the ops that succeeded; the others keep their linalg form (naive
    loops: correct, slower) and a warning names them. With `strict` the first failure is raised.
    """
    if not linalg_ops(func_op) or _has_empty_operand(func_op):
        return []  # NOTE: tiling a loop of zero iterations asserts in MLIR; naive loops do nothing
    found = batched_arguments(func_op)
    if found is not None:  # independent samples: static kernels of one, in a loop (batch.py)
        return _loop_over_samples(func_op, opts, *found)
    # Trials run on copies inside a scratch module (the interpreter wants a parented payload).
    scratch = ir.Module.create(loc=func_op.location)
    base = func_op.clone(ip=ir.InsertionPoint(scratch.body))
    normalize_function(base, micro_tile(opts.target).mr)
    version_rows(base, opts)
    count = len(linalg_ops(base))

    def copy() -> ir.Operation:
        return base.clone(ip=ir.InsertionPoint(scratch.body))

    first_error = None
    for fuse in (True, False):  # then each op by its own rule: a fused group may fail as one
        trial = copy()
        try:
            used = apply_rules(trial, opts, None, fuse)
            _replace(func_op, trial, used)
            return used
        except SCRIPT_ERRORS as exc:
            trial.erase()
            if opts.strict:
                raise
            first_error = first_error or exc
    good, bad = set(), []
    for tag in range(count):
        trial = copy()
        try:
            apply_rules(trial, opts, {tag})
            good.add(tag)
        except SCRIPT_ERRORS:
            bad.append(tag)
        trial.erase()
    name = ir.StringAttr(func_op.attributes["sym_name"]).value
    ops = linalg_ops(base)
    skipped = ", ".join(f"#{t} {ops[t].name}" for t in bad)
    if os.environ.get(PRINT_SCRIPT_ENV) == "failures":
        import sys

        for t in bad:
            print(
                f"// relax-schedule-cpu could not schedule (pattern {classify(ops[t]).pattern}):\n{ops[t]}",
                file=sys.stderr,
            )
    warnings.warn(
        f"relax-schedule-cpu: @{name}: op(s) {skipped} left unscheduled: {first_error}",
        RuntimeWarning,
        stacklevel=2,
    )
    if not good:
        legalize_function(func_op)  # naive loops still need a prepacked weight's unpack lowered
        return []
    trial = copy()
    try:
        used = apply_rules(trial, opts, good, fuse=False)
    except SCRIPT_ERRORS as exc:
        trial.erase()
        warnings.warn(
            f"relax-schedule-cpu: @{name} left unscheduled: {exc}", RuntimeWarning, stacklevel=2
        )
        legalize_function(func_op)
        return []
    _replace(func_op, trial, used)
    return used


def _loop_over_samples(func_op, opts: ScheduleOptions, batched: list[int], size) -> list[str]:
    """Schedule the kernel of one sample and make `func_op` a loop over its samples: a parallel
    loop with a single-threaded sample kernel when the samples fill the threads (a static batch
    that divides among them, a symbolic one from `threads` samples on, tested at run time), a
    serial loop with a sample kernel split across the threads otherwise."""
    threads = opts.threads
    by_samples = threads > 1 and (size is None or size % threads == 0)
    by_rows = threads == 1 or size is None or size % threads != 0
    used, kernels = [PER_SAMPLE], {}
    sample = sample_function(func_op)
    for key, wanted, sample_opts in (
        ("parallel", by_samples, replace(opts, threads=1)),
        ("serial", by_rows, opts),
    ):
        if wanted:
            copy = ir.Module.create(loc=func_op.location)
            sample.body.operations[0].clone(ip=ir.InsertionPoint(copy.body))
            used += schedule_function(copy.body.operations[0], sample_opts)
            kernels[key] = copy
    loop_over_samples(
        func_op,
        batched,
        kernels["serial"].body.operations[0] if "serial" in kernels else None,
        kernels["parallel"].body.operations[0] if "parallel" in kernels else None,
        threads,
    )
    with func_op.context:
        func_op.attributes[SCHEDULE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(u) for u in used])
    return used


def version_rows(func_op: ir.Operation, opts: ScheduleOptions) -> None:
    """Dispatch on the size of a symbolic kernel at run time: its ops split across threads only
    when there is enough work; with little (a batch of 1, a short sequence) a parallel region
    costs more than the whole kernel. The body becomes `scf.if size >= threshold { parallel
    copy } else { serial copy }`, every linalg op of the two copies marked for the rules
    (ROWS_VERSION_ATTR). The size is that of a function argument: a matmul's symbolic rows
    (`matmul.rows_dispatch`), else the product of an attention matmul's symbolic sizes (its
    heads split across threads from `min_parallel_work` on: 4 us at n = 1 for 0.2 us of
    work), else the element count of the largest argument with symbolic axes (softmax, layer
    norm and the epilogues over a symbolic sequence, which ran on one core between parallel
    matmuls: BERT-base at n = 256 on 2 threads, 1.4x its static build). On one thread, only
    a matmul whose few rows and many rows want B in column blocks of different sizes is
    versioned (`matmul.rows_dispatch`)."""
    infos = [(op, classify(op)) for op in linalg_ops(func_op)]
    for op, info in infos:
        found = rows_dispatch(info, opts)
        if found is None or not len(op.operands) or found[0] not in (info.operand_dims[0] or []):
            continue
        dim, threshold = found
        source = _row_count_source(op.operands[0], info.operand_dims[0].index(dim))
        if source is None or source[0].owner.owner != func_op:
            continue
        _version_body(func_op, [source], threshold)
        return
    if opts.threads <= 1:
        return
    for op, info in infos:  # attention over a symbolic sequence: heads split from enough work
        if symbolic_batch_split(info, opts) is None:
            continue
        sizes = _symbolic_loop_sources(func_op, op, info)
        if sizes:
            static = math.prod(r for r in info.ranges if r is not None)
            _version_body(func_op, sizes, max(2, -(-opts.min_parallel_work // static)))
            return
    if not any(_splits(info, opts.threads) for _, info in infos):
        return  # nothing that a parallel copy would split
    best = None
    for arg in func_op.regions[0].blocks[0].arguments:
        if not isinstance(arg.type, ir.RankedTensorType):
            continue
        shape = ir.RankedTensorType(arg.type).shape
        axes = [i for i, d in enumerate(shape) if ir.ShapedType.is_dynamic_size(d)]
        static = math.prod(d for d in shape if not ir.ShapedType.is_dynamic_size(d))
        if axes and (best is None or static > best[2]):
            best = (arg, axes, static)
    if best is not None:
        arg, axes, static = best
        threshold = max(2, -(-opts.min_parallel_elements // max(1, static)))
        _version_body(func_op, [(arg, axis) for axis in axes], threshold)


def _row_count_source(value: ir.Value, axis: int) -> tuple[ir.Value, int] | None:
    """A function argument and its axis whose size is that of `value` along `axis`: `value`
    itself, or the argument a rank-reducing slice takes whole along that axis (a [1, n, 768]
    input read as [n, 768] by a linear without an epilogue, which had no run-time dispatch:
    its rows split across threads even for n = 1, and C's copy stayed on one thread)."""
    if isinstance(value.owner, ir.Block):
        return value, axis
    op = value.owner.operation
    shape = ir.RankedTensorType(value.type).shape
    if op.name != "tensor.extract_slice" or not ir.ShapedType.is_dynamic_size(shape[axis]):
        return None
    sizes = slice_sizes(op)
    k = sum(ir.ShapedType.is_dynamic_size(d) for d in shape[:axis])
    found = dim_of(sizes[k]) if k < len(sizes) else None
    if found is None or not isinstance(found[0].owner, ir.Block):
        return None
    return found


def _splits(info, threads: int) -> bool:
    """Would the elementwise or reduction rule split this symbolic op in a parallel copy: a
    loop it may split (not the vector loop, not a reduction) is symbolic, or static with an
    equal share per thread (`common.can_split`)."""
    if info.static or info.pattern not in ("elementwise", "reduction"):
        return False
    if info.pattern == "reduction":
        loops = [d for d, t in enumerate(info.iterators) if t == "parallel"]
    else:
        loops = [d for d in range(len(info.ranges)) if d != innermost_loop(info)]
    return can_split(info, loops, threads)


def _symbolic_loop_sources(func_op, op, info) -> list[tuple[ir.Value, int]] | None:
    """For each symbolic loop of `op`, a function argument and axis of its size (read through
    A or B); None when one has none."""
    sources = []
    for d, size in enumerate(info.ranges):
        if size is not None:
            continue
        found = None
        for operand, dims in zip(op.operands, info.operand_dims[:2]):
            if dims and d in dims:
                found = _row_count_source(operand, dims.index(d))
                if found is not None and found[0].owner.owner == func_op:
                    break
                found = None
        if found is None:
            return None
        sources.append(found)
    return sources


def _version_body(func_op, sizes: list[tuple[ir.Value, int]], threshold: int) -> None:
    """`sizes`: (value, axis) pairs whose product is compared with `threshold`."""
    block = func_op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    ret, body = ops[-1], ops[:-1]
    with func_op.context, func_op.location:
        index = ir.IndexType.get()
        ip = ir.InsertionPoint(body[0] if body else ret)
        rows = None
        for rows_of, axis in sizes:
            c_axis = arith.ConstantOp(index, axis, ip=ip)
            size = tensor.DimOp(rows_of, c_axis.result, ip=ip).result
            rows = size if rows is None else arith.MulIOp(rows, size, ip=ip).result
        c_min = arith.ConstantOp(index, threshold, ip=ip)
        many = arith.CmpIOp(arith.CmpIPredicate.sge, rows, c_min.result, ip=ip)
        if_op = scf.IfOp(many.result, [v.type for v in ret.operands], has_else=True, ip=ip)
        marked = linalg_ops(func_op)
        for version, branch in (("many", if_op.then_block), ("few", if_op.else_block)):
            for op in marked:
                op.attributes[ROWS_VERSION_ATTR] = ir.StringAttr.get(version)
            mapping: dict = {}
            branch_ip = ir.InsertionPoint(branch)
            for op in body:
                new = op.clone(ip=branch_ip)
                remap_operands(new, mapping)
                mapping.update(zip(op.results, new.results))
            scf.YieldOp([mapping.get(v, v) for v in ret.operands], ip=branch_ip)
            _unshare_empties(branch)
        for i in range(len(ret.operands)):
            ret.operands[i] = if_op.results[i]
        for op in reversed(body):
            op.erase()


def _unshare_empties(block) -> None:
    """One `tensor.empty` per user inside a branch (relax-prim-func-dps does this for the
    function's top level only): two in-place chains cannot share a buffer."""
    for op in [o.operation for o in block.operations]:
        if op.name != "tensor.empty":
            continue
        for use in [(u.owner, u.operand_number) for u in op.results[0].uses][1:]:
            use[0].operands[use[1]] = op.clone(ir.InsertionPoint.after(op)).results[0]


def _has_empty_operand(func_op: ir.Operation) -> bool:
    """Whether some linalg op reads or writes a tensor with a static dimension of size 0."""
    for op in linalg_ops(func_op):
        for value in list(op.operands) + list(op.results):
            if isinstance(value.type, ir.ShapedType) and 0 in ir.ShapedType(value.type).shape:
                return True
    return False


def _replace(func_op: ir.Operation, new: ir.Operation, used: list[str]) -> None:
    """Put the scheduled copy `new` in place of `func_op` (same symbol), erasing `func_op`, and
    record the rules that ran on it."""
    with new.context:
        new.attributes[SCHEDULE_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(u) for u in used])
    new.detach_from_parent()
    ir.InsertionPoint(func_op).insert(new)
    func_op.erase()
