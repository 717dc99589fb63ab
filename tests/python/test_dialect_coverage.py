"""Every op of `dialects/relax.py` round-trips through text and rejects a malformed case.

One parametrized case per op, on the two lit files of tests/lit/dialects (split on `// -----`
as `relaxmlir-opt -split-input-file` splits them, line numbers kept):

* roundtrip: each chunk of relax-roundtrip.mlir whose IR uses the op is parsed as
  relaxmlir-opt parses it (IRDL verification included), verified (the MLIR verifier, then the
  project's semantic verifier `lowering.verify.verify_module`, which must not raise), printed,
  parsed, verified and printed again: both prints must be equal. Walking the modules (not
  searching the text) must find the op, with the same result types, operand types and
  attributes before and after. The generic form (the file's second RUN line) must parse back to
  the same IR.
* malformed: each chunk of relax-invalid.mlir with an `expected-error` on a line that holds the
  op must fail, at parse time (IRDL) or in `verify_module` (the stages of the file's RUN line),
  with a diagnostic that contains the expected message at the expected line; and it must produce
  exactly the chunk's expected diagnostics (`-verify-diagnostics`, `diagnostics.verify_expected`).

An op with no case fails here, naming what to add; `NO_INVALID_CASE_ALLOWLIST` exempts an op
from the malformed case, with the reason.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from mlir import ir

import relaxmlir.relax  # noqa: F401  (registers verify_module's result-type checks)
from dialects import relax as rx
from dialects.relax_syntax import strip_segments
from lowering.registry import PassError
from lowering.verify import verify_module
from relaxmlir import diagnostics as dg
from relaxmlir.scope import scope
from relaxmlir.tools.opt import split_input

LIT_DIR = Path(__file__).resolve().parents[1] / "lit" / "dialects"
ROUNDTRIP = LIT_DIR / "relax-roundtrip.mlir"
INVALID = LIT_DIR / "relax-invalid.mlir"
MARKER = "// -----"
SOURCE = "<chunk>"  # the buffer name diagnostics carry; line numbers are the lit file's

# Ops with no case in relax-invalid.mlir, each with the reason.
NO_INVALID_CASE_ALLOWLIST: dict[str, str] = {
    # (empty: every op of dialects/relax.py has a malformed case)
}

_OP = re.compile(r'"(relax\.\w+)"')
ALL_OPS = sorted(rx.RELAX.ops)


# --- lit files --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    path: Path
    text: str  # padded with newlines: line N of `text` is line N of the file

    @property
    def where(self) -> str:
        """`file:line (@func)` of the case, for messages."""
        lines = self.text.splitlines()
        first = next((i for i, line in enumerate(lines, 1) if line.strip()), 1)
        funcs = re.findall(r"func\.func (?:\w+ )*@(\w+)", self.text)
        return f"{self.path.name}:{first}" + (f" (@{funcs[-1]})" if funcs else "")

    def line(self, number: int) -> str:
        lines = self.text.splitlines()
        return lines[number - 1] if 0 < number <= len(lines) else ""


@functools.cache
def _chunks(path: Path) -> tuple[Chunk, ...]:
    return tuple(Chunk(path, text) for text in split_input(path.read_text(), MARKER))


def _ops_in_ir(chunk: Chunk) -> set[str]:
    """Relax op names on the chunk's IR lines (comments and CHECK lines left out)."""
    lines = [line for line in chunk.text.splitlines() if not line.strip().startswith("//")]
    return set(_OP.findall("\n".join(lines)))


@functools.cache  # asked once per chunk and op at collection: 3.8 s of each worker's start
def _expected_errors(chunk: Chunk) -> tuple[dg.Expected, ...]:
    """The chunk's `expected-error`s, their target lines resolved as -verify-diagnostics does."""
    expected, errors = dg.parse_expected(chunk.text)
    assert not errors, f"{chunk.where}: malformed expected-* comment: {errors}"
    return tuple(e for e in expected if e.severity == "error")


