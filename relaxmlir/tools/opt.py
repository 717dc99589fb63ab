"""`relaxmlir-opt`: the mlir-opt of relaxmlir, with the project's dialects and passes registered.

    relaxmlir-opt model.mlir --relax-verify --canonicalize
    relaxmlir-opt model.mlir --pass-pipeline='builtin.module(relax-verify,canonicalize)'
    relaxmlir-opt invalid.mlir --split-input-file --verify-diagnostics

IR goes to stdout (or `-o FILE`); diagnostics go to stderr as `file:line:col: error: ...` and
make the exit status non-zero. Passes run in one PassManager built by `lowering.registry`, so
project passes (Python) and upstream passes (by their mlir-opt names) mix freely.
"""

from __future__ import annotations

import difflib
import io
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from typing import Optional

from mlir import ir

import dialects
import relaxmlir.relax  # noqa: F401  (registers the passes and op checks of the compiler side)
from dialects.relax_syntax import strip_segments
from lowering import PASSES, PassError, PipelineError
from lowering.pipelines import get_pipeline, pipeline_elements, pipeline_names
from lowering.registry import build_pass_manager
from relaxmlir.tools import ToolError, read_source, tool_path
from relaxmlir import diagnostics as dg

USAGE = """\
usage: relaxmlir-opt [options] [input.mlir | -]

  -o FILE                               write the output IR to FILE (default: stdout)
  --pass-pipeline='builtin.module(...)' run a textual pipeline (project and upstream passes)
  --pipeline=NAME                       run a named pipeline (see --list-passes)
  --<pass>[=opt=v,...] / --<pass>{...}  run one pass (project or upstream), in flag order
  --split-input-file[=MARKER]           process chunks separated by `// -----` separately
  --verify-diagnostics                  check `// expected-error @+N {{...}}` comments
  --mlir-print-ir-after-all             print the IR after every pass (to stderr)
  --mlir-print-ir-before-all            print the IR before every pass (to stderr)
  --mlir-print-op-generic               print ops in the generic form
  --mlir-print-debuginfo                print locations
  --mlir-timing                         report the time of each pass (to stderr)
  --mlir-disable-threading              run passes on one thread
  --mlir-elide-elementsattrs-if-larger=N  elide constants with more than N elements
  --allow-unregistered-dialect          accept ops of unknown dialects
  --dump-pass-pipeline                  print the resolved pipeline (to stderr)
  --list-passes                         list the project's passes and named pipelines
  -h, --help                            show this message
"""

# Driver flags; any other `--name` is a pass. Flags with a value, then on/off switches.
_VALUE_FLAGS = {"o", "pass-pipeline", "pipeline", "mlir-elide-elementsattrs-if-larger"}
_SWITCHES = {
    "split-input-file": "split_marker",  # optional value: the marker
    "verify-diagnostics": "verify_diagnostics",  # optional value: only "all"
    "mlir-print-ir-after-all": "print_after_all",
    "mlir-print-ir-before-all": "print_before_all",
    "mlir-print-op-generic": "generic",
    "mlir-print-debuginfo": "debuginfo",
    "mlir-timing": "timing",
    "mlir-disable-threading": "disable_threading",
    "allow-unregistered-dialect": "allow_unregistered",
    "dump-pass-pipeline": "dump_pipeline",
    "list-passes": "list_passes",
    "help": "help",
    "h": "help",
}
_SPLIT_MARKER = "// -----"
_UNKNOWN_PASS = re.compile(r"'([^']+)' does not refer to a registered pass or pass pipeline")


@dataclass
class Options:
    input: str = "-"
    output: Optional[str] = None
    elements: list[str] = field(default_factory=list)  # pipeline elements, in flag order
    split_marker: Optional[str] = None
    verify_diagnostics: bool = False
    print_after_all: bool = False
    print_before_all: bool = False
    generic: bool = False
    debuginfo: bool = False
    timing: bool = False
    disable_threading: bool = False
    elide_limit: Optional[int] = None
    allow_unregistered: bool = False
    dump_pipeline: bool = False
    list_passes: bool = False
    help: bool = False

    @property
    def pipeline(self) -> str:
        return f"builtin.module({','.join(e for e in self.elements if e)})"


def _strip_anchor(text: str) -> str:
    text = text.strip()
    if not (text.startswith("builtin.module(") and text.endswith(")")):
        raise ToolError(f"expected --pass-pipeline='builtin.module(...)', got '{text}'")
    return text[len("builtin.module(") : -1]


def _named_pipeline(name: str) -> str:
    """The elements of `lowering.pipelines.get_pipeline(name)` as pipeline text."""
    try:
        return _strip_anchor(get_pipeline(name))
    except (KeyError, ValueError) as exc:
        raise ToolError(str(exc).strip("'\"")) from None


def _pass_element(flag: str, value: Optional[str]) -> str:
    """`--name`, `--name=a=1,b=2` or `--name{a=1}` -> the pipeline element `name{...}`."""
    if value is None or "{" in flag:
        return flag
    return f"{flag}{{{value}}}"


