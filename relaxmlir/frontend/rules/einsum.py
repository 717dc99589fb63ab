"""`torch.einsum` as permute_dims / reshape / sum / matmul (how torch itself evaluates it).

Operands are contracted left to right; each pairwise step puts the shared output labels first
(batch), the labels of one operand next (rows / columns) and the summed labels last, so that
one `matmul` does the step. `...` becomes fresh labels. Repeated labels within one operand
(diagonals) are not supported.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import fx

from relaxmlir.frontend.importer import Importer, register
from relaxmlir.frontend.rules.common import call, ndim, shape_of
from relaxmlir.frontend.rules.shape import permute, reshape

_FRESH = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _parse(equation: str, ranks: list[int], where: str) -> tuple[list[str], str]:
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(
            f"einsum '{equation}': {len(terms)} terms for {len(ranks)} operands{where}"
        )
    ellipsis = max(
        (r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0
    )
    fresh = _FRESH[:ellipsis]
    expanded = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            t = t.replace("...", fresh[ellipsis - (r - len(t.replace("...", ""))) :])
        if len(t) != r:
            raise ValueError(f"einsum '{equation}': term '{t}' for a rank-{r} operand{where}")
        if len(set(t)) != len(t):
            raise NotImplementedError(f"einsum '{equation}': repeated label in one term{where}")
        expanded.append(t)
    if arrow:
        out = out.replace("...", fresh)
    else:
        counts = {c: "".join(expanded).count(c) for c in "".join(expanded)}
        out = fresh + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in fresh))
    return expanded, out


def _sum_out(ctx: Importer, x, labels: str, keep: str):
    """Sum the labels of `x` that are not in `keep`."""
    gone = [i for i, c in enumerate(labels) if c not in keep]
    if not gone:
        return x, labels
    return call(ctx, "sum", x, gone, False), "".join(c for c in labels if c in keep)


def _size(x, labels: str) -> dict:
    return dict(zip(labels, shape_of(x)))


def _pair(ctx: Importer, a, la: str, b, lb: str, keep: str):
    """Contract `a` and `b` into the labels of `keep` that they hold."""
    a, la = _sum_out(ctx, a, la, keep + lb)
    b, lb = _sum_out(ctx, b, lb, keep + la)
    sizes = {**_size(a, la), **_size(b, lb)}
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    rows = [c for c in la if c not in lb]
    cols = [c for c in lb if c not in la]

    def dims(cs):
        return [sizes[c] for c in cs]

    def prod(cs):
        return int(np.prod(dims(cs), dtype=np.int64))

    a = permute(ctx, a, [la.index(c) for c in batch + rows + summed])
    a = reshape(ctx, a, dims(batch) + [prod(rows), prod(summed)])
    b = permute(ctx, b, [lb.index(c) for c in batch + summed + cols])
    b = reshape(ctx, b, dims(batch) + [prod(summed), prod(cols)])
    out = reshape(ctx, call(ctx, "matmul", a, b), dims(batch + rows + cols))
    return out, "".join(batch + rows + cols)


def einsum(ctx: Importer, equation: str, operands: list, where: str = ""):
    terms, out = _parse(equation, [ndim(x) for x in operands], where)
    x, lx = operands[0], terms[0]
    for i in range(1, len(operands)):
        later = "".join(terms[i + 1 :]) + out
        x, lx = _pair(ctx, x, lx, operands[i], terms[i], later)
    x, lx = _sum_out(ctx, x, lx, out)
    return permute(ctx, x, [lx.index(c) for c in out])


def _einsum(ctx: Importer, node: fx.Node):
    equation = ctx.arg(node, 0, "equation")
    operands = [ctx.retrieve(a) for a in node.args[1:]]
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    if not operands:
        raise ValueError(f"einsum: no operands at node '{node.name}'")
    return einsum(ctx, equation, operands, f" at node '{node.name}'")


register(_einsum, torch.einsum, torch.functional.einsum, torch.ops.aten.einsum)
