"""`relax-graph-to-memref`: lower relax graph functions to one native entry point over memrefs.

This is the role of TVM's VM codegen, done ahead of time: every tensor value gets a buffer,
`call_tir` becomes a native `func.call` of the primitive function (bridged to its tensor
signature with `bufferization.to_tensor` / `materialize_in_destination`, so one-shot
bufferization later writes in place), `call_dps_packed` / `call_packed` become calls of external
C-interface symbols that the runtime binds to registered Python functions, constants become
`memref.global`s, and results are written into caller-provided out-parameters (returning memrefs
through the C interface is not reliable; see MLIR_NOTES). Deallocation is left to upstream's
`buffer-deallocation-pipeline`.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from mlir import ir
from mlir.dialects import arith, bufferization, func, memref, tensor

from dialects import relax as rx
from dialects import shape as sh
from lowering.bind_params import arg_names
from lowering.dataflow import graph_functions
from lowering.registry import PassError, register_pass
from lowering.views import row_major_view

PACKED_ATTR = "relax.packed"  # on external declarations: the registered function's name
PACKED_ARGS_ATTR = "relax.packed_args"  # their memref argument types, kept through LLVM conversion
ARG_NAME_ATTR = "relax.name"
# On the module: native libraries (names in relaxmlir.runtime.libraries) that code put in the
# module by backends calls, loaded before the code is JIT-compiled or its library dlopen'ed.
EXTERNAL_LIBS_ATTR = "relax.external_libs"

_INDEX_OPS = {
    "Add": arith.AddIOp,
    "Sub": arith.SubIOp,
    "Mult": arith.MulIOp,
    "FloorDiv": arith.FloorDivSIOp,
    "Mod": arith.RemSIOp,
}


def _memref_type(t: ir.Type) -> ir.MemRefType:
    t = ir.RankedTensorType(t)
    return ir.MemRefType.get(t.shape, t.element_type)


def _tensor_type(m: ir.Type) -> ir.RankedTensorType:
    m = ir.MemRefType(m)
    return ir.RankedTensorType.get(m.shape, m.element_type)


def _result_shapes(op: ir.Operation) -> list[Optional[tuple]]:
    if rx.SHAPE_ATTR not in op.attributes:
        return [None] * len(op.results)
    return [sh.from_attr(a) for a in ir.ArrayAttr(op.attributes[rx.SHAPE_ATTR])]


class _FunctionLowering:
    """Lowers one graph function; holds the value -> buffer map and the symbol environment."""

    def __init__(self, module_op: ir.Operation, old: ir.Operation, helpers: "_ModuleHelpers"):
        self.module_op, self.old, self.helpers = module_op, old, helpers
        ftype = ir.FunctionType(ir.TypeAttr(old.attributes["function_type"]).value)
        self.in_types, self.out_types = list(ftype.inputs), list(ftype.results)
        self.buffers: dict = {}
        self.symbols: dict[str, ir.Value] = {}
        self.index_consts: dict[int, ir.Value] = {}
        self.out_params: list[ir.Value] = []
        self.dest_for: dict = {}  # value -> out-param it may be computed into directly
        self.inplace = inplace_results(old)  # result -> the parameter whose buffer it is

    def run(self) -> None:
        old = self.old
        name = ir.StringAttr(old.attributes["sym_name"]).value
        for t in self.in_types + self.out_types:
            if not sh.isa(t, ir.RankedTensorType):
                raise PassError(f"graph function @{name}: only ranked tensors are supported, got ({t})", old)
        outs = [t for i, t in enumerate(self.out_types) if i not in self.inplace]
        arg_types = [_memref_type(t) for t in self.in_types + outs]
        with ir.InsertionPoint(old), old.location:
            new = func.FuncOp(name, ir.FunctionType.get(arg_types, []))
        new.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        new.attributes[rx.FUNCTION_ATTR] = ir.UnitAttr.get()
        self._copy_arg_attrs(new)
        entry = new.add_entry_block()
        old_block = old.regions[0].blocks[0]
        n_in = len(self.in_types)
        for value, arg in zip(old_block.arguments, list(entry.arguments)[:n_in]):
            self.buffers[value] = arg
        params, outs = list(entry.arguments)[:n_in], iter(list(entry.arguments)[n_in:])
        self.out_params = [
            params[self.inplace[i]] if i in self.inplace else next(outs)
            for i in range(len(self.out_types))
        ]
        self.arg_shapes = self._arg_shapes(old, entry)
        terminator = list(old_block.operations)[-1]
        for i, value in enumerate(terminator.operands):
            # A value returned once and produced by a call is computed straight into the out-param.
            if i in self.inplace:
                continue
            if value not in self.dest_for and not isinstance(value.owner, ir.Block):
                self.dest_for[value] = self.out_params[i]
        with ir.InsertionPoint(entry), ir.Location.unknown():
            self._bind_symbols()
            for op in list(old_block.operations):
                self._lower(op.operation)
        old.erase()

    def _copy_arg_attrs(self, new) -> None:
        if "arg_attrs" in self.old.attributes:
            attrs = list(ir.ArrayAttr(self.old.attributes["arg_attrs"]))
            empty = ir.DictAttr.get({})
            n_out = len(self.out_types) - len(self.inplace)
            new.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs + [empty] * n_out)

    def _arg_shapes(self, old, entry) -> list:
        shapes = []
        arg_attrs = list(ir.ArrayAttr(old.attributes["arg_attrs"])) if "arg_attrs" in old.attributes else []
        for i, arg in enumerate(entry.arguments):
            attrs = ir.DictAttr(arg_attrs[i]) if i < len(arg_attrs) else None
            if attrs is not None and rx.SHAPE_ATTR in attrs:
                shapes.append((arg, sh.from_attr(attrs[rx.SHAPE_ATTR])))
        return shapes

    def _bind_symbols(self) -> None:
        for arg, shape in self.arg_shapes:
            for i, dim in enumerate(shape):
                if isinstance(dim, str) and dim.isidentifier() and dim not in self.symbols:
                    self.symbols[dim] = memref.DimOp(arg, self._index(i)).result

    def _index(self, value: int) -> ir.Value:
        if value not in self.index_consts:
            self.index_consts[value] = arith.ConstantOp(ir.IndexType.get(), value).result
        return self.index_consts[value]

    def _dim_value(self, expr, op) -> ir.Value:
        def leaf(x):
            if isinstance(x, int):
                return self._index(x)
            if x not in self.symbols:
                raise PassError(f"symbolic dimension '{x}' is not bound by any function parameter", op)
            return self.symbols[x]

        return sh.fold(expr, lambda kind, a, b: _INDEX_OPS[kind.__name__](a, b).result, leaf)

    def _alloc(self, value: ir.Value, shape: Optional[tuple], op: ir.Operation) -> ir.Value:
        if value in self.dest_for:
            return self.dest_for.pop(value)
        mtype = _memref_type(value.type)
        dyn = ir.ShapedType.get_dynamic_size()
        sizes = []
        for i, d in enumerate(mtype.shape):
            if d == dyn:
                if shape is None or isinstance(shape[i], int):
                    raise PassError(f"'{op.name}' result has a dynamic dimension {i} without a relax.shape", op)
                sizes.append(self._dim_value(shape[i], op))
        return memref.AllocOp(mtype, sizes, [], alignment=64).result

    def _as_tensor(self, buffer: ir.Value, want: ir.Type, writable: bool = False) -> ir.Value:
        t = bufferization.ToTensorOp(_tensor_type(buffer.type), buffer, restrict=True, writable=writable or None).result
        return t if t.type == want else tensor.CastOp(want, t).result

    def _lower(self, op: ir.Operation) -> None:
        rule = _RULES.get(op.name)
        if rule is None:
            raise PassError(
                f"'{op.name}' cannot be lowered by relax-graph-to-memref; legalize high-level ops first "
                f"(relax-legalize-ops)",
                op,
            )
        rule(self, op)

    def operand_buffers(self, op: ir.Operation) -> list[ir.Value]:
        return [self.buffers[v] for v in op.operands]


def _callee(op: ir.Operation) -> ir.Operation:
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    target = rx.lookup_symbol(op, callee)
    if target is None:
        raise PassError(f"'{op.name}' op callee @{callee} not found", op)
    return target


def _lower_call_tir(fl: _FunctionLowering, op: ir.Operation) -> None:
    target = _callee(op)
    if len(op.operands) == 1 and len(op.results) == 1 and op.results[0] not in fl.dest_for:
        view = _reshape_view(fl, op, target)
        if view is not None:
            fl.buffers[op.results[0]] = view
            return
    outs = [fl._alloc(r, s, op) for r, s in zip(op.results, _result_shapes(op))]
    _call_kernel(fl, op, target, fl.operand_buffers(op), outs)


def _lower_call_tir_inplace(fl: _FunctionLowering, op: ir.Operation) -> None:
    """The callee computes into its last operands' buffers: they become the results'."""
    target = _callee(op)
    buffers = fl.operand_buffers(op)
    n_in = len(op.operands) - len(op.results)
    _call_kernel(fl, op, target, buffers[:n_in], buffers[n_in:])


def _call_kernel(fl: _FunctionLowering, op, target, ins: list, outs: list) -> None:
    """`func.call` of kernel `target` on buffers `ins` and out-buffers `outs` (its tensor
    signature bridged with to_tensor / materialize_in_destination); `op`'s results are `outs`."""
    ftype = ir.FunctionType(ir.TypeAttr(target.attributes["function_type"]).value)
    n_in = len(ins)
    args = [fl._as_tensor(b, t) for b, t in zip(ins, ftype.inputs[:n_in])]
    args += [fl._as_tensor(b, t, writable=True) for b, t in zip(outs, ftype.inputs[n_in:])]
    callee = ir.FlatSymbolRefAttr.get(ir.StringAttr(target.attributes["sym_name"]).value)
    call = func.CallOp(list(ftype.results), callee, args)
    for result, buffer, value in zip(call.results, outs, op.results):
        want = _tensor_type(buffer.type)
        src = result if result.type == want else tensor.CastOp(want, result).result
        bufferization.MaterializeInDestinationOp(None, src, buffer, restrict=True, writable=True)
        fl.buffers[value] = buffer


