"""Differential fuzzer (issue 13, item 5): random op graphs, compiled, compared.

Each random graph (tests/python/fuzz_graphs.py: elementwise ops with broadcasting, reductions,
matmul, shape ops, softmax/layer_norm, where/comparisons, casts; size-0/1 and symbolic dims;
float32/float16/bfloat16/int32/int64/bool/uint8) is built with the BlockBuilder and compared
with numpy (on the CPU, and for cuda with its kernels interpreted), and traced by fx, imported
with `from_fx` and compared with torch eager. A graph the
project rejects must raise NotImplementedError or ValueError naming what is unsupported; any
other exception, or a wrong answer, fails.

The default run is a fixed set of cases (`derandomize`, 6 graphs per op family and path, the
family's ops drawn first, ~30 s); `python -m pytest -m slow tests/python/test_fuzz.py` runs
5,000 random graphs per path. A failure prints the shrunk graph
as a ready-to-paste regression test (`check_relax(Graph(...))`); the regressions found so far
are at the end of this file.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fuzz_builders import TorchGraph, reference, to_relax
from fuzz_graphs import FAMILIES, Graph, Input, Node, graphs
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import from_fx

REJECTED = (NotImplementedError, ValueError)
# rtol, and atol relative to the largest magnitude of the expected result
TOLERANCE = {"float32": (1e-4, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}

_QUICK = {"deadline": None, "derandomize": True, "database": None, "print_blob": True}
_HEALTH = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
settings.register_profile("fuzz-short", max_examples=6, suppress_health_check=_HEALTH, **_QUICK)
settings.register_profile(
    "fuzz-long", max_examples=5000, deadline=None, suppress_health_check=_HEALTH, print_blob=True
)
SHORT, LONG = settings.get_profile("fuzz-short"), settings.get_profile("fuzz-long")


def _tolerance(g: Graph) -> tuple[float, float]:
    dtypes = {i.dtype for i in g.inputs} | {n.attrs.get("dtype") for n in g.nodes}
    for d in ("bfloat16", "float16"):
        if d in dtypes:
            return TOLERANCE[d]
    return TOLERANCE["float32"]


def _compare(got: list, want: list, g: Graph, where: str) -> None:
    assert len(got) == len(want), f"{where}: {len(got)} results, expected {len(want)}"
    rtol, atol = _tolerance(g)
    for i, (a, e) in enumerate(zip(got, want)):
        at = f"{where}, result {i}"
        assert a.shape == e.shape, f"{at}: shape {a.shape}, expected {e.shape}"
        assert a.dtype == e.dtype, f"{at}: dtype {a.dtype}, expected {e.dtype}"
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(a, e, err_msg=at)
            continue
        a, e = a.astype(np.float64), e.astype(np.float64)
        scale = max(1.0, float(np.max(np.abs(e[np.isfinite(e)]), initial=0.0)))
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol * scale, err_msg=at)


def _run(mod, arrays: list) -> list[np.ndarray]:
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    out = vm["main"](*arrays)
    return [o.numpy() for o in out] if isinstance(out, (list, tuple)) else [out.numpy()]


def _rejected(exc: Exception) -> str:
    message = str(exc).strip()
    assert message, f"{type(exc).__name__} without a message"
    event(f"rejected: {type(exc).__name__}")
    return message


def _check_against_numpy(g: Graph, run, where: str) -> str:
    """`run(module, inputs, expected)` -> results, against numpy; "rejected" or "pass"."""
    arrays = g.input_arrays()
    want = reference(g, arrays)
    try:
        got = run(to_relax(g), arrays, want)
    except REJECTED as exc:
        _rejected(exc)
        return "rejected"
    _compare(got, want, g, where)
    return "pass"


def check_relax(g: Graph) -> str:
    """The BlockBuilder graph, built and run, against numpy; "rejected" or "pass"."""
    return _check_against_numpy(g, lambda mod, arrays, want: _run(mod, arrays), "relax vs numpy")


def _torch(a: np.ndarray) -> torch.Tensor:
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(np.dtype("bfloat16"))
    return t.numpy()


def check_fx(g: Graph) -> str:
    """The graph as a torch module through fx and `from_fx`, against torch eager."""
    arrays = g.input_arrays()
    model = TorchGraph(g).eval()
    try:
        with torch.no_grad():
            want = model(*[_torch(a) for a in arrays])
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
        event("torch eager rejects the graph")
        note(f"torch: {exc}")
        return "torch rejects"
    want = [_numpy(w) for w in (want if isinstance(want, tuple) else (want,))]
    names = "abcdefgh"[len(g.inputs) :]
    gm = torch.fx.symbolic_trace(model, concrete_args={n: None for n in names})
    try:
        mod = from_fx(gm, [i.shape for i in g.inputs], input_dtypes=[i.dtype for i in g.inputs])
        got = _run(mod, arrays)
    except REJECTED as exc:
        _rejected(exc)
        return "rejected"
    _compare(got, want, g, "from_fx vs torch eager")
    return "pass"


@pytest.mark.parametrize("family", list(FAMILIES))
@SHORT
@given(data=st.data())
def test_fuzz_relax(family, data):
    g = data.draw(graphs(family=family))
    note(g.test_code("check_relax"))
    check_relax(g)


def check_cuda(g: Graph) -> str:
    """The BlockBuilder graph built for cuda through the map stage, its kernels interpreted on
    the CPU thread by thread (lowering/gpu/interpret.py), against numpy."""
    from test_gpu_interpret import run_on_gpu_model

    from relaxmlir.tools.gpu_interpret import outputs_like

    def run(mod, arrays, want):
        outs = outputs_like(want)
        run_on_gpu_model(mod, *arrays, *outs)
        return outs

    return _check_against_numpy(g, run, "cuda kernels (interpreted) vs numpy")


@pytest.mark.parametrize("family", list(FAMILIES))
@SHORT
@given(data=st.data())
def test_fuzz_cuda(family, data):
    g = data.draw(graphs(family=family))
    note(g.test_code("check_cuda"))
    check_cuda(g)


@pytest.mark.parametrize("family", list(FAMILIES))
@SHORT
@given(data=st.data())
def test_fuzz_fx(family, data):
    g = data.draw(graphs(family=family))
    note(g.test_code("check_fx"))
    check_fx(g)


@pytest.mark.slow
@LONG
@given(graphs())
def test_fuzz_relax_long(g):
    note(g.test_code("check_relax"))
    check_relax(g)


@pytest.mark.slow
@LONG
@given(graphs())
def test_fuzz_cuda_long(g):
    note(g.test_code("check_cuda"))
    check_cuda(g)


@pytest.mark.slow
@LONG
@given(graphs())
def test_fuzz_fx_long(g):
    note(g.test_code("check_fx"))
    check_fx(g)


def test_graph_repr_round_trips():
    """A printed case is Python that rebuilds the same graph (the regression-test contract)."""
    g = Graph(
        [Input(("n", 3), "float32"), Input((3,), "float32", 0.5, 2.0)],
        [Node("divide", (0, 1)), Node("sum", (2,), {"axis": [1], "keepdims": True})],
        [3],
        {"n": 2},
        7,
    )
    code = g.test_code()
    assert code.startswith("def test_fuzz_regression():\n    check_relax(Graph(")
    assert eval(repr(g)) == g
    assert check_relax(g) == "pass"


# -- regressions the fuzzer found (each the shrunk case it printed) ---------------------------
def test_fuzz_regression_empty_strided_slice_past_the_end():
    """x[:, 4:0:2] of a 3x3 tensor: python clamps the start to 3, an out-of-bounds offset for
    tensor.extract_slice although the view is empty (empty views are now tensor.empty)."""
    check_relax(Graph(inputs=[Input(shape=(3, 3), dtype='int64', lo=-2, hi=2), Input(shape=(), dtype='int64', lo=-2, hi=2)], nodes=[Node(op='strided_slice', args=(0,), attrs={'axis': 1, 'begin': 4, 'end': 0, 'stride': 2}), Node(op='subtract', args=(2, 1), attrs={}), Node(op='subtract', args=(3, 1), attrs={})], outputs=[4], symbols={}, seed=474))  # fmt: skip


def test_fuzz_regression_strided_slice_of_an_empty_tensor():
    """A strided view of a (0, 2, 2) tensor: tensor.extract_slice rejects offset 0 into a dim
    of size 0."""
    check_relax(Graph(inputs=[Input(shape=(0, 2, 2), dtype='float32', lo=-4.0, hi=1.0), Input(shape=(0, 2, 2), dtype='float32', lo=-2.0, hi=2.0)], nodes=[Node(op='equal', args=(0, 1), attrs={}), Node(op='strided_slice', args=(2,), attrs={'axis': 1, 'begin': 0, 'end': -1, 'stride': 2}), Node(op='multiply', args=(1, 0), attrs={})], outputs=[3, 4], symbols={'n': 5}, seed=2))  # fmt: skip


def test_fuzz_regression_scalar_inserted_into_one_element():
    """~x[0:1:2] of a (1,) tensor: unit dims dropped, the kernel inserts a 0-d result into a
    fresh tensor<1>; relax-prim-func-dps made that insert a view by collapsing the 0-d tensor
    with an empty reassociation group (invalid) instead of expanding it."""
    check_relax(Graph(inputs=[Input(shape=(1,), dtype='int32', lo=-2, hi=2)], nodes=[Node(op='max', args=(0,), attrs={'axis': None, 'keepdims': False}), Node(op='bitwise_not', args=(0,), attrs={}), Node(op='strided_slice', args=(2,), attrs={'axis': 0, 'begin': 0, 'end': 1, 'stride': 2})], outputs=[1, 3], symbols={}, seed=0))  # fmt: skip


def test_empty_split_part_at_the_end():
    """The same offset in split: the last part of split(x, [3]) over 3 columns is empty."""
    x = relax.Var("x", relax.TensorStructInfo((3, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.split(x, [3], axis=1))
        bb.emit_func_output(gv)
    a = np.arange(9, dtype=np.float32).reshape(3, 3)
    got = _run(bb.get(), [a])
    assert [g.shape for g in got] == [(3, 3), (3, 0)]
    np.testing.assert_array_equal(got[0], a)


def test_fuzz_regression_reshape_to_an_empty_shape():
    """(0,) -> (0, 3): the index arithmetic of a reshape over an empty tensor reached the gather
    raising of the CPU schedule, which fit an affine map to no samples (IndexError); an empty
    reshape now reads nothing."""
    check_relax(Graph(inputs=[Input(shape=(0,), dtype='float32', lo=-2.0, hi=2.0), Input(shape=(0,), dtype='float32', lo=-2.0, hi=2.0)], nodes=[Node(op='reshape', args=(0,), attrs={'shape': (0,)}), Node(op='subtract', args=(0, 1), attrs={}), Node(op='reshape', args=(3,), attrs={'shape': (0, 3)})], outputs=[2, 4], symbols={}, seed=0))  # fmt: skip


def test_fuzz_regression_torch_prod():
    """torch.prod had no import rule (rejected); int32 products are int64 in torch."""
    g = Graph(
        [Input((2, 3), "float32"), Input((3, 2), "int32")],
        [
            Node("prod", (0,), {"axis": [1], "keepdims": False}),
            Node("prod", (1,), {"axis": None, "keepdims": False}),
        ],
        [2, 3],
    )
    assert check_fx(g) == "pass"


def test_fuzz_regression_uint8_casts():
    """uint8 relax tensors were `ui8` while kernels take signless i8: every cast to or from
    uint8 failed call_tir verification. uint8 is now i8 marked relax.dtype, as bool is;
    comparisons, max and casts of values >= 128 keep unsigned semantics."""
    g = Graph(
        [Input((4,), "bool"), Input((2, 4), "int32", 0, 255), Input((4,), "uint8", 0, 255)],
        [
            Node("astype", (0,), {"dtype": "uint8"}),
            Node("astype", (1,), {"dtype": "uint8"}),
            Node("maximum", (4, 2)),
            Node("less", (5, 2)),
            Node("astype", (6,), {"dtype": "float32"}),
        ],
        [3, 5, 7],
        seed=3,
    )
    assert g.input_arrays()[2].max() >= 128
    assert check_relax(g) == "pass"
    assert check_fx(g) == "pass"


def test_integer_power():
    """relax.power takes integers (it was float-only: torch.pow of int tensors failed to import
    with a TypeError): square and multiply, wrapping as torch; negative exponents as torch's."""
    g = Graph(
        [Input((2, 5), "int32", -3, 3), Input((5,), "int32", -2, 40), Input((3,), "int64", 0, 5)],
        [Node("power", (0, 1)), Node("power", (2, 2))],
        [3, 4],
        seed=7,
    )
    assert (g.input_arrays()[1] < 0).any() and (g.input_arrays()[1] > 20).any()
    assert check_fx(g) == "pass"
    nonnegative = Graph(g.inputs[:1] + [Input((5,), "int32", 0, 40)], g.nodes[:1], [2], seed=7)
    assert check_relax(nonnegative) == "pass"  # numpy refuses negative integer powers


