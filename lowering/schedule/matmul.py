"""Schedules for contractions (matmul, dense with transposed B, batch matmul) and weight packing.

Sizes come from the target (`micro_tile`): with L f32 lanes per vector register and R registers,
the micro tile is MR x NR with NR = 2L columns (two registers per row) and as many rows as the
accumulators leave registers for (8 x 32 in 16 zmm on AVX-512, 6 x 16 in 12 ymm on AVX2).

Routes, chosen per op by `MatmulSchedule.route`:
- "packed": data tiling (MLIR_NOTES). A is packed into [.., M/MR, K, MR] panels, B into
  [.., N/NR, K, NR] panels (`linalg.pack` via `pack_greedily`, zero padded), the packed
  contraction is tiled for the caches (N blocks, then K blocks, then M blocks) and for registers
  (one MR x NR tile of accumulators), vectorized and lowered to FMAs, and unpacked at the end.
  With fewer than MR rows, A stays unpacked and the register tile is 1 x 4NR.
- "small": no packing, register tile 1 x 8L (x1 in K) straight on the operands: GEMV-like shapes
  (fewer than MR rows) whose B is [K, N] and not prepacked (packing would cost as much as the
  product).
- "dot": the same shapes with B [N, K] (dense / nn.Linear, not prepacked): one register of
  partial dot products for 8 outputs at a time, combined once per output
  (`reduction.inner_reduction`).
Weights known at compile time are packed once by `pack_weight` and reach the PrimFunc already in
the [.., N/NR, K, NR] layout (`use_prepacked_weight`), so the B pack folds away.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from lowering.dense import aligned_empty
from lowering.schedule.common import (
    PAD_FILL_ATTR,
    PREPACKED_ATTR,
    OpInfo,
    ScheduleOptions,
    ScheduleRule,
    Script,
    dims_of,
    forward_tile_writes,
    reassociation,
    rebuild_generic,
    register_schedule,
)
from lowering.schedule.math_approx import constant_float
from lowering.schedule.reduction import ROWS, inner_reduction, row_block
from relaxmlir.target import Target

GEMV_NB = 4  # 1-row register tile: 4 panels of NR = 8 accumulators
# Cache tiles: rows x cols of C per block, x KC of K. A K block of 1024 (the whole K of most
# layers) loads and stores each register tile's accumulators once per 1024 steps instead of
# 256: with the B panel (KC x NR) in L2 rather than L1, W3 (1024^3) ran 4-7% faster on Zen 4
# (AVX-512 and AVX2), BERT's FFN GEMMs 2-4%, and no measured shape slower.
CACHE_ROWS, CACHE_COLS, KC = 128, 256, 1024
SPLITS = ("auto", "m", "n")  # the `matmul.split` knob: which dimension the threads divide
ROUTES = ("auto", "packed", "rows")  # the `matmul.route` knob for static shapes (`route`)
# The largest B (per batch) that static shapes run on the unblocked `rows` route: each MR-row
# tile sweeps all of B, so B must stay in the last-level cache (GPT-2/BERT's 768x3072 weights
# are 9 MB); larger ones take the cache-blocked packed route.
ROWS_MAX_B_BYTES = 16 << 20
C_LAYOUTS = ("packed", "inplace")  # the `matmul.c_layout` knob: where the register tiles accumulate


@dataclass(frozen=True)
class MicroTile:
    """Register and cache tiles of the packed route for one target (f32)."""

    mr: int  # rows of the register tile (A panel height)
    nr: int  # columns of the register tile (B panel width) = 2 vector registers
    lanes: int
    cache_rows: int = CACHE_ROWS
    cache_cols: int = CACHE_COLS
    kc: int = KC  # K elements per cache block
    split: str = "auto"  # what the threads split: "auto" (the rule's choice), "m" or "n"

    @property
    def mc(self) -> int:  # row panels per cache block
        return max(1, self.cache_rows // self.mr)

    @property
    def nc(self) -> int:  # column panels per cache block
        return max(1, self.cache_cols // self.nr)

    @property
    def pack_k(self) -> int:  # k elements per vectorized pack step
        return self.lanes

    @property
    def small_n(self) -> int:  # register tile of the unpacked route: 1 x 8 registers
        return 8 * self.lanes


def micro_tile(target: Target) -> MicroTile:
    """MR x NR accumulators in registers, leaving two for the B row and one for the A broadcast:
    8 x 32 (16 of 32 zmm) on AVX-512, 6 x 16 (12 of 16 ymm) on AVX2, 6 x 8 on SSE, 8 x 8 on NEON.
    Two FMA ports x 4-cycle latency want at least 8 independent accumulators."""
    lanes = target.lanes("float32")
    regs = target.vector_registers
    mr = min(8, (regs - 3) // 2)
    return MicroTile(mr, 2 * lanes, lanes)


def tile_for(opts: ScheduleOptions) -> MicroTile:
    """The target's micro tile with the kernel's tuned knobs (space.py) applied; NR stays the
    target's, since weights are packed in NR panels before scheduling."""
    t = micro_tile(opts.target)
    mr = int(opts.knob("matmul.mr", t.mr))
    if not 1 <= mr <= t.mr:
        raise ValueError(f"matmul.mr={mr}: the register tile holds 1..{t.mr} rows on {opts.target}")
    split = str(opts.knob("matmul.split", "auto"))
    if split not in SPLITS:
        raise ValueError(f"matmul.split={split}: expected one of {', '.join(SPLITS)}")
    return MicroTile(
        mr,
        t.nr,
        t.lanes,
        int(opts.knob("matmul.cache_rows", CACHE_ROWS)),
        int(opts.knob("matmul.cache_cols", CACHE_COLS)),
        int(opts.knob("matmul.kc", KC)),
        split,
    )


