"""The `dnnl` codegen (CPU): convolutions and matmuls through oneDNN, epilogues as post-ops.

Patterns `dnnl.conv2d[_bias][_add][_relu]` match float32 NCHW/OIHW `relax.nn.conv2d` (any
stride, padding, dilation and groups) followed by a per-channel bias (`(1, O, 1, 1)`), a
residual add of the output's shape (either operand) and relu. Patterns
`dnnl.matmul[_transposed][_bias][_<activation>]` match what the blas backend's do (a bias of
shape `(N,)` or `(1, ..., N)` only), with relu / gelu / gelu_tanh / silu. Each offloaded
composite becomes a call of one C kernel of `relaxmlir/runtime/native/dnnl_kernels.c`; the
codegen adds one int64 input to the call, the parameters the kernel cannot see in its operands
(the convolution's geometry, which add operand is the residual, a digest of a constant weight:
see `conv2d_params`). `relax.ext.dnnl` is registered when the kernels and libdnnl are installed;
libdnnl itself is opened when the codegen first runs.
"""

from __future__ import annotations

import hashlib

import numpy as np
from mlir import ir

from dialects import relax as rx
from lowering import dense
from relaxmlir.ir import attr_value
from relaxmlir.relax.analysis import arg_constant
from relaxmlir.relax.backend.patterns import (
    check_inputs,
    check_matmul,
    make_conv2d_pattern,
    matmul_patterns,
    tensor_type,
)
from relaxmlir.relax.backend.registry import FusionPattern, PatternCheckContext, register_patterns
from relaxmlir.relax.struct_info import dtype_of
from relaxmlir.runtime import libraries
from relaxmlir.runtime.registry import NativeFunc, register_func
from relaxmlir.topi.layout import channel_block, kernel_blocks

CODEGEN = "dnnl"
ACTIVATIONS = {
    "relu": "relax.nn.relu",
    "gelu": "relax.nn.gelu",
    "gelu_tanh": "relax.nn.gelu_tanh",
    "silu": "relax.nn.silu",
}

# The kernels' parameter tensor (P_* in dnnl_kernels.c): version, flags, weight digest, then
# for conv2d strides (2), padding (top, left, bottom, right), dilation (2), groups.
PARAMS_VERSION = 1
FLAG_RESIDUAL_FIRST = 1


def weight_digest(value: ir.Value | None) -> int:
    """A nonzero 63-bit digest of a `relax.constant`'s contents, 0 for anything else.

    The kernel keeps a constant weight reordered into its primitive's layout, keyed by the
    weight's address and this digest: another executable's weight at the same address (after
    this one was freed) has other contents, hence another digest, and never hits a stale entry.
    A weight that is not a constant may change between calls: it is reordered at every call."""
    if value is None or isinstance(value.owner, ir.Block):
        return 0
    op = value.owner.operation
    if op.name != rx.Constant.name:
        return 0
    return _digest(dense.to_numpy(op.attributes["value"]))


def conv2d_params(attrs: dict, digest: int = 0, residual_first: bool = False) -> np.ndarray:
    """The int64 parameters of a conv2d kernel from the op's attributes."""
    pad = list(attrs["padding"])
    if len(pad) == 1:
        pad *= 4
    elif len(pad) == 2:
        pad = pad * 2
    flags = FLAG_RESIDUAL_FIRST if residual_first else 0
    return np.array(
        [
            PARAMS_VERSION,
            flags,
            digest,
            *attrs["strides"],
            *pad,
            *attrs["dilation"],
            attrs["groups"],
        ],
        dtype=np.int64,
    )


def matmul_params(digest: int = 0) -> np.ndarray:
    return np.array([PARAMS_VERSION, 0, digest], dtype=np.int64)


# -- checks ---------------------------------------------------------------------------------


def _op_attrs(op: ir.Operation) -> dict:
    return {name: attr_value(op.attributes[name]) for name in op.attributes}


