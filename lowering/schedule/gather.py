"""Raise TE's reshape/transpose gathers to strided views read through an indexing map.

TE writes `reshape` (and the squeezes, strided slices and permutes fused around it) as a generic
that computes a flat index from `linalg.index` values and unflattens it into the source with
`floordivsi`/`remsi`, then reads the element with `tensor.extract`. No schedule takes such a body
(integer divisions per element, a scalar gather). Whenever the address it reads is affine in the
loop indices, `addr = b + sum_i a_i * d_i` (every reshape, transpose and strided slice of a
row-major tensor), the same element is a view of the source:

    collapse to [T] -> expand to [T / s_1, s_1 / s_2, ..., s_m] -> slice at b's digits

where s_1 > ... > s_m are the nonzero strides a_i; loop d_i then indexes the axis of stride a_i,
so the read becomes an ordinary input with a projected-permutation map (an elementwise op or a
transpose the elementwise rule vectorizes), and views cost no copy.

The index arithmetic is evaluated with numpy over the whole (static) iteration space, and the
affine form is checked at every point, so any TE index expression qualifies, not a fixed pattern.
With symbolic sizes (`_SymbolicPlan`), each symbolic source axis must be read at its own loop's
index and the static axes between them are fitted over the static loops alone, segment by
segment: BERT's reshape of [1, n, 768] into heads becomes an expand_shape of the input.
"""

from __future__ import annotations

import itertools

import numpy as np
from mlir import ir
from mlir.dialects import arith, tensor

from lowering.schedule.common import (
    classify,
    erase_dead_index_code,
    matching_generics,
    reassociation,
    rebuild_generic,
)

MAX_POINTS = 1 << 22  # iteration spaces evaluated in full (~0.5 s at the cap); larger stay gathers


class _NoMatch(Exception):
    pass


def _floordiv(a, b):
    return np.floor_divide(a, b)


def _truncdiv(a, b):
    return np.trunc(a / b).astype(np.int64)


_BINARY = {
    "arith.addi": np.add,
    "arith.subi": np.subtract,
    "arith.muli": np.multiply,
    "arith.floordivsi": _floordiv,
    "arith.divsi": _truncdiv,
    "arith.divui": _floordiv,
    "arith.remsi": np.fmod,
    "arith.remui": np.mod,
    "arith.maxsi": np.maximum,
    "arith.minsi": np.minimum,
}


def _evaluate(value: ir.Value, grid: list[np.ndarray], body: ir.Block, memo: dict):
    if value in memo:
        return memo[value]
    owner = value.owner
    if isinstance(owner, ir.Block):
        raise _NoMatch  # an element of an operand, not an index
    op = owner.operation
    name = op.name
    if name == "arith.constant":
        try:
            out = np.int64(ir.IntegerAttr(op.attributes["value"]).value)
        except ValueError:
            raise _NoMatch from None
    elif name == "linalg.index":
        out = grid[ir.IntegerAttr(op.attributes["dim"]).value]
    elif name == "arith.index_cast":
        out = _evaluate(op.operands[0], grid, body, memo)
    elif name in _BINARY:
        a = _evaluate(op.operands[0], grid, body, memo)
        b = _evaluate(op.operands[1], grid, body, memo)
        divides = name not in (
            "arith.addi",
            "arith.subi",
            "arith.muli",
            "arith.maxsi",
            "arith.minsi",
        )
        if divides and np.any(b == 0):
            raise _NoMatch
        out = _BINARY[name](a, b)
    else:
        raise _NoMatch
    memo[value] = out
    return out


def _affine_fit(addr: np.ndarray, ranges: list[int]) -> tuple[int, list[int]] | None:
    """(b, [a_i]) with addr == b + sum a_i * d_i at every point, else None (also for an empty
    iteration space: there is no point to read the base address at)."""
    if 0 in ranges:
        return None
    addr = np.broadcast_to(addr, ranges)
    origin = (0,) * len(ranges)
    b = int(addr[origin])
    coefs = []
    for i, r in enumerate(ranges):
        if r == 1:
            coefs.append(0)
            continue
        step = list(origin)
        step[i] = 1
        coefs.append(int(addr[tuple(step)]) - b)
    want = np.full(ranges, b, dtype=np.int64)
    for i, a in enumerate(coefs):
        if a:
            shape = [1] * len(ranges)
            shape[i] = ranges[i]
            want = want + a * np.arange(ranges[i], dtype=np.int64).reshape(shape)
    return (b, coefs) if np.array_equal(addr, want) else None


