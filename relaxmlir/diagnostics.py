"""MLIR diagnostics for the command-line tools: capture, print as `file:line:col`, and verify.

Diagnostics reach a tool three ways: `ir.MLIRError` (parse and verifier errors, upstream pass
failures), a project pass's `PassError` (located at the op it blames), and the context's
diagnostic handler (warnings and remarks, which MLIRError does not collect). All three become
`Diagnostic`s here. `verify_expected` implements `--verify-diagnostics` as `mlir-opt` does:
`// expected-error @+1 {{substring}}` comments against the diagnostics a chunk produced.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from mlir import ir

from dialects.relax_syntax import add_segments

# The op-on-diagnostic note MLIR attaches to verifier errors; mlir-opt turns it off under
# --verify-diagnostics, which the Python bindings cannot, so it is dropped there instead.
_OP_NOTE = "see current operation:"

_SEVERITY = {
    ir.DiagnosticSeverity.ERROR: "error",
    ir.DiagnosticSeverity.WARNING: "warning",
    ir.DiagnosticSeverity.NOTE: "note",
    ir.DiagnosticSeverity.REMARK: "remark",
}


@dataclass
class Diagnostic:
    severity: str  # error | warning | note | remark
    message: str
    file: str | None = None  # None: unknown location
    line: int = 0
    col: int = 0
    notes: list[Diagnostic] = field(default_factory=list)

    def flatten(self) -> list[Diagnostic]:
        return [self] + [n for note in self.notes for n in note.flatten()]


def _file_loc(loc: ir.Location) -> ir.Location | None:
    """The first file:line:col inside `loc` (name, callsite and fused locations unwrapped)."""
    if loc.is_a_file():
        return loc
    if loc.is_a_name():
        return _file_loc(loc.child_loc)
    if loc.is_a_callsite():
        return _file_loc(loc.callee) or _file_loc(loc.caller)
    if loc.is_a_fused():
        for sub in loc.locations:
            found = _file_loc(sub)
            if found is not None:
                return found
    return None


def from_location(severity: str, message: str, loc: ir.Location | None, source_name: str):
    """A Diagnostic at `loc`; buffers parsed from strings are named "-", shown as `source_name`."""
    found = _file_loc(loc) if loc is not None else None
    if found is None:
        return Diagnostic(severity, message)
    name = source_name if found.filename in ("-", "") else found.filename
    return Diagnostic(severity, message, name, found.start_line, found.start_col)


def from_mlir(diag, source_name: str) -> Diagnostic:
    """Convert an `ir.Diagnostic` / `ir.DiagnosticInfo` (with its notes)."""
    out = from_location(_SEVERITY[diag.severity], diag.message, diag.location, source_name)
    out.notes = [from_mlir(note, source_name) for note in diag.notes]
    return out


def from_error(error: ir.MLIRError, source_name: str) -> list[Diagnostic]:
    diags = [from_mlir(d, source_name) for d in error.error_diagnostics]
    if not diags:  # e.g. a pass signalled failure without emitting anything
        diags = [Diagnostic("error", str(error).strip())]
    return diags


@contextmanager
def captured(ctx: ir.Context, source_name: str) -> Iterator[list[Diagnostic]]:
    """Collect the diagnostics that reach `ctx`'s handler (those MLIRError does not carry)."""
    diags: list[Diagnostic] = []

    def handler(diag) -> bool:
        diags.append(from_mlir(diag, source_name))
        return True

    handle = ctx.attach_diagnostic_handler(handler)
    try:
        yield diags
    finally:
        handle.detach()


def parse(text: str, source_name: str, ctx: ir.Context):
    """Parse as `relaxmlir.parse` does: (module, []) or (None, diagnostics located in `text`).

    Relax ops may omit their segment sizes, which are inserted before parsing; the columns of
    parse errors are mapped back into the user's lines.
    """
    segment_errors: list = []
    with ctx:
        rewritten = add_segments(text, segment_errors)
    try:
        return ir.Module.parse(rewritten, context=ctx), []
    except ir.MLIRError as exc:
        if segment_errors:  # clearer than IRDL's "'operandSegmentSizes' attribute is expected"
            return None, [Diagnostic("error", m, source_name, n, 1) for n, m in segment_errors]
        diags = from_error(exc, source_name)
        remap_columns(diags, text, rewritten, source_name)
        return None, diags


