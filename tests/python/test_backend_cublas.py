"""The `cublas` codegen: patterns, partitioning, the CUDA build of dispatched modules, the errors
without cuBLASLt or a GPU, and the C kernels themselves.

Runs in CI without the nvidia-cublas wheel or a GPU:
- partitioning and kernel choice for every pattern of the family (FileCheck cases in
  tests/lit/transform/cublas-dispatch.mlir), the CUDA build and export of dispatched modules;
- the kernels' own logic (row-major to cuBLASLt's column-major, batch strides and broadcasts,
  bias, epilogues, alignment, the plan cache, the stream) against numpy through a stand-in for
  libcublasLt and the driver (fake_cublaslt.c: host memory as device memory), f32 to 1e-5,
  f16 to 1e-2 relative;
- where the wheel is installed: the library loads, the declarations in cublas_kernels.c match
  cublasLt.h / cuda.h (compiled against them), and the library takes the attribute sizes the
  kernels pass.
Where a GPU and cuBLASLt exist (marked `gpu`): scripts/cublas_gpu_check.py's cases against numpy
(f32 1e-4, f16 1e-2, relative to 1 + |expected|). On this workplace's device machine, which has
no MLIR: `python scripts/cublas_gpu_check.py export --out cublas_libs` here, then run
`python3 scripts/cublas_gpu_check.py run --libs cublas_libs` there with
carry=["cublas_libs", "relaxmlir/runtime/native"].
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_runtime import BLOCK_MLIR, run_python

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.relax.backend import cublas as cublas_backend
from relaxmlir.runtime import cublas as cublas_runtime
from relaxmlir.runtime import cuda_driver, libraries

ROOT = Path(__file__).resolve().parents[2]
R = relax.op
HAS_GPU = cuda_driver.available()


def _load_script():
    spec = importlib.util.spec_from_file_location(
        "cublas_gpu_check", ROOT / "scripts" / "cublas_gpu_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _load_script()


def _linear(act=None, transposed=True, bias=(8,), shape=(4, 16), k_out=8, dtype="float32"):
    mod, _, _, _ = check._linear(shape, k_out, transposed, bias, act, dtype)
    return mod


def _packed_callees(mod) -> list[str]:
    text = mod.script()
    return [
        line.split('callee = "')[1].split('"')[0]
        for line in text.splitlines()
        if "relax.call_dps_packed" in line
    ]


# -- patterns and partitioning ----------------------------------------------------------------


def test_pattern_family_and_codegen_registered():
    names = {p.name for p in relax.backend.get_patterns_with_prefix("cublas")}
    stems = ["matmul", "matmul_transposed"]
    tails = ["", "_relu", "_gelu_tanh", "_bias", "_bias_relu", "_bias_gelu_tanh"]
    assert names == {f"cublas.{s}{t}" for s in stems for t in tails}
    # the longest chains first: FuseOpsByPattern tries them before their prefixes
    order = [p.name for p in relax.backend.get_patterns_with_prefix("cublas")]
    assert order.index("cublas.matmul_transposed_bias_relu") < order.index(
        "cublas.matmul_transposed"
    )
    # registered without cuBLASLt or a GPU: dispatching and building need neither
    assert cublas_backend.is_built()
    assert rm.get_global_func("relax.ext.cublas", allow_missing=True) is not None


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("bias", [None, (8,)])
@pytest.mark.parametrize("act", [None, "relu", "gelu_tanh"])
def test_each_pattern_picks_its_kernel(dtype, transposed, bias, act):
    mod = check.dispatch(_linear(act, transposed, bias, dtype=dtype))
    assert '"relax.matmul"' not in mod.script()
    (callee,) = _packed_callees(mod)
    kernel = rm.get_global_func(callee)
    stem = "matmul_transposed" if transposed else "matmul"
    want = f"relaxmlir_cublas_{'f16' if dtype == 'float16' else 'f32'}_{stem}"
    want += ("_bias" if bias else "") + (f"_{act}" if act else "")
    assert isinstance(kernel, rm.runtime.NativeFunc) and kernel.symbol == want
    assert kernel.library == "cublas_kernels" and kernel.device == "cuda"


def test_erf_gelu_is_not_an_epilogue():
    """cuBLASLt's GELU is the tanh form: matmul + bias go to cublas, the erf GELU stays ours."""
    mod = check.dispatch(_linear("gelu"))
    text = mod.script()
    assert _packed_callees(mod) == ["fused_relax_permute_dims_relax_matmul_relax_add_cublas"]
    assert '"relax.nn_gelu"' in text


