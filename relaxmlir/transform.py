"""Module passes of the Python API: callables `IRModule -> IRModule`, composed by `Sequential`."""

from __future__ import annotations

from typing import Callable, Sequence

from lowering.registry import PassError, PipelineError, run_pipeline
from relaxmlir.ir import IRModule
from relaxmlir.scope import scope


class Pass:
    """A named module pass; calling it returns a new module (the input is left unchanged)."""

    def __init__(self, name: str, fn: Callable[[IRModule], None]):
        self.name, self.fn = name, fn

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.name} expects an IRModule, got {type(mod).__name__}")
        out = mod.clone()
        with scope():
            try:
                self.fn(out)
            except PassError as exc:
                raise ValueError(f"{self.name}: {exc.location}: {exc}") from None
        return out

    def __repr__(self) -> str:
        return f"<Pass {self.name}>"


def mlir_pass(pipeline_element: str) -> Pass:
    """Wrap a registered (or upstream) pass by its textual name, e.g. `relax-inline-dataflow`."""

    def run(mod: IRModule) -> None:
        try:
            run_pipeline(mod.module, f"builtin.module({pipeline_element})")
        except PipelineError as exc:
            raise ValueError(f"{pipeline_element}: {exc}") from None

    return Pass(pipeline_element, run)


class Sequential(Pass):
    """Apply passes in order: `rm.transform.Sequential([LegalizeOps(), FuseOps()])`."""

    def __init__(self, passes: Sequence[Callable[[IRModule], IRModule]], name: str = "Sequential"):
        self.passes = list(passes)
        self.name = name

    def __call__(self, mod: IRModule) -> IRModule:
        for p in self.passes:
            mod = p(mod)
        return mod
