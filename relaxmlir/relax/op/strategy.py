"""Operator strategies (TVM's `relay/op/strategy`): per (op, target) implementations by priority.

`register_strategy("relax.nn.conv2d", "llvm", fstrategy, level)` adds a strategy function
`fstrategy(call, target) -> OpStrategy` to the table; the one registered at the highest level
for the op and the target's kind is used. An `OpStrategy` lists implementations, each a TOPI-style
compute (`compute(*tensors, **attrs) -> te.Tensor`, or `emit(bb, call) -> Expr` for anything
else, such as a library call), an optional schedule hook, a name, a priority level `plevel` and
an optional specialization `condition(call) -> bool` on shapes and attributes. `LegalizeOps`
picks the valid implementation with the highest plevel (the first registered among equals).
`RELAXMLIR_PRINT_STRATEGY=1` prints each choice and why to stderr.

Schedules: `schedule=None` leaves the kernel to the target's default rules (picked from its
pattern, `lowering/schedule`); a callable gets the new PrimFunc (`func.func`) to annotate or
rewrite before those rules run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dialects.relax import mlir_op_name
from relaxmlir.relax.expr import Call

PRINT_STRATEGY_ENV = "RELAXMLIR_PRINT_STRATEGY"

# The attrs each op passes to a TOPI-style compute, by keyword (in the op's attribute names).
Condition = Callable[[Call], bool]


@dataclass
class OpImplementation:
    name: str
    plevel: int
    compute: Callable | None = None  # compute(*tensors, **attrs) -> te.Tensor
    emit: Callable | None = None  # emit(bb, call) -> Expr (library calls, compositions)
    schedule: Callable | None = None  # schedule(prim_func_op) before the default rules
    condition: Condition | None = None
    condition_text: str = ""

    def applies(self, call: Call) -> bool:
        return self.condition is None or bool(self.condition(call))


@dataclass
class OpStrategy:
    """The implementations a strategy function offers for one call."""

    implementations: list[OpImplementation] = field(default_factory=list)

    def add_implementation(
        self,
        compute: Callable | None = None,
        schedule: Callable | None = None,
        name: str = "",
        plevel: int = 10,
        condition: Condition | None = None,
        emit: Callable | None = None,
    ) -> OpImplementation:
        """Add an implementation; exactly one of `compute` (TE) or `emit` (builder) is given.
        `condition(call)` restricts it to the calls it is specialized for."""
        if (compute is None) == (emit is None):
            raise ValueError(f"add_implementation '{name}': give exactly one of compute= or emit=")
        if not isinstance(plevel, int):
            raise TypeError(f"add_implementation '{name}': plevel must be an int, got {plevel!r}")
        for what, fn in (
            ("compute", compute),
            ("emit", emit),
            ("schedule", schedule),
            ("condition", condition),
        ):
            if fn is not None and not callable(fn):
                raise TypeError(f"add_implementation '{name}': {what} must be callable, got {fn!r}")
        impl = OpImplementation(
            name or getattr(compute or emit, "__name__", "implementation"),
            plevel,
            compute,
            emit,
            schedule,
            condition,
            # a docstring over several lines prints as one
            " ".join((getattr(condition, "__doc__", None) or getattr(condition, "__name__", "")).split())
            if condition
            else "",
        )
        self.implementations.append(impl)
        return impl


FStrategy = Callable[[Call, Any], OpStrategy]

# (MLIR op name, target kind) -> [(level, fstrategy)], highest level used.
STRATEGIES: dict[tuple[str, str], list[tuple[int, FStrategy]]] = {}


def register_strategy(
    op_name: str, target: str, fstrategy: FStrategy | None = None, level: int = 10
):
    """Register `fstrategy(call, target) -> OpStrategy` for `op_name` on target kind `target`
    (`"llvm"`, `"cuda"`); usable as a decorator. A higher `level` overrides lower ones."""

    def register(fn: FStrategy) -> FStrategy:
        if not callable(fn):
            raise TypeError(f"register_strategy('{op_name}'): {fn!r} is not callable")
        entries = STRATEGIES.setdefault((mlir_op_name(op_name), target), [])
        entries.append((level, fn))
        entries.sort(key=lambda e: -e[0])  # stable: among equal levels the first registered wins
        return fn

    return register(fstrategy) if fstrategy is not None else register


def has_strategy(mlir_name: str, target_kind: str) -> bool:
    return bool(STRATEGIES.get((mlir_name, target_kind)))


# -- choosing among implementations: forced by the user, tuned, or by priority ------------------

# `PassContext(config={FORCE_CONFIG: {"relax.nn.conv2d": "conv2d_nchw.im2col"}})`: the named
# implementation for every call of the op where its condition holds (the others keep the usual
# choice). Above tuning records and priorities.
FORCE_CONFIG = "relax.strategy.force"
# On the module (`MetaScheduleApplyDatabase`): {workload key: implementation name}, the tuned
# choice for each op call workload (`workload_key`).
TUNED_ATTR = "relax.tuned_strategies"


def forced_choices() -> dict[str, str]:
    """{MLIR op name: implementation name} forced by the current PassContext (checked)."""
    from relaxmlir.transform import PassContext

    table = PassContext.current().config.get(FORCE_CONFIG) or {}
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in table.items()
    ):
        raise TypeError(
            f"PassContext config '{FORCE_CONFIG}' must map op names to implementation names, "
            f"got {table!r}"
        )
    return {mlir_op_name(k): v for k, v in table.items()}


def workload_key(mlir_name: str, call: Call, target: Any) -> str:
    """What a tuned strategy choice is keyed by: the op, its operands' and result's struct info,
    its attributes and the target string (records of another target never match)."""
    import hashlib
    import json

    text = json.dumps(
        {
            "op": mlir_name,
            "args": [repr(a.struct_info) for a in call.args],
            "result": repr(call.struct_info),
            "attrs": {k: repr(v) for k, v in sorted(call.attrs.items())},
            "target": str(target),
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def tuned_choices(module_op: Any) -> dict[str, str]:
    """The module's table of tuned choices ({} without one)."""
    if module_op is None or TUNED_ATTR not in module_op.attributes:
        return {}
    import json

    from mlir import ir

    return json.loads(ir.StringAttr(module_op.attributes[TUNED_ATTR]).value)


