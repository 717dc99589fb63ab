"""`relaxmlir-run`: compile a .mlir module for the CPU and run one of its functions (mlir-runner).

    relaxmlir-run mlp.mlir --random --dim n=8 --seed 0
    relaxmlir-run mlp.mlir --inputs in.npz --output out.npz --time 100

Inputs come from an .npz (matched to parameters by name, or by position for `np.savez(f, a, b)`)
or are random arrays of the declared shapes; outputs are printed as numpy reprs or saved to an
.npz. Compilation goes through the user API: `relaxmlir.parse` and `relaxmlir.relax.build`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from typing import Optional

import numpy as np

import dialects
import relaxmlir
from dialects import shape as sh
from relaxmlir.relax.vm_build import BuildError
from relaxmlir.tools import ToolError, read_source
from relaxmlir import diagnostics as dg


class CompileError(ToolError):
    """MLIR diagnostics (`file:line:col: error: ...`): printed as they are, exit status 1."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="relaxmlir-run",
        description="Compile a relax .mlir module for the CPU and run one of its functions.",
    )
    p.add_argument("input", help="the .mlir file, or - for stdin")
    p.add_argument("--entry", default="main", help="function to run (default: main)")
    p.add_argument("--target", default="llvm", help="build target (default: llvm, the host CPU)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--inputs", metavar="IN.npz", help="arguments, by parameter name or order")
    source.add_argument("--random", action="store_true", help="random arguments of the shapes")
    p.add_argument("--seed", type=int, default=0, help="seed of --random (default: 0)")
    p.add_argument(
        "--dim", action="append", default=[], metavar="NAME=SIZE", help="symbolic dim for --random"
    )
    p.add_argument("--output", metavar="OUT.npz", help="save the results instead of printing")
    p.add_argument(
        "--time", type=int, default=0, metavar="N", help="report median latency of N runs"
    )
    p.add_argument("--signature", action="store_true", help="print the entry's signature and exit")
    return p


def _failure(message: str, source_name: str) -> ToolError:
    """A ToolError, or a CompileError when the message is a located MLIR diagnostic.

    MLIR names buffers parsed from strings "-" (`loc("-":L:C)`): shown as `file:L:C`.
    """
    message = re.sub(r'loc\("-":(\d+):(\d+)\)', rf"{source_name}:\1:\2", message)
    located = re.match(rf"{re.escape(source_name)}:\d+:\d+: error: ", message)
    return CompileError(message) if located else ToolError(message)


def compile_module(text: str, source_name: str, target: str):
    """Parse and build through the user API; located diagnostics on failure."""
    try:
        mod = relaxmlir.parse(text)
    except relaxmlir.ParseError as exc:
        # The same parse again, for diagnostics as relaxmlir-opt prints them (line and caret).
        _, diags = dg.parse(text, source_name, dialects.get_context())
        if not diags:
            raise _failure(str(exc), source_name) from None
        raise CompileError("".join(dg.format_diagnostic(d, text) for d in diags).rstrip()) from None
    try:
        return relaxmlir.relax.build(mod, target=target)
    except (BuildError, ValueError, TypeError, NotImplementedError) as exc:
        raise _failure(str(exc), source_name) from None


def parse_dims(items: list[str]) -> dict[str, int]:
    dims = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip().lstrip("-").isdigit():
            raise ToolError(f"--dim expects NAME=SIZE, got '{item}'")
        dims[name.strip()] = int(value)
    return dims


