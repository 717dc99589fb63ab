"""The runtime without the compiler: imports, process side effects, a VM over native code.

Each check runs in a fresh interpreter (subprocess), since what matters is what one `import`
does to a process. The native code of the VM test is a small C library compiled here with the
system C compiler, standing in for an exported model: it follows the calling convention of
compiled entry points (a packed `void(void**)` function over memref descriptors) and calls a
registered Python function through a bound pointer, so no MLIR is involved anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Makes `import mlir` (and its submodules) fail in the child process.
BLOCK_MLIR = """
import sys
class _NoMlir:
    def find_spec(self, name, path=None, target=None):
        if name == "mlir" or name.startswith("mlir."):
            raise ImportError("mlir is blocked in this test")
        return None
sys.meta_path.insert(0, _NoMlir())
"""


# Child code: an n x n matmul kernel split for 2 threads (`f`) and its inputs (`a`, `b`).
PARALLEL_MATMUL = """
import numpy as np
import relaxmlir as rm
from relaxmlir import relax, te

A = te.placeholder((n, n), name="A")
B = te.placeholder((n, n), name="B")
k = te.reduce_axis((0, n), name="k")
C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
ex = relax.build(te.create_prim_func([A, B, C]), rm.target.Target("llvm -num-cores=2"))
f = ex[ex.function_names()[0]]
rng = np.random.default_rng(0)
a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
"""


def run_python(code: str, cwd: Path = ROOT, env: dict | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_import_has_no_side_effects():
    out = run_python(
        """
        import os, sys
        before = dict(os.environ)
        import relaxmlir as rm
        maps = open("/proc/self/maps").read()
        assert "mlir" not in sys.modules, "import relaxmlir imported the MLIR bindings"
        assert "libiomp5" not in maps and "libomp" not in maps, "an OpenMP runtime was loaded"
        assert "KMP_BLOCKTIME" not in os.environ
        assert dict(os.environ) == before, "import relaxmlir changed the environment"
        rm.relax  # the compiler loads on first use
        assert "mlir" in sys.modules
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_runtime_objects_without_mlir():
    out = run_python(
        BLOCK_MLIR
        + """
import numpy as np
import relaxmlir as rm
from relaxmlir import runtime
from relaxmlir.target import Target
try:
    import mlir  # noqa: F401
    raise SystemExit("mlir should be blocked")
except ImportError:
    pass
dev = runtime.cpu()
a = runtime.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), dev)
assert a.shape == (2, 3) and a.numpy().sum() == 15
assert runtime.device("llvm", 0) == dev and rm.cuda(1).device_type == "cuda"
info = runtime.FunctionInfo("main", [runtime.TensorSpec("x", ("n", 3), "float32")],
                            [runtime.TensorSpec("out0", ("n", 3), "float32")])
assert "main(x" in info.signature
assert runtime.FunctionInfo.from_dict(info.to_dict()) == info
rm.register_func("test.noop", lambda *args: None)
assert rm.get_global_func("test.noop") is not None
assert rm.get_global_func("test.missing", allow_missing=True) is None
assert Target("llvm -mcpu=x86-64-v3").vector_bits == 256
print("ok")
"""
    )
    assert out.strip() == "ok"


C_MODEL = r"""
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } memref2;
/* packed functions take unranked memrefs: {rank, descriptor} */
typedef struct { int64_t rank; void *descriptor; } unranked;
/* the packed function "env.double", bound at load time (Executable.bind_packed) */
static void (*env_double)(unranked *, unranked *);
void bind_env_double(void *fn) { env_double = (void (*)(unranked *, unranked *))fn; }
/* main(x) -> x * 2 + 1: the packed wrapper of a C-interface entry point */
void main_packed(void **args) {
  memref2 *x = *(memref2 **)args[0], *out = *(memref2 **)args[1];
  unranked ux = {2, x}, uout = {2, out};
  env_double(&ux, &uout);
  int64_t n = out->sizes[0] * out->sizes[1];
  for (int64_t i = 0; i < n; i++) out->aligned[out->offset + i] += 1.0f;
}
"""