def set_tuned_choices(module_op: Any, table: dict[str, str]) -> None:
    import json

    from mlir import ir

    text = json.dumps(table, sort_keys=True)
    module_op.attributes[TUNED_ATTR] = ir.StringAttr.get(text, module_op.context)


@dataclass
class Choice:
    """One call's choice, as `record_choices` sees it (what a strategy tuning task is made of)."""

    op: str
    key: str
    call: Call
    valid: list[str]  # the implementations whose condition holds, in registration order
    default: str  # what priority alone picks
    chosen: str
    why: str  # "priority", "tuned" or "forced"
    constant_args: list[bool] = field(default_factory=list)  # operands the build folds


def _folded(value: Any, depth: int = 0) -> bool:
    """A relax.constant, or a kernel call (call_tir) on folded values only: FoldConstant makes
    it a constant (a weight's transpose or layout change)."""
    owner = value.owner
    name = getattr(owner, "name", "")
    if name == "relax.constant":
        return True
    if name != "relax.call_tir" or depth >= 8 or not len(owner.operands):
        return False
    return all(_folded(v, depth + 1) for v in owner.operands)


def _is_constant(arg: Any) -> bool:
    values = getattr(arg, "values", None)
    return bool(values) and _folded(values[0])


_RECORDERS: list[list[Choice]] = []


class record_choices:
    """`with record_choices() as seen:` collects a `Choice` per call legalized by a strategy."""

    def __enter__(self) -> list[Choice]:
        self.seen: list[Choice] = []
        _RECORDERS.append(self.seen)
        return self.seen

    def __exit__(self, *exc) -> None:
        _RECORDERS.remove(self.seen)


