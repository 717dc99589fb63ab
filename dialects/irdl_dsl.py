"""A small declarative layer over IRDL: op classes with typed fields that emit IRDL text.

MLIR 22's Python wheel has `mlir.dialects.irdl` (the IRDL ops and `load_dialects`) but not the
newer `irdl.dsl` module, so op classes declare their fields here and `Dialect.irdl_text()` turns
them into an `irdl.dialect` that `irdl.load_dialects` registers in a context.
"""

from __future__ import annotations

import glob
import hashlib
import io
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from mlir import ir

from dialects.scratch import private_folder, wheel_stamp

# IRDL base constraints by short name; "any" accepts every type or attribute.
_BASES = {
    "tensor": '"!builtin.tensor"',
    "symbol": '"#builtin.symbol_ref"',
    "string": '"#builtin.string"',
    "array": '"#builtin.array"',
    "int_array": '"#builtin.array"',
    "integer": '"#builtin.integer"',
    "float": '"#builtin.float"',
    "bool": '"#builtin.integer"',  # BoolAttr is an i1 IntegerAttr; `Attr.refine` checks the width
    "dense": '"#builtin.dense_elements"',
    "type": '"#builtin.type"',
}


@dataclass(frozen=True)
class Operand:
    """An operand group. `variadic` groups take any number of values of possibly different types.

    IRDL (MLIR 22) binds one constraint variable per group, so a variadic group would force all of
    its values to the same type. A heterogeneous variadic group is therefore declared as `slots`
    variadic groups, each holding one run of consecutive values of one type
    (`operandSegmentSizes`): any number of values, in at most `slots` runs of equal types.
    """

    constraint: str = "tensor"
    variadic: bool = False
    # Groups are cheap but not free: every group is a number in each op's printed segment sizes
    # and costs dialect load time (1024 operand + 256 result groups: ~10 ms more than 32 + 8).
    slots: int = 1024


@dataclass(frozen=True)
class Result:
    constraint: str = "tensor"
    variadic: bool = False
    slots: int = 256


@dataclass(frozen=True)
class Attr:
    """An attribute; `constraint` is the IRDL base. IRDL checks only the base, so the finer
    kinds (`bool` = i1, `int_array` = array of integers) are checked by `refine` (relax-verify)."""

    constraint: str = "any"

    def refine(self, value: ir.Attribute) -> str | None:
        value = value.maybe_downcast() if hasattr(value, "maybe_downcast") else value
        if self.constraint == "bool":
            is_i1 = isinstance(value, ir.IntegerAttr) and ir.IntegerType(value.type).width == 1
            if not (isinstance(value, ir.BoolAttr) or is_i1):  # `false` parses as a BoolAttr
                return "expects a bool (true/false)"
        elif self.constraint == "int_array":
            items = list(value) if isinstance(value, ir.ArrayAttr) else None
            if items is None or not all(isinstance(i.maybe_downcast(), ir.IntegerAttr) for i in items):
                return "expects an array of integers"
        return None


@dataclass(frozen=True)
class Region:
    blocks: int = 1


Verifier = Callable[[ir.Operation], str | None]


class Dialect:
    """A named set of op classes; `load(ctx)` registers it (idempotent per context)."""

    def __init__(self, name: str):
        self.name = name
        self.ops: dict[str, type[Op]] = {}

    def op(self, cls: type[Op]) -> type[Op]:
        cls.dialect = self
        cls.name = f"{self.name}.{cls.mnemonic}"
        self.ops[cls.name] = cls
        return cls

    def irdl_text(self) -> str:
        lines = [f"irdl.dialect @{self.name} {{"]
        for cls in self.ops.values():
            lines += ["  " + line for line in cls.irdl_lines()]
        lines.append("}")
        return "\n".join(lines)

    def load(self, ctx: ir.Context) -> None:
        from mlir.dialects import irdl

        first = next(iter(self.ops))
        if ctx.is_registered_operation(first):
            return
        with ctx, ir.Location.unknown():
            irdl.load_dialects(self.definition())

    def definition(self) -> ir.Module:
        """The `irdl.dialect` module, in the current context: from its bytecode where a process
        cached it for the same op classes and MLIR build (`<name>.irdl-<key>.mlirbc` in the
        user's `scratch.private_folder`), else from `irdl_text()`, caching it. The text (342 kB,
        the variadic groups' slots) took 35 ms of each process's first build to write and
        parse; the bytecode parses in ~10 ms. A cache that cannot be read or written is passed
        by."""
        try:
            path = os.path.join(private_folder(), self._bytecode_name())
        except OSError:
            return ir.Module.parse(self.irdl_text())
        try:
            with open(path, "rb") as f:
                return ir.Module.parse(f.read())
        except (OSError, ir.MLIRError):
            pass
        module = ir.Module.parse(self.irdl_text())
        _write_bytecode(module, path)
        return module

    def _bytecode_name(self) -> str:
        h = hashlib.sha256()
        for name, cls in self.ops.items():
            h.update(name.encode())
            for kind in (Operand, Result, Attr, Region):
                h.update(repr(cls.fields(kind)).encode())
        # the MLIR build: bytecode is read by the version that wrote it
        h.update(wheel_stamp("mlir", "_mlir_libs/libMLIRPythonCAPI.so").encode())
        return f"{self.name}.irdl-{h.hexdigest()[:20]}.mlirbc"