def _expected_for(chunk: Chunk, op: str) -> list[dg.Expected]:
    """The `expected-error`s of the chunk whose target line holds `op`."""
    return [e for e in _expected_errors(chunk) if e.line and op in _OP.findall(chunk.line(e.line))]


# --- parse, verify, print (as relaxmlir-opt does) ----------------------------------------------


def _show(diags: list[dg.Diagnostic], chunk_text: str) -> str:
    return "".join(dg.format_diagnostic(d, chunk_text) for d in diags).rstrip() or "(none)"


def _parse(text: str) -> tuple[ir.Module | None, list[dg.Diagnostic]]:
    """relaxmlir-opt's parse: segment sizes restored, IRDL constraints checked."""
    with scope() as ctx:
        return dg.parse(text, SOURCE, ctx)


def _verify(module: ir.Module) -> tuple[str, list[dg.Diagnostic]]:
    """The MLIR verifier, then the relax semantic verifier: ("ok", []) or (stage, diagnostics)."""
    with scope():
        try:
            module.operation.verify()
        except ir.MLIRError as exc:
            return "mlir-verify", dg.from_error(exc, SOURCE)
        try:
            verify_module(module.operation)
        except PassError as exc:
            return "relax-verify", [dg.from_location("error", str(exc), exc.location, SOURCE)]
    return "ok", []


def _diagnose(text: str) -> tuple[str, list[dg.Diagnostic]]:
    """What `relaxmlir-opt -split-input-file --relax-verify` reports for one chunk: the stage that
    failed (parse, mlir-verify, relax-verify; "ok" when none did) and its diagnostics, plus those
    that reached the context's handler (warnings, remarks)."""
    with scope() as ctx, dg.captured(ctx, SOURCE) as handled:
        module, diags = dg.parse(text, SOURCE, ctx)
        stage = "parse"
        if module is not None:
            stage, diags = _verify(module)
    return stage, list(handled) + diags


def _print(module: ir.Module, generic: bool = False) -> str:
    """relaxmlir-opt's print: segment-size bookkeeping hidden unless in the generic form."""
    with scope():
        text = module.operation.get_asm(print_generic_op_form=generic)
    return text if generic else strip_segments(text)


def _parse_verified(text: str, what: str) -> ir.Module:
    module, diags = _parse(text)
    assert module is not None, f"{what} does not parse:\n{_show(diags, text)}\n---\n{text.strip()}"
    stage, diags = _verify(module)
    assert stage == "ok", f"{what} fails {stage}:\n{_show(diags, text)}\n---\n{text.strip()}"
    return module


def _occurrences(module: ir.Module, name: str) -> list[dict]:
    """Each `name` op of the module (walk order): its result and operand types, its attributes."""
    found: list[dict] = []

    def visit(op):
        op = op.operation
        if op.name == name:
            found.append(
                {
                    "results": [str(r.type) for r in op.results],
                    "operands": [str(v.type) for v in op.operands],
                    "attributes": {key: str(op.attributes[key]) for key in op.attributes},
                }
            )
        return ir.WalkResult.ADVANCE

    with scope():
        module.operation.walk(visit)
    return found


def _diff(a: str, b: str, names: tuple[str, str]) -> str:
    return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), *names, n=1))


# --- tests ------------------------------------------------------------------------------------


def test_registry_is_not_empty():
    assert len(ALL_OPS) > len(rx.CORE_OPS), ALL_OPS


