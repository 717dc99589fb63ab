"""The contraction kernel of the GPU Matmul rule: block tiles staged through shared memory,
register tiles per thread, elementwise epilogues applied in registers.

Any linalg contraction takes it: matmul, batch matmul, and convolution as an implicit GEMM. The
loops of the contraction fall into four roles read from its indexing maps: batch (indexes both
operands), M (only A), N (only B) and K (reduced). M, N and K may each be several loops (a
convolution's M is batch x height x width of the output, its K channels x window), so the kernel
walks linear M / N / K indices and turns them back into loop indices to address each operand
through its own map: strides, windows and transposed operands need no copy.

Per block (BM x BN outputs, T threads), for each step of BK along K:
  every thread loads BM*BK/T elements of A and BN*BK/T of B into shared memory (coalesced along
  the operand's contiguous axis, in 16-byte vectors where that axis allows; zeros past the
  edges; a padded input read through its padding), barrier, each thread accumulates its TM x TN
  register tile from BK rows of both tiles (vector-width groups spread over the tile, so shared
  reads are conflict-free), barrier. With 16-bit operands (and float32 where the target allows
  TF32) each warp computes its tile on tensor cores instead (`_build_mma`).
The next tile's elements are read from global memory into registers while this one is
computed (software pipelining); on tensor cores, where both operands stage in 16-byte vectors,
cp.async copies them straight into a ring of shared tiles instead, several tiles ahead
(`_async_pipeline`). Then each thread applies the epilogue (the elementwise ops that
consume the result, cloned onto its registers) and stores its outputs. The payloads are cloned
as written, so the accumulation type and any casts are the op's own. When even the smallest tile
leaves the GPU half idle and K is long, K is split over more blocks: they store partial sums and
a second kernel adds them, then applies the epilogue (split-K).

Two halves, as the rest of the GPU pipeline: `plan` picks and tags the ops at the tensor level
(the Matmul rule of `relax-schedule-gpu`), and `relax-gpu-contract` writes the kernel after
bufferization, in place of the tagged ops.
"""

from __future__ import annotations

import contextlib
import math as pymath
from dataclasses import dataclass, field, replace

from mlir import ir
from mlir.dialects import arith, builtin, gpu, llvm, math, memref, nvgpu, nvvm, scf, vector

from lowering.gpu import emit
from lowering.registry import PassError, register_pass
from lowering.schedule.common import is_mul_add, reassociation

CONTRACT_ATTR = "relax.gpu_contract"  # on the contraction: its config name
INIT_ATTR = "relax.gpu_contract_init"  # on the fill whose constant starts the accumulators
EPILOGUE_ATTR = "relax.gpu_contract_epilogue"  # on each consumer: [position, chained operand]
PAD_ATTR = "relax.gpu_contract_pad"  # on the fill and the copy that pad an input: its position

PAD = 4  # shared rows padded by 4 elements: column-wise stores hit distinct banks (BK = 8)
GEMV_ROWS = 4  # = schedule.GEMV_MAX_ROWS (schedule.py imports this module): the GEMV rule's
MANY_BLOCKS = 264  # two waves of an H100/H200 (132 SMs): a smaller tile is taken below this
MIN_SPLIT_K = 256  # a K split of a tensor-core kernel keeps this many steps of the reduction
# ... and of an FMA kernel (on the H200, ResNet-18 b1's 3x3 convs of K 2304-4608 on 56 blocks:
# 16 splits 22-23 us, 5-9 splits 29-30)
FMA_MIN_SPLIT_K = 128
FMA_BLOCK_THREADS = 256  # MANY_BLOCKS counts FMA blocks of this many threads
FMA_MIN_BLOCKS = 2  # blocks per SM a busy FMA kernel's registers leave room for
BUSY_THREAD = 64  # ... busy: accumulators + 4 per staged element (value, address, test)
SMALL_REGISTER_TILE = 16  # FMA tiles with fewer outputs per thread are split-K's last resort
SMALL_BLOCK = 32 * 32  # ... and so are blocks of this many outputs or fewer
LONG_SPLIT_K = 1024  # ... unless a larger tile's splits would each keep at least this much of K
MAX_SPLITS = 16
SPLIT_ATTR = "relax.gpu_contract_split"  # on the contraction: K splits (split-K), when > 1
STAGES_ATTR = "relax.gpu_contract_stages"  # on the contraction: the cp.async ring's tiles (tuned)
MIN_BLOCKS_ATTR = "relax.gpu_contract_min_blocks"  # on the contraction: blocks per SM (tuned)
NO_WINDOW_ATTR = "relax.gpu_contract_no_window"  # on the contraction: K tiles of the config's BK

# Tunable knobs of the Matmul rule (lowering/gpu/space.py declares their values): the tile
# config by name, the K splits, the cp.async ring's length (0: as many as fit).
TILE_KNOB, SPLITS_KNOB, STAGES_KNOB = "gpu.matmul.tile", "gpu.matmul.splits", "gpu.matmul.stages"
# ... and, on FMA tiles, the blocks per SM their registers must leave room for (0: the rule's
# choice, `_min_blocks`; 1: no cap; 2: at most 128 registers at 256 threads)
MIN_BLOCKS_KNOB, MIN_BLOCKS_CHOICES = "gpu.matmul.min_blocks", (0, 1, 2)
# ... and whether their K tiles hold whole convolution windows (`_window_bk`; 1, the default)
# or keep the config's BK (0)
WINDOW_KNOB = "gpu.matmul.window_k"


