"""LegalizeOps, FoldConstant and DeadCodeElimination: registry completeness, errors, behaviour."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

import relaxmlir as rm
from dialects import relax as rx
from lowering.registry import PassError, run_pipeline
from relaxmlir import relax, topi
from relaxmlir.relax.transform.legalize_ops import LEGALIZE_RULES

R = relax.op

# High-level ops that deliberately have no legalization rule, each with the reason.
NO_RULE_ALLOWLIST: dict[str, str] = {
    # (empty: every high-level op of dialects/relax.py legalizes)
}


def high_level_ops() -> list[str]:
    return sorted(name for name in rx.RELAX.ops if name not in rx.CORE_OPS)


def test_every_high_level_op_has_a_rule_or_is_allowlisted():
    missing = [
        op for op in high_level_ops() if op not in LEGALIZE_RULES and op not in NO_RULE_ALLOWLIST
    ]
    assert not missing, f"high-level ops without a legalization rule: {missing}"
    stale = [op for op in NO_RULE_ALLOWLIST if op in LEGALIZE_RULES]
    assert not stale, f"allowlisted ops that now have a rule: {stale}"


def test_rules_are_keyed_by_existing_ops():
    unknown = [op for op in LEGALIZE_RULES if op not in rx.RELAX.ops]
    assert not unknown, f"rules for ops that dialects/relax.py does not define: {unknown}"


def _exp_module() -> relax.IRModule:
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(R.exp(x), name_hint="lv_exp")
        bb.emit_func_output(gv)
    return bb.get()


def test_missing_rule_raises_not_implemented_naming_op_location_target(monkeypatch):
    monkeypatch.delitem(LEGALIZE_RULES, "relax.exp")
    with pytest.raises(NotImplementedError, match=r"relax\.exp.*loc\(\"lv_exp\"\).*target 'llvm'"):
        relax.transform.LegalizeOps()(_exp_module())
    with pytest.raises(NotImplementedError, match=r"relax\.exp"):
        relax.build(_exp_module(), "llvm")


def test_missing_rule_in_the_mlir_pass_is_a_diagnostic_at_the_op(monkeypatch):
    monkeypatch.delitem(LEGALIZE_RULES, "relax.exp")
    mod = _exp_module()
    with pytest.raises(
        PassError, match=r"no legalization rule for 'relax\.exp'.*target 'cuda'"
    ) as info:
        run_pipeline(mod.module, "builtin.module(relax-legalize-ops{target=cuda})")
    assert "lv_exp" in str(info.value.location)


def test_customize_legalize_map_overrides_the_registered_rule():
    def as_relu(bb, call):
        return bb.call_te(topi.nn.relu, call.args[0], primfunc_name_hint="custom_relu")

    mod = relax.transform.LegalizeOps({"relax.exp": as_relu})(_exp_module())
    assert "custom_relu" in mod.script()
    out = relax.VirtualMachine(relax.build(mod), rm.cpu())["main"](
        np.array([-1, 2, -3, 4], "float32")
    )
    np.testing.assert_array_equal(out.numpy(), [0, 2, 0, 4])


def test_identical_prim_funcs_are_shared_and_high_level_ops_are_gone():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(("n", 4), "float32"))
    with bb.function("main", [x]):
        a = bb.emit(R.nn.relu(x))
        b = bb.emit(R.nn.relu(a))
        bb.emit_func_output(bb.emit(R.add(a, b)))
    mod = relax.transform.LegalizeOps()(bb.get())
    prim_funcs = [f for f in mod.functions.values() if f.is_prim_func]
    assert sorted(f.name for f in prim_funcs) == ["add", "relu"]
    assert not any(op in mod.script() for op in ('"relax.nn_relu"', '"relax.add"'))


def test_a_te_function_applied_again_alike_is_built_once():
    """LegalizeOps builds a rule's PrimFunc once per distinct application: the same TE function
    on tensors of equal shapes and dtypes with equal other arguments (0.0 and -0.0 differ)."""
    built = []

    def shifted(x, shift):
        built.append((tuple(int(d) for d in x.shape), repr(shift)))
        return topi.add(x, shift)

    shifts = iter([0.0, 0.0, -0.0, 0.0])  # the ops' order

    def rule(bb, call):
        return bb.call_te(shifted, call.args[0], next(shifts))

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((4,), "float32"))
    z = relax.Var("z", relax.TensorStructInfo((3,), "float32"))
    with bb.function("main", [x, y, z]):
        a = bb.emit(R.exp(x))
        b = bb.emit(R.exp(a))  # as the first: its PrimFunc
        c = bb.emit(R.exp(y))  # -0.0
        d = bb.emit(R.exp(z))  # another shape
        bb.emit_func_output(relax.Tuple([b, c, d]))
    mod = relax.transform.LegalizeOps({"relax.exp": rule})(bb.get())
    assert built == [((4,), "0.0"), ((4,), "-0.0"), ((3,), "0.0")]
    assert len([f for f in mod.functions.values() if f.is_prim_func]) == 3
    vm = relax.VirtualMachine(relax.build(mod), rm.cpu())
    ins = [np.arange(4, dtype="float32"), np.ones(4, "float32"), np.zeros(3, "float32")]
    for got, want in zip(vm["main"](*ins), [ins[0], ins[1], ins[2]]):
        np.testing.assert_array_equal(got.numpy(), want)


def test_input_module_is_unchanged():
    mod = _exp_module()
    before = mod.script()
    relax.transform.LegalizeOps()(mod)
    assert mod.script() == before


def test_fold_constant_then_dce_leaves_only_runtime_work():
    w = np.arange(6, dtype="float32").reshape(2, 3)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(("n", 3), "float32"))
    wc = relax.const(w)
    with bb.function("main", [x]):
        with bb.dataflow():
            wt = bb.emit(R.permute_dims(wc))  # constant-only: folded
            gv = bb.emit_output(R.matmul(x, wt))
        bb.emit_func_output(gv)
    mod = relax.get_pipeline("zero")(bb.get())
    names = sorted(f.name for f in mod.functions.values() if f.is_prim_func)
    assert names == ["matmul"], names
    data = np.ones((5, 3), "float32")
    out = relax.VirtualMachine(relax.build(mod), rm.cpu())["main"](data)
    np.testing.assert_allclose(out.numpy(), data @ w.T)


@pytest.mark.parametrize(
    "shape, axes", [((2, 3), (1, 0)), ((130, 70), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (0, 2, 1))]
)
def test_fold_constant_permutes_with_numpy(shape, axes, monkeypatch):
    """Weight transposes are folded by numpy, not by a JIT-compiled kernel."""
    from relaxmlir.relax.transform import fold_constant

    def no_jit(self, callee):
        raise AssertionError("a permutation was JIT-compiled")

    monkeypatch.setattr(fold_constant._Evaluator, "_compile", no_jit)
    w = np.random.default_rng(0).standard_normal(shape).astype("float32")
    bb = relax.BlockBuilder()
    with bb.function("main", []):
        with bb.dataflow():
            gv = bb.emit_output(R.permute_dims(relax.const(w), list(axes)))
        bb.emit_func_output(gv)
    mod = relax.get_pipeline("zero")(bb.get())
    assert not [f for f in mod.functions.values() if f.is_prim_func]
    values = []

    def collect(op):
        if op.operation.name == "relax.constant":
            values.append(np.array(op.operation.attributes["value"]))
        return ir.WalkResult.ADVANCE

    mod.module.operation.walk(collect)
    assert len(values) == 1
    np.testing.assert_array_equal(values[0], np.transpose(w, axes))


def test_dead_code_elimination_keeps_outputs_and_effects():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            dead = bb.emit(R.exp(x))
            kept = bb.emit_output(R.negative(x))
            unused_out = bb.emit_output(R.sqrt(dead))
        bb.emit(relax.call_packed("env.log", x))
        bb.emit_func_output(kept)
    mod = relax.transform.DeadCodeElimination()(bb.get())
    text = mod.script()
    assert '"relax.negative"' in text and '"relax.call_packed"' in text
    assert '"relax.exp"' not in text and '"relax.sqrt"' not in text
    assert unused_out is not None


@pytest.mark.parametrize(
    "name", ["relax-legalize-ops", "relax-fold-constant", "relax-dead-code-elimination"]
)
def test_passes_are_registered(name):
    from lowering import PASSES

    assert name in PASSES
