"""`nn.Module`, `nn.ModuleList` and `export_tvm`, which traces methods into relax functions."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from relaxmlir.frontend.nn import spec as nn_spec
from relaxmlir.frontend.nn.core import Parameter, Tensor, trace
from relaxmlir.ir import IRModule
from relaxmlir.relax.block_builder import BlockBuilder
from relaxmlir.relax.expr import Var
from relaxmlir.relax.transform.lift_transform_params import NUM_INPUT_ATTR  # `attrs["num_input"]`


class Module:
    """Base class of models written with `nn` (TVM's `nn.Module`).

    Parameters and submodules are the instance attributes that hold an `nn.Parameter`, an
    `nn.Module` or an `nn.ModuleList`, in the order they were assigned; calling
    `super().__init__()` is optional. A module is called like a function (`self.fc1(x)`),
    which runs its `forward`.
    """

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """`(dotted attribute path, parameter)` pairs; a shared parameter appears once."""
        seen: set[int] = set()
        for name, param in _walk(self, prefix):
            if id(param) not in seen:
                seen.add(id(param))
                yield name, param

    def parameters(self) -> Iterator[Parameter]:
        for _, param in self.named_parameters():
            yield param

    def state_dict(self) -> dict[str, Parameter]:
        """Parameters by dotted path (`"fc1.weight"`), as in torch and TVM."""
        return dict(self.named_parameters())

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> None:
        """Set `.data` of parameters from numpy arrays, torch tensors or NDArrays keyed by
        dotted path, so `model.load_state_dict(torch_model.state_dict())` works."""
        params = self.state_dict()
        missing = [k for k in params if k not in state_dict]
        unexpected = [k for k in state_dict if k not in params]
        if strict and (missing or unexpected):
            raise ValueError(
                f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}; "
                f"parameters: {list(params)}"
            )
        for key, value in state_dict.items():
            if key in params:
                try:
                    params[key].data = value
                except ValueError as exc:
                    raise ValueError(f"load_state_dict: '{key}': {exc}") from None

    def export_tvm(
        self, spec: Mapping[str, Mapping[str, nn_spec.Tensor]]
    ) -> tuple[IRModule, list[tuple[str, Parameter]]]:
        """Trace the methods named in `spec` into one relax function each.

        Parameters
        ----------
        spec : dict
            `{method name: {argument name: nn.spec.Tensor}}`; argument names are those of the
            method's signature.

        Returns
        -------
        mod : IRModule
            One function per method: the inputs, then every parameter named after its
            attribute path with dots as underscores (`fc1_weight`, `layers_0_bias`); the
            number of inputs is the function attribute `num_input`.
        params : list of (str, nn.Parameter)
            The parameters in function order, under those names.

        Examples
        --------
        >>> mod, params = MLPModel().export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})
        >>> mod["forward"].attrs["num_input"]
        1
        """
        if not isinstance(spec, Mapping) or not spec:
            raise TypeError(f"export_tvm: spec must be a non-empty dict of methods, got {spec!r}")
        methods = [(name, *self._method_inputs(name, args)) for name, args in spec.items()]
        named = list(self.named_parameters())
        names = [n.replace(".", "_") for n, _ in named]
        if len(set(names)) != len(names):
            raise ValueError(
                f"export_tvm: parameter names collide once dots become underscores: {names}"
            )
        bb = BlockBuilder()
        for method_name, method, inputs in methods:
            clash = sorted(set(names) & {n for n, _ in inputs})
            if clash:
                raise ValueError(
                    f"export_tvm: inputs of '{method_name}' reuse parameter names {clash}"
                )
            in_vars = [Var(n, s.struct_info) for n, s in inputs]
            param_vars = [Var(n, p.struct_info) for n, (_, p) in zip(names, named)]
            attrs = {NUM_INPUT_ATTR: len(in_vars)}
            with bb.function(method_name, in_vars + param_vars, attrs=attrs):
                taken = names + [v.name_hint for v in in_vars]
                with bb.dataflow(), trace(bb, taken), _bound([p for _, p in named], param_vars):
                    out = method(*[Tensor(v) for v in in_vars])
                    where = f"{type(self).__name__}.{method_name}"
                    outs = [bb.emit_output(t._expr_checked()) for t in _outputs(out, where)]
                bb.emit_func_output(outs if isinstance(out, (tuple, list)) else outs[0])
        return bb.get(), list(zip(names, (p for _, p in named)))

    def _method_inputs(
        self, method_name: Any, args: Any
    ) -> tuple[Any, list[tuple[str, nn_spec.Tensor]]]:
        """The bound method and its `(name, spec)` inputs in signature order, or a ValueError."""
        cls = type(self).__name__
        method = getattr(self, method_name, None) if isinstance(method_name, str) else None
        if method_name in dir(Module) and method_name != "forward" or not callable(method):
            raise ValueError(
                f"export_tvm: {cls} has no method '{method_name}'; methods: {', '.join(_methods(self))}"
            )
        if not isinstance(args, Mapping):
            raise TypeError(
                f"export_tvm: spec['{method_name}'] must map argument names to nn.spec.Tensor, got {args!r}"
            )
        params = [
            p for p in inspect.signature(method).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]  # fmt: skip
        taken = [p.name for p in params]
        required = [p.name for p in params if p.default is p.empty]
        unknown = [a for a in args if a not in taken]
        missing = [a for a in required if a not in args]
        if unknown or missing:
            raise ValueError(
                f"export_tvm: spec for '{method_name}' gives {len(args)} input(s) ({', '.join(args)}), "
                f"but {cls}.{method_name} takes {len(taken)} ({', '.join(taken)}); "
                f"missing {missing}, unknown {unknown}"
            )
        for name, s in args.items():
            if not isinstance(s, nn_spec.Tensor):
                raise TypeError(
                    f"export_tvm: spec['{method_name}']['{name}'] must be an nn.spec.Tensor, got {s!r}"
                )
        return method, [(n, args[n]) for n in taken if n in args]


class ModuleList(Module):
    """A list of modules; their parameters are named `<attribute>.<index>.<name>`.

    Calling it applies the modules in turn, like `torch.nn.Sequential`.
    """

    def __init__(self, modules: Sequence[Module] = ()):
        self.modules: list[Module] = []
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"nn.ModuleList holds nn.Module objects, got {type(module).__name__}")
        self.modules.append(module)

    def __iter__(self) -> Iterator[Module]:
        return iter(self.modules)

    def __getitem__(self, index: int) -> Module:
        return self.modules[index]

    def __len__(self) -> int:
        return len(self.modules)

    def forward(self, x: Any) -> Any:
        for m in self.modules:
            x = m(x)
        return x


def _walk(module: Module, prefix: str) -> Iterator[tuple[str, Parameter]]:
    if isinstance(module, ModuleList):
        for i, m in enumerate(module):
            yield from _walk(m, f"{prefix}{i}.")
        return
    for name, value in vars(module).items():
        if isinstance(value, Parameter):
            yield prefix + name, value
        elif isinstance(value, Module):
            yield from _walk(value, f"{prefix}{name}.")


def _methods(module: Module) -> list[str]:
    cls = type(module)
    return sorted(
        n for n in dir(cls)
        if not n.startswith("_") and callable(getattr(cls, n))
        and (n not in dir(Module) or (n == "forward" and cls.forward is not Module.forward))
    )  # fmt: skip


@contextlib.contextmanager
def _bound(params: list[Parameter], values: list[Var]) -> Iterator[None]:
    """Parameters stand for the function's parameter vars while a method is traced."""
    for p, v in zip(params, values):
        p._expr = v
    try:
        yield
    finally:
        for p in params:
            p._expr = None


def _outputs(out: Any, where: str) -> list[Tensor]:
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    if not items or not all(isinstance(t, Tensor) for t in items):
        raise TypeError(
            f"export_tvm: {where} must return an nn.Tensor or a tuple of them, got {out!r}"
        )
    return items
