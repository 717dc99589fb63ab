"""from_fx: per-operator numeric checks (with from_exported_program too), user maps, symbolic
shapes, errors.

`OPS` is the operator table of both importers: one row per torch operator (a small module and
its inputs). `test_op` imports each row with from_fx and from_exported_program, builds, runs and
compares with torch eager (ops_check: the module both importers make alike, as for most rows, is
built and run once); `check_numeric` does it for one importer.
"""

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import relaxmlir as rm
from relaxmlir import relax, topi
from relaxmlir.frontend import from_exported_program, from_fx

RTOL, ATOL = 1e-4, 1e-5


# -- the operator table ---------------------------------------------------------------------
class Fn(nn.Module):
    """A module whose forward applies `fn` to its inputs (fixed arity so that fx traces it)."""

    def __init__(self, fn: Callable, nargs: int):
        super().__init__()
        self.fn, self.nargs = fn, nargs

    def forward(self, x, y=None, z=None):
        return self.fn(*(x, y, z)[: self.nargs])


@dataclass
class OpCase:
    """`make()` builds the module; `inputs` are shapes (float), or ("int", shape, high) / ("bool", shape)."""

    name: str
    make: Callable[[], nn.Module]
    inputs: Sequence
    frontends: tuple = ("fx", "ep")
    tol: dict = field(default_factory=dict)
    xfail: str = ""  # a known bug below the frontend, with where it is


def fn(f: Callable, *inputs, **kw) -> tuple:
    nargs = len(inputs)
    return (lambda: Fn(f, nargs)), inputs, kw


def mod(make: Callable[[], nn.Module], *inputs, **kw) -> tuple:
    return make, inputs, kw


