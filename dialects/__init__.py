"""Op definitions of relaxmlir and the MLIR context they are loaded into."""

from __future__ import annotations

from mlir import ir

from dialects.relax import RELAX

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
        load_all(_CONTEXT)
    return _CONTEXT
