"""The global function table: Python callables that compiled code calls by name (packed functions)."""

from __future__ import annotations

from collections.abc import Callable

_FUNCTIONS: dict[str, Callable] = {}


def register_func(name: str, f: Callable | None = None, override: bool = False):
    """Register `f` under `name`; usable as `@register_func("env.relu")`.

    Registering an existing name raises unless `override=True`.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_func expects a non-empty name, got {name!r}")

    def register(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"register_func('{name}'): {fn!r} is not callable")
        if name in _FUNCTIONS and not override:
            raise ValueError(f"global function '{name}' is already registered; pass override=True to replace it")
        _FUNCTIONS[name] = fn
        return fn

    return register if f is None else register(f)


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    if name not in _FUNCTIONS:
        if allow_missing:
            return None
        raise ValueError(f"global function '{name}' is not registered")
    return _FUNCTIONS[name]


def list_global_func_names() -> list[str]:
    return sorted(_FUNCTIONS)


def remove_global_func(name: str) -> None:
    _FUNCTIONS.pop(name, None)
