"""CUDA in the MLIR-free runtime: devices, device arrays, DLPack, the VM's device checks, and an
exported CUDA library loaded where neither MLIR nor (here) the CUDA driver exists.

Tests marked `gpu` run the models on a device against numpy/torch; they skip without one.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
from mlp_models import mlp, params, reference
from test_runtime import BLOCK_MLIR, run_python

import relaxmlir as rm
from relaxmlir import relax
from relaxmlir.runtime import cuda_driver

HAS_GPU = cuda_driver.available()
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a CUDA driver")


def fake_device_array(ptr: int, shape: tuple, dtype, device) -> rm.nd.NDArray:
    """An NDArray over a made-up device pointer: never dereferenced by these tests."""
    return rm.nd.NDArray.on_device(
        cuda_driver.DeviceData(ptr, shape, np.dtype(dtype), None), device
    )


@pytest.fixture(scope="module")
def mlp_cuda():
    return relax.build(relax.transform.BindParams("main", params())(mlp("tir", 4)), target="cuda")


def test_cuda_device():
    dev = rm.cuda(1)
    assert (dev.device_type, dev.device_id, dev.dlpack_code) == ("cuda", 1, 2)
    assert repr(dev) == "cuda(1)" and rm.device("cuda", 1) == dev


@no_gpu_only
def test_device_arrays_need_the_driver():
    with pytest.raises(
        cuda_driver.CudaError, match=r"cannot load the CUDA driver \(libcuda.so.1\)"
    ):
        rm.nd.array(np.ones(3, "float32"), rm.cuda(0))
    with pytest.raises(cuda_driver.CudaError, match="CUDA is not available"):
        rm.nd.empty((2, 2), "float32", rm.cuda(0))


def test_vm_checks_the_device(mlp_cuda):
    with pytest.raises(ValueError, match="built for target 'cuda' cannot run on cpu"):
        relax.VirtualMachine(mlp_cuda, rm.cpu())
    vm = relax.VirtualMachine(mlp_cuda, rm.cuda(0))
    x = np.ones((4, 784), "float32")
    with pytest.raises(
        TypeError,
        match=r"argument 0 \('x'\) is a numpy array in host memory, the VM runs on cuda\(0\)",
    ):
        vm["main"](x)
    with pytest.raises(
        TypeError, match=r"argument 0 \('x'\) is on cpu\(0\), the VM runs on cuda\(0\)"
    ):
        vm["main"](rm.nd.array(x))
    with pytest.raises(TypeError, match=r"main\(\) takes 1 argument"):
        vm["main"]()


def test_cpu_vm_refuses_device_arrays():
    ex = relax.build(relax.transform.BindParams("main", params())(mlp("tir", 4)), target="llvm")
    symbolic = relax.build(
        relax.transform.BindParams("main", params())(mlp("tir", "n")), target="llvm"
    )
    fake = fake_device_array(0x1000, (4, 784), np.float32, rm.cuda(0))
    # both the fast path (static shapes) and the checked one name the two devices
    for built in (ex, symbolic):
        with pytest.raises(TypeError, match=r"expected an array on cpu\(0\), got one on cuda\(0\)"):
            relax.VirtualMachine(built, rm.cpu())["main"](fake)
    assert "not readable" in repr(fake) or HAS_GPU


def test_dlpack_capsule_round_trip():
    """The DLManagedTensor we export reads back with the same pointer, shape and dtype, and the
    consumer's release runs our deleter (memory kept alive until then)."""
    src = fake_device_array(0xABC000, (3, 5), np.float16, rm.cuda(1))
    capsule = src.__dlpack__()
    assert src.__dlpack_device__() == (2, 1)
    assert len(cuda_driver._EXPORTED) >= 1
    before = len(cuda_driver._EXPORTED)
    data, device = cuda_driver.from_dlpack_capsule(capsule, None)
    view = rm.nd.NDArray.on_device(data, device)
    assert (view._cuda.ptr, view.shape, view.dtype, view.device) == (
        0xABC000,
        (3, 5),
        "float16",
        rm.cuda(1),
    )
    del data
    del view
    assert len(cuda_driver._EXPORTED) == before - 1
    with pytest.raises(ValueError):  # a capsule is consumed once
        cuda_driver.from_dlpack_capsule(capsule, None)


