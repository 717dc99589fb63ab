"""Textual sugar for relax ops: hide the segment-size attributes that IRDL needs.

IRDL-defined ops print in MLIR's generic form, and our heterogeneous variadic groups need
`operandSegmentSizes`/`resultSegmentSizes` (see irdl_dsl.Operand). They are pure bookkeeping:
`strip_segments` removes them from printed text and `add_segments` recomputes them from the
operand and result counts before parsing, so users read and write `"relax.call_tir"(%x, %w)`.
"""

from __future__ import annotations

import re

from dialects.irdl_dsl import Operand, Result
from dialects.relax import RELAX

_SEGMENTS = re.compile(r"(operand|result)SegmentSizes = array<i32[^>]*>(, )?")
_GENERIC_OP = re.compile(
    r'^(?P<indent>\s*)(?:(?P<lhs>%[^=]*?)\s*=\s*)?"(?P<name>relax\.\w+)"\((?P<operands>[^()]*)\)'
    r"(?P<rest>.*)$"
)


def strip_segments(text: str) -> str:
    out = _SEGMENTS.sub("", text)
    out = out.replace(", }", "}").replace(" {}", "")
    return out


def _result_count(lhs: str | None) -> int:
    if not lhs:
        return 0
    lhs = lhs.strip()
    match = re.fullmatch(r"%[\w.$-]+:(\d+)", lhs)
    if match:
        return int(match.group(1))
    return len([p for p in lhs.split(",") if p.strip()])


def add_segments(text: str) -> str:
    lines = []
    for line in text.splitlines():
        match = _GENERIC_OP.match(line)
        if match and "SegmentSizes" not in line:
            cls = RELAX.ops.get(match.group("name"))
            if cls is not None:
                n_operands = len([p for p in match.group("operands").split(",") if p.strip()])
                attrs = []
                for kind, key, count in (
                    (Operand, "operandSegmentSizes", n_operands),
                    (Result, "resultSegmentSizes", _result_count(match.group("lhs"))),
                ):
                    try:
                        sizes = cls.segment_sizes(kind, count)
                    except ValueError:
                        sizes = None  # leave it to the verifier to report
                    if sizes is not None:
                        attrs.append(f"{key} = {sizes}")
                if attrs:
                    rest = match.group("rest")
                    joined = ", ".join(attrs)
                    if rest.lstrip().startswith("{"):
                        brace = rest.index("{")
                        rest = rest[: brace + 1] + joined + ", " + rest[brace + 1 :]
                    else:
                        rest = f" {{{joined}}}" + rest
                    head = line[: match.start("rest")]
                    line = head + rest
        lines.append(line)
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")
