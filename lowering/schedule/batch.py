"""Kernels over a symbolic batch: a loop over the samples around the static kernel of one.

A convolution network built for any batch size has kernels whose tensors are `?` along axis 0
and static elsewhere. Scheduled with that `?`, they cost the build several times the static
model's time (value bounds over dynamic slices when loops are hoisted, bufferization of dynamic
subviews: ResNet-18 10.3 s against 2.2) and lose fusions that need static shapes. When every op
maps the batch axis straight through (no reduction, reshape or index over it), the samples are
independent and the kernel is `for b < n: out[b] = kernel_1(in[b])`, where `kernel_1` is the
kernel at batch 1: a static function that gets the static build's schedule (the same IR, so the
same speed), run on one sample's slice of each batched argument in place.

Kernels whose contractions have little work per sample (a linear layer over `?x512`: one row)
keep the symbolic schedule, which tiles the rows of the whole batch and reuses each weight
panel across them.
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, scf, tensor

from lowering.schedule.common import classify, dim_of, remap_operands, slice_sizes

PER_SAMPLE = "per-sample"  # first of the rules recorded on such a kernel (SCHEDULE_ATTR)
# A conv's or matmul's rows per sample (its output positions along loops that also index the
# batched input) below which the batch stays symbolic: the rows of all samples make the tiles.
MIN_ROWS_PER_SAMPLE = 32


def batched_arguments(func_op: ir.Operation) -> list[int] | None:
    """The argument positions of a kernel whose samples are independent, if it has any and
    enough work per sample (module docstring); None otherwise. The batched arguments are the
    tensors `?` along axis 0 only, and every result is one of them (the trailing out-arguments)."""
    found = _analyze(func_op)
    if found is None:
        return None
    entry = func_op.regions[0].blocks[0]
    generics = [op.operation for op in entry.operations if op.operation.name == "linalg.generic"]
    rows = [r for r in (_rows_per_sample(op, found) for op in generics) if r is not None]
    if not rows or min(rows) < MIN_ROWS_PER_SAMPLE:
        return None
    return found.arguments


class _Samples:
    """What the analysis of one kernel knows: the batch axis of each batched tensor (`axes`),
    the index values equal to a batch size (`sizes`), and which of them provably have the same
    batch size (a union-find over groups: two arguments `?x..` may be two symbols)."""

    def __init__(self) -> None:
        self.arguments: list[int] = []
        self.axes: dict = {}
        self.sizes: dict = {}  # index value -> group
        self.groups: dict = {}  # tensor -> group
        self.parent: list[int] = []

    def new_group(self) -> int:
        self.parent.append(len(self.parent))
        return len(self.parent) - 1

    def root(self, group: int) -> int:
        while self.parent[group] != group:
            group = self.parent[group]
        return group

    def join(self, values) -> int:
        """One group for `values` (batched tensors and batch sizes); returns it."""
        roots = {self.root(self.groups[v] if v in self.groups else self.sizes[v]) for v in values}
        first, *rest = sorted(roots)
        for r in rest:
            self.parent[r] = first
        return first

    def batched(self, value: ir.Value, axis: int, *related: ir.Value) -> None:
        """Record `value` with its batch axis, in the group of the `related` values."""
        self.axes[value] = axis
        self.groups[value] = self.join(related)


def _analyze(func_op: ir.Operation) -> _Samples | None:
    """The analysis of a kernel whose samples are independent, else None."""
    entry = func_op.regions[0].blocks[0]
    state = _Samples()
    for i, arg in enumerate(entry.arguments):
        axis = _batch_axis(arg.type)
        if axis is False:
            return None
        if axis is not None:
            state.axes[arg], state.groups[arg] = axis, state.new_group()
            state.arguments.append(i)
    if not state.arguments:
        return None
    for op in entry.operations:
        if not _propagate(op.operation, state):
            return None
    ret = list(entry.operations)[-1].operation
    outs = list(entry.arguments)[len(entry.arguments) - len(ret.operands) :]
    axes = state.axes
    if not len(ret.operands) or any(
        axes.get(v) != 0 or v.type != o.type or o not in axes for v, o in zip(ret.operands, outs)
    ):
        return None
    args = [entry.arguments[i] for i in state.arguments]
    if len({state.root(state.groups[a]) for a in [*args, *ret.operands]}) != 1:
        return None  # batches of sizes not known to be equal
    return state


def _batch_axis(t: ir.Type):
    """0 for a tensor `?` on axis 0 only, None for one without `?` (or not a tensor), False for
    other dynamic shapes (not handled)."""
    if not isinstance(t, ir.RankedTensorType):
        return False if isinstance(t, ir.ShapedType) else None
    dynamic = [
        i for i, d in enumerate(ir.RankedTensorType(t).shape) if ir.ShapedType.is_dynamic_size(d)
    ]
    return None if not dynamic else 0 if dynamic == [0] else False


def _only_dynamic_axis(t: ir.Type) -> int | None:
    shape = ir.RankedTensorType(t).shape
    dynamic = [i for i, d in enumerate(shape) if ir.ShapedType.is_dynamic_size(d)]
    return dynamic[0] if len(dynamic) == 1 else None


def _static(t: ir.Type) -> bool:
    return not isinstance(t, ir.ShapedType) or ir.ShapedType(t).has_static_shape


def _propagate(op: ir.Operation, state: _Samples) -> bool:
    """Record the batch axis of `op`'s tensor results and its batch-size results in `state`;
    False where `op` mixes samples or uses the batch size otherwise."""
    name = op.name
    operands = list(op.operands)
    axes, sizes = state.axes, state.sizes
    batched = [v for v in operands if v in axes]
    uses_size = [v for v in operands if v in sizes]
    if name == "func.return":
        return not uses_size
    if name == "tensor.dim":
        found = dim_of(op.results[0])
        if batched and found is None:
            return False
        if batched and found[1] == axes[operands[0]]:
            sizes[op.results[0]] = state.join(batched)
        return True
    if name == "tensor.empty":
        if len(uses_size) != len(operands):
            return False
        axis = _only_dynamic_axis(op.results[0].type)
        if operands and axis is None:
            return False
        if operands:
            state.batched(op.results[0], axis, *uses_size)
        return True
    if name in ("tensor.extract_slice", "tensor.insert_slice"):
        return _propagate_slice(op, state)
    if name == "tensor.pad":
        if not batched:
            return not uses_size and _static(op.results[0].type)
        axis = axes[operands[0]]
        low = ir.DenseI64ArrayAttr(op.attributes["static_low"])
        high = ir.DenseI64ArrayAttr(op.attributes["static_high"])
        if uses_size or low[axis] != 0 or high[axis] != 0:
            return False
        state.batched(op.results[0], axis, operands[0])
        return True
    if name in ("tensor.collapse_shape", "tensor.expand_shape"):
        return _propagate_reshape(op, state)
    if name == "tensor.cast":
        if not batched:
            return _static(op.results[0].type)
        axis = _only_dynamic_axis(op.results[0].type)
        if axis != axes[operands[0]]:
            return False
        state.batched(op.results[0], axis, operands[0])
        return True
    if name.startswith("linalg."):
        if not batched:
            return not uses_size and all(_static(r.type) for r in op.results)
        if uses_size or _batch_loop(op, state) is None:
            return False
        outs = operands[len(operands) - len(op.results) :]
        for value, result in zip(outs, op.results):
            state.batched(result, axes[value], *batched)
        return True
    # Anything else: scalars only (constants, index arithmetic that does not read the batch).
    if batched or uses_size or len(op.regions):
        return False
    return all(_static(r.type) for r in op.results)


def _propagate_slice(op: ir.Operation, state: _Samples) -> bool:
    """An extract_slice / insert_slice takes the whole batch (offset 0, size n, stride 1) of a
    batched tensor, or touches none."""
    axes, sizes = state.axes, state.sizes
    operands = list(op.operands)
    whole = operands[1] if op.name == "tensor.insert_slice" else operands[0]
    part = operands[0] if op.name == "tensor.insert_slice" else op.results[0]
    dynamic_sizes = slice_sizes(op)
    if any(v in sizes and v not in dynamic_sizes for v in operands):
        return False
    if whole not in axes:
        if part in axes or any(v in sizes for v in dynamic_sizes):
            return False
        return _static(part.type) and _static(op.results[0].type)
    axis = axes[whole]
    offsets = ir.DenseI64ArrayAttr(op.attributes["static_offsets"])
    static_sizes = ir.DenseI64ArrayAttr(op.attributes["static_sizes"])
    strides = ir.DenseI64ArrayAttr(op.attributes["static_strides"])
    if (
        offsets[axis] != 0
        or strides[axis] != 1
        or not ir.ShapedType.is_dynamic_size(static_sizes[axis])
    ):
        return False
    k = sum(ir.ShapedType.is_dynamic_size(s) for s in list(static_sizes)[:axis])
    if len(dynamic_sizes) != 1 or dynamic_sizes[k] not in sizes:
        return False
    part_axis = _only_dynamic_axis(part.type)
    if part_axis is None:
        return False
    if op.name == "tensor.insert_slice":
        if axes.get(part) != part_axis:
            return False
        state.batched(op.results[0], axis, whole, part, dynamic_sizes[k])
    else:
        state.batched(part, part_axis, whole, dynamic_sizes[k])
    return True


def _propagate_reshape(op: ir.Operation, state: _Samples) -> bool:
    """A reshape keeps the batch axis in a group of its own (or with unit axes)."""
    source, result = op.operands[0], op.results[0]
    if source not in state.axes:
        return not any(v in state.sizes for v in op.operands) and _static(result.type)
    groups = [
        [ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)]
        for g in ir.ArrayAttr(op.attributes["reassociation"])
    ]
    collapse = op.name == "tensor.collapse_shape"
    wide, narrow = (source, result) if collapse else (result, source)
    wide_shape = ir.RankedTensorType(wide.type).shape
    axis = state.axes[source]
    group_index = next(i for i, g in enumerate(groups) if (axis in g if collapse else i == axis))
    group = groups[group_index]
    dynamic = [a for a in group if ir.ShapedType.is_dynamic_size(wide_shape[a])]
    if len(dynamic) != 1 or any(wide_shape[a] != 1 for a in group if a != dynamic[0]):
        return False
    if _only_dynamic_axis(result.type) is None or _only_dynamic_axis(narrow.type) is None:
        return False
    output_sizes = [] if collapse else list(op.operands)[1:]
    if any(v not in state.sizes for v in output_sizes):
        return False
    state.batched(result, group_index if collapse else dynamic[0], source, *output_sizes)
    return True


def _maps(op: ir.Operation) -> tuple[list[ir.AffineMap], list[str]] | None:
    if op.name == "linalg.generic":
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        iterators = [
            str(a).split("<")[-1].rstrip(">") for a in ir.ArrayAttr(op.attributes["iterator_types"])
        ]
        return maps, iterators
    if op.name in ("linalg.copy", "linalg.fill"):
        rank = ir.RankedTensorType(op.results[0].type).rank
        identity = ir.AffineMap.get_identity(rank)
        scalar = ir.AffineMap.get(rank, 0, [])
        return [scalar if op.name == "linalg.fill" else identity, identity], ["parallel"] * rank
    return None


def _uses_dim(expr: ir.AffineExpr, dim: int) -> bool:
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position == dim
    if isinstance(expr, ir.AffineBinaryExpr):
        return _uses_dim(expr.lhs, dim) or _uses_dim(expr.rhs, dim)
    return False


def _batch_loop(op: ir.Operation, state: _Samples) -> int | None:
    """The loop of a linalg op that runs along the batch axis of each batched operand (and of no
    other operand axis), if it is one parallel loop that every result keeps."""
    axes = state.axes
    found = _maps(op)
    if found is None:
        return None
    maps, iterators = found
    operands = list(op.operands)
    loop = None
    for value, amap in zip(operands, maps):
        if value not in axes:
            continue
        expr = amap.results[axes[value]]
        if not isinstance(expr, ir.AffineDimExpr) or loop not in (None, expr.position):
            return None
        loop = expr.position
    if loop is None or iterators[loop] != "parallel":
        return None
    for value, amap in zip(operands, maps):
        others = [e for i, e in enumerate(amap.results) if value not in axes or i != axes[value]]
        if any(_uses_dim(e, loop) for e in others):
            return None
    outs = operands[len(operands) - len(op.results) :]
    if any(v not in axes for v in outs):
        return None
    if op.name == "linalg.generic" and not _body_keeps_samples(op, loop, state):
        return None
    return loop


def _body_keeps_samples(op: ir.Operation, loop: int, state: _Samples) -> bool:
    """A body may read a batched tensor from outside (a pooling window's gather) only at the
    sample of its own iteration: `tensor.extract %t[.., linalg.index <loop>, ..]` with the index
    at the batch axis; the batch loop's index is used for nothing else."""
    nested: list[ir.Operation] = []

    def collect(inner):
        nested.append(inner.operation)
        return ir.WalkResult.ADVANCE

    for inner in op.regions[0].blocks[0].operations:
        inner.operation.walk(collect)
    sample_index = {
        inner.results[0]
        for inner in nested
        if inner.name == "linalg.index" and ir.IntegerAttr(inner.attributes["dim"]).value == loop
    }
    for inner in nested:
        operands = list(inner.operands)
        if inner.name == "tensor.extract" and operands[0] in state.axes:
            axis = state.axes[operands[0]]
            indices = operands[1:]
            if indices[axis] not in sample_index or any(
                v in sample_index for i, v in enumerate(indices) if i != axis
            ):
                return False
        elif any(v in state.axes or v in state.sizes or v in sample_index for v in operands):
            return False
    return True


def _rows_per_sample(op: ir.Operation, state: _Samples) -> int | None:
    """For a contraction of a batched input with a weight (a linalg.generic with a reduction
    loop and an input without batch: a conv, a matmul): the product of its parallel loops, but
    the batch, that index the batched input, i.e. the output rows one sample gives the register
    tiles. None for other ops."""
    maps, iterators = _maps(op)
    inputs = list(op.operands)[: len(op.operands) - len(op.results)]
    if "reduction" not in iterators or all(v in state.axes for v in inputs):
        return None
    loop = _batch_loop(op, state)
    ranges = classify(op).ranges
    for value, amap in zip(inputs, maps):
        if value in state.axes:
            dims = [d for d in range(len(iterators)) if any(_uses_dim(e, d) for e in amap.results)]
            return math.prod(
                ranges[d] or 1 for d in dims if d != loop and iterators[d] == "parallel"
            )
    return None


# ----------------------------------------------------------------------------------------------
# The static kernel of one sample, and the loop around it


def sample_function(func_op: ir.Operation) -> ir.Module:
    """A module holding `func_op` at batch 1 (same symbol, every shape static): the batch axis
    of each batched tensor becomes 1, the batch size the constant 1, and nothing else changes
    (no canonicalization: the rules match the ops as the static build has them, e.g. a pad's
    `linalg.index` of every axis)."""
    module = ir.Module.create(loc=func_op.location)
    sample = func_op.clone(ip=ir.InsertionPoint(module.body))
    state = _analyze(sample)
    axes, sizes = state.axes, state.sizes
    entry = sample.regions[0].blocks[0]
    with func_op.context, func_op.location:
        for arg in entry.arguments:
            if arg in axes:
                arg.set_type(_one_sample(arg.type, axes[arg]))
        for op in [o.operation for o in entry.operations]:
            if any(v in sizes for v in op.operands):
                _rebuild_static(op, axes, sizes)
            else:
                for result in op.results:
                    if result in axes:
                        result.set_type(_one_sample(result.type, axes[result]))
        for op in [o.operation for o in entry.operations]:
            if op.name == "tensor.dim" and op.results[0] in sizes:
                op.erase()
        ret = list(entry.operations)[-1].operation
        sample.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in entry.arguments], [v.type for v in ret.operands])
        )
    return module