def select_implementation(
    mlir_name: str, call: Call, target: Any, where: str = "", module_op: Any = None
) -> OpImplementation:
    """The implementation for `call`: the one the PassContext forces (`FORCE_CONFIG`) where its
    condition holds, else the tuned choice of `module_op`'s table (`TUNED_ATTR`) when it is
    valid, else the valid implementation with the highest plevel."""
    kind = getattr(target, "kind", str(target))
    _, fstrategy = STRATEGIES[(mlir_name, kind)][0]
    strategy = fstrategy(call, target)
    if not isinstance(strategy, OpStrategy) or not strategy.implementations:
        raise ValueError(f"strategy for '{mlir_name}' on {kind} returned no implementation")
    valid = [i for i in strategy.implementations if i.applies(call)]
    names = [i.name for i in strategy.implementations]
    if not valid:
        raise ValueError(
            f"no implementation of '{mlir_name}' on {kind} applies to this call "
            f"({', '.join(names)})"
        )
    default = max(valid, key=lambda i: i.plevel)  # max keeps the first among equals
    best, why, note = default, "priority", ""
    forced = forced_choices().get(mlir_name)
    key = workload_key(mlir_name, call, target)
    tuned = tuned_choices(module_op).get(key)
    by_name = {i.name: i for i in valid}
    if forced is not None and forced not in names:
        raise ValueError(
            f"PassContext config '{FORCE_CONFIG}' forces '{forced}' for '{mlir_name}', which has "
            f"no such implementation on {kind} (it has: {', '.join(names)})"
        )
    if forced in by_name:
        best, why = by_name[forced], "forced"
    elif tuned in by_name:
        best, why = by_name[tuned], "tuned"
    if forced is not None and why != "forced":
        note = f"forced {forced}: condition false; "
    elif tuned is not None and why == "priority":
        note = f"tuned {tuned}: not valid here; "
    for seen in _RECORDERS:
        seen.append(
            Choice(
                mlir_name, key, call, [i.name for i in valid], default.name, best.name, why,
                [_is_constant(a) for a in call.args],
            )  # fmt: skip
        )
    if os.environ.get(PRINT_STRATEGY_ENV, "") not in ("", "0"):
        others = ", ".join(
            f"{i.name} (plevel {i.plevel}{'' if i in valid else ', condition false'})"
            for i in strategy.implementations
            if i is not best
        )
        cond = f"condition {best.condition_text}; " if best.condition is not None else ""
        how = {
            "priority": "",
            "forced": f"forced by PassContext config '{FORCE_CONFIG}'; ",
            "tuned": f"tuned choice, workload {key}; ",
        }[why]
        print(
            f"strategy: {mlir_name}{' at ' + where if where else ''} on {kind}: {best.name} "
            f"(plevel {best.plevel}; {how}{note}{cond}others: {others or 'none'})",
            file=sys.stderr,
        )
    return best


# -- built-in strategies ----------------------------------------------------------------------


def _conv_attrs(call: Call) -> dict:
    a = call.attrs
    return {
        "strides": a["strides"],
        "padding": a["padding"],
        "dilation": a["dilation"],
        "groups": a["groups"],
        "out_dtype": a["out_dtype"],
    }


def is_pointwise_conv(call: Call) -> bool:
    """1x1 kernel, stride 1, no padding, no dilation, one group"""
    weight = call.args[1].struct_info.shape
    a = call.attrs
    return (
        tuple(weight[2:]) == (1, 1)
        and list(a["strides"]) == [1, 1]
        and list(a["padding"]) == [0, 0, 0, 0]
        and list(a["dilation"]) == [1, 1]
        and a["groups"] == 1
        and a.get("data_layout", "NCHW") == "NCHW"
    )


