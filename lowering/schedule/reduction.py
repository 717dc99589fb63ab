"""Schedules for reductions (sum / max / mean over one axis, and contractions not shaped as matmul)."""

from __future__ import annotations

from dataclasses import replace

from lowering.schedule.common import (
    INIT_FILL_ATTR,
    SCHED_ID_ATTR,
    VECTORS_PER_STEP,
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

    def absorbs(self, info: OpInfo, infos: list[OpInfo], opts: ScheduleOptions) -> list[int]:
        return row_chain(info, infos)

    def schedule(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> str:
        if info.fused:
            return _schedule_row_chain(s, h, info, opts)
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
        uneven = None  # a loop whose thread shares differ: no static size inside
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
                else:
                    uneven = d
        if window:
            return _window_reduction(s, h, info, inner, opts.lanes)
        if inner == red:
            return _inner_reduction(s, h, info, red, opts.lanes, uneven)
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


def row_block(size: int, extra: int = 1) -> int:
    """Outputs per step along `inner_reduction`'s block loop of `size`, beside `extra` along
    its `with_rows` loop: the largest divisor of `size` within ROWS accumulators."""
    return _divisor(size, max(1, ROWS // extra))


def inner_reduction(
    s: Script,
    h: str,
    info: OpInfo,
    red: int,
    lanes: int,
    block_dim: int | None = None,
    with_rows: tuple[int, int] | None = None,
    block_size: int | None = None,
) -> tuple[int, int]:
    """Keep `lanes` partial results for each of up to ROWS outputs in vectors while the contiguous
    reduction loop streams by (`tile_reduction_using_for`), then combine each vector once.
    `block_dim` (default: the output's innermost loop) is the parallel loop blocked by ROWS;
    `with_rows` = (dim, r): another parallel loop blocked by r as well, the ROWS accumulators
    shared between the two (dot products of r rows of A with each row of B read once).
    `block_size`: what ROWS must divide along `block_dim` (default: its size; a thread's share).
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
    extra_dim, extra = with_rows if with_rows is not None else (None, 1)
    if block_dim is not None and info.ranges[block_dim] is not None:
        rows = row_block(block_size or info.ranges[block_dim], extra)
    tiles = [1 if info.iterators[d] == "parallel" else 0 for d in range(nloops)]
    if block_dim is not None:
        tiles[block_dim] = rows
    if extra_dim is not None:
        tiles[extra_dim] = extra
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
    if extra_dim is not None:
        vec[extra_dim] = extra
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


def _inner_reduction(
    s: Script, h: str, info: OpInfo, red: int, lanes: int, uneven: int | None = None
) -> str:
    """Rows that no block of at least ROWS / 2 divides (ViT's 197 tokens: a prime) run in
    ROWS-row blocks, and the rest (197 % 8 = 5) in one block of its own: one row per step,
    each row's max or sum was a chain of dependent vector ops (4 cycles each) that nothing
    overlapped (the max of 12 x 197 rows of 197 at 1 thread: 110 -> 63 us; a layer norm over
    197 x 768: 99 -> 62 us). `uneven`: a loop split across threads in
    shares of different sizes (not split here)."""
    out_dims = info.operand_dims[-1] or []
    rows_dim = out_dims[-1] if out_dims else None
    size = info.ranges[rows_dim] if rows_dim is not None else None
    if size is not None and rows_dim != uneven and size > ROWS and row_block(size) < ROWS // 2:
        whole = size - size % ROWS
        parts = zip(s.split(h, rows_dim, whole), (whole, size - whole))
        shapes = []
        for part, part_rows in parts:
            ranges = [part_rows if d == rows_dim else r for d, r in enumerate(info.ranges)]
            rows, width = inner_reduction(s, part, replace(info, ranges=ranges), red, lanes)
            shapes.append(f"{rows}x{width}")
        return "reduction-inner-" + "+".join(shapes)
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


# A row chain (`row_chain`) runs row block by row block from this many bytes of input on: the
# passes of a softmax over Whisper's scores (6 x 1500 x 1500, 54 MB) each streamed them from
# memory (1 / 2 threads: 15.1 / 10.3 -> 11.4 / 6.0 ms). Below, each pass finds the rows in
# L2 or L3 anyway, and the blocks cost more than they save: ViT-B/16's softmax (12 x 197 x
# 197, 1.9 MB, prime rows: a row per block) 315 -> 348 us, a layer norm over 1500 x 384
# (2.3 MB) on 2 threads 107 -> 116 us.
ROW_CHAIN_BYTES = 8 << 20
ROW_BLOCK_BYTES = 32 << 10  # one row block's input: in L1 for the chain's next pass


def row_chain(info: OpInfo, infos: list[OpInfo]) -> list[int]:
    """Tags of the ops that `info` (a kernel's first op: a reduction over its last, contiguous
    loop, as softmax's max and layer norm's mean start) schedules with it as one chain of row
    passes: every op of the kernel, each a reduction like it or an elementwise op over its rows
    (x - max, 1 / sum) or over its rows and columns (exp, the normalized output, last), static,
    its result read only by later ops of the chain but for the last one's. The chain then runs
    a block of rows at a time (`_schedule_row_chain`): each pass reads rows that the pass before
    it left in L1, and the intermediates (softmax's exponentials) never reach memory."""
    if not infos or infos[0] is not info or len(infos) < 2 or not info.static:
        return []
    k = len(info.ranges) - 1
    rows, row_dims = info.ranges[:k], list(range(k))
    if info.iterators != ["parallel"] * k + ["reduction"] or info.operand_dims[-1] != row_dims:
        return []
    if 4 * info.work < ROW_CHAIN_BYTES:
        return []
    members = set()
    for other in infos:
        if other.num_results != 1 or other.traps or not other.static:
            return []
        if any(dims is None for dims in other.operand_dims):
            return []
        if any(k in dims and dims[-1] != k for dims in other.operand_dims):
            return []  # the columns are every operand's contiguous axis (the vectors' axis)
        if other.pattern == "reduction":
            if other.ranges != info.ranges or other.iterators != info.iterators:
                return []
            if other.operand_dims[-1] != row_dims:
                return []
        elif other.pattern == "elementwise":
            full = other.ranges == info.ranges and other.operand_dims[-1] == row_dims + [k]
            if not full and not (other.ranges == rows and other.operand_dims[-1] == row_dims):
                return []
        else:
            return []
        members.add(other.op)
    last = infos[-1]
    if last.pattern != "elementwise" or last.ranges != info.ranges:
        return []
    for other in infos[:-1]:  # read only inside the chain
        if any(use.owner.operation not in members for use in other.op.results[0].uses):
            return []
    return [other.tag for other in infos[1:]]


def _fuse_chain(s: Script, producers: list[tuple[str, OpInfo]], loop: str, scope: str) -> str:
    """Fuse the chain's `producers` (program order) and their reductions' init fills (found in
    `scope`, the loop's parent) into `loop`, last first; each is fused once per reader, and CSE
    then merges the copies (each reads the same slice). Returns the loop."""
    for h, member in reversed(producers):
        _, loop = s.fuse_into(h, loop)
        if member.pattern == "reduction":
            fill = s.match_attribute(INIT_FILL_ATTR, member.tag, "fill", inside=scope)
            _, loop = s.fuse_into(fill, loop)
    s.emit(f"transform.apply_cse to {s.func} : {s.ANY}")
    # the fused ops' outputs: an empty block each, not a slice of an empty whole (which became
    # one buffer of the whole size, its blocks written back to memory one after the other)
    s.patterns("tensor.fold_tensor_empty")
    return loop


def _schedule_row_chain(s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> str:
    """The chain (`row_chain`) tiled by its last op: a block of whole rows per thread, then
    per step of a loop in which every op of the chain is fused, vectorized as each would be
    alone on the block's rows."""
    chain = [(h, info)] + list(info.fused)
    last_h, last = chain[-1]
    k = len(info.ranges) - 1
    rows, columns = info.ranges[:k], info.ranges[k]
    shares, scope = list(rows), s.func
    threads = opts.threads if info.work >= opts.min_parallel_elements else 1
    # an even share of a row axis per thread (none: one thread runs the chain)
    split = next((d for d in range(k) if rows[d] >= threads and rows[d] % threads == 0), None)
    if threads > 1 and split is not None:
        sizes = [0] * (k + 1)
        sizes[split] = shares[split] = rows[split] // threads
        last_h, forall = s.tile_forall(last_h, tile_sizes=sizes)
        scope = _fuse_chain(s, chain[:-1], forall, s.func)
        fused = [(s.match_attribute(SCHED_ID_ATTR, m.tag, inside=scope), m) for _, m in chain[:-1]]
        chain = fused + [(last_h, last)]
    cap = max(1, min(ROWS, ROW_BLOCK_BYTES // (4 * columns)))
    block = _divisor(shares[k - 1], cap)
    sizes = [1] * k + [0]
    sizes[k - 1] = block
    last_h, loops = s.tile_for(last_h, sizes)
    loop = _fuse_chain(s, chain[:-1], loops[-1], scope)
    tile = [1] * (k - 1) + [block]
    lanes = opts.lanes
    for _, member in chain:
        inner = s.match_attribute(SCHED_ID_ATTR, member.tag, inside=loop)
        ranges = tile + [columns] if len(member.ranges) == k + 1 else tile
        block_info = replace(member, ranges=ranges)
        if member.pattern == "reduction":
            inner_reduction(s, inner, block_info, k, lanes, block_dim=k - 1)
        elif len(ranges) == k:  # a value per row: one vector of the block's rows
            s.vectorize(inner, ranges)
        else:
            _vectorize_rows(s, inner, ranges, lanes)
    s.keep_rolled(loops)
    return f"row-chain-{len(chain)}x{block}"


def _vectorize_rows(s: Script, h: str, ranges: list[int], lanes: int) -> None:
    """An elementwise op over a block of rows: each row in steps of up to VECTORS_PER_STEP
    registers, the partial step peeled."""
    width = min(ranges[-1], VECTORS_PER_STEP * lanes)
    sizes = [1] * (len(ranges) - 1) + [width]
    h, loops = s.tile_for(h, sizes)
    if ranges[-1] % width:
        for part in s.peel(loops[-1]):
            s.vectorize(s.match_generic(part), sizes)
    else:
        s.vectorize(h, sizes)
