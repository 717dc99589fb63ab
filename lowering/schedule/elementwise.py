"""Schedules for elementwise / injective ops (all loops parallel) and the do-nothing fallback."""

from __future__ import annotations

from lowering.schedule.common import (
    VECTORS_PER_STEP,
    OpInfo,
    ScheduleOptions,
    ScheduleRule,
    Script,
    innermost_loop,
    register_schedule,
    split_across_threads,
    split_threads,
)

# Per target, in f32 lanes L of one vector register: a step along the innermost loop covers
# VECTORS_PER_STEP registers (masked at the edge); a transposing copy goes by L x L tiles (L rows
# of one register, a shuffle network).


@register_schedule("elementwise")
class ElementwiseSchedule(ScheduleRule):
    """Innermost loop in vectors of up to 4 registers (masked tail), outer loops one by one; the
    outermost loop split across threads when the op is large."""

    def schedule(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> str:
        if not info.ranges:
            return "fallback"
        lanes = opts.lanes
        vector = VECTORS_PER_STEP * lanes
        inner = innermost_loop(info)
        size = info.ranges[inner]
        # Rows that fit one step take their exact width: masked rows of 10 in 16 lanes, updated
        # in place, stall on store-to-load forwarding from the row before (LeNet's conv epilogue
        # over 32x16x10x10: 40 -> 5 us); longer ones go by whole steps (a masked tail).
        width = vector if size is None else min(size, vector)
        if info.traps:
            # Masked-off lanes would divide by the padding (0): integer division traps (SIGFPE).
            # Only vectors that fit the loop exactly.
            if size is None:
                return "fallback"
            width = next(w for w in range(min(vector, size), 0, -1) if size % w == 0)
            if width == 1:
                return "fallback"
        if split_across_threads(info, opts, opts.min_parallel_elements):
            loops = [d for d in range(len(info.ranges)) if d != inner] or [inner]
            if info.thread_axis is not None:
                loops = [info.thread_axis]
            h, _, _ = split_threads(s, h, info, loops, opts.threads)
        sizes = [1] * len(info.ranges)
        sizes[inner] = width
        across = _transposed_loop(info, inner)
        if across is not None and info.static and not info.traps:
            # A transpose: square tiles, read along the input's rows and written along the
            # output's (a shuffle network in registers) instead of one gathered lane per element.
            sizes[inner] = _divisor(info.ranges[inner], lanes)
            sizes[across] = _divisor(info.ranges[across], lanes)
            if min(sizes[inner], sizes[across]) >= 4:
                h, _ = s.tile_for(h, sizes)
                s.vectorize(h, sizes)
                return f"transpose-{sizes[across]}x{sizes[inner]}"
            sizes = [1] * len(info.ranges)
            sizes[inner] = width
        if across is not None and size is None and info.ranges[across] and not info.traps:
            done = _symbolic_transpose(s, h, info, inner, across, lanes)
            if done:
                return done
        h, loops = s.tile_for(h, sizes)
        # Each step is a whole vector (up to 4 registers) of a memory-bound op: LLVM's full
        # unrolling of short loops (DenseNet's concat parts: 2 x 7 x 7 steps, 98 copies of the
        # body) bought nothing at run time and made 77% of DenseNet-121's LLVM IR.
        if size is None or size % width:
            # Whole steps, then the partial one masked: a row that the steps do not divide (or
            # a symbolic one) was masked at every step, a microcoded masked store each on AVX2.
            whole, rest = s.peel(loops[inner])
            for part in (whole, rest):
                s.vectorize(s.match_generic(part), sizes)
            s.keep_rolled([loop for d, loop in enumerate(loops) if d != inner] + [whole])
            return f"elementwise-{width}-peeled"
        s.vectorize(h, sizes)
        s.keep_rolled(loops)
        return f"elementwise-{width}"


@register_schedule("gather")
class GatherSchedule(ScheduleRule):
    """An elementwise op that reads its inputs at computed indices, contiguous along one loop
    (`common._row_gather`): that loop goes innermost and is vectorized, each read one vector
    load, the others step one by one. Left to itself LLVM vectorized a blocked max pool's
    16-lane rows but not its 8-lane ones (AVX2: a scalar NaN-aware maximum per lane, 4 ms of
    ResNet-18). MLIR reads contiguously only along the op's last loop, hence the interchange
    when the reads' loop is not the output's innermost (a pool fused with its NCHW copy)."""

    def schedule(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> str:
        along = info.gather_loop
        if not info.static or info.traps:
            return "fallback"
        size = info.ranges[along]
        width = min(size, VECTORS_PER_STEP * opts.lanes)
        width = next(w for w in range(width, 0, -1) if size % w == 0)
        if width == 1:
            return "fallback"  # nothing to vectorize (and MLIR wants one non-unit loop)
        others = [d for d in range(len(info.ranges)) if d != along]
        if split_across_threads(info, opts, opts.min_parallel_elements):
            h, _, _ = split_threads(s, h, info, others or [along], opts.threads)
        if along != len(info.ranges) - 1:
            h = s.interchange(h, others + [along])
        sizes = [1] * len(info.ranges)
        sizes[-1] = width
        h, _ = s.tile_for(h, sizes)
        s.vectorize(h, sizes, extracts=True)
        return f"gather-{width}"


def _symbolic_transpose(
    s: Script, h: str, info: OpInfo, inner: int, across: int, lanes: int
) -> str | None:
    """A transpose whose output rows run along a symbolic axis (K^T over a symbolic sequence:
    [heads, n, 64] -> [heads, 64, n]): L x L tiles while whole rows of L remain, then the last
    partial row one element at a time, each a vector read along the input's static rows. Masked
    64-lane steps along `n` read each lane on its own (a gather under a mask): BERT's K^T at
    n = 1 took 16 us for 768 elements."""
    block = _divisor(info.ranges[across], lanes)
    if block < 4:
        return None
    sizes = [1] * len(info.ranges)
    sizes[inner], sizes[across] = lanes, block
    _, loops = s.tile_for(h, sizes)
    whole, rest = s.peel(loops[inner])
    s.vectorize(s.match_generic(whole), sizes)
    one = [0] * len(info.ranges)
    one[inner] = 1
    tail, tail_loops = s.tile_for(s.match_generic(rest), one)
    sizes[inner] = 1
    s.vectorize(tail, sizes)
    outer = [loop for d, loop in enumerate(loops) if d != inner]
    s.keep_rolled([*outer, whole, rest, *tail_loops])
    return f"transpose-{block}x{lanes}-peeled"


def _divisor(total: int, cap: int) -> int:
    return next(t for t in range(min(cap, total), 0, -1) if total % t == 0)


def _transposed_loop(info: OpInfo, inner: int) -> int | None:
    """The innermost loop of an input whose last axis is not walked by `inner` (a transpose),
    when that loop also indexes the output."""
    out_dims = info.operand_dims[-1] or []
    for dims in info.operand_dims[:-1]:
        if not dims or dims[-1] == inner or dims[-1] not in out_dims or inner not in dims:
            continue
        if (info.ranges[dims[-1]] or 0) > 1:
            return dims[-1]
    return None


@register_schedule("fallback")
class FallbackSchedule(ScheduleRule):
    """Leave the op to convert-linalg-to-loops: correct for anything, dynamic shapes included."""

    def schedule(self, s: Script, h: str, info: OpInfo, opts: ScheduleOptions) -> str:
        return "fallback"