def test_bitwise_ops():
    """relax.bitwise_and/or/xor/not on integers (torch's &, |, ^, ~ were rejected on anything
    but bool masks) and bool (the logical ops)."""
    g = Graph(
        [Input((2, 3), "int32", -9, 9), Input((3,), "int32", -9, 9), Input((2, 3), "bool")],
        [
            Node("bitwise_and", (0, 1)),
            Node("bitwise_or", (3, 1)),
            Node("bitwise_xor", (4, 0)),
            Node("bitwise_not", (5,)),
            Node("bitwise_xor", (2, 2)),
            Node("bitwise_not", (2,)),
        ],
        [6, 7, 8],
        seed=1,
    )
    assert check_relax(g) == "pass"
    assert check_fx(g) == "pass"


def test_fuzz_regression_empty_tile_then_divide():
    """tile of a (3, 0) tensor: its floormod indices over an empty domain reached the CPU
    schedule's gather raising (IndexError fitting an affine map to no samples). Every op whose
    result is empty now legalizes to a fill."""
    check_relax(Graph(inputs=[Input(shape=(3, 0), dtype='int64', lo=-4, hi=1), Input(shape=(3, 0), dtype='int64', lo=1, hi=3)], nodes=[Node(op='tile', args=(0,), attrs={'repeats': (2,)}), Node(op='floor_divide', args=(2, 1), attrs={}), Node(op='broadcast_to', args=(3,), attrs={'shape': (3, 0)})], outputs=[4], symbols={}, seed=0))  # fmt: skip