def random_inputs(params, dims: dict[str, int], seed: int) -> list[np.ndarray]:
    """Arrays of the declared shapes and dtypes; symbolic dims come from `dims`."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in params:
        missing = sorted({s for d in spec.shape for s in sh.symbols(d)} - set(dims))
        if missing:
            raise ToolError(
                f"parameter '{spec.name}' has shape {tuple(spec.shape)}: give the symbolic "
                f"dimension(s) with {' '.join(f'--dim {m}=SIZE' for m in missing)}"
            )
        shape = tuple(sh.evaluate(d, dims) for d in spec.shape)
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 10, size=shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(shape) < 0.5)
        else:
            raise ToolError(f"--random cannot make parameter '{spec.name}' of dtype {dtype}")
    return arrays


def load_inputs(path: str, params) -> list[np.ndarray]:
    """Arrays of `path` matched to `params` by name, else (np.savez positional) by order."""
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ToolError(f"cannot read inputs '{path}': {exc}") from None
    with data:
        names = [p.name for p in params]
        positional = [f"arr_{i}" for i in range(len(params))]
        if all(n in data.files for n in names):
            keys = names
        elif sorted(data.files) == sorted(positional):
            keys = positional
        else:
            missing = [n for n in names if n not in data.files]
            raise ToolError(
                f"{path} has no array for parameter(s) {', '.join(missing)} "
                f"(it holds: {', '.join(data.files) or 'nothing'}; expected {', '.join(names)})"
            )
        unused = sorted(set(data.files) - set(keys))
        if unused:
            raise ToolError(f"{path} holds arrays that match no parameter: {', '.join(unused)}")
        return [data[k] for k in keys]


def _as_numpy(results) -> list[np.ndarray]:
    if results is None:
        return []
    if not isinstance(results, (tuple, list)):
        results = [results]
    return [r.numpy() if hasattr(r, "numpy") else np.asarray(r) for r in results]


def _result_names(info, count: int) -> list[str]:
    names = [r.name for r in info.results]
    if len(names) != count or len(set(names)) != count or not all(names):
        names = [f"out{i}" for i in range(count)]
    return names


def time_calls(fn, args, runs: int) -> list[float]:
    """Wall time of each of `runs` calls, in microseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn(*args)
        times.append((time.perf_counter_ns() - start) / 1e3)
    return times


def run(opts: argparse.Namespace) -> int:
    text, source_name = read_source(opts.input)
    dims = parse_dims(opts.dim)
    executable = compile_module(text, source_name, opts.target)
    if opts.entry not in executable:
        names = ", ".join(executable.function_names())
        raise ToolError(f"no function '{opts.entry}' to run; functions: {names}")
    vm = relaxmlir.relax.VirtualMachine(executable, relaxmlir.cpu())
    info = vm.signature(opts.entry)
    if opts.signature:
        print(info.signature)
        return 0
    if opts.inputs:
        args = load_inputs(opts.inputs, info.params)
    elif opts.random:
        args = random_inputs(info.params, dims, opts.seed)
    elif info.params:
        raise ToolError(
            f"@{opts.entry} takes {len(info.params)} argument(s) "
            f"({', '.join(p.name for p in info.params)}): pass --inputs IN.npz or --random"
        )
    else:
        args = []
    fn = vm[opts.entry]
    try:
        outputs = _as_numpy(fn(*args))
    except (ValueError, TypeError) as exc:
        raise ToolError(str(exc)) from None
    if opts.output:
        names = _result_names(info, len(outputs))
        try:
            np.savez(opts.output, **dict(zip(names, outputs)))
        except OSError as exc:
            raise ToolError(f"cannot write '{opts.output}': {exc.strerror}") from None
    else:
        for array in outputs:
            print(repr(array))
    if opts.time > 0:
        times = time_calls(fn, args, opts.time)
        print(
            f"# {opts.entry}: median {statistics.median(times):.2f} us over {opts.time} runs "
            f"(min {min(times):.2f} us, max {max(times):.2f} us)"
        )
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    opts = _parser().parse_args(argv)
    if opts.time < 0:
        print("relaxmlir-run: error: --time expects a count >= 0", file=sys.stderr)
        return 1
    try:
        return run(opts)
    except CompileError as exc:
        print(exc, file=sys.stderr)
        return 1
    except ToolError as exc:
        print(f"relaxmlir-run: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
