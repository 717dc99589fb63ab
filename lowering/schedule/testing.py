"""Build and run standalone PrimFunc kernels through the CPU pipeline (tests, kernel benchmarks).

    k = Kernel.build(MATMUL_TEXT, "mm", schedule="threads=1")
    k(a, b, out)            # numpy arrays, destination-passing: `out` is written in place

A public `@<name>_entry` over memrefs is added next to the private PrimFunc (the bridge that
`relax-graph-to-memref` builds for `call_tir`), and the module goes through the same stages as
`relax.build`: schedule, destination passing, bufferization, CPU codegen, ExecutionEngine.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence

import numpy as np
from mlir import ir
from mlir.runtime import get_ranked_memref_descriptor

from lowering.jit import JitCode
from lowering.pipelines import BUFFERIZE_KERNELS, cpu_codegen
from lowering.registry import run_pipeline
from relaxmlir.target import Target


def _entry_text(func_op: ir.Operation, name: str) -> str:
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    ins, outs = list(ftype.inputs), list(ftype.results)
    n_in = len(ins) - len(outs)
    mtypes = [str(t).replace("tensor<", "memref<") for t in ins]
    params = ", ".join(f"%m{i}: {t}" for i, t in enumerate(mtypes))
    lines = [f"func.func @{name}_entry({params}) attributes {{llvm.emit_c_interface}} {{"]
    for i, (t, m) in enumerate(zip(ins, mtypes)):
        writable = " writable" if i >= n_in else ""
        lines.append(f"  %t{i} = bufferization.to_tensor %m{i} restrict{writable} : {m} to {t}")
    args = ", ".join(f"%t{i}" for i in range(len(ins)))
    res = ", ".join(f"%r{j}" for j in range(len(outs)))
    ins_s, outs_s = ", ".join(map(str, ins)), ", ".join(map(str, outs))
    lines.append(f"  {res} = func.call @{name}({args}) : ({ins_s}) -> ({outs_s})")
    for j in range(len(outs)):
        lines.append(
            f"  bufferization.materialize_in_destination %r{j} in restrict writable %m{n_in + j} "
            f": ({outs[j]}, {mtypes[n_in + j]}) -> ()"
        )
    lines += ["  return", "}"]
    return "\n".join(lines)


def pipeline(schedule: str | None, target: Target) -> str:
    """`schedule`: None to skip the schedule pass, else its options (e.g. `threads=1`)."""
    stages = []
    if schedule is not None:
        options = f'target="{target}"' + (f" {schedule}" if schedule else "")
        stages.append(f"relax-schedule-cpu{{{options}}}")
    return "builtin.module(" + ",".join(stages + BUFFERIZE_KERNELS + cpu_codegen(target)) + ")"


class Kernel:
    """One JIT-compiled PrimFunc; calls patch data pointers into cached memref descriptors."""

    def __init__(self, code: JitCode, name: str, module: ir.Module, compile_s: float):
        self.code, self.name, self.module, self.compile_s = code, name, module, compile_s
        self._fn = code.lookup(f"{name}_entry")
        self._packed = None
        self._keep: list = []

    @classmethod
    def build(
        cls,
        text: str,
        name: str,
        schedule: str | None = "",
        ctx: ir.Context | None = None,
        target: Target | str | None = None,
    ) -> Kernel:
        """`target`: a Target or its string (default: the one in scope, else the host CPU)."""
        target = Target(target) if target is not None else Target.current() or Target("llvm")
        ctx = ctx or ir.Context()
        with ctx:
            module = ir.Module.parse(text)
            func_op = next(
                op.operation
                for op in module.body.operations
                if ir.StringAttr(op.attributes["sym_name"]).value == name
            )
            ftype = ir.TypeAttr(func_op.attributes["function_type"]).value
            decl = f"func.func private @{name}(" + str(ftype).split("(", 1)[1]
            entry = ir.Module.parse(decl + "\n" + _entry_text(func_op, name))
            module.body.append(list(entry.body.operations)[1].operation.clone(ip=False))
            start = time.perf_counter()
            run_pipeline(module, pipeline(schedule, target))
            code = JitCode(module, target)
            code.lookup(f"{name}_entry")  # materialize the code now, inside the timing
            elapsed = time.perf_counter() - start
        return cls(code, name, module, elapsed)

    def bind(self, *arrays: np.ndarray) -> Kernel:
        """Build descriptors once for these arrays (each call then costs ~1 us)."""
        descs = [get_ranked_memref_descriptor(a) for a in arrays]
        ptrs = [ctypes.pointer(ctypes.pointer(d)) for d in descs]
        self._packed = (ctypes.c_void_p * len(ptrs))(
            *[ctypes.cast(p, ctypes.c_void_p) for p in ptrs]
        )
        self._keep = [arrays, descs, ptrs]  # descriptors must outlive the calls
        return self

    def run(self) -> None:
        self._fn(self._packed)

    def __call__(self, *arrays: np.ndarray) -> None:
        for a in arrays:
            if not a.flags["C_CONTIGUOUS"]:
                raise ValueError("Kernel: arguments must be C-contiguous numpy arrays")
        self.bind(*arrays).run()


def median_seconds(fn, min_time: float = 0.3, max_reps: int = 5000) -> float:
    """Median wall time of `fn()` over repetitions filling about `min_time` seconds."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    reps = max(5, min(max_reps, int(min_time / once)))
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def matmul_text(
    m: int,
    n: int,
    k: int,
    *,
    transposed_b: bool = False,
    batch: Sequence[int] = (),
    name: str = "mm",
) -> str:
    """A TE-style matmul PrimFunc: fill + generic, B as [K, N] or [N, K] (dense), optional batch."""
    b = list(batch)
    nb = len(b)
    dims = [f"d{i}" for i in range(nb + 3)]
    bd, (dm, dn, dk) = dims[:nb], dims[nb:]
    shape = lambda *s: "x".join(str(x) for x in b + list(s)) + "xf32"
    a_t, c_t = f"tensor<{shape(m, k)}>", f"tensor<{shape(m, n)}>"
    b_t = f"tensor<{shape(n, k) if transposed_b else shape(k, n)}>"
    bmap = [dn, dk] if transposed_b else [dk, dn]
    amap = lambda r: f"affine_map<({', '.join(dims)}) -> ({', '.join(bd + r)})>"
    iters = ", ".join(['"parallel"'] * (nb + 2) + ['"reduction"'])
    return f"""
func.func private @{name}(%a: {a_t}, %b: {b_t}, %c: {c_t}) -> {c_t} attributes {{relax.prim_func}} {{
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%c : {c_t}) -> {c_t}
  %r = linalg.generic {{indexing_maps = [{amap([dm, dk])}, {amap(bmap)}, {amap([dm, dn])}],
                        iterator_types = [{iters}]}}
      ins(%a, %b : {a_t}, {b_t}) outs(%fill : {c_t}) {{
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> {c_t}
  return %r : {c_t}
}}
"""
