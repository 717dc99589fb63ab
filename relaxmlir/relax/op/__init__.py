"""High-level relax operators (`relax.op.*`): each returns a `Call` with inferred struct info."""

from relaxmlir.relax.op import builtin  # noqa: F401