def conv2d_supported(data, weight, out, attrs: dict) -> bool:
    """float32 NCHW data, OIHW weight (static shape), NCHW output, groups dividing channels."""
    if data is None or weight is None or out is None:
        return False
    if any(dtype_of(t.element_type) != "float32" for t in (data, weight, out)):
        return False
    if data.rank != 4 or weight.rank != 4 or out.rank != 4 or not weight.has_static_shape:
        return False
    if attrs.get("data_layout", "NCHW") != "NCHW" or attrs.get("kernel_layout", "OIHW") != "OIHW":
        return False
    if attrs.get("out_layout") not in (None, "", "NCHW"):
        return False
    if attrs.get("out_dtype") not in (None, "", "float32"):
        return False
    groups = attrs.get("groups", 1)
    c = data.shape[1]
    return (
        groups >= 1
        and c != ir.ShapedType.get_dynamic_size()
        and weight.shape[0] % groups == 0
        and weight.shape[1] * groups == c
    )


def _check_conv2d(ctx: PatternCheckContext) -> bool:
    conv = ctx.annotated_expr["root"]
    data, weight = ctx.annotated_expr["data"], ctx.annotated_expr["weight"]
    out = tensor_type(conv)
    if not conv2d_supported(
        tensor_type(data), tensor_type(weight), out, _op_attrs(conv.owner.operation)
    ):
        return False
    result = tensor_type(ctx.matched_expr)
    if result is None or list(result.shape) != list(out.shape):  # the adds only broadcast
        return False
    bias = ctx.annotated_expr.get("bias")
    if bias is not None:  # one value per output channel: (1, O, 1, 1) or (O, 1, 1)
        b = tensor_type(bias)
        o = out.shape[1]
        if b is None or dtype_of(b.element_type) != "float32" or b.rank not in (3, 4):
            return False
        if list(b.shape) != [1] * (b.rank - 3) + [o, 1, 1]:
            return False
    residual = ctx.annotated_expr.get("residual")
    if residual is not None:  # the output's shape exactly (the sum post-op adds it in place)
        r = tensor_type(residual)
        if r is None or dtype_of(r.element_type) != "float32" or not r.has_static_shape:
            return False
        if not out.has_static_shape or list(r.shape) != list(out.shape):
            return False
    return True


def _check_matmul(ctx: PatternCheckContext) -> bool:
    """check_matmul, and a bias of one value per output column (`(N,)`, `(1, ..., N)`)."""
    if not check_matmul(ctx):
        return False
    bias = ctx.annotated_expr.get("bias")
    if bias is not None:
        b, out = tensor_type(bias), tensor_type(ctx.annotated_expr["root"])
        n = out.shape[-1]
        if n == ir.ShapedType.get_dynamic_size() or list(b.shape) != [1] * (b.rank - 1) + [n]:
            return False
    return True


# -- patterns -------------------------------------------------------------------------------


def _patterns() -> list[FusionPattern]:
    """Lowest priority first (registration order): longer chains win where both match."""
    out = []
    for bias in (False, True):
        for residual in (False, True):
            stem = "conv2d" + ("_bias" if bias else "") + ("_add" if residual else "")
            for act in (None, "relu"):
                pat, ann = make_conv2d_pattern(bias, residual, ACTIVATIONS.get(act))
                name = f"dnnl.{stem}" + (f"_{act}" if act else "")
                out.append(FusionPattern(name, pat, ann, _check_conv2d))
    return out + matmul_patterns(CODEGEN, ACTIVATIONS, _check_matmul)


# -- the codegen ----------------------------------------------------------------------------


def is_available() -> bool:
    """The kernels are built and libdnnl is installed (it is opened on first use)."""
    return libraries.available("dnnl_kernels") and libraries.available("dnnl")


