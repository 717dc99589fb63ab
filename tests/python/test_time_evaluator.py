"""`vm.time_evaluator`: TVM's timer over a compiled entry point (relaxmlir/runtime/timer.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import relaxmlir as rm
from relaxmlir import relax, te
from relaxmlir.runtime.timer import BenchmarkResult, time_evaluator


@pytest.fixture(scope="module")
def vm():
    """main(x) = relu(x) @ W + 1 over a 32 x 32 input (W bound as a constant)."""
    w = np.random.default_rng(0).standard_normal((32, 32)).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((32, 32), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            r = bb.emit_te(lambda a: te.compute(a.shape, lambda i, j: te.max(a[i, j], 0.0)), x)
            k = te.reduce_axis((0, 32), name="k")
            y = bb.emit_te(
                lambda a, b: te.compute((32, 32), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k)),
                r,
                relax.const(w),
            )
            out = bb.emit_output(
                bb.emit_te(lambda a: te.compute(a.shape, lambda i, j: a[i, j] + 1.0), y)
            )
        bb.emit_func_output(out)
    return relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu()), w


def test_times_a_compiled_function(vm):
    machine, w = vm
    x = np.random.default_rng(1).standard_normal((32, 32)).astype("float32")
    # the function it times computes what numpy does (rtol 1e-5: f32 sums of 32 products)
    np.testing.assert_allclose(
        machine["main"](x).numpy(), np.maximum(x, 0) @ w + 1, rtol=1e-5, atol=1e-5
    )
    result = machine.time_evaluator("main", rm.cpu(), number=5, repeat=4)(x)
    assert isinstance(result, BenchmarkResult)
    assert len(result.results) == 4 and all(0 < t < 1 for t in result.results)
    assert result.min <= result.median <= result.max and result.min <= result.mean <= result.max
    assert result.std >= 0
    text = str(result)
    assert text.startswith("Execution time summary:") and "median (ms)" in text


def test_calls_once_untimed_then_number_times_repeat():
    calls = []
    timer = time_evaluator(lambda *a: calls.append(a), rm.cpu(), number=3, repeat=2)
    result = timer(1, 2)
    assert len(calls) == 1 + 3 * 2 and all(c == (1, 2) for c in calls)
    assert len(result.results) == 2


def test_short_repeats_are_measured_again_with_more_calls():
    calls = []

    def sleeper():
        calls.append(1)
        time.sleep(0.001)

    result = time_evaluator(sleeper, rm.cpu(), number=1, repeat=2, min_repeat_ms=20)()
    # each repeat ran until its batch took 20 ms: more than one call per repeat, and every
    # recorded per-call mean is still about the 1 ms each call sleeps
    assert len(calls) > 1 + 2 * 5
    assert all(0.001 <= t < 0.05 for t in result.results)


def test_cooldown_between_repeats():
    start = time.perf_counter()
    time_evaluator(lambda: None, rm.cpu(), number=1, repeat=3, cooldown_interval_ms=30)()
    assert time.perf_counter() - start >= 0.06  # two pauses: none before the first repeat


def test_cooldown_every_few_repeats(monkeypatch):
    pauses = []
    monkeypatch.setattr(time, "sleep", pauses.append)  # the timer calls time.sleep
    options = {"number": 1, "repeat": 7, "cooldown_interval_ms": 5, "repeats_to_cooldown": 3}
    time_evaluator(lambda: None, rm.cpu(), **options)()
    assert pauses == [0.005, 0.005]  # before repeats 3 and 6 (counting from 0)


@pytest.mark.parametrize(
    ("option", "value"),
    [("number", 0), ("number", 2.5), ("repeat", -1), ("repeat", True), ("min_repeat_ms", -1),
     ("min_repeat_ms", "10"), ("cooldown_interval_ms", float("nan")), ("repeats_to_cooldown", 0)],
)  # fmt: skip
def test_bad_options_are_value_errors(vm, option, value):
    machine, _ = vm
    with pytest.raises(ValueError, match=f"time_evaluator: {option}"):
        machine.time_evaluator("main", rm.cpu(), **{option: value})


def test_unknown_function_and_other_device(vm):
    machine, _ = vm
    with pytest.raises(KeyError, match="no function 'forward'"):
        machine.time_evaluator("forward", rm.cpu())
    with pytest.raises(ValueError, match="runs on cpu"):
        machine.time_evaluator("main", rm.cuda(0))


def test_wrong_arguments_fail_before_timing(vm):
    machine, _ = vm
    timer = machine.time_evaluator("main", rm.cpu(), number=100, repeat=100)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="shape"):
        timer(np.zeros((4, 4), "float32"))
    with pytest.raises(TypeError, match="argument"):
        timer()
    assert time.perf_counter() - start < 5


def test_cuda_batches_end_with_a_stream_synchronization(monkeypatch):
    """The wiring only (CI has no GPU): each batch, and the untimed call, ends with a
    synchronization of the stream the calls went to."""
    from relaxmlir.runtime import cuda_driver

    events = []

    class FakeDriver:
        def synchronize(self, stream):
            events.append(("sync", stream))

    monkeypatch.setattr(cuda_driver, "driver", lambda: FakeDriver())
    monkeypatch.setattr(cuda_driver, "current_stream", lambda device: 1234)
    timer = time_evaluator(lambda: events.append("call"), rm.cuda(0), number=2, repeat=2)
    timer()
    sync = ("sync", 1234)
    assert events == ["call", sync, "call", "call", sync, "call", "call", sync]
