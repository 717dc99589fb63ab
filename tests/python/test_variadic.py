"""Variadic relax ops take any number of operands (IRDL groups hold runs of equal types).

Numeric checks against numpy with fixed seeds: the concat is exact (assert_array_equal); the sums
of 300 float32 values are compared with rtol=1e-5 (the kernel adds in float32, numpy in float32 in
the same order for call_tir; the packed function sums in float64 and rounds once).
"""

from __future__ import annotations

import functools
import operator
import re

import numpy as np
import pytest

import relaxmlir as rm
from dialects import relax as rx
from dialects.irdl_dsl import Operand, Result
from dialects.relax_syntax import add_segments
from relaxmlir import relax, te

N_INPUTS = 300
OPERAND_SLOTS = dict(rx.CallTIR.fields(Operand))["args"].slots


def _shapes(n: int) -> list[tuple[int, int]]:
    """Consecutive shapes all differ: every operand starts a new run of equal types."""
    return [(i % 7 + 1, i % 5 + 1) for i in range(n)]


def _params(shapes) -> list[relax.Var]:
    return [relax.Var(f"x{i}", relax.TensorStructInfo(s, "float32")) for i, s in enumerate(shapes)]


def _run(mod, arrays):
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    return vm["main"](*arrays).numpy()


def test_call_tir_with_300_inputs_of_different_shapes():
    shapes = _shapes(N_INPUTS)
    params = _params(shapes)

    def te_sum_corners(*tensors):
        corners = [t[t.shape[0] - 1, t.shape[1] - 1] for t in tensors]
        return te.compute((1,), lambda i: functools.reduce(operator.add, corners), name="corners")

    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit_te(te_sum_corners, *params))
        bb.emit_func_output(gv)
    mod = bb.get()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    expected = np.float32(0)
    for a in arrays:
        expected = np.float32(expected + a[-1, -1])
    np.testing.assert_allclose(_run(mod, arrays), [expected], rtol=1e-5)


def test_call_dps_packed_with_300_inputs_of_different_shapes():
    shapes = _shapes(N_INPUTS)
    params = _params(shapes)

    @rm.register_func("test.sum_all", override=True)
    def sum_all(*arrays):
        *inputs, out = arrays
        np.from_dlpack(out)[...] = sum(float(np.from_dlpack(a).sum()) for a in inputs)

    bb = relax.BlockBuilder()
    with bb.function("main", params):
        sinfo = relax.TensorStructInfo((1,), "float32")
        out = bb.emit(relax.call_dps_packed("test.sum_all", params, sinfo))
        bb.emit_func_output(out)
    mod = bb.get()
    assert len(rm.parse(str(mod))["main"].params) == N_INPUTS  # prints and parses back
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    expected = sum(float(a.sum()) for a in arrays)
    np.testing.assert_allclose(_run(mod, arrays), [expected], rtol=1e-5)


def test_concat_of_70_tensors():
    # 70 runs of one type each, and more buffers than lowering.llvm_target.MANY_ARGUMENTS (64):
    # main takes descriptor pointers (100 tensors took 2x as long to build)
    shapes = [(2, i % 3 + 1) for i in range(70)]
    params = _params(shapes)
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.concat(params, axis=1))
        bb.emit_func_output(gv)
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    np.testing.assert_array_equal(_run(bb.get(), arrays), np.concatenate(arrays, axis=1))


def _call_packed_text(types: list[str]) -> str:
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    uses = ", ".join(f"%a{i}" for i in range(len(types)))
    return (
        f"func.func @main({args}) -> tensor<1xf32> attributes {{relax.function}} {{\n"
        f'  %0 = "relax.builtin_alloc_tensor"() : () -> tensor<1xf32>\n'
        f'  "relax.call_packed"({uses}, %0) {{callee = "env.f"}} : '
        f"({', '.join(types)}, tensor<1xf32>) -> ()\n"
        f"  return %0 : tensor<1xf32>\n}}\n"
    )


