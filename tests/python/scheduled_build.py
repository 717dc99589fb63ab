"""One relax.build that also shows what its schedule stage did.

Tests that check which CPU rule each kernel got and then run the model used to lower the module
twice: once up to the schedules (graph, layout and schedule stages), once more inside
relax.build. `build_scheduled` builds once and keeps the module as the build's first pipeline run
(the same stages) left it, wrapping `relax.build`'s `run_pipeline` as test_cache's
`compilations` fixture does.
"""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

from mlir import ir

from relaxmlir import relax
from relaxmlir.relax import vm_build


def build_scheduled(mod, target, text: Callable[[ir.Module], str] = str):
    """(relax.build(mod, target), `text` of the module after the build's graph, layout and
    schedule stages). Fails if the build ran those stages other than in one run."""
    seen = []
    run = vm_build.run_pipeline

    def capture(module, pipeline, *args, **kwargs):
        run(module, pipeline, *args, **kwargs)
        if "relax-schedule-cpu" in pipeline:
            assert "relax-graph-to-memref" not in pipeline, pipeline  # not yet bufferized
            seen.append(text(module))

    with mock.patch.object(vm_build, "run_pipeline", capture):
        ex = relax.build(mod, target)
    assert len(seen) == 1, f"relax.build scheduled in {len(seen)} pipeline runs"
    return ex, seen[0]
