"""`torch.compile(model, backend="relaxmlir")`: a TorchDynamo backend.

torch finds it through the `torch_dynamo_backends` entry point (pyproject.toml), so importing
relaxmlir never imports torch. Dynamo hands the backend each captured graph with example inputs;
the backend imports it with `from_fx`, builds it once, and returns a callable that runs the
compiled code on torch tensors (zero-copy in and out through DLPack). Sizes dynamo marked
dynamic arrive as `SymInt`s: those dims become symbolic dims of the relax function (one build
for every size), and the SymInt inputs themselves are dropped from the call, since the shapes
carry them. A graph that cannot be compiled (an op without a rule, or any other failure, named
in the warning) runs in torch eagerly, as a graph break would.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

STATS = {"builds": 0, "fallbacks": 0}  # what the tests and users can check


def _is_symint(x: Any) -> bool:
    import torch

    return isinstance(x, torch.SymInt)


def _dim(d: Any) -> int | str:
    """An int, or a symbol name (`s0`) for a dynamic size."""
    import torch

    if isinstance(d, torch.SymInt):
        expr = d.node.expr
        if getattr(expr, "is_Symbol", False):
            return str(expr)
        if getattr(expr, "is_Integer", False):  # a dim dynamo specialized (guarded) to a value
            return int(expr)
        raise NotImplementedError(
            f"torch.compile backend 'relaxmlir': a size given by an expression ({expr})"
        )
    return int(d)


def _example(node: Any) -> Any:
    return node.meta.get("example_value", node.meta.get("val"))


def _bake_scalars(gm: Any, example_inputs: Sequence[Any]) -> dict[int, Any]:
    """Dynamo passes python scalars it did not specialize on (eps, dropout p, norm_type, ... with
    `dynamic=True`) as 0-d tensor inputs read by `.item()`. The compiled code needs them as
    constants: each such input's `.item()` becomes its current value, the input is dropped, and
    the returned {input position: value} is checked on every call (another value runs the
    graph in torch)."""
    import torch

    baked = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        users = list(node.users)
        if (
            not isinstance(value, torch.Tensor)
            or value.dim() != 0
            or not users
            or any(u.op != "call_method" or u.target != "item" for u in users)
        ):
            continue
        baked[i] = value.item()
        for user in users:
            user.replace_all_uses_with(baked[i])
            gm.graph.erase_node(user)
    return baked


def _tensor_inputs(gm: Any, example_inputs: Sequence[Any], baked: dict) -> tuple[list, list]:
    """Rewrite `gm` so that its only inputs are tensors: each SymInt input is replaced by a size
    query of a tensor input that has that size; the baked scalar inputs are dropped. Returns
    (kept input positions, shapes)."""
    import torch

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    keep, shapes, sizes = [], [], {}
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        fake = _example(node)
        if i in baked:
            continue
        if isinstance(value, torch.Tensor):
            source = fake if isinstance(fake, torch.Tensor) else value
            dims = [_dim(d) for d in source.shape]
            keep.append(i)
            shapes.append(tuple(dims))
            for axis, d in enumerate(dims):
                if isinstance(d, str):
                    sizes.setdefault(d, (node, axis))
        elif not _is_symint(value) and not isinstance(value, int):
            raise NotImplementedError(
                f"torch.compile backend 'relaxmlir': input '{node.name}' is a {type(value).__name__}"
            )
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        if i in baked:
            gm.graph.erase_node(node)
            continue
        if i in keep:
            continue
        fake = _example(node)
        name = str(fake.node.expr) if _is_symint(fake) else None
        if name in sizes:
            tensor_node, axis = sizes[name]
            with gm.graph.inserting_after(tensor_node):
                query = gm.graph.call_method("size", (tensor_node, axis))
        elif isinstance(value, int) and not _is_symint(value):
            query = int(value)
        else:
            raise NotImplementedError(
                f"torch.compile backend 'relaxmlir': size input '{node.name}' ({name}) is no tensor's dim"
            )
        node.replace_all_uses_with(query)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return keep, shapes


def _updates_returned(gm: Any) -> tuple[Any, list[int]]:
    """The graph with the inputs it writes in place (a module's buffer, which dynamo passes as
    an input: `self.total.add_(x)`) returned after its outputs, with their input positions. The
    compiled code computes the new values (`Importer.translate` rebinds them); `run` writes them
    into the caller's tensors, as the graph run by torch would."""
    import copy

    import torch

    from relaxmlir.frontend.importer import written_values

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    written = written_values(gm.graph)
    positions = [i for i, p in enumerate(placeholders) if p in written]
    if not positions:
        return gm, []
    graph = copy.deepcopy(gm.graph)
    copies = [n for n in graph.nodes if n.op == "placeholder"]
    output = next(n for n in graph.nodes if n.op == "output")
    outs = output.args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    output.args = (tuple(outs + [copies[i] for i in positions]),)
    return torch.fx.GraphModule(gm, graph), positions


def _dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def relaxmlir_backend(gm: Any, example_inputs: Sequence[Any], **options: Any) -> Callable:
    """Compile one captured graph; `options` may hold `target` (default "llvm")."""
    import torch

    from relaxmlir import relax
    from relaxmlir.frontend.fx import from_fx
    from relaxmlir.runtime import cpu

    target = options.get("target", "llvm")
    eager = gm.forward
    try:
        baked = _bake_scalars(gm, example_inputs)
        keep, shapes = _tensor_inputs(gm, example_inputs, baked)
        dtypes = [_dtype_name(example_inputs[i]) for i in keep]
        graph, written = _updates_returned(gm)
        if any(i not in keep for i in written):
            raise NotImplementedError("an input written in place that is not a tensor input")
        mod = from_fx(graph, shapes, input_dtypes=dtypes)
        ex = relax.build(mod, target)
    except Exception as exc:  # noqa: BLE001  (any failure to compile: the graph still runs, in torch)
        STATS["fallbacks"] += 1
        kind = "" if isinstance(exc, NotImplementedError) else f"{type(exc).__name__}: "
        warnings.warn(
            f"torch.compile backend 'relaxmlir': running this graph in torch: {kind}{exc}",
            stacklevel=2,
        )
        return eager
    STATS["builds"] += 1
    main = relax.VirtualMachine(ex, cpu())["main"]

    def to_torch(out: Any) -> Any:
        if isinstance(out, (list, tuple)):
            return [to_torch(o) for o in out]
        return torch.from_dlpack(out)

    def run(*args: Any) -> Any:
        # Dynamo calls with the captured graph's inputs (sizes and scalars included); guard
        # against a caller that passes only the kept tensors.
        if len(args) == len(keep):
            picked = args
        else:
            if any(args[i].item() != v for i, v in baked.items()):
                out = eager(*args)  # a scalar the build baked in has changed
                return list(out) if isinstance(out, (list, tuple)) else [out]
            picked = [args[i] for i in keep]
        tensors = [t.detach() for t in picked]
        if any(t.device.type != "cpu" for t in tensors):
            raise ValueError(
                "torch.compile backend 'relaxmlir': inputs must be CPU tensors (target llvm)"
            )
        result = to_torch(main(*[t if t.is_contiguous() else t.contiguous() for t in tensors]))
        result = result if isinstance(result, list) else [result]
        if written:  # the inputs the graph writes in place (a module's buffers): written back
            for i, new in zip(written, result[len(result) - len(written) :]):
                picked[keep.index(i)].copy_(new)
            result = result[: len(result) - len(written)]
        return result

    return run