@pytest.mark.parametrize("op", ALL_OPS)
def test_op_round_trips(op):
    cases = [c for c in _chunks(ROUNDTRIP) if op in _ops_in_ir(c)]
    assert cases, f"{op}: no case in {ROUNDTRIP.name} (add one that uses it, with CHECK lines)"
    for chunk in cases:
        where = f"{op}: {chunk.where}"
        module = _parse_verified(chunk.text, f"{where}, the case")
        before = _occurrences(module, op)
        assert before, f"{where}: no {op} operation in the parsed case (only in text?)"

        printed = _print(module)
        reparsed = _parse_verified(printed, f"{where}, its printed form")
        reprinted = _print(reparsed)
        assert reprinted == printed, f"{where}: print -> parse -> print changed the IR:\n" + _diff(
            printed, reprinted, ("first print", "second print")
        )
        after = _occurrences(reparsed, op)
        assert after, f"{where}: {op} is gone from the printed IR:\n{printed}"
        assert [o["results"] for o in after] == [o["results"] for o in before], (
            f"{where}: result types of {op} changed through text: "
            f"{[o['results'] for o in before]} -> {[o['results'] for o in after]}"
        )
        assert after == before, f"{where}: {op} changed through text:\n{before}\n->\n{after}"

        # The file's second RUN line: the generic form parses back to the same IR.
        generic = _print(module, generic=True)
        from_generic = _parse_verified(generic, f"{where}, its generic form")
        printed_back = _print(from_generic)
        assert printed_back == printed, (
            f"{where}: generic print -> parse changed the IR:\n"
            + _diff(printed, printed_back, ("print", "print of the generic form"))
        )
        assert _occurrences(from_generic, op) == before, f"{where}: {op} changed via generic form"


@pytest.mark.parametrize("op", ALL_OPS)
def test_op_rejects_its_malformed_case(op):
    cases = [c for c in _chunks(INVALID) if _expected_for(c, op)]
    if op in NO_INVALID_CASE_ALLOWLIST:
        assert not cases, (
            f"{op} has a malformed case in {INVALID.name} ({cases[0].where}): "
            "remove it from NO_INVALID_CASE_ALLOWLIST"
        )
        pytest.skip(NO_INVALID_CASE_ALLOWLIST[op])
    assert cases, (
        f"{op}: no `expected-error` case in {INVALID.name} (add a chunk with "
        f"`// expected-error @+1 {{{{message}}}}` above a malformed {op}, "
        "or list the op in NO_INVALID_CASE_ALLOWLIST with the reason)"
    )
    for chunk in cases:
        _check_rejected(chunk, _expected_for(chunk, op), what=op)


def _check_rejected(chunk: Chunk, expected: list[dg.Expected], what: str) -> None:
    where = f"{what}: {chunk.where}"
    stage, diags = _diagnose(chunk.text)
    assert stage != "ok" and diags, (
        f"{where}: the malformed case is accepted:\n{chunk.text.strip()}"
    )
    errors = [d for top in diags for d in top.flatten() if d.severity == "error"]
    for item in expected:
        located = [d for d in errors if d.file == SOURCE and d.line == item.line]
        assert any(item.pattern.search(d.message) for d in located), (
            f'{where}: fails ({stage}), but not with error "{item.text}" at line {item.line} '
            f"({chunk.line(item.line).strip()}); it reports:\n{_show(diags, chunk.text)}"
        )
    # -verify-diagnostics: every expectation of the chunk met, and nothing else reported.
    problems = dg.verify_expected(chunk.text, diags, SOURCE)
    assert not problems, f"{where}: -verify-diagnostics fails ({stage}):\n" + "\n".join(problems)


def _unattributed_cases() -> list[Chunk]:
    """Malformed cases whose expected errors point at no op of dialects/relax.py."""
    return [
        c
        for c in _chunks(INVALID)
        if _expected_errors(c) and not any(_expected_for(c, op) for op in ALL_OPS)
    ]


@pytest.mark.parametrize("chunk", _unattributed_cases(), ids=lambda c: c.where)
def test_other_malformed_cases_fail_as_expected(chunk):
    """The rest of relax-invalid.mlir (e.g. an unknown relax op) fails as it says, too."""
    _check_rejected(chunk, _expected_errors(chunk), what="case")


def test_every_invalid_chunk_expects_an_error():
    """A chunk with no `expected-error` would be checked by nothing above."""
    silent = [c.where for c in _chunks(INVALID) if _ops_in_ir(c) and not _expected_errors(c)]
    assert not silent, f"chunks of {INVALID.name} with no expected-error: {silent}"


def test_allowlist_names_real_ops():
    unknown = set(NO_INVALID_CASE_ALLOWLIST) - set(ALL_OPS)
    assert not unknown, f"allowlisted ops not in dialects/relax.py: {sorted(unknown)}"
