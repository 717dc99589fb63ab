"""`te.create_prim_func`: TE tensors -> a destination-passing `func.func` of `linalg.generic` ops.

Each compute becomes one `linalg.generic` (spatial axes `parallel`, reduce axes `reduction`,
the reduction init a `linalg.fill`). Affine reads become `ins` operands with indexing maps;
data-dependent or guarded reads become `tensor.extract` in the body (see `codegen.py`).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from mlir import ir
from mlir.dialects import func, linalg, tensor

import dialects
from dialects.relax import PRIM_FUNC_ATTR, SHAPE_ATTR
from relaxmlir.te import expr as E
from relaxmlir.te.codegen import (
    Emitter, combine, from_storage, index_constant, storage_type, to_storage,
)
from relaxmlir.te.tensor import Tensor, dim_key, identity

DYN = ir.ShapedType.get_dynamic_size()


class PrimFunc:
    """A TensorIR-style primitive function: one public `func.func @main` in its own module.

    Arguments are the tensors of `params` in order (inputs, then outputs); the function returns
    the final value of each output, so bufferization writes the results into the out arguments.
    """

    def __init__(self, module: ir.Module, params: List[Tensor], num_inputs: int):
        self.module = module
        self.params = params
        self.num_inputs = num_inputs
        self.num_outputs = len(params) - num_inputs
        self.attrs: Dict[str, object] = {"global_symbol": "main", PRIM_FUNC_ATTR: True}

    @property
    def func_op(self) -> ir.Operation:
        return self.module.body.operations[0].operation

    @property
    def inputs(self) -> List[Tensor]:
        return self.params[: self.num_inputs]

    @property
    def outputs(self) -> List[Tensor]:
        return self.params[self.num_inputs:]

    def __str__(self) -> str:
        return str(self.module)

    def show(self) -> None:
        """Print the MLIR of the function."""
        print(str(self))

    def emit(self, module: ir.Module, name: str) -> ir.Operation:
        """Clone the function into `module` (same context) as a private `func.func @name`.

        Returns the new `func.func` operation; used by `BlockBuilder.emit_te`.
        """
        if module.context != self.module.context:
            raise ValueError("PrimFunc.emit: target module must live in dialects.get_context()")
        for op in module.body.operations:
            sym = op.attributes["sym_name"] if "sym_name" in op.attributes else None
            if sym is not None and ir.StringAttr(sym).value == name:
                raise ValueError(f"PrimFunc.emit: symbol '{name}' already exists in the module")
        with module.context, ir.Location.unknown():
            new = self.func_op.clone(ip=ir.InsertionPoint(module.body))
            new.attributes["sym_name"] = ir.StringAttr.get(name)
            new.attributes["sym_visibility"] = ir.StringAttr.get("private")
        return new.operation


def _affine(e: E.Expr, loops: dict) -> Optional[dict]:
    """`e` as {linalg dim: coefficient, None: constant}, or None when it is not affine."""
    if e.op == "const" and E.kind(e.dtype) in "iu":
        return {None: e.arg}
    if e.op == "var" and id(e) in loops and isinstance(loops[id(e)][1], int):
        dim, lo = loops[id(e)]
        return {dim: 1, None: lo}
    if e.op == "cast" and E.kind(e.dtype) in "iu" and E.kind(e.args[0].dtype) in "iu":
        return _affine(e.args[0], loops)
    parts = [_affine(a, loops) for a in e.args]
    if not parts or any(p is None for p in parts):
        return None
    if e.op == "neg":
        return {k: -c for k, c in parts[0].items()}
    if e.op in ("add", "sub"):
        sign = 1 if e.op == "add" else -1
        out = dict(parts[0])
        for k, c in parts[1].items():
            out[k] = out.get(k, 0) + sign * c
        return out
    if e.op == "mul":
        const = [p for p in parts if set(p) <= {None}]
        if const:
            scale = const[0].get(None, 0)
            other = parts[1] if const[0] is parts[0] else parts[0]
            return {k: c * scale for k, c in other.items()}
    return None


def _terms(form: dict) -> tuple:
    return {k: c for k, c in form.items() if k is not None and c != 0}, form.get(None, 0)


def _form_key(form: dict) -> tuple:
    terms, c0 = _terms(form)
    return tuple(sorted(terms.items())) + (c0,)


def _in_bounds(t: Tensor, forms: list, extents: list) -> Optional[bool]:
    """Whether an affine read stays inside `t` over the whole iteration space (None: unknown)."""
    known = True
    for size, form in zip(t.shape, forms):
        terms, c0 = _terms(form)
        if len(terms) == 1 and c0 == 0:
            (k, c), = terms.items()
            if c == 1 and dim_key(size) == dim_key(extents[k]):
                continue
        exts = [extents[k] for k in terms]
        if not isinstance(size, int) or not all(isinstance(x, int) for x in exts):
            known = None
            continue
        if any(x == 0 for x in exts):
            continue
        lo = c0 + sum(min(0, c * (extents[k] - 1)) for k, c in terms.items())
        hi = c0 + sum(max(0, c * (extents[k] - 1)) for k, c in terms.items())
        if lo < 0 or hi >= size:
            return False
    return known


def _operand_reads(name: str, body: E.Expr, loops: dict, extents: list) -> Dict[int, tuple]:
    """Reads that become `ins` operands: affine, and unconditional or provably in bounds."""
    found: Dict[int, tuple] = {}
    seen, stack = set(), [(body, False)]
    while stack:
        node, guarded = stack.pop()
        if (id(node), guarded) in seen:
            continue
        seen.add((id(node), guarded))
        if node.op == "read":
            forms = [_affine(i, loops) for i in node.args]
            inside = _in_bounds(node.arg, forms, extents) if None not in forms else None
            if inside is False and not guarded:
                raise ValueError(f"te.compute '{name}': read {node!r} is out of bounds of "
                                 f"'{node.arg.name}' {node.arg.shape}; guard it with "
                                 "te.if_then_else")
            if None not in forms and (not guarded or inside):
                found[id(node)] = (node, forms)
        if node.op == "select":  # branches run conditionally: only safe reads may be hoisted
            stack += [(node.args[2], True), (node.args[1], True), (node.args[0], guarded)]
        else:
            stack += [(a, guarded) for a in reversed(node.args)]
    return found


def _affine_expr(form: dict) -> ir.AffineExpr:
    terms, c0 = _terms(form)
    out = ir.AffineConstantExpr.get(c0)
    for k, c in sorted(terms.items()):
        out = out + ir.AffineDimExpr.get(k) * c
    return out


def _sliced_operand(value: ir.Value, t: Tensor, forms: list, extents: list, ext_val):
    """Turn `s*d + c` subscripts into plain dims over a `tensor.extract_slice` view.

    NOTE: linalg infers loop bounds from operand dims, so a plain `d_k` result must index a
    dimension of exactly the loop's extent; the slice makes it so (and is a free view).
    """
    plan = []  # per dim: (offset, size, stride, result) with size None = whole dim
    for size, form in zip(t.shape, forms):
        terms, c0 = _terms(form)
        if len(terms) == 1 and next(iter(terms.values())) >= 1:
            (k, s), = terms.items()
            if not (s == 1 and c0 == 0 and dim_key(size) == dim_key(extents[k])):
                plan.append((c0, ext_val(k), s, ir.AffineDimExpr.get(k)))
                continue
        plan.append((0, None, 1, _affine_expr(form)))
    if all(p[1] is None for p in plan):
        return value, [p[3] for p in plan]
    sizes = [p[1] if p[1] is not None else size if isinstance(size, int)
             else tensor.dim(value, index_constant(j))
             for j, (p, size) in enumerate(zip(plan, t.shape))]
    static = [s if isinstance(s, int) else DYN for s in sizes]
    ty = ir.RankedTensorType.get(static, ir.RankedTensorType(value.type).element_type)
    dyn = [s for s in sizes if not isinstance(s, int)]
    if 0 in static:
        # an empty view reads nothing; tensor.extract_slice rejects its offsets (x[:, 3:] of 3
        # columns starts past the end, and any offset into a dim of size 0 is out of bounds)
        return tensor.empty(sizes, ty.element_type), [p[3] for p in plan]
    value = tensor.extract_slice(ty, value, [], dyn, [], [p[0] for p in plan], static,
                                 [p[2] for p in plan])
    return value, [p[3] for p in plan]


def emit_compute(t: Tensor, values: dict, symbols: dict, dest: Optional[ir.Value]) -> ir.Value:
    """Emit the `linalg.generic` computing `t` at the current insertion point."""
    body = t.body
    is_reduce = body.op == "reduce"
    reduce_axes = body.arg[1] if is_reduce else ()
    loop_vars = list(t.axis) + list(reduce_axes)
    los = [0] * t.ndim + [ax.dom[0] for ax in reduce_axes]
    extents = list(t.shape) + [_extent(ax.dom) for ax in reduce_axes]
    loops = {id(v): (k, lo) for k, (v, lo) in enumerate(zip(loop_vars, los))}
    value_expr = body.args[0] if is_reduce else body
    n = len(loop_vars)

    outer = Emitter(symbols, values)

    def ext_val(k: int):  # int, or an `index` value made (once, memoized) only when needed
        return extents[k] if isinstance(extents[k], int) else outer.index(extents[k])

    ins, maps, slots, keys = [], [], {}, {}
    for rid, (read, forms) in _operand_reads(t.name, value_expr, loops, extents).items():
        key = (id(read.arg), tuple(_form_key(f) for f in forms))
        if key not in keys:
            keys[key] = len(ins)
            v, results = _sliced_operand(values[id(read.arg)], read.arg, forms, extents, ext_val)
            ins.append(v)
            maps.append(ir.AffineMap.get(n, 0, results))
        slots[rid] = keys[key]
    for k in range(t.ndim, n):  # a reduce dim no operand indexes plainly needs a bound witness
        if not any(isinstance(r, ir.AffineDimExpr) and r.position == k
                   for m in maps for r in m.results):
            ins.append(tensor.empty([ext_val(k)], ir.IntegerType.get_signless(8)))
            maps.append(ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(k)]))

    elem = storage_type(t.dtype)
    out_ty = ir.RankedTensorType.get([d if isinstance(d, int) else DYN for d in t.shape], elem)
    out = dest if dest is not None else tensor.empty([ext_val(k) for k in range(t.ndim)], elem)
    if is_reduce:
        init = to_storage(outer.value(identity(body.arg[0], t.dtype)), t.dtype)
        out = linalg.fill(init, outs=[out])
    maps.append(ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(k) for k in range(t.ndim)]))
    iters = ["parallel"] * t.ndim + ["reduction"] * len(reduce_axes)
    op = linalg.GenericOp(
        [out_ty], ins, [out],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
        ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{i}>") for i in iters]))
    block = op.regions[0].blocks.append(
        *[ir.RankedTensorType(v.type).element_type for v in ins], elem)
    with ir.InsertionPoint(block):
        args = {r: block.arguments[s] for r, s in slots.items()}
        em = Emitter(symbols, values, loops, args, block)
        v = em.value(value_expr)
        if is_reduce:
            acc = from_storage(block.arguments[len(ins)], t.dtype)
            v = combine(body.arg[0], t.dtype, acc, v)
        linalg.YieldOp([to_storage(v, t.dtype)])
    return op.result


def _extent(dom: tuple):
    lo, hi = dom
    if isinstance(lo, int) and isinstance(hi, int):
        return hi - lo
    return hi if isinstance(lo, int) and lo == 0 else E.convert(hi) - lo


def _topo_order(outputs: Sequence[Tensor]) -> List[Tensor]:
    order: List[Tensor] = []
    state: Dict[int, int] = {}  # 1 visiting, 2 done

    def visit(t: Tensor) -> None:
        if state.get(id(t)) == 2:
            return
        state[id(t)] = 1
        for src in t.inputs():
            visit(src)
        state[id(t)] = 2
        order.append(t)

    for t in outputs:
        visit(t)
    return order


def _shape_attr(t: Tensor) -> ir.Attribute:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) if isinstance(d, int) else
                             ir.StringAttr.get(d.arg if d.op == "var" else repr(d))
                             for d in t.shape])


def create_prim_func(args: Sequence[Tensor]) -> PrimFunc:
    """Create a primitive function from TE tensors, TVM's `te.create_prim_func`.

    Parameters
    ----------
    args : list of te.Tensor
        Placeholders (inputs) followed by computes (outputs), in argument order. Computes
        reachable from the outputs but not listed become local tensors.

    Returns
    -------
    PrimFunc

    Examples
    --------
    >>> f = te.create_prim_func([A, B, C])
    >>> f.show()
    """
    params = list(args)
    if not params or not all(isinstance(t, Tensor) for t in params):
        raise TypeError("te.create_prim_func: expected a non-empty list of te.Tensor")
    if len({id(t) for t in params}) != len(params):
        raise ValueError("te.create_prim_func: a tensor is listed twice")
    inputs = [t for t in params if t.is_placeholder]
    if params[: len(inputs)] != inputs:
        raise ValueError("te.create_prim_func: expected placeholders (inputs) before computes "
                         f"(outputs), got ({', '.join(t.name for t in params)})")
    outputs = params[len(inputs):]
    order = [t for t in _topo_order(outputs) if not t.is_placeholder]
    listed = {id(t) for t in params}
    missing = [t.name for t in _topo_order(outputs) if t.is_placeholder and id(t) not in listed]
    if missing:
        raise ValueError("te.create_prim_func: placeholders used but not listed as arguments "
                         f"({', '.join(missing)})")
    ctx = dialects.get_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        types = [ir.RankedTensorType.get([d if isinstance(d, int) else DYN for d in t.shape],
                                         storage_type(t.dtype)) for t in params]
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("main", (types, types[len(inputs):]))
        fn.attributes[PRIM_FUNC_ATTR] = ir.UnitAttr.get()
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get([
            ir.DictAttr.get({SHAPE_ATTR: _shape_attr(t)} if any(not isinstance(d, int)
                                                                for d in t.shape) else {})
            for t in params])
        entry = fn.add_entry_block()
        with ir.InsertionPoint(entry):
            values = {id(t): a for t, a in zip(params, entry.arguments)}
            symbols = _bind_symbols(params, entry.arguments)
            for t in order:
                dest = values.get(id(t))
                values[id(t)] = emit_compute(t, values, symbols, dest)
            func.ReturnOp([values[id(t)] for t in outputs])
        _erase_unused(symbols.values())
        if not module.operation.verify():
            raise RuntimeError("te.create_prim_func: generated IR does not verify")
    return PrimFunc(module, params, len(inputs))


def _bind_symbols(params: Sequence[Tensor], arguments) -> Dict[str, ir.Value]:
    """Each symbolic dim name -> `tensor.dim` of the first argument carrying it."""
    symbols: Dict[str, ir.Value] = {}
    for t, arg in zip(params, arguments):
        for j, d in enumerate(t.shape):
            if isinstance(d, E.Var) and d.name not in symbols:
                symbols[d.name] = tensor.dim(arg, index_constant(j))
    return symbols


def _erase_unused(values) -> None:
    for v in values:
        if not list(v.uses):
            idx = v.owner.operands[1]
            v.owner.erase()
            if not list(idx.uses):
                idx.owner.erase()