def conv2d_1x1(data, kernel, out_dtype=None):
    """A pointwise NCHW convolution as the contraction over channels it is (no padding, no
    window): `out[n, o, y, x] = sum_c data[n, c, y, x] * kernel[o, c, 0, 0]`.

    For one image the kernel is the product's A: [O, C] x [C, H * W] is a plain GEMM once the
    schedule merges H and W (`normalize.merge_loops`); with the image as A, its pixels
    were rows read down a column, which did not vectorize (85 filters over 40 x 40: 2.6 ms ->
    0.1). A batch keeps the image as A: its images and pixels are then the product's rows."""
    from relaxmlir import te

    out_dtype = out_dtype or data.dtype
    n, c, h, w = data.shape
    o = kernel.shape[0]
    rc = te.reduce_axis((0, c), name="rc")

    def body(b, f, y, x):
        image = te.cast(data[b, rc, y, x], out_dtype)
        weight = te.cast(kernel[f, rc, 0, 0], out_dtype)
        return te.sum(weight * image if n == 1 else image * weight, axis=rc)

    return te.compute((n, o, h, w), body, name="T_conv2d_1x1")


def is_nchw_conv(call: Call) -> bool:
    """NCHW data"""
    return call.attrs.get("data_layout", "NCHW") == "NCHW"


def is_channel_blocked_conv(call: Call) -> bool:
    """data in a channel-blocked layout such as NCHW16c (relax-alter-op-layout's choice)"""
    return call.attrs.get("data_layout", "NCHW") != "NCHW"


def conv2d_nchwc(data, kernel, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, out_dtype=None):
    from relaxmlir.topi.nn.blocked import conv2d_nchwc as compute

    if groups != 1:
        raise ValueError(f"conv2d_nchwc.direct: groups must be 1, got {groups}")
    return compute(data, kernel, strides, padding, dilation, out_dtype)


def is_dense_blocked_conv(call: Call) -> bool:
    """data in a channel-blocked layout such as NCHW16c (relax-alter-op-layout's choice), one group"""
    return is_channel_blocked_conv(call) and call.attrs["groups"] == 1


def is_depthwise_blocked_conv(call: Call) -> bool:
    """channel-blocked data, groups = channels (an OIHW1i<b>o kernel)"""
    kernel = call.args[1].struct_info.shape
    return is_channel_blocked_conv(call) and call.attrs["groups"] != 1 and kernel[4] == 1


def is_grouped_blocked_conv(call: Call) -> bool:
    """channel-blocked data, groups of one channel block each (an OIHW<b>i<b>o kernel of one
    block per group)"""
    kernel = call.args[1].struct_info.shape
    groups = call.attrs["groups"]
    return (
        is_channel_blocked_conv(call)
        and groups != 1
        and kernel[0] == groups
        and kernel[1] == 1
        and kernel[4] == kernel[5] > 1
    )


def is_block_grouped_conv(call: Call) -> bool:
    """channel-blocked data, groups of whole channel blocks other than one block each, in and
    out (an OIHW<bi>i<bo>o kernel [G*KO, KI, KH, KW, bi, bo])"""
    kernel = call.args[1].struct_info.shape
    return (
        is_channel_blocked_conv(call)
        and call.attrs["groups"] != 1
        and kernel[4] > 1
        and not is_grouped_blocked_conv(call)
    )


def emit_depthwise_conv2d_nchwc(bb, call: Call):
    """`conv2d_nchwc.depthwise`: the OIHW1i<b>o kernel [C/b, 1, KH, KW, 1, b] reshaped to
    [C/b, KH, KW, b] (folded at compile time for constant weights), then the window reduction
    of `topi.nn.blocked.depthwise_conv2d_nchwc`."""
    from relaxmlir.relax.op import reshape
    from relaxmlir.topi.nn import blocked
    from relaxmlir.topi.nn.conv2d import pad

    a = call.attrs
    cb, _, kh, kw, _, b = call.args[1].struct_info.shape
    data, padding = call.args[0], tuple(a["padding"])
    if any(padding):
        # The padding as a call of its own: fusion puts it at the end of the kernel that makes
        # the image (the expansion conv's epilogue then writes into the padded buffer), instead
        # of a copy of the whole image into a padded one inside this kernel.
        top, left, bottom, right = padding
        data = bb.call_te(
            pad, data, (0, 0, top, left, 0), (0, 0, bottom, right, 0), primfunc_name_hint="pad"
        )
        padding = (0, 0, 0, 0)
    return bb.call_te(
        blocked.depthwise_conv2d_nchwc, data, reshape(call.args[1], (cb, kh, kw, b)),
        a["strides"], padding, a["dilation"], a["out_dtype"],
        primfunc_name_hint="depthwise_conv2d_nchwc",
    )  # fmt: skip