def _write_bytecode(module: ir.Module, path: str) -> None:
    """Atomically (a reader sees no file or a whole one); older keys of the dialect removed."""
    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    folder = os.path.dirname(path)
    partial = None
    try:
        fd, partial = tempfile.mkstemp(prefix=".irdl-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(buf.getvalue())
        os.replace(partial, path)
        partial = None
        stem = os.path.basename(path).rsplit("-", 1)[0]
        for old in glob.glob(os.path.join(folder, f"{stem}-*.mlirbc")):
            if old != path:
                os.unlink(old)
    except OSError:
        if partial is not None and os.path.exists(partial):
            os.unlink(partial)


class Op:
    """Base of declarative op classes: subclasses declare Operand/Result/Attr/Region fields."""

    dialect: ClassVar[Dialect]
    name: ClassVar[str]
    mnemonic: ClassVar[str]
    # Semantic checks that IRDL cannot express (callee exists, placement, shapes); run by the
    # `relax-verify` pass. Returns an error message or None.
    verify: ClassVar[Verifier | None] = None

    @classmethod
    def fields(cls, kind: type) -> list[tuple[str, object]]:
        out = []
        for klass in reversed(cls.__mro__):
            for key, value in vars(klass).items():
                if isinstance(value, kind):
                    out.append((key, value))
        return out

    @classmethod
    def irdl_lines(cls) -> list[str]:
        body: list[str] = []

        def const(constraint: str) -> str:
            # A fresh variable per use: IRDL requires every use of one variable to match one type.
            var = f"%c{len(body)}"
            rhs = "irdl.any" if constraint == "any" else f"irdl.base {_BASES[constraint]}"
            body.append(f"{var} = {rhs}")
            return var

        def group(kind: type) -> str:
            items = []
            for key, value in cls.fields(kind):
                if value.variadic:
                    # One group per run of equal types: see `segment_list`.
                    for i in range(value.slots):
                        items.append(f"{key}{i}: variadic {const(value.constraint)}")
                else:
                    items.append(f"{key}: {const(value.constraint)}")
            return ", ".join(items)

        operands, results = group(Operand), group(Result)
        attrs = [(k, const(v.constraint)) for k, v in cls.fields(Attr)]
        regions = cls.fields(Region)
        if operands:
            body.append(f"irdl.operands({operands})")
        if results:
            body.append(f"irdl.results({results})")
        if attrs:
            body.append("irdl.attributes {" + ", ".join(f'"{k}" = {v}' for k, v in attrs) + "}")
        if regions:
            names = []
            for i, (key, region) in enumerate(regions):
                body.append(f"%r{i} = irdl.region with size {region.blocks}")
                names.append(f"{key}: %r{i}")
            body.append(f"irdl.regions({', '.join(names)})")
        return [f"irdl.operation @{cls.mnemonic} {{"] + ["  " + b for b in body] + ["}"]

    @classmethod
    def segment_list(cls, kind: type, types: Sequence) -> list[int] | None:
        """The segment sizes of `kind` for values of `types` (ir.Type or their text), or None if
        the op has no variadic group of this kind. The variadic field gets every value the fixed
        fields leave, one group per run of consecutive equal types (IRDL binds one type per
        group), so any number of values fits; only the number of runs is capped by `slots`.
        Pure Python: `add_segments` calls it on text, before any context exists."""
        fields = cls.fields(kind)
        variadic = [f for _, f in fields if f.variadic]
        if not variadic:
            return None
        if len(variadic) > 1:
            raise TypeError(f"'{cls.name}': at most one variadic group per kind is supported")
        at = next(i for i, (_, f) in enumerate(fields) if f.variadic)
        types = list(types)
        runs: list[int] = []
        previous = None
        for t in types[at : max(at, len(types) - (len(fields) - 1 - at))]:
            key = str(t)
            if runs and key == previous:
                runs[-1] += 1
            else:
                runs.append(1)
            previous = key
        slots = variadic[0].slots
        if len(runs) > slots:
            kind_name = "operands" if kind is Operand else "results"
            raise ValueError(
                f"'{cls.name}' takes {kind_name} in at most {slots} runs of equal types (each "
                f"change of type between consecutive {kind_name} starts a run), got "
                f"{len(runs)} runs ({len(types)} {kind_name})"
            )
        sizes = []
        for _, f in fields:
            sizes += runs + [0] * (slots - len(runs)) if f.variadic else [1]
        return sizes

    @classmethod
    def segment_sizes(cls, kind: type, types: Sequence) -> ir.Attribute | None:
        """`operandSegmentSizes`/`resultSegmentSizes` (see `segment_list`) as an attribute."""
        sizes = cls.segment_list(kind, types)
        return None if sizes is None else ir.DenseI32ArrayAttr.get(sizes)

    @classmethod
    def refresh_segments(cls, op: ir.Operation) -> None:
        """Recompute the segment sizes of `op` after one of its operands changed type."""
        for kind, key, values in (
            (Operand, "operandSegmentSizes", op.operands),
            (Result, "resultSegmentSizes", op.results),
        ):
            sizes = cls.segment_sizes(kind, [v.type for v in values])
            if sizes is not None:
                op.attributes[key] = sizes

    @classmethod
    def create(
        cls,
        operands=(),
        results=(),
        attributes: dict | None = None,
        loc: ir.Location | None = None,
    ) -> ir.Operation:
        attributes = dict(attributes or {})
        operands, results = list(operands), list(results)
        for kind, key, values in (
            (Operand, "operandSegmentSizes", operands),
            (Result, "resultSegmentSizes", results),
        ):
            # Operands are values, results their types: the runs are taken over the types.
            sizes = cls.segment_sizes(kind, [v.type if hasattr(v, "type") else v for v in values])
            if sizes is not None:
                attributes[key] = sizes
        return ir.Operation.create(
            cls.name,
            results=list(results),
            operands=list(operands),
            attributes=attributes,
            loc=loc,
        )