def _one_sample(t: ir.Type, axis: int) -> ir.Type:
    t = ir.RankedTensorType(t)
    shape = list(t.shape)
    shape[axis] = 1
    return ir.RankedTensorType.get(shape, t.element_type, t.encoding)


def _rebuild_static(op: ir.Operation, axes: dict, sizes: set) -> None:
    """Replace an op that takes the batch size as an operand (`tensor.empty`, a slice's size, an
    expand_shape's output size) by one with the static size 1."""
    ip = ir.InsertionPoint(op)
    result = op.results[0]
    static = _one_sample(result.type, axes[result])
    if op.name == "tensor.empty":
        new = tensor.EmptyOp(
            ir.RankedTensorType(static).shape, ir.RankedTensorType(static).element_type, ip=ip
        )
    elif op.name == "tensor.expand_shape":
        shape = list(ir.DenseI64ArrayAttr(op.attributes["static_output_shape"]))
        shape[axes[result]] = 1
        dynamic = [v for v in list(op.operands)[1:] if v not in sizes]
        new = tensor.ExpandShapeOp(
            static, op.operands[0], op.attributes["reassociation"], dynamic, shape, ip=ip
        )
    else:  # extract_slice / insert_slice: the size operand of the whole batch
        operands = list(op.operands)
        *_, n_offsets, n_sizes, n_strides = ir.DenseI32ArrayAttr(
            op.attributes["operandSegmentSizes"]
        )
        head = len(operands) - n_offsets - n_sizes - n_strides
        offsets = operands[head : head + n_offsets]
        dynamic = operands[head + n_offsets : head + n_offsets + n_sizes]
        strides = operands[head + n_offsets + n_sizes :]
        static_sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
        whole = operands[1] if op.name == "tensor.insert_slice" else operands[0]
        static_sizes[axes[whole]] = 1
        args = (
            offsets, [v for v in dynamic if v not in sizes], strides,
            list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"])), static_sizes,
            list(ir.DenseI64ArrayAttr(op.attributes["static_strides"])),
        )  # fmt: skip
        if op.name == "tensor.insert_slice":
            new = tensor.InsertSliceOp(operands[0], operands[1], *args, ip=ip)
        else:
            new = tensor.ExtractSliceOp(static, operands[0], *args, ip=ip)
    axes[new.results[0]] = axes[result]  # the ops after it read its batch axis
    result.replace_all_uses_with(new.results[0])
    op.erase()


