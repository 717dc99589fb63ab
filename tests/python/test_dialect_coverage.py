"""Every op of `dialects/relax.py` round-trips through text and rejects a malformed case.

For each op, the cases of tests/lit/dialects/relax-roundtrip.mlir that use it are parsed and
verified (MLIR + relax-verify), printed, parsed again and printed again: both prints must agree
and still hold the op with the same result types. The cases of relax-invalid.mlir whose
`expected-error` points at the op are run as `relaxmlir-opt -verify-diagnostics --relax-verify`
runs them, chunk by chunk: each must produce exactly its expected diagnostics (so the op's case
fails for the reason it states). An op with no case fails here, naming what to add.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mlir import ir

import dialects
from dialects import relax as rx
from relaxmlir.tools.opt import parse_args, process_chunk, split_input

LIT_DIR = Path(__file__).resolve().parents[1] / "lit" / "dialects"
ROUNDTRIP = LIT_DIR / "relax-roundtrip.mlir"
INVALID = LIT_DIR / "relax-invalid.mlir"
MARKER = "// -----"

# Ops with no case in relax-invalid.mlir, each with the reason.
NO_INVALID_CASE_ALLOWLIST: dict[str, str] = {
    # (empty: every op of dialects/relax.py has a malformed case)
}

_OP = re.compile(r'"(relax\.\w+)"')
_EXPECTED = re.compile(r"expected-error @\+(\d+)")
ALL_OPS = sorted(rx.RELAX.ops)


def _chunks(path: Path) -> list[str]:
    """The file's `// -----` chunks, padded to keep its line numbers (as relaxmlir-opt does)."""
    return split_input(path.read_text(), MARKER)


def _ops_in_ir(chunk: str) -> set[str]:
    lines = [line for line in chunk.splitlines() if not line.strip().startswith("//")]
    return set(_OP.findall("\n".join(lines)))


def _expected_ops(chunk: str) -> set[str]:
    """Ops on the lines that the chunk's `expected-error @+N` comments point at."""
    lines = chunk.splitlines()
    out = set()
    for i, line in enumerate(lines):
        match = _EXPECTED.search(line)
        if match and i + int(match.group(1)) < len(lines):
            out.update(_OP.findall(lines[i + int(match.group(1))]))
    return out


def _run(chunk: str, argv: list[str]) -> tuple[bool, str]:
    opts = parse_args(argv + ["-"])
    return process_chunk(chunk, opts, "<chunk>", dialects.get_context())


def _op_results(text: str, name: str) -> list[list[str]]:
    """Result types of every `name` op in `text` (found by walking the parsed module)."""
    ok, _ = _run(text, [])
    assert ok, f"printed text does not parse again:\n{text}"
    found: list[list[str]] = []
    from dialects.relax_syntax import add_segments

    with dialects.get_context():
        module = ir.Module.parse(add_segments(text))

        def visit(op):
            if op.operation.name == name:
                found.append([str(r.type) for r in op.operation.results])
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return found


def test_registry_is_not_empty():
    assert len(ALL_OPS) > len(rx.CORE_OPS), ALL_OPS


@pytest.mark.parametrize("op", ALL_OPS)
def test_op_round_trips(op):
    cases = [c for c in _chunks(ROUNDTRIP) if op in _ops_in_ir(c)]
    assert cases, f"{op}: no case in {ROUNDTRIP.name} (add one to the IR there)"
    for chunk in cases:
        ok, printed = _run(chunk, ["--relax-verify"])
        assert ok, f"{op}: its roundtrip case does not verify:\n{chunk.strip()}"
        ok, reprinted = _run(printed, ["--relax-verify"])
        assert ok and reprinted == printed, f"{op}: print -> parse -> print changed the IR"
        before = _op_results(chunk, op)
        assert before, f"{op}: not found as an operation in its case"
        assert _op_results(printed, op) == before, f"{op}: result types changed through text"


@pytest.mark.parametrize("op", ALL_OPS)
def test_op_rejects_its_malformed_case(op):
    if op in NO_INVALID_CASE_ALLOWLIST:
        pytest.skip(NO_INVALID_CASE_ALLOWLIST[op])
    cases = [c for c in _chunks(INVALID) if op in _expected_ops(c)]
    assert cases, (
        f"{op}: no `expected-error` case in {INVALID.name} "
        "(add one, or list the op in NO_INVALID_CASE_ALLOWLIST with the reason)"
    )
    for chunk in cases:
        ok, _ = _run(chunk, ["--relax-verify"])
        assert not ok, f"{op}: its malformed case is accepted:\n{chunk.strip()}"
        ok, _ = _run(chunk, ["-verify-diagnostics", "--relax-verify"])
        assert ok, f"{op}: its malformed case fails, but not with the expected diagnostics"


def test_allowlist_names_real_ops():
    unknown = set(NO_INVALID_CASE_ALLOWLIST) - set(ALL_OPS)
    assert not unknown, f"allowlisted ops not in dialects/relax.py: {sorted(unknown)}"

