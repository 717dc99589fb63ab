"""The rule objects that `dl.gpu` / `dl.cpu` hand to `ApplyDefaultSchedule`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScheduleRule:
    """One rule: a row of the schedule table of `kind` ("cuda" or "llvm"), by name."""

    kind: str
    name: str

    def __repr__(self) -> str:
        return f"dl.{'gpu' if self.kind == 'cuda' else 'cpu'}.{type(self).__name__}()"