def loop_over_samples(func_op: ir.Operation, sample: ir.Operation, batched: list[int]) -> None:
    """Make `func_op`'s body a loop over the batch whose body is `sample`'s (scheduled, batch 1),
    run on each sample's slice of the batched arguments; the out-arguments are the loop's
    iteration values, so every sample is computed in place."""
    entry = func_op.regions[0].blocks[0]
    old = [op.operation for op in entry.operations]
    args = list(entry.arguments)
    n_out = len(old[-1].operands)
    outs = args[len(args) - n_out :]
    sample_entry = sample.regions[0].blocks[0]
    with func_op.context, func_op.location:
        index = ir.IndexType.get()
        ip = ir.InsertionPoint.at_block_begin(entry)
        c0 = arith.ConstantOp(index, 0, ip=ip).result
        c1 = arith.ConstantOp(index, 1, ip=ip).result
        n = tensor.DimOp(outs[0], c0, ip=ip).result
        loop = scf.ForOp(c0, n, c1, outs, ip=ip)
        b = loop.induction_variable
        body = ir.InsertionPoint(loop.body)
        accs = dict(zip([len(args) - n_out + i for i in range(n_out)], loop.inner_iter_args))
        mapping: dict = {}
        for i, (outer, inner) in enumerate(zip(args, sample_entry.arguments)):
            if i not in batched:
                mapping[inner] = outer
                continue
            if not list(inner.uses):  # an out-argument read only for its size
                continue
            mapping[inner] = _sample_slice(accs.get(i, outer), b, inner.type, body)
        for op in [o.operation for o in sample_entry.operations][:-1]:
            new = op.clone(ip=body)
            remap_operands(new, mapping)
            mapping.update(zip(op.results, new.results))
        results = [mapping.get(v, v) for v in list(sample_entry.operations)[-1].operation.operands]
        updated = [_insert_sample(r, acc, b, body) for r, acc in zip(results, loop.inner_iter_args)]
        scf.YieldOp(updated, ip=body)
        ret = old[-1]
        for i in range(n_out):
            ret.operands[i] = loop.results[i]
        for op in reversed(old[:-1]):
            op.erase()


def _offsets(rank: int) -> list[int]:
    return [ir.ShapedType.get_dynamic_stride_or_offset()] + [0] * (rank - 1)


def _sample_slice(value: ir.Value, b: ir.Value, sample_type: ir.Type, ip) -> ir.Value:
    shape = ir.RankedTensorType(sample_type).shape
    return tensor.ExtractSliceOp(
        sample_type, value, [b], [], [], _offsets(len(shape)), shape, [1] * len(shape), ip=ip
    ).result


def _insert_sample(value: ir.Value, into: ir.Value, b: ir.Value, ip) -> ir.Value:
    shape = ir.RankedTensorType(value.type).shape
    return tensor.InsertSliceOp(
        value, into, [b], [], [], _offsets(len(shape)), shape, [1] * len(shape), ip=ip
    ).result