def remap_columns(diags: list[Diagnostic], original: str, rewritten: str, source_name: str):
    """Point columns back into `original` where a textual rewrite inserted text on a line."""
    old_lines, new_lines = original.splitlines(), rewritten.splitlines()
    for diag in (d for top in diags for d in top.flatten()):
        if diag.file != source_name or not 0 < diag.line <= min(len(old_lines), len(new_lines)):
            continue
        old, new = old_lines[diag.line - 1], new_lines[diag.line - 1]
        if old != new:
            diag.col = _original_index(old, new, diag.col - 1) + 1


def _original_index(old: str, new: str, index: int) -> int:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if j1 <= index < j2:
            return i1 + (index - j1) if tag == "equal" else i1
    return len(old)


def format_diagnostic(diag: Diagnostic, source: str | None = None) -> str:
    """`file:line:col: error: message`, the source line and a caret, then the notes."""
    if diag.file is None:
        text = f"{diag.severity}: {diag.message}\n"
    else:
        text = f"{diag.file}:{diag.line}:{diag.col}: {diag.severity}: {diag.message}\n"
        lines = source.splitlines() if source is not None else []
        if 0 < diag.line <= len(lines):
            src = lines[diag.line - 1]
            text += f"{src}\n{' ' * max(diag.col - 1, 0)}^\n"
    return text + "".join(format_diagnostic(note, source) for note in diag.notes)


# --- --verify-diagnostics ---------------------------------------------------------------------

_EXPECTED = re.compile(
    r"expected-(?P<kind>error|warning|note|remark)(?P<re>-re)?\s*"
    r"(?:@(?P<where>[+-]\d+|above|below|unknown))?\s*\{\{(?P<text>.*)\}\}\s*$"
)
_DESIGNATOR = re.compile(r"expected-(error|warning|note|remark)")


@dataclass
class Expected:
    severity: str
    line: int | None  # None: `@unknown`
    pattern: re.Pattern
    text: str
    comment_line: int
    matched: bool = False


def _pattern(text: str, is_regex: bool) -> re.Pattern:
    """Literal substring, or for `-re` literal text mixed with `{{regex}}` parts."""
    if not is_regex:
        return re.compile(re.escape(text))
    parts = re.split(r"\{\{(.*?)\}\}", text)
    return re.compile("".join(p if i % 2 else re.escape(p) for i, p in enumerate(parts)))


def parse_expected(source: str) -> tuple[list[Expected], list[str]]:
    """Expectations in `source` (line numbers as in the file) and errors in their syntax.

    As in mlir-opt, `@above` / `@below` name the nearest line above / below that holds no
    expected-* designator, and `@+N` / `@-N` count from the comment's own line.
    """
    expected: list[Expected] = []
    errors: list[str] = []
    pending_below: list[Expected] = []
    last_plain_line: int | None = None
    for number, line in enumerate(source.splitlines(), start=1):
        match = _EXPECTED.search(line)
        if match is None:
            if _DESIGNATOR.search(line):
                errors.append(f"{number}: error: malformed expected-* directive (want {{{{...}}}})")
            for item in pending_below:
                item.line = number
            pending_below.clear()
            last_plain_line = number
            continue
        where = match["where"] or "+0"
        if where == "above" and last_plain_line is None:
            errors.append(f"{number}: error: @above has no line above it")
            continue
        target = {"unknown": None, "above": last_plain_line, "below": number}.get(where)
        if where[0] in "+-":
            target = number + int(where)
        item = Expected(
            match["kind"], target, _pattern(match["text"], bool(match["re"])), match["text"], number
        )
        if where == "below":
            pending_below.append(item)
        expected.append(item)
    return expected, errors


def verify_expected(source: str, diags: list[Diagnostic], source_name: str) -> list[str]:
    """mlir-opt's `-verify-diagnostics`: the returned error lines are empty when all matched."""
    expected, errors = parse_expected(source)
    problems = [f"{source_name}:{e}" for e in errors]  # "LINE: message" -> located
    for diag in (d for top in diags for d in top.flatten()):
        if diag.severity == "note" and diag.message.startswith(_OP_NOTE):
            continue
        # None: an unknown location (matched by `@unknown`); -1: another file (never matched).
        line = None if diag.file is None else diag.line if diag.file == source_name else -1
        for item in expected:
            if (
                not item.matched
                and item.severity == diag.severity
                and item.line == line
                and item.pattern.search(diag.message)
            ):
                item.matched = True
                break
        else:
            where = f"{source_name}:{diag.line}:{diag.col}" if line is not None else source_name
            problems.append(f"{where}: error: unexpected {diag.severity}: {diag.message}")
    for item in expected:
        if not item.matched:
            problems.append(
                f"{source_name}:{item.comment_line}: error: expected {item.severity} "
                f'"{item.text}" was not produced'
            )
    return problems
