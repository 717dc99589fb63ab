"""Module passes of the Python API: callables `IRModule -> IRModule`, composed by `Sequential`.

Users write their own with `@module_pass` (TVM's decorator) and run them under a `PassContext`,
whose `opt_level`, `required_pass` and `disabled_pass` decide which passes a `Sequential` runs.
`rm.ir.transform` is this module, as TVM's `tvm.transform` is `tvm.ir.transform`.

NOTE: this module does not import `relaxmlir.ir` (which imports it to expose
`rm.ir.transform`); an IRModule is recognised by its `module` and `clone` members.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from lowering.registry import PassError, PipelineError, run_pipeline
from relaxmlir.scope import scope


def _check_module(mod: Any, who: str) -> None:
    if not (hasattr(mod, "module") and hasattr(mod, "clone")):
        raise TypeError(f"{who} expects an IRModule, got {type(mod).__name__}")


class PassContext:
    """Options of a pass run, current inside `with PassContext(...):` (TVM's `PassContext`).

    Parameters
    ----------
    opt_level : int, default 2
        A `Sequential` skips passes whose `opt_level` is above it.
    required_pass, disabled_pass : list of str
        Pass names that a `Sequential` always runs / never runs.
    config : dict, optional
        Free-form options for passes (`ctx.config["relax.x"]`).

    Examples
    --------
    >>> with rm.transform.PassContext(opt_level=3):
    ...     mod = rm.transform.Sequential([MyPass(), relax.transform.LegalizeOps()])(mod)
    """

    def __init__(
        self,
        opt_level: int = 2,
        required_pass: Sequence[str] | None = None,
        disabled_pass: Sequence[str] | None = None,
        config: dict | None = None,
    ):
        if not isinstance(opt_level, int):
            raise TypeError(f"PassContext: opt_level must be an int, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = list(required_pass or [])
        self.disabled_pass = list(disabled_pass or [])
        self.config = dict(config or {})

    def __enter__(self) -> PassContext:  # noqa: PYI034 (typing.Self needs python 3.11)
        _CONTEXTS.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _CONTEXTS.pop()

    @staticmethod
    def current() -> PassContext:
        """The innermost entered context, or a default one (opt_level 2)."""
        return _CONTEXTS[-1] if _CONTEXTS else _DEFAULT_CONTEXT

    def pass_enabled(self, p: Any) -> bool:
        """TVM's rule: disabled loses, required wins, else `opt_level` decides."""
        name = getattr(p, "name", type(p).__name__)
        if name in self.disabled_pass:
            return False
        if name in self.required_pass:
            return True
        return self.opt_level >= getattr(p, "opt_level", 0)

    def __repr__(self) -> str:
        return f"<PassContext opt_level={self.opt_level} config={self.config}>"


_DEFAULT_CONTEXT = PassContext()
_CONTEXTS: list[PassContext] = []  # entered contexts, innermost last


class Pass:
    """A named module pass; calling it returns a new module (the input is left unchanged)."""

    def __init__(self, name: str, fn: Callable[[Any], None], opt_level: int = 0):
        self.name, self.fn, self.opt_level = name, fn, opt_level

    def __call__(self, mod):
        _check_module(mod, self.name)
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

    def run(mod) -> None:
        try:
            run_pipeline(mod.module, f"builtin.module({pipeline_element})")
        except PipelineError as exc:
            raise ValueError(f"{pipeline_element}: {exc}") from None

    return Pass(pipeline_element, run)


class Sequential(Pass):
    """Apply passes in order: `rm.transform.Sequential([LegalizeOps(), FuseOps()])`.

    Under the current `PassContext`, a pass whose `opt_level` is above the context's, or whose
    name is in `disabled_pass`, is skipped (as in TVM); plain callables count as opt_level 0.
    """

    def __init__(
        self,
        passes: Sequence[Callable[[Any], Any]],
        opt_level: int = 0,
        name: str = "Sequential",
    ):
        self.passes = list(passes)
        self.name, self.opt_level = name, opt_level

    def __call__(self, mod):
        ctx = PassContext.current()
        for p in self.passes:
            if ctx.pass_enabled(p):
                mod = p(mod)
        return mod


class ModulePass(Pass):
    """A user pass `fn(mod, ctx) -> mod`; gets a copy of the module and the current context."""

    def __call__(self, mod):
        _check_module(mod, self.name)
        with scope():
            out = self.fn(mod.clone(), PassContext.current())
        _check_module_result(out, self.name)
        return out


def _check_module_result(out: Any, name: str) -> None:
    if not (hasattr(out, "module") and hasattr(out, "clone")):
        raise TypeError(f"{name}: the pass must return an IRModule, got {type(out).__name__}")


def module_pass(
    pass_func: Callable | None = None,
    opt_level: int = 0,
    name: str | None = None,
) -> Any:
    """Make a module pass of a function `f(mod, ctx) -> mod` or of a class with
    `transform_module(self, mod, ctx)` (TVM's `tvm.transform.module_pass`).

    Parameters
    ----------
    pass_func : function or class, optional
        Given directly (`module_pass(f, opt_level=1)`) or by decorating it.
    opt_level : int, default 0
        A `Sequential` runs the pass only when `PassContext.current().opt_level` reaches it.
    name : str, optional
        Default: the function's or class's name.

    Returns
    -------
    ModulePass, or for a class a new class whose instances (made with the class's own
    constructor arguments) are `ModulePass`es.

    Examples
    --------
    >>> @rm.transform.module_pass(opt_level=0, name="CublasDispatch")
    ... class CublasDispatch:
    ...     def transform_module(self, mod, ctx):
    ...         return relax.transform.RunCodegen()(mod)
    >>> mod = CublasDispatch()(mod)
    """
    if not isinstance(opt_level, int):
        raise TypeError(f"module_pass: opt_level must be an int, got {opt_level!r}")

    def create(target: Any) -> Any:
        pass_name = name or getattr(target, "__name__", "ModulePass")
        if inspect.isclass(target):
            return _pass_class(target, pass_name, opt_level)
        if callable(target):
            return ModulePass(pass_name, target, opt_level)
        raise TypeError(f"module_pass expects a function or a class, got {target!r}")

    return create(pass_func) if pass_func is not None else create


def _pass_class(cls: type, pass_name: str, opt_level: int) -> type:
    if not callable(getattr(cls, "transform_module", None)):
        raise TypeError(
            f"module_pass: class {cls.__name__} needs a method transform_module(self, mod, ctx)"
        )

    class PyModulePass(ModulePass):
        def __init__(self, *args, **kwargs):
            self.instance = cls(*args, **kwargs)
            super().__init__(pass_name, self.instance.transform_module, opt_level)

        def __getattr__(self, attr: str) -> Any:  # the user's fields and helpers stay reachable
            if attr == "instance":
                raise AttributeError(attr)
            return getattr(self.instance, attr)

    PyModulePass.__name__ = PyModulePass.__qualname__ = cls.__name__
    PyModulePass.__module__, PyModulePass.__doc__ = cls.__module__, cls.__doc__
    return PyModulePass
