"""The tunable knobs of the CPU schedule rules: their legal values, and how a kernel gets them.

Each rule declares its knobs here (one table keyed by the rule's pattern); the default schedule
is the point of the space where every knob has its default, so tuning can only add options.
A kernel carries chosen knobs as a function attribute (`relax.schedule_knobs`, a dictionary), or
the module carries a table from kernel key to knobs (`relax.tuned_knobs`, written by
`MetaScheduleApplyDatabase`); `relax-schedule-cpu` hands them to the rules through
`ScheduleOptions.knobs`. A kernel key (`kernel_key`) is the structural hash of the function as
the schedule pass sees it, plus the target string: records from another target never match.

One knob is not here: the choice among an op's strategy implementations (im2col + GEMM or the
direct kernel, ...) is made before there is a kernel, when LegalizeOps builds it. It is the
`"strategy"` knob of a relax-level task (`relaxmlir.meta_schedule.task.strategy_tasks`), applied
through the module's `relax.tuned_strategies` table (`relax.op.strategy.TUNED_ATTR`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from mlir import ir

from lowering.dedupe import body_key
from lowering.schedule.common import OpInfo, ScheduleOptions, classify, linalg_ops
from lowering.schedule.matmul import micro_tile
from lowering.schedule.normalize import normalize_function

KNOBS_ATTR = "relax.schedule_knobs"  # on a PrimFunc: {knob name: value}
TUNED_ATTR = "relax.tuned_knobs"  # on the module: {kernel key: {knob name: value}}


@dataclass(frozen=True)
class Knob:
    name: str  # "<pattern>.<knob>", e.g. "matmul.mr"
    values: tuple
    default: object

    def to_dict(self) -> dict:
        return {"values": list(self.values), "default": self.default}


def default_point(space: dict[str, Knob]) -> dict:
    """The knob values of a space's default schedule."""
    return {name: knob.default for name, knob in space.items()}