def _view_plan(total: int, b: int, coefs: list[int], ranges: list[int]):
    """Expanded shape, slice offsets/sizes and the loop of each kept axis (module docstring)."""
    dims = sorted((a, d) for d, a in enumerate(coefs) if a)
    dims.reverse()
    if not dims or any(a <= 0 for a, _ in dims):
        return None
    strides = [a for a, _ in dims]
    if len(set(strides)) != len(strides) or total % strides[0]:
        return None
    if any(strides[j] % strides[j + 1] for j in range(len(strides) - 1)):
        return None
    shape = [total // strides[0]] + [strides[j] // strides[j + 1] for j in range(len(strides) - 1)]
    offsets = [b // strides[0]] + [
        (b % strides[j]) // strides[j + 1] for j in range(len(strides) - 1)
    ]
    sizes = [ranges[d] for _, d in dims]
    if strides[-1] > 1:
        shape.append(strides[-1])
        offsets.append(b % strides[-1])
        sizes.append(1)
    if any(o + s > n for o, s, n in zip(offsets, sizes, shape)):
        return None  # the read would carry into the next axis: not one slice
    return shape, offsets, sizes, [d for _, d in dims]


def parallel_space(op: ir.Operation) -> tuple[list[ir.AffineMap], list[int]] | None:
    """(indexing maps, loop ranges) of a single-result, all-parallel generic whose output map
    is a permutation of static extents and whose iteration space is small enough to evaluate in
    full (MAX_POINTS), else None."""
    space = _output_space(op)
    if space is None or any(r is None for r in space[1]):
        return None
    maps, ranges, _ = space
    if int(np.prod(ranges)) > MAX_POINTS:
        return None
    return maps, ranges


def _output_space(op: ir.Operation):
    """(indexing maps, loop ranges with None for symbolic ones, {loop: output axis}) of a
    single-result, all-parallel generic whose output map is a permutation, else None."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    if any("parallel" not in t for t in iterators):
        return None
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if not maps[-1].is_permutation:
        return None
    out_type = ir.RankedTensorType(op.results[0].type)
    ranges: list = [0] * len(iterators)
    out_axis = {}
    for axis, expr in enumerate(maps[-1].results):
        d = ir.AffineDimExpr(expr).position
        size = out_type.shape[axis]
        ranges[d] = None if ir.ShapedType.is_dynamic_size(size) else size
        out_axis[d] = axis
    return maps, ranges, out_axis


def _single_extract(op: ir.Operation) -> ir.Operation | None:
    """The one `tensor.extract` of the body, reading a tensor from outside the op, else None."""
    body = op.regions[0].blocks[0]
    extracts = [o.operation for o in body.operations if o.operation.name == "tensor.extract"]
    if len(extracts) != 1:
        return None
    source = extracts[0].operands[0]
    if not isinstance(source.owner, ir.Block) and source.owner.operation.parent == op:
        return None
    return extracts[0]


def index_grid(ranges: list[int]) -> list[np.ndarray]:
    """Each loop's index as an array broadcastable over the iteration space."""
    return [
        np.arange(r, dtype=np.int64).reshape([r if i == d else 1 for i in range(len(ranges))])
        for d, r in enumerate(ranges)
    ]


def match_gather(op: ir.Operation):
    """(extract op, view plan) for a raisable gather generic, else None."""
    space = parallel_space(op)
    if space is None:
        return _match_symbolic(op)
    ranges = space[1]
    body = op.regions[0].blocks[0]
    extract = _single_extract(op)
    if extract is None:
        return None
    src_type = ir.RankedTensorType(extract.operands[0].type)
    if not src_type.has_static_shape or src_type.rank == 0:
        return None
    grid = index_grid(ranges)
    try:
        memo: dict = {}
        idx = [_evaluate(v, grid, body, memo) for v in list(extract.operands)[1:]]
    except _NoMatch:
        return None
    strides = np.cumprod([1] + list(src_type.shape[:0:-1]))[::-1]
    addr = sum(np.int64(s) * i for s, i in zip(strides, idx))
    for i, n in zip(idx, src_type.shape):
        if np.any(np.asarray(i) < 0) or np.any(np.asarray(i) >= n):
            return None
    fit = _affine_fit(np.asarray(addr, dtype=np.int64), ranges)
    if fit is None:
        return None
    plan = _view_plan(int(np.prod(src_type.shape)), fit[0], fit[1], ranges)
    return None if plan is None else (extract, plan)


def _common_groups(src: list[int], dst: list[int]):
    """The coarsest shape both `src` and `dst` refine, as (collapse groups of `src`, expand
    groups onto `dst`, its sizes); None for rank 0 or a zero-size axis. Collapsing only the
    axes that must merge keeps the view of a strided source a view: [1, 128, 768] sliced out
    of [1, 128, 2304] -> [128, 12, 64] merges [1, 128] and splits 768, where a collapse of all
    three axes is not contiguous and bufferization would copy the slice."""
    if not src or not dst or 0 in src or 0 in dst:
        return None
    collapse, expand, merged = [], [], []
    i = j = 0
    while i < len(src) and j < len(dst):
        a, b = [i], [j]
        pa, pb = src[i], dst[j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                a.append(i)
                pa *= src[i]
                i += 1
            else:
                b.append(j)
                pb *= dst[j]
                j += 1
        collapse.append(a)
        expand.append(b)
        merged.append(pa)
    collapse[-1] += range(i, len(src))  # trailing unit axes join the last group
    expand[-1] += range(j, len(dst))
    return collapse, expand, merged


def _view(source: ir.Value, plan) -> ir.Value:
    shape, offsets, sizes, _ = plan
    src_type = ir.RankedTensorType(source.type)
    elem = src_type.element_type
    total = int(np.prod(src_type.shape))
    v = source
    if list(src_type.shape) != shape:
        groups = _common_groups(list(src_type.shape), shape)
        if groups is None:  # rank 0 or a zero-size axis: through the flat shape
            groups = ([list(range(src_type.rank))], [list(range(len(shape)))], [total])
        collapse, expand, merged = groups
        if merged != list(src_type.shape) and src_type.rank > 0:
            t = ir.RankedTensorType.get(merged, elem)
            v = tensor.CollapseShapeOp(t, v, reassociation(collapse)).result
        if shape != merged:
            t = ir.RankedTensorType.get(shape, elem)
            v = tensor.ExpandShapeOp(t, v, reassociation(expand), [], shape).result
    if offsets != [0] * len(shape) or sizes != shape:
        # Rank-reducing when the last axis is the constant one (strides above 1): its size is 1.
        t = ir.RankedTensorType.get(sizes[: len(plan[3])], elem)
        v = tensor.ExtractSliceOp(t, v, [], [], [], offsets, sizes, [1] * len(shape)).result
    elif len(shape) != len(plan[3]):
        raise AssertionError("gather view keeps a constant axis")
    return v


class _SymbolicPlan:
    """A gather over symbolic sizes as a view: each symbolic source axis is read at its own
    loop's index (a pass-through: `x[.., n, ..]`), the static axes between them form segments
    whose reads are affine in the static loops, each with its `_view_plan`. The view collapses
    every segment, expands it to its plan's shape and slices it; the symbolic axes stay."""

    def __init__(self, groups: list, loops: list[int]):
        self.groups = groups  # per segment or symbolic axis: ("dyn", axis, loop, out axis) or
        self.loops = loops  # ("seg", [axes], plan); the loop of each view axis, in order

    def view(self, source: ir.Value, out: ir.Value) -> ir.Value:
        src_type = ir.RankedTensorType(source.type)
        elem = src_type.element_type
        dyn = ir.ShapedType.get_dynamic_size()
        index = ir.IndexType.get()

        def dim(value: ir.Value, axis: int) -> ir.Value:
            return tensor.DimOp(value, arith.ConstantOp(index, axis).result).result

        collapse, collapsed, expand, expanded, sizes_dyn = [], [], [], [], []
        offsets, sizes, kept = [], [], []
        for g in self.groups:
            if g[0] == "dyn":
                _, axis, _, out_axis = g
                expand.append([len(expanded)])
                collapse.append([axis])
                collapsed.append(src_type.shape[axis])
                expanded.append(src_type.shape[axis])
                if ir.ShapedType.is_dynamic_size(src_type.shape[axis]):
                    sizes_dyn.append(dim(source, axis))
                offsets.append(0)
                sizes.append(("dyn", dim(out, out_axis)))
                kept.append(True)
            else:
                _, axes, (shape, offs, szs, loops) = g
                collapse.append(list(axes))
                collapsed.append(int(np.prod([src_type.shape[a] for a in axes])))
                expand.append(list(range(len(expanded), len(expanded) + len(shape))))
                expanded += list(shape)
                offsets += list(offs)
                sizes += list(szs)
                kept += [True] * len(loops) + [False] * (len(shape) - len(loops))
        v = source
        if collapse != [[a] for a in range(src_type.rank)]:
            t = ir.RankedTensorType.get(collapsed, elem)
            v = tensor.CollapseShapeOp(t, v, reassociation(collapse)).result
        if expanded != collapsed:
            t = ir.RankedTensorType.get(expanded, elem)
            v = tensor.ExpandShapeOp(t, v, reassociation(expand), sizes_dyn, expanded).result
        static_sizes = [dyn if isinstance(z, tuple) else z for z in sizes]
        dyn_sizes = [z[1] for z in sizes if isinstance(z, tuple)]
        if any(offsets) or static_sizes != expanded or dyn_sizes:
            shape = [z for z, k in zip(static_sizes, kept) if k]
            t = ir.RankedTensorType.get(shape, elem)
            v = tensor.ExtractSliceOp(
                t, v, [], dyn_sizes, [], offsets, static_sizes, [1] * len(expanded)
            ).result
        elif not all(kept):
            raise AssertionError("symbolic gather view keeps a constant axis")
        return v


def _match_symbolic(op: ir.Operation):
    """(extract op, `_SymbolicPlan`) for a gather whose output has symbolic sizes, else None."""
    space = _output_space(op)
    if space is None or all(r is not None for r in space[1]):
        return None
    _, ranges, out_axis = space
    static_loops = [d for d, r in enumerate(ranges) if r is not None]
    if int(np.prod([ranges[d] for d in static_loops])) > MAX_POINTS:
        return None
    body = op.regions[0].blocks[0]
    extract = _single_extract(op)
    if extract is None:
        return None
    src_type = ir.RankedTensorType(extract.operands[0].type)
    indices = list(extract.operands)[1:]
    if src_type.rank == 0:
        return None
    # Symbolic source axes: each read at one symbolic loop's own index, that loop nowhere else.
    # A static axis read at a symbolic loop's index passes through too (sliced to the loop's
    # extent: the new step's keys of a KV-cache concat, one row, written at a symbolic offset).
    grid_all = index_grid([r or 1 for r in ranges])
    grid = [g if ranges[d] is not None else None for d, g in enumerate(grid_all)]
    passes = {}
    for axis, v in enumerate(indices):
        owner = v.owner
        index = not isinstance(owner, ir.Block) and owner.operation.name == "linalg.index"
        d = ir.IntegerAttr(owner.operation.attributes["dim"]).value if index else None
        if not ir.ShapedType.is_dynamic_size(src_type.shape[axis]) and (
            d is None or ranges[d] is not None
        ):
            continue
        if d is None or ranges[d] is not None or d in passes.values():
            return None
        passes[axis] = d
    if sorted(passes.values()) != [d for d, r in enumerate(ranges) if r is None]:
        return None
    # Static axes: evaluated over the static loops (a symbolic loop's index raises _NoMatch).
    try:
        memo: dict = {}
        seen: dict = {}
        evaluated = {
            axis: _evaluate_static(v, grid, body, memo, seen)
            for axis, v in enumerate(indices)
            if axis not in passes
        }
    except _NoMatch:
        return None
    static_ranges = [r for r in ranges if r is not None]
    groups, loops, used = [], [], set()
    axis = 0
    while axis < src_type.rank:
        if axis in passes:
            d = passes[axis]
            groups.append(("dyn", axis, d, out_axis[d]))
            loops.append(d)
            axis += 1
            continue
        end = axis
        while end < src_type.rank and end not in passes:
            end += 1
        seg = list(range(axis, end))
        shape = [src_type.shape[a] for a in seg]
        idx = [np.asarray(evaluated[a], dtype=np.int64) for a in seg]
        for i, n in zip(idx, shape):
            if np.any(i < 0) or np.any(i >= n):
                return None
        strides = np.cumprod([1] + shape[:0:-1])[::-1]
        addr = sum(np.int64(st) * i for st, i in zip(strides, idx))
        squeezed = np.broadcast_to(addr, [r or 1 for r in ranges])
        squeezed = squeezed[tuple(slice(None) if r is not None else 0 for r in ranges)]
        fit = _affine_fit(np.asarray(squeezed, dtype=np.int64), static_ranges)
        if fit is None:
            return None
        total = int(np.prod(shape))
        if not any(fit[1]):  # one element of the segment (a unit axis read at 0): sliced away
            plan = ([total], [fit[0]], [1], [])
        else:
            plan = _view_plan(total, fit[0], fit[1], static_ranges)
        if plan is None:
            return None
        seg_loops = [static_loops[j] for j in plan[3]]
        if used & set(seg_loops):
            return None
        used |= set(seg_loops)
        groups.append(("seg", seg, (plan[0], plan[1], plan[2], seg_loops)))
        loops += seg_loops
        axis = end
    return extract, _SymbolicPlan(groups, loops)


def _evaluate_static(value: ir.Value, grid: list, body: ir.Block, memo: dict, seen: dict):
    """`_evaluate` over the static loops; an index that a symbolic loop (None in `grid`) feeds
    ends the match (`seen`: `_reads_symbolic`'s answers so far)."""
    if _reads_symbolic(value, grid, seen):
        raise _NoMatch
    return _evaluate(value, [g if g is not None else 0 for g in grid], body, memo)


def _reads_symbolic(value: ir.Value, grid: list, seen: dict) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return False
    if value in seen:
        return seen[value]
    o = owner.operation
    if o.name == "linalg.index":
        seen[value] = grid[ir.IntegerAttr(o.attributes["dim"]).value] is None
    else:
        seen[value] = any(_reads_symbolic(v, grid, seen) for v in o.operands)
    return seen[value]


def raise_gathers(func_op: ir.Operation) -> int:
    """Rewrite every raisable gather generic of `func_op` (module docstring); returns how many."""
    found = matching_generics(func_op, match_gather)
    for op, (extract, plan) in found:
        _rebuild(op, extract, plan)
    return len(found)


def _rebuild(op: ir.Operation, extract: ir.Operation, plan) -> None:
    """The generic with the view as a new last input in place of the tensor.extract."""
    n_in = len(op.operands) - 1
    nloops = len(ir.ArrayAttr(op.attributes["iterator_types"]))
    with ir.InsertionPoint(op), op.location:
        if isinstance(plan, _SymbolicPlan):
            view, loops = plan.view(extract.operands[0], op.operands[n_in]), plan.loops
        else:
            view, loops = _view(extract.operands[0], plan), plan[3]
        view_type = ir.RankedTensorType(view.type)
        if view_type.rank != len(loops):
            raise AssertionError("gather view rank mismatch")
        new_map = ir.AffineMap.get(nloops, 0, [ir.AffineDimExpr.get(d) for d in loops])
    _read_as_operand(op, extract, view, new_map)


def _read_as_operand(op: ir.Operation, extract: ir.Operation, value: ir.Value, amap) -> None:
    """Replace `op` by the generic that reads `value` with `amap` as a new last input where its
    body read `extract`; the read's index arithmetic goes with it."""
    n_in = len(op.operands) - 1
    ins, out = list(op.operands)[:n_in], op.operands[n_in]
    maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
    types = [a.type for a in op.regions[0].blocks[0].arguments]
    new = rebuild_generic(
        op,
        op.results[0].type,
        ins + [value],
        [out],
        maps[:n_in] + [ir.AffineMapAttr.get(amap)] + maps[n_in:],
        types[:n_in] + [ir.RankedTensorType(value.type).element_type, types[n_in]],
        [i if i < n_in else i + 1 for i in range(len(types))],
    )
    extract.results[0].replace_all_uses_with(new.regions[0].blocks[0].arguments[n_in])
    extract.erase()
    erase_dead_index_code(new.regions[0].blocks[0])
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()


def _linear(e: ir.AffineExpr, scale: int, coefs: dict, const: list) -> None:
    """Accumulate `scale * e` as {dim: coefficient} + constant, or raise _NoMatch."""
    if isinstance(e, ir.AffineDimExpr):
        coefs[e.position] = coefs.get(e.position, 0) + scale
    elif isinstance(e, ir.AffineConstantExpr):
        const[0] += scale * e.value
    elif isinstance(e, ir.AffineAddExpr):
        _linear(e.lhs, scale, coefs, const)
        _linear(e.rhs, scale, coefs, const)
    elif isinstance(e, ir.AffineMulExpr) and isinstance(e.rhs, ir.AffineConstantExpr):
        _linear(e.lhs, scale * e.rhs.value, coefs, const)
    elif isinstance(e, ir.AffineMulExpr) and isinstance(e.lhs, ir.AffineConstantExpr):
        _linear(e.rhs, scale * e.lhs.value, coefs, const)
    else:
        raise _NoMatch


def _axis_plan(expr: ir.AffineExpr, size: int, ranges: list[int]):
    """How one operand axis indexed by `b + sum c_j * d_j` (c_1 > c_2 > ..., each window inside
    the next stride) becomes sub-axes: (offset, span, [sub-axis sizes], [(sub-axis, dim)])."""
    coefs: dict = {}
    const = [0]
    _linear(expr, 1, coefs, const)
    terms = sorted(((c, d) for d, c in coefs.items() if c and ranges[d] > 1), reverse=True)
    b = const[0]
    if not terms:
        return b, 1, [1], []
    if any(c <= 0 for c, _ in terms):
        raise _NoMatch
    for (c, _), (c_next, d_next) in itertools.pairwise(terms):
        if c % c_next or ranges[d_next] * c_next > c:
            raise _NoMatch  # windows overlap (a convolution) or strides do not nest
    span = terms[0][0] * ranges[terms[0][1]]
    if b < 0 or b + span > size:
        raise _NoMatch
    strides = [c for c, _ in terms]
    shape = [ranges[terms[0][1]]] + [c // c_next for c, c_next in itertools.pairwise(strides)]
    if terms[-1][0] > 1:
        shape.append(terms[-1][0])  # the positions a window skips
    return b, span, shape, [(j, d) for j, (_, d) in enumerate(terms)]


def raise_strided_inputs(func_op: ir.Operation, keep=None) -> int:
    """Inputs read through strided maps (`2 * d2 + d4`: non-overlapping pooling windows, the
    `8 * d1 + d4` of an NCHW -> NCHW8c transform) become views with projected-permutation maps:
    each such axis is sliced to the span the windows cover and split into [windows, stride]
    (then sliced to the window). Overlapping windows (convolutions) stay as they are, and so do
    the ops that `keep` answers True for."""
    found = []

    def visit(op):
        op = op.operation
        if op.name != "linalg.generic":
            return ir.WalkResult.ADVANCE
        if keep is not None and keep(op):
            return ir.WalkResult.SKIP
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        n_in = len(op.operands) - len(op.results)
        if len(op.results) != 1 or not maps[-1].is_projected_permutation:
            return ir.WalkResult.SKIP
        # Loop sizes from the operands that index by plain loop dims (the output, window inputs).
        full = [0] * maps[-1].n_dims
        for j, m in enumerate(maps):
            t = op.operands[j].type
            if (
                not isinstance(t, ir.RankedTensorType)
                or not ir.RankedTensorType(t).has_static_shape
            ):
                continue
            for axis, expr in enumerate(m.results):
                if isinstance(expr, ir.AffineDimExpr) and not full[expr.position]:
                    full[expr.position] = ir.RankedTensorType(t).shape[axis]
        if not all(full):
            return ir.WalkResult.SKIP
        planned = []
        for i in range(n_in):
            t = op.operands[i].type
            if maps[i].is_projected_permutation or not isinstance(t, ir.RankedTensorType):
                continue
            if not ir.RankedTensorType(t).has_static_shape:
                continue
            shape = list(ir.RankedTensorType(t).shape)
            try:
                plans = [_axis_plan(e, n, full) for e, n in zip(maps[i].results, shape)]
            except _NoMatch:
                continue
            dims = [d for p in plans for _, d in p[3]]
            if len(set(dims)) == len(dims):
                planned.append((op, i, plans, full))
        # A view drops the axes its windows leave at one position, loop dims of extent 1
        # included: keep the rewrite only if every loop still indexes some operand (else its
        # map is not invertible, e.g. the K=1 loop of a (1, M, 1) x (1, 1, N) batched matmul).
        replaced = {p[1] for p in planned}
        used = {d for p in planned for plan in p[2] for _, d in plan[3]}
        for j, m in enumerate(maps):
            if j not in replaced:
                used |= {e.position for e in m.results if isinstance(e, ir.AffineDimExpr)}
        if len(used) == maps[-1].n_dims:
            found.extend(planned)
        return ir.WalkResult.SKIP

    func_op.walk(visit)
    for op, i, plans, full in found:
        with ir.InsertionPoint(op), op.location:
            view, dims = _strided_view(op.operands[i], plans, full)
        maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
        nloops = ir.AffineMapAttr(maps[0]).value.n_dims
        new_map = ir.AffineMap.get(nloops, 0, [ir.AffineDimExpr.get(d) for d in dims])
        maps[i] = ir.AffineMapAttr.get(new_map)
        op.operands[i] = view
        op.attributes["indexing_maps"] = ir.ArrayAttr.get(maps)
    return len(found)


def _strided_view(source: ir.Value, plans: list, ranges: list[int]) -> tuple[ir.Value, list[int]]:
    """slice (offsets b, spans) -> expand each axis into its sub-axes -> slice each sub-axis to
    its loop's range (size 1, dropped, where no loop reads it)."""
    src_type = ir.RankedTensorType(source.type)
    elem = src_type.element_type
    v = source
    offsets, spans = [p[0] for p in plans], [p[1] for p in plans]
    if offsets != [0] * len(plans) or spans != list(src_type.shape):
        t = ir.RankedTensorType.get(spans, elem)
        v = tensor.ExtractSliceOp(t, v, [], [], [], offsets, spans, [1] * len(spans)).result
    expanded, groups, sizes, dims = [], [], [], []
    for span, p in zip(spans, plans):
        sub = p[2] if p[3] else [span]
        groups.append(list(range(len(expanded), len(expanded) + len(sub))))
        expanded += sub
        kept = dict(p[3])
        for j, n in enumerate(sub):
            if j in kept:
                sizes.append(ranges[kept[j]])
                dims.append(kept[j])
            else:
                sizes.append(1)
    if expanded != spans:
        t = ir.RankedTensorType.get(expanded, elem)
        v = tensor.ExpandShapeOp(t, v, reassociation(groups), [], expanded).result
    if sizes != expanded or len(dims) != len(expanded):
        t = ir.RankedTensorType.get([ranges[d] for d in dims], elem)
        zeros, ones = [0] * len(expanded), [1] * len(expanded)
        v = tensor.ExtractSliceOp(t, v, [], [], [], zeros, sizes, ones).result
    return v, dims


def _affine_index(value: ir.Value) -> ir.AffineExpr | None:
    """`value` as an affine expression of the loop indices: `linalg.index`, constants, their
    sums, products, quotients and remainders by constants (TE's `c // 1 * 1 + rc`,
    `y * stride + ky * dilation`); else None."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name == "linalg.index":
        return ir.AffineDimExpr.get(ir.IntegerAttr(op.attributes["dim"]).value)
    if op.name == "arith.constant" and str(op.results[0].type) == "index":
        return ir.AffineConstantExpr.get(ir.IntegerAttr(op.attributes["value"]).value)
    if op.name in ("arith.addi", "arith.muli"):
        a, b = _affine_index(op.operands[0]), _affine_index(op.operands[1])
        if a is None or b is None:
            return None
        if op.name == "arith.addi":
            return a + b
        if isinstance(b, ir.AffineConstantExpr):  # affine: a product by a constant only
            return a * b
        if isinstance(a, ir.AffineConstantExpr):
            return b * a
    if op.name in ("arith.floordivsi", "arith.remsi"):  # by a positive constant
        a, b = _affine_index(op.operands[0]), _affine_index(op.operands[1])
        if a is None or not isinstance(b, ir.AffineConstantExpr) or b.value <= 0:
            return None
        if op.name == "arith.floordivsi":
            return ir.AffineFloorDivExpr.get(a, b)
        return ir.AffineModExpr.get(a, b)
    return None


def _window_read(op: ir.Operation):
    """(extract, its affine map) for a generic with reductions whose one gather reads a static
    tensor at sums of loop indices (a convolution window: `x[c, y + ky, x + kx]`), else None."""
    iterators = [str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"])]
    if not any("reduction" in t for t in iterators) or len(op.results) != 1:
        return None
    extract = _single_extract(op)
    if extract is None or not ir.RankedTensorType(extract.operands[0].type).has_static_shape:
        return None
    exprs = [_affine_index(v) for v in list(extract.operands)[1:]]
    if any(e is None for e in exprs) or not exprs:
        return None
    return extract, ir.AffineMap.get(len(iterators), 0, exprs)


def raise_window_reads(func_op: ir.Operation) -> int:
    """A reduction generic that reads one outside tensor through `tensor.extract` at affine
    indices (TE's grouped and depthwise NCHW convolutions, whose channel index is computed)
    reads it as an operand with that indexing map instead: the window is then visible to the
    convolution rule and the strided-window split. MobileNet-style depthwise convolutions
    whose channels do not divide into blocks (ShuffleNetV2's 116) ran as scalar loops, on one
    thread. Returns how many."""
    found = matching_generics(func_op, _window_read)
    for op, (extract, amap) in found:
        _read_as_operand(op, extract, extract.operands[0], amap)
    return len(found)


def _group_of(op: ir.Operation) -> tuple[int, int, list] | None:
    """(loop, k, loop ranges) when an operand of `op` reads `loop floordiv k` (TE's grouped
    convolution reads its image at channel `(f floordiv k) * k + c`, k output channels per
    group) and k divides the loop's static extent; else None."""
    body = op.regions[0].blocks[0].operations
    if len(op.results) != 1 or any(b.operation.name == "linalg.index" for b in body):
        return None  # the body would need the old loop's index rebuilt
    ranges = classify(op).ranges
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    found = []

    def visit(e: ir.AffineExpr) -> None:
        dim_by_const = isinstance(e, ir.AffineFloorDivExpr) and isinstance(
            e.lhs, ir.AffineDimExpr
        ) and isinstance(e.rhs, ir.AffineConstantExpr)
        if dim_by_const:
            found.append((e.lhs.position, e.rhs.value))
        if isinstance(e, ir.AffineBinaryExpr):
            visit(e.lhs)
            visit(e.rhs)

    for m in maps:
        for e in m.results:
            visit(e)
    if any(m.results and _scaled(m.results[-1]) for m in maps):
        # a window strided along the rows' contiguous axis: its phases would read every other
        # element of a row (ResNeXt-like 3x3 / 2 of 4 channels per group ran 0.8x as fast)
        return None
    for loop, k in found:
        extent = ranges[loop]
        if k > 1 and extent and extent > k and extent % k == 0:
            return loop, k, ranges
    return None


def _scaled(e: ir.AffineExpr) -> bool:
    """Does `e` hold a loop scaled by a constant above 1 (`2 * d2 + d5`)?"""
    if isinstance(e, ir.AffineMulExpr):
        for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(a, ir.AffineDimExpr) and isinstance(b, ir.AffineConstantExpr):
                return b.value > 1
    if isinstance(e, ir.AffineBinaryExpr):
        return _scaled(e.lhs) or _scaled(e.rhs)
    return False


def _split_expr(e: ir.AffineExpr, loop: int, k: int) -> ir.AffineExpr:
    """`e` over the loops with `loop` split into (outer, inner) = (loop // k, loop % k) at
    positions loop and loop + 1 (the loops after it move up by one)."""
    if isinstance(e, ir.AffineDimExpr):
        d = e.position
        if d == loop:
            return ir.AffineDimExpr.get(loop) * k + ir.AffineDimExpr.get(loop + 1)
        return ir.AffineDimExpr.get(d + 1 if d > loop else d)
    if isinstance(e, ir.AffineConstantExpr):
        return e
    plain = isinstance(e.lhs, ir.AffineDimExpr) and e.lhs.position == loop
    if plain and isinstance(e.rhs, ir.AffineConstantExpr) and e.rhs.value == k:
        if isinstance(e, ir.AffineFloorDivExpr):
            return ir.AffineDimExpr.get(loop)
        if isinstance(e, ir.AffineModExpr):
            return ir.AffineDimExpr.get(loop + 1)
    lhs, rhs = _split_expr(e.lhs, loop, k), _split_expr(e.rhs, loop, k)
    if isinstance(e, ir.AffineAddExpr):
        return lhs + rhs
    if isinstance(e, ir.AffineMulExpr):
        return lhs * rhs
    if isinstance(e, ir.AffineModExpr):
        return lhs % rhs
    if isinstance(e, ir.AffineFloorDivExpr):
        return ir.AffineExpr.get_floor_div(lhs, rhs)
    return ir.AffineExpr.get_ceil_div(lhs, rhs)


def _group_view(value: ir.Value, amap: ir.AffineMap, ranges: list[int]):
    """`value` with each axis that `amap` reads at `c * a + b` (b a loop of extent c, the axis
    c times the extent of a) split into [a, b]: (the view, its map, the axes grouped for
    expand_shape or None where nothing was split). Other axes (windows) keep their reads."""
    t = ir.RankedTensorType(value.type)
    shape, exprs, groups, sizes = list(t.shape), [], [], []
    for axis, e in enumerate(amap.results):
        plan = None
        if not isinstance(e, ir.AffineDimExpr):
            try:
                plan = _axis_plan(e, shape[axis], ranges)
            except _NoMatch:
                pass
        whole = plan is not None and plan[:2] == (0, shape[axis]) and len(plan[3]) == len(plan[2])
        if not whole:  # a loop, a window (y + ky) or another sum: the axis is kept as it is
            groups.append([len(exprs)])
            exprs.append(e)
            sizes.append(shape[axis])
            continue
        groups.append(list(range(len(exprs), len(exprs) + len(plan[2]))))
        exprs += [ir.AffineDimExpr.get(d) for _, d in plan[3]]
        sizes += plan[2]
    if sizes == shape:
        return value, ir.AffineMap.get(amap.n_dims, 0, exprs), None
    view_type = ir.RankedTensorType.get(sizes, t.element_type)
    view = tensor.ExpandShapeOp(view_type, value, reassociation(groups), [], sizes).result
    return view, ir.AffineMap.get(amap.n_dims, 0, exprs), groups


def split_group_loops(func_op: ir.Operation) -> int:
    """A generic whose operands read a loop `f` as `f floordiv k` (a grouped convolution with k
    output channels per group that divide into no channel block: ResNeXt-50's 4 per group)
    gets `f` split into (group, channel in group) loops, and every operand axis read at
    `k * group + c` split into [groups, k] (expand_shape views, the result collapsed back): the
    window is then a convolution that the conv rule takes, each group a filter loop of its
    own, instead of naive loops over a computed channel. Returns how many."""
    found = matching_generics(func_op, _group_of)
    done = 0
    for op, (loop, k, ranges) in found:
        split_ranges = ranges[:loop] + [ranges[loop] // k, k] + ranges[loop + 1 :]
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        n = len(ranges) + 1
        new_maps = [
            ir.AffineMap.get(n, 0, [_split_expr(e, loop, k) for e in m.results]) for m in maps
        ]
        with ir.InsertionPoint(op), op.location:
            views = [_group_view(v, m, split_ranges) for v, m in zip(op.operands, new_maps)]
        out_view, out_map, out_groups = views[-1]
        if not out_map.is_projected_permutation:
            for v, _, g in views:  # nothing rewritten: drop the views made for it
                if g is not None:
                    v.owner.erase()
            continue
        iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
        iterators.insert(loop + 1, iterators[loop])
        types = [a.type for a in op.regions[0].blocks[0].arguments]
        new = rebuild_generic(
            op,
            out_view.type,
            [v for v, _, _ in views[:-1]],
            [out_view],
            [ir.AffineMapAttr.get(m) for _, m, _ in views],
            types,
        )
        new.attributes["iterator_types"] = ir.ArrayAttr.get(iterators)
        result = new.results[0]
        if out_groups is not None:
            with ir.InsertionPoint(op), op.location:
                result = tensor.CollapseShapeOp(
                    op.results[0].type, result, reassociation(out_groups)
                ).result
        op.results[0].replace_all_uses_with(result)
        op.erase()
        done += 1
    return done