def _undefined_symbols(path: str) -> set[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not found")
    out = subprocess.run(
        [nm, "-D", "--undefined-only", path], capture_output=True, text=True, check=True
    )
    return {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()}


def test_exported_library_is_self_contained(mlp_cuda, tmp_path):
    """Host code + PTX + the CUDA runtime in one file: only libc symbols are imported (libcuda is
    dlopen'ed on first use), and the mgpu* entry points are defined inside."""
    lib = str(tmp_path / "mlp_cuda.so")
    mlp_cuda.export_library(lib)
    undefined = _undefined_symbols(lib)
    assert not {s for s in undefined if s.startswith(("mgpu", "cu", "_mlir"))}, undefined
    assert {"dlopen", "dlsym"} <= undefined
    with open(lib, "rb") as f:
        data = f.read()
    assert data.count(b".visible .entry ") == 2 and b".target sm_90" in data
    meta = rm.runtime.library.read_metadata(lib)
    assert meta["target"].startswith("cuda") and meta["entries"] == ["main"]


@no_gpu_only
def test_library_without_mlir_or_driver_fails_cleanly(mlp_cuda, tmp_path):
    """In a process that cannot import mlir: the library loads, the VM raises CudaError naming
    libcuda, and the native code itself, called with host buffers, returns with the error
    recorded (no crash: nothing is dereferenced once the driver is missing)."""
    lib = str(tmp_path / "mlp_cuda.so")
    mlp_cuda.export_library(lib)
    out = run_python(
        BLOCK_MLIR
        + f"""
import ctypes, sys
import numpy as np
import relaxmlir as rm
from relaxmlir import runtime
from relaxmlir.runtime import memref_abi
from relaxmlir.runtime.cuda_driver import CudaError
ex = runtime.load_module({lib!r})
vm = runtime.VirtualMachine(ex, rm.cuda(0))
try:
    vm["main"](rm.nd.array(np.ones((4, 784), "float32"), rm.cuda(0)))
    raise SystemExit("no error")
except CudaError as exc:
    assert "libcuda.so.1" in str(exc), exc
so = ctypes.CDLL({lib!r})
x, y = np.ones((4, 784), "float32"), np.zeros((4, 10), "float32")
slots = [memref_abi.ArgSlot(2), memref_abi.ArgSlot(2)]
slots[0].set(x); slots[1].set(y)
so.relaxmlir_entry_0(memref_abi.packed_args(slots))
buf = ctypes.create_string_buffer(1024)
assert so.relaxmlir_cuda_take_error(buf, 1024) > 0
assert b"cannot load the CUDA driver (libcuda.so.1)" in buf.value, buf.value
assert so.relaxmlir_cuda_take_error(buf, 1024) == 0  # taken: cleared
assert "mlir" not in sys.modules
print("ok")
"""
    )
    assert out.strip() == "ok"


# -- on a GPU -------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device (libcuda.so.1)")
@pytest.mark.parametrize("batch", [1, 4])
def test_mlp_on_gpu(batch):
    p = params()
    ex = relax.build(relax.transform.BindParams("main", p)(mlp("tir", batch)), target="cuda")
    vm = relax.VirtualMachine(ex, rm.cuda(0))
    x = np.random.default_rng(0).standard_normal((batch, 784), dtype=np.float32)
    out = vm["main"](rm.nd.array(x, rm.cuda(0)))
    assert out.device == rm.cuda(0)
    np.testing.assert_allclose(out.numpy(), reference(x, p), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device (libcuda.so.1)")
def test_torch_cuda_tensors_zero_copy(mlp_cuda):
    torch = pytest.importorskip("torch")
    p = params()
    x = torch.randn(4, 784, device="cuda")
    vm = relax.VirtualMachine(mlp_cuda, rm.cuda(0))
    out = vm["main"](x)  # a torch CUDA tensor in, on torch's current stream
    back = torch.from_dlpack(out)  # zero copy out
    assert back.is_cuda and back.data_ptr() == out._cuda.ptr
    np.testing.assert_allclose(
        back.cpu().numpy(), reference(x.cpu().numpy(), p), rtol=1e-4, atol=1e-4
    )
    view = rm.nd.from_dlpack(x)
    assert view._cuda.ptr == x.data_ptr()
    np.testing.assert_array_equal(view.numpy(), x.cpu().numpy())


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device (libcuda.so.1)")
def test_models_on_gpu_match_torch():
    torch = pytest.importorskip("torch")
    from test_frontend_fx import import_model
    from test_models import MODELS

    for name, (make, inputs) in MODELS.items():
        torch.manual_seed(0)
        model, args = make().eval(), inputs()
        ex = relax.build(import_model(model, args, "ep"), target="cuda")
        vm = relax.VirtualMachine(ex, rm.cuda(0))
        got = vm["main"](*[a.cuda() for a in args])
        got = got if isinstance(got, tuple) else (got,)
        want = model(*args)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            np.testing.assert_allclose(
                g.numpy(), w.detach().numpy(), rtol=1e-3, atol=1e-3, err_msg=name
            )


def test_recorded_runtime_errors_are_raised():
    from relaxmlir.runtime.cuda_entry import raise_pending

    def take_error(buf, size):
        buf.value = (
            b"CUDA driver call failed: cuLaunchKernel (CUDA error 700: an illegal memory access)"
        )
        return len(buf.value)

    with pytest.raises(cuda_driver.CudaError, match="cuLaunchKernel .*error 700"):
        raise_pending(take_error)
    raise_pending(lambda buf, size: 0)  # nothing recorded: no error


def test_ctypes_is_all_the_runtime_needs():
    assert ctypes.sizeof(cuda_driver.DLTensor) == 48  # dlpack.h's layout on 64-bit


def test_calls_run_on_torchs_current_stream(monkeypatch):
    """Model calls go on the stream torch has current for the device, read as the raw handle
    (a Stream object per call costs microseconds), or through current_stream() where this
    torch lacks the raw reader; `use_stream` overrides both, and without an initialized torch
    CUDA the legacy stream 0 is used. A stand-in torch module: no GPU needed."""
    import types

    asked = []
    cuda = types.SimpleNamespace(
        is_initialized=lambda: True,
        current_stream=lambda i: types.SimpleNamespace(cuda_stream=0x500 + i),
    )
    fake = types.SimpleNamespace(
        cuda=cuda,
        _C=types.SimpleNamespace(_cuda_getCurrentRawStream=lambda i: asked.append(i) or 0x700 + i),
    )
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    dev = rm.cuda(1)
    assert cuda_driver.current_stream(dev) == 0x701 and asked == [1]
    with cuda_driver.use_stream(0x900):
        assert cuda_driver.current_stream(dev) == 0x900
    del fake._C._cuda_getCurrentRawStream
    assert cuda_driver.current_stream(dev) == 0x501
    cuda.is_initialized = lambda: False
    assert cuda_driver.current_stream(dev) == 0