def _rows() -> list:
    s, s2 = (2, 3, 4), (3, 4)
    cases = {
        # elementwise unary
        "relu": fn(torch.relu, s),
        "F.relu": fn(F.relu, s),
        "relu_method": fn(lambda x: x.relu(), s),
        "sigmoid": fn(torch.sigmoid, s),
        "tanh": fn(torch.tanh, s),
        "exp": fn(torch.exp, s),
        "log": fn(lambda x: torch.log(x.abs() + 1), s),
        "sqrt": fn(lambda x: x.abs().sqrt(), s),
        "rsqrt": fn(lambda x: torch.rsqrt(x.abs() + 1), s),
        "neg": fn(lambda x: -x, s),
        "sin": fn(torch.sin, s),
        "cos": fn(torch.cos, s),
        "erf": fn(torch.erf, s),
        "gelu": fn(F.gelu, s),
        "gelu_tanh": fn(lambda x: F.gelu(x, approximate="tanh"), s),
        "silu": fn(F.silu, s),
        "leaky_relu": fn(lambda x: F.leaky_relu(x, 0.2), s),
        "relu6": fn(lambda x: F.relu6(x * 4), s),
        "hardtanh": fn(F.hardtanh, s),
        "logical_not": fn(lambda x: ~(x > 0), s),
        # elementwise binary, scalars and broadcasting
        "add": fn(torch.add, s, s2),
        "add_alpha": fn(lambda x, y: torch.add(x, y, alpha=2), s, s),
        "sub": fn(operator.sub, s, s2),
        "rsub_scalar": fn(lambda x: 2 - x, s),
        "mul": fn(operator.mul, s, (4,)),
        "mul_scalar": fn(lambda x: x * 3, s),
        "div": fn(torch.div, s, s2),
        "div_scalar": fn(lambda x: x / 2, s),
        "floor_div": fn(lambda x, y: torch.div(x, y, rounding_mode="floor"), s, s2),
        "trunc_div": fn(lambda x, y: torch.div(x, y, rounding_mode="trunc"), s, s2),
        "pow_scalar": fn(lambda x: x**2, s),
        "pow": fn(lambda x, y: x.abs() ** y, s, s),
        "maximum": fn(torch.maximum, s, s),
        "minimum": fn(torch.minimum, s, s),
        "eq": fn(lambda x: x == x.relu(), s),
        "lt": fn(operator.lt, s, s),
        "ge": fn(torch.ge, s, s),
        "logical_and": fn(lambda x, y: (x > 0) & (y > 0), s, s),
        "where": fn(lambda x, y: torch.where(x > 0, x, y), s, s),
        "where_scalar": fn(lambda x: torch.where(x > 0, x, 0.0), s),
        "masked_fill": fn(lambda x: x.masked_fill(x < 0, -1.0), s),
        "clamp": fn(lambda x: x.clamp(-0.5, 0.5), s),
        "clamp_min": fn(lambda x: torch.clamp(x, min=0.1), s),
        # matrix products
        "matmul": fn(torch.matmul, (3, 4), (4, 5)),
        "matmul_batched": fn(operator.matmul, (2, 3, 4), (4, 5)),
        "bmm": fn(torch.bmm, (2, 3, 4), (2, 4, 5)),
        "mm": fn(torch.mm, (3, 4), (4, 5)),
        "addmm": fn(lambda b, x, y: torch.addmm(b, x, y, beta=0.5), (5,), (3, 4), (4, 5)),
        "linear_fn": fn(F.linear, (2, 4), (3, 4)),
        "linear_fn_bias": fn(F.linear, (2, 4), (3, 4), (3,)),
        "Linear": mod(lambda: nn.Linear(4, 3), (2, 5, 4)),
        "Linear_nobias": mod(lambda: nn.Linear(4, 3, bias=False), (2, 4)),
        # shapes and data movement
        "view": fn(lambda x: x.view(6, 4), s),
        "view_minus1": fn(lambda x: x.view(-1, 2), s),
        "view_size": fn(lambda x: x.view(x.size(0), -1), s),
        "reshape": fn(lambda x: torch.reshape(x, (4, 6)), s),
        "flatten": fn(lambda x: torch.flatten(x, 1), s),
        "flatten_method": fn(lambda x: x.flatten(), s),
        "Flatten": mod(nn.Flatten, s),
        "unflatten": fn(lambda x: x.unflatten(2, (2, 2)), s),
        "permute": fn(lambda x: x.permute(2, 0, 1), s),
        "transpose": fn(lambda x: x.transpose(-1, 0), s),
        "t": fn(lambda x: x.t(), s2),
        "contiguous": fn(lambda x: x.transpose(0, 1).contiguous(), s),
        "unsqueeze": fn(lambda x: x.unsqueeze(1), s),
        "squeeze": fn(lambda x: x.squeeze(1), (2, 1, 3)),
        "squeeze_all": fn(torch.squeeze, (2, 1, 3, 1)),
        "expand": fn(lambda x: x.expand(2, 3, 4), (3, 1)),
        "expand_minus1": fn(lambda x: x.expand(2, -1, 4), (3, 1)),
        "cat": fn(lambda x, y: torch.cat([x, y], dim=1), s, (2, 2, 4)),
        "cat_empty_1d": fn(lambda x, y: torch.cat([y, x, y], dim=-2), s, (0,)),  # GPT-2 cache
        "stack": fn(lambda x, y: torch.stack((x, y), -1), s, s),
        "split": fn(lambda x: torch.split(x, 3, dim=2)[1], (2, 3, 7)),
        "split_sizes": fn(lambda x: x.split([1, 3], -1)[1], s),
        "chunk": fn(lambda x: x.chunk(2, 1)[1], (2, 5)),
        "unbind": fn(lambda x: torch.unbind(x, 1)[2], s),
        "getitem_int": fn(lambda x: x[1], s),
        "getitem_slice": fn(lambda x: x[:, 1:3], s),
        "getitem_neg": fn(lambda x: x[..., -2:], s),
        "getitem_step": fn(lambda x: x[:, :, ::2], s),
        "getitem_none": fn(lambda x: x[:, None, 0], s),
        "select": fn(lambda x: x.select(2, -1), s),
        "narrow": fn(lambda x: x.narrow(2, 1, 2), s),
        "getitem_tensor": fn(lambda x, i: x[i], (5, 3), ("int", (2, 2), 5)),
        "to_dtype": fn(lambda x: (x * 4).to(torch.int32).to(torch.float32), s),
        "float": fn(lambda x: (x > 0).float(), s),
        # reductions and normalisations
        "sum": fn(lambda x: x.sum(-1), s),
        "sum_keepdim": fn(lambda x: torch.sum(x, (0, 2), keepdim=True), s),
        "sum_all": fn(torch.sum, s),
        "mean": fn(lambda x: x.mean(dim=1), s),
        "mean_keepdim": fn(lambda x: x.mean((-1, -2), keepdim=True), s),
        "max_dim": fn(lambda x: torch.max(x, 1)[0], s),
        "max_all": fn(torch.max, s),
        "amax": fn(lambda x: x.amax(-1), s),
        "min_dim": fn(lambda x: x.min(-1, keepdim=True).values, s),
        "argmax": fn(lambda x: x.argmax(-1), s),
        "any": fn(lambda x: (x > 0.5).any(-1), s),
        "all": fn(lambda x: torch.all(x > -1, 1), s),
        "var": fn(lambda x: x.var(-1, unbiased=False), s),
        "std": fn(lambda x: torch.std(x, 1), s),
        "softmax": fn(lambda x: F.softmax(x, dim=-1), s),
        "softmax_method": fn(lambda x: x.softmax(0), s),
        "log_softmax": fn(lambda x: F.log_softmax(x, 1), s),
        "Softmax": mod(lambda: nn.Softmax(1), s),
        "LayerNorm": mod(lambda: nn.LayerNorm(4), s),
        "LayerNorm_2d": mod(lambda: nn.LayerNorm((3, 4)), s),
        "layer_norm_fn": fn(lambda x: F.layer_norm(x, (4,)), s),
        "BatchNorm2d": mod(_batch_norm, (2, 3, 4, 4)),
        # convolution and pooling
        "Conv2d": mod(lambda: nn.Conv2d(3, 4, 3), (2, 3, 6, 6)),
        "Conv2d_stride_pad": mod(lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 7, 7)),
        "Conv2d_groups_dilation": mod(
            lambda: nn.Conv2d(4, 4, 3, groups=2, dilation=2, bias=False), (1, 4, 8, 8)
        ),
        "Conv2d_same": mod(lambda: nn.Conv2d(3, 2, (3, 2), padding="same"), (1, 3, 5, 5)),
        "Conv1d": mod(lambda: nn.Conv1d(3, 4, 3, padding=1), (2, 3, 8)),
        "MaxPool2d": mod(lambda: nn.MaxPool2d(2), (2, 3, 6, 6)),
        "MaxPool2d_pad": mod(lambda: nn.MaxPool2d(3, stride=2, padding=1), (1, 2, 7, 7)),
        "max_pool2d_ceil": fn(lambda x: F.max_pool2d(x, 2, ceil_mode=True), (1, 2, 5, 5)),
        "AvgPool2d": mod(lambda: nn.AvgPool2d(2), (2, 3, 6, 6)),
        "AvgPool2d_pad": mod(lambda: nn.AvgPool2d(3, stride=2, padding=1), (1, 2, 7, 7)),
        "AdaptiveAvgPool2d": mod(lambda: nn.AdaptiveAvgPool2d(1), (2, 3, 5, 5)),
        "AdaptiveAvgPool2d_2x3": mod(lambda: nn.AdaptiveAvgPool2d((2, 3)), (1, 2, 5, 7)),
        # embedding and attention
        "Embedding": mod(lambda: nn.Embedding(10, 4), ("int", (2, 3), 10)),
        "sdpa": fn(F.scaled_dot_product_attention, (2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 4)),
        "sdpa_causal": fn(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            (1, 2, 5, 4),
            (1, 2, 5, 4),
            (1, 2, 5, 4),
        ),
        "MultiheadAttention": mod(
            lambda: _Attention(nn.MultiheadAttention(8, 2, batch_first=True)), (2, 5, 8)
        ),
        "MultiheadAttention_seq_first": mod(
            lambda: _Attention(nn.MultiheadAttention(8, 2)), (5, 2, 8)
        ),
        # activation modules
        "ReLU": mod(nn.ReLU, s),
        "GELU": mod(nn.GELU, s),
        "SiLU": mod(nn.SiLU, s),
        "Tanh": mod(nn.Tanh, s),
        "Sigmoid": mod(nn.Sigmoid, s),
        "LeakyReLU": mod(lambda: nn.LeakyReLU(0.1), s),
        "Dropout": mod(lambda: nn.Dropout(0.5), s),
        "Identity": mod(nn.Identity, s),
        # constants computed at import time
        "triu_const": fn(
            lambda x: x.masked_fill(torch.triu(torch.ones(4, 4, dtype=torch.bool), 1), 0.0),
            (2, 4, 4),
        ),
        "arange_const": fn(lambda x: x + torch.arange(4), s),
        "zeros_like": fn(lambda x: torch.zeros_like(x) + x.sum(), s),
        "ones": fn(lambda x: x + torch.ones(4), s),
        "tril": fn(torch.tril, (4, 4)),
    }
    return [OpCase(name, make, inputs, **kw) for name, (make, inputs, kw) in cases.items()]