def test_checks_refuse_what_cublaslt_cannot_do():
    x = relax.Var("x", relax.TensorStructInfo((4, "k"), "float32"))
    w = relax.Var("w", relax.TensorStructInfo(("k", 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(R.matmul(x, w)))
        bb.emit_func_output(gv)
    refused = [
        _linear(None, False, None, dtype="int32"),  # no integer kernels
        bb.get(),  # a contraction of unknown size
    ]
    for mod in refused:
        assert _packed_callees(check.dispatch(mod)) == []
    # a bias of one value per row is not cuBLASLt's per-column vector: the add stays
    mod = check.dispatch(_linear(None, False, (4, 1)))
    assert _packed_callees(mod) == ["fused_relax_matmul_cublas"]
    assert '"relax.add"' in mod.script()


# -- the CUDA build ------------------------------------------------------------------------------


def test_cuda_build_of_a_dispatched_module(tmp_path):
    x = relax.Var("x", relax.TensorStructInfo((4, 16), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((8, 16), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((8,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            y = bb.emit(R.matmul(x, bb.emit(R.permute_dims(w, [1, 0]))))
            y = bb.emit(R.nn.relu(bb.emit(R.add(y, b))))
            gv = bb.emit_output(bb.emit(R.exp(y)))  # ours, after the library call
        bb.emit_func_output(gv)
    ex = relax.build(check.dispatch(bb.get()), target="cuda")
    assert not ex.callbacks
    (kernel,) = ex.native_bindings.values()
    assert kernel.symbol == "relaxmlir_cublas_f32_matmul_transposed_bias_relu"
    lowered = str(ex.lowered)
    # host code calls the kernel with the device buffers' descriptors, between our launches
    assert "llvm.call @_mlir_ciface___packed_fused_relax_permute_dims" in lowered
    assert "gpu.launch_func" in lowered
    from lowering.gpu.codegen import assemble, find_ptxas, ptx_sources

    kernels = ptx_sources(ex.lowered)
    assert len(kernels) == 1  # exp only: the matmul is no kernel of ours
    if find_ptxas():
        for ptx in kernels.values():
            assemble(ptx, "sm_90")
    lib = tmp_path / "model.so"
    ex.export_library(str(lib))
    out = run_python(
        BLOCK_MLIR
        + f"""
import numpy as np
import relaxmlir as rm
from relaxmlir import runtime
ex = runtime.load_module({str(lib)!r})
symbols = [f.symbol for f in ex.native_bindings.values()]
assert symbols == ["relaxmlir_cublas_f32_matmul_transposed_bias_relu"], symbols
args = [np.ones(s, "float32") for s in ((4, 16), (8, 16), (8,))]
try:
    runtime.VirtualMachine(ex, rm.cuda(0))["main"](*args)
    raise SystemExit("no error")
except TypeError as exc:
    assert "host memory" in str(exc), exc
print("ok")
"""
    )
    assert out.strip() == "ok"


def test_targets_refuse_kernels_of_the_other_device():
    mod = check.dispatch(_linear("relu"))
    with pytest.raises(ValueError, match="is a cuda kernel .* cannot take the cpu memory"):
        relax.build(mod, target="llvm")
    kernel = cublas_backend.kernel_for("cublas.matmul")
    with pytest.raises(TypeError, match="is a cuda kernel .* not from Python"):
        kernel(np.ones((2, 2), "float32"), np.ones((2, 2), "float32"), np.ones((2, 2), "float32"))
    with pytest.raises(ValueError, match="not a cublas pattern"):
        cublas_backend.kernel_for("blas.matmul")
    with pytest.raises(ValueError, match="no kernel for dtype int8"):
        cublas_backend.kernel_for("cublas.matmul", "int8")


def test_export_here_for_the_gpu_machine(tmp_path):
    """The script's export step, and its run step where there is no GPU: a clear exit."""
    names = ["linear_t_bias_relu_f32", "batched_broadcast_f32"]
    manifest = check.export(tmp_path, names)
    assert manifest["batched_broadcast_f32"]["kernels"] == ["relaxmlir_cublas_f32_matmul"]
    if HAS_GPU:
        return
    child = BLOCK_MLIR + "import runpy\nsys.argv = sys.argv[1:]\n"
    child += "runpy.run_path(sys.argv[0], run_name='__main__')"
    script = ROOT / "scripts" / "cublas_gpu_check.py"
    proc = subprocess.run(
        [sys.executable, "-c", child, str(script), "run", "--libs", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the cublas kernels cannot run here: cublas:" in proc.stdout


def test_customize_opt_example_with_cuda(tmp_path):
    """examples/customize_opt.py --target cuda: cublas dispatch, then a run on a GPU, or (without
    one) the built model exported and a clear exit."""
    lib = tmp_path / "model.so"
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "customize_opt.py"), "--target", "cuda",
         "--export", str(lib)],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert 'callee = "fused_relax_permute_dims_relax_matmul_relax_add_relax_nn_relu_cublas"' in (
        proc.stdout
    )
    assert lib.exists()
    if cublas_runtime.runtime_problem():
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "running it needs an NVIDIA GPU with cuBLASLt: cublas:" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    diffs = [float(x.rsplit(":", 1)[1]) for x in proc.stdout.splitlines() if "max abs diff" in x]
    assert len(diffs) == 2 and max(diffs) < 1e-4, proc.stdout


# Child code: calls a kernel of cublas_kernels with numpy arrays (host memory) as its operands.
CALL_KERNEL = """
import ctypes
import numpy as np
from relaxmlir.runtime import libraries, memref_abi
kernels = libraries.load("cublas_kernels")
kernels.relaxmlir_cuda_take_error.argtypes = [ctypes.c_char_p, ctypes.c_int]


def error():
    buf = ctypes.create_string_buffer(1024)
    return buf.value.decode() if kernels.relaxmlir_cuda_take_error(buf, 1024) else ""


def call(symbol, *arrays):
    keep, args = [], []
    for a in arrays:
        d = memref_abi.descriptor_class(a.ndim)()
        d.allocated = d.aligned = a.ctypes.data
        d.offset = 0
        for i in range(a.ndim):
            d.sizes[i] = a.shape[i]
            d.strides[i] = a.strides[i] // a.itemsize
        u = memref_abi.UnrankedDescriptor(a.ndim, ctypes.addressof(d))
        keep += [d, u]
        args.append(ctypes.byref(u))
    getattr(kernels, symbol)(*args)
    return error()
"""


# -- errors without cuBLASLt or a GPU -----------------------------------------------------------


def test_missing_cublaslt_is_a_clear_error():
    out = run_python(
        CALL_KERNEL
        + """
from relaxmlir.runtime import cublas, cuda_driver
assert "RELAXMLIR_CUBLAS_LIB=/nonexistent/libcublasLt.so does not exist" in cublas.runtime_problem()
try:
    cublas.version()
    raise SystemExit("no error")
except cuda_driver.CudaError as exc:
    assert "cuBLASLt (libcublasLt) not found" in str(exc), exc
# a kernel call reports it too (recorded, read after the call), before touching any memory
z = np.zeros((2, 2), "float32")
assert "cuBLASLt (libcublasLt) not found" in call("relaxmlir_cublas_f32_matmul", z, z, z)
print("ok")
""",
        env={**os.environ, "RELAXMLIR_CUBLAS_LIB": "/nonexistent/libcublasLt.so"},
    )
    assert out.strip() == "ok"
    out = run_python(
        """
from relaxmlir.runtime import cublas
cublas.find_cublaslt = lambda: None  # as on a machine without the wheel
print(cublas.runtime_problem())
""",
        env={k: v for k, v in os.environ.items() if k != "RELAXMLIR_CUBLAS_LIB"},
    )
    assert "cuBLASLt (libcublasLt) not found: pip install nvidia-cublas" in out


@pytest.mark.skipif(HAS_GPU, reason="checks the error without a GPU")
def test_no_gpu_is_a_clear_error():
    problem = cublas_runtime.runtime_problem()
    if cublas_runtime.find_cublaslt():
        assert "cannot load the CUDA driver (libcuda.so.1)" in problem
    else:
        assert "cuBLASLt (libcublasLt) not found" in problem


# -- where the nvidia-cublas wheel (or another cuBLASLt) is installed ---------------------------


def _headers() -> list[str] | None:
    """Include folders holding cublasLt.h and cuda.h, or None."""
    roots = []
    nvidia = libraries.package_folder("nvidia")
    if nvidia:
        roots += glob.glob(os.path.join(nvidia, "cu*", "include"))
        roots += glob.glob(os.path.join(nvidia, "*", "include"))
    roots += [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")]
    lt = next((r for r in roots if os.path.exists(os.path.join(r, "cublasLt.h"))), None)
    cuda = next((r for r in roots if os.path.exists(os.path.join(r, "cuda.h"))), None)
    return [lt, cuda] if lt and cuda else None


@pytest.mark.skipif(_headers() is None, reason="cublasLt.h and cuda.h are not installed")
def test_declarations_match_the_headers():
    src = ROOT / "relaxmlir" / "runtime" / "native" / "cublas_kernels.c"
    includes = [f"-I{d}" for d in dict.fromkeys(_headers())]
    proc = subprocess.run(
        ["cc", "-fsyntax-only", "-DRELAXMLIR_CUBLAS_CHECK_HEADERS", *includes, str(src)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(cublas_runtime.find_cublaslt() is None, reason="no libcublasLt installed")
def test_cublaslt_loads():
    version = cublas_runtime.version()
    assert version >= 110000, version
    major = Path(cublas_runtime.find_cublaslt()).name.split(".so.")[-1].split(".")[0]
    if major.isdigit():
        assert version // 10000 == int(major)


@pytest.mark.skipif(cublas_runtime.find_cublaslt() is None, reason="no libcublasLt installed")
def test_cublaslt_takes_the_attribute_sizes_the_kernels_pass():
    """cublas_kernels.c (and fake_cublaslt.c) pass each attribute with the size the header's
    comments give; the library itself must accept exactly those (it refuses a wrong size)."""
    lt = ctypes.CDLL(cublas_runtime.find_cublaslt())
    desc, layout, pref = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    assert lt.cublasLtMatmulDescCreate(ctypes.byref(desc), 68, 0) == 0  # COMPUTE_32F, R_32F
    rows, cols, ld = ctypes.c_uint64(16), ctypes.c_uint64(8), ctypes.c_int64(16)
    assert lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), 2, rows, cols, ld) == 0
    assert lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)) == 0
    sets = [
        (lt.cublasLtMatmulDescSetAttribute, desc, 3, ctypes.c_int32(1)),  # TRANSA
        (lt.cublasLtMatmulDescSetAttribute, desc, 4, ctypes.c_int32(0)),  # TRANSB
        (lt.cublasLtMatmulDescSetAttribute, desc, 7, ctypes.c_uint32(36)),  # EPILOGUE
        (lt.cublasLtMatmulDescSetAttribute, desc, 8, ctypes.c_void_p(4096)),  # BIAS_POINTER
        (lt.cublasLtMatrixLayoutSetAttribute, layout, 5, ctypes.c_int32(3)),  # BATCH_COUNT
        (lt.cublasLtMatrixLayoutSetAttribute, layout, 6, ctypes.c_int64(128)),  # BATCH_OFFSET
        (lt.cublasLtMatmulPreferenceSetAttribute, pref, 1, ctypes.c_uint64(1 << 25)),  # WORKSPACE
    ] + [
        (lt.cublasLtMatmulPreferenceSetAttribute, pref, a, ctypes.c_uint32(4)) for a in (5, 6, 7, 8)
    ]
    for setter, obj, attr, value in sets:
        assert setter(obj, attr, ctypes.byref(value), ctypes.sizeof(value)) == 0, (attr, value)
    wrong = ctypes.c_uint64(36)
    assert lt.cublasLtMatmulDescSetAttribute(desc, 7, ctypes.byref(wrong), 8) != 0
    lt.cublasLtMatmulDescDestroy(desc)
    lt.cublasLtMatrixLayoutDestroy(layout)
    lt.cublasLtMatmulPreferenceDestroy(pref)


# -- the kernels' logic, against a stand-in for cuBLASLt ------------------------------------------


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("fake") / "libfake_cublaslt.so"
    src = Path(__file__).with_name("fake_cublaslt.c")
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(out), str(src), "-lm"], check=True)
    return str(out)


# The children's start: the kernels pointed at the stand-in (argv[1]) for cuBLASLt and the driver.
FAKE_SETUP = """
import sys
fake = ctypes.CDLL(sys.argv[1])
kernels.relaxmlir_cublas_configure(sys.argv[1].encode(), sys.argv[1].encode(), b"")
kernels.relaxmlir_cuda_set_stream.argtypes = [ctypes.c_void_p]
"""


def _run_fake(child: str, fake_lib: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", child, fake_lib],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


FAKE_CHILD = (
    CALL_KERNEL
    + FAKE_SETUP
    + """
import numpy as np
from relaxmlir.runtime import libraries, memref_abi

fake.fake_set_context.argtypes = [ctypes.c_void_p]


def stats():
    out, stream = (ctypes.c_int64 * 3)(), ctypes.c_void_p()
    fake.fake_stats(out, ctypes.byref(stream))
    return list(out), stream.value


# A copy of `a` at a 256-byte boundary: plans are keyed by alignment, so the plan-cache counts
# below must not depend on where numpy put an array.
def aligned(a):
    raw = np.empty(a.nbytes + 256, np.uint8)
    start = -raw.ctypes.data % 256
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


ACT = {
    "": lambda x: x,
    "_relu": lambda x: np.maximum(x, 0),
    "_gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3))),
}
rng = np.random.default_rng(0)


def case(a_shape, b_shape, transposed=False, bias=None, act="", dtype="float32", b_view=None):
    a = aligned((rng.standard_normal(a_shape) / np.sqrt(a_shape[-1])).astype(dtype))
    b = aligned(rng.standard_normal(b_shape).astype(dtype))
    if b_view is not None:
        b = b_view(b)
    rhs = np.swapaxes(b, -1, -2) if transposed else b
    want = a.astype(np.float64) @ rhs.astype(np.float64)
    args = [a, b]
    if bias is not None:
        v = aligned(rng.standard_normal(bias).astype(dtype))
        want = want + v.astype(np.float64)
        args.append(v)
    want = ACT[act](want)
    out = aligned(np.full(want.shape, np.nan, dtype))
    name = "matmul" + ("_transposed" if transposed else "") + ("_bias" if bias else "") + act
    before = stats()[0]
    err = call(f"relaxmlir_cublas_{'f16' if dtype == 'float16' else 'f32'}_{name}", *args, out)
    assert not err, err
    tol = 1e-2 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)
    after = stats()[0]
    return after[0] - before[0], after[1] - before[1]  # heuristics, cublasLtMatmul calls


# every kernel variant, rank 2
for t in (False, True):
    for bias in (None, (7,)):
        for act in ACT:
            case((5, 9), (7, 9) if t else (9, 7), t, bias, act)
            case((33, 16), (7, 16) if t else (16, 7), t, bias, act, "float16")
# n = 1, m = 1, k = 1, bias of shape (1, n)
case((1, 4), (1, 4), True, (1,), "_relu")
case((6, 1), (1, 3), False, (1, 3), "")
# the plan cache: a shape seen before asks no heuristic; the stream is the caller's
kernels.relaxmlir_cuda_set_stream(0x5150)
assert case((5, 9), (9, 7)) == (0, 1)
assert stats()[1] == 0x5150
# batches: weights shared -> one GEMM over all rows (also for rank 4)
assert case((3, 4, 9), (9, 7)) == (1, 1)
assert case((2, 3, 4, 9), (7, 9), True, (7,), "_gelu_tanh") == (1, 1)
# one stride per operand -> one strided-batched call; a broadcast lhs has stride 0
assert case((4, 6, 8), (4, 8, 3)) == (1, 1)
assert case((5, 7), (3, 7, 4)) == (1, 1)
assert case((2, 3, 6, 8), (2, 3, 8, 3), dtype="float16") == (1, 1)
# a batch no single stride describes (broadcast over an outer dim): one call per batch index
assert case((2, 3, 5, 7), (3, 7, 4)) == (1, 6)
# a strided view: the rows of a wider buffer (row stride 8 > 5 columns)
assert case((6, 8), (8, 5), b_view=lambda b: aligned(np.pad(b, ((0, 0), (0, 3))))[:, :5]) == (1, 1)
# alignment: an operand off the 256-byte boundary gets a plan of its own (the fake checks it)
a = np.zeros(1 + 6 * 8, "float32")[1:].reshape(6, 8)
z = np.zeros
assert not call("relaxmlir_cublas_f32_matmul", a, z((8, 5), "float32"), z((6, 5), "float32"))
# errors: recorded, read after the call, memory untouched
v = np.zeros((6, 5), "float32")
assert "bias must be a contiguous vector" in call("relaxmlir_cublas_f32_matmul_bias",
    np.zeros((6, 8), "float32"), np.zeros((8, 5), "float32"), v, np.zeros((6, 5), "float32"))
assert "do not form a matmul" in call("relaxmlir_cublas_f32_matmul",
    np.zeros((6, 8), "float32"), np.zeros((7, 5), "float32"), np.zeros((6, 5), "float32"))
fake.fake_set_context(None)
assert "no CUDA context is current" in call("relaxmlir_cublas_f32_matmul",
    np.zeros((2, 2), "float32"), np.zeros((2, 2), "float32"), np.zeros((2, 2), "float32"))
assert stats()[0][2] == 1  # one handle for the one context
print("ok")
"""
)


PREPARE_CHILD = (
    CALL_KERNEL
    + FAKE_SETUP
    + """
kernels.relaxmlir_cuda_prepare_stream.argtypes = [ctypes.c_void_p]
refuse = ctypes.c_int.in_dll(fake, "fake_refuse_alloc")
args = [np.ones((4, 8), "float32"), np.ones((8, 3), "float32"), np.zeros((4, 3), "float32")]
assert kernels.relaxmlir_cuda_prepare_stream(0x7000) == 1, error()
refuse.value = 1  # from here on, as inside a capture: no allocation
kernels.relaxmlir_cuda_set_stream(0x7000)
assert call("relaxmlir_cublas_f32_matmul", *args) == "" and (args[2] == 8).all()
kernels.relaxmlir_cuda_set_stream(0x8000)  # a stream not prepared
assert "cuMemAlloc (workspace)" in call("relaxmlir_cublas_f32_matmul", *args)
print("ok")
"""
)


def test_a_prepared_stream_needs_no_allocation(fake_lib):
    """A CUDA graph capture refuses allocations: `relaxmlir_cuda_prepare_stream` sets up the
    stream's handle and workspace before it, and the kernels then allocate nothing there."""
    _run_fake(PREPARE_CHILD, fake_lib)


def test_kernels_against_numpy_through_a_fake_cublaslt(fake_lib):
    _run_fake(FAKE_CHILD, fake_lib)


# -- on a GPU ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
@pytest.mark.skipif(not cublas_backend.is_available(), reason="no libcublasLt installed")
def test_cases_match_numpy_on_the_gpu(tmp_path):
    check.export(tmp_path, list(check.CASES))
    rows = check.run(tmp_path)
    assert rows and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]