@dataclass(frozen=True)
class Config:
    """Block tile BM x BN, thread tile TM x TN, reduction step BK; T = BM*BN/(TM*TN) threads."""

    name: str
    bm: int
    bn: int
    tm: int
    tn: int
    bk: int = 8
    mma: bool = False  # tensor cores: TM x TN is one warp's tile of mma.sync steps
    tf32: bool = False  # float32 operands as TF32: 16x8x8 steps (else 16-bit ones, 16x8x16)
    wgmma: bool = False  # Hopper's wgmma: one warpgroup computes the whole BM x BN tile

    @property
    def threads(self) -> int:
        if self.wgmma:
            return WARPGROUP
        tiles = (self.bm // self.tm) * (self.bn // self.tn)
        return tiles * WARP if self.mma else tiles


# Largest first: `choose` takes, among those giving MANY_BLOCKS blocks, the one computing the
# fewest outputs past the problem's edges; when none does, the last one with split-K.
CONFIGS = (
    Config("128x128/8x8", 128, 128, 8, 8),
    Config("64x64/4x4", 64, 64, 4, 4),
    # small problems (BERT's seq-128 projections, ResNet at batch 1): 4x4 register tiles on 64
    # threads. On the H200 it ran 15-33% faster than the 2x2 tile on 256 threads, whose
    # shared-memory reads bound it (5 kernels of BERT-base, the MLP and ResNet-18 b1).
    Config("32x32/4x4", 32, 32, 4, 4),
)
# Tensor cores (16-bit operands, float32 accumulators): 8 warps of 64x64 (4096^3 f16 on the
# H200: 429 us against 460 for 8 warps of 64x32), of 64x32, or 4 of 32x32.
MMA_CONFIGS = (
    Config("mma128x256/64x64", 128, 256, 64, 64, bk=32, mma=True),
    Config("mma128x128/64x32", 128, 128, 64, 32, bk=32, mma=True),
    Config("mma64x64/32x32", 64, 64, 32, 32, bk=32, mma=True),
)
# Hopper (sm_90a): one warpgroup's wgmma steps (m64n128k16) over 128x128 tiles staged by
# cp.async in the 128-byte swizzled layout wgmma reads (`_build_wgmma`); 16-bit operands, A
# K-contiguous, B N-contiguous (else the kernel is the mma.sync one of the same block tile).
WGMMA_ARCHS = ("sm_90a",)
WGMMA_CONFIGS = (Config("wgmma128x128", 128, 128, 128, 128, bk=64, mma=True, wgmma=True),)
# float32 on tensor cores as TF32, where the target allows it ("allow-tf32").
TF32_CONFIGS = (
    Config("tf32 128x128/64x32", 128, 128, 64, 32, bk=32, mma=True, tf32=True),
    Config("tf32 64x64/32x32", 64, 64, 32, 32, bk=32, mma=True, tf32=True),
)
# Tiles only tuning tries (`configs_for(..., tuning=True)`; lowering/gpu/space.py): rectangular
# ones, for an N (or M) of 64 where the square tile would compute half its outputs past the edge.
TUNING_CONFIGS = {
    "fma": (
        Config("128x64/8x4", 128, 64, 8, 4),
        Config("64x128/4x8", 64, 128, 4, 8),
        # 2x2 register tiles on 256 threads: the small tile before the 4x4 one replaced it
        Config("32x32/2x2", 32, 32, 2, 2),
    ),
    "mma": (
        Config("mma128x64/64x32", 128, 64, 64, 32, bk=32, mma=True),
        # 64x64 warp tiles (128 accumulators a thread): 4 warps, or 8 on a 128x256 block
        Config("mma128x128/64x64", 128, 128, 64, 64, bk=32, mma=True),
        # K steps of 64: half the barriers per K (ncu on the H200: the default, one block of 8
        # warps per SM, waits on latency between its barriers), on a tile whose 128 registers
        # leave room for two blocks per SM (at 128x256, or in TF32, a K step of 64 takes 51 KB
        # of static shared memory, past the 48 KB ptxas allows)
        Config("mma128x128/64x32 k64", 128, 128, 64, 32, bk=64, mma=True),
    ),
    "tf32": (),
}
WARP = 32
WARPGROUP = 4 * WARP
MMA_PAD = 8  # shared rows of 16-bit elements padded by 16 bytes (ldmatrix rows stay aligned)
TF32_PAD = 4  # ... of float32 by 4: the 8 rows a fragment load touches hit distinct banks
TF32_KROW_PAD = 8  # ... and K rows by 8: the 4 K rows a fragment load touches, too


@dataclass
class Roles:
    ranges: list[int]
    batch: list[int]
    m: list[int]
    n: list[int]
    k: list[int]

    def extent(self, dims: list[int]) -> int:
        return pymath.prod(self.ranges[d] for d in dims)


_ACCUMULATE = {"arith.addf", "arith.addi"}
_PRODUCT_OPS = {"arith.mulf", "arith.muli", "arith.extf", "arith.extsi", "arith.extui"}


def _mul_add_like(op: ir.Operation) -> bool:
    """Payload `out + f(a, b)` with f built of products and widening casts: f(0, 0) = 0, so the
    zeros loaded past a tile's edge add nothing."""
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    if len(block.arguments) != 3 or len(body) < 2 or body[-1].name != "linalg.yield":
        return False
    last = body[-2]
    if last.name not in _ACCUMULATE or last.results[0] != body[-1].operands[0]:
        return False
    out = block.arguments[2]
    if sum(1 for v in last.operands if v == out) != 1:
        return False
    if any(o.name not in _PRODUCT_OPS for o in body[:-2]):
        return False
    return any(o.name in ("arith.mulf", "arith.muli") for o in body[:-2])


def roles(op: ir.Operation) -> Roles | None:
    """The loop roles of a contraction (a linalg.generic with two inputs, one output and a
    multiply-accumulate payload), or None."""
    op = op.operation
    if op.name != "linalg.generic" or len(op.regions[0].blocks[0].arguments) != 3:
        return None
    if len(op.operands) != 3 or not _mul_add_like(op):
        return None
    maps, its = emit.indexing_maps(op), emit.iterators(op)
    ranges = emit.loop_ranges(op)
    if any(r is None for r in ranges):
        return None
    parallel = [d for d, t in enumerate(its) if t == "parallel"]
    out = maps[2]
    if not all(isinstance(e, ir.AffineDimExpr) for e in out.results):
        return None
    out_dims = [e.position for e in out.results]
    if sorted(out_dims) != parallel:
        return None
    try:
        a_dims, b_dims = emit.map_dims(maps[0]), emit.map_dims(maps[1])
    except ValueError:
        return None
    r = Roles(list(ranges), [], [], [], [])
    for d in out_dims:  # output order: the fastest M / N loop last
        if d in a_dims and d in b_dims:
            r.batch.append(d)
        elif d in a_dims:
            r.m.append(d)
        elif d in b_dims:
            r.n.append(d)
        elif ranges[d] == 1:
            r.m.append(d)  # a unit loop the inputs index by a constant 0
        else:
            return None  # an output loop neither input reads (a broadcast)
    reduced = [d for d, t in enumerate(its) if t == "reduction"]
    order = [d for d in b_dims + a_dims if d in reduced]
    r.k = list(dict.fromkeys(order))
    if sorted(r.k) != reduced or not r.k:
        return None
    return r


def choose(r: Roles, configs: tuple[Config, ...] = CONFIGS) -> tuple[Config, int] | None:
    """The tile config and the number of K splits: the largest tile that still fills the GPU
    (the smallest block only where no larger one fills it with K split); when even the
    smallest leaves it half idle, K is split over more blocks."""
    m, n, batch, k = r.extent(r.m), r.extent(r.n), r.extent(r.batch), r.extent(r.k)
    if m <= GEMV_ROWS:
        return None  # a handful of rows: the GEMV rule's one thread per output column
    window = pymath.prod(r.ranges[d] for d in r.k[1:])  # a convolution's K: channels x window

    def padded(cfg: Config) -> int:  # outputs computed, edges included
        return -(-m // cfg.bm) * cfg.bm * -(-n // cfg.bn) * cfg.bn

    def blocks(cfg: Config) -> int:
        """Blocks of the grid, counted in 256-thread FMA blocks (MANY_BLOCKS's unit): a
        64-thread block hides a quarter of the latency one of 256 does."""
        count = -(-m // cfg.bm) * -(-n // cfg.bn) * batch
        return count if cfg.mma else max(1, count * cfg.threads // FMA_BLOCK_THREADS)

    def small(cfg: Config) -> bool:
        return cfg.bm * cfg.bn <= SMALL_BLOCK or cfg.tm * cfg.tn < SMALL_REGISTER_TILE

    def split_larger() -> tuple[Config, int] | None:
        # A small tile reads more of A and B per FMA (a 2x2 register tile: 4 FMAs per two
        # shared-memory reads; a 32x32 block: twice the global reads of a 64x64 one). Where K
        # is long, a larger tile split along K fills the GPU as well (ResNet's last stage at
        # batch 32: K 4608 in 2 splits, 196 us against 222 for 32x32/4x4 on the H200); each
        # split keeps a long K, so the partial sums and their fold stay small beside it.
        split = []
        for c in configs:
            splits = -(-MANY_BLOCKS // blocks(c))
            if not small(c) and splits <= MAX_SPLITS and k // splits >= LONG_SPLIT_K:
                split.append((c, splits))
        return min(split, key=lambda cs: (padded(cs[0]), cs[1])) if split else None

    filling = [c for c in configs if blocks(c) >= MANY_BLOCKS]
    if filling:  # the least work past the edges (N = 64 takes 64-wide tiles), then the largest
        best = min(filling, key=padded)
        if best.mma or not small(best):
            return best, 1
        return split_larger() or (best, 1)
    larger = split_larger()
    if larger is not None:
        return larger
    # the smallest tile that stages whole windows (a 7x7 stem's 49 a K tile: 49 elements a
    # thread on the 64-thread tile, too many, and K tiles of 8 are 1.5x slower on the H200)
    whole = [c for c in configs if c.mma or window == 1 or _staged(c, window) <= MAX_STAGED]
    cfg = whole[-1] if whole else configs[-1]
    min_k = MIN_SPLIT_K if cfg.mma else FMA_MIN_SPLIT_K
    splits = min(-(-MANY_BLOCKS // blocks(cfg)), k // min_k, MAX_SPLITS)
    return cfg, max(splits, 1)


def tf32_operands(op: ir.Operation) -> bool:
    """`out + a * b` all in float32: TF32 tensor cores can take it when the target allows."""
    types = [str(ir.ShapedType(v.type).element_type) for v in op.operands]
    return types == ["f32", "f32", "f32"] and _is_fma(op)


def tensor_core_operands(op: ir.Operation) -> bool:
    """`out + extf(a) * extf(b)` with a, b float16 and out float32: what mma.sync m16n8k16
    computes (products exact in float32, float32 accumulation)."""
    body = [o.operation for o in op.regions[0].blocks[0].operations]
    if [o.name for o in body] != [
        "arith.extf",
        "arith.extf",
        "arith.mulf",
        "arith.addf",
        "linalg.yield",
    ]:
        return False
    types = [str(ir.ShapedType(v.type).element_type) for v in op.operands]
    return types[2] == "f32" and types[0] == types[1] in ("f16", "bf16") and _mul_add_like(op)


# -- planning (tensor level) ----------------------------------------------------------------------


def _identity(amap: ir.AffineMap, shape: list[int]) -> bool:
    """The identity, up to unit axes indexed by a constant 0 (as the importers write them)."""
    if amap.n_dims != len(amap.results) or len(shape) != len(amap.results):
        return False
    for i, e in enumerate(amap.results):
        plain = isinstance(e, ir.AffineDimExpr) and e.position == i
        unit = isinstance(e, ir.AffineConstantExpr) and e.value == 0 and shape[i] == 1
        if not (plain or unit):
            return False
    return True


def _users(value: ir.Value, ops: list[ir.Operation]) -> list[ir.Operation]:
    return [op for op in ops if any(v == value for v in op.operands)]


@dataclass
class Plan:
    contraction: int  # index into the function's linalg ops
    init: int | None  # the fill whose constant starts the accumulators
    epilogue: list[tuple[int, int]]  # (op index, operand that carries the running value)
    config: Config
    splits: int = 1
    pads: list[tuple[int, int, int]] = field(default_factory=list)  # (input, fill, copy) ops
    stages: int = 0  # the cp.async ring's tiles, at most (0: as many as fit)
    min_blocks: int = 0  # FMA tiles: blocks per SM to leave registers for (0: the rule's choice)
    window: bool = True  # FMA tiles: K tiles of whole windows where that helps (`_window_bk`)


def has_wgmma(target) -> bool:
    """Whether the cuda `target` has Hopper's warpgroup MMA (its arch-specific sm_90a)."""
    return target.get("arch") in WGMMA_ARCHS


def configs_for(
    op: ir.Operation, allow_tf32: bool, tuning: bool = False, wgmma: bool = False
) -> tuple[Config, ...]:
    """The tile configs the op's operands allow (with `tuning`, the tuning-only ones too;
    `wgmma`: the target has Hopper's warpgroup MMA, sm_90a)."""
    if tensor_core_operands(op):
        kind, configs = "mma", (WGMMA_CONFIGS if wgmma else ()) + MMA_CONFIGS
    elif allow_tf32 and tf32_operands(op):
        kind, configs = "tf32", TF32_CONFIGS
    else:
        kind, configs = "fma", CONFIGS
    return configs + TUNING_CONFIGS[kind] if tuning else configs


def _config(name: str) -> Config | None:
    every = CONFIGS + WGMMA_CONFIGS + MMA_CONFIGS + TF32_CONFIGS + sum(TUNING_CONFIGS.values(), ())
    return next((c for c in every if c.name == name), None)


def plan(
    ops: list[ir.Operation],
    allow_tf32: bool = False,
    knobs: dict | None = None,
    wgmma: bool = False,
) -> Plan | None:
    """The last contraction of a PrimFunc that the kernel takes, its fill and the elementwise
    consumers that follow it directly (each the only user of the value before it); its tile
    and K splits as `choose` picks them, or as tuned `knobs` set them."""
    knobs = knobs or {}
    for c in reversed(range(len(ops))):
        r = roles(ops[c])
        if r is None:
            continue
        configs = configs_for(ops[c], allow_tf32, wgmma=wgmma)
        chosen = choose(r, configs)
        if chosen is None:
            return None
        cfg, splits = chosen
        if TILE_KNOB in knobs:
            tunable = configs_for(ops[c], allow_tf32, tuning=True, wgmma=wgmma)
            cfg = next((x for x in tunable if x.name == knobs[TILE_KNOB]), None)
            if cfg is None:
                names = ", ".join(x.name for x in tunable)
                raise PassError(f"{TILE_KNOB} = {knobs[TILE_KNOB]!r}: this op takes {names}")
        splits = knobs.get(SPLITS_KNOB, splits)
        if not isinstance(splits, int) or not 1 <= splits <= MAX_SPLITS:
            raise PassError(f"{SPLITS_KNOB} = {splits!r}: expected an int from 1 to {MAX_SPLITS}")
        stages = knobs.get(STAGES_KNOB, 0)
        if stages not in (0, *range(2, MAX_STAGES + 1)):
            raise PassError(
                f"{STAGES_KNOB} = {stages!r}: expected 0 (as many as fit) or 2 to {MAX_STAGES}"
            )
        min_blocks = knobs.get(MIN_BLOCKS_KNOB, 0)
        if min_blocks not in MIN_BLOCKS_CHOICES:
            raise PassError(
                f"{MIN_BLOCKS_KNOB} = {min_blocks!r}: expected 0 (the rule's choice), 1 or 2"
            )
        window = knobs.get(WINDOW_KNOB, 1)
        if window not in (0, 1):
            raise PassError(f"{WINDOW_KNOB} = {window!r}: expected 1 (whole windows) or 0")
        op = ops[c]
        init_def = op.operands[2].owner
        init = next((i for i, o in enumerate(ops) if o == init_def and emit.is_fill(o)), None)
        if init is not None and len(_users(ops[init].results[0], ops)) != 1:
            init = None
        epilogue: list[tuple[int, int]] = []
        value, shape = op.results[0], ir.ShapedType(op.results[0].type).shape
        for nxt in range(c + 1, len(ops)):
            users = _users(value, ops)
            cand = ops[nxt]
            if len(users) != 1 or users[0] != cand or not _elementwise(cand, shape):
                break
            maps = emit.indexing_maps(cand)
            slots = [i for i, v in enumerate(cand.operands) if v == value]
            if len(slots) != 1 or not _identity(maps[slots[0]], shape):
                break
            epilogue.append((nxt, slots[0]))
            value = cand.results[0]
        pads = [p for p in (_padding(ops, op, i) for i in (0, 1)) if p is not None]
        return Plan(c, init, epilogue, cfg, splits, pads, stages, min_blocks, bool(window))
    return None


def _padding(ops: list[ir.Operation], contraction: ir.Operation, i: int):
    """(input, fill, copy) when input `i` of the contraction is a padded copy of another tensor
    and read by nothing else: `insert_slice(copy(src) into extract_slice(fill(c))) into
    fill(c)` at static offsets, unit strides (what topi's pad becomes). The kernel then reads
    `src` at the shifted index, and `c` outside it: no padded buffer, no fill or copy kernel."""
    ins = contraction.operands[i].owner
    if not isinstance(ins, (ir.Operation, ir.OpView)) or ins.name != "tensor.insert_slice":
        return None
    ins = ins.operation
    if len(ins.operands) != 2 or len(list(ins.results[0].uses)) != 1:
        return None  # dynamic offsets / sizes / strides, or another reader of the padded value
    if any(v != 1 for v in ir.DenseI64ArrayAttr(ins.attributes["static_strides"])):
        return None
    copy, fill = ins.operands[0].owner, ins.operands[1].owner
    if not all(isinstance(o, (ir.Operation, ir.OpView)) for o in (copy, fill)):
        return None
    copy, fill = copy.operation, fill.operation
    index = {o: k for k, o in enumerate(ops)}
    if copy not in index or fill not in index or not emit.is_fill(fill):
        return None
    if (
        copy.name != "linalg.generic"
        or len(copy.operands) != 2
        or not _elementwise(copy, _shape(copy))
    ):
        return None
    body = [o.operation for o in copy.regions[0].blocks[0].operations]
    if len(body) != 1 or body[0].operands[0] != copy.regions[0].blocks[0].arguments[0]:
        return None  # not a plain copy
    window = copy.operands[1].owner
    if not isinstance(window, (ir.Operation, ir.OpView)) or window.name != "tensor.extract_slice":
        return None
    window = window.operation
    if window.operands[0] != fill.results[0] or len(window.operands) != 1:
        return None
    if str(window.attributes["static_offsets"]) != str(ins.attributes["static_offsets"]):
        return None
    if len([u for u in fill.results[0].uses]) != 2 or len(list(copy.results[0].uses)) != 1:
        return None
    return i, index[fill], index[copy]


def _shape(op: ir.Operation) -> list[int]:
    return ir.ShapedType(op.results[0].type).shape


def _elementwise(op: ir.Operation, shape: list[int]) -> bool:
    if op.name != "linalg.generic" or len(op.results) != 1:
        return False
    if any(t != "parallel" for t in emit.iterators(op)):
        return False
    maps = emit.indexing_maps(op)
    if ir.ShapedType(op.results[0].type).shape != shape or not _identity(maps[-1], shape):
        return False
    return all(
        all(isinstance(e, (ir.AffineDimExpr, ir.AffineConstantExpr)) for e in m.results)
        for m in maps
    )


def tag(ops: list[ir.Operation], p: Plan) -> list[int]:
    """Mark the plan's ops for `relax-gpu-contract`; returns their indices."""
    ctx = ops[p.contraction].context
    ops[p.contraction].attributes[CONTRACT_ATTR] = ir.StringAttr.get(p.config.name, ctx)
    i64 = ir.IntegerType.get_signless(64, ctx)
    if p.splits > 1:
        ops[p.contraction].attributes[SPLIT_ATTR] = ir.IntegerAttr.get(i64, p.splits)
    if p.stages:
        ops[p.contraction].attributes[STAGES_ATTR] = ir.IntegerAttr.get(i64, p.stages)
    if p.min_blocks:
        ops[p.contraction].attributes[MIN_BLOCKS_ATTR] = ir.IntegerAttr.get(i64, p.min_blocks)
    if not p.window:
        ops[p.contraction].attributes[NO_WINDOW_ATTR] = ir.UnitAttr.get(ctx)
    members = [p.contraction]
    if p.init is not None:
        ops[p.init].attributes[INIT_ATTR] = ir.UnitAttr.get(ctx)
        members.append(p.init)
    for pos, (i, slot) in enumerate(p.epilogue):
        ops[i].attributes[EPILOGUE_ATTR] = ir.DenseI64ArrayAttr.get([pos, slot], ctx)
        members.append(i)
    for operand, fill, copy in p.pads:
        for i in (fill, copy):
            ops[i].attributes[PAD_ATTR] = ir.IntegerAttr.get(i64, operand)
            members.append(i)
    return members


# -- the kernel (buffers) ------------------------------------------------------------------------


def _group(func_op: ir.Operation, contraction: ir.Operation):
    """The fill and the epilogue (in order) tagged with a contraction: those that bufferization
    kept between its fill and its last consumer."""
    block_ops = [o.operation for o in func_op.regions[0].blocks[0].operations]
    at = block_ops.index(contraction)
    init = None
    for o in reversed(block_ops[:at]):
        if INIT_ATTR in o.attributes and o.operands[1] == contraction.operands[2]:
            init = o
            break
    epilogue = []
    for o in block_ops[at + 1 :]:
        if EPILOGUE_ATTR in o.attributes:
            pos, slot = list(ir.DenseI64ArrayAttr(o.attributes[EPILOGUE_ATTR]))
            if pos != len(epilogue):
                break
            epilogue.append((o, slot))
        elif o.name.startswith("linalg.") or o.name.startswith("scf.") or o.name == "gpu.launch":
            break
    return init, epilogue


class _Operand:
    """How one input of the contraction is staged: its map, its own parallel loops (M for A,
    N for B) and whether consecutive threads walk those (else K) in global memory."""

    def __init__(self, value, amap, own: list[int], r: Roles, block: int, bk: int):
        self.value, self.map, self.block, self.bk = value, amap, block, bk
        last = emit.expr_dims(amap.results[-1]) if amap.results else []
        # walk the operand's own loops fastest unless only K indexes its contiguous axis
        self.own_fastest = (bool(own) and own[-1] in last) or not (r.k and r.k[-1] in last)
        self.elem = ir.MemRefType(value.type).element_type
        self.pad: _Pad | None = None
        self.advance: _Advance | None = None  # set where staging can walk K by strides

    def read(self, dims: list[ir.Value]) -> ir.Value:
        """The element at loop indices `dims`: a load, or through the padding (`_Pad`)."""
        at = emit.apply_map(self.map, dims)
        if self.pad is None:
            return emit.load(self.value, at)
        p = self.pad
        shifted, inside = p.shift(at)
        if inside is None:
            return emit.load(p.source, shifted)
        shifted = [emit.select(inside, j, emit.const(0)) for j in shifted]
        return emit.select(inside, emit.load(p.source, shifted), p.value)


@dataclass
class _Pad:
    """An input read through its padding: `source` sits at `offsets` in a `padded`-shaped
    buffer filled with `value` (which the kernel never materializes)."""

    source: ir.Value
    offsets: list[int]
    shape: list[int]
    padded: list[int]
    value: ir.Value

    def shift(self, at: list[ir.Value]) -> tuple[list[ir.Value], ir.Value | None]:
        """Indices `at` of the padded buffer as indices of `source`, and whether they fall
        inside it (None: always; one unsigned compare per padded axis covers both edges)."""
        shifted, inside = [], None
        for i, lo, n, full in zip(at, self.offsets, self.shape, self.padded):
            j = arith.SubIOp(i, emit.const(lo)).result if lo else i
            if lo or n != full:  # unsigned: also false where j < 0
                inside = emit.both(inside, emit.less(j, n))
            shifted.append(j)
        return shifted, inside


def _erase_if_unread(buffer: ir.Value) -> None:
    alloc = buffer.owner
    users = [u.owner for u in buffer.uses]
    if isinstance(alloc, ir.Block) or alloc.name != "memref.alloc":
        return
    if all(u.name == "memref.dealloc" for u in users):
        for u in users:
            u.erase()
        alloc.operation.erase()


def _take_pads(func_op: ir.Operation, contraction: ir.Operation) -> dict[int, _Pad]:
    """The padded inputs of `contraction` (tagged with PAD_ATTR by `plan`): their fill, copy,
    window and buffer are erased, the kernel reads the source instead."""
    out: dict[int, _Pad] = {}
    for i in (0, 1):
        block_ops = [o.operation for o in func_op.regions[0].blocks[0].operations]
        buffer = contraction.operands[i]
        tagged = [
            o for o in block_ops
            if PAD_ATTR in o.attributes and ir.IntegerAttr(o.attributes[PAD_ATTR]).value == i
        ]  # fmt: skip
        fill = next((o for o in tagged if emit.is_fill(o) and o.operands[1] == buffer), None)
        if fill is None:
            continue
        # the copy into the window: the tagged linalg copy, or the memref.copy that
        # bufferization made of it
        copy = window = None
        for o in block_ops:
            target = (
                o.operands[1]
                if o.name in ("memref.copy", "linalg.generic") and len(o.operands) == 2
                else None
            )
            owner = target.owner if target is not None else None
            is_window = (
                isinstance(owner, (ir.Operation, ir.OpView)) and owner.name == "memref.subview"
            )
            if (
                is_window
                and owner.operands[0] == buffer
                and (o.name == "memref.copy" or o in tagged)
            ):
                copy, window = o, owner.operation
        if copy is None or len(window.operands) != 1:
            raise PassError(
                "relax-gpu-contract: a padded input lost its shape in bufferization", fill
            )
        offsets = list(ir.DenseI64ArrayAttr(window.attributes["static_offsets"]))
        source = copy.operands[0]
        out[i] = _Pad(
            source, offsets, list(ir.MemRefType(source.type).shape),
            list(ir.MemRefType(buffer.type).shape), fill.operands[0],
        )  # fmt: skip
        for o in (copy, window, fill):
            o.erase()
    return out


class _Tile:
    """One block's view of the iteration space: the loop indices of (M, N, K) linear positions
    (delinearized per role) and of its batch (from the linear batch index)."""

    def __init__(self, r: Roles, batch_lin: ir.Value):
        self.r = r
        batch_dims = [r.ranges[d] for d in r.batch]
        self.batch_idx = emit.delinearize(batch_lin, batch_dims) if r.batch else []

    def split(self, role: str, lin: ir.Value | None) -> list[ir.Value]:
        group = {"m": self.r.m, "n": self.r.n, "k": self.r.k}[role]
        if lin is None:
            return [emit.const(0)] * len(group)
        return emit.delinearize(lin, [self.r.ranges[d] for d in group]) if group else []

    def dims(self, m: list[ir.Value], n: list[ir.Value], k: list[ir.Value]) -> list[ir.Value]:
        out: list[ir.Value | None] = [None] * len(self.r.ranges)
        roles = ((self.r.m, m), (self.r.n, n), (self.r.k, k), (self.r.batch, self.batch_idx))
        for group, vals in roles:
            for d, v in zip(group, vals):
                out[d] = v
        zero = emit.const(0)
        return [v if v is not None else zero for v in out]

    def at(self, m_lin: ir.Value, n_lin: ir.Value) -> list[ir.Value]:
        """Loop indices of one output (K at 0)."""
        return self.dims(self.split("m", m_lin), self.split("n", n_lin), self.split("k", None))

    def own(self, role: str, own0, oi, total: int, block: int) -> tuple[list[ir.Value], ir.Value]:
        """An operand's own (M or N) loop indices at tile offset `oi` from `own0` (0 past the
        problem's edge) and whether that is inside it (None: always)."""
        own_lin = emit.add(own0, oi)
        own_in = emit.bound(own_lin, total, block)
        return self.split(role, emit.select(own_in, own_lin, emit.const(0))), own_in

    def operand(self, role: str, own, k0, ki, k_total: int) -> tuple[list[ir.Value], ir.Value]:
        """Loop indices of an operand element (own indices `own`, K position k0 + ki, 0 past
        the end) and whether that K is inside: the pipelined read runs one tile ahead."""
        k_lin = emit.add(k0, ki)
        k_in = emit.less(k_lin, k_total)
        k = self.split("k", emit.select(k_in, k_lin, emit.const(0)))
        other = self.split("n" if role == "m" else "m", None)
        m, n = (own, other) if role == "m" else (other, own)
        return self.dims(m, n, k), k_in


class _Job:
    """One contraction's kernel as `_build` and `_build_mma` write it: the roles and operands,
    the split-K workspace, the block's place in the grid, the first value of an accumulator,
    the staged operand tiles and their K range, and where each result goes."""

    def __init__(
        self, contraction, init, epilogue, cfg: Config, splits: int, pads: dict, window=True
    ):
        r = roles(contraction)
        if r is None:
            raise PassError(
                "relax-gpu-contract: the tagged op is no longer a contraction", contraction
            )
        self.contraction, self.init, self.epilogue, self.cfg, self.splits = (
            contraction,
            init,
            epilogue,
            cfg,
            splits,
        )
        self.r, self.maps = r, emit.indexing_maps(contraction)
        self.c_val = contraction.operands[2]
        self.m_total, self.n_total, self.k_total = r.extent(r.m), r.extent(r.n), r.extent(r.k)
        self.batch_total = r.extent(r.batch)
        self.a = _Operand(contraction.operands[0], self.maps[0], r.m, r, cfg.bm, cfg.bk)
        self.b = _Operand(contraction.operands[1], self.maps[1], r.n, r, cfg.bn, cfg.bk)
        self.a.pad, self.b.pad = pads.get(0), pads.get(1)
        advances = [_advance(op, r) for op in (self.a, self.b)]
        if window and not cfg.mma:  # the FMA kernel's K tile: whole windows where that helps
            cfg = self.cfg = replace(cfg, bk=_window_bk(r, cfg, advances))
        for op, adv in zip((self.a, self.b), advances):
            op.bk = cfg.bk
            if adv is not None and cfg.bk % adv.inner == 0:
                op.advance = adv
        self.acc_type = ir.MemRefType(self.c_val.type).element_type
        self.last_out = epilogue[-1][0].operands[-1] if epilogue else self.c_val
        # each split's K range: whole tiles but the last
        self.k_span = -(-self.k_total // splits // cfg.bk) * cfg.bk
        self.anchor = epilogue[-1][0] if epilogue else contraction
        emit.defer_deallocs(contraction, self.anchor)
        self.partials = None

    def launch(
        self, shared: list[ir.Type], dynamic_bytes: int = 0, min_blocks: int = 0
    ) -> ir.Block:
        """The kernel's launch (at the anchor), with a split-K workspace when K is split; enters
        nothing: the caller writes the body (the launch's block, returned)."""
        cfg = self.cfg
        if self.splits > 1:  # partial sums in a workspace, folded by a second kernel
            shape = [self.splits, self.batch_total, self.m_total, self.n_total]
            self.partials = memref.AllocOp(ir.MemRefType.get(shape, self.acc_type), [], []).result
        grid = [
            emit.const(-(-self.n_total // cfg.bn)),
            emit.const(-(-self.m_total // cfg.bm)),
            emit.const(self.batch_total * self.splits),
        ]
        _, body = emit.launch(grid, cfg.threads, shared, dynamic_bytes, min_blocks)
        return body

    def place(self, body: ir.Block) -> None:
        """The block's coordinates (inside the launch body): its split, batch and tile."""
        bx, by, bz, self.tid = (body.arguments[i] for i in range(4))
        self.split_idx = emit.rem(bz, self.splits) if self.splits > 1 else None
        self.batch_lin = emit.div(bz, self.splits)
        self.tile = _Tile(self.r, self.batch_lin)
        self.m0, self.n0 = emit.mul(by, self.cfg.bm), emit.mul(bx, self.cfg.bn)

    def start(self, row: ir.Value, col: ir.Value) -> ir.Value:
        """The first value of the accumulator at block position (row, col): the fill's constant,
        else the output's current value (a split starts from zero: the second kernel adds the
        initial value once)."""
        if self.partials is not None:
            return emit.zero(self.acc_type)
        if self.init is not None:
            return self.init.operands[0]
        m_lin, n_lin = emit.add(self.m0, row), emit.add(self.n0, col)
        m_in = emit.bound(m_lin, self.m_total, self.cfg.bm)
        n_in = emit.bound(n_lin, self.n_total, self.cfg.bn)
        m_lin = emit.select(m_in, m_lin, emit.const(0))
        n_lin = emit.select(n_in, n_lin, emit.const(0))
        return emit.load(self.c_val, emit.apply_map(self.maps[2], self.tile.at(m_lin, n_lin)))

    def stage(self, vec_a: str | None, vec_b: str | None) -> None:
        """This thread's share of both operand tiles, fixed but for K (computed once)."""
        t = self.cfg.threads
        tile, tid, k = self.tile, self.tid, self.k_total
        self.stage_a = _stage(self.a, tile, "m", tid, t, self.m0, self.m_total, vec_a, k)
        self.stage_b = _stage(self.b, tile, "n", tid, t, self.n0, self.n_total, vec_b, k)

    def fetch(self, k0) -> list[ir.Value]:
        return self.stage_a.fetch(k0, self.k_total) + self.stage_b.fetch(k0, self.k_total)

    def k_bounds(self) -> tuple[ir.Value, ir.Value]:
        if self.split_idx is None:
            return emit.const(0), emit.const(self.k_total)
        lower = arith.MulIOp(self.split_idx, emit.const(self.k_span)).result
        upper = arith.MinUIOp(emit.add(lower, self.k_span), emit.const(self.k_total)).result
        return lower, upper

    @contextlib.contextmanager
    def _inside(self, row: ir.Value, col: ir.Value):
        """What is written under it runs where block position (row, col) is inside the output;
        yields the output's linear (m, n) there."""
        m_lin, n_lin = emit.add(self.m0, row), emit.add(self.n0, col)
        inb = emit.both(
            emit.bound(m_lin, self.m_total, self.cfg.bm),
            emit.bound(n_lin, self.n_total, self.cfg.bn),
        )
        guard = scf.IfOp(inb) if inb is not None else None
        with ir.InsertionPoint(guard.then_block) if guard else ir.InsertionPoint.current:
            yield m_lin, n_lin
            if guard:
                scf.YieldOp([])

    def finish(self, acc: ir.Value, row: ir.Value, col: ir.Value) -> None:
        """Store the result at block position (row, col) where it is inside the output: a
        partial sum, or through the epilogue."""
        with self._inside(row, col) as (m_lin, n_lin):
            if self.partials is not None:
                memref.StoreOp(acc, self.partials, [self.split_idx, self.batch_lin, m_lin, n_lin])
            else:
                _store(self.epilogue, acc, self.tile.at(m_lin, n_lin), self.maps, self.last_out)

    def pairs(self) -> bool:
        """Whether adjacent outputs (n, n + 1), n even, can go out as one 2-element store: the
        innermost N loop is the output's contiguous axis and even, so a pair never straddles an
        edge or a row, and the output is a plain buffer aligned to the pair (the runtime
        refuses outputs off a 16-byte boundary). The split-K workspace always can."""
        if self.partials is not None:
            return self.n_total % 2 == 0
        t = ir.MemRefType(self.last_out.type)
        last = self.maps[2].results[-1] if self.maps[2].results else None
        return (
            bool(self.r.n)
            and isinstance(last, ir.AffineDimExpr)
            and last.position == self.r.n[-1]
            and self.r.ranges[self.r.n[-1]] % 2 == 0
            and ir.ShapedType.get_dynamic_size() not in t.shape
            and isinstance(t.layout, ir.AffineMapAttr)
            and t.layout.value == ir.AffineMap.get_identity(t.rank)
        )

    def finish_pair(self, accs: list[ir.Value], row: ir.Value, col: ir.Value) -> None:
        """`finish` for the two results at (row, col) and (row, col + 1), col even (`pairs`):
        each through the epilogue, then one vector store."""
        with self._inside(row, col) as (m_lin, n_lin):
            if self.partials is not None:
                out = self.partials
                coords = [
                    [self.split_idx, self.batch_lin, m_lin, emit.add(n_lin, e)] for e in (0, 1)
                ]
                values = accs
            else:
                out = self.last_out
                coords = [
                    emit.apply_map(self.maps[2], self.tile.at(m_lin, emit.add(n_lin, e)))
                    for e in (0, 1)
                ]
                values = [_epilogue(self.epilogue, v, c) for v, c in zip(accs, coords)]
            elem = ir.MemRefType(out.type).element_type
            pair = vector.FromElementsOp(ir.VectorType.get([2], elem), values).result
            vector.StoreOp(pair, out, coords[0], alignment=2 * elem.width // 8)

    def close(self) -> None:
        """After the launch: the split-K fold and the workspace's release."""
        if self.partials is not None:
            _fold_partials(
                self.contraction, self.init, self.epilogue, self.partials, self.splits, self.r,
                self.maps, self.last_out,
            )  # fmt: skip
            memref.DeallocOp(self.partials)


def _build(
    contraction: ir.Operation,
    init,
    epilogue,
    cfg: Config,
    splits: int,
    pads: dict,
    blocks: int = 0,
    window: bool = True,
) -> None:
    job = _Job(contraction, init, epilogue, cfg, splits, pads, window)
    r, a, b, cfg = job.r, job.a, job.b, job.cfg
    bm, bn, bk, tm, tn = cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn
    out_dims = [e.position for e in job.maps[2].results]
    m_fast = bool(r.m) and out_dims[-1] in r.m  # threads run along the output's contiguous axis

    with contraction.location, ir.InsertionPoint(job.anchor):
        blocks = blocks or _min_blocks(cfg)
        body = job.launch(
            [emit.shared([bk, bm + PAD], a.elem), emit.shared([bk, bn + PAD], b.elem)],
            min_blocks=blocks if blocks > 1 else 0,
        )
        smem_a, smem_b = body.arguments[12], body.arguments[13]
        with ir.InsertionPoint(body):
            job.place(body)
            rows_per, cols_per = bm // tm, bn // tn
            if m_fast:
                trow, tcol = emit.rem(job.tid, rows_per), emit.div(job.tid, rows_per)
            else:
                tcol, trow = emit.rem(job.tid, cols_per), emit.div(job.tid, cols_per)
            rows, cols = _offsets(tm, bm, trow), _offsets(tn, bn, tcol)
            init_vals = [job.start(rows[i], cols[j]) for i in range(tm) for j in range(tn)]
            # 16-byte vectors along an operand's contiguous axis where it allows, else elements
            job.stage(_vector_axis(a, r, r.m), _vector_axis(b, r, r.n))
            fused = _is_fma(contraction)

            def compute(accs: list[ir.Value]) -> list[ir.Value]:
                """The thread's register-tile FMAs over one staged K tile."""
                for kk in range(bk):
                    kc = emit.const(kk)
                    av, bv = _read_groups(smem_a, kc, rows), _read_groups(smem_b, kc, cols)
                    accs = [
                        math.FmaOp(av[i], bv[j], accs[i * tn + j]).result
                        if fused
                        else emit.clone_body(contraction, [av[i], bv[j], accs[i * tn + j]])
                        for i in range(tm)
                        for j in range(tn)
                    ]
                return accs

            # shared rows along K for both operands
            results = _register_pipeline(job, (smem_a, smem_b), (False, False), init_vals, compute)
            for i in range(tm):
                for j in range(tn):
                    job.finish(results[i * tn + j], rows[i], cols[j])
            gpu.TerminatorOp()
        job.close()


def _min_blocks(cfg: Config) -> int:
    """Blocks per SM the FMA kernel's registers leave room for: two where a thread holds many
    values (a large register tile, or many staged elements: 64x64 whole-window tiles), so that
    one block's barriers leave the SM to the other (ptxas, left free, took up to 150 registers
    and fitted one block); else one (no cap)."""
    busy = cfg.tm * cfg.tn + 4 * _staged(cfg, cfg.bk) >= BUSY_THREAD
    return FMA_MIN_BLOCKS if busy else 1


def _staged(cfg: Config, bk: int) -> int:
    """Elements of both operand tiles a thread stages per K tile of `bk` (the last rep may
    be partial)."""
    return -(-(cfg.bm + cfg.bn) * bk // cfg.threads)


def _build_mma(
    contraction: ir.Operation, init, epilogue, cfg: Config, splits: int, pads: dict, ring: int = 0
) -> None:
    """The kernel of `_build` on tensor cores: the same block tiles, split-K and epilogue, but
    each warp computes a TM x TN tile of mma.sync steps, and operands that stage in 16-byte
    vectors are copied by cp.async into a ring of shared tiles (`_async_pipeline`; else the
    register pipeline of `_build`).

    16-bit operands: m16n8k16 (`nvgpu.mma.sync`; bf16 as `nvvm.mma.sync`, which nvgpu does not
    lower), fragments by ldmatrix from shared tiles whose contiguous axis is the operand's own
    (.trans where that is M or N). Lane (g, t) = (lane / 4, lane % 4) then holds A rows
    g + 8 (r % 2), columns 2t + 8 (r // 2) + e (register r, element e), B rows 2t + 8r + e of
    column g. float32 operands as TF32 (where the target allows): m16n8k8, A rows g + 8 (r % 2),
    column t + 4 (r // 2), B rows t + 4r, read from shared memory one element per register.
    Accumulators: rows g + 8r, columns 2t + e, float32."""
    job = _Job(contraction, init, epilogue, cfg, splits, pads)
    r, a, b = job.r, job.a, job.b
    bm, bn, bk, wm, wn = cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn
    tiles_m, tiles_n = wm // 16, wn // 8
    tf32 = cfg.tf32
    kstep = 8 if tf32 else 16
    frag_a = ir.VectorType.get([4, 1] if tf32 else [4, 2], a.elem)
    frag_b = ir.VectorType.get([2, 1] if tf32 else [2, 2], b.elem)
    pair_b = ir.VectorType.get([4, 2], b.elem)  # two B fragments by one ldmatrix.x4
    frag_c = ir.VectorType.get([2, 2], job.acc_type)
    # 16-byte staging vectors along each operand's contiguous axis where it allows; the shared
    # tile keeps that axis contiguous (rows along M / N when K is contiguous, else along K,
    # read back transposed by ldmatrix.trans, or element by element in TF32)
    vec_a, vec_b = _vector_axis(a, r, r.m), _vector_axis(b, r, r.n)
    own_rows_a, own_rows_b = vec_a != "own", vec_b != "own"

    def tile_shape(own_rows: bool, rows: int) -> list[int]:
        if own_rows:
            return [rows, bk + (TF32_PAD if tf32 else MMA_PAD)]
        return [bk, rows + (TF32_KROW_PAD if tf32 else MMA_PAD)]

    # cp.async: both operands copied into shared memory by 16-byte asynchronous copies, through
    # a ring of shared tiles; else the register pipeline of `_build`
    tiles_a, tiles_b = tile_shape(own_rows_a, bm), tile_shape(own_rows_b, bn)
    stages = _async_stages(cfg, (a, vec_a, tiles_a), (b, vec_b, tiles_b))
    if stages > 1:  # no more tiles in flight than a split has (or the tuned ring holds)
        stages = max(2, min(stages, -(-job.k_span // bk) + 1, ring or MAX_STAGES))
    ring = [stages] if stages > 1 else []

    with contraction.location, ir.InsertionPoint(job.anchor):
        # a fragment's 8x8 pieces are 16-byte rows of the shared tiles (ldmatrix)
        tiles = [emit.shared(ring + tiles_a, a.elem), emit.shared(ring + tiles_b, b.elem)]
        if stages > 1:  # the ring in dynamic shared memory (it may take more than 48 KiB)
            body = job.launch([], emit.dynamic_bytes(tiles))
        else:
            body = job.launch(tiles)
        with ir.InsertionPoint(body):
            if stages > 1:
                smem_a, smem_b = emit.dynamic_shared(tiles)
            else:
                smem_a, smem_b = body.arguments[12], body.arguments[13]
            job.place(body)
            warp, lane = emit.div(job.tid, WARP), emit.rem(job.tid, WARP)
            w_m = emit.mul(emit.div(warp, bn // wn), wm)
            w_n = emit.mul(emit.rem(warp, bn // wn), wn)
            g, t4 = emit.div(lane, 4), emit.rem(lane, 4)
            two_t = emit.mul(t4, 2)
            # ldmatrix: lane l gives the address of row l % 8 of 8x8 piece l // 8; the pieces of
            # an A fragment are (rows 0-7 | 8-15) x (K 0-7 | 8-15), column-major; two B
            # fragments (N tiles j, j + 1) are read at once: K 0-7 and 8-15 of tile j's 8
            # columns, then of tile j + 1's
            piece, row8 = emit.div(lane, 8), emit.rem(lane, 8)
            a_row = emit.add(emit.mul(emit.rem(piece, 2), 8), row8)
            a_col = emit.mul(emit.div(piece, 2), 8)
            b_col = emit.mul(emit.rem(piece, 2), 8)
            b_tile = emit.add(w_n, emit.mul(emit.div(piece, 2), 8))  # N tile j or j + 1
            a_rows = [emit.add(emit.add(w_m, a_row), 16 * i) for i in range(tiles_m)]
            b_rows = [emit.add(emit.add(b_tile, row8), 8 * j) for j in range(tiles_n)]
            # ... from K-row tiles, transposed: piece q's rows are K, its columns M (N)
            a_krow = emit.add(emit.mul(emit.div(piece, 2), 8), row8)
            a_mcols = [
                emit.add(emit.add(w_m, emit.mul(emit.rem(piece, 2), 8)), 16 * i)
                for i in range(tiles_m)
            ]
            b_krow = emit.add(emit.mul(emit.rem(piece, 2), 8), row8)
            b_ncols = [emit.add(b_tile, 8 * j) for j in range(tiles_n)]
            b_cols = [emit.add(emit.add(w_n, g), 8 * j) for j in range(tiles_n)]  # TF32 loads
            # accumulators: lane (g, t) holds rows g + 8h, columns 2t + e of each 16x8 tile
            c_cols = [
                [emit.add(emit.add(w_n, two_t), 8 * j + e) for e in range(2)]
                for j in range(tiles_n)
            ]
            c_rows = [
                [emit.add(emit.add(w_m, g), 16 * i + 8 * h) for h in range(2)]
                for i in range(tiles_m)
            ]

            def positions():  # (tile index, register, element, block row, block column)
                for i in range(tiles_m):
                    for j in range(tiles_n):
                        for h in range(2):
                            for e in range(2):
                                yield i * tiles_n + j, h, e, c_rows[i][h], c_cols[j][e]

            starts = {p[:3]: job.start(p[3], p[4]) for p in positions()}
            init_vals = [
                vector.FromElementsOp(
                    frag_c, [starts[(f, h, e)] for h in range(2) for e in range(2)]
                ).result
                for f in range(tiles_m * tiles_n)
            ]
            mma = _mma_bf16 if str(a.elem) == "bf16" else _mma_sync

            def compute(accs: list[ir.Value], stage: ir.Value | None) -> list[ir.Value]:
                """The warp's mma.sync steps over one staged K tile (`stage` of the ring)."""
                s = [stage] if stage is not None else []
                for kk in range(0, bk, kstep):
                    if tf32:  # lane (g, t): A rows g + 8 (r % 2), K t + 4 (r // 2); B K t + 4r

                        def element(smem, own_rows: bool, row, k):
                            return emit.load(smem, s + ([row, k] if own_rows else [k, row]))

                        frags_a = [
                            vector.FromElementsOp(
                                frag_a,
                                [
                                    element(smem_a, own_rows_a, c_rows[i][q % 2],
                                            emit.add(t4, kk + 4 * (q // 2)))
                                    for q in range(4)
                                ],
                            ).result
                            for i in range(tiles_m)
                        ]  # fmt: skip
                        frags_b = [
                            vector.FromElementsOp(
                                frag_b,
                                [
                                    element(smem_b, own_rows_b, b_cols[j], emit.add(t4, kk + 4 * q))
                                    for q in range(2)
                                ],
                            ).result
                            for j in range(tiles_n)
                        ]
                    else:  # ldmatrix: rows along the own axis directly, K rows transposed
                        frags_a = [
                            _ldmatrix(frag_a, smem_a, own_rows_a, 4, s + [a_rows[i], emit.add(a_col, kk)],
                                      s + [emit.add(a_krow, kk), a_mcols[i]])
                            for i in range(tiles_m)
                        ]  # fmt: skip
                        frags_b = []
                        for j in range(0, tiles_n, 2):  # tiles_n is even (warp tiles of 16k)
                            pair = _ldmatrix(
                                pair_b,
                                smem_b,
                                own_rows_b,
                                4,
                                s + [b_rows[j], emit.add(b_col, kk)],
                                s + [emit.add(b_krow, kk), b_ncols[j]],
                            )
                            frags_b += [_rows(frag_b, pair, 2 * h) for h in range(2)]
                    accs = [
                        mma(frag_c, frags_a[i], frags_b[j], accs[i * tiles_n + j], kstep, tf32)
                        for i in range(tiles_m)
                        for j in range(tiles_n)
                    ]
                return accs

            job.stage(vec_a, vec_b)
            smem = (smem_a, smem_b)
            if stages > 1:
                results = _async_pipeline(job, stages, smem, init_vals, compute)
            else:
                results = _register_pipeline(
                    job, smem, (own_rows_a, own_rows_b), init_vals, lambda accs: compute(accs, None)
                )

            if job.pairs():  # lane (g, t)'s two columns 2t, 2t + 1 of a row: one store
                for f, h, _, row, col in (p for p in positions() if p[2] == 0):
                    pair = [vector.ExtractOp(results[f], [], [h, e]).result for e in (0, 1)]
                    job.finish_pair(pair, row, col)
            else:
                for f, h, e, row, col in positions():
                    job.finish(vector.ExtractOp(results[f], [], [h, e]).result, row, col)
            gpu.TerminatorOp()
        job.close()


WGMMA_FALLBACK = "mma128x128/64x32"  # the wgmma tile's block on mma.sync
SWIZZLE_BYTES = 128  # wgmma tiles: rows of 128 bytes, 16-byte chunks XOR-swizzled by row % 8
SWIZZLE_ALIGN = 1024  # ... from a base on 1024 bytes (the swizzle acts on address bits 4-9)


def _wgmma_staging(job: _Job) -> bool:
    """Whether the wgmma kernel can stage the job's operands: 16-bit, A with K contiguous, B
    with N contiguous (wgmma reads B transposed), each in 16-byte vectors, a K tile of one
    128-byte swizzled row and B's tile in 64-wide column blocks."""
    a, b, r, cfg = job.a, job.b, job.r, job.cfg
    return (
        _vector_axis(a, r, r.m) == "k"
        and _vector_axis(b, r, r.n) == "own"
        and cfg.bk * a.elem.width // 8 == SWIZZLE_BYTES
        and cfg.bn % 64 == 0
        and cfg.bm % 64 == 0
    )


def _swizzled(row: ir.Value, col: ir.Value) -> ir.Value:
    """The column of 16-byte chunk `col` (an element index, a multiple of 8) of a row of a
    128-byte swizzled tile: the chunk index XOR row % 8 (CUTLASS's Swizzle<3,4,3>, the TMA's
    SWIZZLE_128B)."""
    chunk = arith.XOrIOp(emit.div(col, 8), emit.rem(row, 8)).result
    return emit.mul(chunk, 8)


def _build_wgmma(
    contraction: ir.Operation, init, epilogue, cfg: Config, splits: int, pads: dict, ring: int = 0
) -> bool:
    """The kernel of `_build_mma` on Hopper's warpgroup MMA: one warpgroup (128 threads) per
    BM x BN block tile; both operands copied by cp.async into a ring of shared tiles in the
    128-byte swizzled layout that wgmma's descriptors read (A: BM rows of BK = 64 16-bit
    elements; B: BK rows of each 64-column block, read transposed); each K step waits for its
    tile, fences it for the async proxy, meets the block, issues the tile's wgmma steps
    (`nvgpu.warpgroup.mma`, accumulators in registers), then refills the slot the previous
    step read once its wgmma group is done. The accumulators then go through shared memory to
    the epilogue, two adjacent outputs a thread, rows coalesced. False (nothing written) where
    the operands do not stage so (`_wgmma_staging`)."""
    job = _Job(contraction, init, epilogue, cfg, splits, pads)
    if not _wgmma_staging(job):
        return False
    a, b = job.a, job.b
    bm, bn, bk = cfg.bm, cfg.bn, cfg.bk
    elem_bytes = a.elem.width // 8
    a_bytes, b_bytes = bm * bk * elem_bytes, bk * bn * elem_bytes
    stage_bytes = a_bytes + b_bytes
    stages = ring or min(MAX_STAGES, ASYNC_SHARED_BYTES // stage_bytes)  # tuned: any of 2-4
    stages = max(2, min(stages, -(-job.k_span // bk) + 1))
    f32 = ir.F32Type.get()
    out_bytes = bm * bn * f32.width // 8
    total = max(stages * stage_bytes, out_bytes) + SWIZZLE_ALIGN
    space = ir.Attribute.parse(emit.WORKGROUP)
    a_tile_t = emit.shared([bm, bk], a.elem)
    b_tile_t = emit.shared([bk, bn], b.elem)
    b_cols_t = emit.shared([bn // 64, bk, 64], b.elem)  # the same bytes, by 64-column block

    def box(shape: list[int]) -> ir.MemRefType:  # a tensor map's box (its swizzle is read)
        return ir.MemRefType.get(shape, a.elem, memory_space=ir.Attribute.parse("3"))

    def desc(t: ir.MemRefType) -> ir.Type:
        return ir.Type.parse(f"!nvgpu.warpgroup.descriptor<tensor={t}>")

    sw = nvgpu.TensorMapSwizzleKind.SWIZZLE_128B
    rest = (
        nvgpu.TensorMapL2PromoKind.L2PROMO_NONE,
        nvgpu.TensorMapOOBKind.OOB_ZERO,
        nvgpu.TensorMapInterleaveKind.INTERLEAVE_NONE,
    )
    map_a = nvgpu.TensorMapDescriptorType.get(box([bm, bk]), sw, *rest)
    map_b = nvgpu.TensorMapDescriptorType.get(box([bk, 64]), sw, *rest)
    acc_t = ir.Type.parse(f"!nvgpu.warpgroup.accumulator<fragmented=vector<{bm}x{bn}xf32>>")

    with contraction.location, ir.InsertionPoint(job.anchor):
        body = job.launch([], total)
        with ir.InsertionPoint(body):
            job.place(body)
            i8 = ir.IntegerType.get_signless(8)
            raw_t = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], i8, memory_space=space)
            raw = gpu.DynamicSharedMemoryOp(raw_t).result
            start = memref.ExtractAlignedPointerAsIndexOp(raw).result
            base = emit.rem(
                arith.SubIOp(emit.const(SWIZZLE_ALIGN), emit.rem(start, SWIZZLE_ALIGN)).result,
                SWIZZLE_ALIGN,
            )

            def view(t: ir.MemRefType, offset: ir.Value) -> ir.Value:
                return memref.ViewOp(t, raw, emit.add(base, offset), []).result

            def a_tile(slot, t=a_tile_t):
                return view(t, emit.mul(slot, stage_bytes))

            def b_tile(slot, t=b_tile_t):
                return view(t, emit.add(emit.mul(slot, stage_bytes), a_bytes))

            job.stage("k", "own")
            # the descriptors read the swizzle from a tensor map's type; no tensor map exists
            # (the tiles come by cp.async), so a placeholder value carries the type
            null = llvm.ZeroOp(ir.Type.parse("!llvm.ptr")).result
            tmap_a = builtin.UnrealizedConversionCastOp([map_a], [null]).result
            tmap_b = builtin.UnrealizedConversionCastOp([map_b], [null]).result

            def request(k0, slot) -> ir.Value:
                ta, tb = a_tile(slot), b_tile(slot, b_cols_t)

                def place_a(row, col):  # A's row m, column k
                    return ta, [row, _swizzled(row, col)]

                def place_b(row, col):  # B's row k, column n: 64-column block n / 64, row k
                    return tb, [emit.div(col, 64), row, _swizzled(row, emit.rem(col, 64))]

                copies = job.stage_a.copy_async(k0, job.k_total, place_a)
                copies += job.stage_b.copy_async(k0, job.k_total, place_b)
                return nvgpu.DeviceAsyncCreateGroupOp(copies).result

            lower, upper = job.k_bounds()
            group = None
            for s in range(stages - 1):
                group = request(emit.add(lower, s * bk), emit.const(s))
            acc0 = nvgpu.WarpgroupMmaInitAccumulatorOp(acc_t).result
            loop = scf.ForOp(lower, upper, emit.const(bk), [acc0])
            with ir.InsertionPoint(loop.body):
                k0 = loop.induction_variable
                step = emit.div(arith.SubIOp(k0, lower).result, bk)
                slot = emit.rem(step, stages)
                nvgpu.DeviceAsyncWaitOp(group, numGroups=stages - 2)
                # cp.async wrote through the generic proxy, wgmma reads through the async one
                nvvm.FenceProxyOp(
                    ir.Attribute.parse("#nvvm.proxy_kind<async.shared>"),
                    space=ir.Attribute.parse("#nvvm.shared_space<cta>"),
                )
                gpu.BarrierOp()
                da = nvgpu.WarpgroupGenerateDescriptorOp(
                    desc(a_tile_t), a_tile(slot), tmap_a
                ).result
                db = nvgpu.WarpgroupGenerateDescriptorOp(
                    desc(b_tile_t), b_tile(slot), tmap_b
                ).result
                # waits until at most this step's group is in flight: the previous step's
                # slot is read no more, and is refilled next
                acc = nvgpu.WarpgroupMmaOp(
                    acc_t, da, db, loop.inner_iter_args[0], waitGroup=1, transposeB=True
                ).result
                request(
                    emit.add(k0, (stages - 1) * bk), emit.rem(emit.add(step, stages - 1), stages)
                )
                scf.YieldOp([acc])
            nvgpu.DeviceAsyncWaitOp(group, numGroups=0)
            nvvm.WgmmaWaitGroupSyncOp(0)
            gpu.BarrierOp()  # every tile read: the ring's memory takes the accumulators
            out = view(emit.shared([bm, bn], f32), emit.const(0))
            nvgpu.WarpgroupMmaStoreOp(loop.results[0], out)
            gpu.BarrierOp()
            pairs = job.pairs()
            vec2 = ir.VectorType.get([2], f32)
            for rep in range(bm * bn // 2 // WARPGROUP):
                e = emit.add(job.tid, rep * WARPGROUP)
                row = emit.div(e, bn // 2)
                col = emit.mul(emit.rem(e, bn // 2), 2)
                v = vector.LoadOp(vec2, out, [row, col]).result
                vals = []
                for i in range(2):
                    c = emit.add(col, i)
                    part = vector.ExtractOp(v, [], [i]).result
                    vals.append(arith.AddFOp(job.start(row, c), part).result)
                if pairs:
                    job.finish_pair(vals, row, col)
                else:
                    for i in range(2):
                        job.finish(vals[i], row, emit.add(col, i))
            gpu.TerminatorOp()
        job.close()
    return True


ASYNC_SHARED_BYTES = 96 * 1024  # the ring's shared memory: within every arch's opt-in limit
MAX_STAGES = 4


def _async_stages(cfg: Config, *operands) -> int:
    """The number of shared tiles the cp.async pipeline rotates through, or 1 where it does not
    apply. Each operand (with its staging axis and shared tile shape) must stage in 16-byte
    vectors, each thread's share in whole vectors; the tensor-core tiles keep their rows along
    the vector axis, so every vector is one aligned 16-byte copy. As many stages as fit in
    ASYNC_SHARED_BYTES of dynamic shared memory, at most MAX_STAGES."""
    tile_bytes = 0
    for op, axis, shape in operands:
        lanes = LANES.get(str(op.elem))
        if axis is None or lanes is None or op.block * op.bk % (lanes * cfg.threads):
            return 1
        tile_bytes += pymath.prod(shape) * op.elem.width // 8
    stages = min(MAX_STAGES, ASYNC_SHARED_BYTES // tile_bytes)
    return max(1, stages)


def _register_pipeline(job: _Job, smem: tuple, own_rows: tuple, accs: list, compute) -> list:
    """The K loop on one shared tile per operand (software pipelining): the next tile's
    elements are read from global memory into registers while this one is computed from
    shared memory (past the end: zeros, bound-checked); a barrier after staging and one after
    computing."""
    bk = job.cfg.bk
    lower, upper = job.k_bounds()
    first = job.fetch(lower)
    n_a, n_acc = len(job.stage_a.slots), len(accs)
    loop = scf.ForOp(lower, upper, emit.const(bk), accs + first)
    with ir.InsertionPoint(loop.body):
        k0 = loop.induction_variable
        carried = list(loop.inner_iter_args)
        staged = carried[n_acc:]
        job.stage_a.store(staged[:n_a], smem[0], own_rows[0])
        job.stage_b.store(staged[n_a:], smem[1], own_rows[1])
        gpu.BarrierOp()
        ahead = job.fetch(emit.add(k0, bk))
        accs = compute(carried[:n_acc])
        gpu.BarrierOp()
        scf.YieldOp(accs + ahead)
    return list(loop.results)[:n_acc]


def _async_pipeline(job: _Job, stages: int, smem: tuple, accs: list, compute) -> list:
    """The K loop on a ring of `stages` shared tiles filled by cp.async (Ampere's multistage
    pipeline): the first stages - 1 tiles are requested before the loop; each step waits until
    its own tile has landed (at most stages - 2 groups still in flight), meets the block at one
    barrier (so every thread's copies are visible and every warp is done with the tile the
    ring reuses next), requests the tile stages - 1 ahead into that slot and computes. A
    request past K copies nothing and writes zeros (source size 0)."""
    bk, total = job.cfg.bk, job.k_total
    smem_a, smem_b = smem
    lower, upper = job.k_bounds()

    def request(k0, slot) -> ir.Value:
        copies = job.stage_a.copy_async(k0, total, lambda row, col: (smem_a, [slot, row, col]))
        copies += job.stage_b.copy_async(k0, total, lambda row, col: (smem_b, [slot, row, col]))
        return nvgpu.DeviceAsyncCreateGroupOp(copies).result

    group = None
    for s in range(stages - 1):
        group = request(emit.add(lower, s * bk), emit.const(s))
    loop = scf.ForOp(lower, upper, emit.const(bk), accs)
    with ir.InsertionPoint(loop.body):
        k0 = loop.induction_variable
        step = emit.div(arith.SubIOp(k0, lower).result, bk)
        nvgpu.DeviceAsyncWaitOp(group, numGroups=stages - 2)
        gpu.BarrierOp()
        request(emit.add(k0, (stages - 1) * bk), emit.rem(emit.add(step, stages - 1), stages))
        scf.YieldOp(compute(list(loop.inner_iter_args), emit.rem(step, stages)))
    nvgpu.DeviceAsyncWaitOp(group, numGroups=0)  # no copy outlives the block's shared memory
    return list(loop.results)


def _ldmatrix(frag, smem, own_rows: bool, pieces: int, direct: list, transposed: list) -> ir.Value:
    """A fragment of `pieces` 8x8 pieces: from a tile with rows along the operand's own axis
    (lane addresses `direct`), else from K rows, transposed (`transposed`)."""
    at, trans = (direct, False) if own_rows else (transposed, True)
    return nvgpu.LdMatrixOp(frag, smem, at, trans, pieces).result


def _rows(frag: ir.VectorType, source: ir.Value, first: int) -> ir.Value:
    """Rows first, first + 1, ... of a 2-D vector as a `frag`-shaped vector (row by row: the
    LLVM lowering takes whole-row inserts of 2-D vectors, not strided slices)."""
    shape = ir.VectorType(frag).shape
    out = arith.ConstantOp(frag, ir.DenseElementsAttr.get_splat(frag, _zero_attr(frag))).result
    for r in range(shape[0]):
        row = vector.ExtractOp(source, [], [first + r]).result
        out = vector.InsertOp(row, out, [], [r]).result
    return out


def _zero_attr(frag: ir.VectorType) -> ir.Attribute:
    elem = ir.VectorType(frag).element_type
    return (
        ir.FloatAttr.get(elem, 0.0)
        if not isinstance(elem, ir.IntegerType)
        else ir.IntegerAttr.get(elem, 0)
    )


def _mma_sync(frag_c, a, b, c, kstep: int, tf32: bool) -> ir.Value:
    return nvgpu.MmaSyncOp(frag_c, a, b, c, [16, 8, kstep], tf32Enabled=tf32 or None).result


def _mma_bf16(frag_c, a, b, c, kstep: int, tf32: bool) -> ir.Value:
    """mma.sync m16n8k16 on bfloat16 fragments, written as NVVM (nvgpu.mma.sync lowers f16
    but not bf16): each pair of bf16 is one 32-bit register, the accumulators four floats."""
    i32 = ir.IntegerType.get_signless(32)

    def registers(frag: ir.Value, rows: int) -> list[ir.Value]:
        out = []
        for r in range(rows):
            two = vector.ExtractOp(frag, [], [r]).result
            word = vector.BitCastOp(ir.VectorType.get([1], i32), two).result
            out.append(vector.ExtractOp(word, [], [0]).result)
        return out

    f32 = ir.F32Type.get()
    accs = [vector.ExtractOp(c, [], [h, e]).result for h in range(2) for e in range(2)]
    struct = ir.Type.parse("!llvm.struct<(f32, f32, f32, f32)>")
    attr = ir.Attribute.parse
    d = nvvm.MmaOp(
        struct,
        attr("#nvvm.shape<m = 16, n = 8, k = 16>"),
        attr("#nvvm.mma_layout<row>"),
        attr("#nvvm.mma_layout<col>"),
        registers(a, 4),
        registers(b, 2),
        accs,
        multiplicandAPtxType=attr("#nvvm.mma_type<bf16>"),
        multiplicandBPtxType=attr("#nvvm.mma_type<bf16>"),
    ).result
    parts = [llvm.ExtractValueOp(f32, d, [q]).result for q in range(4)]
    return vector.FromElementsOp(frag_c, parts).result


def _offsets(per_thread: int, block: int, base: ir.Value) -> list[ir.Value]:
    """A thread's rows (or columns) of the block tile: groups of up to 4 adjacent ones, the
    groups spread over the tile, so vector reads of consecutive threads hit distinct banks."""
    width = min(4, per_thread)
    groups = per_thread // width
    stride = block // groups
    first = emit.mul(base, width)
    return [emit.add(first, g * stride + v) for g in range(groups) for v in range(width)]


def _read_groups(smem: ir.Value, row: ir.Value, offsets: list[ir.Value]) -> list[ir.Value]:
    """A thread's values at `offsets` (`_offsets`) of one row of a shared tile: 32-bit elements
    as one vector load per group of adjacent offsets (each group starts on a multiple of its
    width, and rows on 16 bytes), since LLVM's load-store vectorizer misses a group whose last
    index it has rewritten as an `or`; other elements one by one."""
    elem = ir.MemRefType(smem.type).element_type
    width = min(4, len(offsets))
    if elem.width != 32 or width == 1:
        return [emit.load(smem, [row, at]) for at in offsets]
    vtype = ir.VectorType.get([width], elem)
    out = []
    for g in range(0, len(offsets), width):
        v = vector.LoadOp(vtype, smem, [row, offsets[g]], alignment=4 * width).result
        out += [vector.ExtractOp(v, [], [i]).result for i in range(width)]
    return out


def _fold_partials(contraction, init, epilogue, partials, splits, r, maps, last_out) -> None:
    """Second kernel of a split-K contraction: per output, the initial value plus the splits'
    partial sums (with the payload's own accumulate op), then the epilogue and the store."""
    body_ops = [o.operation for o in contraction.regions[0].blocks[0].operations]
    accumulate = body_ops[-2].name  # arith.addf / arith.addi (checked by _mul_add_like)
    m_total, n_total, batch_total = r.extent(r.m), r.extent(r.n), r.extent(r.batch)
    total, t = batch_total * m_total * n_total, 256
    _, body = emit.launch([emit.const(-(-total // t)), emit.const(1), emit.const(1)], t, [])
    with ir.InsertionPoint(body):
        lin = emit.add(emit.mul(body.arguments[0], t), body.arguments[3])
        guard = scf.IfOp(emit.less(lin, total)) if total % t else None
        with ir.InsertionPoint(guard.then_block) if guard else ir.InsertionPoint.current:
            bl, m_lin, n_lin = emit.delinearize(lin, [batch_total, m_total, n_total])
            dims = _Tile(r, bl).at(m_lin, n_lin)
            if init is not None:
                acc = init.operands[0]
            else:
                acc = emit.load(contraction.operands[2], emit.apply_map(maps[2], dims))
            for s_i in range(splits):
                part = emit.load(partials, [emit.const(s_i), bl, m_lin, n_lin])
                acc = emit.binary(accumulate, acc, part)
            _store(epilogue, acc, dims, maps, last_out)
            if guard:
                scf.YieldOp([])
        gpu.TerminatorOp()


def _slots(op: _Operand, tid, t: int) -> tuple[list[tuple[ir.Value, ir.Value]], list]:
    """The (K, own) positions in the operand tile of the elements thread `tid` stages: element
    e = tid + rep * t, consecutive threads along the own axis (`own_fastest`) or along K. Where
    the threads cover whole rows, the rows of later reps are the first one's plus a constant
    (one shared-memory address register and immediate offsets, not one register per element).
    Where the tile is not a whole number of reps (a K tile of one 7x7 window), the last rep's
    elements past the tile read the first element and store nothing: their guards (else None)."""
    block, bk = op.block, op.bk
    fast, slow = (block, bk) if op.own_fastest else (bk, block)
    slots, guards = [], []
    for rep in range(-(-block * bk // t)):
        if t % fast == 0:
            f, s = emit.rem(tid, fast), emit.add(emit.div(tid, fast), rep * (t // fast))
        else:
            e = emit.add(tid, rep * t)
            f, s = emit.rem(e, fast), emit.div(e, fast)
        guard = emit.less(s, slow) if (rep + 1) * t > block * bk else None
        if guard is not None:
            f, s = emit.select(guard, f, emit.const(0)), emit.select(guard, s, emit.const(0))
        slots.append((s, f) if op.own_fastest else (f, s))
        guards.append(guard)
    return slots, guards


class _Stage:
    """This thread's share of one operand tile (own x BK, own = M for A, N for B): the shared
    slots it fills and the own-axis part of their indices, computed once; `fetch(k0)` reads the
    tile at K offset k0 (zeros past the edges; K always bound-checked, since the pipelined read
    runs one tile ahead)."""

    def __init__(self, op: _Operand, tile: _Tile, role: str, tid, t: int, own0, own_total: int):
        self.op, self.tile, self.role = op, tile, role
        (self.slots, self.guards), self.own = _slots(op, tid, t), []
        for _, oi in self.slots:
            self.own.append(tile.own(role, own0, oi, own_total, op.block))

    def store(self, values: list[ir.Value], smem: ir.Value, own_rows: bool) -> None:
        """Write fetched values to the shared tile: rows along the operand's own axis (K
        contiguous), else rows along K."""
        for (ki, oi), guard, v in zip(self.slots, self.guards, values):
            at = [oi, ki] if own_rows else [ki, oi]
            if guard is None:
                memref.StoreOp(v, smem, at)
                continue
            inside = scf.IfOp(guard)
            with ir.InsertionPoint(inside.then_block):
                memref.StoreOp(v, smem, at)
                scf.YieldOp([])

    def fetch(self, k0, k_total: int) -> list[ir.Value]:
        out = []
        for (ki, _), (own, own_in) in zip(self.slots, self.own):
            dims, k_in = self.tile.operand(self.role, own, k0, ki, k_total)
            value = self.op.read(dims)
            out.append(emit.select(emit.both(own_in, k_in), value, emit.zero(self.op.elem)))
        return out


@dataclass(frozen=True)
class _Advance:
    """How an operand's element moves in memory as K advances (`_advance`): K's inner loops (a
    convolution's window) span `inner` positions, and one step of K's outermost loop (its input
    channel) moves the element `step` places in `source` (the operand, or the padded input's
    source), a row-major buffer."""

    inner: int
    step: int
    source: ir.Value
    strides: list[int]


def _linear(e: ir.AffineExpr) -> tuple[int, dict[int, int]] | None:
    """An affine expression as a constant plus coefficients of loop dims, or None when it is not
    linear (floordiv, mod, a product of dims)."""
    if isinstance(e, ir.AffineDimExpr):
        return 0, {e.position: 1}
    if isinstance(e, ir.AffineConstantExpr):
        return e.value, {}
    if not isinstance(e, (ir.AffineAddExpr, ir.AffineMulExpr)):
        return None
    lhs, rhs = _linear(e.lhs), _linear(e.rhs)
    if lhs is None or rhs is None:
        return None
    if isinstance(e, ir.AffineAddExpr):
        coefs = dict(lhs[1])
        for d, c in rhs[1].items():
            coefs[d] = coefs.get(d, 0) + c
        return lhs[0] + rhs[0], coefs
    if lhs[1] and rhs[1]:
        return None
    (scale, _), (const, coefs) = (lhs, rhs) if not lhs[1] else (rhs, lhs)
    return scale * const, {d: scale * c for d, c in coefs.items()}


def _advance(op: _Operand, r: Roles) -> _Advance | None:
    """Where staging can walk K by strides: the operand (or its padding's source) is a static
    row-major buffer, its index is linear in the loop indices with no negative terms, and K's
    outermost loop only moves it along axes read without a padding test (a convolution's
    channel axis, not its padded spatial ones). None elsewhere."""
    source = op.pad.source if op.pad is not None else op.value
    t = ir.MemRefType(source.type)
    if not r.k or not t.shape or ir.ShapedType.get_dynamic_size() in t.shape:
        return None
    layout = t.layout
    if not isinstance(layout, ir.AffineMapAttr) or layout.value != ir.AffineMap.get_identity(
        t.rank
    ):
        return None
    strides = [pymath.prod(t.shape[i + 1 :]) for i in range(t.rank)]
    outer, step = r.k[0], 0
    for axis, e in enumerate(op.map.results):
        lin = _linear(e)
        if lin is None or lin[0] < 0 or any(c < 0 for c in lin[1].values()):
            return None
        c = lin[1].get(outer, 0)
        p = op.pad
        if c and p is not None and (p.offsets[axis] or p.shape[axis] != p.padded[axis]):
            return None
        step += strides[axis] * c
    return _Advance(pymath.prod(r.ranges[d] for d in r.k[1:]), step, source, strides)


MAX_STAGED = 32  # staged elements a thread holds per K tile (registers of the pipelined read)


def _window_bk(r: Roles, cfg: Config, advances: list) -> int:
    """The FMA kernel's K tile: a multiple of a convolution's window (K's inner loops), so each
    staged element keeps its window position (and its padding test) from tile to tile and only
    the input channel advances (`_StridedStage`). Preferably with every thread's share of both
    tiles whole (36 for a 3x3 window on 64x64 tiles), else the window rounded up to the config's
    BK, the last rep partial (49 for ResNet's 7x7 stem); the config's BK where no operand walks
    by strides, or the tile would hold too much or be longer than K."""
    inner = next((a.inner for a in advances if a is not None), 1)
    if cfg.bk % inner == 0:
        return cfg.bk
    t, k_total = cfg.threads, r.extent(r.k)
    whole = pymath.lcm(t // pymath.gcd(t, cfg.bm), t // pymath.gcd(t, cfg.bn))
    for unit in (pymath.lcm(inner, whole), inner):
        bk = unit * -(-cfg.bk // unit)
        if _staged(cfg, bk) <= MAX_STAGED and bk <= k_total:
            return bk
    return cfg.bk


class _StridedStage(_Stage):
    """`_Stage` by strides (`_advance`): K tiles start on whole windows, so each element of the
    thread's share keeps its window position from tile to tile and only K's outermost loop
    moves. Its linear position in the source, its padding test and its edge test are computed
    once; each tile adds one offset, the same for all of the thread's elements (a convolution
    reads an element per load and add instead of splitting K into channel and window)."""

    def __init__(self, op, tile: _Tile, role: str, tid, t: int, own0, own_total: int, k_total):
        self.op, self.tile, self.role, adv = op, tile, role, op.advance
        size = pymath.prod(ir.MemRefType(adv.source.type).shape)
        flat = ir.MemRefType.get([size], op.elem)
        rank = len(adv.strides)
        self.flat = memref.CollapseShapeOp(flat, adv.source, reassociation([list(range(rank))]))
        zero = emit.const(0)
        (self.slots, self.guards), self.elements = _slots(op, tid, t), []
        for ki, oi in self.slots:
            own, own_in = tile.own(role, own0, oi, own_total, op.block)
            dims, _ = tile.operand(role, own, zero, ki, k_total)
            at, inside = emit.apply_map(op.map, dims), None
            if op.pad is not None:
                at, inside = op.pad.shift(at)
            position = zero
            for i, stride in zip(at, adv.strides):
                position = emit.add(position, emit.mul(i, stride))
            # in the padding or past an edge: position 0, inside the buffer at every channel
            position = emit.select(emit.both(own_in, inside), position, zero)
            self.elements.append((position, ki, own_in, inside))

    def fetch(self, k0, k_total: int) -> list[ir.Value]:
        adv, bk = self.op.advance, self.op.bk
        # the pipelined read past the last tile reads the first one (its values go unused)
        k0 = emit.select(emit.less(k0, k_total), k0, emit.const(0))
        offset = emit.mul(emit.div(k0, adv.inner), adv.step)
        out = []
        for position, ki, own_in, inside in self.elements:
            at = emit.add(position, offset)
            k_in = None
            if k_total % bk:  # the last tile is partial: past K, read the first element
                k_in = emit.less(emit.add(k0, ki), k_total)
                at = emit.select(k_in, at, emit.const(0))
            value = emit.load(self.flat, [at])
            if inside is not None:
                value = emit.select(inside, value, self.op.pad.value)
            out.append(emit.select(emit.both(own_in, k_in), value, emit.zero(self.op.elem)))
        return out


VECTOR_BYTES = 16  # per staging vector (ld.global.v4 / st.shared.v4)
LANES = {"f16": 8, "bf16": 8, "f32": 4}  # elements per staging vector


def _vector_axis(op: _Operand, r: Roles, own: list[int]) -> str | None:
    """Where 16-byte vectors can stage `op`: along K ("k") or its own M / N loop ("own") when
    that loop is the operand's contiguous axis and a multiple of the vector long (a vector never
    straddles an edge or a row), on a plain contiguous buffer; else None (element by element)."""
    t = ir.MemRefType(op.value.type)
    width = LANES.get(str(op.elem))
    if op.pad is not None or width is None or ir.ShapedType.get_dynamic_size() in t.shape:
        return None
    if not t.shape or t.shape[-1] % width:
        return None
    layout = t.layout
    if not isinstance(layout, ir.AffineMapAttr) or layout.value != ir.AffineMap.get_identity(
        t.rank
    ):
        return None  # a strided view
    last = op.map.results[-1] if op.map.results else None
    if not isinstance(last, ir.AffineDimExpr):
        return None
    d = last.position
    if sum(d in emit.expr_dims(e) for e in op.map.results) != 1 or r.ranges[d] % width:
        return None
    if r.k and d == r.k[-1]:
        return "k"
    if own and d == own[-1]:
        return "own"
    return None


class _VectorStage:
    """`_Stage` in 16-byte vectors along the operand's contiguous axis (`_vector_axis`): each
    vector lands in one row of the shared tile (rows along the own axis when the vectors run
    along K, along K when they run along the own axis). The buffer starts on a 16-byte boundary
    (the runtime copies an input that does not: cuda_entry.ALIGNMENT) and the vector divides its
    rows, so every vector is 16-byte aligned. When the shared tile's rows run the other way
    (the FMA kernel's K rows, vectors along K), a vector's elements go to consecutive rows."""

    def __init__(
        self, op: _Operand, tile: _Tile, role: str, tid, t: int, own0, own_total: int, axis: str
    ):
        self.op, self.tile, self.role, self.axis = op, tile, role, axis
        block, bk = op.block, op.bk
        width = LANES[str(op.elem)]
        self.vtype = ir.VectorType.get([width], op.elem)
        per_row = (bk if axis == "k" else block) // width
        self.slots, self.parts = [], []
        for rep in range(block * bk // width // t):
            e = emit.add(tid, rep * t)
            row, col = emit.div(e, per_row), emit.mul(emit.rem(e, per_row), width)
            oi, ki = (row, col) if axis == "k" else (col, row)
            self.slots.append((row, col))
            self.parts.append((*tile.own(role, own0, oi, own_total, block), ki))

    def sources(self, k0, k_total: int) -> list[tuple[list[ir.Value], ir.Value | None]]:
        """Per vector of the tile at K offset k0: its first element's index in the operand
        (clamped inside it) and whether the vector is inside the problem (None: always)."""
        out = []
        for own, own_in, ki in self.parts:
            dims, k_in = self.tile.operand(self.role, own, k0, ki, k_total)
            out.append((emit.apply_map(self.op.map, dims), emit.both(own_in, k_in)))
        return out

    def fetch(self, k0, k_total: int) -> list[ir.Value]:
        zero = emit.zero(self.op.elem)
        zeros = vector.BroadcastOp(self.vtype, zero).result
        out = []
        for at, ok in self.sources(k0, k_total):
            value = vector.LoadOp(self.vtype, self.op.value, at, alignment=VECTOR_BYTES).result
            out.append(arith.SelectOp(ok, value, zeros).result if ok is not None else value)
        return out

    def copy_async(self, k0, k_total: int, place) -> list[ir.Value]:
        """cp.async of each vector of the tile at K offset k0 (16 bytes, L1 bypassed) to where
        `place(row, col)` says, as (shared buffer, indices): a ring slot of the mma.sync
        kernel's tiles, a swizzled place in the wgmma kernel's; past the edges the source size
        is 0, so the copy writes zeros. Returns the copies' tokens."""
        width = ir.VectorType(self.vtype).shape[0]
        count = ir.IntegerAttr.get(emit.index_type(), width)
        tokens = []
        for (row, col), (at, ok) in zip(self.slots, self.sources(k0, k_total)):
            size = None if ok is None else emit.select(ok, emit.const(width), emit.const(0))
            dst, where = place(row, col)
            copy = nvgpu.DeviceAsyncCopyOp(
                dst, where, self.op.value, at, count, srcElements=size, bypassL1=True
            )
            tokens.append(copy.result)
        return tokens

    def store(self, values: list[ir.Value], smem: ir.Value, own_rows: bool) -> None:
        along_rows = (self.axis == "k") == own_rows  # the vector runs along a shared row
        width = ir.VectorType(self.vtype).shape[0]
        for (row, col), v in zip(self.slots, values):
            if along_rows:
                vector.StoreOp(v, smem, [row, col], alignment=VECTOR_BYTES)
                continue
            for lane in range(width):
                element = vector.ExtractOp(v, [], [lane]).result
                memref.StoreOp(element, smem, [emit.add(col, lane), row])


def _stage(
    op: _Operand, tile: _Tile, role: str, tid, t: int, own0, total: int, axis: str | None, k_total
):
    if axis is not None and op.block * op.bk % (LANES[str(op.elem)] * t) == 0:
        return _VectorStage(op, tile, role, tid, t, own0, total, axis)
    if op.advance is not None:
        return _StridedStage(op, tile, role, tid, t, own0, total, k_total)
    return _Stage(op, tile, role, tid, t, own0, total)


def _is_fma(op: ir.Operation) -> bool:
    """`out + a * b` on floats of one type: one fused multiply-add (as cuBLAS computes it)."""
    body = [o.operation for o in op.regions[0].blocks[0].operations]
    return [o.name for o in body] == ["arith.mulf", "arith.addf", "linalg.yield"] and is_mul_add(op)


def _store(epilogue, acc: ir.Value, dims, maps, last_out) -> None:
    """Apply the epilogue to one accumulator and store it (the output coordinates are the loops
    of each elementwise consumer, whose maps are identities on them)."""
    coords = emit.apply_map(maps[2], dims)
    memref.StoreOp(_epilogue(epilogue, acc, coords), last_out, coords)


def _epilogue(epilogue, acc: ir.Value, coords: list[ir.Value]) -> ir.Value:
    """The epilogue's value at output coordinates `coords` from the accumulator there."""
    value = acc
    for op, slot in epilogue:
        args = []
        block_args = op.regions[0].blocks[0].arguments
        for i, (operand, amap) in enumerate(zip(op.operands, emit.indexing_maps(op))):
            if i == slot:
                args.append(value)
            elif not isinstance(operand.type, ir.ShapedType):
                args.append(operand)  # a scalar input
            elif not list(block_args[i].uses):
                args.append(emit.zero(block_args[i].type))  # not read (an output's old value)
            else:
                args.append(emit.load(operand, emit.apply_map(amap, coords)))
        value = emit.clone_body(op, args, coords)
    return value


def _int_attr(op: ir.Operation, name: str, default: int) -> int:
    return ir.IntegerAttr(op.attributes[name]).value if name in op.attributes else default


@register_pass(
    "relax-gpu-contract",
    "contractions tagged by relax-schedule-gpu's Matmul rule -> shared-memory tiled kernels "
    "with their fill and elementwise epilogue folded in",
)
def contract_kernels():
    def run(module_op: ir.Operation) -> None:
        for func_op, ops in emit.tagged_ops(module_op, CONTRACT_ATTR):
            for op in ops:
                name = ir.StringAttr(op.attributes[CONTRACT_ATTR]).value
                cfg = _config(name)
                if cfg is None:
                    raise PassError(f"relax-gpu-contract: unknown tile config {name!r}", op)
                init, epilogue = _group(func_op, op)
                pads = _take_pads(func_op, op)
                splits = _int_attr(op, SPLIT_ATTR, 1)
                ring = _int_attr(op, STAGES_ATTR, 0)
                if cfg.wgmma:
                    if not _build_wgmma(op, init, epilogue, cfg, splits, pads, ring):
                        fallback = _config(WGMMA_FALLBACK)  # operands wgmma cannot read
                        _build_mma(op, init, epilogue, fallback, splits, pads, ring)
                elif cfg.mma:
                    _build_mma(op, init, epilogue, cfg, splits, pads, ring)
                else:
                    blocks = _int_attr(op, MIN_BLOCKS_ATTR, 0)
                    window = NO_WINDOW_ATTR not in op.attributes
                    _build(op, init, epilogue, cfg, splits, pads, blocks, window)
                buffers = [op.operands[i] for i in pads]
                for o in [op, *(e for e, _ in epilogue)] + ([init] if init is not None else []):
                    o.erase()
                for buffer in buffers:  # a padded buffer nothing reads any more
                    _erase_if_unread(buffer)

    return run