class _Attention(nn.Module):
    def __init__(self, attn: nn.MultiheadAttention):
        super().__init__()
        self.attn = attn

    def forward(self, x):
        out, _ = self.attn(x, x, x, need_weights=False)
        return out


def _batch_norm() -> nn.Module:
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    return bn


OPS = _rows()


# -- the numeric check ----------------------------------------------------------------------
def make_inputs(specs) -> list:
    out = []
    for spec in specs:
        if spec and spec[0] == "int":
            out.append(torch.randint(0, spec[2], spec[1]))
        elif spec and spec[0] == "bool":
            out.append(torch.rand(spec[1]) > 0.5)
        else:
            out.append(torch.randn(spec))
    return out


def import_model(model: nn.Module, inputs: list, frontend: str, **kwargs):
    if frontend == "fx":
        dtypes = [str(t.dtype).replace("torch.", "") for t in inputs]
        return from_fx(model, [tuple(t.shape) for t in inputs], input_dtypes=dtypes, **kwargs)
    return from_exported_program(torch.export.export(model, tuple(inputs)), **kwargs)


def run(mod, *inputs):
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    out = vm["main"](*inputs)
    return [o.numpy() for o in out] if isinstance(out, (list, tuple)) else [out.numpy()]


def check_numeric(
    model: nn.Module, inputs: list, frontend: str, name: str = "", rtol=RTOL, atol=ATOL
):
    """Import `model` through `frontend`, build, run, and compare with torch eager."""
    model.eval()
    with torch.no_grad():
        expected = model(*inputs)
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    got = run(import_model(model, inputs, frontend), *inputs)
    assert len(got) == len(expected), f"{name}: {len(got)} outputs, torch has {len(expected)}"
    shapes = [tuple(t.shape) for t in inputs]
    for i, (g, e) in enumerate(zip(got, expected)):
        e = e.detach().numpy()
        where = f"{name} via {frontend} (inputs {shapes}), output {i}"
        assert g.shape == e.shape, f"{where}: shape {g.shape}, torch {e.shape}"
        if e.dtype == np.bool_:
            g = g.astype(bool)
        assert g.dtype == e.dtype, f"{where}: dtype {g.dtype}, torch {e.dtype}"
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=where)


