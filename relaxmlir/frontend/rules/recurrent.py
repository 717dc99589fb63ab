"""Recurrent layers (`aten.lstm`, `aten.gru`, `aten.rnn_tanh`, `aten.rnn_relu`) unrolled into relax
ops here, as torch's decompositions would: the inputs' projection of every step in one linear
layer per layer and direction, then each step's recurrent product and gates.

Translated directly, the program skips `run_decompositions`, whose unrolling of the cells took
2.8 s of a 2 x 256 LSTM's 64-step import (256 cell decompositions traced through torch).
"""

from __future__ import annotations

from torch import fx
from torch.ops import aten

from relaxmlir.frontend.importer import Importer, register
from relaxmlir.frontend.rules.common import call, emit_binary, first, shape_of
from relaxmlir.frontend.rules.shape import transpose
from relaxmlir.frontend.rules.slicing import select, stack, strided_slice


def _gate(ctx: Importer, x, k: int, hidden: int):
    """Gate `k` of a [B, G * H] pre-activation: its H columns."""
    return strided_slice(ctx, x, [1], [k * hidden], [(k + 1) * hidden])


def _cell(ctx: Importer, kind: str, xt, h, c, w_hh, b_hh):
    """One step: (h', c') from the step's projected input `xt` ([B, G * H], b_ih included)."""
    hidden = shape_of(h)[-1]
    hh = call(ctx, "linear", h, w_hh, b_hh)
    if kind == "gru":  # r and z see both sums; n sees r * (h W_hn + b_hn)
        r, z = (
            call(
                ctx,
                "sigmoid",
                emit_binary(ctx, "add", _gate(ctx, xt, k, hidden), _gate(ctx, hh, k, hidden)),
            )
            for k in (0, 1)
        )
        n = emit_binary(ctx, "multiply", r, _gate(ctx, hh, 2, hidden))
        n = call(ctx, "tanh", emit_binary(ctx, "add", _gate(ctx, xt, 2, hidden), n))
        # h' = (1 - z) * n + z * h = n + z * (h - n)
        step = emit_binary(ctx, "multiply", z, emit_binary(ctx, "subtract", h, n))
        return emit_binary(ctx, "add", n, step), None
    gates = emit_binary(ctx, "add", xt, hh)
    if kind == "rnn_tanh":
        return call(ctx, "tanh", gates), None
    if kind == "rnn_relu":
        return call(ctx, "nn.relu", gates), None
    i, f, g, o = (_gate(ctx, gates, k, hidden) for k in range(4))
    i, f, o = (call(ctx, "sigmoid", v) for v in (i, f, o))
    g = call(ctx, "tanh", g)
    c = emit_binary(
        ctx, "add", emit_binary(ctx, "multiply", f, c), emit_binary(ctx, "multiply", i, g)
    )
    return emit_binary(ctx, "multiply", o, call(ctx, "tanh", c)), c


def _recurrent(ctx: Importer, node: fx.Node, kind: str):
    """`aten.<kind>.input(input, hx, params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first)` -> (output, h_n[, c_n])."""
    x, hx, params = first(ctx, node), ctx.arg(node, 1, "hx"), list(ctx.arg(node, 2, "params"))
    has_biases, layers = ctx.arg(node, 3, "has_biases"), ctx.arg(node, 4, "num_layers")
    dropout, train = ctx.arg(node, 5, "dropout"), ctx.arg(node, 6, "train")
    bidirectional, batch_first = ctx.arg(node, 7, "bidirectional"), ctx.arg(node, 8, "batch_first")
    where = f"aten.{kind} at node '{node.name}'"
    if train and dropout:
        raise NotImplementedError(f"{where}: dropout between layers in training mode")
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if len(params) != layers * directions * per:
        raise NotImplementedError(
            f"{where}: {len(params)} weights for {layers} layer(s) x {directions} direction(s) "
            f"(projections, proj_size > 0, are not supported)"
        )
    h0 = list(hx) if kind == "lstm" else [hx]
    if batch_first:
        x = transpose(ctx, x, 0, 1)  # time-major: [T, B, I]
    steps = shape_of(x)[0]
    if not isinstance(steps, int):
        raise NotImplementedError(f"{where}: a symbolic sequence length ({steps})")
    last_h, last_c = [], []
    for layer in range(layers):
        outputs = []
        for d in range(directions):
            at = (layer * directions + d) * per
            w_ih, w_hh = params[at], params[at + 1]
            b_ih, b_hh = (params[at + 2], params[at + 3]) if has_biases else (None, None)
            projected = call(ctx, "linear", x, w_ih, b_ih)  # every step's input at once
            h = select(ctx, h0[0], 0, layer * directions + d)
            c = select(ctx, h0[1], 0, layer * directions + d) if kind == "lstm" else None
            hs = [None] * steps
            for t in reversed(range(steps)) if d else range(steps):
                h, c = _cell(ctx, kind, select(ctx, projected, 0, t), h, c, w_hh, b_hh)
                hs[t] = h
            outputs.append(stack(ctx, hs, 0))
            last_h.append(h)
            last_c.append(c)
        x = outputs[0] if directions == 1 else call(ctx, "concat", outputs, 2)
    out = transpose(ctx, x, 0, 1) if batch_first else x
    results = (out, stack(ctx, last_h, 0))
    return results + ((stack(ctx, last_c, 0),) if kind == "lstm" else ())


register(lambda ctx, node: _recurrent(ctx, node, "lstm"), aten.lstm.input)
register(lambda ctx, node: _recurrent(ctx, node, "gru"), aten.gru.input)
register(lambda ctx, node: _recurrent(ctx, node, "rnn_tanh"), aten.rnn_tanh.input)
register(lambda ctx, node: _recurrent(ctx, node, "rnn_relu"), aten.rnn_relu.input)