def _matmul(info: OpInfo, opts: ScheduleOptions) -> list[Knob]:
    """Register-tile rows, the cache blocks (rows and columns of C, K elements; B's column
    blocks on the `rows` route), on more than one core the dimension the threads split, and
    where C accumulates when the tiles divide it."""
    from lowering.schedule.matmul import (
        C_LAYOUTS,
        CACHE_COLS,
        CACHE_ROWS,
        KC,
        ROUTES,
        SPLITS,
        _l2_bytes,
        _panel_bytes,
        micro_tile,
    )

    tile = micro_tile(opts.target)
    mr, nr = tile.mr, tile.nr
    rows = tuple(sorted({v for v in (4, 6, mr) if v <= mr}))
    knobs = [
        Knob("matmul.mr", rows, mr),
        Knob("matmul.cache_rows", (64, CACHE_ROWS, 2 * CACHE_ROWS), CACHE_ROWS),
        Knob("matmul.cache_cols", (CACHE_COLS // 2, CACHE_COLS, 2 * CACHE_COLS), CACHE_COLS),
    ]
    k = info.size(info.k) if info.k is not None else None
    if k is not None and k > KC // 2:
        values = tuple(v for v in (KC // 4, KC // 2, KC, 2 * KC) if v < 2 * k)
        knobs.append(Knob("matmul.kc", values, KC))
    if info.static:
        knobs.append(Knob("matmul.route", ROUTES, "auto"))
    if info.n is not None and info.ranges[info.n] is not None and info.k is not None:
        # the `rows` route's column blocks of B (0: the rule's choice by L2 size)
        panels = -(-info.size(info.n) // nr)
        blocks = sorted({b for b in (1, 2, 4, 8, panels) if panels % b == 0})
        knobs.append(Knob("matmul.rows_block", (0, *blocks), 0))
        # ... and whether the loop over them prefetches the next block (lowering/prefetch.py),
        # where B is large enough to go in blocks by default (elsewhere the knob changes nothing)
        if panels * _panel_bytes(info, tile) > _l2_bytes(opts) // 2:
            knobs.append(Knob("matmul.prefetch", (1, 0), 1))
    if opts.threads > 1:
        knobs.append(Knob("matmul.split", SPLITS, "auto"))
    whole_tiles = info.static and info.size(info.n) % nr == 0
    if whole_tiles and any(info.size(info.m) % r == 0 for r in rows):
        knobs.append(Knob("matmul.c_layout", C_LAYOUTS, "packed"))
    return knobs


def _threads(opts: ScheduleOptions) -> list[Knob]:
    """Every kernel: 0 = the rules' choice by work size, 1 = one thread, N = split whatever
    the size (`ScheduleOptions.force_parallel`)."""
    cores = opts.threads
    return [Knob("threads", (0, 1, cores), 0)] if cores > 1 else []


def _conv(info: OpInfo, opts: ScheduleOptions) -> list[Knob]:
    """The register tile (filters x image rows); 0 is the rule's own choice. Pairs that do not
    fit the accumulators fail to build (recorded, not applied)."""
    from lowering.schedule.matmul import _divisors, conv_register_budget

    if info.element_type != "f32" or not info.static:
        return []
    _, _, _, regs, f_dim, y_dim, accumulators = conv_register_budget(info, opts)
    out = []
    for name, dim in (("conv.filters", f_dim), ("conv.rows", y_dim)):
        if dim is not None:
            fits = [d for d in _divisors(info.ranges[dim]) if d * regs <= accumulators]
            out.append(Knob(name, (0, *fits[-6:]), 0))
    return out


# pattern -> the knobs its rule reads (besides the kernel-wide "threads").
KNOB_TABLE: dict[str, Callable[[OpInfo, ScheduleOptions], list[Knob]]] = {
    "matmul": _matmul,
    "conv": _conv,
}


def space_for(func_op: ir.Operation, opts: ScheduleOptions) -> dict[str, Knob]:
    """The knobs of every rule that schedules an op of `func_op` (empty: nothing to tune)."""
    scratch = ir.Module.create(loc=func_op.location)
    copy = func_op.clone(ip=ir.InsertionPoint(scratch.body))
    normalize_function(copy, micro_tile(opts.target).mr)  # as the driver sees it
    ops = linalg_ops(copy)
    out: dict[str, Knob] = {k.name: k for k in _threads(opts)} if ops else {}
    for op in ops:
        info = classify(op)
        for knob in KNOB_TABLE.get(info.pattern, lambda i, o: [])(info, opts):
            out.setdefault(knob.name, knob)
    return out


def kernel_key(func_op: ir.Operation, target: object) -> str:
    """Structural hash of a kernel (name left out) and the target it is scheduled for."""
    h = hashlib.sha256(body_key(func_op).encode())
    h.update(b"\0" + str(target).encode())
    return h.hexdigest()[:24]


def knobs_of(
    func_op: ir.Operation,
    module_op: ir.Operation | None,
    target: object,
    defaults: Callable[[], dict] | None = None,
) -> dict:
    """The knobs chosen for `func_op`: its own attribute, else the module's tuned table. A
    table entry `{"knobs", "over"}` (the tuning database's) applies only where the kernel's
    current default point (`defaults()`) is among the points `over` it was measured against;
    else the kernel keeps its default, so a tuned build is never slower than the default
    the tuning measured. A plain entry (knob -> value) always applies."""
    if KNOBS_ATTR in func_op.attributes:
        return json.loads(ir.StringAttr(func_op.attributes[KNOBS_ATTR]).value)
    if module_op is None or TUNED_ATTR not in module_op.attributes:
        return {}
    table = json.loads(ir.StringAttr(module_op.attributes[TUNED_ATTR]).value)
    entry = dict(table.get(kernel_key(func_op, target), {}))
    if set(entry) != {"knobs", "over"}:
        return entry
    if defaults is not None and defaults() not in entry["over"]:
        return {}
    return dict(entry["knobs"])


def set_knobs(func_op: ir.Operation, knobs: dict) -> None:
    text = json.dumps(knobs, sort_keys=True)
    func_op.attributes[KNOBS_ATTR] = ir.StringAttr.get(text, func_op.context)


def set_tuned_table(module_op: ir.Operation, table: dict) -> None:
    text = json.dumps(table, sort_keys=True)
    module_op.attributes[TUNED_ATTR] = ir.StringAttr.get(text, module_op.context)
