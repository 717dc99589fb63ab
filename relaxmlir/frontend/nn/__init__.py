"""`nn`: write models as Python classes and export them to relax (TVM's `relax.frontend.nn`).

    from relaxmlir.frontend import nn

    class MLPModel(nn.Module):
        def __init__(self):
            self.fc1 = nn.Linear(784, 128)
            self.relu1 = nn.ReLU()
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            return self.fc2(self.relu1(self.fc1(x)))

    mod, params = MLPModel().export_tvm({"forward": {"x": nn.spec.Tensor(("n", 784), "float32")}})

Conventions:
- `export_tvm` traces each method in the spec inside one dataflow block of a relax function of
  the same name. Its parameters are the spec's inputs, then every `nn.Parameter` of the model in
  attribute order, named by attribute path with dots as underscores (`fc1_weight`,
  `layers_0_bias`); the function attribute `num_input` (`mod["forward"].attrs["num_input"]`)
  counts the inputs. Weights stay function parameters: nothing is baked in.
- `params` is `[(name, nn.Parameter)]` in that order. A parameter holds an optional numpy
  value, `param.data` (assign a numpy array, torch tensor or NDArray of its shape and dtype,
  or call `model.load_state_dict({"fc1.weight": ..., ...})` with dotted paths, e.g. a torch
  model's `state_dict()`). To run, pass the values after the inputs,
  `vm["forward"](x, *[p.data for _, p in params])`, or bake them in with
  `relax.transform.BindParams("forward", {name: p.data for name, p in params})`.
- `nn.op.*` and the Tensor operators emit relax ops only while a module is exported; called
  outside `export_tvm` they raise RuntimeError.
"""

from relaxmlir.frontend.nn import op, spec  # noqa: F401
from relaxmlir.frontend.nn.core import Parameter, Tensor  # noqa: F401
from relaxmlir.frontend.nn.module import Module, ModuleList  # noqa: F401
from relaxmlir.frontend.nn.modules import (  # noqa: F401
    GELU,
    Conv2D,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
    ReLU,
    RMSNorm,
    SiLU,
)