@register_schedule("matmul")
class MatmulSchedule(ScheduleRule):
    def route(self, info: OpInfo, t: MicroTile, opts: ScheduleOptions) -> str:
        if info.element_type != "f32":
            return "fallback"
        if not info.static:
            n_static, k_static = info.ranges[info.n] is not None, info.ranges[info.k] is not None
            if n_static and k_static:  # symbolic rows (a batch or sequence `n`), static weights
                if info.b_prepacked or info.size(info.n) >= t.nr:
                    return "rows"
                return "small" if _b_k_major(info) else "dot"
            # Attention over a symbolic sequence: scores @ V has a symbolic K (rows of B stream
            # by under a static [1, N] strip), Q @ K^T a symbolic N (dot products along the
            # static head size). Everything symbolic is tiled by 1: dynamic trip counts only.
            if _b_k_major(info):  # a symbolic N: masked strips (Q @ K^T with K^T materialized)
                return "small"
            if k_static and not _b_k_major(info):
                return "dot"
            return "fallback"
        m, n = info.size(info.m), info.size(info.n)
        if info.b_prepacked or (m >= t.mr and n >= t.nr and _packs_in_place(info)):
            return _static_route(info, t, opts)
        # Few rows: packing B would cost as much as the product. B [K, N] rows feed FMAs
        # directly; B [N, K] rows are dot products (16-lane partial sums for 8 outputs at a time).
        return "small" if _b_k_major(info) else "dot"

    def prepare(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> None:
        t = tile_for(opts)
        route = self.route(info, t, opts)
        if route not in ("packed", "rows"):
            return
        # Symbolic rows keep A unpacked: its row tiles are read in place (see `_schedule_rows`).
        mr = t.mr if route == "packed" and info.size(info.m) >= t.mr else 0
        packed = s.fresh("packed")
        s.emit(
            f"{packed} = transform.structured.pack_greedily {h} matmul_packed_sizes = [{mr}, {t.nr}, 0] "
            f"matmul_inner_dims_order = [0, 1, 2] : ({s.ANY}) -> {s.ANY}"
        )
        if _b_k_major(info):  # B panels must be [N/NR, K, NR]: move the N blocks outside K
            b_dims = info.operand_dims[1]
            perm = list(range(len(b_dims)))
            i, j = b_dims.index(info.k), b_dims.index(info.n)
            perm[i], perm[j] = perm[j], perm[i]
            b_pack = s.producer(packed, 1)
            new_op, new_pack, new_unpack = s.fresh("pt"), s.fresh("pt"), s.fresh("pt")
            s.emit(
                f"{new_op}, {new_pack}, {new_unpack} = transform.structured.pack_transpose "
                f"{b_pack} with_compute_op({packed}) outer_perm = {perm} : ({s.ANY}, {s.ANY}) -> "
                f"({s.ANY}, {s.ANY}, {s.ANY})"
            )
            packed = new_op
        s.patterns("canonicalization")  # folds the zero fill into the packed accumulator
        s.tag(packed, info.tag)
        if mr and _inplace_c(info, opts, t):
            s.emit(f'transform.annotate {packed} "{INPLACE_ATTR}" : {s.ANY}')
        if route == "rows" and _c_view(info, t):
            info.c_view = True
            s.emit(f'transform.annotate {packed} "{C_VIEW_ATTR}" : {s.ANY}')

    def after_prepare(self, func_op: ir.Operation) -> None:
        inplace_accumulators(func_op)
        view_accumulators(func_op)

    def after_schedule(self, func_op: ir.Operation) -> None:
        zero_start_accumulators(func_op)

    def schedule(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> str:
        t = tile_for(opts)
        route = self.route(info, t, opts)
        if route == "fallback":
            return "matmul-fallback"
        split, share = None, None
        if route in ("small", "dot"):
            h, split, share = _split_columns(s, h, info, opts, t, route)
        if route == "small" and _symbolic_row_tiles(info, t):
            return _schedule_symbolic_tiles(s, h, info, t)
        if route == "small":
            return _schedule_small(s, h, info, t, opts)
        if route == "dot":
            a_rows = _dot_rows(info, t)
            with_rows = (info.m, a_rows) if a_rows > 1 else None
            heads = _stream_batch(info, a_rows, split)  # B rows of several heads side by side
            block = info.n if heads is None else heads
            # rows of B per step: a divisor of each thread's share of them (when the threads
            # split them evenly; else one at a time), so that every tile is whole
            size = None
            if block == split:
                size = share if info.size(info.n) % share == 0 else 1
            rows, lanes = inner_reduction(s, h, info, info.k, t.lanes, block, with_rows, size)
            prefix, b_rows = ("", rows) if heads is None else (f"{rows}h-", 1)
            shape = f"{a_rows}x{b_rows}" if a_rows > 1 else f"{b_rows}"
            return f"matmul-dot-{prefix}{shape}x{lanes}"
        if route == "rows":
            return _schedule_rows(s, h, info, opts, t)
        return _schedule_packed(s, h, info, opts, t)


def _stream_batch(info: OpInfo, a_rows: int, split: int | None) -> int | None:
    """The batch loop (attention heads) whose B matrices the dot route reads side by side in
    one register tile, if B has one of static size >= 2. One B at a time is one sequential
    stream, and one core of these VMs reads one stream from memory at ~12 GB/s, two at ~17,
    four at ~22: a decode step's Q @ K^T over 4 key heads x 1024 cached rows (1 MB, beyond L2)
    runs 1.2-1.3x faster at 1 thread, 1.1x at 2, with two heads' rows read at each step. (The
    small route's scores @ V with two heads' strips ran 1.15x slower.)
    Not where the heads per step would equal the `a_rows` rows of A: the vector lowering then
    broadcast each head's B row along the wrong one of the two equal dimensions (2 heads x
    2 rows: wrong sums). Nor where the threads `split` that loop: a tile of heads over a
    thread's uneven share failed to vectorize."""
    if not info.static:
        return None
    b_dims = info.operand_dims[1]
    heads = [d for d in sorted(info.batch) if d in b_dims and info.size(d) >= 2]
    if not heads or heads[-1] == split:
        return None
    per_step = row_block(info.size(heads[-1]), a_rows)
    return None if per_step in (1, a_rows) else heads[-1]


def _dot_rows(info: OpInfo, t: MicroTile) -> int:
    """Rows of A that each row of B meets in one step of the dot route: all of a static count
    below MR, up to DOT_ROWS (a divisor). One at a time, B's rows were read once per row of A:
    a decode step's Q @ K^T with 3 query heads per key head (grouped-query attention) read
    each head's 1024 cached keys three times."""
    m = info.ranges[info.m]
    if m is None or m >= t.mr or info.m == info.n:
        return 1
    return _divisor_tile(m, DOT_ROWS, 1)


def _static_route(info: OpInfo, t: MicroTile, opts: ScheduleOptions) -> str:
    """`rows` (A read in place by MR-row tiles over the whole K, C written once) where one
    K x NR panel of B fits half of L2, every thread gets a whole tile and B stays in cache,
    else `packed` (A and C packed, cache blocks). A K block set by the `matmul.kc` knob
    (other than the default) sends a deeper K to `packed`, which blocks K; the `matmul.route`
    knob forces either.
    Measured on Zen 4 (AVX-512 and AVX2) against packed: W3 1024^3 2-4% faster, BERT's GEMMs
    1-8% (no packing of A, no unpacking of C, accumulators loaded and stored once). Past one
    K block (1024), with B in column blocks (`_rows_column_block`), on Zen 5 with prepacked
    weights: 128x768x3072 (BERT's FFN2) 5% faster at 1 thread, 2% at 2, 256x1024x4096 12% / 5%,
    128x768x8192 (a panel of 1 MB) as fast; on the AVX2 path within 2% either way."""
    route = str(opts.knob("matmul.route", "auto"))
    if route not in ROUTES:
        raise ValueError(f"matmul.route={route}: expected one of {', '.join(ROUTES)}")
    if route != "auto":
        return route
    k, b_bytes = info.size(info.k), _b_bytes(info)
    whole_k = k <= t.kc or (t.kc == KC and _panel_bytes(info, t) <= _l2_bytes(opts) // 2)
    threads, m = _threads_for(info, opts), info.size(info.m)
    # with a B that the threads split (`_splits_wide_b`), every thread runs all the rows: 12
    # rows through BERT-base's weights went packed (16 rows padded)
    whole_tiles = m >= t.mr * threads or (m >= t.mr and _splits_wide_b(info, opts, t, threads))
    if whole_k and whole_tiles and b_bytes <= ROWS_MAX_B_BYTES:
        return "rows"
    return "packed"


def _packs_in_place(info: OpInfo) -> bool:
    """Whether packing B along N keeps every loop where it was: the loops run batch, M, N, K.
    `pack_greedily` puts M, N and K last in that order, and the packed and rows routes tile the
    packed op by the original loops' positions. An NCHW 1x1 convolution over a batch of 2 (loops
    batch, O, H, W, C: the rows H x W, which `normalize.merge_loops` merges only for a batch of
    1) had its rows tiled by its N panels' loop on AVX2 and the script failed; on AVX-512 its 24
    filters (fewer than NR) had taken the `dot` route, which reads B as it is, as it does now."""
    return [*sorted(info.batch), info.m, info.n, info.k] == list(range(len(info.ranges)))


def _b_k_major(info: OpInfo) -> bool:
    """B indexed (.., k, .., n): row-major [K, N] weights (matmul), not [N, K] (dense)."""
    b_dims = info.operand_dims[1]
    return b_dims.index(info.k) < b_dims.index(info.n)


# A matmul of fewer rows than this is bound by streaming B, not by its FMAs: one element of B
# costs about as long as this many MACs (1 x 256 x 1024 with B in L2: 11 us on one Zen 4 core,
# 24 MACs/ns against ~58 at the FMA peak, i.e. ~2.5 MACs per element of B at one row).
B_BOUND_ROWS = 4
DOT_ROWS = 4  # rows of A per step of the dot route (`_dot_rows`)


def _threads_for(info: OpInfo, opts: ScheduleOptions) -> int:
    """The threads of a static matmul: all of them when its time pays for a parallel region.
    With few rows that time is B's traffic: a GEMV through a 1 MB weight (an LSTM's recurrent
    step, 1 x 256 x 1024: 16.0 -> 11.6 us on 2 threads) splits, through 256 KB it does not
    (1 x 256 x 256: 5.9 -> 7.0 us)."""
    work = info.work
    if info.static:
        work = max(work, B_BOUND_ROWS * info.size(info.k) * info.size(info.n))
    return opts.threads if opts.threads > 1 and work >= opts.min_parallel_work else 1


def _panel_group(n_blocks: int) -> int:
    """B panels per step of the 1-row register tile: GEMV_NB, or the most of 2 and 1 that divides
    the `n_blocks` panels (every tile whole)."""
    return next(b for b in (GEMV_NB, 2, 1) if n_blocks % b == 0)


def _splits_wide_b(info: OpInfo, opts: ScheduleOptions, t: MicroTile, threads: int) -> bool:
    """Whether `threads` split B's panels evenly (in whole groups, `_panel_group`) and B is
    beyond one core's L2: then each thread takes its share of B and every row
    (`_schedule_rows`)."""
    n_blocks = _ceil(info.size(info.n), t.nr)
    return (
        threads > 1
        and n_blocks % (threads * _panel_group(n_blocks)) == 0
        and _b_bytes(info) > _l2_bytes(opts)
    )


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _divisor_tile(total: int, cap: int, multiple: int) -> int:
    """The largest tile <= cap that is a multiple of `multiple` and divides `total` (else cap)."""
    for t in range(min(cap, total), 0, -1):
        if t % multiple == 0 and total % t == 0:
            return t
    return min(cap, total)


def _few_rows_tile(rows: int, nb: int, t: MicroTile) -> tuple[int, int]:
    """(rows, panels) of the register tile for a static count of `rows` below MR, up to `nb`
    panels wide: every row at once, with as many of the `nb` panels (a divisor of it) as keep
    the MR x NR tile's accumulator count. One row at a time streamed B from L2 for each row,
    one B vector per FMA, which L2 cannot feed: a 4 x 768 x 3072 linear with prepacked weights
    ran at 50 GFLOP/s on Zen 4 (8 rows: 110), each row of 2..7 adding as much time as the first."""
    if rows <= 1:
        return 1, nb
    return rows, max(b for b in _divisors(nb) if rows * b <= t.mr)


def _schedule_packed(s: Script, h: str, info: OpInfo, opts: ScheduleOptions, t: MicroTile) -> str:
    """`h` is the packed contraction: loops = the original loops (M, N now counting panels) + the
    inner panel loops (m if packed, then n)."""
    threads = _threads_for(info, opts)
    m_packed = info.size(info.m) >= t.mr
    nloops = len(info.ranges)
    inner = [0, 0] if m_packed else [0]
    a_pack = s.producer(h, 0) if m_packed else None
    b_pack = None if info.b_prepacked else s.producer(h, 1)
    unpack = None if m_packed and _inplace_c(info, opts, t) else s.consumer(h, 0)

    # Tiles that divide their loops keep every tile static (the vectorizer needs static shapes
    # when a register tile spans several panels).
    m_blocks = _ceil(info.size(info.m), t.mr) if m_packed else info.size(info.m)
    n_blocks = _ceil(info.size(info.n), t.nr)
    nb = 1 if m_packed else _panel_group(n_blocks)
    # Thread level: one forall over the batch, the M panels or the N panels.
    m_span, n_span = m_blocks, n_blocks  # panels each task sees
    if threads > 1:
        sizes = [0] * nloops + inner
        batch_total = int(np.prod([info.size(d) for d in info.batch])) if info.batch else 1
        # The rule's choice: the batch, else the longer of M and N (in panels); the tuned
        # `split` knob forces M or N where each thread still gets a whole panel.
        by_m = m_packed and m_blocks >= n_blocks and m_blocks >= threads
        if t.split == "m" and m_blocks >= threads:
            by_m = True
        elif t.split == "n" and n_blocks % (threads * nb) == 0:
            by_m = False
        if info.batch and batch_total >= threads and t.split == "auto":
            sizes[info.batch[0]] = _ceil(info.size(info.batch[0]), threads)
        elif by_m:
            sizes[info.m] = m_span = _ceil(m_blocks, threads)
        elif n_blocks % (threads * nb) == 0:
            sizes[info.n] = n_span = n_blocks // threads
        elif m_blocks >= threads:
            sizes[info.m] = m_span = _ceil(m_blocks, threads)
        elif n_blocks >= threads * nb:
            # Panels that the register tiles of `nb` panels do not split evenly: narrower
            # register tiles that do (12 panels of a 1 x 768 x 192 linear on 2 threads: 6 each,
            # in tiles of 2), else one-panel tiles and fewer of them for the last thread
            # (MobileNetV2's classifier on AVX2, 1000 columns: 63 panels of 16, ran on one
            # thread, 227 us at 1 and at 2). A last share of several-panel tiles has a size
            # known only at run time, which its tiles inherit and the vectorizer refused: a
            # batch-1 linear of 192, 224, ..., 992 columns failed to build.
            nb = next((b for b in (2, 1) if b < nb and n_blocks % (threads * b) == 0), 1)
            sizes[info.n] = n_span = _ceil(n_blocks, threads)
        if any(sizes):
            h, forall = s.tile_forall(h, tile_sizes=sizes)
            s.fuse_init_fill(info.tag, forall)
    # Unpacked rows (fewer than MR): all of a thread's rows in one register tile, where they
    # split evenly (static tiles).
    rows = 1
    if not m_packed and info.size(info.m) % m_span == 0:
        rows, nb = _few_rows_tile(m_span, nb, t)
    # Cache level: N blocks, then K blocks, then M blocks (B block stays in L2, A block in L2).
    cache = [1 if d in info.batch else 0 for d in range(nloops)] + inner
    cache[info.m] = min(t.mc, m_span) if m_packed else rows
    cache[info.n] = _divisor_tile(n_span, t.nc, nb)
    cache[info.k] = min(t.kc, info.size(info.k))
    order = list(info.batch) + [info.n, info.k, info.m]
    h, _ = s.tile_for(h, cache, interchange=order)
    # Register level: one micro tile (MR x NR, or the few rows x NR*nb) per step of K, in registers.
    reg = [0] * nloops + inner
    reg[info.m], reg[info.n], reg[info.k] = rows, nb, 1
    h, _ = s.tile_for(h, reg, interchange=list(info.batch) + [info.n, info.m, info.k])
    s.vectorize(h)

    batch_size = int(np.prod([info.size(d) for d in info.batch])) if info.batch else 1
    k = info.size(info.k)
    if a_pack:
        a_threads = _copy_threads(threads, batch_size * m_blocks * t.mr * k, opts)
        _schedule_pack(s, a_pack, info.operand_dims[0], info.k, info.m, [t.mr], a_threads, t.pack_k)
    if b_pack:
        _schedule_b_pack(s, b_pack, info, opts, t, threads)
    if unpack is None:
        return f"matmul-packed-{t.mr}x{t.nr * nb}-inplace"
    rows = m_blocks * t.mr if m_packed else m_blocks
    _schedule_unpack(
        s,
        unpack,
        info,
        t,
        m_packed,
        _copy_threads(threads, batch_size * rows * n_blocks * t.nr, opts),
    )
    return f"matmul-packed-{t.mr if m_packed else rows}x{t.nr * nb}"


def _schedule_rows(s: Script, h: str, info: OpInfo, opts: ScheduleOptions, t: MicroTile) -> str:
    """Rows M read in place (static N, K; B in [N/NR, K, NR] panels, packed ahead or here):
    symbolic rows (no A packing, which would need a dynamic-size buffer) and the static products
    `_static_route` sends here. The rows (or, for static shapes with more column panels than row
    tiles, B's panels) split across threads, then MR-row tiles: the full tiles run the MR x NR
    register tile straight on A's rows over the whole K, and the remainder (< MR rows) runs in
    one tile of all its rows when their count is static (`_few_rows_tile`), else in parts of
    4, 2 and 1 rows whose sizes are computed at run time (`_schedule_row_parts`; a single row
    is the 1 x NB*NR GEMV tile, which is all a batch of 1 runs).

    `h` is the contraction packed along N only: loops = the original ones (N counting panels),
    then the panel's columns."""
    nloops = len(info.ranges)
    b_pack = None if info.b_prepacked else s.producer(h, 1)
    unpack = None if info.c_view else s.consumer(h, 0)  # (the epilogue reads the panels)
    n_blocks = _ceil(info.size(info.n), t.nr)
    nb = _panel_group(n_blocks)
    # Symbolic rows: the driver runs this copy only when they are many enough (`rows_dispatch`);
    # static ones split when the work is large enough.
    threads = _threads_for(info, opts) if info.static else opts.threads
    split_dim = _row_split(info, threads)
    b_threads = threads if info.static else 1
    few_wide = (  # the serial copy of symbolic rows (a batch of 1), through wide weights
        info.rows_version == "few"  # symbolic: `threads` is opts.threads
        and threads > 1
        and n_blocks % (threads * nb) == 0
        and info.size(info.k) * info.size(info.n) >= opts.min_parallel_work
    )
    wide_b = (  # a B beyond L2, static rows or the parallel copy of symbolic ones
        (info.static or info.rows_version == "many")
        and split_dim == info.m
        and _splits_wide_b(info, opts, t, threads)
    )
    if few_wide or wide_b:
        # A B that one core's L2 cannot hold: each thread takes its share of B's panels and
        # every row, instead of streaming all of B (from L3, or from memory where a model's
        # weights do not stay in cache). With B in column blocks (`_rows_column_block`) A is
        # read once per block either way, so this split halves B's traffic and moves no more
        # of A. It was taken only with more panels than row tiles; for every row count, timed
        # in turns on Zen 5 at 2 threads: W3 (1024^3) 1.5-3% faster, BERT-base at sequence 512
        # 2.6%, and built for a symbolic sequence (whose parallel copy split by rows) 1.13 ->
        # 0.98x the static build at n = 32, 1.06 -> 1.03 at 256. A B that fits in L2 keeps the
        # split by rows, the split of the row-wise ops around it (bias, layer norm, softmax), so
        # a thread reads the rows it wrote: W6 (d 256, B <= 1 MB) ran 3-5% faster with its two
        # threads on one L3, 12-15% faster across two. Few symbolic rows split B too, as the
        # static product of one row does: one core alone streamed BERT-base's weights at n = 1
        # (2 threads: 1.4-1.7x the static build).
        split = [0] * (nloops + 1)
        split[info.n] = n_blocks // threads
        h, forall = s.tile_forall(h, tile_sizes=split)
        s.fuse_init_fill(info.tag, forall)
        split_dim = info.n
    elif split_dim is not None and info.rows_version != "few":
        # Each thread a contiguous block of rows (or of the batch); the copy for few rows is serial.
        split = [0] * (nloops + 1)
        split[split_dim] = threads
        h, forall = s.tile_forall(h, num_threads=split)
        if (
            b_pack
            and info.static
            and split_dim == info.m
            and _b_bytes(info, batch=True) <= _l2_bytes(opts)
        ):
            # Every thread reads all of B: each packs its own copy (in its L2) instead of a
            # share of one that the others then read. A shared panel is written over at every
            # call while the other cores hold it, and each such store waits for their copies to
            # be invalidated: W4 (256^3) at 2 threads 0.172 -> 0.166 ms with both threads on
            # one L3, 0.226 -> 0.168 across two. A B beyond L2 stays shared (W3: its 4 MB
            # copied twice cost 2.5%).
            b_pack, forall = s.fuse_into(b_pack, forall)
            b_threads = 1
        s.fuse_init_fill(info.tag, forall)
    # Batch dims one at a time, rows by MR.
    sizes = [1 if d in info.batch else 0 for d in range(nloops)] + [0]
    sizes[info.m] = t.mr
    # Rows each task sees, when static: no peeling then (MLIR refuses a loop without a partial
    # last iteration, or without a full one).
    rows = info.ranges[info.m]
    if rows is not None and split_dim == info.m and info.rows_version != "few":
        rows = rows // threads if rows % threads == 0 else None
    panels = n_blocks // threads if split_dim == info.n else n_blocks  # each thread's
    block = _rows_column_block(info, opts, t, panels, rows)
    if block < panels:
        # B's panels in column blocks that stay in L2 while every row tile passes over them.
        col_block = [0] * (nloops + 1)
        col_block[info.n] = block
        h, block_loops = s.tile_for(h, col_block)
        # While a block is computed, the next one is fetched into L2 (lowering/prefetch.py),
        # where both fit: symbolic rows keep whole GEMV groups, 4 panels of BERT-base's 3072 ->
        # 768 projection (1.5 MB), and the next block pushed out the one being computed (built
        # for a symbolic sequence, BERT-base ran 1.69x slower than its static build at n = 32).
        if _next_block_fits(info, opts, t, block) and int(opts.knob("matmul.prefetch", 1)):
            s.emit(f'transform.annotate {block_loops[0]} "{PREFETCH_NEXT_ATTR}" : {s.ANY}')
        nb = math.gcd(nb, block)
    full_reg = [0] * nloops + [0]
    full_reg[info.n], full_reg[info.k] = 1, 1  # loop order n, k: K innermost
    # The rows past the last MR-row tile: all at once where static (`_few_rows_tile`); a
    # dynamic count of them (symbolic rows, or a thread's uneven share) in parts whose sizes are
    # computed where the rows are (`_schedule_row_parts`).
    if rows is None:
        tail = _schedule_row_parts(s, h, info, t, nb)
    else:
        tail_rows, tail_nb = _few_rows_tile(rows % t.mr, nb, t)
        tail = f"{tail_rows}x{t.nr * tail_nb}"
        rows_left = [1 if d in info.batch else 0 for d in range(nloops)] + [0]
        rows_left[info.m], rows_left[info.n], rows_left[info.k] = tail_rows, tail_nb, 1
        if rows < t.mr:  # remainder rows only
            h, _ = s.tile_for(h, rows_left)
            s.vectorize(h)
        elif rows % t.mr:  # full tiles, then the rest at once
            full, rest = s.split(h, info.m, rows - rows % t.mr)
            full, _ = s.tile_for(full, sizes)
            full, _ = s.tile_for(full, full_reg)
            s.vectorize(full)
            rest, _ = s.tile_for(rest, rows_left)
            s.vectorize(rest)
        else:  # full tiles only
            h, _ = s.tile_for(h, sizes)
            h, _ = s.tile_for(h, full_reg)
            s.vectorize(h)
    if b_pack:
        _schedule_b_pack(s, b_pack, info, opts, t, b_threads)
    if unpack is not None:
        # The copy follows a split by rows or batch; after a split by B's panels it goes by
        # rows, the split of the row-wise ops after it.
        by = split_dim if split_dim != info.n else None
        if info.static:
            c_elements = int(np.prod([info.size(d) for d in info.operand_dims[2]]))
            copy_threads = _copy_threads(threads, c_elements, opts)
        else:
            # Symbolic rows: the parallel copy of the run-time dispatch splits C's copy by rows,
            # as the row-wise ops after it (a 256 x 768 x 3072 linear on 2 threads: 1.045 ->
            # 1.025x its static build).
            copy_threads = threads if info.rows_version == "many" else 1
        _schedule_unpack(s, unpack, info, t, False, copy_threads, by)
    # Every C tile is computed once over the whole K: it can start from zero registers.
    s.emit(f'transform.annotate {s.match_init_fill(info.tag)} "{ZERO_START_ATTR}" : {s.ANY}')
    return f"matmul-rows-{t.mr}x{t.nr}+{tail}"


def _schedule_row_parts(s: Script, h: str, info: OpInfo, t: MicroTile, nb: int) -> str:
    """Symbolic rows n (or a thread's share of rows) in parts whose sizes are computed at run
    time (`Script.split_continuous`): n - n mod MR rows in MR-row tiles, then 4 rows or none in
    one 4-row tile, 2 or none in a 2-row tile (those below MR), and a last row or none. Each
    part's tiles are peeled, so that they have static sizes (the remainders never run: each
    part is a multiple of its tile). The remainder past the MR-row tiles ran row by row,
    streaming B once per row at one B vector per FMA (`_few_rows_tile`): a batch of 4 built for
    any batch ran 2.1x slower than built for 4, and 32 rows on 2 threads (16 each, 6-row
    tiles) ran 4 rows one by one per thread. Returns the tail tiles' shapes for the schedule's
    name."""
    nloops = len(info.ranges)
    counts, parts = s.split_continuous(h, info.m, t.mr)
    one_row = [1 if d in info.batch else 0 for d in range(nloops)] + [0]
    one_row[info.m], one_row[info.n], one_row[info.k] = 1, nb, 1
    shapes = []
    for part, count in zip(parts, counts):
        if count > 1:
            part, shape = _peeled_row_tile(s, part, info, t, nb, count)
            if count < t.mr:
                shapes.append(shape)
        tiled, _ = s.tile_for(part, one_row)
        s.vectorize(tiled)
    tiled, _ = s.tile_for(parts[-1], one_row)  # the empty rest (never runs)
    s.vectorize(tiled)
    return "+".join([*shapes, f"1x{t.nr * nb}"])


def _peeled_row_tile(
    s: Script, h: str, info: OpInfo, t: MicroTile, nb: int, count: int
) -> tuple[str, str]:
    """`h`'s rows in tiles of `count`, peeled: the whole tiles run a register tile of static
    size (MR x NR, or `count` rows x as many of the `nb` panels as `_few_rows_tile` allows).
    Returns the generic of the rows left (fewer than `count`, a dynamic number) and the tile's
    shape."""
    nloops = len(info.ranges)
    tile = [1 if d in info.batch else 0 for d in range(nloops)] + [0]
    tile[info.m] = count
    h, loops = s.tile_for(h, tile)
    whole, rest = s.peel(loops[sum(1 for d in range(info.m) if tile[d])])
    rows, panels = (count, 1) if count == t.mr else _few_rows_tile(count, nb, t)
    reg = [0] * (nloops + 1)
    reg[info.n], reg[info.k] = panels, 1
    tiled, _ = s.tile_for(s.match_generic(whole), reg)
    s.vectorize(tiled)
    return s.match_generic(rest), f"{rows}x{t.nr * panels}"


def _rows_column_block(
    info: OpInfo,
    opts: ScheduleOptions,
    t: MicroTile,
    n_blocks: int,
    rows: int | None,
    version: str | None = None,
) -> int:
    """B panels per column block of the `rows` route, out of the `n_blocks` panels a thread
    sees (all of B, or its share where the threads split B's panels); `n_blocks`: no blocks.
    Each MR-row tile runs over every panel it sees; where those outgrow half of L2, all of
    them came from L3 once per row tile (W3: 4 MB, 128 times). In column blocks of at most a
    quarter of L2, every row tile reads a block from L2 instead, and A's rows come from L2 or
    L3 once per block.
    Measured on Zen 5 (AVX-512), against no blocks, 1 thread: W3 1024^3 248 -> 258 GFLOP/s,
    BERT's 128x768x768 238 -> 249 and 128x3072x768 231 -> 238 (1.5-2.5% on the AVX2 path);
    whole models 3-4% faster (BERT-base 102.8 -> 99.7 ms, GPT-2 106.8 -> 102.7). At 2 threads
    W3 2-6% faster; blocks in each thread's share of B (with K past 1024 on this route, see
    `_static_route`) made BERT-base, GPT-2 and the Llama-style model 4-6% faster.
    `version`: the copy of a run-time row dispatch (default: the op's own, `info.rows_version`)."""
    version = info.rows_version if version is None else version
    knob = int(opts.knob("matmul.rows_block", 0))
    if knob:
        if n_blocks % knob:
            raise ValueError(f"matmul.rows_block={knob}: must divide the {n_blocks} panels of B")
        return knob
    panel = _panel_bytes(info, t)
    l2 = _l2_bytes(opts)
    # One row tile: nothing reads a block twice. Symbolic rows (few or not) run in parts
    # (`_schedule_row_parts`), up to four passes over each block.
    few_rows = rows is not None and rows <= t.mr
    one_tile = rows == t.mr and panel * n_blocks > l2 // 2 and n_blocks % 2 == 0
    if one_tile and _next_block_fits(info, opts, t, 2):
        # Exactly one full row tile, through a B beyond half of L2 (a batch of 8 through a
        # model's weights): its register tile reads one panel per step, a single stream that
        # the hardware prefetchers do not run far enough ahead of. In blocks of two panels the
        # next block is prefetched (lowering/prefetch.py), one to two panels ahead. Weights
        # cold, 1 thread, Intel Xeon: 8 x 3072 -> 768 1013 -> 750 us, 8 x 768 -> 3072 1025 ->
        # 679, 8 x 768 -> 2304 719 -> 491; AVX2 (6 rows) 954 -> 675 and 910 -> 657 us. Blocks
        # of one panel (the next one is the hardware's) or of four were slower than two.
        return 2
    if few_rows or panel * n_blocks <= l2 // 2:
        return n_blocks
    block = max(d for d in _divisors(n_blocks) if d == 1 or d * panel <= l2 // 4)
    if rows is None and version != "many":
        # Symbolic rows that a batch of 1 runs (the one copy, or the few-rows copy of a run-time
        # dispatch) end in the 1 x NB*NR GEMV tile, whose NB panels are four streams of B: a
        # block of whole groups keeps them. BERT-base's 3072 -> 768 projection (196 KB panels,
        # blocks of one) ran its row at 1 panel a step, 25% slower than built for 1 row; built
        # for a symbolic sequence, timed in turns with static builds at 1 thread: n = 1 1.22 ->
        # 0.93x, n = 32 1.00x both, n = 256 0.93 -> 0.88x (Zen 3).
        nb = _panel_group(n_blocks)
        block = min(d for d in _divisors(n_blocks) if d % nb == 0 and d >= block)
    return block


def _schedule_b_pack(
    s: Script, h: str, info: OpInfo, opts: ScheduleOptions, t: MicroTile, threads: int
) -> None:
    """B's pack into NR-column panels ([.., N/NR, K, NR]: a [K, N] B has its N blocks moved
    outside K), split across `threads` when it moves enough elements."""
    b_outer = list(info.operand_dims[1])
    if _b_k_major(info):
        i, j = b_outer.index(info.k), b_outer.index(info.n)
        b_outer[i], b_outer[j] = b_outer[j], b_outer[i]
    if threads > 1:
        rest = int(np.prod([info.size(d) for d in b_outer if d != info.n]))  # K (x batch)
        threads = _copy_threads(threads, rest * _ceil(info.size(info.n), t.nr) * t.nr, opts)
    _schedule_pack(
        s, h, b_outer, info.k, info.n, [t.nr], threads, t.pack_k, rows_along_panels=_b_k_major(info)
    )


def _copy_threads(threads: int, elements: int, opts: ScheduleOptions) -> int:
    """Threads for a pack or unpack that moves `elements`: `threads`, or 1 below the size at
    which a parallel copy pays (`min_parallel_copy`)."""
    return threads if elements >= opts.min_parallel_copy else 1


def _b_bytes(info: OpInfo, *, batch: bool = False) -> int:
    """B's f32 bytes: one K x N matrix, or with `batch` all of B (a batched B's every matrix)."""
    dims = info.operand_dims[1] if batch else (info.k, info.n)
    return 4 * int(np.prod([info.size(d) for d in dims]))


def _panel_bytes(info: OpInfo, t: MicroTile) -> int:
    """Bytes of one K x NR panel of B (f32)."""
    return 4 * info.size(info.k) * t.nr


def _next_block_fits(info: OpInfo, opts: ScheduleOptions, t: MicroTile, block: int) -> bool:
    """Whether a column block of `block` panels and the next one fit in L2 together: where
    the rows route prefetches the next block while this one is read (lowering/prefetch.py)."""
    return 2 * block * _panel_bytes(info, t) <= _l2_bytes(opts)


def _l2_bytes(opts: ScheduleOptions) -> int:
    """One core's L2 (the target's `l2-cache`, else 1 MB)."""
    return int(opts.target.get("l2-cache") or 1 << 20)


def _row_split(info: OpInfo, threads: int) -> int | None:
    """The loop a `rows` matmul splits across threads: a static batch loop with a block per
    thread, else the first symbolic one of the batch loops and the rows, else static rows."""
    if threads <= 1:
        return None
    for d in info.batch:
        if info.ranges[d] is not None and info.ranges[d] >= threads:
            return d
    rows = list(info.batch) + [info.m]
    dynamic = next((d for d in rows if info.ranges[d] is None), None)
    if dynamic is not None:
        return dynamic
    return info.m if info.size(info.m) >= threads else None


def rows_dispatch(info: OpInfo, opts: ScheduleOptions) -> tuple[int, int] | None:
    """For a `rows` matmul whose symbolic rows want two schedules, chosen at run time
    (`driver.version_rows`): (the loop, the size from which its "many" copy runs); None when
    one schedule serves every size.
    On several threads, the loop the threads split, when symbolic: its parallel copy runs from
    where its iterations x the static rest reach `min_parallel_work`.
    On one thread, the rows, when a few of them (ending in the 1 x NB*NR GEMV tile) want B's
    column blocks in whole panel groups and many want smaller blocks, each next one prefetched
    (`_rows_column_block`): from MR rows on. One copy for both, BERT-base's 3072 -> 768
    projection (B streamed from memory) at n = 32 ran 1.75x slower than built for 32 (1.5 MB
    blocks, too large to prefetch the next beside); with the many-rows copy, 1.01x."""
    t = tile_for(opts)
    if info.pattern != "matmul" or MatmulSchedule().route(info, t, opts) != "rows":
        return None
    if opts.threads <= 1:
        if info.ranges[info.m] is not None:
            return None
        n_blocks = _ceil(info.size(info.n), t.nr)
        few = _rows_column_block(info, opts, t, n_blocks, None, version="few")
        many = _rows_column_block(info, opts, t, n_blocks, None, version="many")
        return (info.m, t.mr) if few != many else None
    dim = _row_split(info, opts.threads)
    if dim is None or info.ranges[dim] is not None:
        return None
    per_step = info.work // max(1, info.size(dim) if info.ranges[dim] else 1)  # static loops only
    return dim, max(2, _ceil(opts.min_parallel_work, per_step))


def _schedule_pack(
    s: Script,
    h: str,
    outer: list[int],
    k: int,
    tiled_dim: int,
    inner: list[int],
    threads: int,
    pack_k: int,
    *,
    rows_along_panels: bool = False,
) -> None:
    """Vectorize a pack op in `pack_k` steps along K, panel by panel; masks handle padding.

    `rows_along_panels`: the source's contiguous rows run across the panels (a [K, N] B), so the
    K steps go outside the panels instead. Panel by panel, each step read one line from each of
    `pack_k` rows a page apart, which no prefetcher follows; with K outside, consecutive steps
    read along the rows. Timed in turns with the old order on Zen 5: W3 (1024^3, B packed at
    every call) 0.985 -> 1.02x numpy at 1 thread, 0.975 -> 0.99x on its AVX2 path; W4 (256^3)
    1-5% faster; W6 and BERT-base (weights packed at build time) unchanged."""
    sizes = [1] * len(outer)
    sizes[outer.index(k)] = pack_k
    if threads > 1:
        split = [0] * len(outer)
        split[0] = threads
        h, _ = s.tile_forall(h, num_threads=split)
    order = None  # the loops in the op's order: panels outside K
    panel, step = outer.index(tiled_dim), outer.index(k)
    if rows_along_panels and panel < step:
        order = list(range(len(outer)))
        order[panel], order[step] = step, panel
    h, _ = s.tile_for(h, sizes, interchange=order)
    s.vectorize(h, sizes + inner)


def _schedule_unpack(
    s: Script,
    h: str,
    info: OpInfo,
    t: MicroTile,
    m_packed: bool,
    threads: int,
    split_dim: int | None = None,
) -> None:
    """C's unpack from register-tile panels, split across `threads` by C's outermost axis, or by
    the axis of loop `split_dim` (the loop the contraction split: each thread then copies the
    part of C it computed)."""
    c_dims = info.operand_dims[2]
    divisible = info.size(info.n) % t.nr == 0 and (not m_packed or info.size(info.m) % t.mr == 0)
    if (
        not divisible
    ):  # vectorizing a partial unpack tile hits an upstream bug (invalid vector.mask)
        typed = _cast(s, h, "linalg.unpack")
        results = ", ".join(
            f'!transform.op<"{name}">'
            for name in (
                "tensor.empty",
                "linalg.transpose",
                "tensor.collapse_shape",
                "tensor.extract_slice",
            )
        )
        s.emit(
            f'transform.structured.lower_unpack {typed} : (!transform.op<"linalg.unpack">) -> ({results})'
        )
        return
    sizes = [1] * len(c_dims)
    sizes[c_dims.index(info.n)] = t.nr
    if m_packed:
        sizes[c_dims.index(info.m)] = t.mr
    if threads > 1:
        split = [0] * len(c_dims)
        split[c_dims.index(split_dim) if split_dim in c_dims else 0] = threads
        h, _ = s.tile_forall(h, num_threads=split)
    h, _ = s.tile_for(h, sizes)
    s.vectorize(h, [1] * len(c_dims) + ([t.mr, t.nr] if m_packed else [t.nr]))


def _cast(s: Script, h: str, op_name: str) -> str:
    c = s.fresh("cast")
    s.emit(f'{c} = transform.cast {h} : {s.ANY} to !transform.op<"{op_name}">')
    return c


def _split_columns(
    s: Script, h: str, info: OpInfo, opts: ScheduleOptions, t: MicroTile, route: str
) -> tuple[str, int | None, int | None]:
    """Unpacked routes (few rows): split the columns across threads (the small route's in
    whole strips); with symbolic sizes, a static batch loop (attention heads) with a block per
    thread. Returns the op, the loop that the threads split and each thread's share of it
    (None, None: not split)."""
    if not info.static:  # split by the batch, or not at all
        batch = symbolic_batch_split(info, opts)
        if batch is None or info.rows_version == "few":
            return h, None, None
        sizes = [0] * len(info.ranges)
        sizes[batch] = _ceil(info.ranges[batch], opts.threads)
        h, _ = s.tile_forall(h, tile_sizes=sizes)
        return h, batch, sizes[batch]
    threads = _threads_for(info, opts)
    n = info.size(info.n)
    if threads <= 1:
        return h, None, None
    sizes = [0] * len(info.ranges)
    split = info.n
    if n < threads * t.small_n:
        # Too few columns to share: a batch loop (attention heads) splits instead. A decode
        # step's scores @ V (4 key heads of 3 query rows x 1024 x 64) ran on one core.
        split = _split_batch(info, threads)
        # Without one, the dot route still splits the columns where each thread gets a step
        # of ROWS dot products (a step that does not depend on the vector width: a 1 x 130 x
        # 300 GEMV had split on AVX2, 65 outputs each, and ran on one core on AVX-512).
        if split is None and route == "dot" and n >= threads * ROWS:
            split = info.n
        if split is None:
            return h, None, None
    sizes[split] = _ceil(info.size(split), threads)
    if split == info.n and route == "small":
        sizes[split] = _ceil(sizes[split], t.small_n) * t.small_n
    h, _ = s.tile_forall(h, tile_sizes=sizes)
    return h, split, sizes[split]


def _split_batch(info: OpInfo, threads: int) -> int | None:
    """The static batch loop that `threads` share most evenly (ties: the outermost), if one
    has at least as many iterations as threads."""
    batch = [d for d in sorted(info.batch) if info.size(d) >= threads]
    if not batch:
        return None
    return min(batch, key=lambda d: (_ceil(info.size(d), threads) * threads - info.size(d), d))


def symbolic_batch_split(info: OpInfo, opts: ScheduleOptions) -> int | None:
    """The static batch loop (attention heads) that a symbolic matmul on an unpacked route
    splits across threads; None when it runs on one."""
    if info.pattern != "matmul" or info.static or opts.threads <= 1:
        return None
    if MatmulSchedule().route(info, tile_for(opts), opts) not in ("small", "dot"):
        return None
    return next((d for d in info.batch if (info.ranges[d] or 0) >= opts.threads), None)


def _schedule_small(s: Script, h: str, info: OpInfo, t: MicroTile, opts: ScheduleOptions) -> str:
    """Unpacked register tile R x 8L x 1: R rows of A times a [1, 8L] strip of B per step.
    A strip narrower than 8L takes several rows (`_small_tile`): each row's sums are one chain
    of dependent FMAs, and rows side by side give the FMA ports independent chains (12 heads of
    8 x 8 x 64 scores, one 8-lane row per step: 18 us; 8 rows: 8 us).
    Several rows in strips narrower than B go through K in blocks whose rows of B stay in L1
    for the next strip (`_small_k_block`)."""
    nloops = len(info.ranges)
    symbolic_n = info.ranges[info.n] is None
    n_tile = (
        4 * t.lanes if symbolic_n else min(t.small_n, _ceil(info.size(info.n), t.lanes) * t.lanes)
    )
    m = info.ranges[info.m]
    rows = 1
    if m is not None and not symbolic_n:
        rows, n_tile = _small_tile(m, info.size(info.n), n_tile // t.lanes, t)
    outer = [1 if d in info.batch else 0 for d in range(nloops)]
    k_block = _small_k_block(info, opts, n_tile) if rows > 1 else None
    if k_block is not None:
        outer[info.m], outer[info.k] = rows, k_block
        h, _ = s.tile_for(h, outer)
        outer = [0] * nloops
    outer[info.m], outer[info.n] = rows, n_tile
    h, loops = s.tile_for(h, outer)
    reg = [0] * nloops
    reg[info.k] = 1
    vec = [1] * nloops
    vec[info.m], vec[info.n] = rows, n_tile
    if not symbolic_n:
        h, _ = s.tile_for(h, reg)
        s.vectorize(h, vec)
        return f"matmul-small-{rows}x{n_tile}" + (f"-k{k_block}" if k_block else "")
    # A symbolic N: whole strips of 4 vectors, then one partial strip with masked loads and
    # stores (peeled: a mask on every strip ran Q @ K^T at 11 GFLOP/s, 8x slower).
    main, rest = s.peel(loops[sum(1 for d in range(info.n) if outer[d])])  # whole: static
    for part in (main, rest):
        tiled, _ = s.tile_for(s.match_generic(part), reg)
        s.vectorize(tiled, vec)
    return f"matmul-small-1x{n_tile}-peeled"


def _small_k_block(info: OpInfo, opts: ScheduleOptions, n_tile: int) -> int | None:
    """Rows of B per K block when the strips of `n_tile` columns do not cover B's width: the
    rows that fill half of L1 (a divisor of K), None when all of K fits. Strip by strip over the
    whole K, a decode step's 3 x 1024 x 64 scores @ V read V's 256-byte rows in halves 256
    bytes apart, from memory and then from L2: 1.13x the time of one full-width row at a time."""
    k, n = info.ranges[info.k], info.size(info.n)
    if n_tile >= n:
        return None
    l1 = int(opts.target.get("l1d-cache") or 32 << 10)
    cap = max(1, l1 // 2 // (4 * n))
    if k is None:  # a symbolic K: the last block is shorter
        return cap
    block = _divisor_tile(k, cap, 1)
    if block < min(cap, 8):  # no divisor near the cap (a prime K): a shorter last block
        block = cap
    return block if block < k else None


def _small_tile(m: int, n: int, vectors: int, t: MicroTile) -> tuple[int, int]:
    """(rows, columns) of the unpacked register tile for static `m` x `n` and a strip of up to
    `vectors` vector registers: one row and the whole strip, or several rows (a divisor of `m`)
    and fewer vectors (a divisor of `n`'s), whichever does the most FMAs per step of K within
    the MR x NR tile's accumulators (ties: the most rows). The rows of a tile share each vector
    of B that it loads: a decode step's 3 query rows per key head (grouped-query attention,
    scores @ V) took a 1 x 64 strip each and read V three times."""
    budget = max(vectors, t.mr * t.nr // t.lanes)
    total = _ceil(n, t.lanes)
    best = (1, vectors)
    for rows in (r for r in range(2, min(m, t.mr) + 1) if m % r == 0):
        v = max((d for d in _divisors(total) if d <= vectors and rows * d <= budget), default=0)
        if v and (rows * v, rows) > (best[0] * best[1], best[0]):
            best = (rows, v)
    return best[0], best[1] * t.lanes


def _symbolic_row_tiles(info: OpInfo, t: MicroTile) -> bool:
    """Symbolic rows times a [K, N] B at least a register tile wide: attention over a symbolic
    sequence (Q @ K^T with K^T materialized, scores @ V)."""
    if info.ranges[info.m] is not None:  # static rows: a whole register tile of them
        return info.ranges[info.n] is None and info.size(info.m) >= t.mr
    return info.ranges[info.n] is None or info.size(info.n) >= t.nr


def _schedule_symbolic_tiles(s: Script, h: str, info: OpInfo, t: MicroTile) -> str:
    """The MR x NR register tile straight on A's and B's rows, for symbolic rows (and columns):
    rows by MR, peeled (the remainder row by row), columns by NR, peeled when symbolic (the
    partial strip masked), K innermost. Neither operand is packed: a packed copy would need a
    buffer of dynamic size, and per head B is small (Q @ K^T: [64, n]; scores @ V: an NR-wide
    strip of V, 32 KB at n = 256). A 1 x 4L tile (`_schedule_small`) loaded 4 vectors of B
    for 4 FMAs and ran BERT-base's attention at 56-65 GFLOP/s at n = 256 (static: 180-230)."""
    nloops = len(info.ranges)
    rows = [1 if d in info.batch else 0 for d in range(nloops)]
    rows[info.m] = t.mr
    h, loops = s.tile_for(h, rows)
    m = info.ranges[info.m]
    if m is not None and m % t.mr == 0:  # static rows in whole tiles: nothing to peel
        parts = [(h, t.mr)]
    else:
        whole_rows, rest_rows = s.peel(loops[sum(1 for d in range(info.m) if rows[d])])
        parts = [(s.match_generic(whole_rows), t.mr), (s.match_generic(rest_rows), 1)]
    one_row = [0] * nloops
    one_row[info.m] = 1
    columns = [0] * nloops
    columns[info.n] = t.nr
    step = [0] * nloops
    step[info.k] = 1
    for g, mr in parts:
        if mr == 1:
            g, _ = s.tile_for(g, one_row)
        g, (n_loop,) = s.tile_for(g, columns)
        strips = [g]
        if info.ranges[info.n] is None or info.size(info.n) % t.nr:
            strips = [s.match_generic(p) for p in s.peel(n_loop)]
        for strip in strips:
            tiled, _ = s.tile_for(strip, step)
            vec = [1] * nloops
            vec[info.m], vec[info.n] = mr, t.nr
            s.vectorize(tiled, vec)
    return f"matmul-tiles-{t.mr}x{t.nr}+1x{t.nr}"


# ----------------------------------------------------------------------------------------------
# Direct convolution (unit stride): out[.., p, ..] += x[.., p + r, ..] * w[..]

# Conv register tile: partial sums in 3/4 of the vector registers (24 of 32 zmm), and at most one
# register's lanes of the output's contiguous axis per row.
CONV_ACCUMULATOR_SHARE = 0.75
BLOCKED_CONV_CHANNELS = 32  # output channels of a channel-blocked conv's register tile


def conv_register_budget(info: OpInfo, opts: ScheduleOptions):
    """(vector dim, row width, masked row, registers per row, filter dim, image-row dim,
    accumulator registers) of a convolution's register tile: what the rule and its tuning space
    share."""
    out, w_dims = info.operand_dims[2], next(d for d in info.operand_dims[:2] if d is not None)
    vec = out[-1]
    lanes = opts.lanes
    # One register per row: the widest exact divisor of the row up to one register (28 -> 14
    # on AVX-512; no masks: a masked partial tile has dynamic sizes and its sums are not
    # hoisted).
    width = _divisor_tile(info.ranges[vec], lanes, 1)
    masked = width < lanes // 2 and info.ranges[vec] > lanes  # e.g. 17: 16 + a masked 1
    if masked:
        width = lanes
    image = [d for d in out[1:-1] if d not in w_dims]
    filters = [d for d in out[:-1] if d in w_dims]
    # Filters the image does not depend on first: a tile of them reuses each loaded image row
    # (a grouped conv split into (group, filter in group) loops reads the image per group).
    read = _image_dims(info)
    filters = [d for d in filters if d not in read] or filters
    f_dim = max(filters, key=lambda d: info.ranges[d]) if filters else None
    y_dim = max(image, key=lambda d: info.ranges[d]) if image else None
    if vec in w_dims and image:  # channel-blocked (NCHW16c): the tile's rows run along the width
        y_dim = image[-1]
    accumulators = int(opts.registers * CONV_ACCUMULATOR_SHARE)
    return vec, width, masked, _ceil(width, lanes), f_dim, y_dim, accumulators


def _image_operand(info: OpInfo) -> int:
    """The operand number of a conv's image (the operand read through sums)."""
    return next(i for i, dims in enumerate(info.operand_dims[:2]) if dims is None)


def _image_map(info: OpInfo) -> ir.AffineMap:
    """The indexing map of a conv's image operand."""
    maps = ir.ArrayAttr(info.op.attributes["indexing_maps"])
    return ir.AffineMapAttr(maps[_image_operand(info)]).value


def _image_dims(info: OpInfo) -> set[int]:
    """The loops that a conv's image operand depends on."""
    return set().union(*(dims_of(e) for e in _image_map(info).results))


@register_schedule("conv")
class ConvSchedule(ScheduleRule):
    """Register tile = a block of filters x a block of image rows x the output's contiguous axis
    (up to one register); every reduction loop (channels, kernel window) is tiled to 1, which turns
    the tile into an outer-product update once unit dimensions are folded, so the partial sums
    stay in registers across the whole window (FMAs: `math_approx.contract_fma`). Threads split
    the batch, else the filters or image rows (`_conv_parallel_split`). The elementwise epilogue
    and earlier stride phases run in the same tiles (`absorbs`); the padded image's fill and
    copy split like the conv (`align`)."""

    def schedule(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> str:
        work = info.work + sum(m.work for _, m in info.fused if m.pattern == "conv")
        plan = conv_plan(info, opts, work)
        if plan is None:
            return "conv-fallback"
        if info.pad_fill_axis is not None:
            fill = s.match_pad_fill(info.tag)
            # the padded image's rank (a grouped conv's output has one more)
            rank = len(_image_map(info).results)
            split = [0] * rank
            split[info.pad_fill_axis] = opts.threads
            fill, _ = s.tile_forall(fill, num_threads=split)
            fill, loops = s.tile_for(fill, [1] * (rank - 1) + [0])
            s.keep_rolled(loops)
            s.vectorize(fill)
        name = f"conv-{plan.filters}x{plan.rows}x{plan.width}"
        if info.fused:
            _schedule_with_epilogue(s, h, info, plan)
            return name + "+epilogue"
        if plan.parallel is not None:
            split = [0] * len(info.ranges)
            split[plan.parallel[0]] = plan.parallel[1]
            h, forall = s.tile_forall(h, tile_sizes=split)
            # Each thread zeroes its own part (a fill cannot enter the tile loops through their
            # iter_args; with an epilogue it comes in as the conv's operand instead).
            s.fuse_init_fill(info.tag, forall)
        h, _ = s.tile_for(h, plan.outer)
        _vectorize_conv_tile(s, h, info, plan.vector_sizes)
        return name

    def after_schedule(self, func_op: ir.Operation) -> None:
        forward_tile_writes(func_op)

    def align(self, info: OpInfo, infos: list[OpInfo], opts: ScheduleOptions) -> None:
        """The copy that fills the interior of this conv's padded image splits the image axis
        that the conv's threads split (MobileNetV2's depthwise convs split rows; the copy had
        split channel blocks: on 2 threads a 14x14x384 one ran 3x slower than on 1)."""
        if not info.static:
            return
        by_op = {i.op: n for n, i in enumerate(infos)}
        work = sum(infos[t].work for t in _phase_chain(info, infos, by_op)) + info.work
        plan = conv_plan(info, opts, work)
        if plan is None or plan.parallel is None:
            return
        image, image_map = _image_operand(info), _image_map(info)
        axis = next(
            (a for a, e in enumerate(image_map.results) if plan.parallel[0] in dims_of(e)), None
        )
        copy = _pad_copy(info.op.operands[image])
        if axis is None or copy is None or copy not in by_op:
            return
        copy_info = infos[by_op[copy]]
        if copy_info.pattern != "elementwise" or len(copy_info.ranges) != len(image_map.results):
            return
        copy_info.thread_axis = axis
        # The fill under the padded image (its border): split alike, rather than left to one
        # thread before the parallel copy (a 114x114x96 image: 5 MB).
        base = copy.operands[1].owner
        if not isinstance(base, ir.Block) and base.operation.name == "tensor.extract_slice":
            fill = base.operation.operands[0].owner
            fill_op = None if isinstance(fill, ir.Block) else fill.operation
            # once: the phases of an unfused strided conv each read the same padded image
            if (
                fill_op is not None
                and fill_op.name == "linalg.fill"
                and PAD_FILL_ATTR not in fill_op.attributes
            ):
                i64 = ir.IntegerType.get_signless(64)
                fill_op.attributes[PAD_FILL_ATTR] = ir.IntegerAttr.get(i64, info.tag)
                info.pad_fill_axis = axis

    def absorbs(self, info: OpInfo, infos: list[OpInfo], opts: ScheduleOptions) -> list[int]:
        """The conv's epilogue: the elementwise op (bias, batch norm, residual add, ReLU) that
        reads its result as it is; with the convs of the same output's earlier stride phases
        (`phases.split_strided_convs`), when this is the last of them. The group is then one
        loop nest: each register tile starts at zero, sums every phase and tap, goes through
        the epilogue and is stored once. Separately, the output was zeroed on one thread, the
        sums were stored, and the epilogue read and wrote the whole output again: 3 of
        MobileNetV2's 112x112 layers ran at 1.1x on 2 threads, memory-bound."""
        if not _fusable_conv(info):
            return []
        by_op = {i.op: n for n, i in enumerate(infos)}
        chain = _phase_chain(info, infos, by_op)
        first = infos[chain[0]] if chain else info
        init = first.op.operands[len(first.op.operands) - 1]  # the first phase's: the zero fill
        if isinstance(init.owner, ir.Block) or init.owner.operation.name != "linalg.fill":
            return []
        if len(list(init.uses)) != 1:
            return []
        plan = conv_plan(info, opts, sum(infos[t].work for t in chain) + info.work)
        # Static tiles only: with an unequal thread split or a masked row the fused zero fill
        # has dynamic sizes, which do not vectorize.
        if plan is None or not plan.static_tiles(info):
            return []
        epilogue = _conv_epilogue(info, infos, by_op)
        if epilogue is None:
            return []
        return chain + [epilogue]


@dataclass
class ConvPlan:
    """A conv's register tile and thread split (`conv_plan`)."""

    filters: int  # filter (output channel or channel block) loop iterations per tile
    rows: int  # image row (or pixel) loop iterations per tile
    width: int  # lanes along the output's contiguous axis
    parallel: tuple[int, int] | None  # (loop, chunk) split across threads
    outer: list[int]  # the register tile, per loop (0 for reductions)
    vector_sizes: list[int] | None  # explicit sizes of a masked (partial) row

    def static_tiles(self, info: OpInfo) -> bool:
        """Every tile (and thread share) has static sizes: no masked row, an even split."""
        uneven = self.parallel is not None and info.ranges[self.parallel[0]] % self.parallel[1]
        return not uneven and self.vector_sizes is None


def conv_plan(info: OpInfo, opts: ScheduleOptions, work: int | None = None) -> ConvPlan | None:
    """The register tile and thread split the conv rule gives `info`'s op; None: it falls back
    (not f32, or a symbolic size other than the batch). `work`: that of the op and the earlier
    phases that accumulate into it (they run in its tiles), for the threads' size threshold."""
    if info.element_type != "f32":
        return None
    out = info.operand_dims[2]
    # A symbolic batch is fine: it is tiled by 1 (and split across threads by filters or
    # rows, never by the batch); any other symbolic size falls back.
    if any(r is None for d, r in enumerate(info.ranges) if d != out[0]):
        return None
    vec, width, masked, regs, f_dim, y_dim, accumulators = conv_register_budget(info, opts)
    # Register tile: F filters x R image rows x the vector. Each step loads R * regs input
    # vectors and broadcasts F weights for F * R * regs FMAs: pick the block with the most
    # FMAs per load within the accumulator budget. LeNet at 1 thread: 28x28 layer 6 x 4 x 14 lanes
    # 160 -> 56 us (was 7 rows x 16 masked lanes); 10x10 layer 4 x 5 x 10: 147 -> 110 us.
    # Channel-blocked layouts (the vector is a block of output channels): each step loads F
    # weight vectors and broadcasts R input pixels. At most 32 output channels per tile
    # (F <= 2 blocks of 16, F <= 4 of 8) keep the weights of a filter tile in L2 while the
    # tile sweeps every pixel (8 x 2 x 16 streamed 2.4 MB of weights per row pair on a
    # 256-channel 14x14 layer: 33 GFLOP/s; 2 x 7 reads them once per filter pair: 148). On
    # AVX2, 4 x 2 x 8 (8 sums, 6 loads) beats 2 x 2 x 8 (4 sums: FMA latency bound) there.
    blocked = vec in next(d for d in info.operand_dims[:2] if d is not None)  # the weight's
    best = (0.0, 1, 1)
    for f in _divisors(info.ranges[f_dim]) if f_dim is not None else [1]:
        if blocked and f * width > BLOCKED_CONV_CHANNELS:
            continue
        for r in _divisors(info.ranges[y_dim]) if y_dim is not None else [1]:
            if f * r * regs > accumulators:
                continue
            score = f * r * regs / (r * regs + f)
            best = max(best, (score, f, r))
    _, n_filters, rows = best
    # Tuned register tile (space.py): 0 keeps the choice above.
    tuned_f, tuned_r = int(opts.knob("conv.filters", 0)), int(opts.knob("conv.rows", 0))
    if tuned_f or tuned_r:
        n_filters, rows = tuned_f or n_filters, tuned_r or rows
        f_size = info.ranges[f_dim] if f_dim is not None else 1
        y_size = info.ranges[y_dim] if y_dim is not None else 1
        if f_size % n_filters or y_size % rows or n_filters * rows * regs > accumulators:
            raise ValueError(
                f"conv register tile {n_filters} filters x {rows} rows x {regs} registers does not "
                f"divide {f_size} x {y_size} or exceeds {accumulators} accumulators"
            )
    blocks = ((f_dim, n_filters), (y_dim, rows))
    parallel = _conv_parallel_split(info, opts, out[0], (vec, f_dim, y_dim), blocks, work)
    outer = [1 if t == "parallel" else 0 for t in info.iterators]
    outer[vec] = width
    tiled = []  # the tile's non-unit loops, in loop order
    for dim, size in blocks:
        if dim is not None:
            outer[dim] = size
            if size > 1:
                tiled.append((dim, size))
    vector_sizes = [size for _, size in sorted(tiled)] + [width] if masked else None
    return ConvPlan(n_filters, rows, width, parallel, outer, vector_sizes)


def _vectorize_conv_tile(s: Script, h: str, info: OpInfo, vector_sizes: list[int] | None) -> None:
    """Tile a register tile's reduction loops by 1 and vectorize: after folding unit dims the
    tile's loops are the non-unit ones (the blocks, then the vector)."""
    inner = [0 if t == "parallel" else 1 for t in info.iterators]
    h, loops = s.tile_for(h, inner)
    s.patterns("linalg.fold_unit_extent_dims_via_slices", target=loops[-1])
    s.vectorize(h, vector_sizes)


def _fusable_conv(info: OpInfo) -> bool:
    return (
        info.pattern == "conv"
        and info.element_type == "f32"
        and info.static
        and info.num_results == 1
    )


def _phase_chain(info: OpInfo, infos: list[OpInfo], by_op: dict) -> list[int]:
    """Tags of the earlier stride phases of `info`'s conv (`phases.split_strided_convs`): the
    convs whose single-use result is the next one's accumulator, first to last."""
    chain, op = [], info.op
    while True:
        init = op.operands[len(op.operands) - 1].owner
        if isinstance(init, ir.Block) or init.operation not in by_op:
            return chain
        prev = infos[by_op[init.operation]]
        if not _fusable_conv(prev) or len(list(prev.op.results[0].uses)) != 1:
            return chain
        chain.insert(0, by_op[init.operation])
        op = prev.op


def _pad_copy(image: ir.Value) -> ir.Operation | None:
    """The `linalg.copy` that wrote the interior of a padded image (`pad.raise_pads`), seen
    through the strided views of a phase-split conv; None if the image is not one."""
    while not isinstance(image.owner, ir.Block):
        op = image.owner.operation
        if op.name == "tensor.extract_slice":
            image = op.operands[0]
        elif op.name == "tensor.insert_slice":
            source = op.operands[0].owner
            if isinstance(source, ir.Block) or source.operation.name != "linalg.copy":
                return None
            return source.operation
        else:
            return None
    return None


def _conv_epilogue(info: OpInfo, infos: list[OpInfo], by_op: dict) -> int | None:
    """The tag of the elementwise op that is the conv's result's only user and reads it with
    its own output's (identity) map, writing a tensor of the same type; else None."""
    result = info.op.results[0]
    uses = list(result.uses)
    if len(uses) != 1:
        return None
    user = uses[0].owner.operation
    e = infos[by_op[user]] if user in by_op else None
    if e is None or e.pattern != "elementwise" or user.name != "linalg.generic":
        return None
    n_in = len(user.operands) - 1
    if uses[0].operand_number >= n_in or e.num_results != 1:
        return None
    if user.results[0].type != result.type:
        return None
    rank = ir.RankedTensorType(result.type).rank
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(user.attributes["indexing_maps"])]
    identity = ir.AffineMap.get_identity(rank)
    if len(e.ranges) != rank or maps[-1] != identity or maps[uses[0].operand_number] != identity:
        return None
    return by_op[user]


def _schedule_with_epilogue(s: Script, h: str, info: OpInfo, plan: ConvPlan) -> None:
    """The conv `h` (and its earlier phases) computed inside the tile loops of its epilogue:
    the epilogue is split across threads and tiled by the conv's register tile (its loops are
    the conv's output axes), the convs and their zero fill are fused into the innermost tile
    loop, then each conv's tile is vectorized like an unfused one and the epilogue's tile on
    the vectors it produced."""
    out = info.operand_dims[2]
    e_h, _ = info.fused[-1]
    # the producers, last first (each one's tile reads the next's), then the zero fill
    handles = [h] + [m for m, _ in reversed(info.fused[:-1])]
    handles.append(s.match_init_fill(info.fused[0][1].tag if len(info.fused) > 1 else info.tag))

    def fuse_into(loop: str) -> None:
        for i, producer in enumerate(handles):
            handles[i], loop = s.fuse_into(producer, loop)

    if plan.parallel is not None:
        split = [0] * len(out)
        split[out.index(plan.parallel[0])] = plan.parallel[1]
        e_h, forall = s.tile_forall(e_h, tile_sizes=split)
        fuse_into(forall)
    e_h, loops = s.tile_for(e_h, [plan.outer[d] for d in out])  # the register tile, per axis
    fuse_into(loops[-1])
    s.vectorize(handles[-1])  # the fill
    convs = [info] + [m for _, m in reversed(info.fused[:-1])]
    for conv, conv_info in zip(handles, convs):
        _vectorize_conv_tile(s, conv, conv_info, None)
    s.vectorize(e_h)


def _conv_parallel_split(info, opts, batch_dim, tile_dims, blocks, work=None):
    """(dim, chunk) of the threads' split: the batch when it has a chunk per thread, else the
    filters, else the register tile's image rows, in chunks of whole register tiles, else
    another output axis the tile walks one at a time (the image height of a channel-blocked
    conv), else the longest such axis in unequal chunks. A batch of 1 left the second core idle
    on ResNet-18; 16 or 24 output channels (one or three blocks) left it idle on MobileNetV2's
    112x112 and 56x56 layers until the height was split too. `work` (default the op's own)
    is compared with the size threshold: a strided conv's phases split across threads as one
    (each of a 3x3 / 2 depthwise conv's four was below it: the group ran on one thread)."""
    if opts.threads <= 1 or (work or info.work) < opts.min_parallel_work:
        return None
    t = opts.threads
    dynamic_batch = info.ranges[batch_dim] is None
    if not dynamic_batch and batch_dim not in tile_dims and info.ranges[batch_dim] % t == 0:
        return batch_dim, info.ranges[batch_dim] // t
    # Axes tiled by 1 inside a thread's chunk: an unequal last chunk only shortens a loop.
    others = [d for d in info.operand_dims[2][1:] if d not in tile_dims]
    even_others = [d for d in others if info.ranges[d] % t == 0]
    if even_others and _weights_elements(info) <= _elements(info, info.operand_dims[2]):
        return even_others[0], info.ranges[even_others[0]] // t
    for dim, block in blocks:
        if dim is not None and info.ranges[dim] % (t * block) == 0:
            return dim, info.ranges[dim] // t
    if even_others:
        return even_others[0], info.ranges[even_others[0]] // t
    if not dynamic_batch and batch_dim not in tile_dims and info.ranges[batch_dim] >= t:
        return batch_dim, _ceil(info.ranges[batch_dim], t)
    longest = max(others, key=lambda d: info.ranges[d], default=None)
    if longest is not None and info.ranges[longest] >= t:
        return longest, _ceil(info.ranges[longest], t)
    return None


def _elements(info, dims) -> int:
    """The product of the loop ranges `dims`, a symbolic one (the batch) counted as 1."""
    total = 1
    for d in dims:
        total *= info.ranges[d] or 1
    return total


def _weights_elements(info) -> int:
    """Elements of a conv's filter operand (the input operand whose axes are all loops)."""
    w_dims = next(d for d in info.operand_dims[:2] if d is not None)
    return _elements(info, w_dims)


# ----------------------------------------------------------------------------------------------
# Constant weights: pack once at compile time


@dataclass(frozen=True)
class PackedLayout:
    """How `pack_weight` laid out a weight: `packed[.., j, k, jj] = w[.., k, j * nr + jj]` (or
    `w[.., j * nr + jj, k]` when `transposed`), zero where `j * nr + jj >= n`."""

    shape: tuple[int, ...]  # the original weight shape
    transposed: bool  # the original is [.., N, K] (dense / nn.Linear) rather than [.., K, N]
    nr: int  # panel width (columns of the product per panel)

    @property
    def n(self) -> int:
        return self.shape[-2] if self.transposed else self.shape[-1]

    @property
    def k(self) -> int:
        return self.shape[-1] if self.transposed else self.shape[-2]

    @property
    def packed_shape(self) -> tuple[int, ...]:
        return (*self.shape[:-2], _ceil(self.n, self.nr), self.k, self.nr)

    @property
    def inner_dims_pos(self) -> list[int]:
        """`linalg.unpack` attributes that turn the packed array back into the weight."""
        rank = len(self.shape)
        return [rank - 2] if self.transposed else [rank - 1]

    @property
    def outer_dims_perm(self) -> list[int] | None:
        rank = len(self.shape)
        if self.transposed:
            return None
        return list(range(rank - 2)) + [rank - 1, rank - 2]


def pack_weight(w: np.ndarray, *, transposed: bool, nr: int) -> tuple[np.ndarray, PackedLayout]:
    """Pack a constant matmul operand B into the panels the packed route reads.

    Parameters
    ----------
    w : the weight, [.., K, N] (`transposed=False`, `x @ w`) or [.., N, K] (`transposed=True`,
        `x @ w.T`, TE's `topi.nn.dense` / `nn.Linear`).
    nr : panel width: the schedule's `micro_tile(target).nr`.

    Returns
    -------
    (packed, layout): a C-contiguous [.., ceil(N/nr), K, nr] array, zero padded, and its layout.

    Example
    -------
    >>> packed, layout = pack_weight(w, transposed=True, nr=micro_tile(target).nr)
    >>> use_prepacked_weight(prim_func, 1, layout)   # the PrimFunc now takes `packed` as arg 1
    """
    layout = PackedLayout(tuple(w.shape), transposed, nr)
    wt = w if transposed else np.swapaxes(w, -1, -2)  # [.., N, K] (a view)
    # Written into its final (aligned) memory panel by panel: no padded or transposed copy
    packed = aligned_empty(layout.packed_shape, w.dtype)
    panels = np.swapaxes(packed, -1, -2)  # [.., N / nr, nr, K], a view of `packed`
    full, n, k = layout.n // nr, layout.n, layout.k
    panels[..., :full, :, :] = wt[..., : full * nr, :].reshape(*wt.shape[:-2], full, nr, k)
    if full * nr < n:  # the last panel: the rest of the columns, then zeros
        panels[..., full, : n - full * nr, :] = wt[..., full * nr :, :]
        panels[..., full, n - full * nr :, :] = 0
    return packed, layout


def use_prepacked_weight(func_op: ir.Operation, arg_index: int, layout: PackedLayout) -> None:
    """Make PrimFunc argument `arg_index` (a weight of `layout.shape`) take the packed array.

    The argument's type becomes `layout.packed_shape` and a `linalg.unpack` marked
    `relax.prepacked` rebuilds the weight for the body, so the function stays correct without a
    schedule; the matmul schedule folds its B pack into that unpack and reads the panels directly.
    """
    block = func_op.regions[0].blocks[0]
    arg = block.arguments[arg_index]
    old_type = ir.RankedTensorType(arg.type)
    if tuple(old_type.shape) != layout.shape:
        raise ValueError(
            f"use_prepacked_weight: expected argument {arg_index} of shape {layout.shape}, got {tuple(old_type.shape)}"
        )
    with func_op.context, func_op.location:
        packed_type = ir.RankedTensorType.get(list(layout.packed_shape), old_type.element_type)
        with ir.InsertionPoint.at_block_begin(block):
            empty = tensor.EmptyOp(list(layout.shape), old_type.element_type)
            unpack = linalg.UnPackOp(
                arg,
                empty.result,
                layout.inner_dims_pos,
                [],
                [layout.nr],
                outer_dims_perm=layout.outer_dims_perm,
            ).operation
        arg.replace_all_uses_except(unpack.results[0], unpack)
        arg.set_type(packed_type)
        unpack.attributes[PREPACKED_ATTR] = ir.UnitAttr.get()
        ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
        inputs = list(ftype.inputs)
        inputs[arg_index] = packed_type
        func_op.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(inputs, list(ftype.results))
        )


# ----------------------------------------------------------------------------------------------
# Accumulating in the destination


ZERO_START_ATTR = "relax.zero_start"  # on the zero fill of an accumulator whose tiles start at 0
INPLACE_ATTR = "relax.c_inplace"  # on a packed contraction whose C panels are views of C
PREFETCH_NEXT_ATTR = "relax.prefetch_next_block"  # on a rows-route loop over B's column blocks
C_VIEW_ATTR = "relax.c_view"  # on a rows-route contraction whose consumers read C as a reshape


def _c_view(info: OpInfo, t: MicroTile) -> bool:
    """Whether the rows route's C goes to its consumers as a reshape of the panels
    (`view_accumulators`): NR divides N, N is C's last axis (the panels [.., M, N/NR, NR] are
    then C's own row-major layout, symbolic rows included) and every consumer is a generic that
    can read it (`_reads_view`). Its copy of C is then not a pass of its own: the epilogue reads
    the panels where the register tiles left them. A C that is the kernel's result keeps its
    (parallel) copy into the output. Symbolic rows gain most: their parallel copy split the
    copy across threads at every size (S2 at n = 32 on 2 threads: 1.06-1.12 -> 1.01-1.05x the
    static build)."""
    c_dims = info.operand_dims[2]
    if info.size(info.n) % t.nr or not c_dims or c_dims[-1] != info.n:
        return False
    uses = list(info.op.results[0].uses)
    return bool(uses) and all(_reads_view(u.owner.operation, u.operand_number) for u in uses)


def _reads_view(op: ir.Operation, operand: int) -> bool:
    """Can the generic `op` take C's view as its `operand`: any input, or the init of a
    one-result elementwise op in place on C (which `_read_into` turns into an input)?"""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return False
    if operand < len(op.operands) - 1:
        return True
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    return all("parallel" in i for i in iterators)


def view_accumulators(func_op: ir.Operation) -> None:
    """`unpack(C panels)` -> `collapse_shape(C panels)` for contractions marked C_VIEW_ATTR
    (`_c_view`): [.., M, N/NR, NR] -> [.., M, N], a view."""
    for op in _marked(func_op, "linalg.generic", C_VIEW_ATTR):
        del op.attributes[C_VIEW_ATTR]
        uses = list(op.results[0].uses)
        unpack = uses[0].owner.operation if len(uses) == 1 else None
        packed = ir.RankedTensorType(op.results[0].type)
        if (
            unpack is None
            or unpack.name != "linalg.unpack"
            or "outer_dims_perm" in unpack.attributes
            or list(ir.DenseI64ArrayAttr(unpack.attributes["inner_dims_pos"])) != [packed.rank - 2]
        ):
            raise AssertionError(f"matmul C view: unexpected consumer {unpack}")  # see _c_view
        dest = unpack.operands[1]
        groups = [[i] for i in range(packed.rank - 2)] + [[packed.rank - 2, packed.rank - 1]]
        with ir.InsertionPoint(unpack), unpack.location:
            view = tensor.CollapseShapeOp(dest.type, op.results[0], reassociation(groups)).result
        unpack.results[0].replace_all_uses_with(view)
        unpack.erase()
        in_place = []  # epilogues in place on C (once each: C may also be one's input)
        for use in view.uses:
            user = use.owner.operation
            if use.operand_number == len(user.operands) - 1 and user not in in_place:
                in_place.append(user)
        for user in in_place:
            _read_into(user, dest)
        owner = dest.owner
        if not isinstance(owner, ir.Block) and owner.name == "tensor.empty" and not list(dest.uses):
            owner.erase()


def _read_into(op: ir.Operation, dest: ir.Value) -> None:
    """The single-result generic `op`, which updates its init in place, as one that reads the
    init as a last input and writes `dest`: an epilogue in place on C's panels would leave its
    result there, and the kernel then copied all of it (serially) into the output."""
    n_in = len(op.operands) - 1
    maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
    types = [a.type for a in op.regions[0].blocks[0].arguments]
    # the init's element is now the last input's (argument n_in); the new init's is unread
    new = rebuild_generic(
        op, dest.type, list(op.operands), [dest], maps + [maps[n_in]], types + [types[n_in]]
    )
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()


def _inplace_c(info: OpInfo, opts: ScheduleOptions, t: MicroTile) -> bool:
    """Whether the packed route writes its MR x NR tiles straight into C (`inplace_accumulators`),
    the `matmul.c_layout` knob: when MR and NR divide M and N, C is [M/MR, MR, N/NR, NR] by a
    reshape alone, so the packed accumulator and its unpack pass are not needed. Not the
    default: the tiles then load and store MR rows a row of C apart instead of one contiguous
    block, and on the machines measured (Zen 4/5 with AVX-512 and AVX2) the two forms ran
    within noise of each other (W3, BERT-base's GEMMs, the whole BERT-base)."""
    layout = str(opts.knob("matmul.c_layout", "packed"))
    if layout not in C_LAYOUTS:
        raise ValueError(f"matmul.c_layout={layout}: expected one of {', '.join(C_LAYOUTS)}")
    if layout != "inplace" or not info.static:
        return False
    return info.size(info.m) % t.mr == 0 and info.size(info.n) % t.nr == 0


def inplace_accumulators(func_op: ir.Operation) -> None:
    """`unpack(contract(A', B', fill(empty packed)), C)` -> `collapse(contract(A', B',
    expand(fill(C))))` for contractions marked INPLACE_ATTR: the contraction's C map goes from
    the packed [.., M/MR, N/NR, MR, NR] order to the expanded [.., M/MR, MR, N/NR, NR] one, a
    view of C itself, so the register tiles load and store C where it lives."""
    for op in _marked(func_op, "linalg.generic", INPLACE_ATTR):
        _accumulate_in_place(op)


def _marked(func_op: ir.Operation, name: str, attr: str) -> list[ir.Operation]:
    """The ops `name` in `func_op` that carry the attribute `attr`."""
    found = []

    def visit(op):
        op = op.operation
        if op.name == name and attr in op.attributes:
            found.append(op)
        return ir.WalkResult.ADVANCE

    func_op.walk(visit)
    return found


def _accumulate_in_place(op: ir.Operation) -> None:
    del op.attributes[INPLACE_ATTR]
    uses = list(op.results[0].uses)
    init = op.operands[len(op.operands) - 1].owner
    if len(uses) != 1 or uses[0].owner.name != "linalg.unpack":
        return  # not what `prepare` leaves: the unpack is lowered as it is (correct, slower)
    # The accumulator starts as zeros (a packed fill) or as a packed tensor (C += A @ B).
    if init.name not in ("linalg.fill", "linalg.pack"):
        return
    unpack = uses[0].owner
    if "outer_dims_perm" in unpack.attributes or (
        init.name == "linalg.pack" and "outer_dims_perm" in init.attributes
    ):
        return
    inner = list(ir.DenseI64ArrayAttr(unpack.attributes["inner_dims_pos"]))
    dest = unpack.operands[1]
    dest_type = ir.RankedTensorType(dest.type)
    packed_shape = ir.RankedTensorType(op.results[0].type).shape
    rank = dest_type.rank
    groups, shape, order = [], [], []  # order: packed C axis of each expanded axis
    for i in range(rank):
        groups.append([len(shape)])
        shape.append(packed_shape[i])
        order.append(i)
        if i in inner:
            groups[-1].append(len(shape))
            shape.append(packed_shape[rank + inner.index(i)])
            order.append(rank + inner.index(i))
    if int(np.prod(shape)) != int(np.prod(dest_type.shape)):
        return  # padded: C is not a reshape of the panels
    n_in = len(op.operands) - 1
    maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
    c_map = ir.AffineMapAttr(maps[n_in]).value
    nloops = c_map.n_dims
    exprs = [c_map.results[j] for j in order]
    new_c_map = ir.AffineMapAttr.get(ir.AffineMap.get(nloops, 0, exprs))
    elem = dest_type.element_type
    with ir.InsertionPoint(op), op.location:
        if init.name == "linalg.fill":
            start = linalg.fill(init.operands[0], outs=[dest])
        else:
            start = init.operands[0]
        expanded_type = ir.RankedTensorType.get(shape, elem)
        view = tensor.ExpandShapeOp(expanded_type, start, reassociation(groups), [], shape).result
    types = [a.type for a in op.regions[0].blocks[0].arguments]
    new = rebuild_generic(
        op, expanded_type, list(op.operands)[:n_in], [view], maps[:n_in] + [new_c_map], types
    )
    with ir.InsertionPoint(unpack), unpack.location:
        result = tensor.CollapseShapeOp(dest_type, new.results[0], reassociation(groups)).result
    unpack.results[0].replace_all_uses_with(result)
    unpack.erase()
    op.erase()
    if not list(init.results[0].uses):
        empty = init.operands[1].owner
        init.erase()
        if empty.name == "tensor.empty" and not list(empty.results[0].uses):
            empty.erase()


def zero_start_accumulators(func_op: ir.Operation) -> None:
    """The register tiles of a `rows` matmul start from zero vectors instead of reading their
    C tile from a zero-filled accumulator, and the fill goes (ZERO_START_ATTR: each C tile is
    read once, by its first K step, before any tile writes it; K is never split on this route).
    The fill was a memset of all of C at every call: W3 at 2 threads 2-4% faster with it gone,
    BERT-base 1-2%.

    A tile's read is one that starts a K loop's accumulator (its vector, reshaped or not, is
    the initial value of an `scf.for`), of a tensor that leads back to the fill through slices
    and loop-carried values. The copy of C after the loops reads the same tensors, but into
    plain stores; an epilogue that reads C's panels (`view_accumulators`) does so after the
    last loop that holds a tile's first read, when every tile is done."""
    for fill in _marked(func_op, "linalg.fill", ZERO_START_ATTR):
        del fill.attributes[ZERO_START_ATTR]
        if constant_float(fill.operands[0]) != 0.0:
            continue
        found = []  # (read, whether it leads to the fill, whether it starts a K loop)

        def find(op, target=fill.results[0], found=found):
            op = op.operation
            if op.name == "vector.transfer_read":
                leads = _leads_to(op.operands[0], target)
                if leads is not False:
                    found.append((op, leads, bool(leads) and _starts_a_loop(op.results[0])))
            return ir.WalkResult.ADVANCE

        func_op.walk(find)
        reads = [op for op, _, starts in found if starts]
        if not reads:
            continue
        # Every tile's first read is in these loops beside the fill, which compute all of C;
        # reads after the last of them see finished values (an epilogue reading C's panels).
        block = fill.block
        order = {o.operation: i for i, o in enumerate(block.operations)}
        place = [order.get(_in_block(op, block), -1) for op, _, _ in found]
        last = max(p for p, (_, _, starts) in zip(place, found) if starts)
        if any(
            leads is None or (p <= last and not _copied_out(op.results[0], fill.results[0]))
            for p, (op, leads, starts) in zip(place, found)
            if not starts
        ):
            continue  # a read we cannot place (a masked one): keep the fill
        for read in reads:
            vt = ir.VectorType(read.results[0].type)
            with ir.InsertionPoint(read), read.location:
                zero = arith.ConstantOp(
                    vt, ir.DenseElementsAttr.get_splat(vt, ir.FloatAttr.get(vt.element_type, 0.0))
                )
            read.results[0].replace_all_uses_with(zero.result)
            read.erase()
        fill.results[0].replace_all_uses_with(fill.operands[1])
        fill.erase()


def _in_block(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
    """The ancestor of `op` (or `op`) that lies in `block`; None if `op` is not under it."""
    while op.block != block:
        op = op.parent
        if op is None or op.name == "func.func":
            return None
    return op


def _starts_a_loop(value: ir.Value) -> bool:
    """Is `value` (through shape casts) the initial value of an `scf.for`'s iteration argument,
    and only that?"""
    uses = list(value.uses)
    if not uses:
        return False
    for use in uses:
        owner = use.owner.operation
        if owner.name == "vector.shape_cast":
            if not _starts_a_loop(owner.results[0]):
                return False
        elif owner.name != "scf.for" or use.operand_number < 3:
            return False
    return True


def _copied_out(value: ir.Value, target: ir.Value) -> bool:
    """Is `value` (through shape casts) only stored, into tensors that do not lead to `target`:
    the copy of the finished C?"""
    for use in value.uses:
        owner = use.owner.operation
        if owner.name == "vector.shape_cast":
            if not _copied_out(owner.results[0], target):
                return False
        elif (
            owner.name != "vector.transfer_write"
            or use.operand_number != 0
            or _leads_to(owner.operands[1], target) is not False
        ):
            return False
    return True


_PASS_THROUGH = {  # a tensor result and the operand whose elements it holds where not written
    "tensor.extract_slice": 0,
    "tensor.insert_slice": 1,
    "vector.transfer_write": 1,
    "tensor.expand_shape": 0,
    "tensor.collapse_shape": 0,
}


def _leads_to(value: ir.Value, target: ir.Value) -> bool | None:
    """Does `value` hold elements of `target`, through slices, writes of parts, reshapes and
    loop-carried values? None where it cannot tell (an op it does not know)."""
    for _ in range(256):
        if value == target:
            return True
        owner = value.owner
        if isinstance(owner, ir.Block):
            parent = owner.owner.operation
            if parent.name == "func.func":
                return False
            n_carried = len(parent.results)
            first = len(owner.arguments) - n_carried  # loop indices first, then carried values
            if parent.name not in ("scf.for", "scf.forall") or value.arg_number < first:
                return None
            value = parent.operands[len(parent.operands) - n_carried + value.arg_number - first]
            continue
        op = owner.operation
        if op.name in ("tensor.empty", "linalg.fill", "arith.constant", "ub.poison"):
            return False  # (a fill that is not `target` holds values of its own)
        if op.name in _PASS_THROUGH:
            value = op.operands[_PASS_THROUGH[op.name]]
        elif op.name in ("scf.for", "scf.forall"):
            value = op.operands[len(op.operands) - len(op.results) + value.result_number]
        else:
            return None
    return None
