"""relaxmlir-opt, relaxmlir-run and the lit runner: the contracts lit tests cannot pin alone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dialects.irdl_dsl import Operand, Result

from relaxmlir.tools import REPO_ROOT, SCRIPTS, lit
from relaxmlir.tools.opt import main as opt_main

LIT_DIR = REPO_ROOT / "tests" / "lit"
MLP = LIT_DIR / "run" / "mlp.mlir"


def run_tool(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPTS[name]), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def lit_run_text() -> str:
    files = [p for p in LIT_DIR.rglob("*") if p.suffix in (".mlir", ".py") and lit.is_lit_test(p)]
    return "\n".join(line for p in files for line in lit.parse_test(p).run_lines)


def test_every_pass_has_a_lit_test():
    from lowering import PASSES

    # Names used as `--name`, `-name=...`, `'--name{...}'` or inside `builtin.module(a,name)`.
    used = set(re.findall(r"(?:^|[\s'\"(,])-{0,2}([A-Za-z][\w.-]*)", lit_run_text(), flags=re.M))
    untested = sorted(set(PASSES) - used)
    assert not untested, f"passes without a lit test RUN line under tests/lit: {untested}"


def test_broken_check_fails_with_filecheck_report(tmp_path):
    test = tmp_path / "broken.mlir"
    test.write_text(
        "// RUN: relaxmlir-opt %s | FileCheck %s\n"
        "// CHECK-LABEL: func.func @not_there\n"
        "func.func @here() {\n  return\n}\n"
    )
    result = lit.run_lit_file(test)
    assert result.status == "fail"
    assert "RUN: relaxmlir-opt %s | FileCheck %s" in result.message
    assert "error: CHECK-LABEL: expected string not found in input" in result.message
    assert "func.func @here" in result.message  # FileCheck's input dump


def test_lit_requires_xfail_and_substitutions(tmp_path):
    test = tmp_path / "gpu.mlir"
    test.write_text("// REQUIRES: cuda\n// RUN: false\n")
    assert lit.run_lit_file(test, features=set()).status == "skip"
    test.write_text("// XFAIL: *\n// RUN: false\n")
    assert lit.run_lit_file(test, features=set()).status == "xfail"
    test.write_text("// XFAIL: *\n// RUN: true\n")
    assert "XPASS" in lit.run_lit_file(test, features=set()).message
    tools = {"not": "/bin/NOT", "FileCheck": "/bin/FC"}
    command = lit.substitute(
        "not tool %s | FileCheck --check-prefix=not %s 100%%", test, tmp_path, tools
    )
    assert command == f"/bin/NOT tool {test} | /bin/FC --check-prefix=not {test} 100%"


def test_malformed_input_is_located_without_traceback(tmp_path):
    (tmp_path / "bad.mlir").write_text("func.func @f() {\n  %0 = arith.constant 1 : i32 : i32\n}\n")
    for tool in ("relaxmlir-opt", "relaxmlir-run"):
        proc = run_tool(tool, "bad.mlir", cwd=tmp_path)
        assert proc.returncode != 0
        assert re.search(r"^bad\.mlir:2:30: error: ", proc.stderr, flags=re.M), proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""


def test_unknown_pass_lists_candidates(tmp_path, capsys):
    source = tmp_path / "ok.mlir"
    source.write_text("func.func @f() {\n  return\n}\n")
    assert opt_main([str(source), "--relax-verifyy"]) == 1
    err = capsys.readouterr().err
    assert "relaxmlir-opt: error: unknown pass or pipeline 'relax-verifyy'" in err
    assert "did you mean: relax-verify" in err
    assert "project passes: " in err and "relax-inline-dataflow" in err
    assert opt_main([str(source), "--relax-verify=nope=1"]) == 1
    assert "pass 'relax-verify' has no option(s) ['nope']" in capsys.readouterr().err
    assert opt_main([str(source), "--pipeline=nope"]) == 1
    assert "unknown pipeline 'nope'" in capsys.readouterr().err


def _slots(kind) -> int:
    from dialects import relax as rx

    return next(f.slots for _, f in rx.CallTIR.fields(kind) if f.variadic)


def test_pass_error_is_located(tmp_path, capsys):
    source = tmp_path / "missing.mlir"
    source.write_text(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        '  %0 = "relax.call_tir"(%x) {callee = @nowhere, operandSegmentSizes = array<i32: 1'
        + ", 0" * (_slots(Operand) - 1)
        + ">, resultSegmentSizes = array<i32: 1"
        + ", 0" * (_slots(Result) - 1)
        + ">} : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n}\n"
    )
    assert opt_main([str(source), "--relax-verify"]) == 1
    out = capsys.readouterr()
    assert f"{source}:2:8: error: 'relax.call_tir' op callee @nowhere not found" in out.err
    assert out.out == ""


def test_columns_point_into_the_input_despite_segment_sugar(tmp_path, capsys):
    # relaxmlir-opt inserts the segment sizes of relax ops before parsing: columns after the
    # insertion must still point into the user's line (MLIR reports the column after `#bad`).
    line = '  %0 = "relax.call_tir"(%x) {callee = @g} : (tensor<4xf32>) -> tensor<4xf32, #bad>'
    source = tmp_path / "alias.mlir"
    source.write_text(f"func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {{\n{line}\n}}\n")
    assert opt_main([str(source)]) == 1
    assert (
        f"{source}:2:{line.index('#bad') + 5}: error: undefined symbol alias"
        in capsys.readouterr().err
    )


@pytest.fixture(scope="module")
def mlp_inputs(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("mlp") / "inputs.npz"
    np.savez(
        path,
        x=rng.standard_normal((3, 784), dtype=np.float32),
        w0=rng.standard_normal((128, 784), dtype=np.float32) * 0.05,
        b0=rng.standard_normal((128,), dtype=np.float32),
        w1=rng.standard_normal((10, 128), dtype=np.float32) * 0.05,
        b1=rng.standard_normal((10,), dtype=np.float32),
    )
    return path


def test_run_matches_python_api(mlp_inputs):
    import relaxmlir as rm
    from relaxmlir import relax

    proc = run_tool("relaxmlir-run", str(MLP), "--inputs", str(mlp_inputs), cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr

    ex = relax.build(rm.parse(MLP.read_text()), target="llvm")
    vm = relax.VirtualMachine(ex, rm.cpu())
    with np.load(mlp_inputs) as data:
        out = vm["main"](*(data[k] for k in ("x", "w0", "b0", "w1", "b1"))).numpy()
    assert proc.stdout.strip() == repr(out)


def test_run_saves_outputs_and_reports_bad_shapes(mlp_inputs, tmp_path):
    saved = tmp_path / "out.npz"
    proc = run_tool(
        "relaxmlir-run", str(MLP), "--inputs", str(mlp_inputs), "--output", str(saved), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    with np.load(saved) as data:
        assert [data[k].shape for k in data.files] == [(3, 10)]

    with np.load(mlp_inputs) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["x"] = arrays["x"][:, :700]
    np.savez(tmp_path / "bad.npz", **arrays)
    proc = run_tool("relaxmlir-run", str(MLP), "--inputs", "bad.npz", cwd=tmp_path)
    assert proc.returncode == 1
    assert "argument 0 ('x') has shape (3, 700)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_verify_expected_severities_and_designators():
    from relaxmlir.diagnostics import Diagnostic, verify_expected

    source = (
        "op_a  // expected-warning {{slow}}\n"
        "// expected-remark @below {{fused}}\n"
        "op_b\n"
        "// expected-error @unknown {{no location}}\n"
        "// expected-note @-4 {{see op_a}}\n"
    )
    diags = [
        Diagnostic(
            "warning",
            "op is slow here",
            "t.mlir",
            1,
            1,
            notes=[Diagnostic("note", "see op_a", "t.mlir", 1, 1)],
        ),
        Diagnostic("remark", "fused 2 ops", "t.mlir", 3, 1),
        Diagnostic("error", "no location at all"),
    ]
    assert verify_expected(source, diags, "t.mlir") == []
    problems = verify_expected(
        source, diags[:1] + [Diagnostic("error", "boom", "t.mlir", 3, 2)], "t.mlir"
    )
    assert problems == [
        "t.mlir:3:2: error: unexpected error: boom",
        't.mlir:2: error: expected remark "fused" was not produced',
        't.mlir:4: error: expected error "no location" was not produced',
    ]