NATIVE_CODE = """
import ctypes
class SharedLibraryCode:
    '''NativeCode over a C library (what load_module will give for an exported model).'''
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
    def lookup(self, name):
        fn = getattr(self.lib, name + "_packed")
        fn.argtypes = [ctypes.c_void_p]
        fn.restype = None
        return fn
    def bind_packed(self, symbol, cfunc):
        getattr(self.lib, "bind_" + symbol)(ctypes.cast(cfunc, ctypes.c_void_p))
    def source(self):
        return "C test library"
    def export_library(self, path, executable):
        raise ValueError("already a library")
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")
def test_vm_runs_native_code_without_mlir(tmp_path):
    (tmp_path / "model.c").write_text(C_MODEL)
    lib = tmp_path / "model.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(tmp_path / "model.c")],
                   check=True)
    out = run_python(
        BLOCK_MLIR
        + NATIVE_CODE
        + f"""
import numpy as np
import relaxmlir as rm
from relaxmlir import runtime
from relaxmlir.target import Target

@rm.register_func("env.double")
def double(x, out):
    np.multiply(np.from_dlpack(x), 2, out=np.from_dlpack(out))

info = runtime.FunctionInfo("main", [runtime.TensorSpec("x", ("n", 3), "float32")],
                            [runtime.TensorSpec("out0", ("n", 3), "float32")])
packed = [runtime.PackedSpec("env_double", "env.double", [2, 2], ["float32", "float32"])]
ex = runtime.Executable(SharedLibraryCode({str(lib)!r}), {{"main": info}}, packed,
                        Target("llvm"))
vm = runtime.VirtualMachine(ex, rm.cpu())
x = np.random.default_rng(0).standard_normal((4, 3), dtype=np.float32)
got = vm["main"](x).numpy()
np.testing.assert_allclose(got, x * 2 + 1, rtol=1e-6, atol=1e-6)
for n in (1, 7):  # symbolic n: outputs sized from the argument
    x = np.ones((n, 3), np.float32)
    assert vm["main"](x).numpy().shape == (n, 3)
try:
    vm["main"](np.ones((2, 4), np.float32))
    raise SystemExit("a wrong shape was accepted")
except ValueError as exc:
    assert "expected signature main(x" in str(exc), exc
assert ex.as_text() == "C test library"
try:
    runtime.VirtualMachine(ex, rm.cpu(), memory_cfg="naive")
    raise SystemExit("an unknown memory_cfg was accepted")
except ValueError as exc:
    assert "supported: pooled" in str(exc)
