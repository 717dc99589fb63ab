"""Variadic relax ops take any number of operands (IRDL groups hold runs of equal types).

Numeric checks against numpy, exact (sums of a few float32 values, compared with rtol=1e-6).
"""

from __future__ import annotations

import numpy as np
import pytest

import relaxmlir as rm
from dialects import relax as rx
from dialects.irdl_dsl import Operand
from relaxmlir import relax

N_INPUTS = 300


def test_call_dps_packed_with_300_inputs_of_different_shapes():
    shapes = [(i % 7 + 1, i % 5 + 1) for i in range(N_INPUTS)]
    params = [relax.Var(f"x{i}", relax.TensorStructInfo(s, "float32")) for i, s in enumerate(shapes)]

    @rm.register_func("test.sum_all", override=True)
    def sum_all(*arrays):
        *inputs, out = arrays
        np.from_dlpack(out)[...] = sum(float(np.from_dlpack(a).sum()) for a in inputs)

    bb = relax.BlockBuilder()
    with bb.function("main", params):
        out = bb.emit(relax.call_dps_packed("test.sum_all", params, relax.TensorStructInfo((1,), "float32")))
        bb.emit_func_output(out)
    mod = bb.get()
    assert len(rm.parse(str(mod))["main"].params) == N_INPUTS  # prints and parses back
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    got = vm["main"](*arrays).numpy()
    np.testing.assert_allclose(got, [sum(float(a.sum()) for a in arrays)], rtol=1e-5)


def test_concat_of_100_tensors():
    shapes = [(2, i % 3 + 1) for i in range(100)]
    params = [relax.Var(f"x{i}", relax.TensorStructInfo(s, "float32")) for i, s in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.concat(params, axis=1))
        bb.emit_func_output(gv)
    vm = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    np.testing.assert_array_equal(vm["main"](*arrays).numpy(), np.concatenate(arrays, axis=1))


def test_text_round_trip_hides_segment_sizes():
    n = N_INPUTS
    args = ", ".join(f"%a{i}: tensor<{i // 10 % 4 + 1}xf32>" for i in range(n))  # 30 runs
    uses = ", ".join(f"%a{i}" for i in range(n))
    types = ", ".join(f"tensor<{i // 10 % 4 + 1}xf32>" for i in range(n))
    text = (
        f"func.func @main({args}) -> tensor<1xf32> attributes {{relax.function}} {{\n"
        f'  %0 = "relax.builtin_alloc_tensor"() : () -> tensor<1xf32>\n'
        f'  "relax.call_packed"({uses}, %0) {{callee = "env.f"}} : ({types}, tensor<1xf32>) -> ()\n'
        f"  return %0 : tensor<1xf32>\n}}\n"
    )
    printed = str(rm.parse(text))
    assert "SegmentSizes" not in printed
    assert str(rm.parse(printed)) == printed


def test_too_many_type_runs_is_a_clear_error():
    slots = dict(rx.CallTIR.fields(Operand))["args"].slots
    types = [f"tensor<{i % 2 + 1}xf32>" for i in range(slots + 1)]  # every value a new run
    with pytest.raises(ValueError, match=r"'relax.call_tir' takes operands in at most \d+ runs"):
        rx.CallTIR.segment_sizes(Operand, types)