def emit_grouped_conv2d_nchwc(bb, call: Call):
    """`conv2d_nchwc.grouped`: the OIHW<b>i<b>o kernel [G, 1, KH, KW, b, b] reshaped to
    [G, KH, KW, b, b] (folded at compile time for constant weights: a unit axis read at index 0
    would hide the window from the strided-window split), then
    `topi.nn.blocked.grouped_conv2d_nchwc`."""
    from relaxmlir.relax.op import reshape
    from relaxmlir.topi.nn import blocked

    a = call.attrs
    g, _, kh, kw, bi, bo = call.args[1].struct_info.shape
    return bb.call_te(
        blocked.grouped_conv2d_nchwc, call.args[0], reshape(call.args[1], (g, kh, kw, bi, bo)),
        a["strides"], tuple(a["padding"]), a["dilation"], a["out_dtype"],
        primfunc_name_hint="grouped_conv2d_nchwc",
    )  # fmt: skip


def emit_block_grouped_conv2d_nchwc(bb, call: Call):
    """`conv2d_nchwc.grouped_blocks`: the OIHW<bi>i<bo>o kernel [G*KO, KI, KH, KW, bi, bo]
    reshaped to [G, KO, KI, KH, KW, bi, bo] (the same bytes), then
    `topi.nn.blocked.grouped_conv2d_nchwc_blocks`, whose [N, G, KO, OH, OW, bo] result is
    reshaped to [N, G*KO, OH, OW, bo]."""
    from relaxmlir.relax.op import reshape
    from relaxmlir.topi.nn import blocked

    a = call.attrs
    g = a["groups"]
    ob, ki, kh, kw, bi, bo = call.args[1].struct_info.shape
    out = bb.call_te(
        blocked.grouped_conv2d_nchwc_blocks, call.args[0],
        reshape(call.args[1], (g, ob // g, ki, kh, kw, bi, bo)),
        a["strides"], tuple(a["padding"]), a["dilation"], a["out_dtype"],
        primfunc_name_hint="grouped_conv2d_nchwc",
    )  # fmt: skip
    n, _, _, oh, ow, _ = out.struct_info.shape
    return reshape(out, (n, ob, oh, ow, bo))


def is_strided_blocked_conv(call: Call) -> bool:
    """channel-blocked, one group, equal strides > 1, no dilation, square kernel"""
    a, kh, kw = call.attrs, *call.args[1].struct_info.shape[2:4]
    sh, sw = a["strides"]
    return (
        is_dense_blocked_conv(call)
        and sh == sw > 1
        and list(a["dilation"]) == [1, 1]
        and kh == kw
    )


def emit_conv2d_nchwc_phased(bb, call: Call):
    """`conv2d_nchwc.phased`: the kernel's taps sorted by input phase in a call of their own
    (constant weights: folded at compile time by FoldConstant), the input split by phase in
    another (an injective kernel, which fusion leaves out of the convolution), then a
    unit-stride window over the phases, every phase padded to the longest one's taps (16 for a
    3x3 / 2 window). A tuning candidate: the direct kernel now does strided windows with their 9
    taps (ResNet-18's strided 3x3 layers at 1 thread: 1.9 -> 1.1 ms)."""
    from relaxmlir.topi.nn import blocked

    a = call.attrs
    s, k = a["strides"][0], call.args[1].struct_info.shape[2]
    taps = bb.call_te(blocked.phase_kernel, call.args[1], s, primfunc_name_hint="phase_kernel")
    phases = bb.call_te(blocked.phase_split, call.args[0], k, s, a["padding"], primfunc_name_hint="phase_split")
    return bb.call_te(
        blocked.conv2d_nchwc, phases, taps, out_dtype=a["out_dtype"], primfunc_name_hint="conv2d_nchwc"
    )


def emit_conv2d_nchwc_phases(bb, call: Call):
    """`conv2d_nchwc.phases`: the input split by phase (one injective kernel per phase, reading
    the input at the stride), then one unit-stride convolution per phase with only that phase's
    taps (a constant weight is sliced here, at compile time), summed (the sums fuse into the
    last convolution's epilogue). A 3x3 / 2 window does its 9 taps, not the 16 of the phased
    kernel's zero-padded taps, but 4 kernels to compile per convolution instead of 1 (ResNet-18
    built in 4.5 s instead of 3.1) and the input copied by phase: a tuning candidate. The
    direct kernel's schedule does the same split on views of one kernel's input
    (`lowering/schedule/phases.py`)."""
    import numpy as np

    from relaxmlir.relax.analysis import arg_constant
    from relaxmlir.relax.expr import Constant
    from relaxmlir.relax.op import add
    from relaxmlir.topi.nn import blocked

    a = call.attrs
    s, k = a["strides"][0], call.args[1].struct_info.shape[2]
    p = min(s, k)
    _, _, oh, ow, _ = call.struct_info.shape
    weight = arg_constant(call.args[1])
    phases = bb.call_te(blocked.phase_split, call.args[0], k, s, a["padding"], primfunc_name_hint="phase_split")
    out = None
    for py in range(p):
        for px in range(p):
            if weight is not None:  # sliced here: no kernel to compile and fold
                taps = Constant(np.ascontiguousarray(weight[:, :, py::s, px::s]))
            else:
                taps = bb.call_te(blocked.phase_taps, call.args[1], s, py, px, primfunc_name_hint="phase_taps")
            kqy, kqx = taps.struct_info.shape[2:4]
            part = bb.call_te(
                blocked.phase_part, phases, p, py, px, oh + kqy - 1, ow + kqx - 1,
                primfunc_name_hint="phase_part",
            )  # fmt: skip
            conv = bb.call_te(
                blocked.conv2d_nchwc, part, taps, out_dtype=a["out_dtype"], primfunc_name_hint="conv2d_nchwc"
            )
            out = conv if out is None else add(out, conv)
    return out


def is_im2col_conv(call: Call) -> bool:
    """NCHW data, OIHW kernel, one group, static shapes"""
    data, weight = (arg.struct_info for arg in call.args[:2])
    a = call.attrs
    return (
        a["groups"] == 1
        and a.get("data_layout", "NCHW") == "NCHW"
        and a.get("kernel_layout", "OIHW") == "OIHW"
        and a.get("out_layout") in (None, "", "NCHW")
        and data.is_static
        and weight.is_static
    )


def emit_conv2d_im2col(bb, call: Call):
    """The input's windows as a column matrix (`topi.nn.im2col`, an injective kernel), the
    kernel reshaped to `(O, C*KH*KW)` (constant weights: folded at compile time), their product
    as a `relax.matmul` (legalized in turn: the packed matmul kernel and schedule), reshaped
    back to NCHW."""
    from relaxmlir.relax.op import matmul, reshape
    from relaxmlir.topi.nn.im2col import im2col

    data, weight = call.args
    n, c, _, _ = data.struct_info.shape
    o, _, kh, kw = weight.struct_info.shape
    a = call.attrs
    oh, ow = call.struct_info.shape[2:]
    windows = bb.call_te(
        im2col, data, (kh, kw), a["strides"], a["padding"], a["dilation"],
        primfunc_name_hint="im2col",
    )  # fmt: skip
    # (a 2-D product for batch 1 ran 20x slower: its reshape epilogue to 4-D loses the packed
    # schedule, 512x4608x49: 282 ms vs 14 ms)
    columns = reshape(windows, (n, c * kh * kw, oh * ow))
    product = matmul(reshape(weight, (o, c * kh * kw)), columns, out_dtype=a["out_dtype"])
    return reshape(product, (n, o, oh, ow))


IM2COL_PLEVEL = 8  # below the direct kernels (the default), above dnnl


def is_patch_conv(call: Call) -> bool:
    """NCHW data, one group, static shapes, windows of more than 4 taps that do not overlap
    (strides >= kernel, no dilation): a vision transformer's patch embedding"""
    kh, kw = call.args[1].struct_info.shape[2:4]
    a = call.attrs
    return is_patch_window((kh, kw), a["strides"], a["dilation"]) and is_im2col_conv(call)


PATCH_TAPS = 4  # windows of more taps than this that do not overlap: im2col + matmul


def is_patch_window(kernel, strides, dilation) -> bool:
    """Windows that tile the image without overlap, of more than PATCH_TAPS pixels (a 2x2 / 2
    downsample keeps the direct kernel: 4 phase kernels over all the channels)."""
    (kh, kw), (sh, sw) = kernel, strides
    return list(dilation) == [1, 1] and kh * kw > PATCH_TAPS and sh >= kh and sw >= kw


def _add_dnnl(s: OpStrategy, op: str) -> None:
    """oneDNN's kernel (relax.backend.dnnl) when it is installed, below our own kernels (a
    user's strategy at a higher level, or a tuning record, picks it)."""
    from relaxmlir.relax.backend import dnnl

    if not dnnl.is_available():
        return
    if op == "conv2d":
        s.add_implementation(
            emit=dnnl.emit_conv2d,
            name="conv2d_nchw.dnnl",
            plevel=DNNL_PLEVEL,
            condition=dnnl.conv2d_call_supported,
        )
        s.add_implementation(  # blocked data: the NCHW kernel between two layout changes
            emit=dnnl.emit_conv2d_blocked,
            name="conv2d_nchwc.dnnl",
            plevel=DNNL_PLEVEL,
            condition=dnnl.conv2d_blocked_call_supported,
        )
    else:
        s.add_implementation(
            emit=dnnl.emit_matmul,
            name="matmul.dnnl",
            plevel=DNNL_PLEVEL - 1,  # below blas too
            condition=dnnl.matmul_call_supported,
        )


DNNL_PLEVEL = 5


def _conv2d_llvm(call: Call, target: Any) -> OpStrategy:
    from relaxmlir import topi

    s = OpStrategy()
    # Above every NCHW implementation: those do not apply to blocked data. Strided windows too:
    # the schedule splits them by phase; the phase-split kernels below are tuning candidates.
    s.add_implementation(
        conv2d_nchwc, name="conv2d_nchwc.direct", plevel=20, condition=is_dense_blocked_conv
    )
    s.add_implementation(
        emit=emit_depthwise_conv2d_nchwc, name="conv2d_nchwc.depthwise", plevel=20,
        condition=is_depthwise_blocked_conv,
    )  # fmt: skip
    s.add_implementation(
        emit=emit_grouped_conv2d_nchwc, name="conv2d_nchwc.grouped", plevel=20,
        condition=is_grouped_blocked_conv,
    )  # fmt: skip
    s.add_implementation(
        emit=emit_block_grouped_conv2d_nchwc, name="conv2d_nchwc.grouped_blocks", plevel=20,
        condition=is_block_grouped_conv,
    )  # fmt: skip
    s.add_implementation(
        emit=emit_conv2d_nchwc_phased, name="conv2d_nchwc.phased", plevel=18,
        condition=is_strided_blocked_conv,
    )  # fmt: skip
    s.add_implementation(
        emit=emit_conv2d_nchwc_phases, name="conv2d_nchwc.phases", plevel=19,
        condition=is_strided_blocked_conv,
    )  # fmt: skip
    s.add_implementation(
        lambda data, kernel, **attrs: topi.nn.conv2d(data, kernel, **attrs),
        name="conv2d_nchw.direct",
        plevel=10,
        condition=is_nchw_conv,
    )
    s.add_implementation(
        lambda data, kernel, out_dtype=None, **_: conv2d_1x1(data, kernel, out_dtype),
        name="conv2d_nchw_1x1.contraction",
        plevel=15,
        condition=is_pointwise_conv,
    )
    s.add_implementation(
        emit=emit_conv2d_im2col, name="conv2d_nchw.im2col", plevel=IM2COL_PLEVEL,
        condition=is_im2col_conv,
    )  # fmt: skip
    # Non-overlapping windows: im2col is a permutation of the input (no element read twice) and
    # the product's K is C x KH x KW; the direct kernel splits a stride-s window into s^2
    # phases of one tap each, products over C alone. ViT-B/16's patch embedding (3 -> 768,
    # 16x16 / 16 on 224x224, 2 threads): 256 phase kernels, built in 16 s, 1.83 ms; as im2col
    # + matmul, 0.2 s and 0.58 ms (torch 0.65).
    s.add_implementation(
        emit=emit_conv2d_im2col, name="conv2d_nchw.patches", plevel=17, condition=is_patch_conv
    )
    _add_dnnl(s, "conv2d")
    return s


register_strategy("relax.nn.conv2d", "llvm", _conv2d_llvm)


def implementation_rule(impl: OpImplementation, attrs_of: Callable[[Call], dict] | None = None):
    """A legalization rule that builds `impl` for a call (what LegalizeOps runs)."""

    def rule(bb, call: Call):
        if impl.emit is not None:
            return impl.emit(bb, call)
        attrs = attrs_of(call) if attrs_of is not None else dict(call.attrs)
        return bb.call_te(lambda *tensors: impl.compute(*tensors, **attrs), *call.args)

    return rule


# Which attributes an op's TE computes take (by keyword); ops not listed pass all their attrs.
COMPUTE_ATTRS: dict[str, Callable[[Call], dict]] = {mlir_op_name("relax.nn.conv2d"): _conv_attrs}


def _float32_matmul(call: Call) -> bool:
    """float32 operands of rank >= 2 (what cblas_sgemm takes)"""
    a, b = (arg.struct_info for arg in call.args)
    return a.dtype == b.dtype == "float32" and a.ndim >= 2 and b.ndim >= 2


def emit_blas_matmul(bb, call: Call):
    """`relax.matmul` as a call of the blas codegen's kernel (compiled code calls it directly)."""
    from relaxmlir.relax.backend import blas
    from relaxmlir.relax.expr import call_dps_packed
    from relaxmlir.runtime.registry import register_func

    register_func("relaxmlir.blas.matmul", blas.kernel_for("blas.matmul"), override=True)
    return call_dps_packed("relaxmlir.blas.matmul", call.args, call.struct_info)


def _matmul_llvm(call: Call, target: Any) -> OpStrategy:
    from relaxmlir import topi
    from relaxmlir.relax.backend import blas

    s = OpStrategy()
    s.add_implementation(
        lambda a, b, out_dtype=None: topi.matmul(a, b, out_dtype=out_dtype),
        name="matmul.packed",
        plevel=10,
    )
    if blas.is_available():
        s.add_implementation(
            emit=emit_blas_matmul, name="matmul.blas", plevel=5, condition=_float32_matmul
        )
    _add_dnnl(s, "matmul")
    return s


register_strategy("relax.matmul", "llvm", _matmul_llvm)


def fingerprint() -> str:
    """A digest of the strategy table (which functions, at which levels, with which code) and of
    the choices the PassContext forces: part of the compile-cache key, so registering or forcing
    a strategy never reuses a build made without it (tuned choices are a module attribute, in
    the module's own digest)."""
    import hashlib
    import re

    def stable(text: str) -> bytes:
        # reprs of nested code objects and plain objects carry memory addresses: a key with
        # them differs in every process and the persistent cache never hits
        return re.sub(r" at 0x[0-9a-fA-F]+", "", text).encode()

    h = hashlib.sha256()
    h.update(repr(sorted(forced_choices().items())).encode())  # the PassContext's forced choices
    for (op, kind), entries in sorted(STRATEGIES.items()):
        for level, fn in entries:
            code = getattr(fn, "__code__", None)
            body = code.co_code + stable(repr(code.co_consts)) if code is not None else stable(repr(fn))
            h.update(f"{op}|{kind}|{level}|{getattr(fn, '__qualname__', '')}|".encode() + body)
    return h.hexdigest()[:16]