@pytest.mark.parametrize("n", [1, 3])
def test_fuzz_regression_variance_over_a_symbolic_axis(n):
    """torch.var over a symbolic axis: the fx rule multiplied the axis sizes with numpy to get N
    and failed on the symbol's name (numpy's UFuncNoLoopError, found by test_fuzz_fx_long). N is
    now counted at run time when an axis is symbolic; n = 1 with correction 1 is 0 / 0 = nan, as
    in torch."""
    assert check_fx(Graph(inputs=[Input(shape=('n',), dtype='float32', lo=-2.0, hi=2.0)], nodes=[Node(op='variance', args=(0,), attrs={'axis': [0], 'keepdims': False})], outputs=[1], symbols={'n': n}, seed=0)) == "pass"  # fmt: skip
    assert check_fx(Graph(inputs=[Input(shape=('n', 4), dtype='float32', lo=-2.0, hi=2.0)], nodes=[Node(op='variance', args=(0,), attrs={'axis': [0], 'keepdims': True})], outputs=[1], symbols={'n': n}, seed=1)) == "pass"  # fmt: skip


def test_fuzz_regression_zero_dim_tensor_does_not_widen():
    """minimum(int64 0-d sum, int32 tensor) is int32 in torch (a 0-d tensor does not promote a
    dimensioned tensor of its own category); the importer widened it to int64 (test_fuzz_fx_long)."""
    assert check_fx(Graph(inputs=[Input(shape=(0, 0, 0), dtype='int32', lo=-2, hi=2)], nodes=[Node(op='tril', args=(0,), attrs={'k': 0}), Node(op='sum', args=(0,), attrs={'axis': None, 'keepdims': False}), Node(op='minimum', args=(2, 0), attrs={})], outputs=[1, 3], symbols={}, seed=0)) == "pass"  # fmt: skip
    assert check_fx(Graph(inputs=[Input(shape=(2, 3), dtype='int32', lo=-2, hi=2)], nodes=[Node(op='sum', args=(0,), attrs={'axis': None, 'keepdims': False}), Node(op='minimum', args=(1, 0), attrs={})], outputs=[2], symbols={}, seed=0)) == "pass"  # fmt: skip