def kernel_for(composite: str) -> NativeFunc:
    """The native kernel of a `dnnl.<kernel>` composite."""
    prefix, _, kernel = composite.partition(".")
    if prefix != CODEGEN or not kernel:
        raise ValueError(f"dnnl codegen: '{composite}' is not a dnnl pattern")
    native = NativeFunc("dnnl_kernels", f"relaxmlir_dnnl_{kernel}")
    native.address()  # opens oneDNN now: a missing or unusable one is an error at build time
    return native


def _body_ops(func_op: ir.Operation) -> list[ir.Operation]:
    ops = [op.operation for op in func_op.regions[0].blocks[0].operations]
    return [op for op in ops[:-1] if op.name != rx.Constant.name]


def _conv2d_call_params(composite: str, func_op: ir.Operation) -> np.ndarray:
    ops = _body_ops(func_op)
    conv = next(op for op in ops if op.name == rx.mlir_op_name("relax.nn.conv2d"))
    attrs = _op_attrs(conv)
    residual_first = False
    if "_add" in composite:
        # the chain conv -> (bias add) -> residual add: is the residual its first operand?
        chain = conv.results[0]
        adds = [op for op in ops if op.name == rx.mlir_op_name("relax.add")]
        if "_bias" in composite:
            chain = next(a for a in adds if a.operands[0] == chain).results[0]
        res_add = next(a for a in adds if chain in (a.operands[0], a.operands[1]))
        residual_first = res_add.operands[0] != chain
    return conv2d_params(attrs, weight_digest(conv.operands[1]), residual_first)


def _matmul_call_params(func_op: ir.Operation) -> np.ndarray:
    matmul = next(op for op in _body_ops(func_op) if op.name == rx.mlir_op_name("relax.matmul"))
    rhs = matmul.operands[1]
    if not isinstance(rhs.owner, ir.Block) and rhs.owner.operation.name == rx.mlir_op_name(
        "relax.permute_dims"
    ):
        rhs = rhs.owner.operation.operands[0]
    return matmul_params(weight_digest(rhs))


def _arity(composite: str) -> int:
    kernel = composite.partition(".")[2]
    if kernel.startswith("conv2d"):
        return 2 + ("_bias" in kernel) + ("_add" in kernel)
    return 2 + ("_bias" in kernel)


def codegen(functions: list) -> dict:
    """`relax.ext.dnnl`: (name, composite, function) -> (kernel, [parameters]) for each name."""
    out = {}
    for name, composite, func_op in functions:
        check_inputs(CODEGEN, name, composite, func_op, _arity(composite))
        if composite.startswith("dnnl.conv2d"):
            params = _conv2d_call_params(composite, func_op)
        else:
            params = _matmul_call_params(func_op)
        out[name] = (kernel_for(composite), [params])
    return out


# -- operator strategies (relax.op.strategy): the same kernels as implementations of the ops --


def _sinfo_dims(sinfo) -> list:
    return [d if isinstance(d, int) else None for d in sinfo.shape]


def conv2d_call_supported(call) -> bool:
    """float32 NCHW/OIHW with a static weight (what the dnnl kernels take)"""
    data, weight = (a.struct_info for a in call.args)
    out = call.struct_info
    if any(getattr(t, "dtype", None) != "float32" for t in (data, weight, out)):
        return False
    if data.ndim != 4 or weight.ndim != 4 or out.ndim != 4 or not weight.is_static:
        return False
    a = call.attrs
    if a.get("data_layout", "NCHW") != "NCHW" or a.get("kernel_layout", "OIHW") != "OIHW":
        return False
    if a.get("out_layout") not in (None, "", "NCHW") or a.get("out_dtype") not in (
        None,
        "",
        "float32",
    ):
        return False
    c, (o, ci) = _sinfo_dims(data)[1], weight.shape[:2]
    groups = a.get("groups", 1)
    return c is not None and groups >= 1 and o % groups == 0 and ci * groups == c


def _blocked_layouts(call) -> int | None:
    """The block size b of a conv in NCHW<b>c / OIHW<b>i<b>o, else None."""
    a = call.attrs
    layout = a.get("data_layout", "NCHW")
    try:
        b, kernel = channel_block(layout), kernel_blocks(a.get("kernel_layout", "OIHW"))
    except ValueError:
        return None
    if not b or kernel != (b, b) or a.get("out_layout") not in (None, "", layout):
        return None
    return b


