"""Entering the process-wide MLIR context (and a default location) for API entry points."""

from __future__ import annotations

import contextlib
import functools

from mlir import ir

import dialects


@contextlib.contextmanager
def scope():
    """`with scope():` makes our context current, with an unknown location as the default."""
    ctx = dialects.get_context()
    with ctx, ir.Location.unknown(ctx):
        yield ctx


def in_scope(fn):
    """Decorator: run `fn` inside `scope()`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with scope():
            return fn(*args, **kwargs)

    return wrapper
