"""`nn.Module.export_tvm` and user-written module passes (TVM's "customize optimization" tutorial).

Numeric checks use fixed seeds and float32: rtol 1e-5 / atol 1e-5 against numpy or torch, 1e-4
where a 784-long or convolution reduction is summed in a different order.
"""

import numpy as np
import pytest
import torch

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.frontend import nn
from relaxmlir.transform import PassContext


class MLPModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.fc1(x)
        x = self.relu1(x)
        x = self.fc2(x)
        return x


class Wrap(nn.Module):
    """One layer under the attribute `layer`, so parameter names match a torch wrapper's."""

    def __init__(self, layer):
        self.layer = layer

    def forward(self, x):
        return self.layer(x)


def run(mod, func, *args):
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), rm.cpu())
    return vm[func](*args).numpy()


def random_values(params, rng):
    return {name: (rng.standard_normal(p.shape) * 0.1).astype(p.dtype) for name, p in params}


def mlp_reference(x, v):
    hidden = np.maximum(x @ v["fc1_weight"].T + v["fc1_bias"], 0)
    return hidden @ v["fc2_weight"].T + v["fc2_bias"]


def test_mlp_export_signature_and_show(capsys):
    mod, params = MLPModel().export_tvm(
        spec={"forward": {"x": nn.spec.Tensor((1, 784), "float32")}}
    )
    func = mod["forward"]
    assert [name for name, _ in func.params] == [
        "x",
        "fc1_weight",
        "fc1_bias",
        "fc2_weight",
        "fc2_bias",
    ]
    assert func.num_input == 1 and func.attrs["num_input"] == 1
    assert [(name, tuple(p.shape), p.dtype) for name, p in params] == [
        ("fc1_weight", (128, 784), "float32"),
        ("fc1_bias", (128,), "float32"),
        ("fc2_weight", (10, 128), "float32"),
        ("fc2_bias", (10,), "float32"),
    ]
    mod.show()
    text = capsys.readouterr().out
    for op in (
        "relax.permute_dims",
        "relax.matmul",
        "relax.add",
        "relax.nn_relu",
        "relax.dataflow",
    ):
        assert op in text, op
    assert "relax.num_input = 1" in text
    mod.verify()


