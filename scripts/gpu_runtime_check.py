#!/usr/bin/env python
"""The CUDA runtime's contract with its callers, checked on a GPU machine (no MLIR there).

    python3 scripts/gpu_runtime_check.py --libs gpu_models

Uses the `mlp` library that `scripts/gpu_models_check.py export` writes (and its stored inputs and
torch eager outputs). Checks, one line each: NDArrays in and out; torch CUDA tensors in, results
handed to torch by DLPack without a copy and `rm.nd.from_dlpack` of a torch tensor without a copy;
a call under a torch side stream ordered with torch's own work; the errors for arguments on the
wrong device (numpy, CPU NDArray, torch CPU tensor), of the wrong shape, dtype or count, after
which the VM still runs; `time_evaluator` on cuda(0); a CUDA-graph VM's results equal to the
plain call's; `vm.profile` on cuda(0); an absent device is a clear error. Exit status 1 if any
check fails.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RTOL = ATOL = 1e-3  # the model tests' tolerances (f32)


def checks(libs: Path):
    import torch

    import relaxmlir as rm
    from relaxmlir import runtime

    data = np.load(libs / "mlp.npz")
    x_np, want = data["in0"], data["out0"]
    dev = rm.cuda(0)
    lib = runtime.load_module(str(libs / "mlp.so"))
    vm = runtime.VirtualMachine(lib, dev)

    def close(got):
        got = got.numpy() if hasattr(got, "numpy") and not isinstance(got, torch.Tensor) else got
        if isinstance(got, torch.Tensor):
            got = got.detach().cpu().numpy()
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)

    def ndarray_in_out():
        out = vm["main"](rm.nd.array(x_np, dev))
        assert out.device == dev, out.device
        close(out)

    def torch_in_dlpack_out():
        x = torch.from_numpy(x_np).cuda()
        out = vm["main"](x)
        back = torch.from_dlpack(out)
        assert back.is_cuda and back.data_ptr() == out._cuda.ptr, "torch.from_dlpack copied"
        close(back)

    def from_dlpack_zero_copy():
        x = torch.from_numpy(x_np).cuda()
        view = rm.nd.from_dlpack(x)
        assert view._cuda.ptr == x.data_ptr(), "rm.nd.from_dlpack copied"
        np.testing.assert_array_equal(view.numpy(), x_np)
        close(vm["main"](view))

    def side_stream():
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x = torch.from_numpy(x_np).pin_memory().cuda(non_blocking=True) * 1.0
            out = torch.from_dlpack(vm["main"](x)) + 0.0  # torch work after ours, same stream
        side.synchronize()
        close(out)

    def expect(exc_type, words, *args):
        try:
            vm["main"](*args)
        except exc_type as exc:
            assert all(w in str(exc) for w in words), f"{exc_type.__name__}: {exc}"
            print(f"    {exc_type.__name__}: {exc}")
            return
        raise AssertionError(f"no {exc_type.__name__} for {words}")

    def wrong_device():
        expect(TypeError, ["numpy array", "cuda"], x_np)
        expect(TypeError, ["cpu"], rm.nd.array(x_np, rm.cpu()))
        expect(TypeError, ["torch tensor", "cpu"], torch.from_numpy(x_np))
        ndarray_in_out()  # still runs

    def wrong_shape_dtype_count():
        expect(ValueError, ["shape"], rm.nd.array(np.zeros((3, 5), np.float32), dev))
        expect(TypeError, ["dtype"], rm.nd.array(x_np.astype(np.float64), dev))
        expect(TypeError, [], rm.nd.array(x_np, dev), rm.nd.array(x_np, dev))
        expect(TypeError, [])
        ndarray_in_out()

    def time_evaluator():
        res = vm.time_evaluator("main", dev, number=20, repeat=3)(rm.nd.array(x_np, dev))
        assert 0 < res.median < 1.0, res
        print(f"    {res}")

    def cuda_graph():
        graph = runtime.VirtualMachine(lib, dev, cuda_graph=True)
        x = rm.nd.array(x_np, dev)
        plain = vm["main"](x).numpy()
        outs = [graph["main"](x).numpy() for _ in range(4)]  # as usual, captured, replayed x2
        assert all(np.array_equal(o, plain) for o in outs), "graph results differ"
        cache = graph["main"]._graphs
        print(f"    graphs kept {len(cache.graphs)}, off {cache.off}")
        close(outs[-1])

    def profile():
        report = vm.profile("main", rm.nd.array(x_np, dev))
        print("    " + report.table().replace("\n", "\n    "))
        assert report.rows and all(r.name.endswith("_kernel") for r in report.rows), report
        assert 0 < report.kernels_us <= report.total_us, report

    def absent_device():
        count = torch.cuda.device_count()
        try:
            other = runtime.VirtualMachine(lib, rm.cuda(count))
            other["main"](rm.nd.array(x_np, rm.cuda(count)))
        except (runtime.CudaError, ValueError, TypeError) as exc:
            print(f"    {type(exc).__name__}: {exc}")
            return
        raise AssertionError(f"cuda({count}) of {count} devices raised nothing")

    return [
        ndarray_in_out,
        torch_in_dlpack_out,
        from_dlpack_zero_copy,
        side_stream,
        wrong_device,
        wrong_shape_dtype_count,
        time_evaluator,
        cuda_graph,
        profile,
        absent_device,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--libs", type=Path, default=ROOT / "gpu_models")
    args = parser.parse_args(argv)
    failed = 0
    todo = checks(args.libs)
    for check in todo:
        try:
            check()
            print(f"{check.__name__}: ok", flush=True)
        except Exception:  # noqa: BLE001  (reported against its check; the rest still run)
            failed += 1
            print(f"{check.__name__}: FAILED\n{traceback.format_exc(limit=4)}", flush=True)
    print(f"{len(todo) - failed} of {len(todo)} runtime checks pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
