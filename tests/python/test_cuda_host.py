"""The host side of a CUDA model call, run on a machine without a GPU over a stand-in driver
(fake_libcuda.c: memory is host memory, launches are counted, not run): argument checks, the
fast path for the previous call's arrays, stream-ordered output memory and the memory pool
that keeps what it frees. Numbers on a real GPU: scripts/bench_gpu.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mlp_models import mlp, params

import relaxmlir as rm
from relaxmlir import relax

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the stand-in libcuda")
    folder = tmp_path_factory.mktemp("fakecuda")
    subprocess.run(
        [
            cc,
            "-O1",
            "-shared",
            "-fPIC",
            "-o",
            str(folder / "libcuda.so.1"),
            str(HERE / "fake_libcuda.c"),
        ],
        check=True,
    )
    return folder


def _run_child(fake_driver: Path, child: str) -> None:
    """Run `child` (Python source printing "ok") over the stand-in driver, in a process of its
    own: libcuda.so.1 is found on LD_LIBRARY_PATH."""
    env = {"LD_LIBRARY_PATH": str(fake_driver), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, env=env, check=False
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def _on_fake(lib: Path, body: str) -> str:
    """Child code over the stand-in driver: `fake` (its counters), a VM `vm` on cuda(0) for the
    library `lib`, then `body`."""
    head = f"""
        import ctypes
        import numpy as np
        import relaxmlir as rm
        from relaxmlir import runtime
        fake = ctypes.CDLL("libcuda.so.1")
        vm = runtime.VirtualMachine(runtime.load_module({str(lib)!r}), rm.cuda(0))
    """
    return textwrap.dedent(head) + textwrap.dedent(body)


def _mlp_library(tmp_path: Path) -> Path:
    """The batch-4 MLP (weights bound) built for cuda and exported: its library's path."""
    ex = relax.build(relax.transform.BindParams("main", params())(mlp("tir", 4)), target="cuda")
    lib = tmp_path / "mlp.so"
    ex.export_library(str(lib))
    return lib


def _square_library(tmp_path: Path, shape: tuple) -> Path:
    """x * x (one elementwise kernel) over a float32 `shape`, built for cuda and exported."""
    x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.multiply(x, x))
        bb.emit_func_output(out)
    lib = tmp_path / "square.so"
    relax.build(bb.get(), target="cuda").export_library(str(lib))
    return lib


def _matmul(a_shape: tuple, b_shape: tuple, dtype: str):
    a = relax.Var("a", relax.TensorStructInfo(a_shape, dtype))
    b = relax.Var("b", relax.TensorStructInfo(b_shape, dtype))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(a, b))
        bb.emit_func_output(out)
    return bb.get()


def test_host_side_of_a_call(fake_driver, tmp_path):
    lib = _mlp_library(tmp_path)
    child = _on_fake(
        lib,
        """
        x = rm.nd.array(np.ones((4, 784), "float32"), rm.cuda(0))
        main = vm["main"]
        first = main(x)
        launches = ctypes.c_int.in_dll(fake, "fake_launches").value
        second = main(x)  # the same array: the checked fast path
        assert main._last is not None and main._last[0][0] is x
        assert second.shape == (4, 10) and second.device == rm.cuda(0)
        assert second._cuda.ptr != first._cuda.ptr  # a fresh output per call
        assert ctypes.c_int.in_dll(fake, "fake_launches").value == 2 * launches > 0
        other = rm.nd.array(np.ones((4, 784), "float32"), rm.cuda(0))
        main(other)
        assert main._last[0][0] is other
        try:
            main(rm.nd.array(np.ones((5, 784), "float32"), rm.cuda(0)))
        except ValueError as err:
            assert "argument 0" in str(err), err
        else:
            raise AssertionError("a wrong shape passed")
        assert main._last[0][0] is other  # a refused call leaves the fast path as it was
        threshold = ctypes.c_ulonglong.in_dll(fake, "fake_release_threshold").value
        assert threshold == 2**64 - 1, threshold  # the pool keeps freed memory
        print("ok")
        """,
    )
    _run_child(fake_driver, child)


def test_empty_grid_is_not_launched(fake_driver, tmp_path):
    """A kernel over a tensor whose symbolic axis is 0 at run time has an empty grid, which
    cuLaunchKernel refuses: the runtime skips the launch (the call returns an empty array)."""
    lib = _square_library(tmp_path, ("n", 5))
    child = _on_fake(
        lib,
        """
        out = vm["main"](rm.nd.array(np.ones((0, 5), "float32"), rm.cuda(0)))
        assert out.shape == (0, 5), out.shape
        assert ctypes.c_int.in_dll(fake, "fake_launches").value == 0
        vm["main"](rm.nd.array(np.ones((3, 5), "float32"), rm.cuda(0)))
        assert ctypes.c_int.in_dll(fake, "fake_launches").value > 0  # the same kernel, n = 3
        print("ok")
        """,
    )
    _run_child(fake_driver, child)