def test_fuzz_regression_integer_abs_on_a_2d_vector():
    """abs of int32 then a sum over the last axis: the CPU schedule vectorized math.absi to
    vector<2x16xi32>, which math-to-llvm does not lower (1-D only). Integer abs is now
    max(x, 0 - x), plain arith at any rank (found by test_fuzz_relax_long)."""
    assert check_relax(Graph([Input((1, 2, 2), "int32", -2, 2)], [Node("abs", (0,)), Node("sum", (1,), {"axis": [2], "keepdims": False})], [2])) == "pass"  # fmt: skip
    assert check_relax(Graph([Input((3, 40), "int64", -9, 9)], [Node("abs", (0,))], [1])) == "pass"  # fmt: skip


def test_fuzz_regression_empty_constant_weight_is_not_packed():
    """A matmul against an empty (0, 2) weight (torch.fx binds it as a constant): the weight was
    packed into panels for the kernel, whose schedule skips empty loops and so left the
    prepacked unpack for bufferization to refuse ("op was not bufferized"; test_fuzz_fx_long).
    Empty weights are no longer packed."""
    assert check_fx(Graph(inputs=[Input(shape=(1, 'n', 0), dtype='float16', lo=-2.0, hi=2.0), Input(shape=(0, 2), dtype='float16', lo=-2.0, hi=2.0)], nodes=[Node(op='softmax', args=(0,), attrs={'axis': 0}), Node(op='matmul', args=(2, 1), attrs={})], outputs=[3], symbols={'n': 1}, seed=0)) == "pass"  # fmt: skip


def test_fuzz_regression_gpu_interpreter_views_of_symbolic_shapes():
    """tile of an (n, 1, 1) tensor on the cuda target: its kernel collapses a buffer of
    symbolic size, which the GPU interpreter refused ("memref.collapse_shape to a dynamic shape
    is not interpreted", test_fuzz_cuda_long). A view's dynamic sizes now come from its source
    (collapse, cast) or from the expand's output-shape operands."""
    assert check_cuda(Graph(inputs=[Input(shape=('n', 1, 1), dtype='float32', lo=-2.0, hi=2.0)], nodes=[Node(op='tile', args=(0,), attrs={'repeats': (2,)}), Node(op='silu', args=(1,), attrs={})], outputs=[2], symbols={'n': 1}, seed=0)) == "pass"  # fmt: skip
