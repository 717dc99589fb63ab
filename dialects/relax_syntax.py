"""Textual sugar for relax ops: hide the segment-size attributes that IRDL needs.

IRDL-defined ops print in MLIR's generic form, and our heterogeneous variadic groups need
`operandSegmentSizes`/`resultSegmentSizes` (see irdl_dsl.Operand). They are pure bookkeeping:
`strip_segments` removes them from printed text and `add_segments` recomputes them from the
op's functional type (runs of equal operand and result types) before parsing, so users read and
write `"relax.call_tir"(%x, %w)`.
"""

from __future__ import annotations

import functools
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


def split_types(text: str) -> list[str]:
    """`tensor<2xf32>, tensor<?x3xf32>` -> the two types (commas inside <>, (), [] kept)."""
    out, depth, current = [], 0, ""
    for ch in text:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        out.append(current.strip())
    return out


_SIGNATURE = re.compile(
    r":\s*\((?P<ins>[^()]*(?:\([^()]*\)[^()]*)*)\)\s*->\s*(?P<outs>.*?)\s*(?:loc\(.*)?$"
)


def _signature(rest: str) -> tuple[list[str], list[str]] | None:
    """Operand and result types of a generic op's trailing `: (...) -> ...`."""
    match = None
    for match in _SIGNATURE.finditer(rest):
        pass
    if match is None:
        return None
    outs = match.group("outs").strip()
    if outs.startswith("(") and outs.endswith(")"):
        outs = outs[1:-1]
    return split_types(match.group("ins")), split_types(outs)


@functools.lru_cache(maxsize=512)
def _segments_text(sizes: tuple[int, ...]) -> str:
    """`array<i32: ...>` as MLIR prints a DenseI32ArrayAttr; text, so no context is needed.
    Cached: the list is mostly unused slots, and few distinct lists occur in a module."""
    return f"array<i32: {', '.join(map(str, sizes))}>" if sizes else "array<i32>"


def add_segments(text: str, errors: list | None = None) -> str:
    """Insert the segment sizes of relax ops that omit them, from the runs of equal types in the
    op's functional type (as `Op.create` computes them).

    An op with more runs than its slots is left as written, so the parse fails on it; when
    `errors` is given, (line number, message naming the op, runs and cap) is appended to it for
    the caller to report instead of IRDL's "attribute is expected" message."""
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        match = _GENERIC_OP.match(line)
        if match and "SegmentSizes" not in line:
            cls = RELAX.ops.get(match.group("name"))
            signature = _signature(match.group("rest")) if cls is not None else None
            if signature is not None:
                attrs = []
                for kind, key, types in (
                    (Operand, "operandSegmentSizes", signature[0]),
                    (Result, "resultSegmentSizes", signature[1]),
                ):
                    try:
                        sizes = cls.segment_list(kind, types)
                    except ValueError as exc:
                        sizes = None  # the parse reports the op; `errors` says why
                        if errors is not None:
                            errors.append((number, str(exc)))
                    if sizes is not None:
                        attrs.append(f"{key} = {_segments_text(tuple(sizes))}")
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
