"""Op definitions of relaxmlir and the MLIR context they are loaded into."""

from __future__ import annotations

from mlir import ir

from dialects.relax import RELAX

# Creating the Python view of a `relax.*` op looks for a Python module of its dialect under each
# search prefix and remembers only a success: with `mlir.dialects` alone, every op view of ours
# retried (and failed) `import mlir.dialects.relax` (~0.1 ms each, ~0.9 s of a BERT-base build).
# `dialects.relax` is that module.
if "dialects" not in ir._globals.dialect_search_modules:
    ir._globals.append_dialect_search_prefix("dialects")

_CONTEXT: ir.Context | None = None


def load_all(ctx: ir.Context) -> None:
    """Register the project's dialects in `ctx` (idempotent)."""
    RELAX.load(ctx)


def get_context() -> ir.Context:
    """The process-wide context with upstream dialects and ours loaded.

    One context keeps types and attributes comparable across modules built by different APIs.
    """
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = ir.Context()
        # Passes of ours build IR and may JIT (FoldConstant) from inside a PassManager run, which
        # MLIR forbids while the context is multi-threaded.
        _CONTEXT.enable_multithreading(False)
        load_all(_CONTEXT)
        # (the LLVM IR translations are registered by the bindings' Context constructor, through
        # _mlirRegisterEverything; an ExecutionEngine made here to register them cost 6-8 ms)
    return _CONTEXT


def clone_module(module: ir.Module) -> ir.Module:
    """A deep copy of `module` in its own context, locations kept. Ops are cloned, not printed
    and parsed, so large constants are shared rather than copied (a print + parse of BERT-base's
    weights took 6 s)."""
    src = module.operation
    with src.context, src.location:
        out = ir.Module.create()
        for name in src.attributes:  # iterating an attribute map yields the names
            out.operation.attributes[name] = src.attributes[name]
        ip = ir.InsertionPoint(out.body)
        for op in module.body.operations:
            op.operation.clone(ip=ip)
    return out