def state_results(func_op: ir.Operation) -> list[tuple[str, int]]:
    """(name, result index) of each state parameter of a graph function with relax.state: the
    new values come after the outputs and before the written inputs' (STATE_ATTR)."""
    if rx.STATE_ATTR not in func_op.attributes:
        return []
    state = ir.DictAttr(func_op.attributes[rx.STATE_ATTR])
    names = [ir.StringAttr(a).value for a in ir.ArrayAttr(state["params"])]
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    attrs = func_op.attributes
    updates = ir.ArrayAttr(attrs[rx.INPUT_UPDATES_ATTR]) if rx.INPUT_UPDATES_ATTR in attrs else []
    first = len(ftype.results) - len(updates) - len(names)
    return [(name, first + k) for k, name in enumerate(names)]


def inplace_results(func_op: ir.Operation) -> dict[int, int]:
    """Result index -> parameter index of a graph function's state updated in place (named
    `inplace` in its relax.state): the result has no out-parameter, the parameter's buffer
    holds the new value when the function returns."""
    if rx.STATE_ATTR not in func_op.attributes:
        return {}
    state = ir.DictAttr(func_op.attributes[rx.STATE_ATTR])
    if rx.STATE_INPLACE_KEY not in state:
        return {}
    inplace = {ir.StringAttr(a).value for a in ir.ArrayAttr(state[rx.STATE_INPLACE_KEY])}
    params = arg_names(func_op)
    return {
        result: params.index(name)
        for name, result in state_results(func_op)
        if name in inplace and name in params
    }