print("ok")
"""
    )
    assert out.strip() == "ok"


def test_torch_and_relaxmlir_threads_in_one_process():
    """torch's OpenMP (libgomp) and ours (libiomp5, loaded privately) run parallel work at the
    same time in one process and both give right answers."""
    pytest.importorskip("torch")
    setup = "import threading\nimport torch\ntorch.set_num_threads(2)\nn = 384\n"
    out = run_python(
        setup
        + PARALLEL_MATMUL
        + textwrap.dedent(
            """
        errors = []

        def ours():
            for _ in range(20):
                c = np.zeros((n, n), np.float32)
                f(a, b, c)
                if not np.allclose(c, a @ b, rtol=1e-3, atol=1e-3):
                    errors.append("relaxmlir")

        def theirs():
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            for _ in range(20):
                if not torch.allclose(ta @ tb, torch.from_numpy(a @ b), rtol=1e-3, atol=1e-3):
                    errors.append("torch")

        threads = [threading.Thread(target=f) for f in (ours, theirs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        maps = open("/proc/self/maps").read()
        print("ok" if not errors else errors, "iomp5" in maps)
        """
        )
    )
    status, iomp = out.split()
    assert status == "ok", out
    from relaxmlir.runtime import libraries

    if libraries.parallel_runtime() == "openmp":
        assert iomp == "True", "the parallel kernel did not run on our OpenMP runtime"


def test_thread_count_at_run_time():
    """RELAXMLIR_NUM_THREADS sizes our OpenMP team when it loads; set_num_threads changes it at
    run time. A kernel split for 2 threads at build time gives the same numbers on 1."""
    from relaxmlir.runtime import libraries

    if libraries.parallel_runtime() != "openmp":
        pytest.skip("no OpenMP runtime installed")
    code = "n = 256\n" + PARALLEL_MATMUL + textwrap.dedent(
        """
        from relaxmlir.runtime import get_num_threads, set_num_threads

        teams = []
        for threads in (None, 1, 2):
            if threads:
                set_num_threads(threads)
            c = np.zeros((n, n), np.float32)
            f(a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
            teams.append(get_num_threads())
        print(*teams)
        """
    )
    env = dict(os.environ, RELAXMLIR_NUM_THREADS="1")
    env.pop("OMP_NUM_THREADS", None)
    out = run_python(code, env=env)
    assert out.split() == ["1", "1", "2"], out


def test_memref_copy_of_the_native_runtime():
    """`memrefCopy` (strided copies between layouts) comes from our runtime, not MLIR's wheel."""
    import ctypes

    import numpy as np

    from relaxmlir.runtime import libraries, memref_abi

    assert libraries.libraries_for(["memrefCopy"]) == ["relaxmlir"]
    copy = libraries.load("relaxmlir").memrefCopy
    rng = np.random.default_rng(0)
    for shape, src_view, dst_view in [
        ((), lambda a: a, lambda a: a),
        ((4, 6), lambda a: a[:, ::2], lambda a: a[:, :3]),
        ((3, 5, 7), lambda a: a.transpose(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
        ((2, 3, 4, 5), lambda a: a[:, 1:, ::2], lambda a: a[:, :2, :2]),
        ((3, 0, 2), lambda a: a, lambda a: a),
    ]:
        src_base = rng.standard_normal(shape).astype(np.float32)
        dst_base = np.zeros(shape, np.float32)
        src, dst = src_view(src_base), dst_view(dst_base)
        dst_before = dst_base.copy()
        descs = []
        for a in (src, dst):
            d = memref_abi.descriptor_class(a.ndim)()
            base = a.__array_interface__["data"][0]
            d.allocated = d.aligned = base
            d.offset = 0
            for i in range(a.ndim):
                d.sizes[i] = a.shape[i]
                d.strides[i] = a.strides[i] // 4
            descs.append((d, memref_abi.UnrankedDescriptor(a.ndim, ctypes.addressof(d))))
        copy(ctypes.c_int64(4), ctypes.byref(descs[0][1]), ctypes.byref(descs[1][1]))
        np.testing.assert_array_equal(dst, src)
        untouched = np.ones(shape, bool)
        dst_view(untouched)[...] = False
        np.testing.assert_array_equal(dst_base[untouched], dst_before[untouched])


def test_workspace_blocks_return_to_their_thread():
    """A cached workspace block goes back to the call site and thread that had it: two threads
    that free their same-size blocks in either order get their own back (a block that changed
    threads between calls made every store of a 2-thread matmul wait for another core)."""
    import ctypes
    import threading

    from relaxmlir.runtime import libraries

    lib = libraries.load("relaxmlir")
    alloc, free = lib._mlir_memref_to_llvm_aligned_alloc, lib._mlir_memref_to_llvm_free
    alloc.restype, alloc.argtypes = ctypes.c_void_p, [ctypes.c_uint64, ctypes.c_uint64]
    free.argtypes = [ctypes.c_void_p]
    size = (1 << 20) + 4096  # an unusual size: no other test's block can serve it
    libraries.release_workspace_cache()

    class Worker(threading.Thread):
        """A thread that stays alive (pthread_self stays its own) and runs what it is given."""

        def __init__(self):
            super().__init__(daemon=True)
            self.jobs, self.ready, self.done = [], threading.Semaphore(0), threading.Semaphore(0)
            self.start()

        def run(self):
            while True:
                self.ready.acquire()
                fn = self.jobs.pop()
                if fn is None:
                    return
                self.result = fn()
                self.done.release()

        def call(self, fn):
            self.jobs.append(fn)
            self.ready.release()
            self.done.acquire()
            return self.result

    a, b = Worker(), Worker()
    held = {w: w.call(lambda: alloc(64, size)) for w in (a, b)}
    first = dict(held)
    try:
        assert first[a] != first[b]
        for order in ((a, b), (b, a), (a, b)):
            for w in order:
                w.call(lambda p=held.pop(w): free(p))
            for w in reversed(order):  # the other thread asks first
                held[w] = w.call(lambda: alloc(64, size))
            assert held == first
    finally:
        for w in (a, b):
            if w in held:
                w.call(lambda p=held[w]: free(p))
            w.jobs.append(None)
            w.ready.release()
        libraries.release_workspace_cache()


def _workspace_functions():
    import ctypes

    from relaxmlir.runtime import libraries

    lib = libraries.load("relaxmlir")
    alloc, free = lib._mlir_memref_to_llvm_aligned_alloc, lib._mlir_memref_to_llvm_free
    alloc.restype, alloc.argtypes = ctypes.c_void_p, [ctypes.c_uint64, ctypes.c_uint64]
    free.argtypes = [ctypes.c_void_p]
    lib.relaxmlir_workspace_set_limit.argtypes = [ctypes.c_uint64]
    return alloc, free, lib.relaxmlir_workspace_set_limit


def test_workspace_cache_makes_room_for_the_latest_block():
    """At the byte limit, a freed block replaces the least recently cached ones instead of going
    back to malloc: a model run at other sizes first (BERT-base built for a symbolic sequence,
    after n = 1 and 32) then got fresh, page-faulting blocks at every call (1.4x slower at
    n = 256)."""
    from relaxmlir.runtime import libraries

    alloc, free, set_limit = _workspace_functions()
    libraries.release_workspace_cache()
    limit = libraries.workspace_cache_info()["limit"]
    # 80 blocks, all freed, under a limit that holds the last 40: the oldest go. The first is
    # too small for any other to serve (a block up to 1/8 larger may), and only the last can
    # serve the last's size.
    sizes = [1 << 16] + [(1 << 17) + 4096 * i for i in range(1, 80)]
    set_limit(sum(sizes[-40:]))
    try:
        blocks = [alloc(64, n) for n in sizes]
        for p in blocks:
            free(p)
        before = libraries.workspace_cache_info()
        assert before["bytes"] <= sum(sizes[-40:]), before
        again = alloc(64, sizes[-1])  # the latest freed: cached, so served again
        after = libraries.workspace_cache_info()
        free(again)
        assert after["hits"] == before["hits"] + 1, (before, after)
        oldest = alloc(64, sizes[0])  # evicted to make room: a miss
        assert libraries.workspace_cache_info()["misses"] == after["misses"] + 1
        free(oldest)
    finally:
        set_limit(limit)
        libraries.release_workspace_cache()


def test_workspace_cache_keeps_every_block_of_a_call_under_its_limit():
    """Hundreds of blocks freed (a BERT-base call allocates 387 of 64 KB or more) all come back
    from the cache: only the byte limit evicts. A fixed 64 entries missed 134 of BERT-base's
    blocks at every call, each a fresh block from malloc."""
    from relaxmlir.runtime import libraries

    alloc, free, _ = _workspace_functions()
    libraries.release_workspace_cache()
    sizes = [(1 << 16) + 4096 * (i % 16) for i in range(400)]  # whole size classes
    try:
        for p in [alloc(64, n) for n in sizes]:
            free(p)
        before = libraries.workspace_cache_info()
        assert before["bytes"] == sum(sizes), before
        blocks = [alloc(64, n) for n in sizes]
        after = libraries.workspace_cache_info()
        assert after["hits"] - before["hits"] == len(sizes), (before, after)
        assert after["misses"] == before["misses"] and after["bytes"] == 0, (before, after)
        for p in blocks:
            free(p)
    finally:
        libraries.release_workspace_cache()


def test_workspace_sizes_round_up_to_classes():
    """A block serves the sizes of its class (1/16 to 1/32 of their power of two): a buffer one
    row larger at each call (a decode step's KV cache) takes the block an earlier call gave
    back, instead of a fresh, page-faulting one at every step."""
    from relaxmlir.runtime import libraries

    alloc, free, _ = _workspace_functions()
    libraries.release_workspace_cache()
    row = 12 * 64 * 4  # one row more of a 12-head, 64-wide cache
    try:
        first = alloc(64, 1000 * row)
        free(first)
        before = libraries.workspace_cache_info()
        again = alloc(64, 1001 * row)  # 3.07 MB: the same 128 KB class
        after = libraries.workspace_cache_info()
        assert again == first and after["hits"] == before["hits"] + 1, (before, after)
        free(again)
        other = alloc(64, 1100 * row)  # 3.38 MB: a class of its own
        assert libraries.workspace_cache_info()["misses"] == after["misses"] + 1
        free(other)
    finally:
        libraries.release_workspace_cache()


def test_large_results_come_from_the_workspace_cache():
    """A result of 1 MB or more is a block of the workspace cache seen as a numpy array: when
    the caller drops it, the next call's result gets the same block back (also one row larger,
    the same size class; also 40 rows larger, within its headroom), while a result still held
    keeps its block and its values."""
    import gc

    import numpy as np

    import relaxmlir as rm
    from relaxmlir import relax
    from relaxmlir.runtime import libraries

    x = relax.Var("x", relax.TensorStructInfo(("n", 1024), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.add(x, relax.const(1.0)))
        bb.emit_func_output(gv)
    vm = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())
    rng = np.random.default_rng(0)

    def address(a):
        return a.view_numpy().__array_interface__["data"][0]

    def call(n):
        xs = rng.standard_normal((n, 1024), dtype=np.float32)
        out = vm["main"](xs)
        np.testing.assert_array_equal(out.numpy(), xs + 1)
        return out, xs

    first, _ = call(600)  # 2.4 MB
    where = address(first)
    assert first.view_numpy().base is not None  # a view of the block, not numpy's own memory
    del first
    gc.collect()
    before = libraries.workspace_cache_info()
    again, _ = call(601)
    assert address(again) == where
    assert libraries.workspace_cache_info()["hits"] == before["hits"] + 1
    held, held_in = again, again.numpy()
    other, _ = call(600)
    assert address(other) != where
    np.testing.assert_array_equal(held.view_numpy(), held_in)
    small, _ = call(100)  # 400 KB: a plain numpy array
    assert small.view_numpy().flags.owndata
    # 40 rows more than a freed result: past the cache's own class (1/16-1/32), within the
    # result's headroom (1/8-1/16 of its power of two), so a grown result still takes a block
    del held, again, other
    gc.collect()
    before = libraries.workspace_cache_info()
    call(640)
    after = libraries.workspace_cache_info()
    assert after["misses"] == before["misses"] and after["hits"] > before["hits"], (before, after)


def _symbolic_add(rows="n"):
    """`main(x, y) = x + y` over float32 (rows x 4), built for the host; its entry point."""
    import relaxmlir as rm
    from relaxmlir import relax

    x = relax.Var("x", relax.TensorStructInfo((rows, 4), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((rows, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit(relax.op.add(x, y)))
        bb.emit_func_output(gv)
    return relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())["main"]


@pytest.mark.parametrize("c_call", [True, False])
def test_symbolic_fast_path_binds_and_falls_back(c_call):
    """Calls with symbolic shapes bind symbols directly, in C (native/entry.c) or in Python;
    anything irregular gets the checked call's errors (numpy reference, exact for an add)."""
    import numpy as np

    import relaxmlir as rm

    f = _symbolic_add()
    assert f.symbolic_fast and f.c_call is not None
    if not c_call:
        f.c_call = None
    rng = np.random.default_rng(0)
    for n in (1, 7, 0):
        a, b = (rng.standard_normal((n, 4), dtype=np.float32) for _ in range(2))
        np.testing.assert_array_equal(f(a, rm.nd.array(b)).numpy(), a + b)
    a = rng.standard_normal((4, 6), dtype=np.float32)
    np.testing.assert_array_equal(f(a[:, :4], a[:, 2:]).numpy(), a[:, :4] + a[:, 2:])  # copied
    with pytest.raises(ValueError, match="expected signature main"):
        f(np.zeros((3, 4), np.float32), np.zeros((2, 4), np.float32))  # n bound twice
    with pytest.raises(ValueError, match="expected signature main"):
        f(np.zeros((3, 5), np.float32), np.zeros((3, 5), np.float32))  # static dim
    with pytest.raises(TypeError, match="dtype float64"):
        f(np.zeros((3, 4)), np.zeros((3, 4), np.float32))
    # result shapes are kept per parameter shapes (the last 8): sizes in turn, past the limit
    # (n = 3 evicted, then bound again); shapes that do not bind still get the checked error
    for n in [2, 3, 2, *range(4, 14), 3]:
        a, b = (rng.standard_normal((n, 4), dtype=np.float32) for _ in range(2))
        got = f(a, b).numpy()
        assert got.shape == (n, 4)
        np.testing.assert_array_equal(got, a + b)
    assert len(f.result_shapes) == (0 if c_call else 8)  # the Python call's cache
    with pytest.raises(ValueError, match="expected signature main"):
        f(np.zeros((3, 4), np.float32), np.zeros((13, 4), np.float32))


def test_c_call_takes_plain_arrays_and_hands_back_the_rest():
    """The C call (native/entry.c) serves numpy arrays and NDArrays; a torch tensor goes to the
    Python call, which keeps descriptors of its own, with a cache of the last shapes it wrote
    (a torch call of 5 rows, a numpy call of 3, a torch call of 5 again). Static and symbolic
    entry points, each result against numpy (exact for an add)."""
    import gc
    import weakref

    import numpy as np
    import torch

    import relaxmlir as rm

    rng = np.random.default_rng(1)
    for rows in ("n", 5):
        f = _symbolic_add(rows)
        assert f.c_call is not None
        sizes = [5, 3, 5, 3, 5] if rows == "n" else [5] * 5
        kinds = ["torch", "numpy", "torch", "nd", "torch"]
        for n, kind in zip(sizes, kinds):
            a, b = (rng.standard_normal((n, 4), dtype=np.float32) for _ in range(2))
            wrap = {"torch": torch.from_numpy, "numpy": lambda v: v, "nd": rm.nd.array}[kind]
            got = f(wrap(a), wrap(b))
            assert isinstance(got, rm.nd.NDArray) and got.shape == (n, 4)
            np.testing.assert_array_equal(got.numpy(), a + b)
        with pytest.raises(TypeError, match="takes 2 argument"):
            f(np.zeros((5, 4), np.float32))
        with pytest.raises(TypeError, match="dtype float64"):
            f(np.zeros((5, 4)), np.zeros((5, 4), np.float32))
        with pytest.raises(ValueError, match="expected signature main"):
            f(np.zeros((5, 3), np.float32), np.zeros((5, 3), np.float32))
    # The C call refers back to its entry point (the calls it hands back): a cycle the garbage
    # collector frees with the executable.
    gone = weakref.ref(f)
    del f
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_threads_call_one_entry_point_at_once(kind):
    """Four threads call one entry point (symbolic rows) 200 times each with sizes of their own:
    numpy arguments take the C call, whose descriptors are its own per call; torch tensors the
    Python call, one thread at a time. The code runs with the GIL released, so shared
    descriptors were rewritten by one thread while another's call ran. Exact: an add."""
    import threading

    import numpy as np
    import torch

    f = _symbolic_add()
    wrap = torch.from_numpy if kind == "torch" else (lambda v: v)
    wrong = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for i in range(200):
            n = 100 + (seed * 7 + i) % 40 * 97
            a, b = (rng.standard_normal((n, 4), dtype=np.float32) for _ in range(2))
            got = f(wrap(a), wrap(b)).numpy()
            if got.shape != (n, 4) or not np.array_equal(got, a + b):
                wrong.append((seed, i, n))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, wrong[:5]


def test_destination_passing_c_call_writes_the_given_outputs():
    """`ex["main"](a, out)` of a TE function (symbolic rows): numpy and NDArray outputs are
    written in place by the C call, a torch output by the Python call; the outputs bind symbols
    like the inputs, so a mismatch between them, a strided output or a wrong dtype still gets
    the checked call's error. Exact: a doubling."""
    import numpy as np
    import torch

    import relaxmlir as rm
    from relaxmlir import te

    A = te.placeholder(("n", 4), name="A")
    B = te.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="B")
    f = rm.build(te.create_prim_func([A, B]), target="llvm")["main"]
    assert f.c_call is not None
    rng = np.random.default_rng(2)
    for n, kind in [(3, "numpy"), (5, "torch"), (3, "nd"), (1, "numpy"), (5, "torch")]:
        a = rng.standard_normal((n, 4), dtype=np.float32)
        out = np.full((n, 4), np.nan, np.float32)
        given = {"numpy": out, "torch": torch.from_numpy(out), "nd": rm.nd.array(out)}[kind]
        assert f(a, given) is None
        got = given.numpy() if kind == "nd" else out
        np.testing.assert_array_equal(got, 2 * a)
    a = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="expected signature main"):
        f(a, np.zeros((2, 4), np.float32))  # n is 3 for the input, 2 for the output
    with pytest.raises(ValueError, match="must be C-contiguous"):
        f(a, np.zeros((4, 3), np.float32).T)
    with pytest.raises(TypeError, match="dtype float64"):
        f(a, np.zeros((3, 4)))


def test_entry_points_with_packed_callbacks_keep_the_python_call():
    """A build that calls a registered Python function checks its errors after the call: that
    stays in the Python call (no C call), and the error still surfaces."""
    import numpy as np

    import relaxmlir as rm
    from relaxmlir import relax

    def fail(x, out):
        raise ValueError("from the packed function")

    rm.register_func("test.entry_c_call.fail", fail, override=True)
    x = relax.Var("x", relax.TensorStructInfo((2, 2), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit(
                relax.call_dps_packed(
                    "test.entry_c_call.fail", x, relax.TensorStructInfo((2, 2), "float32")
                )
            )
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    f = relax.VirtualMachine(relax.build(bb.get(), "llvm"), rm.cpu())["main"]
    assert f.c_call is None
    with pytest.raises(RuntimeError, match="from the packed function"):
        f(np.zeros((2, 2), np.float32))
