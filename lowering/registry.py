"""The pass registry: every project pass by a stable name, and pipelines that mix them with upstream.

A project pass is a factory `(**options) -> ModulePass`; a ModulePass mutates a `builtin.module`
in place and raises `PassError` (with the op to blame) on failure. `build_pass_manager` turns a
textual pipeline such as `builtin.module(relax-legalize-ops,canonicalize)` into one MLIR
PassManager in which our passes run as Python passes beside upstream ones.
"""

from __future__ import annotations

import os

from dataclasses import dataclass, field
from typing import Callable, Optional

from mlir import ir
from mlir.passmanager import PassManager

ModulePass = Callable[[ir.Operation], None]


class PassError(Exception):
    """A pass failed; `op` (when known) locates the diagnostic."""

    def __init__(self, message: str, op: Optional[ir.Operation] = None):
        super().__init__(message)
        self.op = op

    @property
    def location(self) -> Optional[ir.Location]:
        return self.op.location if self.op is not None else None


class PipelineError(Exception):
    """A pipeline failed: holds the MLIR diagnostics or the project pass error."""


@dataclass
class PassInfo:
    name: str
    summary: str
    factory: Callable[..., ModulePass]
    options: dict[str, str] = field(default_factory=dict)


PASSES: dict[str, PassInfo] = {}


def register_pass(name: str, summary: str, options: Optional[dict[str, str]] = None):
    """Decorator: register a pass factory under `name` (kebab case, e.g. `relax-fuse-ops`)."""

    def wrap(factory: Callable[..., ModulePass]) -> Callable[..., ModulePass]:
        PASSES[name] = PassInfo(name, summary, factory, dict(options or {}))
        return factory

    return wrap


def get_pass(name: str) -> PassInfo:
    if name not in PASSES:
        raise KeyError(f"unknown pass '{name}'; known passes: {', '.join(sorted(PASSES))}")
    return PASSES[name]


def contains_op(root: ir.Operation, prefix: str) -> bool:
    """Whether an op whose name starts with `prefix` ("omp.", "nvgpu.warpgroup.") is nested in
    `root` (the walk stops at the first)."""
    found = []

    def visit(op):
        if op.operation.name.startswith(prefix):
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return bool(found)


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside of (), {} and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return [p for p in parts if p]


def parse_options(text: str) -> dict[str, str]:
    """`a=1 b=x` or `a=1,b=x` (the inside of `{...}`) -> dict; values may be quoted
    (`target="llvm -mcpu=x86-64-v3"`)."""
    out = {}
    items, current, quote = [], "", None
    for ch in text:
        if quote:
            current += ch
            quote = None if ch == quote else quote
        elif ch in "\"'":
            current += ch
            quote = ch
        elif ch in " ,\t\n":
            if current:
                items.append(current)
            current = ""
        else:
            current += ch
    if current:
        items.append(current)
    for item in items:
        key, _, value = item.partition("=")
        out[key.strip()] = value.strip().strip("\"'") if value else "true"
    return out


def _strip_anchor(pipeline: str) -> str:
    text = pipeline.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        return text[len("builtin.module(") : -1]
    return text


class _Runner:
    """Wraps a project pass for PassManager.add: records the error and signals failure."""

    def __init__(self, name: str, fn: ModulePass):
        self.name, self.fn = name, fn
        self.error: Optional[BaseException] = None

    def __call__(self, op, pass_) -> None:
        try:
            self.fn(op.operation if hasattr(op, "operation") else op)
        except Exception as exc:  # reported after the PassManager returns
            self.error = exc
            pass_.signal_pass_failure()


def build_pass_manager(pipeline: str, ctx: ir.Context) -> tuple[PassManager, list[_Runner]]:
    """One PassManager for a textual pipeline mixing project and upstream passes."""
    with ctx:
        pm = PassManager("builtin.module")
    runners: list[_Runner] = []
    upstream: list[str] = []

    def flush() -> None:
        if upstream:
            with ctx:
                pm.add(",".join(upstream))
            upstream.clear()

    for element in split_top_level(_strip_anchor(pipeline)):
        name, brace, rest = element.partition("{")
        name = name.strip()
        if name in PASSES:
            flush()
            options = parse_options(rest.rstrip("}")) if brace else {}
            info = PASSES[name]
            unknown = set(options) - set(info.options)
            if unknown:
                raise PipelineError(
                    f"pass '{name}' has no option(s) {sorted(unknown)}; options: {sorted(info.options)}"
                )
            runner = _Runner(name, info.factory(**options))
            runners.append(runner)
            with ctx:
                pm.add(runner, name=name, argument=name, description=info.summary)
        else:
            upstream.append(element)
    flush()
    return pm, runners


TIME_PASSES_ENV = "RELAXMLIR_TIME_PASSES"


def run_pipeline(
    module: ir.Module, pipeline: str, print_ir_after_all: bool = False, threaded: bool = False
) -> None:
    """Run `pipeline` on `module` in place; raise PassError or PipelineError on failure.

    `threaded`: turn the context's threading on for this run, so that passes nested on functions
    (`pipelines.per_function`) run on several functions at once; off again after it (the
    process-wide context keeps it off: some of our passes JIT or run pipelines of their own,
    which MLIR forbids on a multi-threaded context, so only pipelines without those ask)."""
    ctx = module.context
    pm, runners = build_pass_manager(pipeline, ctx)
    if print_ir_after_all:
        pm.enable_ir_printing(print_after_all=True, large_elements_limit=16)
    if os.environ.get(TIME_PASSES_ENV, "") not in ("", "0"):
        pm.enable_timing()  # per-pass wall time to stderr when the run ends (mlir-opt --mlir-timing)
    if threaded:
        ctx.enable_multithreading(True)
    try:
        pm.run(module.operation)
    except ir.MLIRError as exc:
        for runner in runners:
            if runner.error is not None:
                raise runner.error from None
        raise PipelineError(str(exc)) from None
    finally:
        if threaded:
            ctx.enable_multithreading(False)


def target_option(text: str, pass_name: str, kind: str | None = None):
    """The `target=` option of a target-dependent pass: a target string, or empty for the
    target in scope (`with Target(...)`), else the host CPU. With `kind`, a target of another
    kind is a PassError."""
    from relaxmlir.target import Target

    if not text:
        tgt = Target.current() or Target("llvm")
    else:
        try:
            tgt = Target(text)
        except ValueError as exc:
            raise PassError(f"{pass_name}: target=({text}): {exc}") from None
    if kind is not None and tgt.kind != kind:
        article = "an" if kind[0] in "aeiou" or kind == "llvm" else "a"
        raise PassError(f"{pass_name}: expected {article} {kind} target, got ({tgt})")
    return tgt
