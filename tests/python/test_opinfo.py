"""PyTorch's own operator database (OpInfo) through both importers (issue 13, item 1).

For each OpInfo whose torch op the importers map (its function, method name or ATen op is in
`CONVERTERS`), its float32 sample inputs (0-d, size-0 dims, negative dims, broadcasting,
keyword variants) are imported with `from_fx` and `from_exported_program`, built, run and
compared with torch at OpInfo's float32 tolerances (`torch.testing.assert_close` defaults,
widened by the OpInfo's own `toleranceOverride`s). A sample the project rejects must raise
NotImplementedError or ValueError; any other exception, or a wrong answer, fails.

Samples that torch itself cannot trace (fx) or export are not counted; neither are samples with
non-tensor results or more than six tensor inputs. The default run sweeps `FAST_OPS` (a few
samples each); `-m slow` sweeps every mapped OpInfo with all its samples. `python
tests/python/test_opinfo.py` prints the coverage table that the README quotes. A sample's module
that both importers make alike is built and run once (as in ops_check).

The OpInfo database is imported when a test first needs it (~5 s), not at collection: a test
process that runs no OpInfo test never pays for it.
"""

from __future__ import annotations

import collections
import operator
import sys
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from ops_check import module_text

from relaxmlir import cpu, relax
from relaxmlir.frontend import from_exported_program, from_fx
from relaxmlir.frontend.importer import CONVERTERS

pytestmark = pytest.mark.filterwarnings("ignore")

# torch.testing.assert_close's float32 defaults
RTOL, ATOL = 1.3e-6, 1e-5
MAX_INPUTS = 6
REJECTED = (NotImplementedError, ValueError)

# the default subset: one OpInfo per family, its first samples
FAST_OPS = {
    "floor": 3, "expm1": 3, "nn.functional.hardswish": 3, "nn.functional.elu": 2, "add": 3,
    "where": 2, "sum": 4, "argmax": 3, "softmax": 3, "nn.functional.group_norm": 2,
    "nn.functional.pad": 4, "nn.functional.conv2d": 3, "nn.functional.avg_pool2d": 3,
    "transpose": 3, "squeeze": 4, "cumsum": 2, "sort": 2, "gather": 2, "roll": 3, "flip": 2,
    "einsum": 3, "native_layer_norm": 2, "_native_batch_norm_legit": 2, "atan2": 2, "isnan": 2,
}  # fmt: skip


# OpInfos with failing samples in the full sweep, each with where the bug is (not the importers);
# marked strict xfail in the full sweep
KNOWN_FAILURES: dict[str, str] = {}

# Samples that once failed below the importers, run by default: max_pool2d with padding and a
# width dilation over a single window row (the unit-loop folding of the CPU schedule read the
# whole padded column), bmm (1, 512, 1) x (1, 1, 128) (the strided-view raising dropped the
# K=1 loop from every operand: a non-invertible linalg map); and once rejected: 1-D area
# interpolation (adaptive average pooling over a height of 1), max pooling's indices (plain, and
# with padding + dilation), torch.rsub and torch.split_with_sizes through fx
FIXED_SAMPLES = {
    "rsub": [0],
    "split_with_sizes": [0],
    "nn.functional.max_pool2d": [691, 1195, 0, 18],
    "nn.functional.max_pool1d": [0, 18],
    "bmm.triton_optimized": [9],
    "nn.functional.interpolate.area": [0, 3],
}


# OpInfos whose `op` is a wrapper (a lambda, a slot wrapper): the torch target they call
ALIASES = {
    "nn.functional.scaled_dot_product_attention": torch.nn.functional.scaled_dot_product_attention,
    "nn.functional.embedding": torch.nn.functional.embedding,
    "__getitem__": operator.getitem,
}


# ops whose values torch leaves undefined (uninitialized memory): nothing to compare
UNDEFINED_VALUES = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


