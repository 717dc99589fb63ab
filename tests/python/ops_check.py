"""The check shared by tests/python/test_ops_*.py: one model, both importers, compared to torch.

A case is a function of fixed inputs returning one tensor or a tuple of them; grouping several
ops into one function makes one build per importer instead of one per op (this machine has two
cores and the default suite has a time budget). Where both importers make the same module (the
same MLIR text, constants included, but for the parameters' names), it is built and run once:
relax.build of the same module gives the same code, so a second build could only repeat the
first one's answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import torch
from test_frontend_fx import import_model, run

FRONTENDS = ("fx", "ep")


class Fn(torch.nn.Module):
    """A module applying `fn` to up to five inputs (a fixed signature, so that fx traces it)."""

    def __init__(self, fn: Callable, nargs: int):
        super().__init__()
        self.fn, self.nargs = fn, nargs

    def forward(self, a, b=None, c=None, d=None, e=None):
        return self.fn(*(a, b, c, d, e)[: self.nargs])


def module_text(mod) -> str:
    """The module's full text, less the names of its parameters (labels for signatures and
    errors, no part of the code: fx calls a module's `input` `input_1`)."""
    return re.sub(r' \{relax\.name = "\w+"\}', "", mod.module.operation.get_asm())


def check_ops(
    fn: Callable | torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    name: str,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    frontends: Sequence[str] = FRONTENDS,
) -> None:
    """Import `fn` over `inputs` through each importer, build, run, compare with torch eager
    (the importers' modules built once where they are alike).

    NaN must match NaN and infinities must match exactly (numpy's `assert_allclose` rules);
    integer and bool results must be equal.
    """
    model = (fn if isinstance(fn, torch.nn.Module) else Fn(fn, len(inputs))).eval()
    with torch.no_grad():
        expected = model(*inputs)
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    outputs = {}  # module_text -> the outputs of its build
    for frontend in frontends:
        mod = import_model(model, list(inputs), frontend)
        text = module_text(mod)
        if text not in outputs:
            outputs[text] = run(mod, *inputs)
        got = outputs[text]
        assert len(got) == len(expected), f"{name} via {frontend}: {len(got)} outputs"
        for i, (g, e) in enumerate(zip(got, expected)):
            e = e.detach().numpy()
            where = f"{name} via {frontend}, output {i} (inputs {[tuple(t.shape) for t in inputs]})"
            assert g.shape == e.shape, f"{where}: shape {g.shape}, torch {e.shape}"
            g = g.astype(bool) if e.dtype == np.bool_ else g
            assert g.dtype == e.dtype, f"{where}: dtype {g.dtype}, torch {e.dtype}"
            if e.dtype.kind in "biu":
                np.testing.assert_array_equal(g, e, err_msg=where)
            else:
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=where)