def test_mlp_bind_params_build_run(rng):
    mod, params = MLPModel().export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})
    values = random_values(params, rng)
    bound = relax.transform.BindParams("forward", values)(mod)
    assert [name for name, _ in bound["forward"].params] == ["x"]
    x = rng.standard_normal((1, 784), dtype=np.float32)
    np.testing.assert_allclose(
        run(bound, "forward", x), mlp_reference(x, values), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("n", [1, 7])
def test_mlp_symbolic_batch_params_as_arguments(n, rng):
    """The tutorial's way: weights passed after the inputs, from `param.data`."""
    model = MLPModel()
    mod, params = model.export_tvm({"forward": {"x": nn.spec.Tensor(("n", 784), "float32")}})
    assert mod["forward"].params[0][1].shape == ("n", 784)
    values = random_values(params, rng)
    model.load_state_dict({name.replace("_", "."): v for name, v in values.items()})
    x = rng.standard_normal((n, 784), dtype=np.float32)
    out = run(mod, "forward", x, *[p.data for _, p in params])
    assert out.shape == (n, 10)
    np.testing.assert_allclose(out, mlp_reference(x, values), rtol=1e-4, atol=1e-4)


def test_nested_modules_and_module_list_naming(rng):
    class Block(nn.Module):
        def __init__(self, dim):
            self.norm = nn.LayerNorm(dim)
            self.proj = nn.Linear(dim, dim, bias=False)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            return x + self.drop(self.proj(self.norm(x)))

    class Net(nn.Module):
        def __init__(self):
            self.layers = nn.ModuleList([nn.Linear(8, 16), nn.SiLU(), Block(16)])
            self.head = nn.Linear(16, 4)

        def forward(self, x):
            return self.head(self.layers(x))

    model = Net()
    mod, params = model.export_tvm({"forward": {"x": nn.spec.Tensor(("b", 8), "float32")}})
    names = [name for name, _ in params]
    assert names == [
        "layers_0_weight", "layers_0_bias", "layers_2_norm_weight", "layers_2_norm_bias",
        "layers_2_proj_weight", "head_weight", "head_bias",
    ]  # fmt: skip
    assert list(model.state_dict())[:2] == ["layers.0.weight", "layers.0.bias"]
    assert [n for n, _ in mod["forward"].params] == ["x"] + names
    v = random_values(params, rng)
    x = rng.standard_normal((3, 8), dtype=np.float32)
    h = x @ v["layers_0_weight"].T + v["layers_0_bias"]
    h = h / (1 + np.exp(-h))
    mu, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    normed = (h - mu) / np.sqrt(var + 1e-5) * v["layers_2_norm_weight"] + v["layers_2_norm_bias"]
    h = h + normed @ v["layers_2_proj_weight"].T
    want = h @ v["head_weight"].T + v["head_bias"]
    got = run(mod, "forward", x, *[v[n] for n in names])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# (nn layer, torch layer, input shape, input dtype); attribute `layer` on both sides
LAYERS = {
    "LayerNorm": (lambda: nn.LayerNorm(16), lambda: torch.nn.LayerNorm(16), (2, 5, 16), "float32"),
    "RMSNorm": (
        lambda: nn.RMSNorm(16),
        lambda: torch.nn.RMSNorm(16, eps=1e-5),
        (2, 5, 16),
        "float32",
    ),
    "Embedding": (lambda: nn.Embedding(10, 8), lambda: torch.nn.Embedding(10, 8), (2, 5), "int64"),
    "Conv2D": (
        lambda: nn.Conv2D(4, 6, 3, stride=2, padding=1, groups=2),
        lambda: torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2),
        (2, 4, 9, 9),
        "float32",
    ),
    "Linear": (
        lambda: nn.Linear(12, 5, bias=False),
        lambda: torch.nn.Linear(12, 5, bias=False),
        (3, 12),
        "float32",
    ),
    "GELU": (nn.GELU, torch.nn.GELU, (4, 33), "float32"),
    "GELU_tanh": (lambda: nn.GELU("tanh"), lambda: torch.nn.GELU("tanh"), (4, 33), "float32"),
    "SiLU": (nn.SiLU, torch.nn.SiLU, (4, 33), "float32"),
    "ReLU": (nn.ReLU, torch.nn.ReLU, (4, 33), "float32"),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_against_torch(name, rng):
    make_ours, make_torch, shape, dtype = LAYERS[name]
    torch.manual_seed(0)
    reference = torch.nn.Module()
    reference.layer = make_torch()
    with torch.no_grad():
        for p in reference.parameters():  # norms start at ones/zeros: make every weight count
            p.copy_(torch.randn_like(p))
    model = Wrap(make_ours())
    model.load_state_dict(reference.state_dict())
    mod, params = model.export_tvm({"forward": {"x": nn.spec.Tensor(shape, dtype)}})
    if dtype == "int64":
        x = rng.integers(0, 10, shape, dtype=np.int64)
    else:
        x = rng.standard_normal(shape, dtype=np.float32)
    got = run(mod, "forward", x, *[p.data for _, p in params])
    with torch.no_grad():
        want = reference.layer(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


def test_ops_operators_and_two_methods(rng):
    class Attention(nn.Module):
        def __init__(self):
            self.q = nn.Parameter((8, 8))

        def forward(self, x, y):
            scores = nn.op.softmax((x @ self.q) @ nn.op.permute_dims(y) * 0.5, axis=-1)
            both = nn.op.concat([scores, 1.0 - scores / 2.0], dim=1)
            return nn.op.reshape(both, (-1,)), nn.op.mean(x, axis=1, keepdims=True)

        def project(self, x):
            return nn.op.sum(x @ self.q, axis=0)

    spec = {
        "forward": {"x": nn.spec.Tensor((3, 8)), "y": nn.spec.Tensor((4, 8))},
        "project": {"x": nn.spec.Tensor((3, 8))},
    }
    mod, _ = Attention().export_tvm(spec)
    assert [mod[f].num_input for f in ("forward", "project")] == [2, 1]
    assert [n for n, _ in mod["project"].params] == ["x", "q"]
    x = rng.standard_normal((3, 8), dtype=np.float32)
    y = rng.standard_normal((4, 8), dtype=np.float32)
    q = rng.standard_normal((8, 8), dtype=np.float32)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), rm.cpu())
    flat, mean = vm["forward"](x, y, q)
    s = (x @ q) @ y.T * 0.5
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    want = np.concatenate([s, 1.0 - s / 2.0], axis=1).reshape(-1)
    np.testing.assert_allclose(flat.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean.numpy(), x.mean(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vm["project"](x, q).numpy(), (x @ q).sum(0), rtol=1e-5, atol=1e-5)


class Fn(nn.Module):
    """A module whose forward is one function of x (a plain attribute, not a parameter)."""

    def __init__(self, fn):
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


# (forward body on x of shape (3, 1, 4) in [0.5, 1.5), numpy reference)
OPS = {
    "exp": (nn.op.exp, np.exp),
    "sqrt": (nn.op.sqrt, np.sqrt),
    "rsqrt": (nn.op.rsqrt, lambda x: 1 / np.sqrt(x)),
    "sigmoid": (nn.op.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (nn.op.tanh, np.tanh),
    "square": (nn.op.square, np.square),
    "neg": (lambda x: -x, np.negative),
    "maximum": (lambda x: nn.op.maximum(x, 1.0), lambda x: np.maximum(x, 1.0)),
    "minimum": (lambda x: nn.op.minimum(1.0, x), lambda x: np.minimum(1.0, x)),
    "sub_div": (lambda x: (x - 0.5) / x + 2.0 * x, lambda x: (x - 0.5) / x + 2.0 * x),
    "squeeze": (lambda x: nn.op.squeeze(x, 1), lambda x: x.squeeze(1)),
    "unsqueeze": (lambda x: nn.op.unsqueeze(x, 0), lambda x: x[None]),
    "reshape": (lambda x: x.reshape(4, 3), lambda x: x.reshape(4, 3)),
    "permute_dims": (lambda x: x.permute_dims(2, 0, 1), lambda x: x.transpose(2, 0, 1)),
    "astype": (lambda x: x.astype("float64"), lambda x: x.astype(np.float64)),
    "zeros_ones": (lambda x: x + nn.op.zeros((3, 1, 4)) + nn.op.ones((4,)), lambda x: x + 1),
    "sum": (lambda x: nn.op.sum(x, axis=[0, 2]), lambda x: x.sum((0, 2))),
}


@pytest.mark.parametrize("name", list(OPS))
def test_op_table(name, rng):
    fn, reference = OPS[name]
    mod, params = Fn(fn).export_tvm({"forward": {"x": nn.spec.Tensor((3, 1, 4))}})
    assert params == []
    x = rng.uniform(0.5, 1.5, (3, 1, 4)).astype(np.float32)
    want = reference(x)
    got = run(mod, "forward", x)
    assert got.shape == want.shape and got.dtype == want.dtype, name
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


# -- user-written passes -------------------------------------------------------------------------
SEEN = []


@rm.transform.module_pass(opt_level=0, name="RecordOps")
class RecordOps:
    """A class pass: records the context and the high-level ops it sees."""

    def __init__(self, tag):
        self.tag = tag

    def transform_module(self, mod, ctx):
        SEEN.append(
            (self.tag, ctx.opt_level, ctx.config.get("note"), "relax.matmul" in mod.script())
        )
        return mod


@rm.transform.module_pass(opt_level=1)
def drop_prim_names(mod, ctx):
    SEEN.append(("function", ctx.opt_level, sorted(f for f in mod.functions if f != "forward")))
    return mod


@rm.transform.module_pass(opt_level=4, name="TooCostly")
def too_costly(mod, ctx):
    raise AssertionError("opt_level 4 must not run under opt_level 3")


def test_user_passes_in_sequential(rng):
    SEEN.clear()
    mod, params = MLPModel().export_tvm({"forward": {"x": nn.spec.Tensor((2, 784), "float32")}})
    seq = rm.ir.transform.Sequential(
        [
            RecordOps("before"),
            relax.transform.LegalizeOps(),
            drop_prim_names,
            too_costly,
            RecordOps("after"),
        ]
    )
    assert rm.ir.transform.Sequential is rm.transform.Sequential
    assert type(RecordOps("x")).__name__ == "RecordOps" and RecordOps("x").name == "RecordOps"
    with PassContext(opt_level=3, config={"note": "hi"}) as ctx:
        assert PassContext.current() is ctx
        out = seq(mod)
    assert PassContext.current().opt_level == 2  # the default context is back
    assert SEEN[0] == ("before", 3, "hi", True)
    assert SEEN[1][:2] == ("function", 3) and SEEN[1][2]  # LegalizeOps added PrimFuncs
    assert SEEN[2] == ("after", 3, "hi", False)
    assert "relax.matmul" in mod.script()  # passes leave their input alone
    values = random_values(params, rng)
    x = rng.standard_normal((2, 784), dtype=np.float32)
    got = run(out, "forward", x, *values.values())
    np.testing.assert_allclose(got, mlp_reference(x, values), rtol=1e-4, atol=1e-4)
    # at the default opt_level (2) the opt_level-4 pass is skipped too, and disabled_pass wins
    with PassContext(disabled_pass=["RecordOps"]):
        SEEN.clear()
        rm.transform.Sequential([RecordOps("x"), too_costly, relax.get_pipeline("zero")])(mod)
    assert SEEN == []


def test_get_global_func_allow_missing():
    # relax.ext.cublas is registered whenever its kernels are built: ask for a codegen that is not
    assert rm.get_global_func("relax.ext.tensorrt", True) is None
    assert rm.get_global_func("relax.ext.tensorrt", allow_missing=True) is None
    with pytest.raises(ValueError, match="not registered"):
        rm.get_global_func("relax.ext.tensorrt")


# -- errors ---------------------------------------------------------------------------------------
def test_export_errors():
    model = MLPModel()
    with pytest.raises(ValueError, match=r"MLPModel has no method 'fwd'; methods: forward"):
        model.export_tvm({"fwd": {"x": nn.spec.Tensor((1, 784))}})
    with pytest.raises(
        ValueError, match=r"gives 2 input\(s\) \(x, y\), but MLPModel.forward takes 1 \(x\)"
    ):
        model.export_tvm(
            {"forward": {"x": nn.spec.Tensor((1, 784)), "y": nn.spec.Tensor((1, 784))}}
        )
    with pytest.raises(ValueError, match=r"missing \['x'\], unknown \['inp'\]"):
        model.export_tvm({"forward": {"inp": nn.spec.Tensor((1, 784))}})
    with pytest.raises(TypeError, match="must be an nn.spec.Tensor"):
        model.export_tvm({"forward": {"x": (1, 784)}})
    with pytest.raises(ValueError, match=r"relax.matmul"):  # a shape error names the op
        model.export_tvm({"forward": {"x": nn.spec.Tensor((1, 783))}})


def test_usage_errors():
    with pytest.raises(RuntimeError, match="outside of export_tvm"):
        nn.op.relu(nn.Parameter((2, 2)))
    p = nn.Parameter((2, 3))
    with pytest.raises(ValueError, match=r"expects shape \(2, 3\) and dtype float32"):
        p.data = np.zeros((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"missing keys \['fc2.bias'\]"):
        MLPModel().load_state_dict(
            {k: v for k, v in MLPModel().state_dict().items() if k != "fc2.bias"}
        )
    with pytest.raises(TypeError, match="needs a method transform_module"):
        rm.transform.module_pass(type("NoTransform", (), {}), opt_level=0)
    bad = rm.transform.module_pass(lambda mod, ctx: None, name="Bad")
    with pytest.raises(TypeError, match="Bad: the pass must return an IRModule, got NoneType"):
        bad(MLPModel().export_tvm({"forward": {"x": nn.spec.Tensor((1, 784))}})[0])