@pytest.mark.parametrize(
    "n, run_length",
    [(N_INPUTS, 10), (N_INPUTS, 1), (3 * OPERAND_SLOTS, 100)],
    ids=["300-in-runs-of-10", "300-all-changing", "over-slots-count"],
)
def test_text_round_trip_hides_segment_sizes(n, run_length):
    types = [f"tensor<{i // run_length % 4 + 1}xf32>" for i in range(n)]
    printed = str(rm.parse(_call_packed_text(types)))
    assert "SegmentSizes" not in printed
    assert str(rm.parse(printed)) == printed
    assert printed.count("%a") >= 2 * n  # every argument declared and used


def test_runs_of_equal_types_share_a_group():
    types = ["tensor<2xf32>"] * 5 + ["tensor<3xf32>"] * 2 + ["tensor<2xf32>"]
    sizes = rx.CallTIR.segment_list(Operand, types)
    assert sizes[:4] == [5, 2, 1, 0] and sum(sizes) == len(types)
    assert len(sizes) == OPERAND_SLOTS
    # The text path computes the runs from the op's functional type (the output is one more).
    text = add_segments(_call_packed_text(types))
    assert f"operandSegmentSizes = array<i32: 5, 2, 1, 1{', 0' * (OPERAND_SLOTS - 4)}>" in text


def test_too_many_type_runs_is_a_clear_error():
    types = [f"tensor<{i % 2 + 1}xf32>" for i in range(OPERAND_SLOTS + 1)]  # every value a run
    message = (
        rf"'relax.call_tir' takes operands in at most {OPERAND_SLOTS} runs of equal types .*"
        rf"got {OPERAND_SLOTS + 1} runs"
    )
    with pytest.raises(ValueError, match=message):
        rx.CallTIR.segment_sizes(Operand, types)
    result_slots = dict(rx.Split.fields(Result))["outs"].slots
    with pytest.raises(ValueError, match=r"'relax.split' takes results in at most"):
        rx.Split.segment_list(Result, [f"tensor<{i % 2 + 1}xf32>" for i in range(result_slots + 1)])


def test_too_many_type_runs_from_the_block_builder():
    params = _params(_shapes(OPERAND_SLOTS + 1))
    bb = relax.BlockBuilder()
    sinfo = relax.TensorStructInfo((1,), "float32")
    match = r"'relax.call_dps_packed' takes operands in at most"
    with pytest.raises(ValueError, match=match), bb.function("main", params):
        bb.emit_func_output(bb.emit(relax.call_dps_packed("test.sum_all", params, sinfo)))


def test_too_many_type_runs_in_text():
    types = [f"tensor<{i % 2 + 1}xf32>" for i in range(OPERAND_SLOTS + 1)]
    text = _call_packed_text(types)
    errors: list = []
    assert add_segments(text, errors) is not None
    assert errors and errors[0][0] == 3  # the op's line
    assert re.search(r"'relax.call_packed' takes operands in at most \d+ runs", errors[0][1])
    with pytest.raises(rm.ParseError):
        rm.parse(text)


def test_text_over_the_cap_is_a_located_parse_error():
    n = 1100  # more type changes than the op has groups
    args = ", ".join(f"%a{i}: tensor<{i % 2 + 1}xf32>" for i in range(n))
    uses = ", ".join(f"%a{i}" for i in range(n))
    types = ", ".join(f"tensor<{i % 2 + 1}xf32>" for i in range(n))
    text = (
        f"func.func @main({args}) attributes {{relax.function}} {{\n"
        f'  "relax.call_packed"({uses}) {{callee = "env.f"}} : ({types}) -> ()\n'
        "  return\n}\n"
    )
    with pytest.raises(rm.ParseError, match=r"<input>:2:1: error: 'relax.call_packed' takes operands in at most \d+ runs"):
        rm.parse(text)
