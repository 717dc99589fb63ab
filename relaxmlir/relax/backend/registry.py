"""The pattern table of `relax.backend` (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from relaxmlir.relax.dpl import DFPattern


@dataclass
class PatternCheckContext:
    """What a pattern's `check` sees: the matched root value, the value of each annotation,
    every matched value by pattern node, and the operations the match covers."""

    matched_expr: object  # ir.Value of the root
    annotated_expr: dict  # annotation name -> ir.Value
    matched_ops: list  # ir.Operation
    match: object  # dpl.Match


@dataclass
class FusionPattern:
    """A named pattern: `name` is `"<codegen>.<kernel>"` (the composite function's attribute)."""

    name: str
    pattern: DFPattern
    annotation_patterns: dict = field(default_factory=dict)
    check: Callable[[PatternCheckContext], bool] | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"FusionPattern: name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.pattern, DFPattern):
            raise TypeError(
                f"FusionPattern '{self.name}': pattern must be a dpl pattern, got {self.pattern!r}"
            )
        for key, p in self.annotation_patterns.items():
            if not isinstance(p, DFPattern):
                raise TypeError(
                    f"FusionPattern '{self.name}': annotation '{key}' is not a dpl pattern"
                )
        if self.check is not None and not callable(self.check):
            raise TypeError(f"FusionPattern '{self.name}': check must be callable")

    @property
    def codegen(self) -> str:
        return self.name.split(".", 1)[0]


PatternEntry = FusionPattern | tuple

_PATTERNS: list[FusionPattern] = []  # registration order; later wins


def as_fusion_pattern(entry: PatternEntry) -> FusionPattern:
    """`FusionPattern` or TVM's tuple form `(name, pattern[, annotations[, check]])`."""
    if isinstance(entry, FusionPattern):
        return entry
    if isinstance(entry, tuple) and 2 <= len(entry) <= 4:
        return FusionPattern(*entry)
    raise TypeError(
        f"expected a FusionPattern or (name, pattern[, annotations[, check]]), got {entry!r}"
    )


def register_patterns(patterns: Sequence[PatternEntry]) -> None:
    """Add patterns to the table; a name registered again replaces the old entry and takes the
    new (higher) priority."""
    for entry in patterns:
        p = as_fusion_pattern(entry)
        _PATTERNS[:] = [q for q in _PATTERNS if q.name != p.name]
        _PATTERNS.append(p)


def get_pattern(name: str) -> FusionPattern:
    for p in _PATTERNS:
        if p.name == name:
            return p
    known = ", ".join(sorted(p.name for p in _PATTERNS)) or "none"
    raise ValueError(f"no fusion pattern named '{name}'; registered: {known}")


def get_patterns_with_prefix(prefix: str) -> list[FusionPattern]:
    """Patterns whose name starts with `prefix`, highest priority (latest registered) first."""
    return [p for p in reversed(_PATTERNS) if p.name.startswith(prefix)]


def pattern_names() -> list[str]:
    return [p.name for p in _PATTERNS]