def _mapped(op) -> bool:
    if op.name in UNDEFINED_VALUES:
        return False
    if op.op in CONVERTERS or op.name in CONVERTERS or ALIASES.get(op.name) in CONVERTERS:
        return True
    packet = getattr(torch.ops.aten, op.aten_name or op.name.split(".")[-1], None)
    return packet is not None and packet in CONVERTERS


def _op_db() -> list:
    """torch's OpInfo database (imported on the first call; a skip where it is missing)."""
    opinfo = pytest.importorskip(
        "torch.testing._internal.common_methods_invocations",
        reason="OpInfo needs torch's test extras (pip install expecttest)",
    )
    return opinfo.op_db


def mapped_ops() -> list:
    import relaxmlir.frontend.exported_program
    import relaxmlir.frontend.fx  # noqa: F401

    return [op for op in _op_db() if torch.float32 in op.supported_dtypes("cpu") and _mapped(op)]


def _op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _tolerance(op) -> tuple[float, float]:
    """OpInfo's float32 tolerance: the defaults, widened by any toleranceOverride it declares."""
    rtol, atol = RTOL, ATOL
    for deco in getattr(op, "decorators", ()) or ():
        for d in getattr(deco, "decorators", ()) or ():
            tol = getattr(d, "d", None)
            if isinstance(tol, dict) and torch.float32 in tol:
                rtol, atol = max(rtol, tol[torch.float32].rtol), max(atol, tol[torch.float32].atol)
    return rtol, atol


class _Sample(torch.nn.Module):
    """Calls the OpInfo's op with the sample's tensors as inputs, the rest fixed."""

    def __init__(self, op, structure, n: int):
        super().__init__()
        self.op, self.structure, self.n = op, structure, n

    def forward(self, a, b=None, c=None, d=None, e=None, f=None):
        tensors = (a, b, c, d, e, f)[: self.n]
        inp, args, kwargs = _fill(self.structure, iter(tensors))
        return self.op(inp, *args, **kwargs)


_SLOT = object()


