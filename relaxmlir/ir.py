"""`IRModule`: a `builtin.module` in the project's context, with TVM-style accessors."""

from __future__ import annotations

from mlir import ir

import dialects
from dialects import relax as rx
from dialects import shape as sh
from dialects.relax_syntax import strip_segments
from lowering import dense
from relaxmlir import transform  # noqa: F401  (`rm.ir.transform`, as TVM's `tvm.ir.transform`)
from relaxmlir.scope import in_scope, scope

SHOW_ELEMENTS_LIMIT = 16  # constants above this many elements print as dense_resource<__elided__>


class ParseError(ValueError):
    """Malformed MLIR text; the message holds the MLIR diagnostics with locations."""


def _format_diagnostics(exc: ir.MLIRError) -> str:
    lines = []
    for diag in exc.error_diagnostics:
        lines.append(f"{diag.location}: error: {diag.message}")
        for note in diag.notes:
            lines.append(f"{note.location}: note: {note.message}")
    return "\n".join(lines) or str(exc)


def attr_value(attr: ir.Attribute, opaque=lambda a: a):
    """A Python value of an attribute (bool, int, float, str, lists of them); other kinds go
    through `opaque` (kept as attributes by default)."""
    if isinstance(attr, (ir.BoolAttr, ir.IntegerAttr, ir.FloatAttr, ir.StringAttr)):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return [attr_value(a, opaque) for a in attr]
    return opaque(attr)


class Function:
    """A view of one `func.func` of a module: a relax graph function or a primitive function."""

    def __init__(self, op: ir.Operation):
        self.op = op

    @property
    def name(self) -> str:
        return ir.StringAttr(self.op.attributes["sym_name"]).value

    @property
    def is_prim_func(self) -> bool:
        return rx.PRIM_FUNC_ATTR in self.op.attributes

    @property
    def is_relax_function(self) -> bool:
        return rx.FUNCTION_ATTR in self.op.attributes

    @property
    def function_type(self) -> ir.FunctionType:
        return ir.FunctionType(ir.TypeAttr(self.op.attributes["function_type"]).value)

    @property
    def attrs(self) -> dict:
        """Function attributes of the `relax.` namespace as python values, prefix dropped
        (TVM's `func.attrs["num_input"]`); the function/prim_func markers are left out."""
        out = {}
        for key in self.op.attributes:  # iterating an op's attribute map yields the names
            if key.startswith("relax.") and key not in (rx.FUNCTION_ATTR, rx.PRIM_FUNC_ATTR):
                out[key[len("relax."):]] = attr_value(self.op.attributes[key])
        return out

    @property
    def num_input(self) -> int | None:
        """How many leading parameters are inputs (the rest are weights); None when not set."""
        return self.attrs.get("num_input")

    def arg_attr(self, index: int, key: str) -> ir.Attribute | None:
        if "arg_attrs" not in self.op.attributes:
            return None
        attrs = ir.DictAttr(ir.ArrayAttr(self.op.attributes["arg_attrs"])[index])
        return attrs[key] if key in attrs else None

    @property
    def params(self) -> list:
        """[(name, TensorStructInfo)] of the parameters."""
        from relaxmlir.relax.struct_info import DTYPE_ATTR, TensorStructInfo, dtype_of

        out = []
        for i, t in enumerate(self.function_type.inputs):
            t = ir.RankedTensorType(t)
            name = self.arg_attr(i, "relax.name")
            shape_attr = self.arg_attr(i, rx.SHAPE_ATTR)
            shape = sh.from_attr(shape_attr) if shape_attr is not None else tuple(t.shape)
            marked = self.arg_attr(i, DTYPE_ATTR)
            dtype = ir.StringAttr(marked).value if marked is not None else dtype_of(t.element_type)
            out.append((ir.StringAttr(name).value if name else f"arg{i}", TensorStructInfo(shape, dtype)))
        return out

    @property
    def result_dtypes(self) -> list[str]:
        """The relax dtype of each result (bool ones are marked in `res_attrs`)."""
        from relaxmlir.relax.struct_info import DTYPE_ATTR, dtype_of

        types = list(self.function_type.results)
        marks = list(ir.ArrayAttr(self.op.attributes["res_attrs"])) if "res_attrs" in self.op.attributes else []
        out = []
        for i, t in enumerate(types):
            entry = ir.DictAttr(marks[i]) if i < len(marks) else None
            if entry is not None and DTYPE_ATTR in entry:
                out.append(ir.StringAttr(entry[DTYPE_ATTR]).value)
            else:
                out.append(dtype_of(ir.RankedTensorType(t).element_type))
        return out

    def show(self) -> None:
        print(self.script())

    @in_scope
    def script(self, elide: bool = True) -> str:
        return strip_segments(
            self.op.get_asm(
                large_elements_limit=SHOW_ELEMENTS_LIMIT if elide else None,
                use_name_loc_as_prefix=True,
            )
        )

    def __str__(self) -> str:
        return self.script(elide=False)

    def __repr__(self) -> str:
        kind = "PrimFunc" if self.is_prim_func else "Function"
        return f"<{kind} @{self.name}>"