def test_unaligned_input_is_copied_unaligned_output_refused(fake_driver, tmp_path):
    """Kernels stage contiguous buffers in 16-byte vectors, so an input view that starts at an
    odd offset is copied to an aligned buffer first (its bytes arrive intact), and an output
    there is refused with the reason; the previous call's fast path is not kept for it."""
    lib = tmp_path / "mm16.so"
    relax.build(_matmul((64, 32), (32, 64), "float16"), target="cuda").export_library(str(lib))
    from relaxmlir import te

    ta, tb = (
        te.placeholder((64, 32), "float16", name="A"),
        te.placeholder((32, 64), "float16", name="B"),
    )
    k = te.reduce_axis((0, 32), name="k")
    tc = te.compute((64, 64), lambda i, j: te.sum(ta[i, k] * tb[k, j], axis=k), name="C")
    prim = tmp_path / "prim16.so"  # a primitive function: its entry writes into its last argument
    relax.build(te.create_prim_func([ta, tb, tc]), target="cuda").export_library(str(prim))
    child = textwrap.dedent(
        f"""
        import ctypes
        import numpy as np
        import relaxmlir as rm
        from relaxmlir import runtime
        from relaxmlir.runtime.cuda_driver import DeviceData
        from relaxmlir.runtime.ndarray import NDArray
        dev = rm.cuda(0)
        vm = runtime.VirtualMachine(runtime.load_module({str(lib)!r}), dev)
        big = rm.nd.array(np.arange(64 * 32 + 1, dtype="float16"), dev)
        odd = DeviceData(big._cuda.ptr + 2, (64, 32), np.dtype("float16"), big)  # a view, +2 bytes
        x = NDArray.on_device(odd, dev)
        y = rm.nd.array(np.ones((32, 64), "float16"), dev)
        seen = []
        real = runtime.cuda_entry.copy_into
        def spy(dst, src, device):
            seen.append((dst.ptr % 16, src.ptr))
            real(dst, src, device)
        runtime.cuda_entry.copy_into = spy
        vm["main"](x, y)
        assert len(seen) == 1 and seen[0] == (0, odd.ptr), seen
        fake_copy = np.empty((64, 32), "float16")
        ctypes.memmove(fake_copy.ctypes.data, odd.ptr, fake_copy.nbytes)
        assert np.array_equal(fake_copy.ravel(), np.arange(1, 64 * 32 + 1, dtype="float16"))
        assert vm["main"]._last is None  # an input read through a copy: no fast path
        pvm = runtime.VirtualMachine(runtime.load_module({str(prim)!r}), dev)
        name = next(iter(pvm.executable.infos))
        big_out = rm.nd.array(np.zeros(64 * 64 + 1, "float16"), dev)
        odd_out = NDArray.on_device(DeviceData(big_out._cuda.ptr + 2, (64, 64), np.dtype("float16"), big_out), dev)
        try:
            pvm[name](x, y, odd_out)
        except ValueError as err:
            assert "16-byte boundary" in str(err) and "argument 2" in str(err), err
        else:
            raise AssertionError("an unaligned output passed")
        print("ok")
        """
    )
    _run_child(fake_driver, child)


def test_large_shared_memory_ring_opts_in_once(fake_driver, tmp_path):
    """A float16 matmul on the 128x128 tensor-core tile keeps a ring of 4 operand tiles in
    dynamic shared memory (75 KiB, past the 48 KiB a kernel gets without asking): the runtime
    raises the kernel's limit with cuFuncSetAttribute before its first launch, and only then."""
    ex = relax.build(_matmul((2048, 256), (256, 4096), "float16"), target="cuda")
    assert "dynamic_shared_memory_size" in str(ex.lowered)
    lib = tmp_path / "ring.so"
    ex.export_library(str(lib))
    child = _on_fake(
        lib,
        """
        x = rm.nd.array(np.ones((2048, 256), "float16"), rm.cuda(0))
        y = rm.nd.array(np.ones((256, 4096), "float16"), rm.cuda(0))
        vm["main"](x, y)
        vm["main"](x, y)
        assert ctypes.c_int.in_dll(fake, "fake_launches").value == 2
        assert ctypes.c_int.in_dll(fake, "fake_opt_ins").value == 1
        assert ctypes.c_int.in_dll(fake, "fake_opt_in_bytes").value > 48 * 1024
        print("ok")
        """,
    )
    _run_child(fake_driver, child)


