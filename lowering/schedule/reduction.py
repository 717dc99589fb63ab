"""Schedules for reductions (sum / max / mean over one axis, and contractions not shaped as matmul)."""

from __future__ import annotations

from dataclasses import replace

from lowering.schedule.common import (
    OpInfo,
    ScheduleOptions,
    ScheduleRule,
    Script,
    register_schedule,
    split_across_threads,
    split_threads,
)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


@register_schedule("reduction")
class ReductionSchedule(ScheduleRule):
    """One reduction loop. If it walks the input's contiguous axis (sum over the last axis): keep
    one register of partial results per row (`tile_reduction_using_for`) and combine them once at
    the end. Otherwise vectorize along the contiguous parallel axis and accumulate rows."""

    def schedule(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> str:
        reductions = [d for d, t in enumerate(info.iterators) if t == "reduction"]
        if info.num_results != 1 or info.traps or not reductions:
            return "fallback"
        # Symbolic parallel loops (softmax rows of a batch `n`) are tiled by 1, the vectors stay
        # static. A symbolic reduction along the contiguous axis (softmax over a symbolic
        # sequence) streams by in vectors, the last one partial (masked); any other symbolic
        # reduction or vector axis falls back.
        inner = _contiguous_loop(info)
        symbolic = [d for d in reductions if info.ranges[d] is None]
        if symbolic and (symbolic != [inner] or len(reductions) != 1):
            return "fallback"
        if info.ranges[inner] is None and not symbolic:
            return "fallback"
        # Several reduction loops, the contiguous one short: a pooling window.
        window = len(reductions) > 1 and inner in reductions and info.ranges[inner] <= WINDOW
        if len(reductions) != 1 and not window:
            return "fallback"
        red = reductions[0]
        nloops = len(info.ranges)
        if split_across_threads(info, opts, opts.min_parallel_elements):
            parallel = [d for d in range(nloops) if info.iterators[d] == "parallel"]
            # Not the vector axis while another loop can be split: the mean of [13 blocks, H*W,
            # 8 lanes] split its 8 lanes in two (both threads writing the same lines, in half
            # vectors) and ran 7x slower at 2 threads than at 1 (RegNetY's squeeze-excite).
            outer = [d for d in parallel if d != inner] or parallel
            if outer:
                h, d, share = split_threads(s, h, info, outer, opts.threads)
                if share is not None:  # each thread's part: its share of that loop
                    info = replace(
                        info, ranges=[share if i == d else r for i, r in enumerate(info.ranges)]
                    )
        if window:
            return _window_reduction(s, h, info, inner, opts.lanes)
        if inner == red:
            return _inner_reduction(s, h, info, red, opts.lanes)
        return _outer_reduction(s, h, info, red, inner, opts.lanes)


def _contiguous_loop(info: OpInfo) -> int:
    """The loop walking the last axis of the largest input (the one that decides memory access)."""
    ins = info.operand_dims[:-1]
    best = max(range(len(ins)), key=lambda i: len(ins[i] or []))
    return ins[best][-1] if ins[best] else len(info.ranges) - 1


WINDOW = 8  # a contiguous reduction this short is read whole, next to the output's vector axis
ROWS = 8  # independent partial-sum vectors per step (hides the 4-cycle add/FMA latency)


def _divisor(total: int, cap: int) -> int:
    return next(t for t in range(min(cap, total), 0, -1) if total % t == 0)


def inner_reduction(
    s: Script, h: str, info: OpInfo, red: int, lanes: int, block_dim: int | None = None
) -> tuple[int, int]:
    """Keep `lanes` partial results for each of up to ROWS outputs in vectors while the contiguous
    reduction loop streams by (`tile_reduction_using_for`), then combine each vector once.
    `block_dim` (default: the output's innermost loop) is the parallel loop blocked by ROWS.
    Returns (rows, lanes)."""
    nloops = len(info.ranges)
    if block_dim is None:
        out_dims = info.operand_dims[-1] or []
        block_dim = out_dims[-1] if out_dims else None
        if block_dim is not None and info.ranges[block_dim] is None:
            # a symbolic innermost row loop (softmax over [heads, n, n]): block a static outer
            # one instead, so several rows' partial sums still run side by side
            static = [d for d in out_dims if (info.ranges[d] or 0) > 1]
            block_dim = static[-1] if static else block_dim
    rows = 1
    if block_dim is not None and info.ranges[block_dim] is not None:
        rows = _divisor(info.ranges[block_dim], ROWS)
    tiles = [1 if info.iterators[d] == "parallel" else 0 for d in range(nloops)]
    if block_dim is not None:
        tiles[block_dim] = rows
    if any(tiles):
        h, _ = s.tile_for(h, tiles)
    size = info.ranges[red]
    width = lanes if size is None else min(lanes, _round_up(size, lanes))
    split = [0] * nloops
    split[red] = width
    fill, partial, combine, loop = (
        s.fresh("fill"),
        s.fresh("part"),
        s.fresh("comb"),
        s.fresh("loop"),
    )
    s.emit(
        f"{fill}, {partial}, {combine}, {loop} = transform.structured.tile_reduction_using_for {h} "
        f"by tile_sizes = {split} : ({s.ANY}) -> ({s.ANY}, {s.ANY}, {s.ANY}, {s.ANY})"
    )
    vec = [1 if info.iterators[d] == "parallel" else 0 for d in range(nloops)]
    if block_dim is not None:
        vec[block_dim] = rows
    vec[red] = width
    if size is None or size % width:
        # Whole vectors, then the partial one. Masked on every step (a symbolic reduction, or
        # one that the vectors do not divide), the partial sums went through memory each time
        # (a masked store, then a masked load, no forwarding): on AVX2, whose masked stores are
        # microcoded, BERT-base's softmax over a symbolic sequence of 256 ran 3.3x slower than
        # the static build's.
        for part in s.peel(loop):
            s.vectorize(s.match_generic(part), vec)
    else:
        s.vectorize(partial, vec)
    s.vectorize(combine)
    s.vectorize(fill)
    return rows, width


def _inner_reduction(s: Script, h: str, info: OpInfo, red: int, lanes: int) -> str:
    rows, width = inner_reduction(s, h, info, red, lanes)
    return f"reduction-inner-{rows}x{width}"


def _outer_reduction(s: Script, h: str, info: OpInfo, red: int, inner: int, lanes: int) -> str:
    nloops = len(info.ranges)
    size = info.ranges[inner]
    # A row that fits one step takes its exact width: an NCHW8c pool on AVX-512 read 8-lane rows
    # as masked 16-lane vectors, and the masked sum kept its accumulator in memory, a store and
    # a load per step (RegNetY-1.6GF's squeeze-excite pools over 1 x 42 x 14 x 14 x 8: 62 -> 5.7 us).
    width = min(size, 4 * lanes)
    sizes = [1] * nloops
    sizes[inner] = width
    h, _ = s.tile_for(h, sizes)
    s.vectorize(h, sizes)
    return f"reduction-outer-{width}"


def _window_reduction(s: Script, h: str, info: OpInfo, inner: int, lanes: int) -> str:
    """Pooling over non-overlapping windows (after `gather.raise_strided_inputs`: input
    [.., Y, KY, X, KX]): one step reads up to `lanes` outputs' whole contiguous windows (a
    [width, KX] vector, contiguous in memory) and reduces KX in registers with a transpose
    (deinterleave) and elementwise ops; the other window loops are tiled to 1 and accumulate.
    The width divides the output row: a masked multi-reduction has no transpose lowering."""
    out_dims = info.operand_dims[-1]
    vec = out_dims[-1] if out_dims else None
    sizes = [1] * len(info.ranges)
    sizes[inner] = info.ranges[inner]
    width = 1
    if vec is not None and info.ranges[vec] is not None:
        width = _divisor(info.ranges[vec], lanes)
        sizes[vec] = width
    h, loops = s.tile_for(h, sizes)
    s.vectorize(h, sizes)
    if loops:
        s.patterns(
            'vector.lower_multi_reduction lowering_strategy = "innerparallel"', target=loops[-1]
        )
    return f"reduction-window-{width}x{info.ranges[inner]}"