def op_params() -> list:
    marks = lambda c: [pytest.mark.xfail(reason=c.xfail, strict=False)] if c.xfail else []
    return [pytest.param(c, id=c.name, marks=marks(c)) for c in OPS]


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch.export's, as in its own file
@pytest.mark.parametrize("case", op_params())
def test_op(case: OpCase):
    """The row through each of its importers (from_fx and from_exported_program), against torch
    eager at RTOL / ATOL unless the row says otherwise."""
    from ops_check import check_ops  # (ops_check imports this module)

    torch.manual_seed(0)
    model, inputs = case.make(), make_inputs(case.inputs)
    tol = {"rtol": RTOL, "atol": ATOL, **case.tol}
    check_ops(model, inputs, case.name, frontends=case.frontends, **tol)


# -- from_fx specifics ----------------------------------------------------------------------
class MLP(nn.Module):
    """The tutorial's MLP."""

    def __init__(self):
        super().__init__()
        self.linear0 = nn.Linear(784, 128, bias=True)
        self.relu = nn.ReLU()
        self.linear1 = nn.Linear(128, 10, bias=True)

    def forward(self, x):
        return self.linear1(torch.relu(self.linear0(x)))


def test_tutorial_custom_maps():
    """The seed tutorial's user maps: nn.Linear -> topi.nn.dense + topi.add, torch.relu -> topi."""
    torch.manual_seed(0)
    model = MLP().eval()

    def map_linear(bb, node_map, node, nn_mod):
        x = node_map[node.args[0]]
        w = relax.const(nn_mod.weight.detach().numpy())
        b = relax.const(nn_mod.bias.detach().numpy())
        return bb.emit_te(topi.add, bb.emit_te(topi.nn.dense, x, w), b)

    def map_relu(bb, node_map, node):
        return bb.emit_te(topi.nn.relu, node_map[node.args[0]])

    mod = from_fx(
        model,
        [(1, 784)],
        call_function_map={torch.relu: map_relu},
        call_module_map={torch.nn.Linear: map_linear},
    )
    text = str(mod)
    assert "relax.call_tir" in text and "relax.matmul" not in text and "relax.nn_relu" not in text
    x = torch.randn(1, 784)
    np.testing.assert_allclose(run(mod, x)[0], model(x).detach().numpy(), rtol=RTOL, atol=ATOL)


