"""Bad input raises a clear exception and never crashes the process.

The cases run one after the other in a fresh interpreter (one per test process, not one per
case: each costs ~1 s to start): each test asserts the exception type its case printed there,
and that the child exited normally (a segfault would give a negative return code: every case
then fails, naming the case that was running, whose "CASE" line has no outcome after it).
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import numpy as np
import relaxmlir as rm
from relaxmlir import relax
import sys
sys.path.insert(0, {tests!r})
from mlp_models import mlp, params
def vm_of(mod):
    return relax.VirtualMachine(relax.build(mod), rm.cpu())
p = params()
x = np.zeros((1, 784), np.float32)
"""

CASES = {
    "wrong_arg_count": ("vm_of(mlp('tir'))['main'](x)", "TypeError", "takes 5 argument"),
    "wrong_shape": ("vm_of(mlp('tir'))['main'](np.zeros((2, 784), np.float32), p['w0'], p['b0'], p['w1'], p['b1'])", "ValueError", "expected signature"),
    "wrong_dtype": ("vm_of(mlp('tir'))['main'](x.astype(np.float64), p['w0'], p['b0'], p['w1'], p['b1'])", "TypeError", "dtype float64"),
    "wrong_rank": ("vm_of(mlp('tir'))['main'](np.zeros((784,), np.float32), p['w0'], p['b0'], p['w1'], p['b1'])", "ValueError", "rank"),
    "not_an_array": ("vm_of(mlp('tir'))['main']('x', p['w0'], p['b0'], p['w1'], p['b1'])", "TypeError", "expected an NDArray"),
    "unknown_packed": ("relax.build(mlp('packed'))", "ValueError", "env.linear"),
    "malformed_text": ("rm.parse('func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\\n  return %y : tensor<2xf32>\\n}')", "ParseError", "undeclared SSA value"),
    "invalid_relax_op": ("rm.parse('func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {\\n %0 = \\\"relax.call_tir\\\"(%x) : (tensor<2xf32>) -> tensor<2xf32>\\n return %0 : tensor<2xf32>\\n}')", "ParseError", "callee"),
    "bad_callee": ("relax.build(rm.parse('func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> attributes {relax.function} {\\n %0 = \\\"relax.call_tir\\\"(%x) {callee = @nope} : (tensor<2xf32>) -> tensor<2xf32>\\n return %0 : tensor<2xf32>\\n}'))", "ValueError", "@nope not found"),
    "bad_bind_params": ("relax.transform.BindParams('main', {'w0': np.zeros((3, 3), np.float32)})(mlp('tir'))", "ValueError", "w0"),
    "packed_raises": ("""
@rm.register_func('env.boom')
def boom(x, out):
    raise KeyError('kaboom')
s = relax.TensorStructInfo((2,), 'float32'); v = relax.Var('v', s); bb = relax.BlockBuilder()
with bb.function('main', [v]):
    with bb.dataflow():
        gv = bb.emit_output(relax.call_dps_packed('env.boom', [v], s))
    bb.emit_func_output(gv)
vm_of(bb.get())['main'](np.zeros(2, np.float32))""", "RuntimeError", "kaboom"),
    "duplicate_register": ("rm.register_func('a.b', print); rm.register_func('a.b', print)", "ValueError", "already registered"),
    "unknown_function": ("vm_of(mlp('tir'))['nope']", "KeyError", "no function 'nope'"),
}


@pytest.fixture(scope="module")
def child() -> subprocess.CompletedProcess:
    """Every case in one fresh interpreter: "CASE <name>", then its outcome line, for each."""
    script = PRELUDE.format(tests=str(ROOT / "tests" / "python"))
    for case in sorted(CASES):
        script += textwrap.dedent(f"""
print("CASE", {case!r}, flush=True)
try:
{textwrap.indent(textwrap.dedent(CASES[case][0]).strip(), '    ')}
except Exception as exc:
    print("RAISED", type(exc).__name__, str(exc).replace(chr(10), ' '), flush=True)
else:
    print("NO EXCEPTION", flush=True)
""")
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_raises_cleanly(case, child):
    _, exc_type, fragment = CASES[case]
    lines = child.stdout.splitlines()
    at = lines.index(f"CASE {case}") + 1 if f"CASE {case}" in lines else len(lines)
    line = lines[at] if at < len(lines) else ""
    where = lines[-1] if lines and lines[-1].startswith("CASE") else "at exit"  # no outcome
    crashed = f"child crashed (rc={child.returncode}) {where}: {child.stderr[-2000:]}"
    assert line.startswith(("RAISED", "NO EXCEPTION")), crashed
    assert child.returncode == 0, crashed
    assert line.startswith(f"RAISED {exc_type}"), line
    assert fragment in line, line