def test_device_blocks_are_kept_per_stream_and_released(fake_driver, tmp_path):
    """The host code allocates each intermediate before its kernel and frees it after its last
    reader; the runtime keeps freed blocks and hands them to the next allocation of that size
    on the same stream: a repeated call allocates nothing from the driver but its output. A
    block kept for one stream is not handed to another; an allocation that fails for memory
    gives the kept blocks back and tries again; release_workspace_cache() gives them back."""
    ex = relax.build(mlp("tir", "n"), target="cuda")
    lib = tmp_path / "mlp_n.so"
    ex.export_library(str(lib))
    child = _on_fake(
        lib,
        """
        from relaxmlir.runtime import use_stream
        rng = np.random.default_rng(0)
        dev = rm.cuda(0)
        weights = [rng.standard_normal(s, dtype=np.float32) for s in [(128, 784), (128,), (10, 128), (10,)]]
        w = [rm.nd.array(a, dev) for a in weights]
        def count(name):
            return ctypes.c_int.in_dll(fake, name).value
        def call(batch, oom=False):
            x = rm.nd.array(np.ones((batch, 784), "float32"), dev)
            if oom:  # the call's first allocation is its output; the next one fails
                ctypes.c_int.in_dll(fake, "fake_oom_skip").value = 1
                ctypes.c_int.in_dll(fake, "fake_oom_next").value = 1
            before = count("fake_allocs"), count("fake_frees")
            out = vm["main"](x, *w)
            assert out.shape == (batch, 10)
            return count("fake_allocs") - before[0], count("fake_frees") - before[1]
        first, _ = call(4)
        again, freed = call(4)
        assert first >= 3 and again == 1, (first, again)  # 1: the output (NDArray.empty)
        assert freed <= 1, freed  # the previous call's output, not the intermediates
        with use_stream(0x1234):  # another stream: the kept blocks stay where they are
            other, _ = call(4)
        assert other == first, (other, first)
        before = count("fake_frees")
        grown, _ = call(8, oom=True)  # a new size: the host code's first allocation fails
        assert count("fake_oom_next") == 0 and grown == first, (grown, first)
        assert count("fake_frees") - before >= first - 1  # the kept blocks went back
        call(8)
        before = count("fake_frees")
        runtime.release_workspace_cache()
        assert count("fake_frees") - before >= first - 1
        again, _ = call(8)
        assert again == first, (again, first)  # nothing kept any more
        print("ok")
        """,
    )
    _run_child(fake_driver, child)


def test_cuda_graph_captures_the_second_call_and_replays(fake_driver, tmp_path):
    """VirtualMachine(..., cuda_graph=True): the first call with new arguments runs as usual,
    the second is captured (from a stream of the runtime's own) and replayed, later ones replay
    it: one graph launch, no allocation but the fresh result the graph's output is copied into.
    New arguments or another stream start over; at most MAX_GRAPHS argument sets are kept; a
    capture the driver refuses turns graphs off for the function, with a warning."""
    lib = _mlp_library(tmp_path)
    child = _on_fake(
        lib,
        """
        import warnings
        from relaxmlir.runtime import cuda_graph, use_stream
        dev = rm.cuda(0)
        def count(name):
            return ctypes.c_int.in_dll(fake, name).value
        def call(vm, x):
            names = ["fake_launches", "fake_allocs", "fake_captures", "fake_graph_launches"]
            before = [count(n) for n in names]
            out = vm["main"](x)
            assert out.shape == (4, 10) and out.device == dev
            return out, [count(n) - b for n, b in zip(names, before)]
        vm = runtime.VirtualMachine(runtime.load_module(LIB), dev, cuda_graph=True)
        x = rm.nd.array(np.ones((4, 784), "float32"), dev)
        out1, (launches, allocs, captures, replays) = call(vm, x)
        assert launches >= 2 and allocs >= 2 and captures == 0 and replays == 0
        out2, delta = call(vm, x)  # captured, then replayed once
        assert delta[2:] == [1, 1] and delta[0] == launches, delta
        out3, delta = call(vm, x)
        assert delta == [launches, 1, 0, 1], delta  # one allocation: the fresh result
        assert len({out1._cuda.ptr, out2._cuda.ptr, out3._cuda.ptr}) == 3
        y = rm.nd.array(np.ones((4, 784), "float32"), dev)  # new arguments: run, then capture
        assert call(vm, y)[1][2:] == [0, 0] and call(vm, y)[1][2:] == [1, 1]
        assert call(vm, x)[1][2:] == [0, 1]  # x's graph is still kept
        with use_stream(0x1234):  # another stream: a key of its own
            assert call(vm, x)[1][2:] == [0, 0] and call(vm, x)[1][2:] == [1, 1]
        zs = [rm.nd.array(np.ones((4, 784), "float32"), dev) for _ in range(cuda_graph.MAX_GRAPHS)]
        for z in zs:  # (kept alive: a freed array's address may come back)
            call(vm, z), call(vm, z)
        assert count("fake_graphs_destroyed") >= 3  # the least recently used went
        fake_fail = ctypes.c_int.in_dll(fake, "fake_capture_fail")
        fake_fail.value = 1
        vm2 = runtime.VirtualMachine(runtime.load_module(LIB), dev, cuda_graph=True)
        call(vm2, x)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out, delta = call(vm2, x)  # the capture fails: the call runs as usual
        assert delta[0] == launches and delta[2:] == [0, 0], delta
        assert any("capturing main() failed" in str(w.message) for w in caught), caught
        fake_fail.value = 0
        assert call(vm2, x)[1][2:] == [0, 0]  # graphs are off for it now
        print("ok")
        """.replace("LIB", repr(str(lib))),
    )
    _run_child(fake_driver, child)


