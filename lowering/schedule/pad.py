"""Raise TE's guarded-read pads into fill + copy-into-the-interior, before fusion and scheduling.

`topi.nn.pad` is a `te.compute` whose body reads the input under a bounds test, which TE emits as
a linalg.generic with `linalg.index`, `scf.if` and `tensor.extract`. Elementwise fusion then
inlines that body into the convolution (or pooling) that reads it, and the result is a naive
loop nest no schedule recognizes. Rewritten as

    %fill = linalg.fill ins(%pad_value) outs(tensor.empty)
    %copy = linalg.copy ins(%x) outs(tensor.extract_slice %fill[lo][size])
    %out  = tensor.insert_slice %copy into %fill[lo][size]

the pad is a regular elementwise copy (vectorized by the elementwise rule, written in place into
the padded buffer), and the consumer reads a plain tensor: a direct convolution again. A source
that a linalg op of the same function computes (a depthwise conv's padding fused after the
kernel that makes its image) is inserted as it is, and only the border is filled: that op then
writes the padded buffer's interior itself.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg, tensor

from lowering.schedule.common import dynamic_sizes, matching_generics


class _NoMatch(Exception):
    pass


def _const(op: ir.Operation):
    attr = op.attributes["value"]
    for kind in (ir.IntegerAttr, ir.FloatAttr):
        try:
            return kind(attr).value
        except ValueError:
            pass
    raise _NoMatch


_FLIP = {"sge": "sle", "sgt": "slt", "sle": "sge", "slt": "sgt", "eq": "eq"}
_PREDICATES = {2: "slt", 3: "sle", 4: "sgt", 5: "sge"}  # arith.cmpi predicate numbers


class _Evaluator:
    """Symbolic values of a pad body: ("index", dim, offset) for `linalg.index dim + offset`,
    ("const", c), ("cond", [(dim, predicate, bound), ...]) for a conjunction of bound tests."""

    def __init__(self, block: ir.Block):
        self.block = block
        self.memo: dict = {}

    def __call__(self, v: ir.Value):
        key = v
        if key in self.memo:
            return self.memo[key]
        owner = v.owner
        if isinstance(owner, ir.Block):
            raise _NoMatch  # a block argument: the body reads its input or output operand
        op = owner.operation
        name = op.name
        if name == "arith.constant":
            out = ("const", _const(op))
        elif name == "linalg.index":
            out = ("index", ir.IntegerAttr(op.attributes["dim"]).value, 0)
        elif name == "arith.index_cast":
            out = self(op.operands[0])
        elif name in ("arith.addi", "arith.subi"):
            a, b = self(op.operands[0]), self(op.operands[1])
            sign = 1 if name == "arith.addi" else -1
            if a[0] == "index" and b[0] == "const":
                out = ("index", a[1], a[2] + sign * b[1])
            elif a[0] == "const" and b[0] == "index" and sign == 1:
                out = ("index", b[1], b[2] + a[1])
            elif a[0] == "const" and b[0] == "const":
                out = ("const", a[1] + sign * b[1])
            else:
                raise _NoMatch
        elif name == "arith.cmpi":
            pred = _PREDICATES.get(ir.IntegerAttr(op.attributes["predicate"]).value)
            a, b = self(op.operands[0]), self(op.operands[1])
            if pred is None:
                raise _NoMatch
            if a[0] == "const" and b[0] == "index":
                a, b, pred = b, a, _FLIP[pred]
            if a[0] != "index" or b[0] != "const":
                raise _NoMatch
            out = ("cond", [(a[1], pred, b[1] - a[2])])
        elif name == "arith.andi":
            a, b = self(op.operands[0]), self(op.operands[1])
            if a[0] != "cond" or b[0] != "cond":
                raise _NoMatch
            out = ("cond", a[1] + b[1])
        else:
            raise _NoMatch
        self.memo[key] = out
        return out


def _bounds(conds: list, rank: int) -> list[list[int | None]]:
    """[lo, hi) per output dim from the bound tests (None where a side is not tested)."""
    out: list[list[int | None]] = [[None, None] for _ in range(rank)]
    for dim, pred, c in conds:
        if dim >= rank:
            raise _NoMatch
        lo, hi = {"sge": (c, None), "sgt": (c + 1, None), "slt": (None, c), "sle": (None, c + 1)}[
            pred
        ]
        for side, value in ((0, lo), (1, hi)):
            if value is None:
                continue
            if out[dim][side] is not None and out[dim][side] != value:
                raise _NoMatch
            out[dim][side] = value
    return out


def match_pad(op: ir.Operation):
    """(source, low, high, pad value) if `op` is a TE pad generic, else None."""
    if op.name != "linalg.generic" or len(op.operands) != 1 or len(op.results) != 1:
        return None
    out_type = ir.RankedTensorType(op.results[0].type)
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    if any("parallel" not in t for t in iterators):
        return None
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if maps[0] != ir.AffineMap.get_identity(out_type.rank):
        return None
    block = op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    yielded = ops[-1].operands[0]
    if isinstance(yielded.owner, ir.Block) or yielded.owner.operation.name != "scf.if":
        return None
    if_op = yielded.owner.operation
    try:
        ev = _Evaluator(block)
        cond = ev(if_op.operands[0])
        then_ops = [o.operation for o in if_op.regions[0].blocks[0].operations]
        else_ops = [o.operation for o in if_op.regions[1].blocks[0].operations]
        extract = then_ops[-1].operands[0].owner
        if isinstance(extract, ir.Block) or extract.operation.name != "tensor.extract":
            return None
        extract = extract.operation
        fill = ev(else_ops[-1].operands[0])
        if cond[0] != "cond" or fill[0] != "const" or not isinstance(fill[1], float):
            return None
        source = extract.operands[0]
        src_type = ir.RankedTensorType(source.type)
        if src_type.rank != out_type.rank:
            return None
        bounds = _bounds(cond[1], out_type.rank)
        low, high = [], []
        for axis, index in enumerate(list(extract.operands)[1:]):
            form = ev(index)
            if form[0] != "index" or form[1] != axis:
                return None
            lo, size, total = -form[2], src_type.shape[axis], out_type.shape[axis]
            if ir.ShapedType.is_dynamic_size(size) or ir.ShapedType.is_dynamic_size(total):
                # a symbolic size (the batch) only on an axis without padding
                if lo or not (ir.ShapedType.is_dynamic_size(size) and ir.ShapedType.is_dynamic_size(total)):
                    return None
                if bounds[axis] != [None, None]:  # no bound test on it
                    return None
                low.append(0)
                high.append(0)
                continue
            hi = total - lo - size
            if lo < 0 or hi < 0:
                return None
            want = [lo if lo else None, lo + size if hi else None]
            got = [
                b if b != bound_default else None
                for b, bound_default in zip(bounds[axis], (0, total))
            ]
            if got != want:
                return None
            low.append(lo)
            high.append(hi)
    except (_NoMatch, IndexError, KeyError, ValueError):
        return None
    return source, low, high, fill[1]


def border_slabs(
    shape: list[int], low: list[int], interior: list[int]
) -> list[tuple[list[int], list[int]]]:
    """(offsets, sizes) of each padded side of a `shape` buffer whose `interior` sits at `low`:
    a slab across the whole extent of the other axes, low side then high side, axis by axis."""
    slabs = []
    for axis in range(len(shape)):
        high = shape[axis] - low[axis] - interior[axis]
        for start, size in ((0, low[axis]), (low[axis] + interior[axis], high)):
            if size <= 0:
                continue
            sizes = list(shape)
            sizes[axis] = size
            offsets = [0] * len(shape)
            offsets[axis] = start
            slabs.append((offsets, sizes))
    return slabs


def _empty(shape: list[int], element_type: ir.Type, like: ir.Value) -> ir.Value:
    """An empty tensor of `shape`, its symbolic sizes those of `like`: they are on axes without
    padding (a symbolic batch), where the padded tensor and its source agree."""
    sizes = iter(dynamic_sizes(shape, like))
    mixed = [next(sizes) if ir.ShapedType.is_dynamic_size(d) else d for d in shape]
    return tensor.EmptyOp(mixed, element_type).result


def _border(value: ir.Value, out_type, src_type, low: list[int], like: ir.Value) -> ir.Value:
    """A tensor of `out_type` holding `value` outside the interior (`src_type` at `low`): one
    fill per padded side (`border_slabs`); `like` gives the symbolic sizes (`_empty`)."""
    shape = list(out_type.shape)
    ones = [1] * len(shape)
    result = _empty(shape, out_type.element_type, like)
    for offsets, slab in border_slabs(shape, low, list(src_type.shape)):
        slab_type = ir.RankedTensorType.get(slab, out_type.element_type)
        dynamic = dynamic_sizes(slab, like)
        # filled in place: a fill of a slab of its own became a buffer and a strided copy
        part = tensor.ExtractSliceOp(slab_type, result, [], dynamic, [], offsets, slab, ones)
        filled = linalg.fill(value, outs=[part.result])
        result = tensor.InsertSliceOp(filled, result, [], dynamic, [], offsets, slab, ones).result
    return result


def raise_pads(func_op: ir.Operation) -> int:
    """Rewrite every TE pad generic of `func_op` (module docstring); returns how many."""
    found = matching_generics(func_op, match_pad)
    for op, (source, low, high, value) in found:
        out_type = ir.RankedTensorType(op.results[0].type)
        src_type = ir.RankedTensorType(source.type)
        rank = out_type.rank
        with ir.InsertionPoint(op), op.location:
            cst = ir.Operation.create(
                "arith.constant",
                results=[out_type.element_type],
                attributes={"value": ir.FloatAttr.get(out_type.element_type, value)},
            ).result
            ones = [1] * rank
            producer = None if isinstance(source.owner, ir.Block) else source.owner.operation
            computed = (
                producer is not None
                and producer.name.startswith("linalg.")
                and len(list(source.uses)) == 1  # the pad itself
            )
            dynamic = dynamic_sizes(list(src_type.shape), source)
            if not computed:  # an argument, or a view of one: copied into a filled buffer
                empty = _empty(list(out_type.shape), out_type.element_type, source)
                filled = linalg.fill(cst, outs=[empty])
                interior = tensor.ExtractSliceOp(
                    src_type, filled, [], dynamic, [], low, src_type.shape, ones
                )
                # linalg.copy, not an identity generic: canonicalization would erase that one
                # and leave a strided memref.copy (a runtime call per element) to bufferization.
                copy = linalg.copy(source, outs=[interior.result])
            else:
                # Computed here: inserted as it is, the op that computes it writes into the
                # interior (empty-tensor elimination), and only the border is filled.
                filled, copy = _border(cst, out_type, src_type, low, source), source
            inserted = tensor.InsertSliceOp(copy, filled, [], dynamic, [], low, src_type.shape, ones)
        op.results[0].replace_all_uses_with(inserted.result)
        op.erase()
    return len(found)