def conv2d_blocked_call_supported(call) -> bool:
    """float32 channel-blocked data (NCHW<b>c, OIHW<b>i<b>o), one group, a constant weight"""
    data, weight = (a.struct_info for a in call.args)
    if _blocked_layouts(call) is None or call.attrs.get("groups", 1) != 1:
        return False
    if any(getattr(t, "dtype", None) != "float32" for t in (data, weight, call.struct_info)):
        return False
    if call.attrs.get("out_dtype") not in (None, "", "float32"):
        return False
    return data.ndim == 5 and weight.is_static and arg_constant(call.args[1]) is not None


def emit_conv2d_blocked(bb, call):
    """A channel-blocked `relax.nn.conv2d` through the NCHW dnnl kernel: its input back to NCHW,
    the constant weight back to OIHW at compile time, and the result to NCHW<b>c again (oneDNN
    reorders into its own blocked layout inside). What lets oneDNN compete with our blocked
    kernels per convolution once relax-alter-op-layout has blocked the graph (a tuned choice)."""
    from relaxmlir.relax.expr import Constant
    from relaxmlir.relax.op import layout_transform
    from relaxmlir.relax.struct_info import TensorStructInfo

    del bb
    b = _blocked_layouts(call)
    blocked = f"NCHW{b}c"
    wb = arg_constant(call.args[1])  # (O/b, I/b, KH, KW, b i, b o)
    ob, ib, kh, kw = wb.shape[:4]
    w = np.ascontiguousarray(wb.transpose(0, 5, 1, 4, 2, 3).reshape(ob * b, ib * b, kh, kw))
    x = layout_transform(call.args[0], blocked, "NCHW")
    n, _, oh, ow, _ = call.struct_info.shape
    out = TensorStructInfo((n, ob * b, oh, ow), "float32")
    attrs = {**call.attrs, "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW"}
    conv = _emit("conv2d", [x, Constant(w)], conv2d_params(attrs, _digest(w)), out)
    return layout_transform(conv, "NCHW", blocked)


def _digest(data: np.ndarray) -> int:
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{data.dtype}{data.shape}".encode())
    h.update(np.ascontiguousarray(data).tobytes())
    return (int.from_bytes(h.digest(), "little") >> 1) | 1


def matmul_call_supported(call) -> bool:
    """float32 operands of rank >= 2 (what the dnnl kernels take)"""
    a, b = (arg.struct_info for arg in call.args)
    return a.dtype == b.dtype == call.struct_info.dtype == "float32" and a.ndim >= 2 and b.ndim >= 2


def _arg_value(arg) -> ir.Value | None:
    values = getattr(arg, "values", None)
    return values[0] if values else None


def _emit(kernel: str, args: list, params: np.ndarray, sinfo):
    from relaxmlir.relax.expr import Constant, call_dps_packed

    name = f"relaxmlir.dnnl.{kernel}"
    register_func(name, kernel_for(f"dnnl.{kernel}"), override=True)
    return call_dps_packed(name, [*args, Constant(params)], sinfo)


def emit_conv2d(bb, call):
    """`relax.nn.conv2d` as a call of the dnnl conv2d kernel (compiled code calls it directly)."""
    del bb
    digest = weight_digest(_arg_value(call.args[1]))
    return _emit("conv2d", list(call.args), conv2d_params(call.attrs, digest), call.struct_info)


def emit_matmul(bb, call):
    """`relax.matmul` as a call of the dnnl matmul kernel."""
    del bb
    digest = weight_digest(_arg_value(call.args[1]))
    return _emit("matmul", list(call.args), matmul_params(digest), call.struct_info)


register_patterns(_patterns())
if is_available():
    register_func(f"relax.ext.{CODEGEN}", codegen, override=True)