class IRModule:
    """The unit of compilation: relax graph functions and primitive functions in one module."""

    def __init__(self, module: ir.Module | None = None):
        if module is None:
            with scope():
                module = ir.Module.create()
        self.module = module

    @property
    def body(self) -> ir.Block:
        return self.module.body

    def _funcs(self) -> dict[str, ir.Operation]:
        out = {}
        for op in self.body.operations:
            op = op.operation
            if op.name == "func.func":
                out[ir.StringAttr(op.attributes["sym_name"]).value] = op
        return out

    @property
    def functions(self) -> dict[str, Function]:
        return {name: Function(op) for name, op in self._funcs().items()}

    def __getitem__(self, name) -> Function:
        name = getattr(name, "name_hint", name)
        funcs = self._funcs()
        if name not in funcs:
            raise KeyError(f"module has no function '{name}'; functions: {', '.join(funcs)}")
        return Function(funcs[name])

    def __contains__(self, name) -> bool:
        return getattr(name, "name_hint", name) in self._funcs()

    def get_global_vars(self) -> list:
        from relaxmlir.relax.expr import GlobalVar

        return [GlobalVar(name) for name in self._funcs()]

    @in_scope
    def script(self, elide: bool = False) -> str:
        """MLIR text of the module (relax segment-size bookkeeping hidden; `parse` restores it)."""
        if elide:  # weights (dense_resource blobs) as `dense_resource<__elided__>`
            text = dense.elided_text(
                self.module, large_elements_limit=SHOW_ELEMENTS_LIMIT, use_name_loc_as_prefix=True
            )
        else:
            text = self.module.operation.get_asm(use_name_loc_as_prefix=True)
        return strip_segments(text)

    def show(self, elide: bool = True) -> None:
        """Print the module; large constants elided (`show(elide=False)` prints everything)."""
        print(self.script(elide=elide))

    def __str__(self) -> str:
        return self.script(elide=False)

    def __repr__(self) -> str:
        return f"<IRModule: {', '.join(self._funcs())}>"

    def clone(self) -> IRModule:
        """A deep copy (`dialects.clone_module`: ops cloned, constants shared)."""
        return IRModule(dialects.clone_module(self.module))

    @in_scope
    def verify(self) -> None:
        """MLIR verification plus the relax-verify pass; raises ValueError with the diagnostic."""
        from lowering.registry import PassError
        from lowering.verify import verify_module

        try:
            self.module.operation.verify()
        except ir.MLIRError as exc:
            raise ValueError(_format_diagnostics(exc)) from None
        try:
            verify_module(self.module.operation)
        except PassError as exc:
            raise ValueError(f"{exc.location}: error: {exc}") from None


def parse(text: str) -> IRModule:
    """Parse MLIR text (what `IRModule.show()`/`str()` printed) into an IRModule.

    Raises `ParseError` (a ValueError) carrying the MLIR diagnostic with its location.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse expects MLIR text (str), got {type(text).__name__}")
    from relaxmlir import diagnostics

    with scope() as ctx:
        module, diags = diagnostics.parse(text, "<input>", ctx)
    if module is None:
        raise ParseError(strip_segments("".join(diagnostics.format_diagnostic(d, text) for d in diags)).rstrip())
    return IRModule(module)