def test_symbolic_batch_compiled_once():
    torch.manual_seed(0)
    model = MLP().eval()
    mod = from_fx(model, [("n", 784)])
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    for n in (1, 7, 64):
        x = torch.randn(n, 784)
        np.testing.assert_allclose(
            vm["main"](x).numpy(),
            model(x).detach().numpy(),
            rtol=RTOL,
            atol=ATOL,
            err_msg=f"batch {n}",
        )


def test_symbolic_batch_view_size():
    """`x.view(x.size(0), -1)` with a symbolic batch keeps the batch symbolic."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 4 * 4, 3)
    ).eval()
    mod = from_fx(model, [("b", 1, 6, 6)])
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), rm.cpu())
    for n in (1, 3):
        x = torch.randn(n, 1, 6, 6)
        np.testing.assert_allclose(
            vm["main"](x).numpy(), model(x).detach().numpy(), rtol=RTOL, atol=ATOL
        )


def test_keep_params_as_input():
    torch.manual_seed(0)
    model = MLP().eval()
    mod, params = from_fx(model, [(2, 784)], keep_params_as_input=True)
    assert set(params) == {"linear0.weight", "linear0.bias", "linear1.weight", "linear1.bias"}
    assert [name for name, _ in mod["main"].params] == ["x", *params]
    x = torch.randn(2, 784)
    want = model(x).detach().numpy()
    np.testing.assert_allclose(run(mod, x, *params.values())[0], want, rtol=RTOL, atol=ATOL)
    bound = relax.transform.BindParams("main", params)(mod)
    np.testing.assert_allclose(run(bound, x)[0], want, rtol=RTOL, atol=ATOL)


def test_graph_module_and_multiple_outputs():
    class TwoOut(nn.Module):
        def forward(self, x, y):
            return x + y, (x * y).sum(-1)

    gm = torch.fx.symbolic_trace(TwoOut())
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    got = run(from_fx(gm, [(2, 3), (2, 3)]), x, y)
    np.testing.assert_allclose(got[0], (x + y).numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got[1], (x * y).sum(-1).numpy(), rtol=RTOL, atol=ATOL)


def test_unsupported_function_raises():
    model = Fn(lambda x: torch.special.bessel_j0(x), 1)
    with pytest.raises(
        NotImplementedError,
        match=r"unsupported torch op '.*special_bessel_j0' at node 'special_bessel_j0' \(from_fx\)",
    ):
        from_fx(model, [(2, 3)])


def test_unsupported_module_raises():
    model = nn.Sequential(nn.Hardtanh(), nn.Unfold(2), nn.Flatten(), nn.PReLU(), nn.RReLU())
    with pytest.raises(
        NotImplementedError, match=r"unsupported torch op '.*RReLU' at node '_4' \(from_fx"
    ):
        from_fx(model.train(), [(1, 2, 3, 3)])


def test_functions_without_rules_import_by_torch_decomposition():
    """A torch function or module with no rule of its own is traced by torch into core ATen
    ops (the decompositions from_exported_program applies) and imported op by op: functions
    (an in-place step inside rms_norm's decomposition too) and modules whose forward calls
    them. Where the ATen ops have no rule either, the error names both."""

    def ops(x, y):
        return (
            F.pixel_unshuffle(x, 2), F.glu(y, -1), F.rms_norm(y, [6]), torch.channel_shuffle(x, 2),
            F.lp_pool1d(y, 2, 2),
        )  # fmt: skip

    x, y = torch.randn(1, 4, 4, 6), torch.randn(3, 4, 6)
    model = Fn(ops, 2)
    got = run(from_fx(model, [x.shape, y.shape]), x, y)
    for g, want in zip(got, model(x, y), strict=True):
        np.testing.assert_allclose(g, want.numpy(), rtol=RTOL, atol=ATOL)
    shuffle = nn.Sequential(nn.PixelUnshuffle(2), nn.ChannelShuffle(4))
    np.testing.assert_allclose(
        run(from_fx(shuffle, [x.shape]), x)[0], shuffle(x).numpy(), rtol=RTOL, atol=ATOL
    )
    bessel = Fn(lambda x: torch.special.bessel_j0(x), 1)
    with pytest.raises(NotImplementedError, match=r"bessel_j0.*torch decomposes it into.*bessel"):
        from_fx(bessel, [(2, 3)])


def test_user_map_extends_unsupported():
    """A user rule makes an otherwise unsupported target importable."""
    model = Fn(lambda x: torch.special.bessel_j0(x), 1)
    rule = {
        torch.special.bessel_j0: lambda bb, node_map, node: bb.emit(
            relax.op.cos(node_map[node.args[0]])
        )
    }
    x = torch.randn(2, 3)
    np.testing.assert_allclose(
        run(from_fx(model, [(2, 3)], call_function_map=rule), x)[0],
        torch.cos(x).numpy(),
        rtol=RTOL,
        atol=ATOL,
    )


def test_unsupported_output_part_raises():
    """Pooling indices over symbolic spatial sizes have no translation: using them raises,
    ignoring them is fine."""
    model = Fn(lambda x: F.max_pool2d(x, 2, return_indices=True)[1], 1)
    with pytest.raises(NotImplementedError, match=r"indices of max_pool2d over symbolic spatial sizes"):
        from_fx(model, [(1, 1, "h", "w")])
    from_fx(Fn(lambda x: F.max_pool2d(x, 2, return_indices=True)[0], 1), [(1, 1, "h", "w")])


class _Add(nn.Module):
    def forward(self, x, y):
        return x + y


def test_input_shape_count_checked():
    with pytest.raises(ValueError, match="got 1 input shape"):
        from_fx(_Add(), [(2, 3)])


def test_in_place_methods_are_seen_by_later_reads():
    """torch.fx records `y.add_(2)` as a node nobody reads, and later code reads `y`: the
    importer rebinds y to the written value (it read the value before the write)."""

    class InPlace(nn.Module):
        def forward(self, x, pos, row):
            y = x * 1
            y.add_(2)
            y.mul_(3)
            y.index_copy_(0, pos, row)
            # into a 0-d tensor: its one element (OpInfo's first index_copy sample)
            return y + x, torch.index_copy(x[0, 0], 0, pos * 0, row[0, 0])

    x, row = torch.randn(4, 3), torch.randn(1, 3)
    pos = torch.tensor([2])
    gm = torch.fx.symbolic_trace(InPlace())
    mod = from_fx(gm, [(4, 3), (1,), (1, 3)], input_dtypes=["float32", "int64", "float32"])
    got = run(mod, x.numpy(), pos.numpy(), row.numpy())
    for g, w in zip(got, InPlace()(x, pos, row)):
        np.testing.assert_allclose(g, w.numpy(), rtol=RTOL, atol=ATOL)