def parse_args(argv: list[str]) -> Options:
    opts = Options()
    positional: list[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        if arg == "--":
            positional += args
            break
        body = arg.lstrip("-")
        name, eq, value = body.partition("=")
        if "{" in name:  # `--pass{opt=v}`: braces may contain '='
            name, value, eq = body, None, ""
        if name in _VALUE_FLAGS:
            if not eq:
                if not args:
                    raise ToolError(f"flag '{arg}' needs a value")
                value = args.pop(0)
            _apply_value_flag(opts, name, value)
        elif name in _SWITCHES:
            _apply_switch(opts, name, value if eq else None)
        elif name:
            opts.elements.append(_pass_element(name, value if eq else None))
        else:
            raise ToolError(f"bad flag '{arg}'")
    if len(positional) > 1:
        raise ToolError(f"expected one input file, got {len(positional)}: {' '.join(positional)}")
    if positional:
        opts.input = positional[0]
    return opts


def _apply_value_flag(opts: Options, name: str, value: str) -> None:
    if name == "o":
        opts.output = value
    elif name == "pass-pipeline":
        opts.elements.append(_strip_anchor(value))
    elif name == "pipeline":
        opts.elements.append(_named_pipeline(value))
    else:  # mlir-elide-elementsattrs-if-larger
        try:
            opts.elide_limit = int(value)
        except ValueError:
            raise ToolError(f"--{name} expects an integer, got '{value}'") from None


def _apply_switch(opts: Options, name: str, value: Optional[str]) -> None:
    if name == "split-input-file":
        opts.split_marker = value or _SPLIT_MARKER
    elif value is not None and not (name == "verify-diagnostics" and value == "all"):
        raise ToolError(f"flag '--{name}' takes no value '{value}'")
    else:
        setattr(opts, _SWITCHES[name], True)


# --- pass pipeline ----------------------------------------------------------------------------


def _upstream_pass_names() -> list[str]:
    """Pass and pipeline names of upstream MLIR, read from `mlir-opt --help` (error path only)."""
    mlir_opt = tool_path("mlir-opt")
    if mlir_opt is None:
        return []
    try:
        text = subprocess.run(
            [mlir_opt, "--help"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    section = text.split("Compiler passes to run", 1)[-1]
    return re.findall(r"^ {6}--([\w-]+)", section, flags=re.M)


def unknown_pass_message(name: str) -> str:
    ours = sorted(PASSES)
    close = difflib.get_close_matches(name, ours + pipeline_names() + _upstream_pass_names(), 5)
    text = f"unknown pass or pipeline '{name}'"
    if close:
        text += f"; did you mean: {', '.join(close)}?"
    text += f"\nproject passes: {', '.join(ours)}"
    text += f"\nnamed pipelines (--pipeline=NAME): {', '.join(pipeline_names())}"
    return text + "\nupstream passes: see `mlir-opt --help`"


def build(pipeline: str, ctx):
    """`lowering.registry.build_pass_manager`, with command-line errors as ToolError."""
    try:
        return build_pass_manager(pipeline, ctx)
    except (PipelineError, PassError) as exc:  # PassError: a factory rejected an option value
        raise ToolError(str(exc)) from None
    except ValueError as exc:  # the upstream pipeline parser
        match = _UNKNOWN_PASS.search(str(exc))
        if match:
            raise ToolError(unknown_pass_message(match.group(1))) from None
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise ToolError(f"invalid pass pipeline: {'; '.join(lines)}") from None
    except TypeError as exc:  # a project pass factory rejected its options
        raise ToolError(f"invalid pass options: {exc}") from None


# --- one input chunk --------------------------------------------------------------------------


def split_input(text: str, marker: Optional[str]) -> list[str]:
    """Chunks between marker lines, padded with newlines to keep the file's line numbers."""
    if marker is None:
        return [text]
    chunks, start, lines = [], 0, text.splitlines(keepends=True)
    for i, line in enumerate(lines + [marker]):
        if line.strip().startswith(marker):
            chunks.append("\n" * start + "".join(lines[start:i]))
            start = i + 1
    return chunks


def _pass_failure(runner, source_name: str):
    """A Diagnostic for the exception a project pass raised, or None for an internal error."""
    exc = runner.error
    if isinstance(exc, PassError):
        return dg.from_location("error", str(exc), exc.location, source_name)
    if isinstance(exc, (PipelineError, ValueError, TypeError, NotImplementedError)):
        return dg.Diagnostic("error", f"pass '{runner.name}' failed: {exc}")
    return None


def process_chunk(chunk: str, opts: Options, source_name: str, ctx) -> tuple[bool, str]:
    """Parse, run the pipeline, print. Returns (success, IR text or "")."""
    errors: list[dg.Diagnostic] = []
    output = ""
    # Python passes build IR with the context and a location taken from the environment.
    with ctx, ir.Location.unknown(ctx), dg.captured(ctx, source_name) as handled:
        module, errors = dg.parse(chunk, source_name, ctx)
        if module is not None:
            if opts.debuginfo:
                _name_source(module, source_name)
            errors = _run_passes(module, opts, source_name, ctx)
            if not errors:
                buf = io.StringIO()
                module.operation.print(
                    file=buf,
                    large_elements_limit=opts.elide_limit,
                    print_generic_op_form=opts.generic,
                    enable_debug_info=opts.debuginfo,
                )
                # Segment sizes of relax's variadic ops are bookkeeping: hidden on print.
                output = buf.getvalue() if opts.generic else strip_segments(buf.getvalue())
    diags = handled + errors
    if opts.verify_diagnostics:
        problems = dg.verify_expected(chunk, diags, source_name)
        for problem in problems:
            print(problem, file=sys.stderr)
        return not problems, output
    for diag in diags:
        sys.stderr.write(dg.format_diagnostic(diag, chunk))
    return not errors, output


def _name_source(module, source_name: str) -> None:
    """Text parsed from a string is located in file "-": show the real name in printed locations."""

    def renamed(loc):
        if loc.is_a_file() and loc.filename == "-":
            return ir.Location.file(source_name, loc.start_line, loc.start_col)
        return None

    def visit(op):
        op = op.operation
        new = renamed(op.location)
        if new is not None:
            op.location = new
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    new = renamed(arg.location)
                    if new is not None:
                        arg.set_location(new)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


def _run_passes(module, opts: Options, source_name: str, ctx) -> list:
    if not opts.elements:
        return []
    pm, runners = build(opts.pipeline, ctx)
    if opts.print_after_all or opts.print_before_all:
        pm.enable_ir_printing(
            print_before_all=opts.print_before_all,
            print_after_all=opts.print_after_all,
            large_elements_limit=opts.elide_limit,
            print_generic_op_form=opts.generic,
        )
    if opts.timing:
        pm.enable_timing()
    sys.stdout.flush()
    sys.stderr.flush()  # MLIR prints IR dumps from C++ to the same stderr
    try:
        pm.run(module.operation)
    except ir.MLIRError as exc:
        failed = [r for r in runners if r.error is not None]
        if not failed:
            return dg.from_error(exc, source_name)
        diag = _pass_failure(failed[0], source_name)
        if diag is None:
            raise InternalError(failed[0]) from None
        return [d for d in dg.from_error(exc, source_name) if d.file is not None] + [diag]
    return []


class InternalError(Exception):
    """A project pass crashed (a bug, not a user error): reported with its traceback."""

    def __init__(self, runner):
        super().__init__(f"pass '{runner.name}' crashed")
        self.runner = runner


# --- main -------------------------------------------------------------------------------------


def list_passes() -> str:
    names = pipeline_names()
    width = max([len(n) for n in list(PASSES) + names] + [10]) + 2
    lines = ["Project passes (--<name>, or inside --pass-pipeline):"]
    for name in sorted(PASSES):
        lines.append(f"  {name:<{width}}{PASSES[name].summary}")
        for option, help_text in PASSES[name].options.items():
            lines.append(f"  {'':<{width}}  {option}=...: {help_text}")
    lines.append("Named pipelines (--pipeline=<name>):")
    for name in names:
        lines.append(f"  {name:<{width}}{_pipeline_summary(pipeline_elements(name))}")
    lines.append("Upstream MLIR passes are accepted by their mlir-opt names (mlir-opt --help).")
    return "\n".join(lines) + "\n"


def _pipeline_summary(elements: list[str]) -> str:
    """The stage names of a pipeline, options elided: `a,b{...},c`."""
    return ",".join(re.sub(r"\{.*\}", "{...}", element) for element in elements)


def run(opts: Options) -> int:
    text, source_name = read_source(opts.input)
    ctx = dialects.get_context()
    if opts.elements:
        pm, _ = build(opts.pipeline, ctx)  # validate the pipeline once, before any chunk
        if opts.dump_pipeline:
            print(pm, file=sys.stderr)
    if opts.disable_threading:
        ctx.enable_multithreading(False)
    ctx.allow_unregistered_dialects = opts.allow_unregistered
    results = [
        process_chunk(chunk, opts, source_name, ctx)
        for chunk in split_input(text, opts.split_marker)
    ]
    output = f"{_SPLIT_MARKER}\n".join(out for _, out in results)
    if opts.output and opts.output != "-":
        try:
            with open(opts.output, "w", encoding="utf-8") as f:
                f.write(output)
        except OSError as exc:
            raise ToolError(f"cannot write output file '{opts.output}': {exc.strerror}") from None
    else:
        sys.stdout.write(output)
    return 0 if all(ok for ok, _ in results) else 1


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_args(argv)
        if opts.help:
            sys.stdout.write(USAGE)
            return 0
        if opts.list_passes:
            sys.stdout.write(list_passes())
            return 0
        return run(opts)
    except ToolError as exc:
        print(f"relaxmlir-opt: error: {exc}", file=sys.stderr)
        return 1
    except InternalError as exc:
        print(f"relaxmlir-opt: internal error: {exc} (a bug in the pass):", file=sys.stderr)
        error = exc.runner.error
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