# Kernels that only reshape (TE's reshape, squeeze, expand_dims, a permute of unit axes) become
# views of their input's buffer, as TVM's RewriteDataflowReshape makes them VM reshapes: GPT-2's
# [1, 128, 768] -> [128, 768] copied 384 KB serially, 24 times per call. Symbolic shapes too:
# BERT's [1, n, 768] -> [1, n, 12, 64], which the schedule raised to an expand_shape, was
# still copied once into the kernel's out-argument.
_VIEW_OPS = (
    "tensor.extract_slice",
    "tensor.insert_slice",
    "tensor.collapse_shape",
    "tensor.expand_shape",
)
_DYNAMIC = ir.ShapedType.get_dynamic_size()

# A size as a product: (int factor, sorted symbolic factors), so that [1, n, 768] and
# [1, n, 12, 64] are known to hold as many elements. A symbolic dim is one factor ("n*2" too).
_Size = tuple


def _size(d) -> _Size:
    return (d, ()) if isinstance(d, int) else (1, (d,))


def _product(sizes) -> _Size:
    k, names = 1, []
    for c, f in sizes:
        k, names = k * c, names + list(f)
    return (k, tuple(sorted(names)))


def _static_attr(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _arg_dims(func_op: ir.Operation, block: ir.Block) -> list[list[_Size]] | None:
    """Each argument's dims: static ones from its type, symbolic ones from its relax.shape."""
    has = "arg_attrs" in func_op.attributes
    attrs = list(ir.ArrayAttr(func_op.attributes["arg_attrs"])) if has else []
    out = []
    for i, arg in enumerate(block.arguments):
        t = ir.ShapedType(arg.type)
        if t.rank == 0:
            return None  # a 0-d buffer has no collapse_shape view
        named = ir.DictAttr(attrs[i]) if i < len(attrs) else None
        shaped = named is not None and rx.SHAPE_ATTR in named
        shape = sh.from_attr(named[rx.SHAPE_ATTR]) if shaped else None
        dims = []
        for j, d in enumerate(t.shape):
            if d != _DYNAMIC:
                dims.append(_size(d))
            elif shape is not None and isinstance(shape[j], str):
                dims.append(_size(shape[j]))
            else:
                return None
        out.append(dims)
    return out


def _mixed(static: list[int], dynamic: list[ir.Value], sizes: dict) -> list[_Size] | None:
    """Static sizes with their dynamic entries taken, in order, from `dynamic` (known sizes)."""
    out, rest = [], list(dynamic)
    for d in static:
        if d != _DYNAMIC:
            out.append(_size(d))
        elif rest and rest[0] in sizes:
            out.append(sizes[rest.pop(0)])
        else:
            return None
    return out


def _slice_dims(op: ir.Operation, sizes: dict) -> list[_Size] | None:
    """The sizes of a whole-extent slice (zero offsets, unit strides), else None."""
    strides = _static_attr(op, "static_strides")
    if any(_static_attr(op, "static_offsets")) or any(x != 1 for x in strides):
        return None  # a nonzero or dynamic offset or stride
    first = 1 if op.name == "tensor.extract_slice" else 2
    return _mixed(_static_attr(op, "static_sizes"), list(op.operands)[first:], sizes)


def _kept_axes(got: list[_Size], static: list[int], result: ir.Type) -> list[_Size] | None:
    """The dims of a rank-reducing extract_slice's result: its sizes without the unit axes it
    drops, matched against the result type as MLIR infers it (a `?` for each dynamic size)."""
    want, out = list(ir.ShapedType(result).shape), []
    for size, declared in zip(got, static):
        if len(out) < len(want) and want[len(out)] == declared:
            out.append(size)
        elif declared != 1:
            return None
    return out if len(out) == len(want) else None


def _is_reshape_kernel(func_op: ir.Operation) -> bool:
    """Does the primitive function only carry its one input's elements, in row-major order, into
    its out-argument? Its ops are shape-only (tensor.dim, constants) or view ops on the chain
    from the input, and each slice covers the whole of its larger tensor: zero offsets, unit
    strides, and each size that tensor's dim, both known from the arguments' static and
    symbolic dims (relax.shape); the result holds as many elements as the out-argument,
    counted as products of those dims, so `n` x 768 and `n` x 12 x 64 compare equal."""
    if not func_op.regions or not func_op.regions[0].blocks:
        return False
    block = func_op.regions[0].blocks[0]
    args = list(block.arguments)
    if len(args) != 2:
        return False
    arg_dims = _arg_dims(func_op, block)
    if arg_dims is None:
        return False
    dims = dict(zip(args, arg_dims))  # tensor value -> its dims
    sizes: dict = {}  # index value -> its size
    chain = {args[0]}
    for o in block.operations:
        o = o.operation
        if o.name == "func.return":
            out = o.operands[0] if len(o.operands) == 1 else None
            return out in chain and _product(dims[out]) == _product(dims[args[1]])
        if o.name == "arith.constant" and isinstance(o.results[0].type, ir.IndexType):
            sizes[o.results[0]] = _size(ir.IntegerAttr(o.attributes["value"]).value)
            continue
        if o.name == "tensor.dim":
            src, index = o.operands[0], sizes.get(o.operands[1])
            if src not in dims or index is None or index[1] or not 0 <= index[0] < len(dims[src]):
                return False
            sizes[o.results[0]] = dims[src][index[0]]
            continue
        if o.name == "tensor.empty":
            t = ir.ShapedType(o.results[0].type)
            got = _mixed(list(t.shape), list(o.operands), sizes)
            if got is None:
                return False
            dims[o.results[0]] = got
            continue
        if o.name not in _VIEW_OPS or o.operands[0] not in chain:
            return False
        if o.name == "tensor.expand_shape":
            got = _mixed(_static_attr(o, "static_output_shape"), list(o.operands)[1:], sizes)
        elif o.name == "tensor.collapse_shape":
            src = dims[o.operands[0]]
            groups = ir.ArrayAttr(o.attributes["reassociation"])
            groups = [[ir.IntegerAttr(i).value for i in g] for g in groups]
            got = [_product([src[i] for i in g]) for g in groups]
        elif o.name == "tensor.extract_slice":
            got = _slice_dims(o, sizes)
            if got != dims[o.operands[0]]:
                return False
            got = _kept_axes(got, _static_attr(o, "static_sizes"), o.results[0].type)
        else:  # tensor.insert_slice: the whole of an out-argument or of a fresh tensor
            dest = o.operands[1]
            if dest not in dims or _slice_dims(o, sizes) != dims[dest]:
                return False
            got = dims[dest]
        if got is None:
            return False
        dims[o.results[0]] = got
        chain.add(o.results[0])
    return False


def _identity_layout(t: ir.MemRefType) -> bool:
    layout = t.layout
    identity = ir.AffineMap.get_identity(t.rank)
    return isinstance(layout, ir.AffineMapAttr) and layout.value == identity


def _reshape_view(fl: _FunctionLowering, op: ir.Operation, target: ir.Operation) -> ir.Value | None:
    """The result of a reshape kernel as a view of its input's buffer (None: call the kernel):
    the input collapsed to one axis, expanded to the result's shape, whose symbolic dims come
    from the call's relax.shape. One symbolic dim at most in the result: a memref expand_shape
    takes one dynamic size per group."""
    src = fl.operand_buffers(op)[0]
    want = _memref_type(op.results[0].type)
    have = ir.MemRefType(src.type)
    if have.rank == 0 or want.rank == 0 or not _is_reshape_kernel(target):
        return None
    dynamic = [i for i, d in enumerate(want.shape) if d == _DYNAMIC]
    if dynamic or not have.has_static_shape:
        shape = _result_shapes(op)[0]
        if shape is None or len(dynamic) > 1 or not _identity_layout(have):
            return None
    return row_major_view(src, want, [fl._dim_value(shape[i], op) for i in dynamic])


def _lower_packed(fl: _FunctionLowering, op: ir.Operation) -> None:
    name = ir.StringAttr(op.attributes["callee"]).value
    args = fl.operand_buffers(op)
    outs = [fl._alloc(r, s, op) for r, s in zip(op.results, _result_shapes(op))]
    symbol = fl.helpers.packed_decl(name, [a.type for a in args + outs])
    # Packed functions take unranked memrefs (C: `{int64_t rank; void *descriptor}*`), so one
    # native kernel serves every rank and a Python function sees what it was given.
    unranked = [
        memref.CastOp(ir.UnrankedMemRefType.get(ir.MemRefType(b.type).element_type, None), b).result
        for b in args + outs
    ]
    func.CallOp([], ir.FlatSymbolRefAttr.get(symbol), unranked)
    for value, buffer in zip(op.results, outs):
        fl.buffers[value] = buffer


def _lower_alloc(fl: _FunctionLowering, op: ir.Operation) -> None:
    fl.buffers[op.results[0]] = fl._alloc(op.results[0], _result_shapes(op)[0], op)


def _lower_constant(fl: _FunctionLowering, op: ir.Operation) -> None:
    value = op.attributes["value"]
    mtype = _memref_type(op.results[0].type)
    symbol = fl.helpers.constant_global(value, mtype)
    fl.buffers[op.results[0]] = memref.GetGlobalOp(mtype, symbol).result


def _lower_return(fl: _FunctionLowering, op: ir.Operation) -> None:
    for value, out in zip(op.operands, fl.out_params):
        buffer = fl.buffers[value]
        if buffer != out:
            memref.CopyOp(buffer, out)
    func.ReturnOp([])


_RULES: dict[str, Callable[[_FunctionLowering, ir.Operation], None]] = {
    rx.CallTIR.name: _lower_call_tir,
    rx.CallTIRInplace.name: _lower_call_tir_inplace,
    rx.CallDPSPacked.name: _lower_packed,
    rx.CallPacked.name: _lower_packed,
    rx.AllocTensor.name: _lower_alloc,
    rx.Constant.name: _lower_constant,
    "func.return": _lower_return,
}


class _ModuleHelpers:
    """Module-level symbols created while lowering: packed-function declarations and globals."""

    def __init__(self, module_op: ir.Operation):
        self.module_op = module_op
        self.body = module_op.regions[0].blocks[0]
        self.decls: dict[tuple, str] = {}
        self.n_globals = 0

    def _insert_point(self) -> ir.InsertionPoint:
        return ir.InsertionPoint.at_block_begin(self.body)

    def packed_decl(self, name: str, types: list[ir.Type]) -> str:
        key = (name, tuple(str(t) for t in types))
        if key not in self.decls:
            stem = re.sub(r"[^A-Za-z0-9_]", "_", name)
            symbol = f"__packed_{stem}_{len(self.decls)}"
            with self._insert_point(), ir.Location.unknown():
                unranked = [ir.UnrankedMemRefType.get(ir.MemRefType(t).element_type, None) for t in types]
                decl = func.FuncOp(symbol, ir.FunctionType.get(unranked, []), visibility="private")
            decl.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            decl.attributes[PACKED_ATTR] = ir.StringAttr.get(name)
            decl.attributes[PACKED_ARGS_ATTR] = ir.ArrayAttr.get([ir.TypeAttr.get(t) for t in types])
            self.decls[key] = symbol
        return self.decls[key]

    def constant_global(self, value: ir.Attribute, mtype: ir.MemRefType) -> str:
        symbol = f"__constant_{self.n_globals}"
        self.n_globals += 1
        with self._insert_point(), ir.Location.unknown():
            constant_global(symbol, value, mtype, alignment=64)
        return symbol


def constant_global(symbol: str, value: ir.Attribute, mtype: ir.MemRefType, alignment: int | None = None) -> None:
    """A private constant `memref.global` holding `value`, at the insertion point."""
    i64 = ir.IntegerType.get_signless(64)
    memref.GlobalOp(
        symbol,
        ir.TypeAttr.get(mtype),
        sym_visibility="private",
        initial_value=value,
        constant=True,
        alignment=ir.IntegerAttr.get(i64, alignment) if alignment else None,
    )


def graph_to_memref(module_op: ir.Operation) -> None:
    helpers = _ModuleHelpers(module_op)
    with rx.cached_symbols(module_op):  # every call_tir's callee (kernels are not erased here)
        for func_op in graph_functions(module_op):
            _FunctionLowering(module_op, func_op, helpers).run()


@register_pass(
    "relax-graph-to-memref",
    "lower relax graph functions to memref code that calls primitive and packed functions",
)
def relax_graph_to_memref():
    return graph_to_memref


