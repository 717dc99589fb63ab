"""`relax.build(mod, "cuda")`'s code: the lowered module (host code in the LLVM dialect, PTX in
`gpu.binary` ops) linked into a shared library with the CUDA runtime of `cuda_runtime.c`.

There is no JIT for CUDA: the engine would need MLIR's libmlir_cuda_runtime (which links
libLLVM); the library `export_library` writes is what runs, here as on a machine without MLIR.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import tempfile

from mlir import ir
from mlir.dialects import gpu

from lowering.export import export_library


def ptx_sources(module: ir.Module) -> dict[str, str]:
    """gpu.module name -> PTX text, from the `gpu.binary` ops of a lowered module."""
    out = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "gpu.binary":
            name = ir.StringAttr(op.attributes["sym_name"]).value
            for obj in ir.ArrayAttr(op.attributes["objects"]):
                data = gpu.ObjectAttr(obj).object
                out[name] = data.decode() if isinstance(data, bytes) else str(data)
    return out


def link_library(module: ir.Module, executable, folder: str | None = None) -> str:
    """Write the model library of a lowered CUDA module; returns its path."""
    folder = folder or tempfile.mkdtemp(prefix="relaxmlir-cuda-")
    path = os.path.join(folder, "model.so")
    export_library(module, executable, path)
    return path


def find_ptxas() -> str | None:
    """`ptxas` for checking PTX without a GPU: $RELAXMLIR_PTXAS, PATH, $CUDA_HOME (or CUDA_PATH,
    CUDA_ROOT), /usr/local/cuda, then the `nvidia-cuda-nvcc` wheel (`pip install relaxmlir[cuda]`)."""
    candidates = [os.environ.get("RELAXMLIR_PTXAS", ""), shutil.which("ptxas") or ""]
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "ptxas"))
    candidates.append("/usr/local/cuda/bin/ptxas")
    spec = importlib.util.find_spec("nvidia")
    for folder in list(spec.submodule_search_locations or []) if spec else []:
        candidates += sorted(glob.glob(os.path.join(folder, "*", "bin", "ptxas")))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


class PtxasError(RuntimeError):
    """ptxas refused a kernel: the message holds its diagnostics."""


def assemble(ptx: str, arch: str, ptxas: str | None = None) -> None:
    """Assemble `ptx` for `arch` with ptxas (output discarded); PtxasError if it fails."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise FileNotFoundError(
            "ptxas not found (PATH, $CUDA_HOME, /usr/local/cuda, pip install relaxmlir[cuda])"
        )
    with tempfile.TemporaryDirectory(prefix="relaxmlir-ptxas-") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        proc = subprocess.run(
            [ptxas, f"-arch={arch}", src, "-o", os.path.join(tmp, "kernel.cubin")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    if proc.returncode != 0:
        raise PtxasError(f"ptxas -arch={arch} failed: {proc.stderr.strip()[:2000]}")