def _split(value, tensors: list):
    """`value` with each tensor replaced by a slot (the tensors are appended to `tensors`)."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return _SLOT
    if isinstance(value, (list, tuple)):
        return type(value)(_split(v, tensors) for v in value)
    if isinstance(value, dict):
        return {k: _split(v, tensors) for k, v in value.items()}
    return value


def _fill(value, tensors):
    if value is _SLOT:
        return next(tensors)
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(v, tensors) for v in value)
    if isinstance(value, dict):
        return {k: _fill(v, tensors) for k, v in value.items()}
    return value


@dataclass
class Outcome:
    """One sample through one importer: "pass", "rejected" (a clear error), "fail" (a wrong
    answer or another exception type) or "skip" (torch cannot trace/export it, or the sample
    is out of scope)."""

    kind: str
    detail: str = ""


def _results(value) -> list | None:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    return items if all(isinstance(v, torch.Tensor) for v in items) else None


def run_sample(op, sample, frontend: str, built: dict | None = None) -> Outcome:
    """`built`: one sample's module_text -> the outputs of its build, shared by the importers
    (a module both make alike is built and run once)."""
    tensors: list = []
    structure = _split((sample.input, tuple(sample.args), dict(sample.kwargs)), tensors)
    if not tensors or len(tensors) > MAX_INPUTS:
        return Outcome("skip", f"{len(tensors)} tensor inputs")
    model = _Sample(op.op, structure, len(tensors)).eval()
    with torch.no_grad():
        try:
            want = _results(model(*tensors))
        except Exception as exc:  # noqa: BLE001  (torch rejects its own sample: not counted)
            return Outcome("skip", f"torch: {exc}")
    if want is None:
        return Outcome("skip", "non-tensor result")
    try:
        if frontend == "fx":
            try:
                gm = torch.fx.symbolic_trace(model, concrete_args=_unused(len(tensors)))
            except Exception as exc:  # noqa: BLE001
                return Outcome("skip", f"fx cannot trace: {exc}")
            shapes = [tuple(t.shape) for t in tensors]
            dtypes = [str(t.dtype).replace("torch.", "") for t in tensors]
            mod = from_fx(gm, shapes, input_dtypes=dtypes)
        else:
            try:
                ep = torch.export.export(model, tuple(tensors))
            except Exception as exc:  # noqa: BLE001
                return Outcome("skip", f"torch.export: {exc}")
            mod = from_exported_program(ep)
        key = module_text(mod) if built is not None else None
        if key is not None and key in built:
            got = built[key]
        else:
            vm = relax.VirtualMachine(relax.build(mod, "llvm"), cpu())
            got = vm["main"](*tensors)
            if key is not None:
                built[key] = got
    except REJECTED as exc:
        return Outcome("rejected", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    except Exception as exc:  # noqa: BLE001  (the sweep records it as a failure)
        return Outcome(
            "fail", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        )
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    rtol, atol = _tolerance(op)
    if len(got) != len(want):
        return Outcome("fail", f"{len(got)} results, torch has {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = g.numpy(), w.detach().numpy()
        if w.dtype == np.bool_:
            g = g.astype(bool)
        if g.shape != w.shape or g.dtype != w.dtype:
            return Outcome("fail", f"result {i}: {g.dtype}{g.shape}, torch {w.dtype}{w.shape}")
        try:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as exc:
            return Outcome("fail", f"result {i}: " + " ".join(str(exc).split())[:200])
    return Outcome("pass")


def _unused(n: int) -> dict:
    return {name: None for name in "abcdef"[n:]}


@dataclass
class Report:
    counts: dict = field(default_factory=lambda: collections.Counter())
    ops: dict = field(default_factory=dict)  # op id -> Counter of outcome kinds
    failures: list = field(default_factory=list)
    rejections: dict = field(default_factory=dict)  # op id -> the first rejection message


def sweep(ops, max_samples: int | None = None, frontends=("fx", "ep")) -> Report:
    report = Report()
    for op in ops:
        per_op = collections.Counter()
        for s, sample in enumerate(op.sample_inputs("cpu", torch.float32)):
            if max_samples is not None and s >= max_samples:
                break
            built: dict = {}
            for frontend in frontends:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    outcome = run_sample(op, sample, frontend, built)
                per_op[outcome.kind] += 1
                report.counts[outcome.kind] += 1
                if outcome.kind == "rejected":
                    report.rejections.setdefault(_op_id(op), outcome.detail)
                if outcome.kind == "fail":
                    report.failures.append(
                        f"{_op_id(op)} sample {s} via {frontend}: {outcome.detail}"
                    )
        report.ops[_op_id(op)] = per_op
    return report


def _ops_by_name(names) -> list:
    ops = {op.name: op for op in reversed(mapped_ops())}  # the first variant of each name
    return [ops[n] for n in names]


@pytest.mark.parametrize("name", list(FAST_OPS))
def test_opinfo_fast(name):
    """The default subset: every counted sample passes or is rejected clearly."""
    (op,) = _ops_by_name([name])
    report = sweep([op], FAST_OPS[name])
    assert not report.failures, "\n".join(report.failures)
    assert report.counts["pass"] > 0, f"{name}: no sample passed ({dict(report.counts)})"


@pytest.mark.parametrize("op_id", list(FIXED_SAMPLES))
def test_fixed_samples(op_id):
    (op,) = [o for o in mapped_ops() if _op_id(o) == op_id]
    samples = list(op.sample_inputs("cpu", torch.float32))
    for s in FIXED_SAMPLES[op_id]:
        built: dict = {}
        for frontend in ("fx", "ep"):
            outcome = run_sample(op, samples[s], frontend, built)
            assert outcome.kind == "pass", f"{op_id} sample {s} via {frontend}: {outcome.detail}"


def test_sdpa_dropout_rejected():
    """dropout_p > 0 is random in torch whatever the module's mode: rejected, never ignored
    (the importers dropped it: half the values of torch's 0.5 dropout)."""
    (op,) = _ops_by_name(["nn.functional.scaled_dot_product_attention"])
    samples = list(op.sample_inputs("cpu", torch.float32))
    assert samples[0].kwargs["dropout_p"] == 0 and samples[2].kwargs["dropout_p"] == 0.5
    for frontend in ("fx", "ep"):
        assert run_sample(op, samples[0], frontend).kind == "pass"
        outcome = run_sample(op, samples[2], frontend)
        assert outcome.kind == "rejected" and "dropout_p (0.5)" in outcome.detail, outcome


def test_fast_subset_ops_are_mapped():
    names = {op.name for op in mapped_ops()}
    assert set(FAST_OPS) <= names, set(FAST_OPS) - names


def _full_params() -> list:
    return [
        pytest.param(
            op,
            id=_op_id(op),
            marks=[pytest.mark.xfail(reason=KNOWN_FAILURES[_op_id(op)], strict=True)]
            if _op_id(op) in KNOWN_FAILURES
            else [],
        )
        for op in mapped_ops()
    ]


def _selects_slow(config) -> bool:
    """Whether the run's `-m` expression can select a test marked slow: pytest's own evaluator
    (private: a pytest that moves it gets the plain reading, `slow` named other than in
    `not slow`)."""
    markexpr = config.getoption("markexpr")
    if not markexpr:
        return True
    try:
        from _pytest.mark.expression import Expression
    except ImportError:  # a pytest that moved its private evaluator
        return "slow" in markexpr.replace("not slow", "")
    return Expression.compile(markexpr).evaluate(lambda name, **_: name == "slow")


def pytest_generate_tests(metafunc):
    """test_opinfo_full's parameters (every mapped OpInfo: the database's import) only where
    slow tests may run; elsewhere one placeholder, deselected with the slow marker."""
    if metafunc.function is test_opinfo_full:
        placeholder = pytest.param(None, id="every-mapped-opinfo", marks=pytest.mark.slow)
        params = _full_params() if _selects_slow(metafunc.config) else [placeholder]
        metafunc.parametrize("op", params)


@pytest.mark.slow
def test_opinfo_full(op):
    """Every mapped OpInfo with all its float32 samples."""
    report = sweep([op])
    assert not report.failures, "\n".join(report.failures)


def main(argv: list[str]) -> None:
    """Print the coverage table of the full sweep (or of the OpInfo names given)."""
    ops = _ops_by_name(argv) if argv else mapped_ops()
    report = sweep(ops)
    counted = report.counts["pass"] + report.counts["rejected"] + report.counts["fail"]
    clean = [o for o, c in report.ops.items() if c["pass"] and not c["fail"]]
    print(f"OpInfos mapped: {len(ops)}; passing every counted sample: {len(clean)}")
    print(
        f"samples x importers counted: {counted}; pass {report.counts['pass']}, "
        f"rejected {report.counts['rejected']}, fail {report.counts['fail']}, "
        f"not counted {report.counts['skip']}"
    )
    if counted:
        print(f"pass rate: {report.counts['pass'] / counted:.1%}")
    for op_id, counts in report.ops.items():
        if not counts["pass"] or counts["fail"]:
            print(f"NOT CLEAN {op_id}: {dict(counts)} {report.rejections.get(op_id, '')}")
    for op_id, counts in sorted(report.ops.items(), key=lambda item: -item[1]["rejected"]):
        if counts["rejected"]:
            print(f"REJECTS {op_id}: {counts['rejected']} {report.rejections[op_id]}")
    for line in report.failures:
        print("FAIL", line)


if __name__ == "__main__":
    main(sys.argv[1:])
