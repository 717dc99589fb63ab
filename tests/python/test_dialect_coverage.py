"""Every op of `dialects/relax.py` has a roundtrip case and a malformed case (STYLE rule 6)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dialects import relax as rx

LIT_DIR = Path(__file__).resolve().parents[1] / "lit" / "dialects"
ROUNDTRIP = LIT_DIR / "relax-roundtrip.mlir"
INVALID = LIT_DIR / "relax-invalid.mlir"

# Ops with no case in relax-invalid.mlir, each with the reason.
NO_INVALID_CASE_ALLOWLIST: dict[str, str] = {
    # (empty: every op of dialects/relax.py has a malformed case)
}

_OP = re.compile(r'"(relax\.\w+)"')
_EXPECTED = re.compile(r"expected-error @\+(\d+)")


def _roundtrip_ops() -> tuple[set[str], set[str]]:
    """(ops written in the IR of the roundtrip file, ops named in its CHECK lines)."""
    in_ir, checked = set(), set()
    for line in ROUNDTRIP.read_text().splitlines():
        text = line.strip()
        if text.startswith("// CHECK"):
            checked.update(_OP.findall(text))
        elif not text.startswith("//"):
            in_ir.update(_OP.findall(text))
    return in_ir, checked


def _invalid_ops() -> set[str]:
    """Ops on the line an `expected-error @+N` points at."""
    lines = INVALID.read_text().splitlines()
    out = set()
    for i, line in enumerate(lines):
        match = _EXPECTED.search(line)
        if match and i + int(match.group(1)) < len(lines):
            out.update(_OP.findall(lines[i + int(match.group(1))]))
    return out


ALL_OPS = sorted(rx.RELAX.ops)


def test_registry_is_not_empty():
    assert len(ALL_OPS) > len(rx.CORE_OPS), ALL_OPS


@pytest.mark.parametrize("op", ALL_OPS)
def test_op_has_roundtrip_case(op):
    in_ir, checked = _roundtrip_ops()
    assert op in in_ir, f"{op}: no case in {ROUNDTRIP.name} (add one to the IR there)"
    assert op in checked, f"{op}: written in {ROUNDTRIP.name} but no CHECK line names it"


@pytest.mark.parametrize("op", ALL_OPS)
def test_op_has_invalid_case(op):
    if op in NO_INVALID_CASE_ALLOWLIST:
        pytest.skip(NO_INVALID_CASE_ALLOWLIST[op])
    assert op in _invalid_ops(), (
        f"{op}: no `expected-error` case in {INVALID.name} "
        "(add one, or list the op in NO_INVALID_CASE_ALLOWLIST with the reason)"
    )


def test_allowlist_names_real_ops():
    unknown = set(NO_INVALID_CASE_ALLOWLIST) - set(ALL_OPS)
    assert not unknown, f"allowlisted ops not in dialects/relax.py: {sorted(unknown)}"
