"""Strided convolutions as unit-stride convolutions over strided views (one per input phase).

A stride-s window reads the image at `s * p + r`. No register tile of the conv rule covers that
read: its rows run along an image axis, and `s * p` is not a projected permutation, so the
vectorizer refuses it once the window loops are folded. Split the window loop by phase,
`r = s * q + j` for j in [0, s): the image read becomes `s * (p + q) + j`, i.e. `p + q` on the
view `image[j::s]` (a strided slice: no copy), and the weight read is `weight[j::s]` along r. Each
phase is then an ordinary unit-stride convolution with only its own taps (a 3x3 / 2 window:
2x2 + 2x1 + 1x2 + 1x1 = 9 taps, where zero-padding every phase to 2x2 would do 16), and the
phases accumulate in turn into the same output (each one's init is the previous one's result).
"""

from __future__ import annotations

import itertools

from mlir import ir

from lowering.schedule.common import classify, is_mul_add, matching_generics, strided_slice


def _strided_axis(expr: ir.AffineExpr, iterators: list[str]) -> tuple[int, int, int] | None:
    """(p, r, s) when `expr` is `s * p + r` (either order) with p parallel, r a reduction, s > 1."""
    if not isinstance(expr, ir.AffineAddExpr):
        return None
    for scaled, plain in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
        if not isinstance(plain, ir.AffineDimExpr) or not isinstance(scaled, ir.AffineMulExpr):
            continue
        dim, const = scaled.lhs, scaled.rhs
        if isinstance(dim, ir.AffineConstantExpr):
            dim, const = const, dim
        if not isinstance(dim, ir.AffineDimExpr) or not isinstance(const, ir.AffineConstantExpr):
            continue
        p, r, s = dim.position, plain.position, const.value
        if s > 1 and iterators[p] == "parallel" and iterators[r] == "reduction":
            return p, r, s
    return None


def _plan(op: ir.Operation):
    """(image operand, weight operand, maps, [(axis, p, r, s)], weight axis of each r, loop
    ranges) for a strided convolution whose windows have static sizes (a symbolic batch stays
    whole in every phase's view), else None."""
    if op.name != "linalg.generic" or len(op.operands) != 3 or len(op.results) != 1:
        return None
    if not is_mul_add(op):
        return None
    info = classify(op)  # loop ranges and iterators (the ranges from the weight and output)
    dims = info.operand_dims
    image = [i for i in (0, 1) if dims[i] is None]
    if len(image) != 1 or dims[2] is None:
        return None
    image = image[0]
    weight = 1 - image
    image_shape = ir.RankedTensorType(op.operands[image].type).shape
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    axes = []
    for axis, expr in enumerate(maps[image].results):
        if isinstance(expr, ir.AffineDimExpr):
            continue
        found = _strided_axis(expr, info.iterators)
        if found is not None:
            axes.append((axis, *found))
        elif not isinstance(expr, (ir.AffineAddExpr, ir.AffineConstantExpr)):
            return None  # something else than a window or a fixed index (a batch of 1 read
            # at 0 by a window raised from TE's gather): not a convolution
    if not axes:
        return None
    for axis, p, r, _ in axes:  # the windows are cut by phase: their sizes must be known
        if ir.ShapedType.is_dynamic_size(image_shape[axis]) or None in (info.ranges[p], info.ranges[r]):
            return None
    if not ir.RankedTensorType(op.operands[weight].type).has_static_shape:
        return None
    w_axis = {}
    for _, _, r, _ in axes:
        if dims[weight].count(r) != 1:
            return None
        w_axis[r] = dims[weight].index(r)
    return image, weight, maps, axes, w_axis, info.ranges


def split_strided_convs(func_op: ir.Operation) -> int:
    """Rewrite every strided convolution of `func_op` as its phases (module docstring); returns
    how many were rewritten."""
    found = matching_generics(func_op, _plan)
    for op, (image, weight, maps, axes, w_axis, ranges) in found:
        n = maps[2].n_dims
        exprs = list(maps[image].results)
        for axis, p, r, _ in axes:
            exprs[axis] = ir.AffineDimExpr.get(p) + ir.AffineDimExpr.get(r)
        new_maps = list(maps)
        new_maps[image] = ir.AffineMap.get(n, 0, exprs)
        map_attr = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps])
        acc = op.operands[2]
        with ir.InsertionPoint(op), op.location:
            for phase in itertools.product(*[range(s) for *_, s in axes]):
                taps = [-(-(ranges[r] - j) // s) for (_, _, r, s), j in zip(axes, phase)]
                if min(taps) <= 0:
                    continue  # a window shorter than the stride: this phase has no tap
                image_cuts = {
                    axis: (j, ranges[p] + q - 1, s)
                    for (axis, p, _, s), j, q in zip(axes, phase, taps)
                }
                weight_cuts = {
                    w_axis[r]: (j, q, s) for (_, _, r, s), j, q in zip(axes, phase, taps)
                }
                image_view = strided_slice(op.operands[image], image_cuts)
                weight_view = strided_slice(op.operands[weight], weight_cuts)
                piece = op.clone(ir.InsertionPoint(op))
                piece.operands[image] = image_view
                piece.operands[weight] = weight_view
                piece.operands[2] = acc
                piece.attributes["indexing_maps"] = map_attr
                acc = piece.results[0]
        op.results[0].replace_all_uses_with(acc)
        op.erase()
    return len(found)