def test_cuda_graph_option_is_checked():
    ex = relax.build(relax.transform.BindParams("main", params())(mlp("tir", 4)), target="llvm")
    with pytest.raises(ValueError, match="CUDA graphs need a cuda device"):
        relax.VirtualMachine(ex, rm.cpu(), cuda_graph=True)
    with pytest.raises(TypeError, match="expected True or False"):
        relax.VirtualMachine(ex, rm.cpu(), cuda_graph="yes")


def test_cuda_graph_kept_only_where_it_pays(fake_driver, tmp_path):
    """One kernel saves less launch time than a replay costs: its graph is captured once,
    measured against `pays` and dropped; the key then runs as usual, never captured again."""
    from relaxmlir.runtime.cuda_graph import pays

    assert pays(278, 393_216) and pays(6, 40_960)  # BERT-base, the MLP
    assert not pays(1, 64 << 20) and not pays(1, 0)  # gelu over 2^24 floats; any one kernel
    lib = _square_library(tmp_path, (4, 5))
    child = _on_fake(
        lib,
        """
        vm = runtime.VirtualMachine(runtime.load_module(LIB), rm.cuda(0), cuda_graph=True)
        x = rm.nd.array(np.ones((4, 5), "float32"), rm.cuda(0))
        def count(name):
            return ctypes.c_int.in_dll(fake, name).value
        for expected_captures in [0, 1, 0, 0]:
            before = count("fake_captures"), count("fake_graph_launches"), count("fake_launches")
            vm["main"](x)
            after = count("fake_captures"), count("fake_graph_launches"), count("fake_launches")
            assert (after[0] - before[0], after[1] - before[1], after[2] - before[2]) == (
                expected_captures, 0, 1), (before, after)
        assert count("fake_graphs_destroyed") == 1
        print("ok")
        """.replace("LIB", repr(str(lib))),
    )
    _run_child(fake_driver, child)


def test_profile_times_every_launch_with_events(fake_driver, tmp_path):
    """vm.profile on cuda(0): an event pair around every launch of the profiled call (the
    stand-in driver's clock moves 0.25 ms per launch), kernels named as the host code names
    them, summed by name; a graph VM is profiled through a plain call; events are released."""
    lib = _mlp_library(tmp_path)
    child = _on_fake(
        lib,
        """
        dev = rm.cuda(0)
        x = rm.nd.array(np.ones((4, 784), "float32"), dev)
        before = ctypes.c_int.in_dll(fake, "fake_launches").value
        vm["main"](x)
        per_call = ctypes.c_int.in_dll(fake, "fake_launches").value - before
        for graphs in (False, True):
            v = runtime.VirtualMachine(runtime.load_module(LIB), dev, cuda_graph=graphs)
            for _ in range(3):
                v["main"](x)  # (a graph VM has captured and replays by now)
            report = v.profile("main", x)
            assert sum(r.calls for r in report.rows) == per_call, report
            assert all(abs(r.mean_us - 250.0) < 1e-3 for r in report.rows), report
            assert all(r.name.endswith("_kernel") for r in report.rows), report
            assert report.kernels_us == 250.0 * per_call
        assert ctypes.c_int.in_dll(fake, "fake_events_live").value == 0
        print("ok")
        """.replace("LIB", repr(str(lib))),
    )
    _run_child(fake_driver, child)
